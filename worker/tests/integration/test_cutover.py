"""Cutover from Apache Kafka's own MirrorMakers to kmirror under live traffic, with the real tools
(kmirror.testing.mirrormakers): MirrorMaker 1 from the 3.9 jars, MirrorMaker 2 (connect-mirror 4.3) in
dedicated mode, both against the 4.3 test brokers.

* A MirrorMaker 1 still running in the group is refused (exit 2, one line naming the group, its
  members and the fix); once it is stopped, kmirror with the same group.id resumes from its committed
  offsets: nothing missing, duplicates at most what MirrorMaker 1 wrote past its last commit.
* A MirrorMaker 2 (progress in Connect offsets, no consumer group) is replaced with
  ``--initial.offsets target-end``: every record after MirrorMaker 2's last copied one is on the target
  once, in order, no record copied twice (the records are unique, so the target's last record matches one
  source offset exactly), and the bound kmirror reports is 0.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from mirror_harness import (
    KMIRROR,
    LiveTraffic,
    Rec,
    Worker,
    assert_mirrored,
    committed,
    create_topic,
    produce,
    read_all,
    run_args,
    topic_partitions,
    wait_until,
    write,
)

from kmirror.testing.kafka import KafkaCluster, free_port
from kmirror.testing.mirrormakers import MirrorMaker1, MirrorMaker2

TOPIC = "orders"
PARTITIONS = 3


def ends(cluster: KafkaCluster, topic: str, partitions: int) -> list[int]:
    """Each partition's high watermark (how many records it holds: nothing is deleted in these tests)."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kmirror-test-count"})
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                tps = [TopicPartition(topic, i) for i in range(partitions)]
                return [c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps]
            except KafkaException:  # e.g. NOT_LEADER_OR_FOLLOWER while a loaded broker moves a leader
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        c.close()


def end_offsets(cluster: KafkaCluster, topic: str, partitions: int) -> int:
    return sum(ends(cluster, topic, partitions))


def stable_members(cluster: KafkaCluster, group: str) -> int:
    """How many members the group has once it is stable (0 while it rebalances)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    return len(described.members or []) if described.state.name == "STABLE" else 0


def seq(r: Rec) -> tuple[int, int]:
    """(source partition, source offset) of a LiveTraffic record: its value is b"topic:p:i" and record i of
    a fresh topic's partition p is at offset i (one idempotent producer, nothing else writes)."""
    _, p, i = r.value.split(b":") if r.value else (b"", b"-1", b"-1")
    return int(p), int(i)


def copied_everything(sent: list[Rec], target: list[Rec]) -> int:
    """Every sent record is on the target (in whatever partition: MirrorMaker 1 places records by key
    hash); the number of duplicates."""
    have = Counter(r.content for r in target)
    missing = [r for r in sent if have[r.content] == 0]
    assert not missing, f"{len(missing)} of {len(sent)} records missing on the target, e.g. {missing[:3]}"
    return sum(n - 1 for n in have.values())


