"""Restarts always resume: every way a `kmirror run` instance stops and comes back, looped 10 times.

Each test keeps records flowing into the source the whole time, stops and restarts (or kills) workers
RUNS times, measures the seconds from the (re)start or kill until records flow again on every
partition, asserts that bound each time, and at the end reads the target back: nothing missing, order
kept per partition. The measured seconds are printed (``-s``) and collected in docs/benchmarks.md.

Each path runs with static members (KIP-345, the default: ids stable across restarts of one process, a
stop sends no LeaveGroup) and with dynamic members (`--static.membership false`: streams that leave the
group one at a time on SIGTERM). Two processes on one host read their own consumer files, so their static
ids differ; two processes of one file fence each other, and the older one stops with one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from mirror_harness import (
    KMIRROR,
    LiveTraffic,
    Worker,
    assert_mirrored,
    consumer_file,
    create_topic,
    producer_file,
    read_all,
    run_args,
    topic_partitions,
    wait_until,
)

from kmirror.testing import jars
from kmirror.testing.kafka import KafkaCluster as Cluster
from kmirror.testing.kafka import free_port
from kmirror.testing.kafka import kafka_clusters as clusters

RUNS = int(os.environ.get("KMIRROR_RESTART_RUNS", "10"))
SESSION_S = 6.0  # session.timeout.ms of the test consumer files (mirror_harness.TEST_CONSUMER_EXTRA)
# Seconds from the (re)start, kill or stop until records flow again on every partition. The test broker
# holds every JoinGroup for at least session.timeout.ms/2, so one rebalance costs >= 3 s here.
# Clean restart: the old members left, the new ones join (one rebalance, plus the process start).
# Crash: the dead members stay in the group until their session expires, then one rebalance.
# Takeover: the dead member's session expires, then one rebalance. Removal: it left, one rebalance.
RESTART_BOUND_S = 5 * SESSION_S
CRASH_BOUND_S = 5 * SESSION_S
TAKEOVER_BOUND_S = 5 * SESSION_S
REMOVAL_BOUND_S = 2.5 * SESSION_S


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Cluster]]:
    """One source and one target cluster for the whole module: each test has its own topic and group."""
    with clusters("source", "target", log_dir=tmp_path_factory.mktemp("brokers")) as c:
        yield c


NO_LEADER_YET = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError._UNKNOWN_PARTITION,  # the client's metadata does not list the new partitions yet
}


def ends(cluster: Cluster, topic: str, partitions: int) -> dict[int, int]:
    """End offsets of the topic's partitions (-1 while the topic does not exist yet)."""
    if topic not in topic_partitions(cluster):
        return dict.fromkeys(range(partitions), -1)
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kmirror-test-ends"})
    try:
        return {p: _end(c, topic, p) for p in range(partitions)}
    finally:
        c.close()


def _end(c: Consumer, topic: str, partition: int) -> int:
    """A partition's end offset; -1 while a topic just created has no leader yet (Kafka answers
    NOT_LEADER_FOR_PARTITION or LEADER_NOT_AVAILABLE until the controller has elected one, and the
    client reports an unknown partition until its metadata lists it)."""
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1])
    except KafkaException as exc:
        if exc.args[0].retriable() or exc.args[0].code() in NO_LEADER_YET:
            return -1
        raise


def seconds_until_flowing(
    cluster: Cluster, topic: str, partitions: int, since: float, bound: float, what: str
) -> float:
    """Seconds from `since` (monotonic) until every target partition grew past its end at call time."""
    before = ends(cluster, topic, partitions)
    deadline = since + bound
    while True:
        now = ends(cluster, topic, partitions)
        if all(now[p] > max(before[p], 0) for p in range(partitions)):
            return time.monotonic() - since
        if time.monotonic() > deadline:
            stalled = [p for p in range(partitions) if now[p] <= before[p]]
            raise AssertionError(f"{what}: partitions {stalled} of {topic} not flowing within {bound:.0f} s")
        time.sleep(0.2)


MEMBERSHIP = pytest.mark.parametrize("membership", ["dynamic", "static"])


def membership_args(membership: str) -> list[str]:
    """Static (KIP-345, the default): each stream joins with a group.instance.id stable across restarts."""
    return ["--static.membership", "false"] if membership == "dynamic" else []


def report(name: str, seconds: list[float]) -> None:
    print(
        f"\nRESTART {name}: runs={len(seconds)} median={statistics.median(seconds):.1f}s "
        f"max={max(seconds):.1f}s all={json.dumps([round(s, 1) for s in seconds])}"
    )


