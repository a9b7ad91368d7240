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

Back-pressure: the producer queue is bounded (``--queue.size``); when it is full the stream serves
delivery reports until there is room, so reading slows to the target's pace and nothing is dropped.
"""

from __future__ import annotations

import copy
import logging
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

from kmirror import metrics, topics
from kmirror.config import admin_settings, client_conf
from kmirror.errors import KmirrorError, SendFailure
from kmirror.filters import TopicFilter
from kmirror.groupsync import SyncWriter

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
    offset_syncs: bool = False  # sync points at commit points (kmirror run --groups; kmirror.offsetsync)

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
        self._committed: dict[tuple[str, int], int] = {}
        self._last_stats: metrics.Snapshot | None = None
        self.consumer: Consumer | None = None
        self.producers: list[Producer] = []
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
        self.producers = []
        for i in range(spec.num_producers):
            producer_conf: dict[str, Any] = client_conf(spec.producer)
            producer_conf["on_delivery"] = self._delivery_failed
            producer_conf["statistics.interval.ms"] = STATISTICS_INTERVAL_MS
            producer_conf["stats_cb"] = self._producer_statistics(i)
            self.producers.append(
                Producer(producer_conf, logger=logging.getLogger("kmirror.librdkafka.producer"))
            )
        self._source_admin = AdminClient(admin_settings(spec.consumer), logger=_quiet)
        self._target_admin = AdminClient(admin_settings(spec.producer), logger=_quiet)
        if spec.offset_syncs:
            mirror = spec.consumer["group.id"]
            self._offset_syncs = SyncWriter(spec.label, mirror, spec.producer, spec.replication_factor)
        clean = False
        try:
            self._refresh_topics()
            self._loop()
            clean = self._drain(spec.shutdown_timeout_s)
            if clean:
                self._commit_positions(None)
            elif self._failure is not None and self._failure.source_offset is None:
                self._failure.source_offset = self._locate(self._failure)
        finally:
            self.consumer.close()
            for p in self.producers:
                p.flush(0)
            if self._offset_syncs is not None:
                self._offset_syncs.close()
        self._raise_if_failed()
        if not clean:
            raise KmirrorError(
                f"{spec.label}: stopped before the target acknowledged every record read; their offsets were "
                "not committed and they will be mirrored again on restart"
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
                    self._wait_for_room(m)
                    if self._failure is not None:
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

    def _wait_for_room(self, m: Message) -> None:
        """The producer queue is full: serve reports until the record fits (blocking back-pressure)."""
        while True:
            for p in self.producers:
                p.poll(0.05)
            if self._failure is not None:
                return
            try:
                self._produce_one(m)
                return
            except BufferError:
                continue
            except KafkaException as exc:
                self._produce_refused(m, exc)
                return

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
            raise KmirrorError(f"{self.spec.label}: fatal consumer error: {err.str()}")
        log.warning("%s: consumer: %s", self.spec.label, err.str())

    # ------------------------------------------------------------------ commit points

    def _drain(self, timeout: float | None) -> bool:
        """Wait until every produced record is acknowledged (or failed). False if time ran out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for p in self.producers:
            while p.flush(1.0) > 0:
                if deadline is not None and time.monotonic() >= deadline:
                    return False
        return self._failure is None

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
        if not self._drain(None):
            return
        self.snap.records_out = self.snap.records_in
        parts = consumer.assignment() if partitions is None else partitions
        if not parts:
            return
        todo = [
            tp
            for tp in consumer.position(parts)
            if tp.offset >= 0 and self._committed.get((tp.topic, tp.partition)) != tp.offset
        ]
        if not todo:
            return
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
        if self._offset_syncs is not None:  # flushed, committed, nothing of these partitions in flight
            self._offset_syncs.commit_point(todo, self._committed, self._hashed)
        for tp in todo:
            self._committed[(tp.topic, tp.partition)] = tp.offset
        self.snap.commits += 1

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("%s: assigned %s", self.spec.label, _show(partitions))
        if self._offset_syncs is not None:  # none of these produced yet: their start maps to the target end
            self._offset_syncs.assigned(consumer, partitions, self._hashed)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("%s: revoked %s", self.spec.label, _show(partitions))
        self._commit_positions(partitions)
        for tp in partitions:
            self._committed.pop((tp.topic, tp.partition), None)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.warning(
            "%s: lost %s (left the group); their records since the last commit will be mirrored again "
            "by the new owner",
            self.spec.label,
            _show(partitions),
        )
        for tp in partitions:
            self._committed.pop((tp.topic, tp.partition), None)

    # ------------------------------------------------------------------ topics

    def _refresh_topics(self) -> None:
        """Pick up new, removed or grown source topics; create missing destination topics first."""
        consumer = self.consumer
        assert consumer is not None
        md = consumer.list_topics(timeout=10)
        source = {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}
        selected = {t: n for t, n in source.items() if self.spec.topic_filter.matches(t)}
        if selected == self._selected:
            return
        target = topics.ensure(
            self._source_admin, self._target_admin, selected, replication_factor=self.spec.replication_factor
        )
        selected = {t: n for t, n in selected.items() if t in target}
        hashed = {t for t, n in selected.items() if target[t] < n}
        for t in sorted(hashed - self._hashed):
            log.warning(
                "%s: target topic %s has %d partitions, source %d: records are placed by key hash "
                "(Java's murmur2), so order is kept per key, not per source partition",
                self.spec.label,
                t,
                target[t],
                selected[t],
            )
        self._hashed.clear()
        self._hashed.update(hashed)
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


def _show(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions) or "nothing"


_quiet = logging.getLogger("kmirror.librdkafka.admin")
