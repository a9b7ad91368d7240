"""Offset translation (kmirror.failover.offsetsync, kmirror.failover.offsetsync.build_rows): pure logic.

The central property is checked against a model of a mirrored partition: source offsets with gaps
(compaction, transaction markers), other writers on the target, crashes that re-write records since the
last commit, and sync points taken exactly as the engine takes them (the consumer's position and the
target's end at a commit point, or at an assignment). For every group offset C the translation T never
skips a record: every record with source offset >= C has a copy at a target offset >= T.
"""

from __future__ import annotations

import random

import pytest

from kmirror.failover.offsetsync import (
    LATEST_SLOT,
    Checkpoint,
    SyncData,
    SyncPoint,
    SyncStore,
    build_rows,
    checkpoint_record,
    is_internal_group,
    parse_record,
    plan_commits,
    sync_record,
    sync_slots,
)

Moment = tuple[list[tuple[int, int]], dict[int, int]]


def simulate(seed: int) -> tuple[list[int], list[Moment]]:
    """One source partition mirrored with crashes and other writers.

    Returns the source offsets and, after every step, what a failover could see if the source died
    right then: the sync points (P, E) written so far and, per source offset copied so far, the
    greatest target offset holding a copy. A crash does not mean the records since the last commit are
    copied again: the source may die before the restarted mirror gets to them."""
    rng = random.Random(seed)
    source, o = [], rng.randrange(0, 50)
    for _ in range(rng.randrange(50, 400)):
        source.append(o)
        o += 1 if rng.random() < 0.8 else rng.randrange(2, 6)  # gaps: compaction, markers
    target: list[int] = [-1] * rng.randrange(0, 20)  # unrelated records already there
    syncs: list[tuple[int, int]] = []
    copies: dict[int, int] = {}
    moments: list[Moment] = []
    committed = 0  # index into source of the next record to mirror (the group's committed position)
    ever_committed = False
    hold = 0
    position = committed
    syncs.append((source[0], len(target)))  # first assignment: where reading starts -> the target end
    while position < len(source):
        for _ in range(rng.randrange(1, 30)):  # a batch
            if position >= len(source):
                break
            copies[source[position]] = len(target)
            target.append(source[position])
            position += 1
            if rng.random() < 0.1:
                target.append(-1)  # another writer
        r = rng.random()
        if r < 0.6:  # commit point: flushed, the next record is not produced yet
            nxt = source[position] if position < len(source) else source[-1] + 1
            if nxt >= hold:  # past everything an earlier owner can have copied (the engine's rule)
                syncs.append((nxt, len(target)))
            committed = position
            ever_committed = True
        elif r < 0.75:  # crash: back to the last commit; the new owner holds until past what was read
            position = committed
            hold = max(copies) + 1  # the engine takes the source's end, which is at least this
            if not ever_committed:  # a fresh partition's assignment point (the engine's rule)
                syncs.append((source[position], len(target)))
        moments.append((list(syncs), dict(copies)))
    return source, moments


@pytest.mark.parametrize("seed", range(60))
def test_translation_never_skips_a_record(seed):
    """At every moment (the source may die at any time), no translation skips a copied record."""
    source, moments = simulate(seed)
    rng = random.Random(seed)
    for syncs, copies in moments:
        store = SyncStore()
        for p, e in syncs:
            store.add("t", 0, SyncPoint(p, e, 0))
        for c in {*rng.sample(range(source[0], source[-1] + 2), 8), source[0], source[-1] + 1}:
            tr = store.translate("t", 0, c)
            assert tr is not None
            assert tr.sync_source <= c
            for s_off, t_off in copies.items():
                if s_off >= c:
                    assert t_off >= tr.target, (
                        f"seed {seed}: offset {s_off} (at {t_off}) skipped by C={c} -> {tr}"
                    )


def test_exact_at_a_sync_point_and_the_earlier_point_between_two():
    store = SyncStore()
    store.add("t", 0, SyncPoint(100, 130, 1))
    store.add("t", 0, SyncPoint(200, 230, 2))
    assert store.translate("t", 0, 200).target == 230  # exact
    between = store.translate("t", 0, 199)
    assert between.target == 130 and between.rereads == 99  # the earlier point, never interpolated
    assert store.translate("t", 0, 99) is None  # before every sync point: no translation
    assert store.translate("t", 1, 150) is None


