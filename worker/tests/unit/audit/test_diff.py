"""kmirror.audit.diff: comparing sums per bucket, naming the differing records, their keys."""

from __future__ import annotations

import pytest

from kmirror.audit import diff
from kmirror.audit.diff import classify, compare_sums
from kmirror.audit.scope import SOURCE, TARGET

from .rows import MIN, group, row

pytestmark = pytest.mark.audit

# ------------------------------------------------------------------------------------------ sums


def test_compare_sums_adds_up_units_and_finds_the_differing_ones():
    b1, b2 = 0, 600_000
    rows = [
        # bucket 1: the same contents, reported in several parts: equal
        row("t", b1, 3, 2),
        row("t", b1, 2, 3),
        # bucket 2: as many records on both sides, but one content has a different number of copies
        row("t", b2, 2, 0),
        row("t", b2, 0, 2, differing=1),
        # topic only on the target
        row("extra", b1, 0, 1, differing=1),
    ]
    p1 = compare_sums(rows)
    assert p1.differing == {("t", b2, False), ("extra", b1, False)}
    assert p1.units[("t", b1, False)] == diff.UnitSums(5, 5, 0)
    assert p1.units[("t", b2, False)] == diff.UnitSums(2, 2, 1)
    # Counts that differ make a unit differ even without a named content.
    assert compare_sums([row("t", b1, 2, 1)]).differing == {("t", b1, False)}


def test_in_flight_is_its_own_unit():
    rows = [row("t", 0, 2, 2), row("t", 0, 1, 0, differing=1, fly=True)]
    assert compare_sums(rows).differing == {("t", 0, True)}


# ------------------------------------------------------------------------------------------ records


def test_classify_names_missing_duplicated_unexpected_and_in_flight():
    bucket = 10 * MIN
    grace_from = 5 * bucket  # records at or after this are in flight
    groups = [
        group(100, [(SOURCE, 0, 4)]),  # missing
        group(200, [(SOURCE, 1, 7), (TARGET, 2, 3), (TARGET, 0, 9), (TARGET, 0, 1)]),  # 2 duplicated
        group(300, [(TARGET, 1, 5)], key=None),  # unexpected
        group(grace_from + 1, [(SOURCE, 0, 8)]),  # in flight, not missing
        group(grace_from + 2, [(TARGET, 0, 12)]),  # recent, target only: not unexpected
        group(bucket + 5, [(SOURCE, 0, 1), (SOURCE, 0, 2), (TARGET, 1, 1)]),  # 2 copies in source, 1 target
    ]
    d = classify(groups, bucket, grace_from)
    assert d.missing_records == [
        {"topic": "t", "timestamp": bucket + 5, "key": "k", "partition": 0, "offset": 2},
        {"topic": "t", "timestamp": 100, "key": "k", "partition": 0, "offset": 4},
    ]  # in partition and offset order
    assert [(r["partition"], r["offset"], r["copies"]) for r in d.duplicated_records] == [
        (0, 9, 3),
        (2, 3, 3),
    ]
    assert d.unexpected_records == [
        {"topic": "t", "timestamp": 300, "key": None, "partition": 1, "offset": 5}
    ]
    assert [(r["partition"], r["offset"]) for r in d.in_flight_records] == [(0, 8)]
    assert d.buckets[("t", 0)] == diff.BucketDiff(missing=1, duplicated=2, unexpected=1)
    assert d.buckets[("t", bucket)] == diff.BucketDiff(missing=1)
    assert d.buckets[("t", grace_from)] == diff.BucketDiff(in_flight=1, in_flight_target=1)


def test_key_text_is_printable_and_bounded():
    assert diff.key_text(None) is None
    assert diff.key_text(b"order-1") == "order-1"
    assert diff.key_text(b"\xff\x00a") == "\\xff\x00a"
    assert diff.key_text(b"x" * 100) == "x" * 80 + "..."
