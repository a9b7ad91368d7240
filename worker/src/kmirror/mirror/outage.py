"""A stream waiting for the target: room in the producer queue, a commit point's flush, and the blocked
state (reading paused, still a group member, one log line per stats interval) while the target is away."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import (
    Message,
)

from kmirror.mirror.spec import BLOCKED_AFTER_S, KEEPALIVE_INTERVAL_S, REPORT_INTERVAL_S
from kmirror.mirror.state import StreamState

log = logging.getLogger("kmirror.mirror.engine")


class TargetWaits(StreamState):
    """Mixin of :class:`kmirror.mirror.engine.Stream`: every wait for the target goes through `_wait`."""

    def _produce_held(self) -> bool:
        """Hand over the records the consumer returned while the stream was blocked (rare: a partition
        assigned during an outage whose first fetch raced its pause)."""
        while self._held:
            m = self._held.pop(0)
            if not self._wait_for_room(m):
                self._hold_back([m, *self._held], m)
                self._held.clear()
                return False
        return True

    def _hold_back(self, batch: list[Message], first: Message) -> None:
        """Records from ``first`` on were read but not handed over: never commit past them."""
        for m in batch[batch.index(first) :]:
            self._unsent_from.setdefault((m.topic(), m.partition()), m.offset())

    # ------------------------------------------------------------------ target outages (slow path)

    def _wait(self, done: Callable[[], bool], deadline: float | None = None, rebalance: bool = False) -> bool:
        """Serve delivery reports until ``done()`` (True), or a send failure, the deadline, or a stop
        request while blocked (False). After BLOCKED_AFTER_S without an acknowledgement the stream is
        blocked: partitions paused, consumer polled to keep its group membership, one line per stats
        interval, blocked seconds in the metrics; it resumes by itself when the target answers.
        ``rebalance``: called from a revocation, which cannot wait out an outage: False once blocked."""
        producers = self.producers
        # The out-queue also counts librdkafka's own events (a log line, an error) until they are served:
        # only a new low means the target acknowledged something.
        low = self._queued()
        last_ack = time.monotonic()
        next_line = next_keepalive = next_report = 0.0
        self._waiting = True
        try:
            while not done():
                if self._stop and deadline is None and self._blocked_since is not None:
                    return False  # a stop request during an outage: the caller commits nothing past this
                for p in producers:
                    p.poll(0.05)
                if self._failure is not None:
                    return False
                now = time.monotonic()
                left = self._queued()
                if left < low:
                    low = left
                    last_ack = now
                    if self._blocked_since is not None:
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
                if self._blocked_since is None:
                    self._block(last_ack)
                if now >= next_line:
                    log.warning(
                        "%s: target unreachable since %s, %d records waiting, reading paused",
                        self.spec.label,
                        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._blocked_wall)),
                        left,
                    )
                    next_line = now + self.spec.stats_interval_ms / 1000
                if now >= next_keepalive:
                    self._keep_membership()
                    next_keepalive = now + KEEPALIVE_INTERVAL_S
                if self._report is not None and now >= next_report:
                    self._report(self.snapshot())
                    next_report = now + REPORT_INTERVAL_S
        finally:
            self._waiting = False
        if self._blocked_since is not None:
            self._unblock(time.monotonic())
        return True

    def _block(self, since: float) -> None:
        self._blocked_since = since
        self._blocked_wall = time.time() - (time.monotonic() - since)
        consumer = self.consumer
        if consumer is not None:
            consumer.pause(consumer.assignment())

    def _unblock(self, now: float) -> None:
        assert self._blocked_since is not None
        log.warning(
            "%s: target acknowledging again after %.0f s blocked; reading resumed",
            self.spec.label,
            now - self._blocked_since,
        )
        self._blocked_since = None
        consumer = self.consumer
        if consumer is not None:
            consumer.resume(consumer.assignment())
        if self._report is not None:
            self._report(self.snapshot())

    def _keep_membership(self) -> None:
        """Poll the consumer with every assigned partition paused: no records, but group membership
        (max.poll.interval.ms) and rebalances are served during an outage of any length."""
        consumer = self.consumer
        if consumer is None:
            return
        consumer.pause(consumer.assignment())  # partitions assigned during the outage too
        for m in consumer.consume(self.spec.batch_size, 0):
            if m.error() is None:
                self._held.append(m)
            else:
                self._message_error(m)
