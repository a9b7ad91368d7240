"""--queue.size is records per stream: its producers share it (kmirror.mirror.engine.queue_shares)."""

from __future__ import annotations

import pytest

from kmirror.mirror.engine import queue_shares


@pytest.mark.parametrize(
    ("records", "producers", "shares"),
    [
        (10_000, 2, [5_000, 5_000]),
        (10_001, 2, [5_001, 5_000]),
        (10, 3, [4, 3, 3]),
        (7, 1, [7]),
        (1, 2, [1]),  # fewer records than producers: one producer per record, never a 0 (no limit) share
        (3, 5, [1, 1, 1]),
    ],
)
def test_shares_add_up_to_the_stream_queue_and_none_is_unlimited(records, producers, shares):
    got = queue_shares(records, producers)
    assert got == shares
    assert sum(got) == records
    assert all(s >= 1 for s in got)


def test_no_limit_in_the_file_stays_no_limit_for_every_producer():
    assert queue_shares(0, 2) == [0, 0]
