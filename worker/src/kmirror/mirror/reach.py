"""A cluster that does not answer when the stream starts: waited for, one line per interval.

A source (or target) that is down, not resolvable or a network away does not stop the stream (a stop
would make the unit restart it every 10 s into the same flood of librdkafka lines): the stream waits
for it as it waits out a target outage while mirroring, with one line per stats interval naming the
cluster, its bootstrap servers, since when and what failed (librdkafka's last connection failure, e.g.
"Failed to resolve 'kafka-source-server1:6667'"); librdkafka's own repeated lines are rate-limited
(:class:`kmirror.kafkaio.Repeats`). Nothing is read or committed meanwhile, and the stream owns no
partitions, so ``kmirror_stream_unassigned_seconds`` grows and its alert fires. A refused login or ACL
still stops the stream at once (exit 2): waiting does not repair credentials.

The start-up steps after that wait (the sync topic, the cluster ids, the first topic placement, and the
placement of a consumer that joined again) ask the clusters again, and a link can drop between the wait
and them: each is retried the same way (:meth:`Reachability.retry`), as the periodic topic refresh
retries at its next interval, and a stop request ends the wait.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

from kmirror.authorization import authorization_error
from kmirror.errors import one_line
from kmirror.kafkaio import Repeats
from kmirror.mirror.authfail import Access
from kmirror.mirror.clients import Clients
from kmirror.mirror.spec import StreamSpec

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 10.0
"""How long one metadata request may take before the cluster counts as not answering (yet)."""
RETRY_S = 1.0
"""A request that failed at once is asked again this long after it was sent."""

T = TypeVar("T")


def transient(exc: KafkaException) -> bool:
    """A failure that may pass by itself: not fatal, not a refusal."""
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and not err.fatal() and authorization_error(exc) is None


class Reachability:
    """The wait for both clusters at a stream's start, and the retries of the start-up steps after it."""

    def __init__(
        self, spec: StreamSpec, clients: Clients, access: Access, stopping: Callable[[], bool]
    ) -> None:
        self.spec = spec
        self.clients = clients
        self.access = access
        self.stopping = stopping  # a stop was requested

    def wait(self, source_repeats: Repeats, target_repeats: Repeats) -> None:
        """Return once the source and then the target answer a metadata request (or a stop was asked)."""
        consumer = self.clients.the_consumer()
        producer = self.clients.producers[0]
        self._wait_for("source", lambda: consumer.list_topics(timeout=PROBE_TIMEOUT_S), source_repeats)
        self._wait_for("target", lambda: producer.list_topics(timeout=PROBE_TIMEOUT_S), target_repeats)

    def _wait_for(self, side: str, probe: Callable[[], object], repeats: Repeats) -> None:
        cluster = self.access.cluster(side)
        settings = self.spec.consumer if side == "source" else self.spec.producer

        def failing(exc: KafkaException, wall: float) -> None:
            log.warning(
                "%s: %s (bootstrap.servers %s) unreachable since %s: %s; retrying, nothing read or "
                "committed meanwhile",
                self.spec.label,
                cluster,
                settings.get("bootstrap.servers", "?"),
                _utc(wall),
                repeats.last_failure or one_line(exc.args[0].str()),
            )

        def back(seconds: float) -> None:
            log.warning("%s: %s answers again after %.0f s", self.spec.label, cluster, seconds)

        self._until(probe, failing, back)

    def retry(self, what: str, step: Callable[[], T]) -> T | None:
        """``step()``, asked again every second while it fails in a way that may pass (a link that dropped
        after :meth:`wait`), with one line per stats interval; None when a stop was requested first. The
        consumer is not subscribed during any step retried here (nothing it could return is lost)."""

        def failing(exc: KafkaException, wall: float) -> None:
            log.warning(
                "%s: %s failing since %s: %s; retrying, nothing read or committed meanwhile",
                self.spec.label,
                what,
                _utc(wall),
                one_line(exc.args[0].str()),
            )

        def back(seconds: float) -> None:
            log.warning("%s: %s done after %.0f s of retries", self.spec.label, what, seconds)

        return self._until(step, failing, back)

    def _until(
        self,
        step: Callable[[], T],
        failing: Callable[[KafkaException, float], None],
        back: Callable[[float], None],
    ) -> T | None:
        """``step()`` until it succeeds or a stop is requested (None); a failure that may pass is said by
        ``failing(exc, wall time of the first failed request)`` once per stats interval, the success after
        it by ``back(seconds)``; any other failure is raised."""
        since: float | None = None
        wall = 0.0
        next_line = 0.0
        while not self.stopping():
            asked = time.monotonic()
            try:
                result = step()
            except KafkaException as exc:
                self.access.raise_if_unauthenticated(serve=True)  # a refused login: exit 2, not a wait
                if not transient(exc):
                    raise
                if self.stopping():
                    return None
                now = time.monotonic()
                if since is None:
                    since, wall = asked, time.time() - (now - asked)
                if now >= next_line:
                    failing(exc, wall)
                    next_line = now + self.spec.stats_interval_ms / 1000
                time.sleep(max(0.0, RETRY_S - (time.monotonic() - asked)))  # a request that failed at once
                continue
            if since is not None:
                back(time.monotonic() - since)
            return result
        return None


def _utc(wall: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))
