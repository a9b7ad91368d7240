"""Pure parts of kmirror.testing.compare and kmirror.health.lag."""

from kmirror.health.lag import NO_OFFSET, compute, total
from kmirror.testing.compare import compare


def rec(i: int, key: bytes | None = b"k"):
    return (key, b"v%d" % i, (("h", b"x"),), 1_700_000_000_000 + i)


def test_identical_copy():
    src = {("t", 0): [rec(1), rec(2)], ("t", 1): [rec(3)]}
    result = compare(src, {k: list(v) for k, v in src.items()})
    assert result["t"].identical
    assert (result["t"].source_records, result["t"].target_records) == (3, 3)
    assert result["t"].partitions == {0, 1}


def test_missing_duplicates_and_order():
    src = {("t", 0): [rec(1), rec(2), rec(3)]}
    row = compare(src, {("t", 0): [rec(1), rec(3), rec(3)]})["t"]
    assert (row.missing, row.duplicates, row.out_of_order) == (1, 1, 0)
    row = compare(src, {("t", 0): [rec(2), rec(1), rec(3)]})["t"]
    assert (row.missing, row.duplicates, row.out_of_order) == (0, 0, 1)
    assert not row.identical


def test_record_in_the_wrong_partition_is_missing_there():
    row = compare({("t", 0): [rec(1)]}, {("t", 1): [rec(1)]})["t"]
    assert row.missing == 1 and row.target_records == 1 and not row.identical


def test_lag_rows_like_the_offset_checker():
    rows = compute(
        "g",
        {("t", 0): 5, ("t", 1): 3},
        {("t", 0): 0, ("t", 1): 0, ("t", 2): 2},
        {("t", 0): 5, ("t", 1): 4, ("t", 2): 9},
        {("t", 0): "c1@h"},
    )
    assert [(r.partition, r.offset, r.log_size, r.lag, r.owner) for r in rows] == [
        (0, 5, 5, 0, "c1@h"),
        (1, 3, 4, 1, "none"),
        (2, NO_OFFSET, 9, 7, "none"),
    ]
    assert total(rows) == 8
    assert rows[0].as_dict()["log_size"] == 5