def test_the_smaller_target_of_one_source_offset_wins_and_the_last_point_before_translates():
    store = SyncStore()
    store.add("t", 0, SyncPoint(10, 20, 1))  # a fresh partition's first assignment
    store.add("t", 0, SyncPoint(10, 25, 2))  # assigned again after a crash: copies at 20-24 may exist
    assert store.translate("t", 0, 10).target == 20
    store.add("t", 0, SyncPoint(30, 50, 3))
    assert store.translate("t", 0, 29).target == 20  # the last point at or before the offset
    assert store.translate("t", 0, 31).target == 50


def test_thinning_bounds_memory_and_keeps_old_points():
    store = SyncStore(max_points=100)
    for i in range(1000):
        store.add("t", 0, SyncPoint(i * 10, i * 10 + 7, i))
    assert len(store) <= 100
    assert store.translate("t", 0, 5) is None or store.translate("t", 0, 5).target <= 7
    assert store.translate("t", 0, 9990).target == 9997  # the newest stay
    old = store.translate("t", 0, 1234)
    assert old is not None and old.target <= 1237  # coarser, never past


def test_slots_keep_points_at_growing_distances_after_compaction():
    """What compaction keeps (the last value per key) still translates, coarsely, every offset."""
    assert sync_slots(None, 100) == [LATEST_SLOT]
    assert sync_slots(5, 9) == [LATEST_SLOT, "1.0", "2.0", "3.1"]
    assert sync_slots(9, 9) == [LATEST_SLOT]
    compacted: dict[str, SyncPoint] = {}
    previous = None
    for position in range(0, 100_000, 37):
        for slot in sync_slots(previous, position):
            compacted[slot] = SyncPoint(position, position + 1000, 0)
        previous = position
    assert len(compacted) < 40
    store = SyncStore()
    for point in compacted.values():
        store.add("t", 0, point)
    head = previous
    for lag in (50, 500, 5_000, 30_000):  # the slots reach back to the highest power of two below head
        tr = store.translate("t", 0, head - lag)
        assert tr is not None and tr.target <= head - lag + 1000  # never past
        assert tr.rereads <= 2 * lag + 37  # within about the group's lag behind the newest point
    assert store.translate("t", 0, head - 50_000) is None
    # A group that lags further has its own checkpoint, which is a sync point too.
    data = SyncData(store, {})
    key, value = checkpoint_record("m", Checkpoint("g", "t", 0, head - 50_000, head - 49_000, 0, 0))
    data.add_record("m", key, value)
    assert store.translate("t", 0, head - 50_000).target == head - 49_000


def test_records_round_trip_and_foreign_or_bad_records_are_ignored():
    key, value = sync_record("mirror-east", "orders", 3, "2.1", SyncPoint(10, 20, 30))
    assert parse_record(key, value) == ("sync", "mirror-east", ("orders", 3, SyncPoint(10, 20, 30)))
    cp = Checkpoint("app", "orders", 3, 15, 20, 10, 40)
    ck, cv = checkpoint_record("mirror-east", cp)
    assert parse_record(ck, cv) == ("checkpoint", "mirror-east", cp)
    assert parse_record(b"garbage", b"{}") is None
    assert parse_record(key, None) is None  # tombstone
    data = SyncData.empty()
    data.add_record("mirror-west", key, value)  # another mirror's data
    data.add_record("mirror-east", ck, cv)
    assert data.group_checkpoints("app") == {("orders", 3): cp}
    assert data.store.translate("orders", 3, 10) is None  # mirror-west's sync point was not taken
    assert data.store.translate("orders", 3, 15).target == 20  # the checkpoint is a sync point


def test_group_sync_plan_never_moves_a_group_backwards():
    store = SyncStore()
    store.add("t", 0, SyncPoint(100, 150, 1))
    store.add("t", 1, SyncPoint(100, 150, 1))
    store.add("t", 2, SyncPoint(100, 150, 1))
    commits, untranslated = plan_commits(
        store, {("t", 0): 120, ("t", 1): 120, ("t", 2): 50, ("u", 0): 9}, {("t", 1): 160}
    )
    by = {(c.topic, c.partition): c for c in commits}
    assert by[("t", 0)].moves and by[("t", 0)].translation.target == 150
    assert not by[("t", 1)].moves  # already further on the target
    assert untranslated == [("t", 2)]  # behind the first sync point; ("u", 0) is not mirrored


def test_internal_and_mirror_groups_are_never_synced():
    assert is_internal_group("mirror", ["mirror"])
    assert is_internal_group("__kmirror-probe", [])
    assert not is_internal_group("payments", ["mirror"])


