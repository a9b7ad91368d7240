"""Broker faults under live traffic: 3-node Apache Kafka clusters on both sides (replication factor 3,
min.insync.replicas 2), a 6-partition topic written to the whole time, a two-stream `kmirror run`.

Each test puts one fault on one side while records keep coming, and asserts that

* the mirror keeps copying during the fault: every target partition grows while the node is down;
* the `kmirror run` process never exits (checked at every step; an exit is permanent, so a check after
  the last step covers the whole fault), and a SIGTERM at the end stops it with exit 0;
* once traffic stops, the target has every record the source has, in the same partition and order
  (README: "nothing lost", "same partition, same order");
* duplicates are counted and printed (``-s``). The README promises at-least-once, so a source-side fault
  may leave some; on target-side faults the idempotent producer with acks=all "retries neither duplicate
  nor reorder records within a partition" (docs/safe-defaults.md), and there none are allowed.

The faults: the leader of partition 0 SIGKILLed on the source (then started again); the same on the
target; a rolling restart of every target node (SIGTERM: controlled shutdown, start, wait until it is in
every ISR again, the next one).
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from mirror_harness import (
    LiveTraffic,
    Rec,
    Worker,
    assert_mirrored,
    by_partition,
    consumer_file,
    producer_file,
    read_all,
    run_args,
    topic_partitions,
)

from kmirror.mirror.stalls import STALL_AFTER_S, Fetch, fetches
from kmirror.testing.kafka import KafkaCluster, kafka_clusters

PARTITIONS = 6
# Records per second into the source. The generator sends one record per request with acks=all; with a
# source node down on the loaded 2-core machine 400/s built a backlog that took over 30 s to flush.
RATE = 200.0
# The test's own admin clients retry against a node that is down; their librdkafka lines are noise here.
QUIET = logging.getLogger("test_broker_faults.clients")
QUIET.setLevel(logging.CRITICAL + 1)
# A SIGKILLed leader is replaced after the broker session timeout (9 s), then clients refresh metadata.
FLOW_BOUND_S = 60.0


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, KafkaCluster]]:
    """A 3-node source and a 3-node target for the module; each test has its own topic and group."""
    with kafka_clusters("source", "target", size=3, log_dir=tmp_path_factory.mktemp("brokers")) as c:
        yield c


def create_rf3_topic(cluster: KafkaCluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "logger": QUIET})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
        f.result()


def leader(cluster: KafkaCluster, topic: str, partition: int) -> int:
    """The partition's leader as the cluster's metadata names it (-1: none, or no answer)."""
    try:
        md = AdminClient({"bootstrap.servers": cluster.bootstrap, "logger": QUIET}).list_topics(
            topic, timeout=5
        )
        return int(md.topics[topic].partitions[partition].leader)
    except (KafkaException, KeyError):
        return -1


def ends(cluster: KafkaCluster, topic: str) -> dict[int, int]:
    """End offsets (-1 while the topic is missing or a partition has no reachable leader)."""
    try:
        if topic not in topic_partitions(cluster, bound=5):
            return dict.fromkeys(range(PARTITIONS), -1)
    except KafkaException:
        return dict.fromkeys(range(PARTITIONS), -1)
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kmirror-test-ends", "logger": QUIET})
    out: dict[int, int] = {}
    try:
        for p in range(PARTITIONS):
            try:
                out[p] = int(c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1])
            except KafkaException:
                out[p] = -1
    finally:
        c.close()
    return out


def group_settled(cluster: KafkaCluster, group: str, topic: str) -> bool:
    """The source group is stable with both streams as members, each owning part of the topic, together all
    of it (the cooperative-sticky follow-up rebalance is over)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "logger": QUIET})
    try:
        d = admin.describe_consumer_groups([group], request_timeout=5)[group].result()
    except KafkaException:
        return False
    owned = [(tp.topic, tp.partition) for m in d.members for tp in m.assignment.topic_partitions]
    return (
        d.state == ConsumerGroupState.STABLE
        and len(d.members) == 2
        and all(m.assignment.topic_partitions for m in d.members)
        and sorted(owned) == [(topic, p) for p in range(PARTITIONS)]
    )


def alive(worker: Worker, when: str) -> None:
    if worker.proc.poll() is not None:
        raise AssertionError(f"kmirror exited ({worker.proc.returncode}) {when}:\n{worker.log()[-4000:]}")


def wait_until_alive(
    worker: Worker,
    predicate: Callable[[], bool],
    bound: float,
    what: str,
    state: Callable[[], str] = lambda: "",
) -> float:
    """Seconds until `predicate` holds; the mirror must stay up all along. `state`: what a failure adds."""
    start = time.monotonic()
    while not predicate():
        alive(worker, f"while waiting for {what}")
        if time.monotonic() - start > bound:
            raise AssertionError(f"{what}: not within {bound:.0f} s{state()}\n{worker.log()[-6000:]}")
        time.sleep(0.2)
    alive(worker, f"after {what}")
    return time.monotonic() - start


