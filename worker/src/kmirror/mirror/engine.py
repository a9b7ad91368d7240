"""The mirror engine: one stream = one consumer (a member of the mirror group) and its producer(s).

Guarantee: an offset is committed only after the target acknowledged every record before it.

* Records are read in batches; every record of a batch is handed to the producer before the next
  batch is read, so a consumer's *position* never runs ahead of what was produced.
* At each commit point (every ``commit_interval_ms``, on partition revocation, on stop) the producers
  are flushed (every record acknowledged by the target, or failed) and only then the positions are
  committed. A failed record stops the stream before that commit: nothing after the last commit is
  marked as done, so it is mirrored again on restart (at-least-once, never lost).
* Success reports are switched off in librdkafka (``delivery.report.only.error``): the per-record
  path is a read, an ``if`` and a ``produce`` call.

Back-pressure: the producer queue is bounded (``--queue.size`` records per stream, split between the
stream's producers); when it is full the stream serves delivery reports until there is room, so reading
slows to the target's pace and nothing is dropped.

Target outages: records never time out (``message.timeout.ms=0``, see :mod:`kmirror.config.safety`). When the
target acknowledges nothing for ``BLOCKED_AFTER_S`` while the stream waits for it (queue full, or a
commit point), the stream is *blocked*: its partitions are paused and the consumer is still polled, so
it stays in its group; it logs one line per stats interval and reports the blocked seconds
(``kmirror_target_blocked_seconds``). When the target answers again it resumes by itself. A stop
request during an outage gives the target ``shutdown_timeout_s`` more, then exits without committing
what the target has not acknowledged (it is mirrored again on restart).
"""

from __future__ import annotations

import copy
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from kmirror.config import admin_settings, client_conf
from kmirror.config.filters import TopicFilter
from kmirror.errors import KmirrorError, SendFailure
from kmirror.failover.groupsync import SyncWriter
from kmirror.health import rules as health
from kmirror.mirror import metrics, topics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamSpec:
    """Everything one stream needs; picklable, so a stream can run in its own process."""

    source: str
    index: int
    consumer: dict[str, str]
    producer: dict[str, str]
    topic_filter: TopicFilter
    batch_size: int = 500
    commit_interval_ms: int = 60_000
    abort_on_send_failure: bool = True
    num_producers: int = 1
    topic_refresh_ms: int = 30_000
    stats_interval_ms: int = 30_000
    shutdown_timeout_s: float = 30.0
    replication_factor: int = -1
    # Seconds without partitions, while the group has partitions to give, before the stream warns.
    unassigned_warn_s: float = 90.0
    # Sync points at commit points (kmirror run --groups; kmirror.failover.offsetsync).
    offset_syncs: bool = False

    @property
    def label(self) -> str:
        return f"{self.source}#{self.index}"


@dataclass
class Failure:
    """The first record the target refused."""

    error: KafkaError
    topic: str
    partition: int
    source_offset: int | None = None
    key: bytes | None = None
    timestamp: int | None = None
    value: bytes | None = None

    def describe(self, source: str) -> str:
        where = f"source {source} topic {self.topic} partition {self.partition}"
        where += f" offset {self.source_offset}" if self.source_offset is not None else ""
        return f"send failed for {where}: {self.error.str()}"


STATISTICS_INTERVAL_MS = 5000  # librdkafka statistics (bytes, queue depth, lag) for metrics and stats lines
REPORT_INTERVAL_S = 2.0  # how often a stream hands its snapshot to the metrics collector
# Waiting for the target this long without a single acknowledgement: the stream is blocked (reading
# paused, logged, kmirror_target_blocked_seconds > 0). Short waits of a busy target are back-pressure.
BLOCKED_AFTER_S = 5.0
KEEPALIVE_INTERVAL_S = 1.0  # while blocked, poll the consumer (partitions paused) to stay in the group