def files(
    tmp_path: Path, src: Cluster, tgt: Cluster, group: str, name: str = "consumer"
) -> tuple[Path, Path]:
    return (
        consumer_file(tmp_path, src, group=group, name=f"{name}.properties"),
        producer_file(tmp_path, tgt),
    )


def check_nothing_missing(tgt: Cluster, topic: str, traffic: LiveTraffic, minimum: int = 1000) -> None:
    """Every record the live traffic sent is on the target, in order; `minimum`: records it must have
    sent (the loops run for minutes; a single event, such as the fencing test's, for seconds)."""
    sent = traffic.stop()
    assert len(sent) > minimum
    assert_mirrored(sent, read_all(tgt, [topic], len(sent), timeout=120))


def restarted_under_traffic(
    brokers: dict[str, Cluster],
    tmp_path: Path,
    workers: list[Worker],
    membership: str,
    kind: str,
    stop: Callable[[Worker], object],
    bound: float,
) -> list[float]:
    """A two-stream instance mirroring live traffic, stopped by `stop` and started again RUNS times: the
    seconds from each stop until records flow again (each within `bound`); nothing is missing at the end."""
    src, tgt = brokers["source"], brokers["target"]
    topic, parts = f"restart-{kind}-{membership}", 4
    create_topic(src, topic, parts)
    args = run_args(
        *files(tmp_path, src, tgt, f"g-{kind}-{membership}"), "--whitelist", topic, "--num.streams", "2",
        *membership_args(membership),
    )  # fmt: skip
    took = []
    with LiveTraffic(src, topic, parts) as traffic:
        w = Worker(tmp_path, args)
        workers.append(w)
        seconds_until_flowing(tgt, topic, parts, time.monotonic(), 60, "first start")
        for run in range(RUNS):
            stop(w)
            start = time.monotonic()
            w = Worker(tmp_path, args)
            workers.append(w)
            took.append(seconds_until_flowing(tgt, topic, parts, start, bound, f"restart {run}"))
        check_nothing_missing(tgt, topic, traffic)
    assert w.stop() == 0
    return took


def stop_cleanly(w: Worker) -> None:
    assert w.stop(signal.SIGTERM) == 0, w.log()
    assert "stopped cleanly" in w.log()


@MEMBERSHIP
def test_clean_sigterm_restart_of_a_two_stream_instance(brokers, tmp_path, workers, membership):
    took = restarted_under_traffic(
        brokers, tmp_path, workers, membership, "clean", stop_cleanly, RESTART_BOUND_S
    )
    report(f"clean SIGTERM restart, 2 streams, {membership} members", took)


def test_static_membership_streams_join_with_stable_instance_ids(brokers, tmp_path, workers):
    """The default: each stream joins as kmirror-HOST-SOURCE-H-N (H: the consumer file's path), the same
    ids on every start, mirrors everything, and on SIGTERM all streams stop at once (static members send
    no LeaveGroup, so there is no rebalance to wait for between them)."""
    src, tgt = brokers["source"], brokers["target"]
    topic, parts, group = "restart-static", 4, "g-static"
    create_topic(src, topic, parts)
    consumer, producer = files(tmp_path, src, tgt, group)
    args = run_args(consumer, producer, "--whitelist", topic, "--num.streams", "2")
    host = socket.gethostname().split(".")[0]
    where = hashlib.sha256(str(consumer.absolute()).encode()).hexdigest()[:8]
    logs = []
    with LiveTraffic(src, topic, parts) as traffic:
        for _ in range(2):
            w = Worker(tmp_path, args)
            workers.append(w)
            seconds_until_flowing(tgt, topic, parts, time.monotonic(), 60, "start")
            for stream in (0, 1):  # one stream may have every partition: wait for both to join
                w.wait_for(f"consumer#{stream}: member of group")
            assert w.stop(signal.SIGTERM) == 0, w.log()
            logs.append(w.log())
        sent = traffic.stop()
    w = Worker(tmp_path, args)
    workers.append(w)
    assert_mirrored(sent, read_all(tgt, [topic], len(sent), timeout=120))
    assert w.stop(signal.SIGTERM) == 0, w.log()
    for log in logs:
        assert "stopping the 2 streams (static members" in log
        assert log.count("stopped cleanly") == 2
        for stream in (0, 1):  # source name: the consumer file's stem
            instance = f"kmirror-{host}-consumer-{where}-{stream}"
            assert f"member of group {group} (static, group.instance.id {instance})" in log


