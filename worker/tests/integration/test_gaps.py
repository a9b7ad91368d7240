"""Gaps in the source are named, counted and handled by --gap.policy (Apache Kafka 4.3; issue 24, item 2).

A stopped mirror, records deleted on the source with delete_records past its committed offset, the mirror
restarted: the gap is one line naming topic, partition and the offsets lost, the metric counts the lost
records, and the mirror goes on from the log start (``continue``) or stops with exit 4 committing nothing
past the gap (``stop``). A topic deleted and recreated under a running mirror is mirrored from its new
beginning: nothing of the new topic is lost (Kafka 4.3 drops a deleted topic's committed offsets, so the
stream finds none and starts at the log start; a position past the new topic's end would be handled as
a truncation: from the log start too), and with --groups the old topic's failover sync points are
dropped for the new one's (the points carry the topic id).
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import mirror_harness as mh
from confluent_kafka import KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.failover.clusters import read_sync_data
from kmirror.testing.kafka import KafkaCluster, free_port, running

PER_PARTITION = 50


def mirror(tmp_path: Path, src: KafkaCluster, tgt: KafkaCluster, topic: str, *extra: str) -> mh.Worker:
    return mh.mirror_worker(tmp_path, src, tgt, topic, 1, *extra, group=f"g-{topic}")


def mirrored_then_stopped(tmp_path: Path, src: KafkaCluster, tgt: KafkaCluster, topic: str) -> list:
    """The topic's first records mirrored and committed, the mirror stopped; more records written."""
    mh.create_topic(src, topic, 2)
    first = mh.make_records(topic, 2, PER_PARTITION)
    mh.produce(src, first)
    w = mirror(tmp_path, src, tgt, topic)
    mh.assert_mirrored(first, mh.read_all(tgt, [topic], len(first), timeout=90))
    mh.wait_until(lambda: mh.committed(src, f"g-{topic}", topic, 2) == {0: PER_PARTITION, 1: PER_PARTITION})
    assert w.stop() == 0, w.log()
    more = mh.make_records(topic, 2, PER_PARTITION, start=PER_PARTITION)
    mh.produce(src, more)
    return first + more


