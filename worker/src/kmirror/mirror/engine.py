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
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from kmirror.authorization import authorization_error
from kmirror.config import admin_settings, client_conf
from kmirror.errors import KmirrorError
from kmirror.failover.offsetsync import SYNC_TOPIC
from kmirror.failover.writer import SyncWriter
from kmirror.kafkaio import client_log
from kmirror.lineage.provenance import Headers, Stamp
from kmirror.mirror import metrics, topics
from kmirror.mirror.authfail import Authentication, quiet_repeated_logins
from kmirror.mirror.failures import SendFailures, TargetNoise, quiet
from kmirror.mirror.gaps import Gaps, cooperative
from kmirror.mirror.membership import GroupMembership, Rejoin, session_watch
from kmirror.mirror.outage import TargetWaits
from kmirror.mirror.placement import TopicPlacement
from kmirror.mirror.reach import Reachability
from kmirror.mirror.repeats import repeats
from kmirror.mirror.spec import (
    REPORT_INTERVAL_S,
    STATISTICS_INTERVAL_MS,
    Failure,
    StreamSpec,
    queue_shares,
)

__all__ = ["Failure", "Stream", "StreamSpec", "queue_shares"]

log = logging.getLogger(__name__)


class Stream(GroupMembership, TopicPlacement, SendFailures, TargetWaits, Reachability, Gaps, Authentication):
    def __init__(self, spec: StreamSpec, *, report: Callable[[metrics.Snapshot], None] | None = None) -> None:
        self.spec = spec
        self.snap = metrics.Snapshot(spec.source, spec.index)
        self._report = report
        self._producer_stats: dict[int, tuple[int, int]] = {}
        self._stop = False
        self._failure: Failure | None = None
        self._selected: dict[str, int] = {}
        self._hashed: set[str] = set()  # topics routed by key hash (target has fewer partitions)
        self._dest: dict[str, str] = {}  # source topic -> destination name (--topic.rename.format only)
        self._not_back: list[str] = []
        self._short: dict[str, tuple[int, int, str]] = {}  # those topics: (source, target partitions, why)
        self._config_sync: topics.ConfigSync | None = None
        self._committed: dict[tuple[str, int], int] = {}
        # The first stats line's rate is over the time since the stream started (an empty snapshot of then).
        self._last_stats: metrics.Snapshot | None = metrics.Snapshot(spec.source, spec.index)
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
        self._target_log = client_log("producer")
        self._target_repeats = repeats(self._target_log)  # first: it notes the failures the others drop
        self._target_log.addFilter(TargetNoise(self))
        quiet_repeated_logins(self._target_log)
        # Group membership: the partitions this stream owns now, and since when it has owned none.
        self._assigned: set[tuple[str, int]] = set()
        self._unassigned_since = time.monotonic()
        self._stuck_checked = 0.0
        self._stuck_warned = False
        self.on_rebalanced: Callable[[], None] | None = None  # told after each assignment (the runner)
        self._offset_syncs: SyncWriter | None = None
        # --groups: the records read of each partition since its run began (kmirror.failover.offsetsync).
        self._read_counts: dict[tuple[str, int], int] | None = {} if spec.offset_syncs else None
        # --provenance.header.enable: the origin header each copy carries (kmirror.lineage.provenance).
        self._stamp: Stamp | None = None

    # ------------------------------------------------------------------ lifecycle

    def request_stop(self) -> None:
        self._stop = True

    def run(self) -> None:  # noqa: PLR0912, PLR0915 - a stream's life in order: join, start, loop, finish
        """Mirror until stopped; raise SendFailure (nothing committed past it) or another KmirrorError."""
        spec = self.spec
        self._join()
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
            producer_conf["error_cb"] = self._auth_error_cb("target")
            self.producers.append(Producer(producer_conf, logger=self._target_log))
        self._source_admin = AdminClient({**admin_settings(spec.consumer), "logger": quiet})
        self._target_admin = AdminClient({**admin_settings(spec.producer), "logger": quiet})
        if spec.offset_syncs:
            mirror = spec.consumer["group.id"]
            try:
                self._offset_syncs = SyncWriter(
                    spec.label, mirror, spec.producer, spec.replication_factor, spec.consumer
                )
            except KafkaException as exc:
                # Made when missing: CREATE, else DESCRIBE (the metadata that finds it) on the sync topic.
                raise (
                    self._refusal(
                        exc,
                        "target",
                        "CREATE",
                        SYNC_TOPIC,
                        "kmirror run --groups writes its sync points there",
                    )
                    or exc
                ) from None
        clean = False
        try:
            try:
                self._wait_until_reachable()
                if spec.provenance and not self._stop:
                    self._stamp = self._provenance()
                if not self._stop:
                    self._refresh_topics()
                while not self._stop:
                    try:
                        self._loop()
                        break
                    except Rejoin as exc:
                        self._rejoin(exc)
            except (KafkaException, KmirrorError) as exc:
                self._raise_if_unauthenticated(serve=True)  # the cause, when a login was refused
                self._raise_if_refused(exc)
                raise
            clean = self._drain(spec.shutdown_timeout_s)
            if clean:
                self._commit_positions(None)
            elif self._failure is not None:
                # The records handed over before the failed one still go to the target (within the
                # shutdown timeout): a restart then copies as few of them again as it can.
                self._deliver_before_stop(spec.shutdown_timeout_s)
                if self._failure.source_offset is None:
                    self._failure.source_offset = self._locate(self._failure)
            else:
                self.unacknowledged = sum(len(p) for p in self.producers)
        finally:
            if self.consumer is not None:
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

    def _provenance(self) -> Stamp:
        """The origin stamp of this source and target, from their cluster ids."""
        ids = []
        for side, admin in (("source", self._source_admin), ("target", self._target_admin)):
            cluster_id = admin.list_topics(timeout=30).cluster_id
            if not cluster_id:
                raise KmirrorError(
                    f"{self.spec.label}: the {side} cluster reports no cluster id; "
                    "--provenance.header.enable needs one (Apache Kafka 0.10.1 or later)"
                )
            ids.append(cluster_id)
        if ids[0] == ids[1]:
            raise KmirrorError(
                f"{self.spec.label}: source and target are the same cluster ({ids[0]}): check "
                "bootstrap.servers in the consumer and producer files"
            )
        log.info("%s: provenance headers on: source cluster %s, target cluster %s", self.spec.label, *ids)
        return Stamp(ids[0], ids[1])

    def _join(self) -> None:
        """A consumer of the stream's group: at the start, and again after a fencing of its own doing."""
        spec = self.spec
        consumer_conf: dict[str, Any] = client_conf(spec.consumer)
        consumer_conf["statistics.interval.ms"] = STATISTICS_INTERVAL_MS
        consumer_conf["stats_cb"] = lambda raw: metrics.consumer_statistics(raw, self.snap)
        consumer_conf["error_cb"] = self._auth_error_cb("source")
        # Every offset reset comes to the stream, which knows whether it is a gap (kmirror.mirror.gaps).
        # It fetches a partition again with incremental_assign: cooperative-sticky only (the default).
        if cooperative(spec.consumer):
            consumer_conf["auto.offset.reset"] = "error"
        source_log = client_log("consumer")
        self._source_repeats = repeats(source_log)  # first: it notes the failures the others drop
        quiet_repeated_logins(source_log)
        self._session = session_watch(source_log)
        self._session.timed_out_at = None
        self.consumer = Consumer(consumer_conf, logger=source_log)
        instance = spec.consumer.get("group.instance.id")
        log.info(
            "%s: member of group %s (%s)",
            spec.label,
            spec.consumer.get("group.id"),
            f"static, group.instance.id {instance}" if instance else "dynamic",
        )
        if not cooperative(spec.consumer):
            log.warning(
                "%s: partition.assignment.strategy=%s (eager): gaps in the source (records purged before "
                "they were mirrored) are not detected, the consumer jumps to auto.offset.reset; remove the "
                "line to use cooperative-sticky (docs/runbooks/source-gap.md)",
                spec.label,
                spec.consumer.get("partition.assignment.strategy"),
            )

    def _rejoin(self, exc: Rejoin) -> None:
        """librdkafka fenced its own consumer (see :class:`kmirror.mirror.membership.SessionWatch`): the
        partitions are lost, so nothing is committed; the records already handed over are delivered
        (fewer copied twice), the consumer is closed, and a new one joins under the same
        group.instance.id and resumes from the group's committed offsets."""
        spec = self.spec
        log.warning(
            "%s; joining the group again with a new consumer: the records of its partitions since the last "
            "commit are mirrored again",
            exc,
        )
        self._deliver_before_stop(spec.shutdown_timeout_s)
        lost = [TopicPartition(t, p) for t, p in sorted(self._assigned)]
        self._release(lost)
        self._unsent_from.clear()
        self._held.clear()
        old, self.consumer = self.consumer, None
        assert old is not None
        try:
            old.close()
        except (KafkaException, RuntimeError) as close_error:  # it is fatal already: nothing to keep
            log.debug("%s: closing the fenced consumer: %s", spec.label, close_error)
        self._selected = {}  # the new consumer subscribes at its first refresh
        self._join()
        self._refresh_topics()

    def _deliver_before_stop(self, timeout: float) -> None:
        """Serve delivery reports until the producers are empty or ``timeout`` passes (error paths only:
        nothing is committed after this)."""
        deadline = time.monotonic() + timeout
        for p in self.producers:
            p.flush(max(0.0, deadline - time.monotonic()))

    # ------------------------------------------------------------------ hot path

    def _loop(self) -> None:  # noqa: PLR0912, PLR0915 - the per-record hot loop, one frame (make bench)
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
        counts = self._read_counts
        stamp = self._stamp
        dest = None if spec.rename.identity else self._dest
        headers: Headers | None
        while not self._stop:
            batch = consume(batch_size, 0.2)
            events = 0  # consumer events among the records (errors, offset resets): not records
            for m in batch:
                if m.error() is not None:
                    self._message_error(m)
                    events += 1
                    continue
                t = m.topic()
                p = m.partition()
                if stamp is None:
                    headers = m.headers()
                else:
                    headers = stamp(m, t, p)
                    if headers is None:  # its origin is the target: not copied back (counted)
                        if counts is not None:  # --groups: N counts copies (the pass below adds it back)
                            counts[(t, p)] = counts.get((t, p), 0) - 1
                        continue
                try:
                    produces[p % n_producers](
                        t if dest is None else dest[t],
                        m.value(),
                        m.key(),
                        -1 if t in hashed else p,
                        timestamp=max(m.timestamp()[1], 0),
                        headers=headers,
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
                snap.records_in += len(batch) - events
                if stamp is not None:
                    snap.skipped_origin = stamp.skipped
                if counts is not None:  # --groups only: one pass per batch, apart from the produce loop
                    for m in batch:
                        if m.error() is None:
                            key = (m.topic(), m.partition())
                            counts[key] = counts.get(key, 0) + 1
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
                self._refresh_topics_again()
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
            if self._auth_failure is not None or self._refused is not None:
                self._raise_if_unauthenticated()
            if self._offset_syncs is not None and self._offset_syncs.refused is not None:
                raise self._offset_syncs.refused.error(spec.label)

    def _produce_one(self, m: Message) -> None:
        t, p = m.topic(), m.partition()
        headers = m.headers() if self._stamp is None else self._stamp(m, t, p)
        if headers is None and self._stamp is not None:
            self.snap.skipped_origin = self._stamp.skipped
            if self._read_counts is not None:  # N counts copies (see _loop)
                self._read_counts[(t, p)] = self._read_counts.get((t, p), 0) - 1
            return  # its origin is the target: not copied back
        producer = self.producers[p % len(self.producers)]
        producer.produce(
            t if self.spec.rename.identity else self._dest[t],
            m.value(),
            m.key(),
            -1 if t in self._hashed else p,
            timestamp=max(m.timestamp()[1], 0),
            headers=headers,
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

    def _queued(self) -> int:
        """Records handed to the producers and not yet acknowledged (or failed)."""
        return sum(len(p) for p in self.producers)

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

    def _commit_positions(self, partitions: list[TopicPartition] | None) -> None:
        """Flush, then commit the consumer's positions (everything before them is on the target)."""
        consumer = self.consumer
        assert consumer is not None
        if not self._drain(None, rebalance=partitions is not None):
            return
        self.snap.records_out = self.snap.records_in - self.snap.skipped_origin
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
            counts = self._read_counts
            if counts is not None and self._unsent_from:  # read, never handed over: not before the position
                counts = {k: v for k, v in counts.items() if k not in self._unsent_from}
            self._offset_syncs.commit_point(todo, self._committed, self._hashed, counts=counts)
        if self._offset_syncs is not None and self._offset_syncs.refused is not None:
            raise self._offset_syncs.refused.error(self.spec.label)  # before the commit it would allow
        try:
            consumer.commit(offsets=todo, asynchronous=False)
        except KafkaException as exc:
            stop = self._consumer_refusal(exc.args[0], todo[0].topic)
            if stop is not None:
                raise stop from None
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

    def _refresh_topics_again(self) -> None:
        """A topic refresh while mirroring. A request that failed on the way (a broker that closed the
        connection, as Kafka does at the end of every SASL session, or one that did not answer in time)
        is logged and asked again at the next refresh; the records keep flowing meanwhile. A refusal for
        lack of an ACL and a fatal error stop the stream, as at its start."""
        try:
            self._refresh_topics()
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if not isinstance(err, KafkaError) or err.fatal() or authorization_error(exc) is not None:
                raise
            log.warning(
                "%s: topic refresh failed (%s); asked again at the next refresh", self.spec.label, err.str()
            )

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