def test_two_processes_of_one_consumer_file_fence_each_other_and_the_older_stops_with_one_line(
    brokers, tmp_path, workers
):
    """Static ids come from the host and the consumer file: a second process reading the same file on the
    same host joins with the same ids. Kafka fences the older member; it stops with exit 2 (systemd's
    RestartPreventExitStatus: a restart would fence the other in turn) and one line naming the id and the
    fix. The newer one mirrors on."""
    src, tgt = brokers["source"], brokers["target"]
    topic, parts, group = "restart-fenced", 2, "g-fenced"
    create_topic(src, topic, parts)
    args = run_args(*files(tmp_path, src, tgt, group), "--whitelist", topic, "--num.streams", "1")
    with LiveTraffic(src, topic, parts) as traffic:
        older = Worker(tmp_path, args, "older")
        workers.append(older)
        seconds_until_flowing(tgt, topic, parts, time.monotonic(), 60, "first start")
        newer = Worker(tmp_path, args, "newer")
        workers.append(newer)
        newer.wait_for("member of group")
        assert older.proc.wait(60) == 2, older.log()
        fenced = [line for line in older.log().splitlines() if "fenced: another consumer" in line]
        assert len(fenced) == 1, older.log()
        instance = newer.log().split("group.instance.id ", 1)[1].split(")", 1)[0]
        assert f"group.instance.id {instance} (a second kmirror process" in fenced[0]
        assert fenced[0].endswith("or run with --static.membership false")
        assert "Traceback" not in older.log()
        seconds_until_flowing(tgt, topic, parts, time.monotonic(), 60, "the newer one mirroring")
        check_nothing_missing(tgt, topic, traffic, minimum=100)
    assert newer.stop() == 0


@MEMBERSHIP
def test_kill9_of_every_process_then_restart(brokers, tmp_path, workers, membership):
    took = restarted_under_traffic(
        brokers, tmp_path, workers, membership, "crash", Worker.kill9, CRASH_BOUND_S
    )
    report(f"kill -9 of every process, restart, 2 streams, {membership} members", took)


def owns(w: Worker) -> set[str]:
    """The partitions a worker's streams own now, from its log (assigned adds, revoked/lost removes)."""
    owned: set[str] = set()
    for line in w.log().splitlines():
        for verb in (": assigned ", ": revoked ", ": lost "):
            if verb in line:
                parts = line.split(verb, 1)[1].split(" (", 1)[0]
                named = {p for p in parts.split(", ") if p and p != "nothing"}
                owned = owned | named if verb == ": assigned " else owned - named
    return owned


def both_own(a: Worker, b: Worker, topic: str, parts: int) -> bool:
    oa, ob = owns(a), owns(b)
    return bool(oa) and bool(ob) and not oa & ob and oa | ob == {f"{topic}[{p}]" for p in range(parts)}


def two_of_one_group(
    tmp_path: Path, src: Cluster, tgt: Cluster, topic: str, group: str, membership: str, *b_extra: str
) -> tuple[list[str], list[str]]:
    """The arguments of workers a and b of one group mirroring the topic in one stream each, each with its
    own consumer file (a.properties, b.properties); b's with b_extra."""
    extra = ["--whitelist", topic, "--num.streams", "1", *membership_args(membership)]
    return (
        run_args(*files(tmp_path, src, tgt, group, "a"), *extra),
        run_args(*files(tmp_path, src, tgt, group, "b"), *extra, *b_extra),
    )


def taken_over_by(b: Worker, tgt: Cluster, topic: str, parts: int, bound: float, what: str) -> float:
    """Seconds from now until records flow again on every partition (within bound); b owns them all."""
    took = seconds_until_flowing(tgt, topic, parts, time.monotonic(), bound, what)
    assert owns(b) == {f"{topic}[{p}]" for p in range(parts)}
    return took


def wait_sharing(a: Worker, b: Worker, topic: str, parts: int, run: int) -> None:
    wait_until(lambda: both_own(a, b, topic, parts), timeout=60, what=f"run {run}: a and b sharing")


