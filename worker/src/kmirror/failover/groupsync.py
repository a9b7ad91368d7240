"""Failover I/O: writing sync points at commit points, the group offset sync, reading sync data.

The logic (what a sync point means, how offsets translate) is in :mod:`kmirror.failover.offsetsync`;
this module talks to the clusters.

* :class:`SyncWriter`: used by a stream at each commit point (``kmirror run --groups``): measures the
  target end offsets of the partitions it just committed and writes one sync point per partition to
  :data:`~kmirror.failover.offsetsync.SYNC_TOPIC` on the target, through its own producer (the mirror's
  producers and its per-record path are untouched).
* :class:`GroupSync`: one thread per source cluster in the supervisor process of ``kmirror run``. Every
  ``--sync.group.offsets.interval.ms`` it reads the new sync points, the committed offsets of the source
  groups matching ``--groups``, and commits their translations for the same group id on the target
  when the group has no active members there, never moving it backwards; it writes a checkpoint per
  partition. Several workers of one mirror each run it: they compute the same safe translations.
* :func:`read_sync_data`: everything a mirror left on the target (``kmirror failover``, ``kmirror lag``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

try:  # confluent-kafka >= 2.3; the GSSAPI build for Kerberos hosts (2.0.2) has no list_offsets
    from confluent_kafka.admin import OffsetSpec
except ImportError:  # pragma: no cover - depends on the installed client
    OffsetSpec = None

from kmirror.config import admin_settings
from kmirror.config.filters import TopicFilter
from kmirror.failover.offsetsync import (
    SYNC_TOPIC,
    SYNC_TOPIC_CONFIG,
    Checkpoint,
    SyncData,
    SyncPoint,
    checkpoint_record,
    is_internal_group,
    plan_commits,
    sync_record,
    sync_slots,
)

log = logging.getLogger(__name__)
_quiet = logging.getLogger("kmirror.librdkafka.groupsync")

PROBE_GROUP = "__kmirror-probe"  # never commits; internal, so never synced
# Group states in which members are connected (confluent_kafka.ConsumerGroupState names).
LIVE_STATES = {"STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE"}


def ensure_sync_topic(admin: AdminClient, replication_factor: int = -1, timeout: float = 10.0) -> None:
    """Create the compacted sync topic on the target when it is missing."""
    md = admin.list_topics(timeout=timeout)
    if SYNC_TOPIC in md.topics and md.topics[SYNC_TOPIC].error is None:
        return
    futures = admin.create_topics(
        [NewTopic(SYNC_TOPIC, 1, replication_factor, config=dict(SYNC_TOPIC_CONFIG))], request_timeout=timeout
    )
    for f in futures.values():
        try:
            f.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def reader_conf(settings: Mapping[str, str]) -> dict[str, Any]:
    conf: dict[str, Any] = dict(admin_settings(settings))
    conf.update(
        {
            "group.id": PROBE_GROUP,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "latest",
            "isolation.level": "read_uncommitted",
        }
    )
    return conf


def probe_conf(settings: Mapping[str, str]) -> dict[str, Any]:
    """A reader assigned only while it probes: the broker answers at once (about 6 ms a probe)."""
    return {**reader_conf(settings), "fetch.wait.max.ms": 1}


def true_ends(
    admin: AdminClient, probe: Consumer, parts: list[tuple[str, int]], timeout: float = 10.0
) -> dict[tuple[str, int], int]:
    """End offsets of target partitions: the high watermark, or past the last record found by reading
    from high watermark - 1 to the end of the partition when that is further (brokers that report the
    high watermark as the last batch's base offset + 1). On Kafka this reads one record per partition."""
    if not parts:
        return {}
    if OffsetSpec is not None and hasattr(admin, "list_offsets"):
        futures = admin.list_offsets(
            {TopicPartition(t, p): OffsetSpec.latest() for t, p in parts}, request_timeout=timeout
        )
        ends = {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}
    else:
        ends = {
            (t, p): probe.get_watermark_offsets(TopicPartition(t, p), timeout=timeout, cached=False)[1]
            for t, p in parts
        }
    todo = {k for k, hw in ends.items() if hw > 0}
    if not todo:
        return ends
    probe.assign([TopicPartition(t, p, ends[(t, p)] - 1) for t, p in sorted(todo)])
    deadline = time.monotonic() + timeout
    try:
        while todo and time.monotonic() < deadline:
            for m in probe.consume(1000, 0.005):  # returns at the timeout when fewer records came
                key = (m.topic(), m.partition())
                err = m.error()
                if err is None:
                    ends[key] = max(ends[key], m.offset() + 1)
                elif err.code() == KafkaError._PARTITION_EOF:
                    todo.discard(key)
    finally:
        probe.unassign()
    return ends


SYNC_FLUSH_TIMEOUT_S = 10.0


class SyncWriter:
    """Writes a stream's sync points at its commit points (errors are logged, never stop the mirror)."""

    def __init__(
        self,
        label: str,
        mirror: str,
        producer_settings: Mapping[str, str],
        replication_factor: int,
        consumer_settings: Mapping[str, str],
    ) -> None:
        self.label = label
        self.mirror = mirror
        self.source_admin = AdminClient({**admin_settings(consumer_settings), "logger": _quiet})
        self.source_probe = Consumer(probe_conf(consumer_settings), logger=_quiet)
        # Per partition, the source's end when this stream was assigned it: an earlier owner (one that
        # crashed) may have copied records up to there past the committed offset, so the target's end is
        # a valid sync point only once this stream's position has passed it.
        self.hold: dict[tuple[str, int], int] = {}
        self.admin = AdminClient({**admin_settings(producer_settings), "logger": _quiet})
        ensure_sync_topic(self.admin, replication_factor)
        conf: dict[str, Any] = dict(admin_settings(producer_settings))
        conf.update({"acks": "all", "enable.idempotence": True, "linger.ms": 5, "on_delivery": self._failed})
        self.producer = Producer(conf, logger=_quiet)
        self.probe = Consumer(probe_conf(producer_settings), logger=_quiet)
        self.written = 0
        self.seconds = 0.0  # time spent at commit points, for the stats

    def _failed(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            log.warning("%s: could not write a sync point to %s: %s", self.label, SYNC_TOPIC, err.str())

    def assigned(self, consumer: Consumer, partitions: list[TopicPartition], skip: set[str]) -> None:
        """Partitions just assigned, none of them produced yet by this stream.

        Each is held (no sync points) until this stream's position reaches the source's end now: an
        earlier owner that crashed may have copied records past the committed offset, up to there, and a
        target end measured before those are copied again would place them behind the sync point.
        A partition the mirror group never committed also gets a point now, where reading starts -> the
        target's end, acknowledged before any record of it is produced: it gives groups behind the
        mirror's first sync point a translation. Assigned again after a crash before its first commit,
        it gets a second point at the same source offset with a larger target, and translation takes
        the smaller (:class:`kmirror.failover.offsetsync.SyncStore`)."""
        parts = [tp for tp in partitions if tp.topic not in skip]
        if not parts:
            return
        started = time.monotonic()
        try:
            ends = true_ends(self.source_admin, self.source_probe, [(tp.topic, tp.partition) for tp in parts])
            self.hold.update(ends)
            fresh = [tp for tp in consumer.committed(parts, timeout=10) if tp.offset < 0]
            starts = []
            for tp in fresh:
                low, _ = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
                starts.append(TopicPartition(tp.topic, tp.partition, low))
        except KafkaException as exc:
            for tp in parts:  # unknown source end: no sync points for these until the next assignment
                self.hold[(tp.topic, tp.partition)] = 1 << 62
            log.warning("%s: no sync points for the assigned partitions: %s", self.label, exc)
            return
        finally:
            self.seconds += time.monotonic() - started
        if starts:
            self.commit_point(starts, {}, set(), assignment=True)

    def commit_point(
        self,
        positions: Iterable[TopicPartition],
        previous: Mapping[tuple[str, int], int],
        skip: set[str],
        assignment: bool = False,
    ) -> None:
        """Everything before `positions` is acknowledged by the target and nothing after is produced yet
        by this stream (nor, past the held end, by any earlier owner)."""
        started = time.monotonic()
        parts = {(tp.topic, tp.partition): tp.offset for tp in positions if tp.topic not in skip}
        if not assignment:
            for key, position in list(parts.items()):
                held = self.hold.get(key)
                if held is None:
                    continue
                if position < held:
                    del parts[key]
                else:
                    del self.hold[key]
        if not parts:
            return
        try:
            ends = true_ends(self.admin, self.probe, sorted(parts))
            now = int(time.time() * 1000)
            for (topic, partition), position in parts.items():
                if (topic, partition) not in ends:
                    continue
                point = SyncPoint(position, ends[(topic, partition)], now)
                # An assignment's point has a slot of its own per target: compaction keeps every one (one
                # per assignment before the partition's first commit), so the smallest is never lost.
                slots = (
                    [f"assigned.{point.target}"]
                    if assignment
                    else sync_slots(previous.get((topic, partition)), position)
                )
                for slot in slots:
                    key, value = sync_record(self.mirror, topic, partition, slot, point)
                    self.producer.produce(SYNC_TOPIC, value, key)
                    self.written += 1
            # Acknowledged before the caller commits or produces: a sync point must exist before the
            # records it speaks of (a crash right after the commit keeps it).
            if self.producer.flush(SYNC_FLUSH_TIMEOUT_S) > 0:
                log.warning("%s: sync points not acknowledged by %s yet", self.label, SYNC_TOPIC)
        except (KafkaException, BufferError) as exc:
            log.warning("%s: no sync points at this commit point: %s", self.label, exc)
        self.seconds += time.monotonic() - started

    def close(self) -> None:
        self.producer.flush(5)
        self.probe.close()
        self.source_probe.close()
        log.info(
            "%s: offset syncs: %d sync points written, %.3f s spent measuring and writing them",
            self.label,
            self.written,
            self.seconds,
        )


# ------------------------------------------------------------------------------------------ reading


class SyncReader:
    """Follows the sync topic on the target; each :meth:`read` adds what is new to `data`."""

    def __init__(self, target_settings: Mapping[str, str], mirror: str) -> None:
        self.mirror = mirror
        self.data = SyncData.empty()
        self.consumer = Consumer(reader_conf(target_settings), logger=_quiet)
        self._assigned = False

    def read(self, timeout: float = 10.0) -> SyncData:
        if not self._assigned:
            md = self.consumer.list_topics(timeout=timeout)  # all: naming the topic may auto-create it
            topic = md.topics.get(SYNC_TOPIC)
            if topic is None or topic.error is not None:
                return self.data
            self.consumer.assign([TopicPartition(SYNC_TOPIC, p, OFFSET_BEGINNING) for p in topic.partitions])
            self._assigned = True
            self._next = dict.fromkeys(topic.partitions, 0)
        # End of partition is reported once per arrival at the end: only wait where there is more to read.
        todo = set()
        for p, position in self._next.items():
            _, high = self.consumer.get_watermark_offsets(
                TopicPartition(SYNC_TOPIC, p), timeout=timeout, cached=False
            )
            if position < high:
                todo.add(p)
        deadline = time.monotonic() + timeout
        while todo and time.monotonic() < deadline:
            for m in self.consumer.consume(1000, 0.1):
                err = m.error()
                if err is None:
                    self._next[m.partition()] = m.offset() + 1
                    self.data.add_record(self.mirror, m.key(), m.value())
                elif err.code() == KafkaError._PARTITION_EOF:
                    todo.discard(m.partition())
        return self.data

    def close(self) -> None:
        self.consumer.close()


def read_sync_data(target_settings: Mapping[str, str], mirror: str, timeout: float = 10.0) -> SyncData:
    reader = SyncReader(target_settings, mirror)
    try:
        return reader.read(timeout)
    finally:
        reader.close()


def committed_offsets(admin: AdminClient, group: str, timeout: float) -> dict[tuple[str, int], int]:
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=timeout)
    listed = fut[group].result().topic_partitions or []
    return {(tp.topic, tp.partition): tp.offset for tp in listed if tp.offset >= 0}


def group_activity(admin: AdminClient, group: str, timeout: float) -> tuple[str, int]:
    """(state name, number of members) of a group."""
    described = admin.describe_consumer_groups([group], request_timeout=timeout)[group].result()
    return described.state.name, len(described.members or [])


def is_active(state: str, members: int) -> bool:
    return members > 0 or state in LIVE_STATES


# ------------------------------------------------------------------------------------------ group sync


@dataclass
class GroupStatus:
    """The latest checkpoint of one group, for the metrics."""

    last_checkpoint: float = 0.0  # time.time() of the last checkpoint written
    translated_lag: int = 0  # records on the target after the translated offsets
    rereads: int = 0  # records before the group's source offsets a failover would read again
    partitions: int = 0
    untranslated: int = 0  # partitions with no sync point at or before the group's offset yet


@dataclass
class GroupSync:
    """The group offset sync of one source cluster (a thread in the supervisor process)."""

    source: str
    mirror: str  # the mirror's consumer group id (names its sync data)
    source_settings: Mapping[str, str]
    target_settings: Mapping[str, str]
    groups: TopicFilter
    topics: TopicFilter
    interval_ms: int = 60_000
    timeout: float = 10.0
    status: dict[str, GroupStatus] = field(default_factory=dict)

    def run(self, stop: threading.Event) -> None:
        self._source = AdminClient({**admin_settings(self.source_settings), "logger": _quiet})
        self._target = AdminClient({**admin_settings(self.target_settings), "logger": _quiet})
        conf: dict[str, Any] = dict(admin_settings(self.target_settings))
        conf.update({"acks": "all", "enable.idempotence": True, "linger.ms": 5})
        self._producer = Producer(conf, logger=_quiet)
        self._reader = SyncReader(self.target_settings, self.mirror)
        self._probe = Consumer(probe_conf(self.target_settings), logger=_quiet)
        log.info(
            "%s: syncing the offsets of groups %s to the target every %d ms",
            self.source,
            self.groups.include,
            self.interval_ms,
        )
        try:
            while not stop.is_set():
                try:
                    self.step()
                except Exception as exc:  # the sync must never stop the mirror; it retries next interval
                    log.warning("%s: group offset sync: %s", self.source, _one_line(exc))
                stop.wait(self.interval_ms / 1000)
        finally:
            self._producer.flush(5)
            self._reader.close()
            self._probe.close()

    def step(self) -> None:
        data = self._reader.read(self.timeout)
        listed = self._source.list_consumer_groups(request_timeout=self.timeout).result()
        groups = sorted(
            g.group_id
            for g in listed.valid
            if self.groups.matches(g.group_id) and not is_internal_group(g.group_id, [self.mirror])
        )
        for group in groups:
            try:
                self._sync_group(group, data)
            except KafkaException as exc:
                log.warning("%s: group %s: %s", self.source, group, _one_line(exc))
        self._producer.flush(self.timeout)

    def _sync_group(self, group: str, data: SyncData) -> None:
        source = {
            k: v
            for k, v in committed_offsets(self._source, group, self.timeout).items()
            if self.topics.matches(k[0])
        }
        if not source:
            return
        target = committed_offsets(self._target, group, self.timeout)
        commits, untranslated = plan_commits(data.store, source, target)
        state, members = group_activity(self._target, group, self.timeout)
        moving = [c for c in commits if c.moves]
        if moving and not is_active(state, members):
            offsets = [TopicPartition(c.topic, c.partition, c.translation.target) for c in moving]
            fut = self._target.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, offsets)], request_timeout=self.timeout
            )
            fut[group].result()
            log.debug(
                "%s: group %s: committed %d translated offsets on the target",
                self.source,
                group,
                len(offsets),
            )
        elif moving:
            log.info(
                "%s: group %s has active members on the target (%s): its offsets there are left alone",
                self.source,
                group,
                state,
            )
        now = time.time()
        for c in commits:
            cp = Checkpoint(
                group,
                c.topic,
                c.partition,
                c.translation.source,
                c.translation.target,
                c.translation.sync_source,
                int(now * 1000),
            )
            key, value = checkpoint_record(self.mirror, cp)
            self._producer.produce(SYNC_TOPIC, value, key)
            data.checkpoints[(group, c.topic, c.partition)] = cp
        self._producer.poll(0)
        ends = true_ends(self._target, self._probe, [(c.topic, c.partition) for c in commits], self.timeout)
        self.status[group] = GroupStatus(
            last_checkpoint=now,
            translated_lag=sum(
                max(0, ends.get((c.topic, c.partition), 0) - max(c.translation.target, c.current))
                for c in commits
            ),
            rereads=sum(c.translation.rereads for c in commits),
            partitions=len(commits),
            untranslated=len(untranslated),
        )


