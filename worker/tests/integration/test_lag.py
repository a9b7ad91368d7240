"""`kmirror lag` against a real broker: the numbers, the Burrow-style statuses of a scripted consumer
group, and the command line (table, JSON, watch, saved window, errors)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka_tools import LATEST, describe_group, offsets
from mirror_harness import commit_offsets, create_topic, end_offsets, make_records, produce, write

from kmirror.health import lagcheck
from kmirror.health import rules as health
from kmirror.health.rules import Status

pytestmark = pytest.mark.health

LAG = [sys.executable, "-m", "kmirror.health.lagcheck"]


def lag_cli(*args, timeout=60):
    return subprocess.run([*LAG, *args], capture_output=True, text=True, timeout=timeout)


def commit_as_group(cluster, group, offsets):
    """Commit offsets for a group without joining it (a standalone consumer, as tools do)."""
    commit_offsets(cluster, group, offsets)


def test_lag_numbers_match_committed_and_end_offsets(kafka, tmp_path):
    src = kafka["source"]
    create_topic(src, "orders", 3)
    create_topic(src, "audit-log", 2)
    recs = make_records("orders", 3, 12) + make_records("audit-log", 2, 5)
    produce(src, recs)
    commit_as_group(
        src, "mirror", {("orders", 0): 12, ("orders", 1): 7, ("orders", 2): 0, ("audit-log", 1): 2}
    )
    ends = end_offsets(src, "orders", 3)
    assert ends == {0: 12, 1: 12, 2: 12}

    out = lag_cli("--bootstrap-server", src.bootstrap, "--group", "mirror", "--json")
    assert out.returncode == 0, out.stderr
    rows = {(r["topic"], r["partition"]): r for r in json.loads(out.stdout)}
    assert set(rows) == {("orders", 0), ("orders", 1), ("orders", 2), ("audit-log", 0), ("audit-log", 1)}
    for (topic, _), r in rows.items():
        assert set(r) == {"group", "topic", "partition", "offset", "log_size", "lag", "owner"}
        assert r["group"] == "mirror"
        assert r["log_size"] == (12 if topic == "orders" else 5)
    assert [rows[("orders", p)]["offset"] for p in range(3)] == [12, 7, 0]
    assert [rows[("orders", p)]["lag"] for p in range(3)] == [0, 5, 12]
    assert rows[("audit-log", 0)]["offset"] == -1 and rows[("audit-log", 0)]["lag"] == 5
    assert rows[("audit-log", 1)]["lag"] == 3

    # The reference table, restricted to one topic, through a Java-style command config file.
    cfg = write(tmp_path / "admin.properties", "security.protocol=PLAINTEXT\nclient.id=lag-check\n")
    out = lag_cli(
        "--bootstrap-server",
        src.bootstrap,
        "--group",
        "mirror",
        "--topic",
        "orders",
        "--command-config",
        str(cfg),
    )
    assert out.returncode == 0, out.stderr
    lines = [line.split() for line in out.stdout.splitlines()]
    assert lines[0] == ["Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"]
    assert lines[1:] == [
        ["mirror", "orders", "0", "12", "12", "0", "none"],
        ["mirror", "orders", "1", "7", "12", "5", "none"],
        ["mirror", "orders", "2", "0", "12", "12", "none"],
    ]
    # A mirror's consumer file (with the brokers in it) works as well, without --bootstrap-server.
    consumer = write(
        tmp_path / "consumer.properties", f"bootstrap.servers={src.bootstrap}\ngroup.id=mirror\n"
    )
    out = lag_cli("--group", "mirror", "--topic", "audit-log", "--consumer.config", str(consumer), "--json")
    assert out.returncode == 0, out.stderr
    assert [r["lag"] for r in json.loads(out.stdout)] == [5, 3]


def test_lag_errors_are_one_line_with_exit_3(kafka, tmp_path):
    src = kafka["source"]
    out = lag_cli("--bootstrap-server", src.bootstrap, "--group", "nobody")
    assert out.returncode == 3
    assert (
        out.stderr.count("\n") == 1
        and "kmirror lag: error: group 'nobody' has no committed offsets" in out.stderr
    )
    out = lag_cli(
        "--bootstrap-server", src.bootstrap, "--group", "nobody", "--watch", "--count", "1", "--json"
    )
    assert out.returncode == 3
    assert json.loads(out.stdout)["status"] == "NOTFOUND"
    out = lag_cli("--group", "g", "--command-config", str(tmp_path / "missing.properties"))
    assert out.returncode == 3 and out.stderr.count("\n") == 1 and "file not found" in out.stderr
    bad = write(tmp_path / "bad.properties", "zk.connect=zk:2181\n")
    out = lag_cli("--bootstrap-server", src.bootstrap, "--group", "g", "--command-config", str(bad))
    assert out.returncode == 3 and "zk.connect" in out.stderr and out.stderr.count("\n") == 1
    src.pause()  # a broker that does not answer
    try:
        t0 = time.monotonic()
        out = lag_cli("--bootstrap-server", src.bootstrap, "--group", "g", "--timeout", "2")
        assert out.returncode == 3 and out.stderr.count("\n") == 1, out.stderr
        assert "kmirror lag: error:" in out.stderr
        assert time.monotonic() - t0 < 30
    finally:
        src.resume()


class ScriptedGroup:
    """A real group member whose commits the test decides, plus a producer that keeps writing."""

    def __init__(self, cluster, group, topic, partitions):
        self.cluster, self.group, self.topic, self.partitions = cluster, group, topic, partitions
        self.produced = 0
        assigned = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 1000,
            }
        )
        self.consumer.subscribe([topic], on_assign=lambda c, ps: assigned.extend(ps))
        deadline = time.monotonic() + 30
        while not assigned and time.monotonic() < deadline:
            self.consumer.poll(0.1)
        assert len(assigned) == partitions

    def produce(self, n):
        produce(self.cluster, make_records(self.topic, self.partitions, n, start=self.produced))
        self.produced += n

    def commit(self, offset):
        self.consumer.poll(0)
        tps = [TopicPartition(self.topic, p, offset) for p in range(self.partitions)]
        self.consumer.commit(offsets=tps, asynchronous=False)

    def leave(self):
        self.consumer.close()


TWO_SAMPLES = ("--interval", "0.2", "--window", "2", "--count", "2")
"""`kmirror lag --watch` options: two samples 0.2 s apart, judged in a window of two."""


def test_watch_statuses_follow_a_scripted_consumer(kafka, tmp_path):
    """OK while keeping up, WARN when falling behind, STALL when committing the same offset, STOP when
    gone, REWIND after a reset: each sample evaluated over a window of 3, as `--watch` does."""
    src = kafka["source"]
    create_topic(src, "events", 2)
    g = ScriptedGroup(src, "scripted", "events", 2)
    conf = {"bootstrap.servers": src.bootstrap}
    window = health.Window(3)
    seen = []

    def evaluate():
        rows, samples, state, _ = lagcheck.sample(conf, "scripted", None, 10)
        window.add(samples)
        result = lagcheck.evaluation("scripted", rows, state, window, time.time())
        seen.append((result["status"], result["worst"]))
        # The numbers the watch judges are the committed offsets against the end offsets.
        ends = end_offsets(src, "events", 2)
        for p in result["partitions"]:
            assert p["log_size"] == ends[p["partition"]]
            assert p["lag"] == ends[p["partition"]] - max(0, p["offset"])
        return result

    def watch(*args: str):
        """`kmirror lag --watch` of the group scripted."""
        return lag_cli("--bootstrap-server", src.bootstrap, "--group", "scripted", "--watch", *args)

    for _ in range(3):  # keeping up
        g.produce(4)
        g.commit(g.produced)
        evaluate()
    out = watch(*TWO_SAMPLES)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "group scripted: OK" in out.stdout and out.stdout.splitlines()[1].split()[-1] == "Status"

    committed = g.produced
    for _ in range(3):  # offsets advance by 2, records by 4: falling behind
        g.produce(4)
        committed += 2
        g.commit(committed)
        evaluate()
    for _ in range(3):  # still a member, committing the same offset while records keep coming
        g.produce(4)
        g.commit(committed)
        evaluate()
    g.leave()
    time.sleep(0.5)
    for _ in range(2):  # gone
        g.produce(4)
        evaluate()
    admin = AdminClient(conf)
    tps = [TopicPartition("events", p, 1) for p in range(2)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("scripted", tps)])["scripted"].result()
    r = evaluate()
    assert {p["status"] for p in r["partitions"]} == {"REWIND"}
    assert all("went back from" in p["reason"] for p in r["partitions"])

    assert seen == [
        ("OK", "OK"),
        ("OK", "OK"),
        ("OK", "OK"),
        ("OK", "OK"),  # zero lag still in the window
        ("OK", "OK"),
        ("WARN", "WARN"),  # offsets advance, lag grows at every sample
        ("WARN", "WARN"),  # same offset committed, but it still moved inside the window
        ("ERR", "STALL"),
        ("ERR", "STALL"),
        ("ERR", "STOP"),
        ("ERR", "STOP"),
        ("ERR", "REWIND"),
    ]

    # The command line: a watch of the stopped group ends with ERR (STOP), exit 2; JSON lines.
    out = watch(*TWO_SAMPLES, "--json")
    assert out.returncode == 2, out.stdout + out.stderr
    results = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(x["status"], x["worst"]) for x in results] == [("OK", "OK"), ("ERR", "STOP")]
    assert results[0]["partitions"][0]["reason"].startswith("warming up")
    assert results[-1]["total_lag"] == 2 * (g.produced - 1)

    # A monitoring check run once per interval keeps its window in a file.
    state = tmp_path / "lag-state.json"
    codes = []
    for _ in range(3):
        out = watch("--count", "1", "--window", "3", "--state", str(state))
        codes.append(out.returncode)
    assert codes == [0, 0, 2]
    assert "group scripted: ERR (worst partition STOP)" in out.stdout
    assert len(json.loads(state.read_text())["window"]["partitions"][0]["samples"]) == 3
    assert Status.STOP.name in out.stdout


def test_lag_agrees_with_kafkas_own_consumer_group_tool(kafka):
    """True watermarks: records written in batches (so the end offset is not the last batch's base offset
    + 1), a group committed part way: kmirror lag and Kafka's tool report the same offsets, ends and lag."""
    src = kafka["source"]
    create_topic(src, "batched", 3)
    p = Producer({"bootstrap.servers": src.bootstrap, "linger.ms": 50, "batch.num.messages": 500})
    for i in range(3000):
        p.produce("batched", b"v%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    commit_as_group(src, "app", {("batched", 0): 100, ("batched", 1): 999, ("batched", 2): 1000})
    out = lag_cli("--bootstrap-server", src.bootstrap, "--group", "app", "--json")
    assert out.returncode == 0, out.stderr
    ours = {
        (r["topic"], r["partition"]): (r["offset"], r["log_size"], r["lag"]) for r in json.loads(out.stdout)
    }
    assert ours == {
        ("batched", 0): (100, 1000, 900),
        ("batched", 1): (999, 1000, 1),
        ("batched", 2): (1000, 1000, 0),
    }
    assert describe_group(src, "app") == ours
    assert offsets(src, "batched", LATEST) == {p: ours[("batched", p)][1] for p in range(3)}
