"""The audit's comparison logic, pure: per-bucket sums and differing contents to named records.

One Spark job (:func:`kmirror.audit.spark.compare`) hashes every record's content (topic, timestamp,
key, value, headers) into 128 bits, counts the copies of each distinct content on each cluster, and
returns per topic, time bucket and in-flight flag the record counts of both sides (:class:`BucketRow`),
and, for each content whose number of copies differs, where every copy is (:class:`ContentGroup`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kmirror.audit.scope import SOURCE, TARGET, bucket_of

Unit = tuple[str, int, bool]  # topic, bucket start, in flight


@dataclass
class UnitSums:
    source_records: int = 0
    target_records: int = 0
    differing: int = 0  # distinct contents with a different number of copies on the two sides


@dataclass(frozen=True)
class BucketRow:
    """A part of one unit's sums (a unit may come in several rows; they add up)."""

    topic: str
    bucket: int
    in_flight: bool
    source_records: int
    target_records: int
    differing: int = 0


@dataclass
class Phase1:
    units: dict[Unit, UnitSums]
    differing: set[Unit]


def compare_sums(rows: Iterable[BucketRow]) -> Phase1:
    units: dict[Unit, UnitSums] = defaultdict(UnitSums)
    for r in rows:
        u = units[(r.topic, r.bucket, r.in_flight)]
        u.source_records += r.source_records
        u.target_records += r.target_records
        u.differing += r.differing
    differing = {k for k, u in units.items() if u.differing or u.source_records != u.target_records}
    return Phase1(dict(units), differing)


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