def wait_flowing(m: Mirror, what: str, bound: float = FLOW_BOUND_S) -> float:
    """Seconds until every target partition grew past its end at call time."""
    before = ends(m.target, m.topic)
    source_before = ends(m.source, m.topic)

    def grown() -> bool:
        now = ends(m.target, m.topic)
        return all(now[p] > max(before[p], 0) for p in range(PARTITIONS))

    def state() -> str:
        return (
            f"; target ends {before} -> {ends(m.target, m.topic)},"
            f" source ends {source_before} -> {ends(m.source, m.topic)}"
        )

    return wait_until_alive(
        m.worker, grown, bound, f"records flowing on every target partition {what}", state
    )


@dataclass
class Mirror:
    source: KafkaCluster
    target: KafkaCluster
    topic: str
    group: str
    traffic: LiveTraffic
    worker: Worker
    timings: dict[str, float]


@pytest.fixture
def mirror(
    brokers: dict[str, KafkaCluster], tmp_path: Path, workers: list[Worker], request: pytest.FixtureRequest
) -> Iterator[Mirror]:
    """Live traffic into a fresh RF-3 topic and a two-stream `kmirror run` already copying it."""
    name = request.node.name.removeprefix("test_").replace("_", "-")
    source, target = brokers["source"], brokers["target"]
    topic, group = f"faults-{name}", f"mirror-{name}"
    create_rf3_topic(source, topic)
    worker = Worker(
        tmp_path,
        run_args(
            consumer_file(tmp_path, source, group=group),
            producer_file(tmp_path, target),
            "--whitelist",
            topic,
            "--num.streams",
            "2",
        ),
    )
    workers.append(worker)
    with LiveTraffic(source, topic, PARTITIONS, rate_per_s=RATE) as traffic:
        m = Mirror(source, target, topic, group, traffic, worker, {})
        # Faults start once the group has settled: a rebalance under way when the target stops answering
        # gives up the revoked partitions uncommitted and the new owner mirrors them again (at-least-once),
        # which would mix consumer-side duplicates into what the target-side tests check of the producer.
        m.timings["group settled"] = wait_until_alive(
            worker, lambda: group_settled(source, group, topic), FLOW_BOUND_S, f"group {group} settled"
        )
        m.timings["first flow"] = wait_flowing(m, "at start")
        yield m


def finish(m: Mirror, fault: str, *, duplicates_allowed: bool) -> None:
    """Stop traffic, wait until the target has every record, compare, stop kmirror cleanly."""
    sent = m.traffic.stop()
    alive(m.worker, "by the time traffic stopped")
    source = read_all(m.source, [m.topic], len(sent), timeout=60)
    want = {tp: [r.content for r in rs] for tp, rs in by_partition(sent).items()}
    have = {tp: [r.content for r in rs] for tp, rs in by_partition(source).items()}
    assert have == want, f"{fault}: the source does not hold exactly what the generator sent (test setup)"
    started = time.monotonic()
    target = read_all(m.target, [m.topic], len(sent), timeout=120)
    m.timings["target complete after traffic stop"] = time.monotonic() - started
    alive(m.worker, "while the target was read back")
    duplicates = duplicates_per_partition(target)
    total = sum(duplicates.values())
    seconds = {k: round(v, 1) for k, v in m.timings.items()}
    summary = (
        f"{fault}: {len(sent)} records sent, {len(target)} on the target, {total} duplicates "
        f"(per partition {duplicates}); seconds {seconds}"
    )
    print(f"\nFAULT {summary}")
    try:
        assert_mirrored(sent, target)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{summary}") from None
    if not duplicates_allowed:
        assert total == 0, f"the idempotent producer duplicated records on a target fault: {summary}"
    rc = m.worker.stop()
    assert rc == 0, f"kmirror exit {rc} on SIGTERM after {fault}:\n{m.worker.log()[-4000:]}"


def duplicates_per_partition(records: list[Rec]) -> dict[int, int]:
    return {p: len(rs) - len({r.content for r in rs}) for (_, p), rs in sorted(by_partition(records).items())}


# Asked in a process of its own: while the coordinator is down, librdkafka can abort the asking process
# (rd_kafka_enq_once_del_source_return assertion, librdkafka issue 4605, open), and it took the pytest
# worker with it in a full run.
_COORDINATOR = """
import sys
from confluent_kafka.admin import AdminClient
admin = AdminClient({"bootstrap.servers": sys.argv[1], "log_level": 0})
print(admin.describe_consumer_groups([sys.argv[2]], request_timeout=5)[sys.argv[2]].result().coordinator.id)
"""


