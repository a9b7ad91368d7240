"""kmirror.health.lag: lag rows like the offset checker's, without a cluster."""

from __future__ import annotations

import pytest

from kmirror.health.lag import NO_OFFSET, compute, total

pytestmark = pytest.mark.health


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
