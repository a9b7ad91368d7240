"""The stall watch (kmirror.mirror.stalls) on statistics documents shaped as librdkafka writes them.

The integration test test_broker_faults.py::test_a_stalled_fetch_gets_a_new_consumer runs it on a real
consumer's statistics; here each rule on its own, with a clock the test moves.
"""

from __future__ import annotations

import json

from kmirror.mirror import metrics
from kmirror.mirror.stalls import MAX_AFTER_S, STALL_AFTER_S, Fetch, StallWatch, fetches


def stats(**parts: tuple[str, int, int, int]) -> dict[str, object]:
    """A consumer statistics document: partition "topic-N" -> (fetch_state, app_offset, lag, fetchq_cnt)."""
    topics: dict[str, dict[str, dict[str, object]]] = {}
    for name, (state, position, lag, queued) in parts.items():
        topic, pid = name.rsplit("_", 1)
        partitions = topics.setdefault(topic, {"partitions": {"-1": {"fetch_state": "none"}}})["partitions"]
        partitions[pid] = {
            "fetch_state": state,
            "app_offset": position,
            "consumer_lag": lag,
            "fetchq_cnt": queued,
        }
    return {"topics": {t: {"partitions": p} for t, p in ((t, v["partitions"]) for t, v in topics.items())}}


def test_fetches_reads_the_assigned_partitions_only() -> None:
    doc = stats(
        orders_0=("active", 10, 3, 0), orders_1=("stopped", 5, 0, 0), orders_2=("offset-query", -1001, -1, 0)
    )
    assert fetches(doc) == {
        ("orders", 0): Fetch("active", 10, 3, 0),
        ("orders", 2): Fetch("offset-query", -1001, -1, 0),
    }


def test_metrics_hands_back_the_document_it_folded() -> None:
    doc = stats(orders_0=("active", 10, 3, 0))
    snap = metrics.Snapshot("east", 0)
    assert metrics.consumer_statistics(json.dumps(doc), snap) == doc
    assert snap.partition_lag == {("orders", 0): 3}


def test_a_partition_with_records_waiting_and_no_progress_is_stalled_after_the_watch_time() -> None:
    watch = StallWatch()
    frozen = {("orders", 0): Fetch("active", 10, 14, 0), ("orders", 1): Fetch("active", 7, 0, 0)}
    assert watch.observe(100.0, frozen, reading=True) == []
    assert watch.observe(100.0 + STALL_AFTER_S - 1, frozen, reading=True) == []
    found = watch.observe(100.0 + STALL_AFTER_S, frozen, reading=True)
    assert found == [(("orders", 0), Fetch("active", 10, 14, 0), STALL_AFTER_S)]
    assert watch.found == found  # what the engine's loop looks at


def test_a_fetcher_stuck_in_another_state_is_stalled_without_a_known_lag() -> None:
    watch = StallWatch()
    stuck = {("orders", 0): Fetch("validate-epoch-wait", 10, -1, 0)}
    watch.observe(0.0, stuck, reading=True)
    assert [k for k, _, _ in watch.observe(STALL_AFTER_S, stuck, reading=True)] == [("orders", 0)]


def test_progress_queued_records_and_an_idle_partition_are_not_stalls() -> None:
    watch = StallWatch()
    for t in range(12):
        seen = {
            ("a", 0): Fetch("active", 10 + t, 5, 0),  # moves at each document
            ("b", 0): Fetch("active", 3, 9, 500),  # fetched: the stream is slow to read it
            ("c", 0): Fetch("active", 8, 0, 0),  # nothing to read
        }
        assert watch.observe(t * STALL_AFTER_S, seen, True) == []


def test_a_position_that_moved_starts_the_watch_again() -> None:
    watch = StallWatch()
    watch.observe(0.0, {("a", 0): Fetch("active", 10, 5, 0)}, True)
    watch.observe(STALL_AFTER_S - 1, {("a", 0): Fetch("active", 12, 5, 0)}, True)
    assert watch.observe(STALL_AFTER_S + 1, {("a", 0): Fetch("active", 12, 5, 0)}, True) == []
    assert watch.observe(2 * STALL_AFTER_S - 1, {("a", 0): Fetch("active", 12, 5, 0)}, True) != []


def test_a_stream_blocked_on_its_target_is_not_watched() -> None:
    watch = StallWatch()
    frozen = {("a", 0): Fetch("active", 10, 5, 0)}
    watch.observe(0.0, frozen, True)
    assert watch.observe(STALL_AFTER_S, frozen, reading=False) == []  # paused on purpose
    assert watch.observe(STALL_AFTER_S + 1, frozen, True) == []  # the watch starts again
    assert watch.observe(2 * STALL_AFTER_S + 1, frozen, True) != []


def test_after_a_replacement_the_next_one_waits_twice_as_long_until_everything_fetches() -> None:
    watch = StallWatch()
    frozen = {("a", 0): Fetch("active", 10, 5, 0)}
    now = 0.0
    waits = []
    for _ in range(8):
        start = now
        watch.observe(now, frozen, True)
        while not watch.observe(now, frozen, True):
            now += 1.0
        waits.append(now - start)
        watch.acted()
    assert waits[:3] == [STALL_AFTER_S, 2 * STALL_AFTER_S, 4 * STALL_AFTER_S]
    assert max(waits) == MAX_AFTER_S
    watch.observe(now, {("a", 0): Fetch("active", 11, 0, 0)}, True)  # fetching again
    assert watch.after_s == STALL_AFTER_S
