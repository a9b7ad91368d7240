"""The audit's per-record work without Kafka or Spark: content digests tell apart what differs and agree
on what does not, every copy of a content goes to the same matching task, and the matching names exactly
the records whose contents have a different number of copies (also when contents share a sort key)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from kmirror.audit import digest, match, source
from kmirror.audit.digest import bucket_counts, differing, record_digests, reducer_of
from kmirror.audit.scope import Span
from kmirror.audit.source import COUNTS_ROW, DigestedSpan

pytestmark = pytest.mark.audit


def lanes(keys, values, headers):
    h1, h2 = record_digests(keys, values, headers)
    return list(zip(h1.tolist(), h2.tolist(), strict=True))


def test_digests_of_equal_records_agree_across_batches_and_positions():
    a = lanes([b"k", None], [b"v", b"w"], [[("h", b"1")], None])
    b = lanes([b"x", b"k"], [b"y", b"v"], [None, [("h", b"1")]])
    assert a[0] == b[1]
    assert a[0] != b[0]


def test_every_field_and_the_null_empty_distinction_change_the_digest():
    base = (b"key", b"value", [("a", b"1"), ("b", None)])
    variants = [
        base,
        (None, b"value", base[2]),  # NULL key
        (b"", b"value", base[2]),  # empty key
        (b"key", None, base[2]),  # NULL value
        (b"key", b"", base[2]),  # empty value
        (b"value", b"key", base[2]),  # key and value swapped
        (b"key", b"value", [("b", None), ("a", b"1")]),  # header order
        (b"key", b"value", [("a", b"1"), ("b", b"")]),  # NULL header value vs empty
        (b"key", b"value", [("a", b"1")]),  # one header fewer
        (b"key", b"value", [("a", b"1"), ("b", None), ("b", None)]),  # one more
        (b"key", b"value", None),  # no headers
        (b"key", b"value", [("a", b"2"), ("b", None)]),  # header value
        (b"key", b"value", [("A", b"1"), ("b", None)]),  # header name
        (None, b"keyvalue", base[2]),  # bytes moved between fields
    ]
    got = lanes([v[0] for v in variants], [v[1] for v in variants], [v[2] for v in variants])
    assert len(set(got)) == len(variants)
    assert lanes([b"key"], [b"value"], [[]]) == lanes([b"key"], [b"value"], [None])  # Kafka has no difference


def test_many_distinct_records_have_distinct_digests_in_both_lanes():
    n = 200_000
    h1, h2 = record_digests(
        [b"%d" % (i % 1000) for i in range(n)], [b"v%d" % i for i in range(n)], [None] * n
    )
    assert len(np.unique(h1)) == n
    assert len(np.unique(h2)) == n


def test_every_copy_of_a_content_goes_to_the_same_reducer_and_all_reducers_are_used():
    h1, _ = record_digests([None] * 1000, [b"%d" % i for i in range(1000)], [None] * 1000)
    r = reducer_of(h1, 4)
    assert set(r.tolist()) == {0, 1, 2, 3}
    again, _ = record_digests([None], [b"17"], [None])
    assert reducer_of(again, 4)[0] == r[17]


def _differing(rows):
    topic, ts, h1, h2, side = (np.array(c, np.int64) for c in zip(*rows, strict=True))
    return sorted(differing(topic, ts, h1, h2, side).tolist())


def test_differing_names_every_copy_of_contents_whose_counts_differ():
    rows = [
        (0, 10, 1, 1, 0), (0, 10, 1, 1, 1),  # copied once: fine
        (0, 11, 2, 2, 0),  # missing on the target
        (0, 12, 3, 3, 0), (0, 12, 3, 3, 1), (0, 12, 3, 3, 1),  # duplicated
        (0, 13, 4, 4, 1),  # unexpected
        (1, 10, 1, 1, 0),  # another topic, same timestamp and digest: missing
        (0, 14, 5, 5, 0), (0, 14, 5, 5, 0), (0, 14, 5, 5, 1), (0, 14, 5, 5, 1),  # two and two: fine
    ]  # fmt: skip
    assert _differing(rows) == [2, 3, 4, 5, 6, 7]


def test_differing_is_exact_when_different_contents_share_the_sort_key(monkeypatch):
    monkeypatch.setattr(digest, "fmix64", np.zeros_like)  # every content: one sort key
    rows = [(0, 10, 1, 1, 0), (0, 11, 2, 2, 1), (0, 10, 1, 1, 1), (0, 12, 3, 3, 0), (0, 11, 2, 2, 0)]
    assert _differing(rows) == [3]


def test_bucket_counts_per_bucket_and_in_flight():
    ts = np.array([0, 5, 10, 12, 25, -1], np.int64)
    bucket, fly, count = bucket_counts(ts, 10, 12)
    assert list(zip(bucket.tolist(), fly.tolist(), count.tolist(), strict=True)) == [
        (-10, False, 1), (0, False, 2), (10, False, 1), (10, True, 1), (20, True, 1),
    ]  # fmt: skip


def test_a_span_packed_and_matched_names_the_differences_with_keys():
    source, target = Span(0, "t", 0, 0, 3), Span(1, "t", 2, 0, 3)
    blobs: dict[int, list[bytes]] = {}
    for span, keys in ((source, [b"a", b"b", b"c"]), (target, [b"a", b"c", b"c"])):
        d = DigestedSpan(span, 0, 3)
        stamps = np.array([100, 200, 300] if span is source else [100, 300, 300], np.int64)
        assert d.add(([0, 1, 2], stamps, keys, keys, [None] * 3)) is None  # no share fills a row
        packed = d.finish(1000, 10_000)
        for r, blob in zip(packed.column(0).to_pylist(), packed.column(1).to_pylist(), strict=True):
            blobs.setdefault(r, []).append(blob)
    counts_blobs = blobs.pop(COUNTS_ROW)
    counts = _matched({"r": [COUNTS_ROW] * 2, "blob": counts_blobs})
    sums = zip(*(counts.column(c).to_pylist() for c in ("side", "bucket", "records")), strict=True)
    assert sorted(sums) == [(0, 0, 3), (1, 0, 3)]
    found = []
    for r, parts in blobs.items():
        out = _matched({"r": [r] * len(parts), "blob": parts})
        cols = ("kind", "side", "partition", "offset", "key")
        found += list(zip(*(out.column(c).to_pylist() for c in cols), strict=True))
    assert sorted(found) == [
        (match.RECORD, 0, 0, 1, b"b"),  # missing
        (match.RECORD, 0, 0, 2, b"c"),  # duplicated: the source copy and both target copies
        (match.RECORD, 1, 2, 1, b"c"),
        (match.RECORD, 1, 2, 2, b"c"),
    ]
    # One task given the counts and every r at once (fewer tasks than r) finds the same.
    every = [(r, b) for r, parts in [(COUNTS_ROW, counts_blobs), *blobs.items()] for b in parts]
    out = _matched({"r": [r for r, _ in every], "blob": [b for _, b in every]})
    assert out.column("kind").to_pylist().count(match.COUNTS) == 2
    cols = ("kind", "side", "partition", "offset", "key")
    rows = list(zip(*(out.column(c).to_pylist() for c in cols), strict=True))
    assert sorted(r for r in rows if r[0] == match.RECORD) == sorted(found)


def test_rows_are_handed_on_as_a_share_fills_and_every_record_is_in_one(monkeypatch):
    monkeypatch.setattr(source, "BLOB_RECORDS", 3)
    d = DigestedSpan(Span(0, "t", 4, 0, 50), 7, 2)
    rows = []
    for lo in range(0, 50, 10):
        keys = [b"k%d" % i for i in range(lo, lo + 10)]
        got = d.add(
            (list(range(lo, lo + 10)), np.arange(lo, lo + 10, dtype=np.int64), keys, keys, [None] * 10)
        )
        assert got is not None  # 10 records over 2 shares: at least one share has 3 waiting
        rows.append(got)
    rows.append(d.finish(1000, 10_000))
    every = pa.Table.from_batches(rows)
    r, blobs = every.column("r").to_pylist(), every.column("blob").to_pylist()
    records = [source.unpack([b]) for x, b in zip(r, blobs, strict=True) if x != COUNTS_ROW]
    assert all(t.num_rows <= 3 for t in records)
    assert sum(t.num_rows < 3 for t in records) <= 2  # only the last row of each share is short
    t = pa.concat_tables(records)
    assert sorted(t.column("offset").to_pylist()) == list(range(50))
    assert set(t.column("partition").to_pylist()) == {4} and set(t.column("topic").to_pylist()) == {7}
    for x, b in zip(r, blobs, strict=True):
        if x != COUNTS_ROW:
            h1 = source.unpack([b]).column("h1").to_numpy()
            assert (reducer_of(h1, 2) == x).all()
    counts = source.unpack([b for x, b in zip(r, blobs, strict=True) if x == COUNTS_ROW])
    assert counts.column("records").to_pylist() == [50] and counts.column("side").to_pylist() == [0]


def _matched(rows: dict[str, list]) -> pa.Table:
    """What one matching task returns for these (r, blob) rows, in two batches as Spark may send them."""
    batch = pa.RecordBatch.from_pydict(rows)
    return pa.Table.from_batches(match.match(iter([batch.slice(0, 1), batch.slice(1)])), match.OUT)
