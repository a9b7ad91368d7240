"""SyncWriter: one sync point per committed partition, written to the target before the commit
(`kmirror run --groups`)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kmirror.authorization import Refusal, authorization_error, refused
from kmirror.config import admin_settings
from kmirror.failover.clusters import ensure_sync_topic, probe_conf, quiet
from kmirror.failover.offsetsync import (
    SYNC_TOPIC,
    Gap,
    SyncPoint,
    gap_record,
    sync_record,
    sync_slots,
)
from kmirror.kafkaio import own_repeats, true_ends

log = logging.getLogger(__name__)
own_repeats(log)  # a failing request repeats its warning at every try: one line a minute, counted


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
        self.settings = producer_settings
        # The first sync point request the target refused for lack of an ACL: the stream stops on it
        # before its next commit (kmirror.authorization).
        self.refused: Refusal | None = None
        self.source_admin = AdminClient({**admin_settings(consumer_settings), "logger": quiet})
        self.source_probe = Consumer(probe_conf(consumer_settings), logger=quiet)
        # Per partition, the source's end when this stream was assigned it: an earlier owner (one that
        # crashed) may have copied records up to there past the committed offset, so the target's end is
        # a valid sync point only once this stream's position has passed it.
        self.hold: dict[tuple[str, int], int] = {}
        # Per partition, this stream's run: drawn at each assignment (and restart after a gap); the points of
        # one run, with the records it read, translate exactly between them (kmirror.failover.offsetsync).
        self.runs: dict[tuple[str, int], str] = {}
        # Per topic, its id on the source when it was last assigned: a topic deleted and recreated under
        # the same name is another topic, whose points must not translate offsets of the old one.
        self.topic_ids: dict[str, str] = {}
        # The source cluster's id, recorded in every sync point: `kmirror failover` reads only the copies'
        # provenance headers naming it, also when the source is gone (read at the first assignment).
        self.source_cluster = ""
        self.admin = AdminClient({**admin_settings(producer_settings), "logger": quiet})
        self.replication_factor = replication_factor
        conf: dict[str, Any] = dict(admin_settings(producer_settings))
        conf.update({"acks": "all", "enable.idempotence": True, "linger.ms": 5, "on_delivery": self._failed})
        self.producer = Producer(conf, logger=quiet)
        self.probe = Consumer(probe_conf(producer_settings), logger=quiet)
        self.written = 0
        self.seconds = 0.0  # time spent at commit points, for the stats

    def ensure_topic(self) -> None:
        """Create the sync topic on the target when it is missing (the first request to the target: the
        writer's clients are made without one)."""
        ensure_sync_topic(self.admin, self.replication_factor)

    def _failed(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None and self.refused is None and authorization_error(err) is not None:
            self.refused = refused(
                err,
                "target cluster",
                self.settings,
                "WRITE",
                SYNC_TOPIC,
                note="sync points are written there",
            )
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
        for tp in parts:
            self.restarted(tp.topic, tp.partition)
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
        self._topic_ids(sorted({tp.topic for tp in parts}))
        if not self.source_cluster:
            try:
                md = self.source_admin.list_topics(topic=parts[0].topic, timeout=10)
                self.source_cluster = str(md.cluster_id or "")
            except KafkaException as exc:
                log.debug("%s: the source's cluster id unknown: %s", self.label, exc)
        if starts:
            self.commit_point(starts, {}, set(), assignment=True)

    def gap(self, gap: Gap) -> None:
        """Keep a gap on the target, where `kmirror failover` names it (errors are logged, never fatal)."""
        try:
            key, value = gap_record(self.mirror, gap)
            self.producer.produce(SYNC_TOPIC, value, key)
            if self.producer.flush(SYNC_FLUSH_TIMEOUT_S) > 0:
                log.warning("%s: the gap record is not acknowledged by %s yet", self.label, SYNC_TOPIC)
        except (KafkaException, BufferError) as exc:
            log.warning("%s: could not record the gap on the target: %s", self.label, exc)

    def _topic_ids(self, names: list[str]) -> None:
        """The source topics' ids now (a failure leaves them unknown: such points are never dropped as
        another topic's, which only costs precision)."""
        for name in names:
            self.topic_ids.pop(name, None)
        try:
            from confluent_kafka import TopicCollection  # confluent-kafka >= 2.3 only
        except ImportError:  # the older client a Kerberos host builds against Debian's librdkafka (2.0.2)
            return
        try:
            described = self.source_admin.describe_topics(TopicCollection(names), request_timeout=10)
            for name, fut in described.items():
                self.topic_ids[name] = str(fut.result().topic_id)
        except KafkaException as exc:
            log.debug("%s: topic ids of %s unknown: %s", self.label, names, exc)

    def restarted(self, topic: str, partition: int) -> None:
        """The stream reads the partition from a new place (assigned, or continued after a gap): a new
        run, whose record count starts at 0."""
        self.runs[(topic, partition)] = uuid.uuid4().hex[:12]

    def continued_after_gap(self, topic: str, partition: int) -> None:
        """A new run after a gap, and the topic's id read again: a topic deleted and recreated faster
        than the consumer's metadata noticed is never revoked and assigned again, so its new id is
        learnt here (otherwise its points would carry the old topic's id)."""
        self.restarted(topic, partition)
        self._topic_ids([topic])

    def commit_point(
        self,
        positions: Iterable[TopicPartition],
        previous: Mapping[tuple[str, int], int],
        skip: set[str],
        assignment: bool = False,
        counts: Mapping[tuple[str, int], int] | None = None,
    ) -> None:
        """Everything before `positions` is acknowledged by the target and nothing after is produced yet
        by this stream (nor, past the held end, by any earlier owner). ``counts``: the records the stream
        read of each partition in its run, all of them before the position (absent: unknown)."""
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
                run, count = self.runs.get((topic, partition), ""), -1
                if assignment:
                    count = 0
                elif counts is not None:
                    count = counts.get((topic, partition), -1)
                point = SyncPoint(
                    position,
                    ends[(topic, partition)],
                    now,
                    run=run,
                    count=count,
                    topic_id=self.topic_ids.get(topic, ""),
                    cluster=self.source_cluster,
                )
                # An assignment's point has a slot of its own per target: compaction keeps every one (one
                # per assignment before the partition's first commit), so the smallest is never lost.
                slots = (
                    [f"assigned.{point.target}"]
                    if assignment
                    else sync_slots(previous.get((topic, partition)), position)
                )
                for slot in slots:
                    record_key, record_value = sync_record(self.mirror, topic, partition, slot, point)
                    self.producer.produce(SYNC_TOPIC, record_value, record_key)
                    self.written += 1
            # Acknowledged before the caller commits or produces: a sync point must exist before the
            # records it speaks of (a crash right after the commit keeps it).
            if self.producer.flush(SYNC_FLUSH_TIMEOUT_S) > 0:
                log.warning("%s: sync points not acknowledged by %s yet", self.label, SYNC_TOPIC)
        except (KafkaException, BufferError) as exc:
            err = authorization_error(exc)
            if err is not None and self.refused is None:  # the end of a target partition: read there
                topic = min(t for t, _ in parts)
                self.refused = refused(
                    err, "target cluster", self.settings, "READ", topic, note="a sync point reads its end"
                )
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