def queue_shares(records: int, producers: int) -> list[int]:
    """Split a stream's queue of ``records`` between its producers: the shares add up to ``records``,
    and no share is 0 (librdkafka's "no limit"), so a stream never has more producers than records.
    0 (no limit, as the operator's file may say) stays 0 for every producer."""
    if records <= 0:
        return [0] * producers
    n = max(1, min(producers, records))
    return [records // n + (1 if i < records % n else 0) for i in range(n)]


class Stream:
    def __init__(self, spec: StreamSpec, *, report: Callable[[metrics.Snapshot], None] | None = None) -> None:
        self.spec = spec
        self.snap = metrics.Snapshot(spec.source, spec.index)
        self._report = report
        self._producer_stats: dict[int, tuple[int, int]] = {}
        self._stop = False
        self._failure: Failure | None = None
        self._selected: dict[str, int] = {}
        self._hashed: set[str] = set()  # topics routed by key hash (target has fewer partitions)
        self._short: dict[str, tuple[int, int, str]] = {}  # those topics: (source, target partitions, why)
        self._config_sync: topics.ConfigSync | None = None
        self._committed: dict[tuple[str, int], int] = {}
        self._last_stats: metrics.Snapshot | None = None
        self.consumer: Consumer | None = None
        self.producers: list[Producer] = []
        # Target outages (slow path only): when the stream became blocked (monotonic and wall clock),
        # records read but never handed to a producer (first offset per partition: never committed past),
        # records the consumer returned while the stream was blocked (produced once there is room).
        self._blocked_since: float | None = None
        self._blocked_wall = 0.0
        self._unsent_from: dict[tuple[str, int], int] = {}
        self._held: list[Message] = []
        self._waiting = False
        self.unacknowledged = 0  # records the target had not acknowledged when the stream stopped
        self.clean = False  # stopped with everything read acknowledged and committed
        self._target_log = logging.getLogger("kmirror.librdkafka.producer")
        self._target_log.addFilter(_TargetNoise(self))
        # Group membership: the partitions this stream owns now, and since when it has owned none.
        self._assigned: set[tuple[str, int]] = set()
        self._unassigned_since = time.monotonic()
        self._stuck_checked = 0.0
        self._stuck_warned = False
        self.on_rebalanced: Callable[[], None] | None = None  # told after each assignment (the runner)
        self._offset_syncs: SyncWriter | None = None

    # ------------------------------------------------------------------ lifecycle

    def request_stop(self) -> None:
        self._stop = True

    def run(self) -> None:
        """Mirror until stopped; raise SendFailure (nothing committed past it) or another KmirrorError."""
        spec = self.spec
        consumer_conf: dict[str, Any] = client_conf(spec.consumer)
        consumer_conf["statistics.interval.ms"] = STATISTICS_INTERVAL_MS
        consumer_conf["stats_cb"] = lambda raw: metrics.consumer_statistics(raw, self.snap)
        self.consumer = Consumer(consumer_conf, logger=logging.getLogger("kmirror.librdkafka.consumer"))
        instance = spec.consumer.get("group.instance.id")
        log.info(
            "%s: member of group %s (%s)",
            spec.label,
            spec.consumer.get("group.id"),
            f"static, group.instance.id {instance}" if instance else "dynamic",
        )
        self.producers = []
        queue_size = int(spec.producer.get("queue.buffering.max.messages", 100_000))
        shares = queue_shares(queue_size, spec.num_producers)
        kbytes = spec.producer.get("queue.buffering.max.kbytes")
        for i, share in enumerate(shares):
            producer_conf: dict[str, Any] = client_conf(spec.producer)
            producer_conf["queue.buffering.max.messages"] = share
            if kbytes is not None:  # buffer.memory: per stream too (Java's producer holds it once)
                producer_conf["queue.buffering.max.kbytes"] = max(1, int(kbytes) // len(shares))
            producer_conf["on_delivery"] = self._delivery_failed
            producer_conf["statistics.interval.ms"] = STATISTICS_INTERVAL_MS
            producer_conf["stats_cb"] = self._producer_statistics(i)
            self.producers.append(Producer(producer_conf, logger=self._target_log))
        self._source_admin = AdminClient({**admin_settings(spec.consumer), "logger": _quiet})
        self._target_admin = AdminClient({**admin_settings(spec.producer), "logger": _quiet})
        if spec.offset_syncs:
            mirror = spec.consumer["group.id"]
            self._offset_syncs = SyncWriter(
                spec.label, mirror, spec.producer, spec.replication_factor, spec.consumer
            )
        clean = False
        try:
            self._refresh_topics()
            self._loop()
            clean = self._drain(spec.shutdown_timeout_s)
            if clean:
                self._commit_positions(None)
            elif self._failure is not None and self._failure.source_offset is None:
                self._failure.source_offset = self._locate(self._failure)
            else:
                self.unacknowledged = sum(len(p) for p in self.producers)
        finally:
            self.consumer.close()
            for p in self.producers:
                p.flush(0)
            if self._offset_syncs is not None:
                self._offset_syncs.close()
        self._raise_if_failed()
        self.clean = clean
        if not clean:
            # A stop during a target outage: exit 0 (the operator asked for it), commit nothing past
            # what the target acknowledged; the rest is mirrored again on restart.
            log.warning(
                "%s: stopped while the target was unreachable: %d records it has not acknowledged were not "
                "committed and will be mirrored again on restart",
                spec.label,
                self.unacknowledged,
            )

    # ------------------------------------------------------------------ hot path

    def _loop(self) -> None:
        spec = self.spec
        consumer = self.consumer
        assert consumer is not None
        consume = consumer.consume
        # A source partition always goes through the same producer (order); bound methods looked up once.
        produces = [producer.produce for producer in self.producers]
        n_producers = len(produces)
        hashed = self._hashed
        batch_size = spec.batch_size
        snap = self.snap
        commit_every = spec.commit_interval_ms / 1000
        refresh_every = spec.topic_refresh_ms / 1000
        stats_every = spec.stats_interval_ms / 1000
        now = time.monotonic()
        next_commit, next_refresh, next_stats = now + commit_every, now + refresh_every, now + stats_every
        next_report = now + REPORT_INTERVAL_S
        while not self._stop:
            batch = consume(batch_size, 0.2)
            for m in batch:
                if m.error() is not None:
                    self._message_error(m)
                    continue
                t = m.topic()
                p = m.partition()
                try:
                    produces[p % n_producers](
                        t,
                        m.value(),
                        m.key(),
                        -1 if t in hashed else p,
                        timestamp=max(m.timestamp()[1], 0),
                        headers=m.headers(),
                    )
                except BufferError:
                    if not self._wait_for_room(m):
                        self._hold_back(batch, m)
                        break
                except KafkaException as exc:
                    self._produce_refused(m, exc)
                    if self._failure is not None:
                        break
            if batch:
                snap.records_in += len(batch)
                newest = batch[-1].timestamp()[1]
                if newest > 0:
                    snap.latency.observe(max(0.0, time.time() - newest / 1000))
            if self._failure is not None:
                return
            now = time.monotonic()
            if now >= next_commit:
                self._commit_positions(None)
                next_commit = now + commit_every
            if now >= next_refresh:
                self._refresh_topics()
                next_refresh = now + refresh_every
            if now >= next_stats:
                self._log_stats()
                next_stats = now + stats_every
            if not self._assigned and now - self._unassigned_since >= spec.unassigned_warn_s:
                self._check_stuck(now)
            if self._report is not None and now >= next_report:
                self._report(self.snapshot())
                next_report = now + REPORT_INTERVAL_S
            for p_ in self.producers:
                p_.poll(0)

    def _produce_one(self, m: Message) -> None:
        t, p = m.topic(), m.partition()
        producer = self.producers[p % len(self.producers)]
        producer.produce(
            t,
            m.value(),
            m.key(),
            -1 if t in self._hashed else p,
            timestamp=max(m.timestamp()[1], 0),
            headers=m.headers(),
        )

    def _wait_for_room(self, m: Message) -> bool:
        """The producer queue is full: serve reports until the record fits (blocking back-pressure).
        False: it was not handed over (a send failure, or a stop request while the target is unreachable)."""

        def fits() -> bool:
            try:
                self._produce_one(m)
            except BufferError:
                return False
            except KafkaException as exc:
                self._produce_refused(m, exc)
            return True

        if not self._wait(fits) or self._failure is not None:
            return False
        return self._produce_held()

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

    def _queued(self) -> int:
        """Records handed to the producers and not yet acknowledged (or failed)."""
        return sum(len(p) for p in self.producers)

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

    def _produce_refused(self, m: Message, exc: KafkaException) -> None:
        """produce() refused a record outright (e.g. over message.max.bytes): a non-retriable failure."""
        err = exc.args[0]
        failure = Failure(err, m.topic(), m.partition(), m.offset(), m.key(), m.timestamp()[1])
        self._record_failure(failure)

    def _delivery_failed(self, err: KafkaError | None, msg: Message) -> None:
        """Called by librdkafka only for failed deliveries (delivery.report.only.error)."""
        if err is None:
            return
        topic, partition = msg.topic(), msg.partition()
        self._record_failure(Failure(err, topic, partition, None, msg.key(), msg.timestamp()[1], msg.value()))

    def _record_failure(self, failure: Failure) -> None:
        self.snap.send_errors += 1
        if not self.spec.abort_on_send_failure:
            log.error(
                "%s: %s; record skipped (--abort.on.send.failure=false): it is NOT on the target",
                self.spec.label,
                failure.describe(self.spec.source),
            )
            return
        if self._failure is None:
            self._failure = failure
            self._stop = True

    def _message_error(self, m: Message) -> None:
        err = m.error()
        if err.fatal():
            hint = ""
            if "group.instance.id" in err.str() or "fenced" in err.str().lower():
                c = self.spec.consumer
                hint = (
                    f" (another consumer of group {c.get('group.id')} uses group.instance.id "
                    f"{c.get('group.instance.id')}: give each kmirror instance its own "
                    "group.instance.id in its consumer file, or run it on its own host)"
                )
            raise KmirrorError(f"{self.spec.label}: fatal consumer error: {err.str()}{hint}")
        log.warning("%s: consumer: %s", self.spec.label, err.str())

    # ------------------------------------------------------------------ commit points

    def _drain(self, timeout: float | None, rebalance: bool = False) -> bool:
        """Wait until every produced record is acknowledged (or failed). False if time ran out, a record
        failed, or a stop was requested while the target is unreachable."""
        if self._waiting:  # a rebalance served while waiting for the target: no wait inside the wait
            return self._failure is None and self._queued() == 0
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._wait(lambda: self._queued() == 0, deadline, rebalance):
            if not self._held:
                return self._failure is None
            if not self._produce_held():
                return False
        return False

    def _raise_if_failed(self) -> None:
        f = self._failure
        if f is None:
            return
        raise SendFailure(
            f"{self.spec.label}: {f.describe(self.spec.source)}; nothing after the last commit "
            "was committed: fix the cause and restart, the mirror resumes from there"
        )

    def _commit_positions(self, partitions: list[TopicPartition] | None) -> None:
        """Flush, then commit the consumer's positions (everything before them is on the target)."""
        consumer = self.consumer
        assert consumer is not None
        if not self._drain(None, rebalance=partitions is not None):
            return
        self.snap.records_out = self.snap.records_in
        parts = consumer.assignment() if partitions is None else partitions
        if not parts:
            return
        positions = consumer.position(parts)
        for tp in positions:  # records read but never handed over (a stop during an outage)
            unsent = self._unsent_from.get((tp.topic, tp.partition))
            if unsent is not None and (tp.offset < 0 or unsent < tp.offset):
                tp.offset = unsent
        todo = [
            tp
            for tp in positions
            if tp.offset >= 0 and self._committed.get((tp.topic, tp.partition)) != tp.offset
        ]
        if not todo:
            return
        if self._offset_syncs is not None:
            # Flushed, nothing of these partitions at or past the positions produced: a valid sync point
            # whether or not the commit below succeeds, so it is written (and acknowledged) first.
            self._offset_syncs.commit_point(todo, self._committed, self._hashed)
        try:
            consumer.commit(offsets=todo, asynchronous=False)
        except KafkaException as exc:
            log.warning(
                "%s: commit failed (%s); the records will be committed at the next commit point or "
                "mirrored again",
                self.spec.label,
                exc.args[0].str(),
            )
            return
        for tp in todo:
            self._committed[(tp.topic, tp.partition)] = tp.offset
        self.snap.commits += 1

    # Rebalance callbacks. With cooperative-sticky (the default) they are incremental: on_assign gets the
    # partitions added, on_revoke and on_lost only those taken away (librdkafka then calls
    # incremental_assign/unassign itself); with an eager assignor (range) they get the whole set.
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("%s: assigned %s", self.spec.label, _show(partitions))
        self._assigned.update((tp.topic, tp.partition) for tp in partitions)
        self._place_grown(consumer, partitions)
        if self._assigned and self._stuck_warned:
            log.info("%s: has partitions again", self.spec.label)
        self._stuck_warned = False
        if self.on_rebalanced is not None:
            self.on_rebalanced()
        if self._offset_syncs is not None:  # none of these produced yet by this stream
            self._offset_syncs.assigned(consumer, partitions, self._hashed)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Still the owner: flush, commit the revoked partitions' positions (only those), let go."""
        log.info("%s: revoked %s", self.spec.label, _show(partitions))
        self._commit_positions(partitions)
        self._release(partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """No longer the owner (session expired, fenced): another member may own them already, so no
        commit; what was read since the last commit is mirrored again by the new owner."""
        log.warning(
            "%s: lost %s (left the group); their records since the last commit will be mirrored again "
            "by the new owner",
            self.spec.label,
            _show(partitions),
        )
        self._release(partitions)

    def _release(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._committed.pop((tp.topic, tp.partition), None)
            self._assigned.discard((tp.topic, tp.partition))
        if not self._assigned:
            self._unassigned_since = time.monotonic()

    def _check_stuck(self, now: float) -> None:
        """No partitions for unassigned_warn_s: ask the group whether it has partitions to give (once per
        unassigned_warn_s) and say so once, clearly, if it does."""
        if self._stuck_warned or now - self._stuck_checked < self.spec.unassigned_warn_s:
            return
        self._stuck_checked = now
        group = self.spec.consumer.get("group.id", "")
        total = sum(self._selected.values())
        try:
            futures = self._source_admin.describe_consumer_groups([group], request_timeout=10)
            described = futures[group].result()
        except Exception as exc:  # the check is advice: never let it stop the mirror
            log.debug("%s: could not describe group %s: %s", self.spec.label, group, exc)
            return
        owned = [
            [(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else [])]
            for m in described.members or []
        ]
        why = health.partitions_to_give(described.state.name, owned, total) if total else None
        if why is None:
            return
        self._stuck_warned = True
        log.warning(
            "%s: STUCK: no partitions for %.0f s while group %s has partitions to give (%s); a restart of "
            "every member of the group clears it (docs/deployment.md, Restarts)",
            self.spec.label,
            now - self._unassigned_since,
            group,
            why,
        )

    # ------------------------------------------------------------------ topics

    def _refresh_topics(self) -> None:
        """Pick up new, removed or grown source topics; create missing destination topics first, add the
        partitions a source topic gained, and keep destination topic configs equal to the source's.

        Cheap when nothing changed: one metadata request and one describe-configs request on the source;
        the target is asked only about what changed (or about topics still short of partitions)."""
        consumer = self.consumer
        assert consumer is not None
        md = consumer.list_topics(timeout=10)
        source = {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}
        selected = {t: n for t, n in source.items() if self.spec.topic_filter.matches(t)}
        if selected != self._selected or self._short:
            self._place_topics(selected)
        if self._config_sync is None:
            self._config_sync = topics.ConfigSync(self._source_admin, self._target_admin, self.spec.label)
        self._config_sync.run(self._selected)

    def _place_grown(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """The group gave this stream a partition its last topic refresh did not know (a sibling saw the
        source topic grow first): place that topic now, before any of its records is produced, so they
        go to the added target partition or by key hash, never to a partition the target lacks."""
        grown = {tp.topic for tp in partitions if tp.partition >= self._selected.get(tp.topic, 1 << 31)}
        if not grown:
            return
        md = consumer.list_topics(timeout=10)
        counts = {t: len(md.topics[t].partitions) for t in grown if t in md.topics}
        self._place_topics({**self._selected, **counts})

    def _place_topics(self, selected: dict[str, int]) -> None:
        """Destination topics for the selected source topics: created, grown, or routed by key hash."""
        consumer = self.consumer
        assert consumer is not None
        target = topics.ensure(
            self._source_admin, self._target_admin, selected, replication_factor=self.spec.replication_factor
        )
        grow = topics.partitions_to_add(selected, target)
        refused = topics.add_partitions(self._target_admin, grow) if grow else {}
        if len(refused) < len(grow):
            before, target = target, {**target, **topics.partition_counts(self._target_admin)}
            for t in sorted(set(grow) - set(refused)):
                # The producers' own metadata must know the new partitions before a record is sent to one
                # (librdkafka refuses a partition beyond the count it knows); any metadata reply updates it.
                for producer in self.producers:
                    producer.list_topics(t, timeout=10)
                log.info(
                    "%s: added partitions to destination topic %s: %d, was %d (the source's count)",
                    self.spec.label,
                    t,
                    target.get(t, grow[t]),
                    before[t],
                )
        selected = {t: n for t, n in selected.items() if t in target}
        short = {
            t: (n, target[t], refused.get(t, "the target still reports fewer partitions"))
            for t, n in selected.items()
            if target[t] < n
        }
        for t, (n, m, why) in sorted(short.items()):
            if self._short.get(t) != (n, m, why):
                log.warning(
                    "%s: target topic %s has %d partitions, source %d (adding partitions failed: %s): "
                    "records are placed by key hash (Java's murmur2), so order is kept per key, not per "
                    "source partition; metric kmirror_topic_partition_mismatch",
                    self.spec.label,
                    t,
                    m,
                    n,
                    why,
                )
        for t in sorted(set(self._short) - set(short)):
            if t in selected:
                log.info(
                    "%s: target topic %s has the source's %d partitions: partition numbers are kept again",
                    self.spec.label,
                    t,
                    selected[t],
                )
        self._short = short
        self._hashed.clear()
        self._hashed.update(short)
        self.snap.partition_mismatch = {t: n - m for t, (n, m, _) in short.items()}
        if set(selected) != set(self._selected):
            log.info(
                "%s: mirroring %d topics: %s", self.spec.label, len(selected), ", ".join(sorted(selected))
            )
            if selected:
                consumer.subscribe(
                    sorted(selected),
                    on_assign=self._on_assign,
                    on_revoke=self._on_revoke,
                    on_lost=self._on_lost,
                )
            else:
                consumer.unsubscribe()
        self._selected = selected

    # ------------------------------------------------------------------ reporting

    def _producer_statistics(self, index: int) -> Callable[[str], None]:
        def fold(raw: str) -> None:
            one = metrics.Snapshot(self.spec.source, self.spec.index)
            metrics.producer_statistics(raw, one)
            self._producer_stats[index] = (one.bytes_out, one.queue_depth)

        return fold

    def snapshot(self) -> metrics.Snapshot:
        """A copy of the counters as they are now (safe to hand to another thread or process)."""
        snap = self.snap
        snap.bytes_out = sum(b for b, _ in self._producer_stats.values())
        snap.queue_depth = sum(d for _, d in self._producer_stats.values())
        since = self._blocked_since
        snap.blocked_seconds = 0.0 if since is None else time.monotonic() - since
        snap.assigned_partitions = len(self._assigned)
        snap.unassigned_seconds = 0.0 if self._assigned else time.monotonic() - self._unassigned_since
        snap.taken = time.time()
        return copy.deepcopy(snap)

    def _log_stats(self) -> None:
        current = self.snapshot()
        log.info("%s", metrics.stats_line(self.spec.label, current, self._last_stats))
        self._last_stats = current

    def _locate(self, f: Failure) -> int | None:
        """Find the source offset of a record that failed asynchronously (error path only).

        It lies between the group's committed offset and the current position of its partition
        (identity routing) or of some partition of its topic (key-hash routing). The reader only
        assigns partitions: it never joins the group and never commits.
        """
        consumer = self.consumer
        if consumer is None:
            return None
        candidates = (
            [f.partition] if f.topic not in self._hashed else list(range(self._selected.get(f.topic, 0)))
        )
        conf = client_conf(self.spec.consumer)
        conf["enable.partition.eof"] = True
        reader = Consumer(conf, logger=_quiet)
        try:
            ends = {
                tp.partition: tp.offset
                for tp in consumer.position([TopicPartition(f.topic, p) for p in candidates])
            }
            for tp in reader.committed([TopicPartition(f.topic, p) for p in candidates], timeout=10):
                start = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                reader.assign([TopicPartition(f.topic, tp.partition, start)])
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    m = reader.poll(0.5)
                    if m is None:
                        continue
                    if m.error() is not None or m.offset() >= ends.get(tp.partition, 0):
                        break
                    # librdkafka does not keep the timestamp on a failed delivery report (-1).
                    same_time = f.timestamp is None or f.timestamp < 0 or m.timestamp()[1] == f.timestamp
                    if m.key() == f.key and m.value() == f.value and same_time:
                        f.partition = tp.partition
                        return m.offset()
        except KafkaException as exc:
            log.warning("%s: could not find the failed record's source offset: %s", self.spec.label, exc)
        finally:
            reader.close()
        return None


class _TargetNoise(logging.Filter):
    """librdkafka's producer logs a connection failure every few seconds while the target is away, and
    calls a timed-out ApiVersionRequest "probably due to broker version < 0.10". While the stream is
    blocked its own line ("target unreachable since T, N records waiting, reading paused") says it
    once per stats interval; before that, the misleading guess is cut from the line."""

    _CONNECTION = re.compile(r"\b(FAIL|REQTMOUT|APIVERSION|ERROR)\b|Timed out|timed out|Disconnected")
    _GUESS = re.compile(r":? ?probably due to broker version < 0\.10 \(see api\.version\.request [a-z]+\)")

    def __init__(self, stream: Stream) -> None:
        super().__init__()
        self.stream = stream

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if self.stream._blocked_since is not None and self._CONNECTION.search(text):
            return False
        if "broker version < 0.10" in text:
            record.msg, record.args = self._GUESS.sub("", text), ()
        return True


def _show(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions) or "nothing"


_quiet = logging.getLogger("kmirror.librdkafka.admin")
