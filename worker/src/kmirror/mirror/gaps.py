"""Gaps: the source cannot give the offset the mirror must continue from.

The mirror continues each partition from the group's committed offset (or, while running, from the next
offset it fetches). When the source no longer has that offset, a plain consumer with
``auto.offset.reset`` jumps silently, and records are lost or copied twice with nothing said. The
stream's consumer therefore runs with ``auto.offset.reset=error``: librdkafka hands every reset to the
stream as an ``_AUTO_OFFSET_RESET`` event with the partition and the offset it wanted, and the stream
decides, from the partition's log start and end (asked of its leader):

* no committed offset: a partition never mirrored; it starts where the configured ``auto.offset.reset``
  says (earliest by default). Not a gap.
* wanted below the log start: records purged before they were copied (retention, ``delete_records``,
  a compaction of the head). Gap: offsets wanted .. log start - 1, lost.
* wanted above the log end: the partition was truncated below the mirror's position (an unclean leader
  election) or the topic was deleted and recreated. The records from the log start on are mirrored
  again (a recreated topic's are new; a truncated partition's may be copied twice: never lost). A
  truncation librdkafka detects itself (the new leader's epoch ends below the position, KIP-320) comes
  without the offset wanted: it is read from the event's text (``TRUNCATED_AT``).
* otherwise (a leader that was behind, for a moment): continue at the wanted offset.

Each gap is one WARNING line naming source, topic, partition and the offsets lost, counted in the metrics
(``kmirror_gap_records_total``, ``kmirror_gaps_total``), and then handled by ``--gap.policy``: ``continue``
(the default: mirror from the log start) or ``stop`` (exit 4, nothing committed past the gap; the unit
does not restart it: the operator decides, see docs/runbooks/source-gap.md).

None of this touches the per-record path: the stream sees these events among the consumer's errors.
"""

from __future__ import annotations

import logging
import re
import time

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException, Message, TopicPartition

from kmirror.errors import KmirrorError
from kmirror.failover.offsetsync import Gap
from kmirror.mirror import metrics
from kmirror.mirror.clients import Clients
from kmirror.mirror.commits import CommitPoints
from kmirror.mirror.membership import Membership
from kmirror.mirror.spec import StreamSpec

log = logging.getLogger(__name__)

GAP_POLICIES = ("continue", "stop")
# A truncation librdkafka found by validating the fetch position's leader epoch (KIP-320: the new leader's
# log ends below the position) comes with auto.offset.reset=error as an _AUTO_OFFSET_RESET event whose
# offset is INVALID; the position it wanted is only in the event's text (rdkafka_offset.c:
# "Partition log truncation detected at offset 80 (leader epoch 0): broker end offset is 50 ...").
TRUNCATED_AT = re.compile(r"truncation detected at offset (\d+)")
EARLIEST = {"smallest", "earliest", "beginning"}
WATERMARK_PATIENCE_S = 30.0
LATEST = {"largest", "latest", "end"}


def cooperative(consumer: dict[str, str]) -> bool:
    """Whether the stream's assignor is cooperative (the default): gaps are detected only then. With an
    eager one (range, roundrobin: MirrorMaker 1's) a partition cannot be fetched again on its own, so
    librdkafka resets offsets itself (auto.offset.reset) and a gap passes unreported; the stream says so
    once at its start."""
    return "cooperative" in consumer.get("partition.assignment.strategy", "")


class SourceGap(KmirrorError):
    """--gap.policy stop met a gap: exit 4 (not restarted by the unit; nothing committed past it)."""

    exit_code = 4


