"""Mirroring across Apache Kafka versions: a 3.9 cluster and a 4.3 cluster side by side, each the source of
one mirror and the target of the other.

MirrorMaker's rule is that its consumer must be compatible with the source cluster and its producer with the
target; kmirror's one client (librdkafka) talks to both. This proves it for the two lines the project pins:
records identical (key, value, headers with null values, CreateTime, partition, order), destination topics
made with the source's partition count and configs, offsets committed (a restarted worker copies nothing
again), and `kmirror lag` reading the group on either version.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import mirror_harness as mh
from confluent_kafka.admin import AdminClient, ConfigResource

from kmirror.testing.kafka import KafkaCluster, start_together

PARTITIONS = 3
CONFIGS = {"retention.ms": "86400000", "max.message.bytes": "2000000", "segment.ms": "3600000"}


def kafka_version(cluster: KafkaCluster) -> str:
    """The version the broker itself reports at start ("Kafka version: X" in its log)."""
    assert cluster.log_path is not None
    for line in cluster.log_path.read_text(errors="replace").splitlines():
        if "Kafka version: " in line:
            return line.split("Kafka version: ", 1)[1].split()[0]
    raise AssertionError(f"no 'Kafka version' line in {cluster.log_path}")


def first_batch(topic: str) -> list[mh.Rec]:
    # Edge cases: null key, tombstone (null value), headers with a null value and a repeated name, empty
    # value.
    return [
        *mh.make_records(topic, PARTITIONS, 40),
        mh.Rec(topic, 0, None, b"no-key", (), 1_700_000_100_000),
        mh.Rec(topic, 1, b"deleted", None, (), 1_700_000_100_001),
        mh.Rec(topic, 2, b"h", b"null-header", (("trace", None), ("trace", b"dup")), 1_700_000_100_002),
        mh.Rec(topic, 0, b"e", b"", (("only-null", None),), 1_700_000_100_003),
    ]


def topic_configs(cluster: KafkaCluster, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    return {k: v.value for f in described.values() for k, v in f.result().items()}


def lag_rows(cluster: KafkaCluster, group: str) -> dict[tuple[str, int], dict[str, object]]:
    out = subprocess.run(
        [*mh.KMIRROR, "lag", "--bootstrap-server", cluster.bootstrap, "--group", group, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return {(r["topic"], r["partition"]): r for r in json.loads(out.stdout)}


def assert_lag_zero(cluster: KafkaCluster, topic: str, records: list[mh.Rec], when: str) -> None:
    """Offsets committed up to the end of every partition, and `kmirror lag` reads them as lag 0."""
    ends = {p: len(rs) for (_, p), rs in mh.by_partition(records).items()}
    mh.wait_until(
        lambda: mh.committed(cluster, "mirror", topic, PARTITIONS) == ends,
        what=f"offsets of {topic} committed on {cluster.name} {when}",
    )
    rows = lag_rows(cluster, "mirror")
    assert set(rows) == {(topic, p) for p in range(PARTITIONS)}, rows
    for (_, p), r in rows.items():
        assert (r["offset"], r["log_size"], r["lag"]) == (ends[p], ends[p], 0), r


def mirror(tmp_path: Path, src: KafkaCluster, tgt: KafkaCluster, topic: str, name: str) -> mh.Worker:
    return mh.Worker(
        tmp_path,
        mh.run_args(
            mh.consumer_file(tmp_path, src, name=f"{name}-consumer.properties"),
            mh.producer_file(tmp_path, tgt, name=f"{name}-producer.properties"),
            "--whitelist",
            topic,
            "--num.streams",
            "1",
        ),
        name=name,
    )


def test_mirror_between_kafka_3_9_and_4_3_both_ways(tmp_path, workers):
    old = KafkaCluster("kafka39", line="3.9")
    new = KafkaCluster("kafka43", line="4.3")
    try:
        start_together([old, new], tmp_path / "brokers")
        assert kafka_version(old).startswith("3.9.") and kafka_version(new).startswith("4.3.")
        # 3.9 -> 4.3 and 4.3 -> 3.9, at the same time (different topics: no loop).
        routes = [(old, new, "from39", "up"), (new, old, "from43", "down")]
        batches: dict[str, list[mh.Rec]] = {}
        for src, _, topic, _ in routes:
            mh.create_topic(src, topic, PARTITIONS, CONFIGS)
            batches[topic] = first_batch(topic)
            mh.produce(src, batches[topic])
        running = [mirror(tmp_path, src, tgt, topic, name) for src, tgt, topic, name in routes]
        workers.extend(running)

        for src, tgt, topic, _ in routes:
            records = batches[topic]
            mh.assert_mirrored(records, mh.read_all(tgt, [topic], len(records)), exact=True)
            # The destination topic was made by kmirror from the source's partitions and configs.
            assert mh.topic_partitions(tgt)[topic] == PARTITIONS
            configs = topic_configs(tgt, topic)
            assert {k: configs.get(k) for k in CONFIGS} == CONFIGS
            assert_lag_zero(src, topic, records, "up to the end")
        for w, (_, _, topic, _) in zip(running, routes, strict=True):
            assert w.stop(signal.SIGTERM) == 0
            assert f"stopped cleanly ({len(batches[topic])} records mirrored" in w.log()

        # A restart resumes from the committed offsets: the records written while it starts arrive once
        # (a start from the beginning would copy the first batch again, one from the end would skip these).
        restarted = [mirror(tmp_path, src, tgt, topic, f"{name}-again") for src, tgt, topic, name in routes]
        workers.extend(restarted)
        for src, _, topic, _ in routes:
            more = mh.make_records(topic, PARTITIONS, 20, start=40)
            mh.produce(src, more)
            batches[topic] = batches[topic] + more
        for src, tgt, topic, _ in routes:
            records = batches[topic]
            mh.assert_mirrored(records, mh.read_all(tgt, [topic], len(records)), exact=True)
            assert_lag_zero(src, topic, records, "after the restart")
        for w in restarted:
            assert w.stop(signal.SIGTERM) == 0
            # Only the second batch went through the restarted worker.
            assert f"stopped cleanly ({PARTITIONS * 20} records mirrored" in w.log()
        assert all("created destination topic" not in w.log() for w in restarted)
    finally:
        for c in (old, new):
            c.stop()
