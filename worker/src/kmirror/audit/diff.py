"""The audit's comparison logic, pure: per-bucket sums to differing buckets, content groups to records.

Phase 1 (:func:`kmirror.audit.spark.bucket_sums`) gives, per cluster, topic, partition, time bucket and
in-flight flag: the record count, two order-independent checksums (sums of two 64/32-bit content
hashes) and the offset range. Units (topic, bucket, in-flight flag) whose counts or checksums differ
are read again and compared record by record (phase 2): every distinct content (topic, key, value,
headers, timestamp) with its copies on each side.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kmirror.audit.plan import SOURCE, TARGET, Span, bucket_of, merge

Unit = tuple[str, int, bool]  # topic, bucket start, in flight


@dataclass
class Sums:
    records: int = 0
    checksum1: int = 0
    checksum2: int = 0

    def add(self, records: int, c1: int, c2: int) -> None:
        self.records += records
        self.checksum1 += c1
        self.checksum2 += c2


@dataclass(frozen=True)
class BucketRow:
    """One row of phase 1."""

    side: int
    topic: str
    partition: int
    bucket: int
    in_flight: bool
    records: int
    checksum1: int
    checksum2: int
    min_offset: int
    max_offset: int


@dataclass
class Phase1:
    units: dict[Unit, tuple[Sums, Sums]]
    differing: set[Unit]
    recheck: list[Span]  # the offset ranges holding the records of the differing units


def compare_sums(rows: Iterable[BucketRow]) -> Phase1:
    units: dict[Unit, tuple[Sums, Sums]] = defaultdict(lambda: (Sums(), Sums()))
    where: dict[Unit, list[BucketRow]] = defaultdict(list)
    for r in rows:
        unit = (r.topic, r.bucket, r.in_flight)
        units[unit][r.side].add(r.records, r.checksum1, r.checksum2)
        where[unit].append(r)
    differing = {u for u, (s, t) in units.items() if s != t}
    spans = [
        Span(r.side, r.topic, r.partition, r.min_offset, r.max_offset + 1)
        for u in differing
        for r in where[u]
    ]
    return Phase1(dict(units), differing, merge(spans))


@dataclass(frozen=True)
class ContentGroup:
    """One distinct content of phase 2, with where its copies are on each side."""

    topic: str
    timestamp: int
    key: bytes | None
    locations: Sequence[tuple[int, int, int]]  # (side, partition, offset)


@dataclass
class BucketDiff:
    missing: int = 0
    duplicated: int = 0
    unexpected: int = 0
    in_flight: int = 0  # source records newer than now - grace, not (yet) on the target
    in_flight_target: int = 0  # target records newer than now - grace that the source read lacks


@dataclass
class Differences:
    buckets: dict[tuple[str, int], BucketDiff] = field(default_factory=lambda: defaultdict(BucketDiff))
    missing_records: list[dict[str, object]] = field(default_factory=list)
    duplicated_records: list[dict[str, object]] = field(default_factory=list)
    unexpected_records: list[dict[str, object]] = field(default_factory=list)
    in_flight_records: list[dict[str, object]] = field(default_factory=list)


def key_text(key: bytes | None, limit: int = 80) -> str | None:
    """A printable rendering of a record key for people reading the report."""
    if key is None:
        return None
    text = key[:limit].decode("utf-8", "backslashreplace")
    return text + ("..." if len(key) > limit else "")


def classify(groups: Iterable[ContentGroup], bucket_ms: int, in_flight_from: int) -> Differences:
    """Name the differences. For a content with s copies in the source and t in the target:
    t < s: s - t missing (the last source copies in offset order), or in flight when the record is
    newer than `in_flight_from`; t > s > 0: t - s duplicated (the last target copies); s == 0: t
    unexpected (or target-side in flight when recent)."""
    out = Differences()
    for g in groups:
        src = sorted((p, o) for side, p, o in g.locations if side == SOURCE)
        tgt = sorted((p, o) for side, p, o in g.locations if side == TARGET)
        bucket = bucket_of(g.timestamp, bucket_ms)
        fly = g.timestamp >= in_flight_from
        diff = out.buckets[(g.topic, bucket)]
        base = {"topic": g.topic, "timestamp": g.timestamp, "key": key_text(g.key)}
        if len(tgt) < len(src):
            for p, o in src[len(tgt) :]:
                record = {**base, "partition": p, "offset": o}
                if fly:
                    diff.in_flight += 1
                    out.in_flight_records.append(record)
                else:
                    diff.missing += 1
                    out.missing_records.append(record)
        elif len(tgt) > len(src) and src:
            for p, o in tgt[len(src) :]:
                diff.duplicated += 1
                out.duplicated_records.append(
                    {**base, "partition": p, "offset": o, "copies": len(tgt), "source_copies": len(src)}
                )
        elif len(tgt) > len(src):
            for p, o in tgt:
                if fly:
                    diff.in_flight_target += 1
                else:
                    diff.unexpected += 1
                    out.unexpected_records.append({**base, "partition": p, "offset": o})
    for records in (
        out.missing_records,
        out.duplicated_records,
        out.unexpected_records,
        out.in_flight_records,
    ):
        records.sort(key=lambda r: (r["topic"], r["partition"], r["offset"]))
    out.buckets = dict(out.buckets)
    return out