def metric_families(syncs: Iterable[GroupSync]) -> Iterator[object]:
    """Prometheus gauges of every group offset sync (registered with the run's metrics collector)."""
    from prometheus_client.core import GaugeMetricFamily

    labels = ["source", "group"]
    age = GaugeMetricFamily(
        "kmirror_checkpoint_age_seconds",
        "Seconds since the group's offsets were last translated",
        labels=labels,
    )
    lag = GaugeMetricFamily(
        "kmirror_translated_lag",
        "Records on the target after the group's translated offsets (what a failed-over group would read)",
        labels=labels,
    )
    rereads = GaugeMetricFamily(
        "kmirror_translation_rereads",
        "Records before the group's source offsets that a failover now would read again",
        labels=labels,
    )
    untranslated = GaugeMetricFamily(
        "kmirror_untranslated_partitions",
        "Partitions of the group with no sync point at or before its offset yet",
        labels=labels,
    )
    now = time.time()
    for s in syncs:
        for group, st in sorted(s.status.items()):
            age.add_metric([s.source, group], max(0.0, now - st.last_checkpoint))
            lag.add_metric([s.source, group], st.translated_lag)
            rereads.add_metric([s.source, group], st.rereads)
            untranslated.add_metric([s.source, group], st.untranslated)
    yield from (age, lag, rereads, untranslated)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].str()
    return " ".join(str(exc).split())
