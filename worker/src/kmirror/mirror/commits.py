"""A stream's commit points: the offsets it committed per partition, and with ``--groups`` the records it
read of each partition and the sync point written before each commit (:mod:`kmirror.failover.offsetsync`).

Guarantee: :meth:`CommitPoints.commit` runs only after the stream's producers were flushed (every record
before the consumer's positions acknowledged by the target), so a committed offset never runs ahead of the
target. A sync point is written, and acknowledged, before the commit it describes.
"""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kmirror.authorization import AuthorizationFailed
from kmirror.failover.offsetsync import SYNC_TOPIC, Gap
from kmirror.failover.writer import SyncWriter
from kmirror.mirror.authfail import Access
from kmirror.mirror.spec import StreamSpec

log = logging.getLogger(__name__)

Partition = tuple[str, int]


class CommitPoints:
    """What a stream committed, and (``--groups``) what it read per partition and its sync point writer."""

    def __init__(self, spec: StreamSpec, access: Access) -> None:
        self.spec = spec
        self.access = access
        self.committed: dict[Partition, int] = {}
        # --groups: the records read of each partition since its run began (kmirror.failover.offsetsync);
        # the engine's loop counts into this dict.
        self.read_counts: dict[Partition, int] | None = {} if spec.offset_syncs else None
        self.syncs: SyncWriter | None = None

    def open(self) -> None:
        """Make the sync point writer (``--groups``) without asking either cluster yet."""
        if self.spec.offset_syncs:
            spec = self.spec
            self.syncs = SyncWriter(
                spec.label, spec.consumer["group.id"], spec.producer, spec.replication_factor, spec.consumer
            )

    def make_sync_topic(self) -> None:
        """Make the sync topic when it is missing (``--groups``). A refusal for lack of an ACL is the stop;
        a failure on the way is the caller's to retry (:meth:`kmirror.mirror.reach.Reachability.retry`)."""
        if self.syncs is None:
            return
        try:
            self.syncs.ensure_topic()
        except KafkaException as exc:
            # Made when missing: CREATE, else DESCRIBE (the metadata that finds it) on the sync topic.
            why = "kmirror run --groups writes its sync points there"
            raise self.access.refusal(exc, "target", "CREATE", SYNC_TOPIC, why) or exc from None

    def close(self) -> None:
        if self.syncs is not None:
            self.syncs.close()

    # ------------------------------------------------------------------ the group's changes

    def assigned(self, consumer: Consumer, partitions: list[TopicPartition], hashed: set[str]) -> None:
        """Partitions given to the stream: a new run each, none of them produced yet by this stream."""
        if self.read_counts is not None:
            for tp in partitions:
                self.read_counts[(tp.topic, tp.partition)] = 0
        if self.syncs is not None:
            self.syncs.assigned(consumer, partitions, hashed)

    def released(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.committed.pop((tp.topic, tp.partition), None)

    def new_run(self, topic: str, partition: int) -> None:
        """The partition continues at another offset than its next (after a gap, or a fetch again)."""
        if self.read_counts is not None:
            self.read_counts[(topic, partition)] = 0
        if self.syncs is not None:
            self.syncs.continued_after_gap(topic, partition)

    def gap(self, gap: Gap) -> None:
        if self.syncs is not None:  # --groups: on the target, for kmirror failover
            self.syncs.gap(gap)

    def raise_if_refused(self) -> None:
        """The sync point writer's first request refused for lack of an ACL: the stop."""
        if self.syncs is not None and self.syncs.refused is not None:
            raise self.syncs.refused.error(self.spec.label)

    # ------------------------------------------------------------------ the commit

    def commit(
        self,
        consumer: Consumer,
        parts: list[TopicPartition],
        hashed: set[str],
        unsent_from: dict[Partition, int],
    ) -> bool:
        """Commit the consumer's positions of ``parts`` (the producers are flushed), never past a record
        read and not handed over (``unsent_from``). True when something was committed."""
        positions = consumer.position(parts)
        for tp in positions:  # records read but never handed over (a stop during an outage)
            unsent = unsent_from.get((tp.topic, tp.partition))
            if unsent is not None and (tp.offset < 0 or unsent < tp.offset):
                tp.offset = unsent
        todo = [
            tp
            for tp in positions
            if tp.offset >= 0 and self.committed.get((tp.topic, tp.partition)) != tp.offset
        ]
        if not todo:
            return False
        if self.syncs is not None:
            # Flushed, nothing of these partitions at or past the positions produced: a valid sync point
            # whether or not the commit below succeeds, so it is written (and acknowledged) first.
            counts = self.read_counts
            if counts is not None and unsent_from:  # read, never handed over: not before the position
                counts = {k: v for k, v in counts.items() if k not in unsent_from}
            self.syncs.commit_point(todo, self.committed, hashed, counts=counts)
        self.raise_if_refused()  # before the commit it would allow
        try:
            consumer.commit(offsets=todo, asynchronous=False)
        except KafkaException as exc:
            stop: AuthorizationFailed | None = self.access.consumer_refusal(exc.args[0], todo[0].topic)
            if stop is not None:
                raise stop from None
            err: KafkaError = exc.args[0]
            log.warning(
                "%s: commit failed (%s); the records will be committed at the next commit point or "
                "mirrored again",
                self.spec.label,
                err.str(),
            )
            return False
        for tp in todo:
            self.committed[(tp.topic, tp.partition)] = tp.offset
        return True