def test_failover_rows_from_checkpoints_and_from_the_live_source():
    data = SyncData.empty()
    data.store.add("t", 0, SyncPoint(100, 150, 1_000))
    data.store.add("t", 0, SyncPoint(200, 260, 2_000))
    data.store.add("t", 1, SyncPoint(100, 150, 1_000))
    data.checkpoints[("g", "t", 0)] = Checkpoint("g", "t", 0, 210, 260, 200, 5_000)
    data.checkpoints[("g", "t", 1)] = Checkpoint("g", "t", 1, 90, 140, 80, 5_000)
    rows = build_rows(
        data,
        "g",
        source_committed=None,
        target_committed={("t", 1): 10},
        log_ends={("t", 0): 300},
        now_ms=15_000,
    )
    r0, r1 = rows
    assert (r0.source_from, r0.translated, r0.sync_point, r0.action, r0.lag) == (
        "checkpoint",
        260,
        200,
        "commit",
        40,
    )
    assert r0.age_s == 10.0
    # Offset 90 lies before every sync point, but its checkpoint was translated while older points existed.
    assert (r1.translated, r1.action) == (140, "commit")
    live = build_rows(
        data,
        "g",
        source_committed={("t", 0): 150, ("x", 0): 5},
        target_committed={("t", 0): 999},
        log_ends={},
        now_ms=3_000,
    )
    assert [(r.topic, r.source_from, r.translated, r.action) for r in live] == [("t", "source", 150, "keep")]


# --- exact translation between two sync points of one run (issue 24) --------------------------------

RunMoment = tuple[list[SyncPoint], dict[int, int]]


def simulate_runs(seed: int, holes: float, others: float) -> tuple[list[int], list[RunMoment]]:
    """As :func:`simulate`, with each point carrying the stream's run and the records it read in that
    run (what the engine writes with --groups): a crash starts a new run. ``holes`` and ``others``: the
    chances of a gap in the source offsets and of another writer's record on the target."""
    rng = random.Random(seed)
    source, o = [], rng.randrange(0, 50)
    for _ in range(rng.randrange(50, 400)):
        source.append(o)
        o += 1 if rng.random() >= holes else rng.randrange(2, 6)
    target: list[int] = [-1] * rng.randrange(0, 20)
    points: list[SyncPoint] = []
    copies: dict[int, int] = {}
    moments: list[RunMoment] = []
    committed = position = hold = 0
    ever_committed = False
    run, read = "run-0", 0
    points.append(SyncPoint(source[0], len(target), 0, run=run, count=0))
    while position < len(source):
        for _ in range(rng.randrange(1, 30)):
            if position >= len(source):
                break
            copies[source[position]] = len(target)
            target.append(source[position])
            position += 1
            read += 1
            if rng.random() < others:
                target.append(-1)
        r = rng.random()
        if r < 0.6:
            nxt = source[position] if position < len(source) else source[-1] + 1
            if nxt >= hold:
                points.append(SyncPoint(nxt, len(target), 0, run=run, count=read))
            committed = position
            ever_committed = True
        elif r < 0.75:  # crash: a new owner, a new run
            position = committed
            hold = max(copies) + 1
            run, read = f"run-{len(moments)}", 0
            if not ever_committed:
                points.append(SyncPoint(source[position], len(target), 0, run=run, count=0))
        moments.append((list(points), dict(copies)))
    return source, moments


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize(("holes", "others"), [(0.0, 0.0), (0.2, 0.0), (0.0, 0.1), (0.2, 0.1)])
def test_translation_between_points_of_one_run_never_skips(seed, holes, others):
    source, moments = simulate_runs(seed, holes, others)
    rng = random.Random(seed)
    for step, (points, copies) in enumerate(moments):
        store = SyncStore()
        for point in points:
            store.add("t", 0, point)
        # Checkpoints taken at an earlier moment are sync points too (kmirror.failover.offsetsync.SyncData)
        earlier = SyncStore()
        for point in moments[rng.randrange(0, step + 1)][0]:
            earlier.add("t", 0, point)
        for c in rng.sample(range(source[0], source[-1] + 2), 3):
            tr = earlier.translate("t", 0, c)
            if tr is not None:
                store.add("t", 0, SyncPoint(c, tr.target, 0, tr.sync_source))
        for c in {*rng.sample(range(source[0], source[-1] + 2), 8), source[0], source[-1] + 1}:
            tr = store.translate("t", 0, c)
            assert tr is not None and tr.sync_source <= c
            for s_off, t_off in copies.items():
                if s_off >= c:
                    assert t_off >= tr.target, f"seed {seed}: {s_off} (at {t_off}) skipped by C={c} -> {tr}"


