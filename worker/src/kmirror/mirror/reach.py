"""A cluster that does not answer when the stream starts: waited for, one line per interval.

A source (or target) that is down, not resolvable or a network away does not stop the stream (a stop
would make the unit restart it every 10 s into the same flood of librdkafka lines): the stream waits
for it as it waits out a target outage while mirroring, with one line per stats interval naming the
cluster, its bootstrap servers, since when and what failed (librdkafka's last connection failure, e.g.
"Failed to resolve 'kafka-source-server1:6667'"); librdkafka's own repeated lines are rate-limited
(:class:`kmirror.kafkaio.Repeats`). Nothing is read or committed meanwhile, and the stream owns no
partitions, so ``kmirror_stream_unassigned_seconds`` grows and its alert fires. A refused login or ACL
still stops the stream at once (exit 2): waiting does not repair credentials.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

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


def transient(exc: KafkaException) -> bool:
    """A failure that may pass by itself: not fatal, not a refusal."""
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and not err.fatal() and authorization_error(exc) is None


class Reachability:
    """The wait for both clusters at a stream's start."""

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
        self._wait_for(
            "source",
            self.spec.consumer,
            lambda: consumer.list_topics(timeout=PROBE_TIMEOUT_S),
            source_repeats,
        )
        self._wait_for(
            "target",
            self.spec.producer,
            lambda: producer.list_topics(timeout=PROBE_TIMEOUT_S),
            target_repeats,
        )

    def _wait_for(
        self, side: str, settings: dict[str, str], probe: Callable[[], object], repeats: Repeats
    ) -> None:
        since: float | None = None
        next_line = 0.0
        while not self.stopping():
            asked = time.monotonic()
            try:
                probe()
            except KafkaException as exc:
                self.access.raise_if_unauthenticated(serve=True)  # a refused login: exit 2, not a wait
                if not transient(exc):
                    raise
                if self.stopping():
                    return
                now = time.monotonic()
                if since is None:
                    since, wall = now, time.time() - PROBE_TIMEOUT_S
                if now >= next_line:
                    log.warning(
                        "%s: %s (bootstrap.servers %s) unreachable since %s: %s; retrying, nothing read or "
                        "committed meanwhile",
                        self.spec.label,
                        self.access.cluster(side),
                        settings.get("bootstrap.servers", "?"),
                        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall)),
                        repeats.last_failure or one_line(exc.args[0].str()),
                    )
                    next_line = now + self.spec.stats_interval_ms / 1000
                time.sleep(max(0.0, 1.0 - (time.monotonic() - asked)))  # a probe that failed at once
                continue
            if since is not None:
                log.warning(
                    "%s: %s answers again after %.0f s",
                    self.spec.label,
                    self.access.cluster(side),
                    time.monotonic() - since + PROBE_TIMEOUT_S,
                )
            return