class OffsetResets:
    """A stream's consumer's offset resets, decided (see the module's text)."""

    def __init__(
        self,
        spec: StreamSpec,
        snap: metrics.Snapshot,
        clients: Clients,
        membership: Membership,
        points: CommitPoints,
    ) -> None:
        self.spec = spec
        self.snap = snap
        self.clients = clients
        self.membership = membership
        self.points = points

    def offset_reset(self, m: Message) -> None:
        topic, partition = m.topic() or "", m.partition() or 0
        if (topic, partition) not in self.membership.assigned:
            # Revoked between the fetch of this event and now (a rebalance inside the same consume call):
            # the new owner gets its own event; fetching it again here would fail (not assigned).
            log.debug("%s: offset reset of %s[%d], no longer assigned: left to its new owner",
                      self.spec.label, topic, partition)  # fmt: skip
            return
        wanted = m.offset()
        truncated = TRUNCATED_AT.search(m.error().str())
        if (wanted is None or wanted < 0) and truncated:
            wanted = int(truncated.group(1))
        where = f"source cluster {self.spec.source} topic {topic} partition {partition}"
        if wanted is None or wanted < 0:
            # No committed offset: no watermarks needed (a partition just added to the topic may not be in
            # the consumer's metadata yet: asking for its watermarks fails with "Unknown partition").
            policy = self.spec.consumer.get("auto.offset.reset", "earliest")
            if policy in LATEST:
                self._restart_at(topic, partition, OFFSET_END)
            elif policy in EARLIEST:
                # Where the assignment's sync point said reading starts: the same run (--groups).
                self._restart_at(topic, partition, OFFSET_BEGINNING, new_run=False)
            else:
                raise KmirrorError(
                    f"{self.spec.label}: {where} has no committed offset and auto.offset.reset={policy}: set "
                    "auto.offset.reset=earliest (or latest) in the consumer file"
                )
            return
        low, high = self._watermarks(topic, partition)
        if wanted < low:
            self._gap(
                where,
                (topic, partition),
                wanted,
                low - 1,
                what="purged on the source before they were mirrored "
                "(retention.ms, retention.bytes or delete_records)",
            )
            self._restart_at(topic, partition, low)
        elif wanted > high:
            self._gap(
                where,
                (topic, partition),
                high,
                wanted - 1,
                what="mirrored before and no longer on the source: the partition was truncated (an unclean "
                "leader election) or the topic deleted and recreated; mirroring again from its log start "
                f"{low} (records already on the target may be copied twice)",
                lost=False,
            )
            self._restart_at(topic, partition, low)
        else:
            log.warning(
                "%s: %s: offset %d reported out of range although the partition holds %d..%d (a leader "
                "behind for a moment); continuing at %d",
                self.spec.label,
                where,
                wanted,
                low,
                high - 1,
                wanted,
            )
            self._restart_at(topic, partition, wanted)

    def _gap(
        self, where: str, tp: tuple[str, int], first: int, last: int, *, what: str, lost: bool = True
    ) -> None:
        topic, partition = tp
        count = last - first + 1
        stop = self.spec.gap_policy == "stop"
        log.warning(
            "%s: GAP in %s: offsets %d..%d (%d records) %s%s",
            self.spec.label,
            where,
            first,
            last,
            count,
            what,
            "; stopping (--gap.policy stop): nothing committed past the gap" if stop else "",
        )
        self.snap.gaps += 1
        self.points.gap(Gap(topic, partition, first, last, lost, int(time.time() * 1000)))
        if lost:
            self.snap.gap_records[topic] = self.snap.gap_records.get(topic, 0) + count
        if stop:
            raise SourceGap(
                f"{self.spec.label}: GAP in {where}: offsets {first}..{last} ({count} records) "
                f"{'lost' if lost else 'no longer on the source'}; --gap.policy stop: read "
                "docs/runbooks/source-gap.md, then restart with --gap.policy continue to go on from the "
                "source's log start"
            )

    def _watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """The partition's log start and end, asked of its leader; asked again for up to
        WATERMARK_PATIENCE_S while the answer is a passing error (a leader moving, metadata behind)."""
        consumer = self.clients.the_consumer()
        deadline = time.monotonic() + WATERMARK_PATIENCE_S
        while True:
            try:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=10, cached=False
                )
                return int(low), int(high)
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _restart_at(self, topic: str, partition: int, offset: int, *, new_run: bool = True) -> None:
        """Fetch the partition again from ``offset`` (librdkafka keeps a partition whose reset failed
        stopped until it is assigned again: a seek is refused)."""
        consumer = self.clients.the_consumer()
        if new_run:  # a new run (kmirror.failover.offsetsync)
            self.points.new_run(topic, partition)
        start = TopicPartition(topic, partition, offset)  # an offset, OFFSET_BEGINNING or OFFSET_END
        consumer.incremental_unassign([TopicPartition(topic, partition)])
        consumer.incremental_assign([start])