def test_a_hole_free_partition_mirrored_alone_translates_exactly_between_points():
    """No holes, no other writer, no crash: every offset between two points is exact (re-reads 0)."""
    store = SyncStore()
    store.add("t", 0, SyncPoint(100, 1000, 1, run="a", count=0))
    store.add("t", 0, SyncPoint(60_100, 61_000, 2, run="a", count=60_000))
    for c in (100, 101, 24_000, 60_099):
        tr = store.translate("t", 0, c)
        assert (tr.target, tr.rereads) == (1000 + c - 100, 0)


@pytest.mark.parametrize(
    ("later", "why"),
    [
        (SyncPoint(200, 1100, 2, run="a", count=99), "a hole in the source offsets"),
        (SyncPoint(200, 1101, 2, run="a", count=100), "another writer (or a copy twice) on the target"),
        (SyncPoint(200, 1100, 2, run="b", count=100), "another run (a reassignment in between)"),
        (SyncPoint(200, 1100, 2), "a point without run (written before this version)"),
    ],
)
def test_the_earlier_point_when_the_range_is_not_provably_one_to_one(later, why):
    store = SyncStore()
    store.add("t", 0, SyncPoint(100, 1000, 1, run="a", count=0))
    store.add("t", 0, later)
    tr = store.translate("t", 0, 150)
    assert (tr.target, tr.rereads) == (1000, 50), why


def test_run_and_count_survive_the_sync_record():
    point = SyncPoint(7, 9, 3, run="abc", count=5)
    key, value = sync_record("m", "t", 0, LATEST_SLOT, point)
    assert parse_record(key, value) == ("sync", "m", ("t", 0, point))
    old = SyncPoint(7, 9, 3)
    key, value = sync_record("m", "t", 0, LATEST_SLOT, old)
    assert b'"r"' not in value and parse_record(key, value) == ("sync", "m", ("t", 0, old))


def test_a_recreated_topic_drops_the_old_topics_points_and_ignores_late_ones():
    """A topic deleted and recreated under its name is another topic: its offsets start again, and the
    old topic's points (and checkpoints taken before) would translate them to the old copies."""
    store = SyncStore()
    store.add("t", 0, SyncPoint(0, 0, 1, run="a", count=0, topic_id="old"))
    store.add("t", 0, SyncPoint(500, 500, 2, run="a", count=500, topic_id="old"))
    store.add("t", 0, SyncPoint(40, 40, 3, measured_at=0))  # a checkpoint of the old topic
    assert store.translate("t", 0, 100).target == 100
    store.add("t", 0, SyncPoint(0, 500, 10, run="b", count=0, topic_id="new"))
    store.add("t", 0, SyncPoint(400, 400, 4, run="a", count=400, topic_id="old"))  # read late: older
    store.add("t", 0, SyncPoint(20, 25, 11, measured_at=0))  # a checkpoint after: kept
    tr = store.translate("t", 0, 100)
    assert (tr.target, tr.sync_source) == (25, 0)  # the new topic's checkpoint, never the old points
    assert [p.topic_id for p in store._points[("t", 0)]] == ["new", ""]


def test_the_topic_id_survives_the_sync_record():
    point = SyncPoint(7, 9, 3, run="abc", count=5, topic_id="Qx1")
    key, value = sync_record("m", "t", 0, LATEST_SLOT, point)
    assert parse_record(key, value) == ("sync", "m", ("t", 0, point))


def test_sync_points_record_the_source_cluster_failover_reads_headers_of() -> None:
    """Issue 34: the source cluster's id is kept with the sync points, so a failover with the source gone
    never takes it from a copy's (forgeable) header; the newest point that names one wins."""
    data = SyncData.empty()
    old = sync_record("m", "t", 0, LATEST_SLOT, SyncPoint(10, 10, 1000))  # written before the field
    data.add_record("m", *old)
    assert data.store.source_cluster("t", 0) is None
    for ms, cluster in ((2000, "EAST-1"), (3000, "EAST-2")):
        key, value = sync_record("m", "t", 0, f"1.{ms}", SyncPoint(ms, ms, ms, cluster=cluster))
        assert b'"c":"%s"' % cluster.encode() in value
        data.add_record("m", key, value)
    data.add_record("m", *checkpoint_record("m", Checkpoint("g", "t", 0, 5000, 5000, 3000, 4000)))
    assert data.store.source_cluster("t", 0) == "EAST-2"
    assert data.store.source_cluster("t", 1) is None
