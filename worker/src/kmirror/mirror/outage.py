"""A stream waiting for the target: room in the producer queue, a commit point's flush, and the blocked
state (reading paused, still a group member, one log line per stats interval) while the target is away, and
librdkafka's connection noise meanwhile."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from confluent_kafka import Message

from kmirror.mirror.clients import Clients
from kmirror.mirror.failures import SendFailures
from kmirror.mirror.spec import (
    ACK_POLL_S,
    BLOCKED_AFTER_S,
    KEEPALIVE_INTERVAL_S,
    REPORT_INTERVAL_S,
    StreamSpec,
)

log = logging.getLogger(__name__)


class TargetWaits:
    """Every wait of a stream for the target goes through :meth:`wait`; while the target is away the stream
    is blocked (since :attr:`blocked_since`). Also what was read and not handed over: records from
    :attr:`unsent_from` on are never committed past, :attr:`held` are produced once there is room."""

    def __init__(
        self,
        spec: StreamSpec,
        clients: Clients,
        failures: SendFailures,
        *,
        stopping: Callable[[], bool],
        report: Callable[[], None],
        consumer_error: Callable[[Message], None],
    ) -> None:
        self.spec = spec
        self.clients = clients
        self.failures = failures
        self.stopping = stopping  # a stop was requested
        self.report = report  # hand the stream's snapshot to the metrics (when it has a reporter)
        self.consumer_error = consumer_error  # an event the consumer returned instead of a record
        # When the stream became blocked (monotonic and wall clock), records read but never handed to a
        # producer (first offset per partition: never committed past), records the consumer returned while
        # the stream was blocked (produced once there is room).
        self.blocked_since: float | None = None
        self.blocked_wall = 0.0
        self.unsent_from: dict[tuple[str, int], int] = {}
        self.held: list[Message] = []
        self.waiting = False

    def hold_back(self, batch: list[Message], first: Message) -> None:
        """Records from ``first`` on were read but not handed over: never commit past them."""
        for m in batch[batch.index(first) :]:
            self.unsent_from.setdefault((m.topic(), m.partition()), m.offset())

    def forget(self) -> None:
        """The stream's partitions were lost: nothing read is theirs to hold any more."""
        self.unsent_from.clear()
        self.held.clear()

    # ------------------------------------------------------------------ target outages (slow path)

    def wait(self, done: Callable[[], bool], deadline: float | None = None, rebalance: bool = False) -> bool:
        """Serve delivery reports until ``done()`` (True), or a send failure, the deadline, or a stop
        request while blocked (False). After BLOCKED_AFTER_S without an acknowledgement the stream is
        blocked: partitions paused, consumer polled to keep its group membership, one line per stats
        interval, blocked seconds in the metrics; it resumes by itself when the target answers.
        ``rebalance``: called from a revocation, which cannot wait out an outage: False once blocked."""
        clients = self.clients
        producers = clients.producers
        # The out-queue also counts librdkafka's own events (a log line, an error) until they are served:
        # only a new low means the target acknowledged something.
        low = clients.queued()
        last_ack = time.monotonic()
        next_line = next_keepalive = next_report = 0.0
        self.waiting = True
        try:
            while not done():
                if deadline is None and self.blocked_since is not None and self.stopping():
                    return False  # a stop request during an outage: the caller commits nothing past this
                for p in producers:
                    p.poll(ACK_POLL_S)
                if self.failures.failure is not None:
                    return False
                now = time.monotonic()
                left = clients.queued()
                if left < low:
                    low = left
                    last_ack = now
                    if self.blocked_since is not None:
                        self._unblock(now)
                if deadline is not None and now >= deadline:
                    return False
                if now - last_ack < BLOCKED_AFTER_S:
                    continue
                if rebalance:
                    log.warning(
                        "%s: partitions revoked while the target acknowledges nothing: not committed, their "
                        "records since the last commit are mirrored again by the new owner",
                        self.spec.label,
                    )
                    return False
                if self.blocked_since is None:
                    self._block(last_ack)
                if now >= next_line:
                    log.warning(
                        "%s: target unreachable since %s, %d records waiting, reading paused",
                        self.spec.label,
                        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.blocked_wall)),
                        left,
                    )
                    next_line = now + self.spec.stats_interval_ms / 1000
                if now >= next_keepalive:
                    self._keep_membership()
                    next_keepalive = now + KEEPALIVE_INTERVAL_S
                if now >= next_report:
                    self.report()
                    next_report = now + REPORT_INTERVAL_S
        finally:
            self.waiting = False
        if self.blocked_since is not None:
            self._unblock(time.monotonic())
        return True

    def _block(self, since: float) -> None:
        self.blocked_since = since
        self.blocked_wall = time.time() - (time.monotonic() - since)
        consumer = self.clients.consumer
        if consumer is not None:
            consumer.pause(consumer.assignment())

    def _unblock(self, now: float) -> None:
        assert self.blocked_since is not None
        log.warning(
            "%s: target acknowledging again after %.0f s blocked; reading resumed",
            self.spec.label,
            now - self.blocked_since,
        )
        self.blocked_since = None
        consumer = self.clients.consumer
        if consumer is not None:
            consumer.resume(consumer.assignment())
        self.report()

    def _keep_membership(self) -> None:
        """Poll the consumer with every assigned partition paused: no records, but group membership
        (max.poll.interval.ms) and rebalances are served during an outage of any length."""
        consumer = self.clients.consumer
        if consumer is None:
            return
        consumer.pause(consumer.assignment())  # partitions assigned during the outage too
        for m in consumer.consume(self.spec.batch_size, 0):
            if m.error() is None:
                self.held.append(m)
            else:
                self.consumer_error(m)


class TargetNoise(logging.Filter):
    """librdkafka's producer logs a connection failure every few seconds while the target is away, and
    calls a timed-out ApiVersionRequest "probably due to broker version < 0.10". While the stream is
    blocked its own line ("target unreachable since T, N records waiting, reading paused") says it
    once per stats interval; before that, the misleading guess is cut from the line."""

    _CONNECTION = re.compile(r"\b(FAIL|REQTMOUT|APIVERSION|ERROR)\b|Timed out|timed out|Disconnected")
    _GUESS = re.compile(r":? ?probably due to broker version < 0\.10 \(see api\.version\.request [a-z]+\)")

    def __init__(self, waits: TargetWaits) -> None:
        super().__init__()
        self.waits = waits

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if self.waits.blocked_since is not None and self._CONNECTION.search(text):
            return False
        if "broker version < 0.10" in text:
            record.msg, record.args = self._GUESS.sub("", text), ()
        return True