@MEMBERSHIP
def test_one_of_two_workers_killed_the_other_takes_over(brokers, tmp_path, workers, membership):
    src, tgt = brokers["source"], brokers["target"]
    topic, parts, group = f"restart-takeover-{membership}", 4, f"g-takeover-{membership}"
    create_topic(src, topic, parts)
    a_args, b_args = two_of_one_group(tmp_path, src, tgt, topic, group, membership)
    took = []
    with LiveTraffic(src, topic, parts) as traffic:
        a, b = Worker(tmp_path, a_args, "a"), Worker(tmp_path, b_args, "b")
        workers.extend([a, b])
        for run in range(RUNS):
            wait_sharing(a, b, topic, parts, run)
            a.kill9()
            took.append(taken_over_by(b, tgt, topic, parts, TAKEOVER_BOUND_S, f"takeover {run}"))
            a = Worker(tmp_path, a_args, "a")
            workers.append(a)
        check_nothing_missing(tgt, topic, traffic)
    report(f"one of two workers killed, the other takes over, {membership} members", took)


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("kmirror_assigned_partitions{") or line.startswith("kmirror_unassigned_seconds{"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


@MEMBERSHIP
def test_an_instance_removed_for_good_its_partitions_go_to_the_survivor(
    brokers, tmp_path, workers, membership
):
    """A dynamic member that stops cleanly leaves the group: one rebalance gives its partitions to the
    survivor. A static member does not leave: its partitions wait for it for session.timeout.ms, then go
    to the survivor. Meanwhile `kmirror lag --watch` and the metrics show it."""
    src, tgt = brokers["source"], brokers["target"]
    topic, parts, group = f"restart-removed-{membership}", 4, f"g-removed-{membership}"
    create_topic(src, topic, parts)
    port = free_port()
    a_args, b_args = two_of_one_group(
        tmp_path, src, tgt, topic, group, membership, "--metrics.port", str(port)
    )
    took = []
    with LiveTraffic(src, topic, parts) as traffic:
        a, b = Worker(tmp_path, a_args, "a"), Worker(tmp_path, b_args, "b")
        workers.extend([a, b])
        for run in range(RUNS):
            wait_sharing(a, b, topic, parts, run)
            assert a.stop(signal.SIGTERM) == 0
            took.append(taken_over_by(b, tgt, topic, parts, REMOVAL_BOUND_S, f"removal {run}"))
            wait_until(
                lambda: scrape(port).get('kmirror_assigned_partitions{source="b",stream="0"}') == parts,
                timeout=10,
                what="b's assigned-partitions gauge",
            )
            if run < RUNS - 1:
                a = Worker(tmp_path, a_args, "a")
                workers.append(a)
        check_nothing_missing(tgt, topic, traffic)
        assert scrape(port)['kmirror_unassigned_seconds{source="b",stream="0"}'] == 0
    report(f"an instance removed for good (SIGTERM, never back), {membership} members", took)
    # Stop the survivor for good as well: the group has no member left and lag --watch says so.
    assert b.stop() == 0
    wait_until(
        lambda: watch_unowned(tmp_path / "b.properties", group) == parts,
        timeout=TAKEOVER_BOUND_S,
        what="unowned",
    )


REMOVE_TOOL = Path(__file__).resolve().parents[3] / "tools" / "RemoveStaticMembers.java"


def test_an_instance_removed_for_good_is_taken_out_of_the_group_at_once_with_the_runbook_tool(
    brokers, tmp_path, workers
):
    """docs/runbooks/remove-instance.md: right after a static instance stops for good, its ids are removed
    from the group with tools/RemoveStaticMembers.java (Kafka's Admin API), and the survivor gets its
    partitions then, not after session.timeout.ms. The sessions here are 300 s, so the survivor owning
    everything within that time is the tool's doing, however long its JVM takes to start. The tool is
    compiled beforehand, as the runbook says, so the step itself is one JVM start and one request."""
    src, tgt = brokers["source"], brokers["target"]
    topic, parts, group, session_ms = "restart-removed-tool", 4, "g-removed-tool", 300_000
    create_topic(src, topic, parts)
    extra = ["--whitelist", topic, "--num.streams", "1"]
    long_session = f"session.timeout.ms={session_ms}\n"
    a_args = run_args(
        consumer_file(tmp_path, src, group, long_session, "a.properties"),
        producer_file(tmp_path, tgt),
        *extra,
    )
    b_args = run_args(
        consumer_file(tmp_path, src, group, long_session, "b.properties"),
        producer_file(tmp_path, tgt),
        *extra,
    )
    admin = tmp_path / "admin.properties"
    admin.write_text(f"bootstrap.servers={src.bootstrap}\n")
    javac = str(Path(jars.java()).resolve().with_name("javac"))
    classes = tmp_path / "classes"
    built = subprocess.run(
        [javac, "-cp", jars.classpath(), "-d", str(classes), str(REMOVE_TOOL)],
        capture_output=True,
        timeout=300,
    )
    assert built.returncode == 0, built
    tool = [jars.java(), "-cp", f"{jars.classpath()}:{classes}", "RemoveStaticMembers", str(admin), group]
    # A low rate: the tool's JVM starts while the records flow, and the source must keep up.
    with LiveTraffic(src, topic, parts, rate_per_s=100) as traffic:
        a, b = Worker(tmp_path, a_args, "a"), Worker(tmp_path, b_args, "b")
        workers.extend([a, b])
        wait_until(lambda: both_own(a, b, topic, parts), timeout=60, what="a and b sharing")
        instance = a.log().split("(static, group.instance.id ", 1)[1].split(")", 1)[0]
        assert a.stop(signal.SIGTERM) == 0
        stopped = time.monotonic()
        assert owns(b) != {f"{topic}[{p}]" for p in range(parts)}  # a's partitions wait for it
        removed = subprocess.run(
            [*tool, instance],
            capture_output=True,
            text=True,
            timeout=session_ms / 1000 / 2,
        )
        assert removed.returncode == 0, removed
        assert removed.stdout.strip() == f"removed 1 static member(s) from group {group}"
        bound = session_ms / 1000 - (time.monotonic() - stopped)
        wait_until(
            lambda: owns(b) == {f"{topic}[{p}]" for p in range(parts)}, timeout=bound, what="b owning all"
        )
        seconds_until_flowing(tgt, topic, parts, time.monotonic(), 60, "b mirroring every partition")
        sent = traffic.stop()
        assert_mirrored(sent, read_all(tgt, [topic], len(sent), timeout=120))
    again = subprocess.run(
        [*tool, instance],
        capture_output=True,
        text=True,
        timeout=session_ms / 1000 / 2,
    )
    assert again.returncode == 1 and "UnknownMemberIdException" in again.stdout, again
    assert b.stop() == 0


def watch_unowned(consumer: Path, group: str) -> int:
    out = subprocess.run(
        [
            *KMIRROR,
            "lag",
            "--command-config",
            str(consumer),
            "--group",
            group,
            "--watch",
            "--count",
            "1",
            "--interval",
            "0",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return len(json.loads(out.stdout.splitlines()[0])["unowned"])


HUNG_MEMBER = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "session.timeout.ms": int(sys.argv[4]), "partition.assignment.strategy": "cooperative-sticky"})
c.subscribe([sys.argv[3]], on_assign=lambda _c, ps: print("assigned", len(ps), flush=True))
while True:
    c.poll(0.2)
"""


def test_a_group_held_up_by_a_hung_member_is_reported_stuck(brokers, tmp_path, workers):
    """A member that stops answering (SIGSTOP) with a long session holds up the rebalance a new stream
    starts: the stream has no partitions while the group has some to give. It warns once, the gauges
    show it, and it gets the partitions when the hung member's session expires."""
    src, tgt = brokers["source"], brokers["target"]
    topic, group, hung_session_ms = "restart-stuck", "g-stuck", 30_000
    create_topic(src, topic, 2)
    log = (tmp_path / "hung.log").open("w")
    hung = subprocess.Popen(
        [sys.executable, "-c", HUNG_MEMBER, src.bootstrap, group, topic, str(hung_session_ms)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(lambda: "assigned" in (tmp_path / "hung.log").read_text(), timeout=60, what="hung member")
        os.kill(hung.pid, signal.SIGSTOP)
        port = free_port()
        consumer, producer = files(tmp_path, src, tgt, group)
        w = Worker(
            tmp_path,
            run_args(
                consumer, producer, "--whitelist", topic, "--num.streams", "1", "--metrics.port", str(port)
            ),
        )
        workers.append(w)
        w.wait_for("STUCK: no partitions for", timeout=4 * SESSION_S)
        assert w.log().count("STUCK") == 1
        gauges = scrape(port)
        assert gauges['kmirror_assigned_partitions{source="consumer",stream="0"}'] == 0
        assert gauges['kmirror_unassigned_seconds{source="consumer",stream="0"}'] >= 2 * SESSION_S - 2
        # The hung member's session expires; the group moves on and the stream says so.
        w.wait_for("has partitions again", timeout=hung_session_ms / 1000 + 5 * SESSION_S)
        wait_until(
            lambda: scrape(port).get('kmirror_assigned_partitions{source="consumer",stream="0"}') == 2,
            timeout=10,
            what="the assigned-partitions gauge",
        )
        assert scrape(port)['kmirror_unassigned_seconds{source="consumer",stream="0"}'] == 0
        assert w.log().count("STUCK") == 1
        assert w.stop() == 0
    finally:
        hung.kill()
        hung.wait(10)
        log.close()