def coordinator(cluster: KafkaCluster, group: str) -> int:
    """The node coordinating `group` (-1: no answer, or the asking process died)."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _COORDINATOR, cluster.bootstrap, group],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return -1
    out = proc.stdout.strip()
    return int(out) if proc.returncode == 0 and out.lstrip("-").isdigit() else -1


def kill_leader_and_restart(m: Mirror, side: KafkaCluster, role: str = "leader") -> int:
    """SIGKILL the leader of partition 0 on `side` (role "leader") or the source group's coordinator (role
    "coordinator"); the mirror must keep copying on every partition while it is down (after another node
    took over); start it again and wait until it is in every ISR."""
    if role == "leader":
        what = f"a new leader of {m.topic}/0 on {side.name}"

        def now() -> int:
            return leader(side, m.topic, 0)
    else:
        what = f"a new coordinator of group {m.group} on {side.name}"

        def now() -> int:
            return coordinator(side, m.group)

    killed = now()
    assert killed in {n.node_id for n in side.nodes}, f"no {role} on {side.name}"
    side.kill_node(killed, signal.SIGKILL)
    t = time.monotonic()
    m.timings[f"new {role}"] = wait_until_alive(
        m.worker, lambda: now() not in (killed, -1), FLOW_BOUND_S, what
    )
    m.timings["flowing with the node down"] = wait_flowing(m, "with a node down")
    m.timings["node down"] = time.monotonic() - t
    started = time.monotonic()
    side.start_node(killed)
    m.timings["node back in every ISR"] = time.monotonic() - started
    alive(m.worker, f"after node {killed} of {side.name} came back")
    # A fetcher librdkafka left stuck on a partition whose leader came back is found after STALL_AFTER_S
    # and the stream's consumer replaced (kmirror.mirror.stalls; seen in a full run).
    m.timings["flowing after the restart"] = wait_flowing(
        m, "after the restart", FLOW_BOUND_S + STALL_AFTER_S
    )
    return killed


def test_source_leader_killed(mirror: Mirror) -> None:
    killed = kill_leader_and_restart(mirror, mirror.source)
    finish(mirror, f"source leader (node {killed}) SIGKILLed and restarted", duplicates_allowed=True)


def test_source_coordinator_killed(mirror: Mirror) -> None:
    """The group's coordinator dies: the static members' sessions time out before another node takes the
    group over, and librdkafka's own rejoin fences its consumer (librdkafka issue 3437). The stream joins
    again with a new consumer instead of stopping (it stopped with exit 2 before: "fenced")."""
    killed = kill_leader_and_restart(mirror, mirror.source, role="coordinator")
    finish(
        mirror, f"source group coordinator (node {killed}) SIGKILLed and restarted", duplicates_allowed=True
    )


def test_target_leader_killed(mirror: Mirror) -> None:
    killed = kill_leader_and_restart(mirror, mirror.target)
    finish(mirror, f"target leader (node {killed}) SIGKILLed and restarted", duplicates_allowed=False)


def test_target_rolling_restart(mirror: Mirror) -> None:
    target = mirror.target
    for node in [n.node_id for n in target.nodes]:
        target.kill_node(node, signal.SIGTERM)
        alive(mirror.worker, f"after target node {node} shut down")
        mirror.timings[f"flowing without node {node}"] = wait_flowing(mirror, f"with target node {node} down")
        started = time.monotonic()
        target.start_node(node)
        mirror.timings[f"node {node} back in every ISR"] = time.monotonic() - started
        alive(mirror.worker, f"after target node {node} came back")
    mirror.timings["flowing after the roll"] = wait_flowing(mirror, "after the rolling restart")
    finish(mirror, "rolling restart of the 3 target nodes (SIGTERM each)", duplicates_allowed=False)


def test_the_stall_watch_reads_a_real_consumers_statistics(brokers: dict[str, KafkaCluster]) -> None:
    """kmirror.mirror.stalls reads librdkafka's own field names (fetch_state, app_offset, consumer_lag,
    fetchq_cnt): a consumer that read all 50 records of a partition shows it active at position 50, lag 0,
    nothing queued (a renamed field would read as a default and the watch would never see a stall)."""
    source = brokers["source"]
    topic = "stall-watch-stats"
    create_rf3_topic(source, topic)
    producer = Producer({"bootstrap.servers": source.bootstrap, "logger": QUIET})
    for i in range(50):
        producer.produce(topic, f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    docs: list[dict[str, object]] = []
    consumer = Consumer(
        {
            "bootstrap.servers": source.bootstrap,
            "group.id": "stall-watch-stats",
            "statistics.interval.ms": 500,
            "stats_cb": lambda raw: docs.append(json.loads(raw)),
            "logger": QUIET,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        read = 0
        deadline = time.monotonic() + 60
        while read < 50:
            assert time.monotonic() < deadline, f"read {read} of 50 records within 60 s"
            read += len([m for m in consumer.consume(50, 1) if m.error() is None])
        seen = None
        deadline = time.monotonic() + 30
        while seen != Fetch("active", 50, 0, 0):
            assert time.monotonic() < deadline, f"statistics after reading everything: {seen}"
            docs.clear()
            assert consumer.consume(1, 1) == []  # serves the statistics callback; nothing more to read
            seen = fetches(docs[-1]).get((topic, 0)) if docs else None
        assert not seen.waiting()
    finally:
        consumer.close()
