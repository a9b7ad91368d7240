"""Burrow-style evaluation (kmirror.health.rules) on scripted samples: every status and transition."""

from __future__ import annotations

import pytest

from kmirror.health import rules as health
from kmirror.health.rules import Sample, Status, Window, evaluate, exit_code, group_status

pytestmark = pytest.mark.health

W = 5


def seq(offsets, ends, consumed=True, t0=1000.0, step=60.0):
    """Samples one `step` apart: committed offsets and log end offsets, lag = end - offset."""
    consumed = consumed if isinstance(consumed, list) else [consumed] * len(offsets)
    return [
        Sample(t0 + i * step, o, e, max(0, e - max(o, 0)), c)
        for i, (o, e, c) in enumerate(zip(offsets, ends, consumed, strict=True))
    ]


def status(samples, now=None, window=W):
    return evaluate(samples, window, now).status


def assert_health(samples, expected, reason_part):
    h = evaluate(samples, W)
    assert h.status is expected
    assert reason_part in h.reason


def test_no_lag_is_ok():
    assert status(seq([10, 20, 30, 40, 50], [10, 20, 30, 40, 50])) is Status.OK


def test_any_zero_lag_in_window_is_ok_even_if_stuck_now():
    # Rule 1: lag was zero at the start of the window; offsets stopped since.
    s = seq([10, 10, 10, 10, 10], [10, 12, 14, 16, 18])
    assert status(s) is Status.OK
    assert "zero" in evaluate(s, W).reason


def test_lag_decreasing_is_ok():
    assert status(seq([0, 20, 40, 60, 80], [30, 45, 60, 75, 90])) is Status.OK


def test_lag_constant_while_offsets_advance_is_warn():
    # Burrow's rule: offsets advance but the lag never decreases -> WARN.
    assert status(seq([0, 10, 20, 30, 40], [5, 15, 25, 35, 45])) is Status.WARN


def test_lag_increasing_while_offsets_advance_is_warn():
    assert_health(seq([0, 10, 20, 30, 40], [5, 20, 35, 50, 65]), Status.WARN, "5 -> 25")


def test_one_decrease_anywhere_in_window_keeps_ok():
    assert status(seq([0, 10, 30, 40, 50], [5, 20, 35, 50, 65])) is Status.OK


def test_offset_not_moving_with_consumer_present_is_stall():
    assert_health(seq([7, 7, 7, 7, 7], [9, 11, 13, 15, 17]), Status.STALL, "unchanged")


def test_offset_not_moving_with_fixed_lag_is_stall():
    # Burrow: "the lag is either fixed or increasing" while the offset does not change.
    assert status(seq([7, 7, 7, 7, 7], [9, 9, 9, 9, 9])) is Status.STALL


def test_offset_not_moving_without_consumer_is_stop():
    assert_health(seq([7, 7, 7, 7, 7], [9, 11, 13, 15, 17], consumed=False), Status.STOP, "no consumer")


def test_never_committed_and_nobody_consuming_is_stop():
    assert status(seq([-1] * 5, [3] * 5, consumed=False)) is Status.STOP


def test_consumer_left_recently_after_progress_is_not_yet_stop():
    # Offsets moved until the 4th sample (span 180 s), the consumer left; 60 s idle < 180 s active.
    s = seq([0, 10, 20, 30, 30], [40, 45, 50, 55, 60], consumed=[True, True, True, True, False])
    assert status(s) is Status.OK  # lag went down inside the window; not stopped yet
    # Evaluated later with the same window: idle (300 s) now exceeds the active span (180 s).
    assert status(s, now=s[3].timestamp + 300) is Status.STOP


def test_stop_takes_precedence_over_stall_and_warn():
    assert status(seq([5, 5, 5, 5, 5], [6, 7, 8, 9, 10], consumed=False)) is Status.STOP


def test_rewind_is_reported():
    assert_health(seq([50, 60, 70, 20, 25], [80, 90, 100, 110, 120]), Status.REWIND, "from 70 to 20")


def test_rewind_after_zero_lag_is_still_reported():
    # The window holds zero-lag samples, then the group was reset to an earlier offset.
    s = seq([10, 20, 30, 30, 5], [10, 20, 30, 30, 30])
    assert status(s) is Status.REWIND


def test_rewind_seen_on_a_partial_window():
    assert status(seq([30, 5], [30, 30])) is Status.REWIND