def test_mirrormaker1_replaced_under_live_traffic(
    kafka: dict[str, KafkaCluster], tmp_path: Path, workers: list[Worker]
) -> None:
    source, target = kafka["source"], kafka["target"]
    create_topic(source, TOPIC, PARTITIONS)
    create_topic(target, TOPIC, PARTITIONS)
    mm1 = MirrorMaker1(
        tmp_path / "mm1",
        source.bootstrap,
        target.bootstrap,
        TOPIC,
        "mirror",
        num_streams=2,
        commit_interval_ms=1000,
    )
    with LiveTraffic(source, TOPIC, PARTITIONS, rate_per_s=300) as traffic, mm1:
        wait_until(lambda: end_offsets(target, TOPIC, PARTITIONS) >= 300, 240, "MirrorMaker 1 copying")
        # Both of its streams in the group and the group's protocol chosen (under load the second stream
        # can still be joining when the first copies).
        wait_until(lambda: stable_members(source, "mirror") == 2, 120, "MirrorMaker 1's group stable")

        # check-config takes MirrorMaker 1's files as they are.
        check = subprocess.run(
            [*KMIRROR, "check-config", "--consumer.config", str(mm1.consumer_config), "--producer.config",
             str(mm1.producer_config), "--whitelist", TOPIC],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert check.returncode == 0, check.stdout + check.stderr
        assert "verdict: SAFE" in check.stdout

        # kmirror with the same group while MirrorMaker 1 still runs: refused before any stream joins.
        refused = subprocess.run(
            [*KMIRROR, "run", *run_args(mm1.consumer_config, mm1.producer_config, "--whitelist", TOPIC)],
            capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        out = refused.stdout + refused.stderr
        assert refused.returncode == 2, out
        errors = [line for line in out.splitlines() if " ERROR " in line or "error:" in line]
        assert len(errors) == 1, out
        line = errors[0]
        assert "'mirror'" in line and "mirror-0@127.0.0.1" in line and "mirror-1@127.0.0.1" in line, line
        assert "group protocol range" in line and "stop every MirrorMaker process" in line, line
        assert "Traceback" not in out

        # The cutover: stop MirrorMaker 1 (it flushes and commits), start kmirror with its files.
        mm1.stop()
        offsets = committed(source, "mirror", TOPIC, PARTITIONS)
        assert all(o > 0 for o in offsets.values()), offsets
        before = read_all(target, [TOPIC], end_offsets(target, TOPIC, PARTITIONS), timeout=60)
        past_commit = [r for r in before if seq(r)[1] >= offsets[seq(r)[0]]]
        worker = Worker(tmp_path, run_args(mm1.consumer_config, mm1.producer_config, "--whitelist", TOPIC))
        workers.append(worker)
        worker.wait_for(
            f"3 of {PARTITIONS} selected partitions resume from committed offsets; 0 have none", 120
        )
        worker.wait_for("assigned", 120)
        at_start = len(traffic.sent)
        wait_until(lambda: len(traffic.sent) > at_start + 300, 120, "live traffic after the cutover")
    sent = traffic.sent
    got = read_all(target, [TOPIC], len(sent), timeout=120)
    assert worker.stop() == 0, worker.log()
    duplicates = copied_everything(sent, got)
    # Copied twice: only records MirrorMaker 1 wrote past its last commit (it commits after flushing on a
    # clean stop, so usually none).
    assert duplicates <= len(past_commit), (duplicates, len(past_commit), offsets)
    print(f"MirrorMaker 1 -> kmirror: {len(sent)} records, 0 missing, {duplicates} duplicates")


def test_mirrormaker2_replaced_with_target_end(
    kafka: dict[str, KafkaCluster], tmp_path: Path, workers: list[Worker]
) -> None:
    source, target = kafka["source"], kafka["target"]
    create_topic(source, TOPIC, PARTITIONS)
    mm2 = MirrorMaker2(tmp_path / "mm2", source.bootstrap, target.bootstrap, TOPIC)
    with LiveTraffic(source, TOPIC, PARTITIONS, rate_per_s=300) as traffic, mm2:
        # Every partition copied in part (MirrorMaker 2 reads one partition's backlog before the next).
        wait_until(
            lambda: TOPIC in target_topics(target) and min(ends(target, TOPIC, PARTITIONS)) >= 100,
            150,
            "MirrorMaker 2 copying",
        )
        print(
            f"MirrorMaker 2: 100 records in every partition {mm2.seconds_since_start():.1f} s after its start"
        )
        mm2.stop()
        copied_by_mm2 = end_offsets(target, TOPIC, PARTITIONS)
        # Where MirrorMaker 2's copy ends in each partition: the source offset of its last record there.
        mm2_last: dict[int, int] = {}
        for r in read_all(target, [TOPIC], copied_by_mm2, timeout=60):
            p, i = seq(r)
            mm2_last[p] = max(mm2_last.get(p, -1), i)
        consumer = write(
            tmp_path / "consumer.properties",
            f"bootstrap.servers={source.bootstrap}\ngroup.id=kmirror-cutover\n"
            "session.timeout.ms=6000\nheartbeat.interval.ms=1000\n",
        )
        producer = write(tmp_path / "producer.properties", f"bootstrap.servers={target.bootstrap}\n")
        worker = Worker(
            tmp_path, run_args(consumer, producer, "--whitelist", TOPIC, "--initial.offsets", "target-end")
        )
        workers.append(worker)
        worker.wait_for(f"committed the start of {PARTITIONS} partitions", 120)
        worker.wait_for("assigned", 120)
        at_start = len(traffic.sent)
        wait_until(lambda: len(traffic.sent) > at_start + 300, 120, "live traffic after the cutover")
    sent = traffic.sent
    got = read_all(target, [TOPIC], len(sent), timeout=120)
    assert worker.stop() == 0, worker.log()
    assert copied_by_mm2 >= 300
    assert "starts at auto.offset.reset" not in worker.log()
    # kmirror's part: every record after MirrorMaker 2's last, in the same partition and order (MirrorMaker 2
    # keeps partitions too). MirrorMaker 2's own part is its own: what it missed is said, not asserted
    # (once, under load, it had not copied the first record of one partition).
    assert sorted(mm2_last) == list(range(PARTITIONS)), mm2_last
    after = [r for r in sent if seq(r)[1] > mm2_last[seq(r)[0]]]
    assert len(after) >= 300, len(after)
    assert_mirrored(after, [r for r in got if seq(r)[1] > mm2_last[seq(r)[0]]], exact=True)
    have = {r.content for r in got}
    missed_by_mm2 = [seq(r) for r in sent if r.content not in have]
    print(f"MirrorMaker 2 -> kmirror: {len(sent)} records, {len(after)} copied by kmirror, none missing; "
          f"MirrorMaker 2 had not copied {len(missed_by_mm2)} of its part {missed_by_mm2[:5]}")  # fmt: skip
    duplicates = len(got) - len({r.content for r in got})
    reported = re.search(r"at most (\d+) records copied twice", worker.log())
    assert reported is not None, worker.log()
    # The records are unique, so the target's last record is one source offset: nothing copied twice, as
    # kmirror reports.
    assert int(reported.group(1)) == 0
    assert duplicates <= int(reported.group(1)), duplicates
    print(
        f"MirrorMaker 2 -> kmirror: {len(sent)} records ({copied_by_mm2} by MirrorMaker 2), 0 missing, "
        f"{duplicates} duplicates"
    )


def target_topics(cluster: KafkaCluster) -> set[str]:
    return set(topic_partitions(cluster))


def recs(topic: str, partition: int, values: list[bytes], ts0: int = 1_700_000_000_000) -> list[Rec]:
    return [
        Rec(
            topic,
            partition,
            b"k",
            v,
            (("n", b"%d" % i),) if v != b"X" else (("n", b"x"),),
            ts0 + (i if v != b"X" else 0),
        )
        for i, v in enumerate(values)
    ]


def test_target_end_matches_exactly_or_refuses(
    kafka: dict[str, KafkaCluster], tmp_path: Path, workers: list[Worker]
) -> None:
    """Without any MirrorMaker: copies made by hand on the target. Identical records right after the match
    are counted in the reported bound (and are the only records copied twice); a partition with nothing on
    the target starts at the beginning; a copy whose partitions are swapped is refused, nothing committed."""
    source, target = kafka["source"], kafka["target"]
    # repeats[0]: a0..a4, X, X, a7..a9 (two identical records X); the target holds the first 7.
    p0 = recs("repeats", 0, [b"a0", b"a1", b"a2", b"a3", b"a4", b"X", b"X", b"a7", b"a8", b"a9"])
    p1 = recs("repeats", 1, [b"b%d" % i for i in range(5)])
    swapped = [
        *recs("swapped", 0, [b"c%d" % i for i in range(5)]),
        *recs("swapped", 1, [b"d%d" % i for i in range(5)]),
    ]
    for cluster in (source, target):
        create_topic(cluster, "repeats", 2)
        create_topic(cluster, "swapped", 2)
    produce(source, [*p0, *p1, *swapped])
    produce(target, p0[:7])
    produce(target, [Rec(r.topic, 1 - r.partition, r.key, r.value, r.headers, r.timestamp) for r in swapped])

    consumer = write(
        tmp_path / "consumer.properties", f"bootstrap.servers={source.bootstrap}\ngroup.id=cutover\n"
    )
    producer = write(tmp_path / "producer.properties", f"bootstrap.servers={target.bootstrap}\n")
    args = run_args(consumer, producer, "--whitelist", "swapped", "--initial.offsets", "target-end")
    refused = subprocess.run([*KMIRROR, "run", *args], capture_output=True, text=True, timeout=120)
    out = refused.stdout + refused.stderr
    assert refused.returncode == 2, out
    errors = [line for line in out.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in out, out
    assert "swapped[0]" in errors[0] and "does not keep partitions" in errors[0], errors[0]
    assert committed(source, "cutover", "swapped", 2) == {0: -1001, 1: -1001}  # nothing committed

    worker = Worker(
        tmp_path, run_args(consumer, producer, "--whitelist", "repeats", "--initial.offsets", "target-end")
    )
    workers.append(worker)
    worker.wait_for("committed the start of 1 partitions", 60)
    assert "repeats[1]: nothing on the target yet: starts at auto.offset.reset" in worker.log()
    assert (
        "repeats[0]: the target's copy ends at offset 7; starting at source offset 6 (1 identical"
        in worker.log()
    )
    assert "at most 1 records copied twice" in worker.log()
    got = read_all(target, ["repeats"], 7 + 4 + 5, timeout=60)
    assert worker.stop() == 0, worker.log()
    on = {p: [r.content for r in got if r.partition == p] for p in (0, 1)}
    # The first X matched (offset 5): the second X (offset 6) is copied again, once; nothing is missing.
    assert on[0] == [r.content for r in p0[:7] + p0[6:]]
    assert on[1] == [r.content for r in p1]


def members(cluster: KafkaCluster, group: str, protocol: str = "cooperative-sticky") -> list[str]:
    """The client ids of the group's members once it is stable with `protocol` (else none)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    if described.state.name != "STABLE" or described.partition_assignor != protocol:
        return []
    return sorted(m.client_id for m in described.members or [])


def test_kmirror_hosts_with_their_own_client_ids_share_the_group_a_mirrormaker1_does_not(
    kafka: dict[str, KafkaCluster], tmp_path: Path, workers: list[Worker]
) -> None:
    """The Ansible roles give each worker host its own client.id: a second kmirror host joins the group of
    the first. A MirrorMaker 1 that joined that group (with the cooperative-sticky assignor, so the group
    protocol is kmirror's) is still found by its client ids (GROUP-N): a kmirror started then is refused."""
    source, target = kafka["source"], kafka["target"]
    create_topic(source, TOPIC, PARTITIONS)
    started = []
    for host in ("w1", "w2"):
        consumer = write(
            tmp_path / f"consumer-{host}.properties",
            f"bootstrap.servers={source.bootstrap}\ngroup.id=mirror\nclient.id=kmirror-east-{host}-consumer\n"
            "session.timeout.ms=6000\nheartbeat.interval.ms=1000\n",
        )
        producer = write(tmp_path / "producer.properties", f"bootstrap.servers={target.bootstrap}\n")
        w = Worker(
            tmp_path, run_args(consumer, producer, "--whitelist", TOPIC, "--num.streams", "1"), name=host
        )
        workers.append(w)
        w.wait_for("assigned", 60)
        started.append(w)
    wait_until(
        lambda: members(source, "mirror") == ["kmirror-east-w1-consumer", "kmirror-east-w2-consumer"],
        30,
        "both kmirror hosts in the group",
    )
    cooperative = {
        "partition.assignment.strategy": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
    }
    with MirrorMaker1(
        tmp_path / "mm1", source.bootstrap, target.bootstrap, TOPIC, "mirror", consumer=cooperative
    ):
        wait_until(lambda: len(members(source, "mirror")) == 3, 60, "MirrorMaker 1 in the kmirror group")
        args = run_args(
            tmp_path / "consumer-w1.properties", tmp_path / "producer.properties", "--whitelist", TOPIC
        )
        refused = subprocess.run([*KMIRROR, "run", *args], capture_output=True, text=True, timeout=120)
    out = refused.stdout + refused.stderr
    assert refused.returncode == 2, out
    errors = [line for line in out.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in out, out
    assert "1 member(s)" in errors[0] and "mirror-0@127.0.0.1" in errors[0], errors[0]
    # The protocol is named as the group has it then: MirrorMaker 1's 3.9 consumer may be in a follow-up
    # rebalance of the cooperative protocol ("none chosen yet") when kmirror looks.
    assert "group protocol cooperative-sticky" in errors[0] or "none chosen yet" in errors[0], errors[0]
    for w in started:
        assert w.stop() == 0, w.log()


def test_target_end_with_a_source_that_does_not_answer_is_refused(tmp_path: Path) -> None:
    """Without the source the starting offsets cannot be found: one line, exit 2 (the unit does not
    restart it), instead of starting at auto.offset.reset and copying everything again."""
    closed = free_port()
    consumer = write(tmp_path / "consumer.properties", f"bootstrap.servers=127.0.0.1:{closed}\ngroup.id=g\n")
    producer = write(tmp_path / "producer.properties", f"bootstrap.servers=127.0.0.1:{closed}\n")
    args = run_args(consumer, producer, "--whitelist", TOPIC, "--initial.offsets", "target-end")
    refused = subprocess.run([*KMIRROR, "run", *args], capture_output=True, text=True, timeout=120)
    out = refused.stdout + refused.stderr
    assert refused.returncode == 2, out
    errors = [line for line in out.splitlines() if "error:" in line or " ERROR " in line]
    assert len(errors) == 1 and "Traceback" not in out, out
    assert "--initial.offsets target-end: source consumer did not answer" in errors[0], errors[0]
    assert "start again once the source cluster answers" in errors[0], errors[0]
    assert "kmirror.librdkafka" not in out, out  # the preflight's clients are quiet
