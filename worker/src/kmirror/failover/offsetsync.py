"""Offset translation for failover: sync points and checkpoints, kept on the target cluster (pure logic).

A **sync point** of a mirrored partition is a pair (source offset P, target offset E) taken by the
stream that owns the partition at a commit point: the producers have been flushed (every record before
the consumer's position P is acknowledged by the target) and no record of the partition at or after P
has been produced yet. E is the target partition's end offset measured at that moment. Records are
mirrored to the same partition number, in order (one producer per partition, idempotent), so:

    every copy the mirror writes of a record with source offset >= P lands at a target offset >= E.

That holds whoever else writes to the target partition (other writers only push mirrored records
further) and with several workers (each stream writes sync points only for the partitions it owns, after
its own flush). After a crash it needs one more rule: the crashed owner may have copied records past
the committed offset, and the source may die before the new owner copies them again, so a new owner
writes no sync point for a partition until its position has passed the source's end at its
assignment (everything an earlier owner can have read); the earlier, valid points translate meanwhile.
An end offset that a broker under-reports only makes E smaller: translation re-reads more, never skips.

A consumer group that committed source offset C translates to the E of the sync point with the
largest P <= C (the earlier point when C lies between two; of two points at one P, the smaller E):
the failed-over group reads every record it had not committed; it re-reads at most the records from
that sync point's P up to C (plus, when other writers wrote to the partition, their records after E).
With P == C the translation is exact.

**Exact between two points** (issue 24): with ``--groups`` a stream counts the records it reads of each
partition (one pass over each batch, nothing per record on the produce path) and each sync point carries
the stream's *run* (an id drawn when the stream was assigned the partition, or restarted it after a gap)
and N, the records it read of the partition in that run before P. Between two points a < b of one run,
N_b - N_a records were read and copied once each, in order, and acknowledged between the two
measurements of the target's end. When

    P_b - P_a == N_b - N_a == E_b - E_a

the source range has no holes (compaction, transaction markers) and nothing but those copies reached
the target partition in between (no other writer, no duplicate), so the copy of source offset
P_a + k is at E_a + k: C in [P_a, P_b) translates exactly to E_a + (C - P_a) and nothing is read again.
Otherwise (holes, other writers, copies twice after a crash, points of different runs) the earlier point
is used as above: never a skipped record. The history kept (below) brackets a group far behind as well
as one near the head, so both translate exactly on a hole-free topic mirrored by kmirror alone.

A **checkpoint** is a group's committed source offset C and its translation T at one moment, written by
the group offset sync; ``kmirror failover`` uses them when the source cluster is gone.

Both live in one compacted topic on the target, :data:`SYNC_TOPIC` (internal: kmirror never mirrors
``__*`` topics, so a mirror running the other way after failback does not copy it back). Keys name the
mirror (the mirror's consumer group id: unique per source cluster mirrored into one target), the topic
and partition, and a *slot*: the latest sync point, plus one slot per level k and parity of
P >> k, rewritten when a commit point crosses a multiple of 2**k. Compaction therefore keeps, for every
k up to the highest power of two below the partition's offsets, a sync point between 2**k and 2**(k+1)
source offsets behind the newest one; and every checkpoint is itself a valid sync point at its group's
offset. A restarted sync still translates a group that lags far behind (coarsely, never skipping); the
running sync keeps every sync point it read in memory and translates exactly to the last commit point
before the group's offset.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import cast

SYNC_TOPIC = "__kmirror-offset-syncs"
SYNC_TOPIC_CONFIG = {"cleanup.policy": "compact"}
LATEST_SLOT = "latest"
MAX_POINTS = 4096  # sync points kept in memory per partition; older ones are thinned out, never all dropped

SYNC = "sync"
CHECKPOINT = "checkpoint"
GAP = "gap"


@dataclass(frozen=True)
class SyncPoint:
    source: int  # P: the consumer's position at the commit point
    target: int  # E: the target partition's end offset at that moment
    ms: int  # wall clock time it was taken (ms since the epoch)
    measured_at: int = -1  # a checkpoint's point: the P its target was measured at (-1: this point's own)
    run: str = ""  # the stream's run of the partition ("": unknown, never interpolated)
    # N: records the run copied of the partition before P: read and handed to the target (a record that
    # provenance does not copy back is not counted, so a skip breaks P_b-P_a == N_b-N_a; -1: unknown)
    count: int = -1
    topic_id: str = ""  # the source topic's id ("": unknown): a recreated topic is another topic
    # The source cluster's id ("": unknown, points written before it was recorded): the only cluster whose
    # provenance headers on the target's copies `kmirror failover` reads (docs/security.md).
    cluster: str = ""

    @property
    def basis(self) -> int:
        """The source offset the target offset was measured at: records from here are read again."""
        return self.source if self.measured_at < 0 else self.measured_at


@dataclass(frozen=True)
class Translation:
    """A source offset translated: target offset and the sync point it came from."""

    source: int  # the group's committed source offset C
    target: int  # the target offset to commit (T)
    sync_source: int  # the source offset the target offset was measured at (C - it records may be read again)
    sync_ms: int

    @property
    def rereads(self) -> int:
        """At most this many records before C are read again (without other writers on the target)."""
        return self.source - self.sync_source


@dataclass(frozen=True)
class Checkpoint:
    group: str
    topic: str
    partition: int
    source: int  # the group's committed offset on the source (C)
    target: int  # its translation (T): every mirrored record at or after C is at or after T
    sync_source: int  # P of the sync point used
    ms: int  # when it was computed

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Gap:
    """Source offsets a stream could not mirror (kmirror.mirror.gaps): ``lost`` when they were purged on
    the source before they were copied; otherwise copied before and no longer on the source (truncated,
    recreated)."""

    topic: str
    partition: int
    first: int
    last: int
    lost: bool
    ms: int

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "records": self.last - self.first + 1}


# ------------------------------------------------------------------------------------------ records


def sync_slots(previous: int | None, position: int) -> list[str]:
    """The keys' slots a new sync point at `position` is written to, given the previous commit's position
    of the same partition by the same stream (None: unknown, e.g. after a restart)."""
    slots = [LATEST_SLOT]
    if previous is None or previous >= position:
        return slots
    k = 1
    while (previous >> k) != (position >> k):
        slots.append(f"{k}.{(position >> k) & 1}")
        k += 1
    return slots


def sync_record(mirror: str, topic: str, partition: int, slot: str, point: SyncPoint) -> tuple[bytes, bytes]:
    key = json.dumps([SYNC, mirror, topic, partition, slot], separators=(",", ":")).encode()
    fields: dict[str, object] = {"s": point.source, "t": point.target, "ms": point.ms}
    if point.run and point.count >= 0:
        fields.update(r=point.run, n=point.count)
    if point.topic_id:
        fields["id"] = point.topic_id
    if point.cluster:
        fields["c"] = point.cluster
    return key, json.dumps(fields, separators=(",", ":")).encode()


def checkpoint_record(mirror: str, cp: Checkpoint) -> tuple[bytes, bytes]:
    key = json.dumps([CHECKPOINT, mirror, cp.group, cp.topic, cp.partition], separators=(",", ":")).encode()
    value = {"c": cp.source, "t": cp.target, "p": cp.sync_source, "ms": cp.ms}
    return key, json.dumps(value, separators=(",", ":")).encode()


def gap_record(mirror: str, gap: Gap) -> tuple[bytes, bytes]:
    key = json.dumps([GAP, mirror, gap.topic, gap.partition, gap.first], separators=(",", ":")).encode()
    value = {"l": gap.last, "lost": gap.lost, "ms": gap.ms}
    return key, json.dumps(value, separators=(",", ":")).encode()


def parse_record(key: bytes | None, value: bytes | None) -> tuple[str, str, object] | None:
    """(kind, mirror, SyncPoint with its topic and partition | Checkpoint), or None for anything else
    (tombstones, records of a newer format)."""
    if key is None or value is None:
        return None
    try:
        k = json.loads(key)
        v = json.loads(value)
        if k[0] == SYNC:
            _, mirror, topic, partition, _slot = k
            return (
                SYNC,
                mirror,
                (
                    str(topic),
                    int(partition),
                    SyncPoint(
                        int(v["s"]),
                        int(v["t"]),
                        int(v["ms"]),
                        run=str(v.get("r", "")),
                        count=int(v.get("n", -1)),
                        topic_id=str(v.get("id", "")),
                        cluster=str(v.get("c", "")),
                    ),
                ),
            )
        if k[0] == CHECKPOINT:
            _, mirror, group, topic, partition = k
            cp = Checkpoint(
                str(group), str(topic), int(partition), int(v["c"]), int(v["t"]), int(v["p"]), int(v["ms"])
            )
            return CHECKPOINT, mirror, cp
        if k[0] == GAP:
            _, mirror, topic, partition, first = k
            gap = Gap(str(topic), int(partition), int(first), int(v["l"]), bool(v["lost"]), int(v["ms"]))
            return GAP, mirror, gap
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return None


# ------------------------------------------------------------------------------------------ store


class SyncStore:
    """Sync points per partition; translates source offsets (never past an unread record)."""

    def __init__(self, max_points: int = MAX_POINTS) -> None:
        self.max_points = max_points
        self._sources: dict[tuple[str, int], list[int]] = {}
        self._points: dict[tuple[str, int], list[SyncPoint]] = {}
        # Per partition, the newest source topic id seen and since when (ms of its first point): points of
        # an older topic of the same name (deleted and recreated) are dropped, never used.
        self._incarnation: dict[tuple[str, int], tuple[str, int]] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._points.values())

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._points)

    def has(self, topic: str, partition: int) -> bool:
        return bool(self._points.get((topic, partition)))

    def add(self, topic: str, partition: int, point: SyncPoint) -> None:
        key = (topic, partition)
        if not self._same_topic(key, point):
            return
        sources = self._sources.setdefault(key, [])
        points = self._points.setdefault(key, [])
        i = bisect.bisect_left(sources, point.source)
        if i < len(sources) and sources[i] == point.source:
            # Two points at one source offset: keep the smaller target. A point taken when a partition is
            # assigned again after a crash can have a target past copies the crashed owner made; the
            # earlier point at that offset cannot.
            if point.target < points[i].target:
                points[i] = point
            return
        sources.insert(i, point.source)
        points.insert(i, point)
        if len(points) > self.max_points:
            self._thin(key)

    def _same_topic(self, key: tuple[str, int], point: SyncPoint) -> bool:
        """False for a point of an older topic of this name. A point of a newer one (its id first seen
        after the current one's) drops every point taken before it: they speak of the old topic."""
        current = self._incarnation.get(key)
        if not point.topic_id:
            return current is None or point.ms >= current[1]
        if current is None:
            self._incarnation[key] = (point.topic_id, point.ms)
            return True
        if point.topic_id == current[0]:
            return True
        if point.ms < current[1]:
            return False  # the older topic's
        self._incarnation[key] = (point.topic_id, point.ms)
        kept = [p for p in self._points.get(key, []) if p.topic_id == point.topic_id or p.ms >= point.ms]
        self._points[key] = kept
        self._sources[key] = [p.source for p in kept]
        return True

    def _thin(self, key: tuple[str, int]) -> None:
        """Keep the newest half, and every other point of the older half."""
        points = self._points[key]
        half = len(points) // 2
        kept = points[:half:2] + points[half:]
        self._points[key] = kept
        self._sources[key] = [p.source for p in kept]

    def latest(self, topic: str, partition: int) -> SyncPoint | None:
        points = self._points.get((topic, partition))
        return points[-1] if points else None

    def source_cluster(self, topic: str, partition: int) -> str | None:
        """The source cluster id the newest sync point of the partition that records one names."""
        for p in sorted(self._points.get((topic, partition), []), key=lambda p: p.ms, reverse=True):
            if p.cluster:
                return p.cluster
        return None

    def translate(self, topic: str, partition: int, offset: int) -> Translation | None:
        """The largest target offset of any sync point at or before `offset`; None when there is none."""
        key = (topic, partition)
        sources = self._sources.get(key)
        if not sources or offset < 0:
            return None
        i = bisect.bisect_right(sources, offset)
        if i == 0:
            return None
        points = self._points[key]
        best = points[i - 1]  # the last sync point at or before the offset
        if best.basis < offset:
            between = _run_points_around(points, i)
            if between is not None and exact_between(*between):
                a = between[0]
                return Translation(offset, a.target + (offset - a.source), offset, a.ms)
        return Translation(offset, best.target, best.basis, best.ms)


def _run_points_around(points: list[SyncPoint], i: int) -> tuple[SyncPoint, SyncPoint] | None:
    """The stream's own points (not checkpoints) nearest before index ``i`` and at or after it."""
    before = next((p for p in reversed(points[:i]) if p.measured_at < 0), None)
    after = next((p for p in points[i:] if p.measured_at < 0), None)
    return None if before is None or after is None else (before, after)


def exact_between(a: SyncPoint, b: SyncPoint) -> bool:
    """Every source offset in [a.source, b.source) is a record copied once, in order, to
    [a.target, b.target), and nothing else was written there (see the module's docstring)."""
    return (
        bool(a.run)
        and a.run == b.run
        and a.count >= 0
        and a.measured_at < 0
        and b.measured_at < 0
        and b.source - a.source == b.count - a.count == b.target - a.target
    )


@dataclass
class SyncData:
    """Everything one mirror has on the target: its sync points and the checkpoints of its groups."""

    store: SyncStore
    checkpoints: dict[tuple[str, str, int], Checkpoint]  # (group, topic, partition)
    gaps: list[Gap] = field(default_factory=list)  # what the mirror could not copy (kmirror.mirror.gaps)

    @classmethod
    def empty(cls) -> SyncData:
        return cls(SyncStore(), {})

    def add_record(self, mirror: str, key: bytes | None, value: bytes | None) -> None:
        parsed = parse_record(key, value)
        if parsed is None or parsed[1] != mirror:
            return
        kind, _, item = parsed
        if kind == GAP:
            self.gaps.append(cast(Gap, item))
            return
        if kind == SYNC:
            topic, partition, point = cast(tuple[str, int, SyncPoint], item)
            self.store.add(topic, partition, point)
        else:
            cp = cast(Checkpoint, item)
            # A checkpoint is a valid sync point too (its target is a translation of its source offset):
            # it keeps a lagging group translatable after compaction dropped older sync points.
            self.store.add(cp.topic, cp.partition, SyncPoint(cp.source, cp.target, cp.ms, cp.sync_source))
            key_ = (cp.group, cp.topic, cp.partition)
            old = self.checkpoints.get(key_)
            if old is None or cp.ms >= old.ms:
                self.checkpoints[key_] = cp

    def group_checkpoints(self, group: str) -> dict[tuple[str, int], Checkpoint]:
        return {(t, p): cp for (g, t, p), cp in self.checkpoints.items() if g == group}


# ------------------------------------------------------------------------------------------ group sync


@dataclass(frozen=True)
class Commit:
    """What the group offset sync does for one partition of one group."""

    topic: str
    partition: int
    translation: Translation
    current: int  # the group's committed offset on the target now (-1: none)

    @property
    def moves(self) -> bool:
        return self.translation.target > self.current


def plan_commits(
    store: SyncStore,
    source_committed: Mapping[tuple[str, int], int],
    target_committed: Mapping[tuple[str, int], int],
) -> tuple[list[Commit], list[tuple[str, int]]]:
    """Translate a group's committed source offsets. Returns every translation (whether it moves the
    group forward on the target or not: a group is never moved backwards) and the partitions that have
    no sync point at or before the group's offset yet."""
    commits, untranslated = [], []
    for (topic, partition), offset in sorted(source_committed.items()):
        if offset < 0:
            continue
        tr = store.translate(topic, partition, offset)
        if tr is None:
            if store.has(topic, partition):
                untranslated.append((topic, partition))
            continue
        commits.append(Commit(topic, partition, tr, target_committed.get((topic, partition), -1)))
    return commits, untranslated


def is_internal_group(group: str, mirror_groups: Iterable[str]) -> bool:
    """Groups never synced: the mirrors' own groups and internal ones (``__*``)."""
    return group in set(mirror_groups) or group.startswith("__")


@dataclass(frozen=True)
class Row:
    topic: str
    partition: int
    source_offset: int  # the group's committed offset on the source (C)
    source_from: str  # "source" (read now) or "checkpoint" (the last one the mirror wrote)
    sync_point: int | None  # P of the sync point used (C - P records are read again); None: none yet
    translated: int | None  # T: the target offset for C; None when there is no sync point at or before C
    on_target: int  # the group's committed offset on the target now (-1: none)
    age_s: float | None  # seconds since the checkpoint (source_from checkpoint) or the sync point was taken
    log_end: int  # the target partition's end offset
    action: str  # commit, keep (already at or past T), none (no translation)
    # T was found by the copies' provenance headers: the copy of the record at C (0 read again)
    by_header: bool = False

    def exact(self, target: int) -> Row:
        """This row with T found by the provenance headers of the copies (nothing read again or skipped)."""
        action = "commit" if target > self.on_target else "keep"
        return replace(self, sync_point=self.source_offset, translated=target, action=action, by_header=True)

    @property
    def committed_after(self) -> int:
        return self.translated if self.action == "commit" and self.translated is not None else self.on_target

    @property
    def lag(self) -> int:
        start = self.committed_after
        return max(0, self.log_end - start) if start >= 0 else self.log_end

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "lag": self.lag}