def test_rewind_recovered_falls_back_to_other_rules():
    # Went back from 40 to 10, then got past 40 again: the rewind is made good; the lag decreases -> OK.
    assert status(seq([30, 40, 10, 45, 60], [70, 75, 80, 85, 90])) is Status.OK


def test_rewind_with_zero_lag_now_is_ok():
    assert status(seq([10, 20, 5, 15, 30], [10, 20, 30, 30, 30])) is Status.OK


def test_partial_window_does_not_call_a_trend():
    h = evaluate(seq([7, 7, 7], [9, 11, 13]), W)
    assert h.status is Status.OK
    assert h.complete == pytest.approx(0.6)
    assert "warming up" in h.reason


def test_window_only_uses_the_last_samples():
    s = seq([0, 10, 10, 10, 10, 10, 10], [10, 10, 12, 14, 16, 18, 20])
    # The whole sequence had zero lag at the start; the last 5 samples never had -> STALL.
    assert status(s[:5]) is Status.OK
    assert status(s) is Status.STALL


def test_empty_is_notfound():
    assert status([]) is Status.NOTFOUND


def test_transitions_over_a_running_window():
    """One partition through OK -> WARN -> STALL -> STOP -> REWIND -> OK, sample by sample."""
    w = Window(3)
    t = 0.0
    seen = []

    def step(offset, end, consumed=True):
        nonlocal t
        t += 60
        w.add({("t", 0): Sample(t, offset, end, max(0, end - offset), consumed)})
        seen.append(w.evaluate()[("t", 0)].status)

    for i in range(3):  # keeping up
        step(10 * i, 10 * i)
    for i in range(3):  # falling behind
        step(30 + 10 * i, 40 + 20 * i)
    for i in range(3):  # same offset committed, records keep coming
        step(50, 90 + 10 * i)
    for i in range(3):  # consumer gone
        step(50, 120 + 10 * i, consumed=False)
    step(5, 160)  # reset back
    step(8, 160)
    for i in range(3):  # catches up
        step(60 + 50 * i, 160)
    assert seen == [
        *[Status.OK] * 3,
        Status.OK,  # zero lag still in the window
        Status.OK,
        Status.WARN,  # offsets advance, lag 10 -> 20 -> 30
        Status.WARN,  # the offset still moved inside this window
        Status.STALL,
        Status.STALL,
        Status.STOP,
        Status.STOP,
        Status.STOP,
        Status.REWIND,
        Status.REWIND,  # still below the offset before the reset
        Status.OK,  # the rewind left the window; lag decreasing
        Status.OK,
        Status.OK,  # lag 0
    ]


def test_group_status_is_worst_partition_in_burrow_terms():
    ok = evaluate(seq([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]), W)
    warn = evaluate(seq([0, 10, 20, 30, 40], [5, 15, 25, 35, 45]), W)
    stall = evaluate(seq([7] * 5, [9, 11, 13, 15, 17]), W)
    rewind = evaluate(seq([50, 60, 70, 20, 25], [80, 90, 100, 110, 120]), W)
    assert group_status([ok, ok]) == (Status.OK, Status.OK)
    assert group_status([ok, warn]) == (Status.WARN, Status.WARN)
    assert group_status([warn, stall, ok]) == (Status.ERR, Status.STALL)
    assert group_status([stall, rewind]) == (Status.ERR, Status.REWIND)
    assert group_status([]) == (Status.NOTFOUND, Status.NOTFOUND)


def test_exit_codes():
    assert [exit_code(s) for s in Status] == [3, 0, 1, 2, 2, 2, 2]


def test_window_forgets_partitions_and_round_trips_json():
    w = Window(3)
    w.add({("a", 0): Sample(1, 1, 2, 1, True), ("a", 1): Sample(1, 5, 5, 0, False)})
    w.add({("a", 0): Sample(2, 2, 3, 1, True)})
    assert set(w.samples) == {("a", 0)}
    back = Window.from_json(w.to_json(), 3)
    assert back.samples == w.samples
    assert Window.from_json(w.to_json(), 1).samples[("a", 0)][0].timestamp == 2


def test_unowned_partitions():
    owners = {("t", 0): "c1@h", ("t", 1): "none"}
    assert health.unowned("STABLE", True, owners) == [("t", 1)]
    assert health.unowned("EMPTY", False, owners) == [("t", 0), ("t", 1)]
    assert health.unowned("STABLE", False, owners) == []
