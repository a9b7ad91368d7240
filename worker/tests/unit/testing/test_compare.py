"""kmirror.testing.compare: a copy compared with its source, topic by topic."""

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
