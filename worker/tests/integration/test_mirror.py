"""`kmirror run` against real embedded brokers: fidelity, topics, filters, failures, restarts."""

from __future__ import annotations

import signal
import subprocess
import time

import mirror_harness as mh
from confluent_kafka.admin import AdminClient, ConfigResource

from kmirror.testing.kafka import kafka_clusters as clusters


def murmur2(data: bytes) -> int:
    """Java's org.apache.kafka.common.utils.Utils.murmur2, written out independently of librdkafka."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(length // 4):
        k = int.from_bytes(data[i * 4 : i * 4 + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = length & ~3
    rem = length % 4
    if rem == 3:
        h ^= data[tail + 2] << 16
    if rem >= 2:
        h ^= data[tail + 1] << 8
    if rem >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def java_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def last_assignment(w: mh.Worker) -> list[str]:
    """The partitions the worker owns now, sorted. Rebalances are incremental (cooperative-sticky): each
    "assigned" line adds partitions, each "revoked" or "lost" line takes some away."""
    owned: set[str] = set()
    for line in w.log().splitlines():
        for verb in (": assigned ", ": revoked ", ": lost "):
            if verb in line:
                named = {p for p in line.split(verb, 1)[1].split(" (", 1)[0].split(", ") if p != "nothing"}
                owned = owned | named if verb == ": assigned " else owned - named
    return sorted(owned)


def test_murmur2_matches_java_reference_values():
    # Values from Kafka's own UtilsTest (signed 32-bit results).
    def signed(v: int) -> int:
        return v - (1 << 32) if v >= 1 << 31 else v

    assert signed(murmur2(b"21")) == -973932308
    assert signed(murmur2(b"foobar")) == -790332482
    assert signed(murmur2(b"a-little-bit-long-string")) == -985981536
    assert signed(murmur2(b"a-little-bit-longer-string")) == -1486304829
    assert signed(murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8")) == -58897971
    assert signed(murmur2(b"abc")) == 479470107


def test_fidelity_topic_creation_and_clean_stop(kafka, tmp_path, workers):
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, "orders", 3, {"retention.ms": "86400000", "max.message.bytes": "2000000"})
    mh.create_topic(src, "logs", 2)
    records = mh.make_records("orders", 3, 40) + mh.make_records("logs", 2, 30)
    # Edge cases: null key, tombstone (null value), a header with a null value, an empty value.
    records += [
        mh.Rec("orders", 0, None, b"no-key", (), 1_700_000_100_000),
        mh.Rec("orders", 1, b"deleted", None, (), 1_700_000_100_001),
        mh.Rec("logs", 1, b"h", b"null-header", (("trace", None), ("trace", b"dup")), 1_700_000_100_002),
        mh.Rec("logs", 0, b"e", b"", (), 1_700_000_100_003),
    ]
    mh.produce(src, records)

    w = mh.mirror_worker(tmp_path, src, tgt, "orders, logs", 2)
    workers.append(w)
    target = mh.read_all(tgt, ["orders", "logs"], len(records))
    mh.assert_mirrored(records, target, exact=True)

    parts = mh.topic_partitions(tgt)
    assert parts["orders"] == 3 and parts["logs"] == 2
    admin = AdminClient({"bootstrap.servers": tgt.bootstrap})
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "orders")])
    configs = {k: v.value for f in described.values() for k, v in f.result().items()}
    assert configs.get("retention.ms") == "86400000"
    assert configs.get("max.message.bytes") == "2000000"

    # Committed offsets reach the end of every partition, and SIGTERM exits 0.
    ends = {tp: len(rs) for tp, rs in mh.by_partition(records).items()}
    mh.wait_until(
        lambda: all(
            mh.committed(src, "mirror", t, n).get(p) == ends[(t, p)]
            for t, n in (("orders", 3), ("logs", 2))
            for p in range(n)
        ),
        what="offsets committed up to the end",
    )
    assert w.stop(signal.SIGTERM) == 0
    assert w.log().count("stopped cleanly") == 2


def test_target_topic_with_fewer_partitions_grows_to_the_source_count(kafka, tmp_path, workers):
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, "keyed", 4)
    mh.create_topic(tgt, "keyed", 2)  # exists already with fewer partitions: Kafka lets kmirror add two
    # As a keyed Java producer writes them: a key always lives in the same source partition.
    keys = [b"customer-%d" % (i % 13) for i in range(200)]
    records = [
        mh.Rec("keyed", java_partition(k, 4), k, b"v%d" % i, (), 1_700_000_000_000 + i)
        for i, k in enumerate(keys)
    ]
    mh.produce(src, records)
    w = mh.mirror_worker(tmp_path, src, tgt, "keyed", 1)
    workers.append(w)
    w.wait_for("added partitions to destination topic keyed: 4, was 2")
    target = mh.read_all(tgt, ["keyed"], len(records))
    assert mh.topic_partitions(tgt)["keyed"] == 4
    assert mh.by_partition(target) == mh.by_partition(records)
    assert "placed by key hash" not in w.log()


def test_filters_internal_topics_and_new_topics_without_restart(kafka, tmp_path, workers):
    src, tgt = kafka["source"], kafka["target"]
    for t in ("app.a", "app.b", "app.secret", "other", "__private"):
        mh.create_topic(src, t, 1)
        mh.produce(src, mh.make_records(t, 1, 5))
    w = mh.Worker(
        tmp_path,
        mh.run_args(
            mh.consumer_file(tmp_path, src),
            mh.producer_file(tmp_path, tgt),
            "--include",
            r"app\..*,__.*",
            "--exclude",
            ".*secret",
            "--num.streams",
            "1",
        ),
    )
    workers.append(w)
    mh.read_all(tgt, ["app.a", "app.b"], 10)
    # A topic that appears later is picked up by the running mirror.
    mh.create_topic(src, "app.c", 2)
    later = mh.make_records("app.c", 2, 10)
    mh.produce(src, later)
    mh.assert_mirrored(later, mh.read_all(tgt, ["app.c"], len(later)), exact=True)
    on_target = set(mh.topic_partitions(tgt))
    assert {"app.a", "app.b", "app.c"} <= on_target
    assert not on_target & {"app.secret", "other", "__private"}
    assert w.proc.poll() is None


def test_kill9_mid_stream_then_restart_loses_nothing(kafka, tmp_path, workers):
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, "live", 3)
    with mh.LiveTraffic(src, "live", 3) as traffic:
        first = mh.mirror_worker(tmp_path, src, tgt, "live", 2)
        workers.append(first)
        mh.wait_until(
            lambda: len(mh.read_all(tgt, ["live"], 300, timeout=5, settle=0.2)) >= 300,
            what="the first worker mirroring",
        )
        first.kill9()
        time.sleep(1)
        second = mh.mirror_worker(tmp_path, src, tgt, "live", 2)
        workers.append(second)
        second.wait_for("assigned")
        time.sleep(2)
    sent = traffic.sent
    assert len(sent) > 600
    mh.assert_mirrored(sent, mh.read_all(tgt, ["live"], len(sent), timeout=90))
    assert second.stop() == 0


def test_two_workers_one_group_one_killed_the_other_takes_over(kafka, tmp_path, workers):
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, "shared", 4)
    cfiles = (mh.consumer_file(tmp_path, src), mh.producer_file(tmp_path, tgt))
    (tmp_path / "b").mkdir()  # b's own consumer file: static members (the default) of one file share ids
    b_files = (mh.consumer_file(tmp_path / "b", src), cfiles[1])
    with mh.LiveTraffic(src, "shared", 4) as traffic:
        a = mh.Worker(tmp_path, mh.run_args(*cfiles, "--whitelist", "shared", "--num.streams", "1"), "a")
        b = mh.Worker(tmp_path, mh.run_args(*b_files, "--whitelist", "shared", "--num.streams", "1"), "b")
        workers.extend([a, b])
        a.wait_for("assigned")
        b.wait_for("assigned")
        mh.wait_until(
            lambda: sorted(last_assignment(a) + last_assignment(b)) == [f"shared[{p}]" for p in range(4)],
            timeout=30,
            what="both workers sharing the group",
        )
        time.sleep(2)
        a.kill9()
        # b is given a's partitions once the group evicts a (session.timeout.ms=6000).
        mh.wait_until(
            lambda: last_assignment(b) == [f"shared[{p}]" for p in range(4)],
            timeout=60,
            what="b owning every partition",
        )
        time.sleep(2)
    sent = traffic.sent
    mh.assert_mirrored(sent, mh.read_all(tgt, ["shared"], len(sent), timeout=90))
    assert b.stop() == 0


def test_paused_target_nothing_committed_unacknowledged_then_nothing_lost(kafka, tmp_path, workers):
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, "steady", 2)
    with mh.LiveTraffic(src, "steady", 2) as traffic:
        w = mh.mirror_worker(tmp_path, src, tgt, "steady", 1)
        workers.append(w)
        w.wait_for("assigned")
        time.sleep(2)
        tgt.pause()
        try:
            time.sleep(1.5)
            frozen = mh.committed(src, "mirror", "steady", 2)
            time.sleep(4)
            # The source kept growing and the worker kept reading, but without acknowledgements
            # from the target no offset moved.
            assert mh.committed(src, "mirror", "steady", 2) == frozen
        finally:
            tgt.resume()
        time.sleep(3)
    sent = traffic.sent
    mh.assert_mirrored(sent, mh.read_all(tgt, ["steady"], len(sent), timeout=90))
    mh.wait_until(
        lambda: sum(mh.committed(src, "mirror", "steady", 2).values()) == len(sent),
        what="commits catching up after the pause",
    )
    assert w.stop() == 0


def test_send_failure_stops_without_committing_past_it(kafka, tmp_path, workers):
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, "big", 1)
    records = [
        mh.Rec("big", 0, b"k", b"x" * (5000 if i == 5 else 10), (), 1_700_000_000_000 + i) for i in range(10)
    ]
    mh.produce(src, records)
    w = mh.Worker(
        tmp_path,
        mh.run_args(
            mh.consumer_file(tmp_path, src),
            mh.producer_file(tmp_path, tgt, "message.max.bytes=2000\n"),
            "--whitelist",
            "big",
            "--num.streams",
            "1",
        ),
    )
    workers.append(w)
    assert w.proc.wait(60) == 3
    log = w.log()
    assert "send failed for source consumer topic big partition 0 offset 5" in log
    assert "nothing after the last commit was committed" in log
    assert mh.committed(src, "mirror", "big", 1)[0] <= 5
    on_target = mh.read_all(tgt, ["big"], 5, timeout=20)
    assert [r.value for r in on_target] == [r.value for r in records[:5]]


def test_auto_offset_reset_latest_in_the_file_is_respected(kafka, tmp_path, workers):
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, "fresh", 1)
    mh.produce(src, mh.make_records("fresh", 1, 5))  # before the mirror group exists: not copied
    w = mh.Worker(
        tmp_path,
        mh.run_args(
            mh.consumer_file(tmp_path, src, extra="auto.offset.reset=latest\n"),
            mh.producer_file(tmp_path, tgt),
            "--whitelist",
            "fresh",
            "--num.streams",
            "1",
        ),
    )
    workers.append(w)
    w.wait_for("assigned")
    time.sleep(2)
    later = mh.make_records("fresh", 1, 5, start=100)
    mh.produce(src, later)
    mh.assert_mirrored(later, mh.read_all(tgt, ["fresh"], 5), exact=True)


def test_several_source_clusters_in_one_process(tmp_path, workers):
    with clusters("east", "west", "target", log_dir=tmp_path / "brokers") as c:
        mh.create_topic(c["east"], "east.orders", 2)
        mh.create_topic(c["west"], "west.orders", 2)
        east, west = mh.make_records("east.orders", 2, 20), mh.make_records("west.orders", 2, 20)
        mh.produce(c["east"], east)
        mh.produce(c["west"], west)
        files = [
            mh.consumer_file(tmp_path, c["east"], name="east.properties"),
            mh.consumer_file(tmp_path, c["west"], name="west.properties"),
        ]
        w = mh.Worker(
            tmp_path,
            mh.run_args(
                files,
                mh.producer_file(tmp_path, c["target"]),
                "--whitelist",
                ".*orders",
                "--num.streams",
                "1",
            ),
        )
        workers.append(w)
        got = mh.read_all(c["target"], ["east.orders", "west.orders"], 80)
        mh.assert_mirrored(east + west, got, exact=True)
        assert "east#0" in w.log() and "west#0" in w.log()
        assert w.stop() == 0


def test_bad_config_exits_2_and_touches_nothing(kafka, tmp_path):
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, "untouched", 1)
    bad = mh.producer_file(tmp_path, tgt, "acks=1\n")
    proc = subprocess.run(
        [*mh.KMIRROR, "run", *mh.run_args(mh.consumer_file(tmp_path, src), bad, "--whitelist", ".*")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(bad) in lines[0] and "acks=1" in lines[0] and "acks=all" in lines[0]
    assert "untouched" not in mh.topic_partitions(tgt)


def test_target_gone_past_delivery_timeout_stops_then_restart_loses_nothing(kafka, tmp_path, workers):
    """Asynchronous send failures (delivery timeout while the target is frozen): exit 3 naming the
    record, nothing committed past it, and a restart once the target is back copies everything."""
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, "frozen", 2)
    pfile = mh.producer_file(tmp_path, tgt, "delivery.timeout.ms=3000\nrequest.timeout.ms=2000\n")
    cfile = mh.consumer_file(tmp_path, src)
    first = mh.make_records("frozen", 2, 20)
    mh.produce(src, first)
    # A finite delivery timeout is refused as unsafe (an outage would stop the mirror): allowed here to
    # make the target fail records asynchronously.
    w = mh.Worker(
        tmp_path,
        mh.run_args(cfile, pfile, "--whitelist", "frozen", "--num.streams", "1", "--allow.unsafe"),
    )
    workers.append(w)
    mh.assert_mirrored(first, mh.read_all(tgt, ["frozen"], len(first)), exact=True)
    mh.wait_until(
        lambda: sum(mh.committed(src, "mirror", "frozen", 2).values()) == len(first), what="first commit"
    )
    tgt.pause()
    try:
        second = mh.make_records("frozen", 2, 20, start=100)
        mh.produce(src, second)
        assert w.proc.wait(60) == 3
    finally:
        tgt.resume()
    log = w.log()
    assert "send failed for source consumer topic frozen partition" in log
    assert " offset " in log.split("send failed for", 1)[1].splitlines()[0]
    # Nothing of the second wave was committed.
    assert sum(mh.committed(src, "mirror", "frozen", 2).values()) == len(first)
    again = mh.Worker(
        tmp_path,
        mh.run_args(
            cfile,
            mh.producer_file(tmp_path, tgt, name="p2.properties"),
            "--whitelist",
            "frozen",
            "--num.streams",
            "1",
        ),
    )
    workers.append(again)
    mh.assert_mirrored(first + second, mh.read_all(tgt, ["frozen"], len(first) + len(second)))
    # The frozen broker may append the first run's last requests when it resumes (they were on the wire),
    # so the records can be there before the restart read anything: its own commit is the proof.
    mh.wait_until(
        lambda: sum(mh.committed(src, "mirror", "frozen", 2).values()) == len(first) + len(second),
        what="the restart's commit of the second wave",
    )
    assert again.stop() == 0