def purge(src: KafkaCluster, topic: str, partition: int, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": src.bootstrap})
    for f in admin.delete_records([TopicPartition(topic, partition, before)]).values():
        f.result()


def test_records_purged_while_stopped_are_a_named_gap_then_mirroring_goes_on(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[mh.Worker]
) -> None:
    src, tgt = kafka["source"], kafka["target"]
    topic = "gap.purged"
    records = mirrored_then_stopped(tmp_path, src, tgt, topic)
    purge(src, topic, 0, PER_PARTITION + 30)  # offsets 50..79 of partition 0 never mirrored
    port = free_port()
    w = mirror(tmp_path, src, tgt, topic, "--metrics.port", str(port))
    workers.append(w)
    lost = {
        r for r in records if r.partition == 0 and PER_PARTITION <= int(r.headers[0][1]) < PER_PARTITION + 30
    }
    kept = [r for r in records if r not in lost]
    mh.assert_mirrored(kept, mh.read_all(tgt, [topic], len(kept), timeout=90))
    w.wait_for(
        f"GAP in source cluster consumer topic {topic} partition 0: offsets 50..79 (30 records) purged "
        "on the source before they were mirrored"
    )
    gaps = [line for line in w.log().splitlines() if "GAP in" in line]
    assert len(gaps) == 1, gaps
    # The metrics follow the streams' snapshots (published every few seconds), not the log line.
    gap_records = ("kmirror_gap_records_total", (("source", "consumer"), ("stream", "0"), ("topic", topic)))
    mh.wait_until(lambda: mh.scrape(port).get(gap_records) is not None, 60, "the gap in the metrics")
    samples = mh.scrape(port)
    assert samples[gap_records] == 30
    assert samples[("kmirror_gaps_total", (("source", "consumer"), ("stream", "0")))] == 1
    mh.wait_until(
        lambda: mh.committed(src, f"g-{topic}", topic, 2) == {0: 2 * PER_PARTITION, 1: 2 * PER_PARTITION}
    )
    assert w.stop() == 0, w.log()


def test_gap_policy_stop_exits_4_and_commits_nothing_past_the_gap(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[mh.Worker]
) -> None:
    src, tgt = kafka["source"], kafka["target"]
    topic = "gap.stop"
    mirrored_then_stopped(tmp_path, src, tgt, topic)
    purge(src, topic, 1, PER_PARTITION + 10)
    w = mirror(tmp_path, src, tgt, topic, "--gap.policy", "stop")
    workers.append(w)
    assert w.proc.wait(90) == 4, w.log()
    errors = [line for line in w.log().splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "offsets 50..59 (10 records) lost" in errors[0], errors
    assert "docs/runbooks/source-gap.md" in errors[0]
    assert mh.committed(src, f"g-{topic}", topic, 2)[1] == PER_PARTITION


def only_new_topic_points(tgt: KafkaCluster, admin: AdminClient, topic: str) -> None:
    """The mirror's failover sync points of partition 0 are the recreated topic's only (--groups)."""
    new_id = str(admin.describe_topics(TopicCollection([topic]))[topic].result().topic_id)

    def points() -> list:
        return read_sync_data({"bootstrap.servers": tgt.bootstrap}, f"g-{topic}").store._points[(topic, 0)]

    mh.wait_until(lambda: any(p.topic_id == new_id for p in points()), 120, "a sync point of the new topic")
    assert {p.topic_id for p in points()} == {new_id}, points()


def recreated(src: KafkaCluster, topic: str) -> tuple[AdminClient, list[mh.Rec]]:
    """The topic deleted, created again with one partition and 10 new records written; the source's admin."""
    admin = AdminClient({"bootstrap.servers": src.bootstrap})
    for f in admin.delete_topics([topic]).values():
        f.result()
    mh.wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, 120, "the topic deleted")
    mh.create_topic(src, topic, 1)
    new = mh.make_records(topic, 1, 10, start=1000)
    mh.produce(src, new)
    return admin, new


def test_a_topic_recreated_under_the_mirror_is_mirrored_from_its_new_beginning(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[mh.Worker]
) -> None:
    src, tgt = kafka["source"], kafka["target"]
    topic = "gap.recreated"
    mh.create_topic(src, topic, 1)
    old = mh.make_records(topic, 1, PER_PARTITION)
    mh.produce(src, old)
    w = mirror(tmp_path, src, tgt, topic, "--topic.refresh.interval.ms", "1000", "--groups", "app-none")
    workers.append(w)
    mh.assert_mirrored(old, mh.read_all(tgt, [topic], len(old), timeout=90))
    mh.wait_until(lambda: mh.committed(src, f"g-{topic}", topic, 1) == {0: PER_PARTITION})
    admin, new = recreated(src, topic)
    on_target = mh.read_all(tgt, [topic], len(old) + len(new), timeout=120)
    mh.assert_mirrored(new, [r for r in on_target if int(r.headers[0][1]) >= 1000])
    assert w.proc.poll() is None, w.log()
    # The failover sync points of the old topic are not used for the new one (--groups).
    mh.wait_until(lambda: mh.committed(src, f"g-{topic}", topic, 1) == {0: len(new)}, 120)
    only_new_topic_points(tgt, admin, topic)
    assert w.stop() == 0, w.log()


def test_a_topic_recreated_while_the_mirror_is_stopped_is_mirrored_from_its_new_beginning(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[mh.Worker]
) -> None:
    """Deleted and recreated while no mirror runs: on restart the new topic is mirrored from its first
    record (Kafka drops the group's offsets of a deleted topic; had it kept them, the offset past the new
    end would be a named gap), nothing of it is missing, and only the new topic's sync points remain."""
    src, tgt = kafka["source"], kafka["target"]
    topic = "gap.recreated-stopped"
    mh.create_topic(src, topic, 1)
    old = mh.make_records(topic, 1, PER_PARTITION)
    mh.produce(src, old)
    groups = ("--groups", "app-none")
    w = mirror(tmp_path, src, tgt, topic, *groups)
    mh.assert_mirrored(old, mh.read_all(tgt, [topic], len(old), timeout=90))
    mh.wait_until(lambda: mh.committed(src, f"g-{topic}", topic, 1) == {0: PER_PARTITION}, 120)
    assert w.stop() == 0, w.log()
    admin, new = recreated(src, topic)
    w = mirror(tmp_path, src, tgt, topic, *groups)
    workers.append(w)
    on_target = mh.read_all(tgt, [topic], len(old) + len(new), timeout=120)
    mh.assert_mirrored(new, [r for r in on_target if int(r.headers[0][1]) >= 1000], exact=True)
    mh.wait_until(lambda: mh.committed(src, f"g-{topic}", topic, 1) == {0: len(new)}, 120)
    only_new_topic_points(tgt, admin, topic)
    assert w.stop() == 0, w.log()


def test_a_gap_is_kept_on_the_target_and_named_by_failover(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[mh.Worker]
) -> None:
    """With --groups the gap is written to the sync topic on the target, and `kmirror failover` names it
    for a group that had not read those offsets yet (it will not find them on the target)."""
    src, tgt = kafka["source"], kafka["target"]
    topic = "gap.failover"
    groups = ("--groups", "app-gap", "--sync.group.offsets.interval.ms", "300")
    mh.create_topic(src, topic, 1)
    mh.produce(src, mh.make_records(topic, 1, PER_PARTITION))
    mh.commit_offsets(src, "app-gap", {(topic, 0): 10})
    w = mirror(tmp_path, src, tgt, topic, *groups)
    mh.wait_until(lambda: mh.committed(src, f"g-{topic}", topic, 1) == {0: PER_PARTITION})
    assert w.stop() == 0, w.log()
    mh.produce(src, mh.make_records(topic, 1, PER_PARTITION, start=PER_PARTITION))
    purge(src, topic, 0, PER_PARTITION + 30)
    w = mirror(tmp_path, src, tgt, topic, *groups)
    workers.append(w)
    w.wait_for("GAP in source cluster consumer topic gap.failover partition 0: offsets 50..79 (30 records)")
    mh.wait_until(lambda: mh.committed(src, f"g-{topic}", topic, 1) == {0: 2 * PER_PARTITION})
    run = subprocess.run(
        [
            *mh.KMIRROR,
            "failover",
            "--source.config",
            str(tmp_path / "consumer.properties"),
            "--target.config",
            str(tmp_path / "producer.properties"),
            "--group",
            "app-gap",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert (
        "gap: gap.failover/0 offsets 50..79 (30 records) were purged on the source before they were mirrored"
        in run.stdout
    ), run.stdout
    as_json = subprocess.run([*run.args, "--json"], capture_output=True, text=True, timeout=120)
    gaps = json.loads(as_json.stdout)["gaps"]
    assert [(g["topic"], g["partition"], g["first"], g["last"], g["records"]) for g in gaps] == [
        (topic, 0, 50, 79, 30)
    ]
    assert w.stop() == 0, w.log()


def test_an_eager_assignor_is_warned_that_gaps_go_unreported_and_mirrors_on(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[mh.Worker]
) -> None:
    """range (MirrorMaker 1's assignor, eager) cannot fetch one partition again on its own: the stream says
    at its start that gaps go unreported there, librdkafka resets past a purge itself, and the rest is
    mirrored as before."""
    src, tgt = kafka["source"], kafka["target"]
    topic = "gap.eager"
    mh.create_topic(src, topic, 2)
    first = mh.make_records(topic, 2, PER_PARTITION)
    mh.produce(src, first)
    consumer = mh.consumer_file(tmp_path, src, f"g-{topic}", "partition.assignment.strategy=range\n")
    args = mh.run_args(consumer, mh.producer_file(tmp_path, tgt), "--whitelist", topic, "--num.streams", "1")
    w = mh.Worker(tmp_path, args)
    mh.assert_mirrored(first, mh.read_all(tgt, [topic], len(first), timeout=90), exact=True)
    mh.wait_until(lambda: mh.committed(src, f"g-{topic}", topic, 2) == {0: PER_PARTITION, 1: PER_PARTITION})
    assert w.stop() == 0, w.log()
    assert "partition.assignment.strategy=range (eager): gaps in the source" in w.log()
    more = mh.make_records(topic, 2, PER_PARTITION, start=PER_PARTITION)
    mh.produce(src, more)
    purge(src, topic, 1, PER_PARTITION + 5)
    w = mh.Worker(tmp_path, args)
    workers.append(w)
    kept = [r for r in first + more if not (r.partition == 1 and PER_PARTITION <= int(r.headers[0][1]) < 55)]
    mh.assert_mirrored(kept, mh.read_all(tgt, [topic], len(kept), timeout=90))
    mh.wait_until(
        lambda: mh.committed(src, f"g-{topic}", topic, 2) == {0: 2 * PER_PARTITION, 1: 2 * PER_PARTITION}
    )
    assert "GAP in" not in w.log()
    assert w.stop() == 0, w.log()


def partition_state(cluster: KafkaCluster, topic: str) -> tuple[int, list[int]]:
    """(leader, ISR) of the topic's partition 0 as the cluster's metadata says; (-1, []) without an answer."""
    try:
        md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=5)
        p = md.topics[topic].partitions[0]
        return int(p.leader), sorted(p.isrs)
    except (KafkaException, KeyError):
        return -1, []


def test_a_partition_truncated_by_an_unclean_leader_election_is_a_named_gap(
    tmp_path: Path, workers: list[mh.Worker]
) -> None:
    """An unclean leader election on a 3-node source (Apache Kafka 4.3, KRaft) truncates a partition
    below the mirror's position: one GAP line "mirrored before and no longer on the source" naming the
    offsets, counted in kmirror_gaps_total (not as lost records), and mirroring goes on.

    The recipe: a topic on nodes 1 and 2 only (replica assignment [1, 2]) with min.insync.replicas=1 and
    unclean.leader.election.enable=true; 50 records on both; node 2 killed, out of the ISR; 30 more records
    only on node 1, mirrored (position 80); node 1 killed and node 2 started (the controller quorum is
    back with nodes 2 and 3): the controller elects node 2 uncleanly by itself once node 1 is fenced
    (ISR [1] -> [2], log end 50; no `elect_leaders` needed). librdkafka finds the truncation by the leader
    epoch (KIP-320) and, with auto.offset.reset=error, hands the stream an offset reset without the offset
    wanted (the stream reads it from the event's text: kmirror.mirror.gaps.TRUNCATED_AT).
    """
    clusters = {"source": KafkaCluster("source", size=3), "target": KafkaCluster("target")}
    with running(clusters, tmp_path / "brokers"):
        src, tgt = clusters["source"], clusters["target"]
        topic = "gap.truncated"
        admin = AdminClient({"bootstrap.servers": src.bootstrap})
        unclean = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
        on_1_and_2 = NewTopic(topic, 1, replica_assignment=[[1, 2]], config=unclean)
        for f in admin.create_topics([on_1_and_2]).values():
            f.result()
        first = mh.make_records(topic, 1, PER_PARTITION)
        mh.produce(src, first)
        port = free_port()
        w = mirror(tmp_path, src, tgt, topic, "--metrics.port", str(port))
        workers.append(w)
        mh.wait_until(
            lambda: mh.committed(src, f"g-{topic}", topic, 1) == {0: PER_PARTITION}, 120, "50 mirrored"
        )
        src.kill_node(2, signal.SIGKILL)
        mh.wait_until(lambda: partition_state(src, topic) == (1, [1]), 120, "node 2 out of the ISR")
        only_on_1 = mh.make_records(topic, 1, 30, start=PER_PARTITION)
        mh.produce(src, only_on_1)
        mh.wait_until(lambda: mh.committed(src, f"g-{topic}", topic, 1) == {0: 80}, 120, "80 mirrored")
        src.kill_node(1, signal.SIGKILL)
        src.start_node(2, in_sync=False)
        mh.wait_until(lambda: partition_state(src, topic) == (2, [2]), 180, "node 2 elected uncleanly")
        w.wait_for(
            f"GAP in source cluster consumer topic {topic} partition 0: offsets 50..79 (30 records) mirrored "
            "before and no longer on the source",
            120,
        )
        gaps = [line for line in w.log().splitlines() if "GAP in" in line]
        assert len(gaps) == 1, gaps
        new = mh.make_records(topic, 1, 10, start=1000)
        mh.produce(src, new)  # offsets 50..59 of the truncated partition
        on_target = mh.read_all(
            tgt, [topic], len(first) + len(only_on_1) + len(first) + len(new), timeout=120
        )
        mh.assert_mirrored(new, [r for r in on_target if int(r.headers[0][1]) >= 1000], exact=True)
        mh.wait_until(lambda: mh.committed(src, f"g-{topic}", topic, 1) == {0: PER_PARTITION + 10}, 120)
        gaps_total = ("kmirror_gaps_total", (("source", "consumer"), ("stream", "0")))
        mh.wait_until(lambda: mh.scrape(port).get(gaps_total) == 1, 60, "the gap in the metrics")
        lost = ("kmirror_gap_records_total", (("source", "consumer"), ("stream", "0"), ("topic", topic)))
        assert mh.scrape(port).get(lost, 0) == 0  # truncated records had been mirrored: not lost
        assert w.stop() == 0, w.log()