def build_rows(
    data: SyncData,
    group: str,
    *,
    source_committed: Mapping[tuple[str, int], int] | None,
    target_committed: Mapping[tuple[str, int], int],
    log_ends: Mapping[tuple[str, int], int],
    now_ms: int,
) -> list[Row]:
    """Pure: the failover plan of one group. Offsets come from the live source when given, else from
    the checkpoints; a translation is the best of every valid lower bound (the sync points at or before
    the offset, and a checkpoint of an offset at or before it)."""
    checkpoints: dict[tuple[str, int], Checkpoint] = data.group_checkpoints(group)
    if source_committed is not None:
        offsets = {k: (v, "source") for k, v in source_committed.items() if data.store.has(*k)}
    else:
        offsets = {k: (cp.source, "checkpoint") for k, cp in checkpoints.items()}
    rows = []
    for (topic, partition), (offset, origin) in sorted(offsets.items()):
        tr = data.store.translate(topic, partition, offset)
        cp = checkpoints.get((topic, partition))
        candidates = []
        if tr is not None:
            candidates.append((tr.target, tr.sync_source, tr.sync_ms))
        if cp is not None and cp.source <= offset:
            candidates.append((cp.target, cp.sync_source, cp.ms))
        current = target_committed.get((topic, partition), -1)
        end = log_ends.get((topic, partition), 0)
        if not candidates:
            rows.append(Row(topic, partition, offset, origin, None, None, current, None, end, "none"))
            continue
        target, sync_point, _ = max(candidates)
        sync_point = max(c[1] for c in candidates if c[0] == target)
        taken = cp.ms if origin == "checkpoint" and cp is not None else max(c[2] for c in candidates)
        age = max(0.0, (now_ms - taken) / 1000)
        action = "commit" if target > current else "keep"
        rows.append(Row(topic, partition, offset, origin, sync_point, target, current, age, end, action))
    return rows
