"""Destination topics kept in step while `kmirror run` mirrors, on Apache Kafka 4.3.

* What is set on a source topic is what its destination gets (never the source brokers' defaults as
  overrides); a source config changed while the mirror runs reaches the target within the topic refresh
  interval, and one removed on the source is removed on the target, which then has the *target's* default.
  The two clusters have different broker defaults for ``segment.ms`` (``log.roll.ms``) and
  ``min.cleanable.dirty.ratio`` to tell them apart.
* A source topic's config cannot delete the copy's records (issue 34, item 5): ``retention.ms=1`` on the
  source purges the source, and the target keeps its retention and every record; a protected config
  still follows upwards; ``--config.properties.protect`` lets a key follow the source again. The brokers
  of that test run retention every second.
* A source topic with more partitions than its destination, on a target whose authorizer denies the
  mirror principal ALTER on the topic (it has the kmirror_acls role's bindings, created by the role's own
  module, plus an operator's DENY): CreatePartitions is refused, the mismatch is logged with the broker's
  reason, exposed as `kmirror_topic_partition_mismatch`, and records keep flowing by key hash without loss.
  Partitions the target does add are in test_partition_growth.py.
* The config sync runs beside the stream loop, never in it: with the source frozen (SIGSTOP: connections
  accepted, nothing answered) the call the loop makes returns while the sync still waits for its answer.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import mirror_harness as mh
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourcePatternType,
    ResourceType,
)
from test_acls_enforced import ADMIN, ADMIN_PASS, TGT_PASS, TGT_USER, admin_conf, run_module
from test_mirror import java_partition
from tls_fixtures import scram_jaas

from kmirror.mirror import topics
from kmirror.testing.kafka import KafkaCluster, ScramUser, Security, free_port, running

SOURCE_SEGMENT_MS = "7200000"  # the source brokers' default segment.ms (log.roll.ms), 2 h
TARGET_SEGMENT_MS = "604800000"  # Kafka's own default, 7 days, on the target
SOURCE_DIRTY_RATIO = "0.3"  # the source brokers' min.cleanable.dirty.ratio (log.cleaner.min.cleanable.ratio)
TARGET_DIRTY_RATIO = "0.5"  # Kafka's own default, on the target
RETENTION_EVERY_SECOND = {"log.initial.task.delay.ms": "1000", "log.retention.check.interval.ms": "1000"}
WEEK_MS = "604800000"


@pytest.fixture
def different_defaults(tmp_path: Path) -> Iterator[dict[str, KafkaCluster]]:
    source_defaults = {
        "log.roll.ms": SOURCE_SEGMENT_MS,
        "log.cleaner.min.cleanable.ratio": SOURCE_DIRTY_RATIO,
    }
    cs = {
        "source": KafkaCluster("source", broker_config=source_defaults),
        "target": KafkaCluster("target"),
    }
    with running(cs, tmp_path / "brokers"):
        yield cs


@pytest.fixture
def fast_retention(tmp_path: Path) -> Iterator[dict[str, KafkaCluster]]:
    """Both clusters delete what retention allows every second (the test brokers otherwise keep
    everything: docs/testing.md)."""
    cs = {
        "source": KafkaCluster("source", broker_config=RETENTION_EVERY_SECOND),
        "target": KafkaCluster("target", broker_config=RETENTION_EVERY_SECOND),
    }
    with running(cs, tmp_path / "brokers"):
        yield cs


@pytest.fixture
def target_with_authorizer(tmp_path: Path) -> Iterator[dict[str, KafkaCluster]]:
    security = Security(
        sasl_plaintext=True,
        scram=(ScramUser(ADMIN, ADMIN_PASS), ScramUser(TGT_USER, TGT_PASS)),
        super_users=(f"User:{ADMIN}",),
    )
    cs = {"source": KafkaCluster("source"), "target": KafkaCluster("target", security=security)}
    with running(cs, tmp_path / "brokers"):
        yield cs


def described(cluster: KafkaCluster, topic: str) -> dict[str, ConfigEntry]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    got: dict[str, ConfigEntry] = admin.describe_configs([res])[res].result(10)
    return got


def overrides(cluster: KafkaCluster, topic: str) -> dict[str, str]:
    """The configs set on the topic (what kafka-configs.sh --describe lists for it)."""
    return {
        k: str(e.value)
        for k, e in described(cluster, topic).items()
        if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }


def alter(cluster: KafkaCluster, topic: str, set_: dict[str, str], delete: tuple[str, ...] = ()) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(10)


def test_source_config_changes_reach_the_target_while_mirroring(different_defaults, tmp_path, workers):
    src, tgt = different_defaults["source"], different_defaults["target"]
    mh.create_topic(
        src,
        "synced",
        2,
        {
            "retention.ms": "86400000",
            "segment.ms": "3600000",
            "min.cleanable.dirty.ratio": "0.2",
            "min.insync.replicas": "1",
        },
    )
    # Inherited on the source: its brokers' segment.ms, Kafka's max.message.bytes, ...
    inherited = described(src, "synced")
    assert inherited["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    first = mh.make_records("synced", 2, 20)
    mh.produce(src, first)
    w = mh.mirror_worker(tmp_path, src, tgt, "synced", 1, "--topic.refresh.interval.ms", "500")
    workers.append(w)
    mh.read_all(tgt, ["synced"], len(first))
    # Created with what is set on the source topic, protected configs included (the copy holds nothing yet),
    # nothing inherited; not the source cluster's durability.
    assert overrides(tgt, "synced") == {
        "retention.ms": "86400000",
        "segment.ms": "3600000",
        "min.cleanable.dirty.ratio": "0.2",
    }
    # A setting the target's operator made for this cluster (a kind never copied): kmirror never touches it.
    alter(tgt, "synced", {"unclean.leader.election.enable": "true"})

    # Protected configs follow upwards (a longer retention, larger records); others either way.
    alter(
        src,
        "synced",
        {"retention.ms": "172800000", "max.message.bytes": "2000000"},
        delete=("min.cleanable.dirty.ratio",),
    )
    # On the source, min.cleanable.dirty.ratio is its brokers' default again.
    assert described(src, "synced")["min.cleanable.dirty.ratio"].value == SOURCE_DIRTY_RATIO

    want = {
        "retention.ms": "172800000",
        "segment.ms": "3600000",
        "max.message.bytes": "2000000",
        "unclean.leader.election.enable": "true",
    }
    mh.wait_until(
        lambda: overrides(tgt, "synced") == want,
        timeout=15,
        what=f"the target topic's overrides to become {want}",
    )
    # Removed on the target too: the target's default, not the source brokers'.
    ratio = described(tgt, "synced")["min.cleanable.dirty.ratio"]
    assert (ratio.value, ratio.source) == (TARGET_DIRTY_RATIO, ConfigSource.DEFAULT_CONFIG.value)
    assert (
        "destination topic synced follows the source: max.message.bytes=2000000, retention.ms=172800000, "
        "min.cleanable.dirty.ratio (back to the target's default)"
    ) in w.log()

    # Mirroring went on through the change, and a refresh with nothing changed alters nothing.
    more = mh.make_records("synced", 2, 20, start=20)
    mh.produce(src, more)
    mh.assert_mirrored(first + more, mh.read_all(tgt, ["synced"], len(first) + len(more)), exact=True)
    assert w.log().count("follows the source") == 1
    assert w.stop(signal.SIGTERM) == 0


def fresh_records(topic: str, partitions: int, per_partition: int) -> list[mh.Rec]:
    """Records stamped now (make_records' fixed 2023 times would be past any retention)."""
    now = int(time.time() * 1000)
    return [
        mh.Rec(topic, p, b"k%d" % i, b"%s:%d:%d" % (topic.encode(), p, i), (), now + i)
        for i in range(per_partition)
        for p in range(partitions)
    ]


def watermarks(cluster: KafkaCluster, topic: str, partitions: int) -> list[tuple[int, int]]:
    """(log start, log end) of each partition."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kmirror-test-watermarks"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)]
    finally:
        c.close()


def test_a_source_topic_config_cannot_purge_the_copy(fast_retention, tmp_path, workers):
    src, tgt = fast_retention["source"], fast_retention["target"]
    mh.create_topic(src, "kept", 2, {"retention.ms": WEEK_MS})
    records = fresh_records("kept", 2, 50)
    mh.produce(src, records)
    w = mh.mirror_worker(tmp_path, src, tgt, "kept", 1, "--topic.refresh.interval.ms", "500")
    workers.append(w)
    mh.assert_mirrored(records, mh.read_all(tgt, ["kept"], len(records)), exact=True)
    assert overrides(tgt, "kept") == {"retention.ms": WEEK_MS}

    # Whoever may alter the source topic's configs purges it ...
    alter(src, "kept", {"retention.ms": "1"})
    # ... and then changes a config that is not protected: once it is on the target, a sync has run that saw
    # retention.ms=1 on the source.
    alter(src, "kept", {"compression.type": "zstd"})
    mh.wait_until(
        lambda: overrides(tgt, "kept").get("compression.type") == "zstd",
        timeout=60,
        what="compression.type=zstd on the target (a config sync after retention.ms=1)",
    )
    assert overrides(tgt, "kept") == {"retention.ms": WEEK_MS, "compression.type": "zstd"}
    assert (
        "destination topic kept keeps retention.ms=604800000, not the source's 1: a protected config is "
        "taken from the source when the destination topic is created, later only a higher value or -1 "
        "(unlimited)"
    ) in w.log()
    # The source's brokers did purge it (retention runs every second on both clusters) ...
    mh.wait_until(
        lambda: all(low == high for low, high in watermarks(src, "kept", 2)),
        timeout=120,
        what="the source to purge every record of kept",
    )
    # ... the copy has every record.
    assert watermarks(tgt, "kept", 2) == [(0, 50), (0, 50)]
    mh.assert_mirrored(records, mh.read_all(tgt, ["kept"], len(records)), exact=True)
    assert w.log().count("keeps retention.ms=") == 1  # said once, not at every refresh
    assert w.stop(signal.SIGTERM) == 0


def test_the_option_lets_a_protected_config_follow_the_source(kafka, tmp_path, workers):
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, "followed", 1, {"retention.ms": WEEK_MS})
    protect = ["--config.properties.protect", r"cleanup\.policy"]  # retention.ms no longer protected
    w = mh.mirror_worker(tmp_path, src, tgt, "followed", 1, "--topic.refresh.interval.ms", "500", *protect)
    workers.append(w)
    mh.wait_until(
        lambda: (
            "followed" in mh.topic_partitions(tgt) and overrides(tgt, "followed") == {"retention.ms": WEEK_MS}
        ),
        timeout=60,
        what="the destination topic followed, created with the source's retention.ms",
    )
    alter(src, "followed", {"retention.ms": "3600000", "cleanup.policy": "compact"})
    mh.wait_until(
        lambda: overrides(tgt, "followed").get("retention.ms") == "3600000",
        timeout=60,
        what="the lower retention.ms on the target",
    )
    # The sync that brought it saw cleanup.policy=compact too: still protected, held back.
    assert overrides(tgt, "followed") == {"retention.ms": "3600000"}
    assert "destination topic followed keeps cleanup.policy=delete, not the source's compact" in w.log()
    assert w.stop(signal.SIGTERM) == 0


def test_missing_target_partitions_are_logged_exposed_and_records_flow_by_key(
    target_with_authorizer, tmp_path, workers
):
    src, tgt = target_with_authorizer["source"], target_with_authorizer["target"]
    # The mirror principal gets exactly the kmirror_acls role's target bindings (the module, for real) ...
    granted = run_module(
        {
            "side": "target",
            "principal": f"User:{TGT_USER}",
            "whitelist": "keyed",
            "admin_config": admin_conf(tgt),
        }
    )
    assert not granted.get("failed") and granted["changed"], granted
    assert ("TOPIC", "ALTER") in {(b["resource_type"], b["operation"]) for b in granted["bindings"]}
    # ... and the target's operator denies it ALTER on this topic: no partitions may be added.
    deny = AclBinding(
        ResourceType.TOPIC,
        "keyed",
        ResourcePatternType.LITERAL,
        f"User:{TGT_USER}",
        "*",
        AclOperation.ALTER,
        AclPermissionType.DENY,
    )
    admin = AdminClient(admin_conf(tgt))  # kept until the answer came
    for f in admin.create_acls([deny]).values():
        f.result(10)

    mh.create_topic(src, "keyed", 4)
    mh.create_topic(tgt, "keyed", 2)  # made with 2 before the source grew to 4
    keys = [b"customer-%d" % (i % 13) for i in range(200)]
    records = [
        mh.Rec("keyed", java_partition(k, 4), k, b"v%d" % i, (), 1_700_000_000_000 + i)
        for i, k in enumerate(keys)
    ]
    mh.produce(src, records[:100])
    port = free_port()
    consumer = mh.consumer_file(tmp_path, src, name="east.properties")
    producer = mh.write(
        tmp_path / "producer.properties",
        f"bootstrap.servers={tgt.listener('SASL_PLAINTEXT')}\nsecurity.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={scram_jaas(TGT_USER, TGT_PASS)}\n",
    )
    w = mh.Worker(
        tmp_path,
        mh.run_args(
            consumer,
            producer,
            "--whitelist",
            "keyed",
            "--num.streams",
            "1",
            "--topic.refresh.interval.ms",
            "500",
            "--metrics.port",
            str(port),
        ),
    )
    workers.append(w)
    w.wait_for("adding partitions failed")
    (line,) = [x for x in w.log().splitlines() if "adding partitions failed" in x]
    assert "target topic keyed has 2 partitions, source 4" in line
    assert "authorization failed" in line.lower(), line  # the broker's own reason is in the line

    def exposed() -> bool:
        return (
            mh.scrape(port).get(
                ("kmirror_topic_partition_mismatch", (("source", "east"), ("topic", "keyed")))
            )
            == 2
        )

    mh.wait_until(exposed, timeout=30, what="kmirror_topic_partition_mismatch{source=east,topic=keyed} == 2")

    mh.produce(src, records[100:])  # while it runs, retrying the partitions at every refresh
    target = mh.read_all(tgt, ["keyed"], len(records))
    assert sorted(r.value for r in target) == sorted(r.value for r in records)  # nothing lost, no duplicate
    assert mh.topic_partitions(tgt)["keyed"] == 2
    for r in target:
        assert r.partition == java_partition(r.key, 2), r
    for key in set(keys):
        assert [r.value for r in target if r.key == key] == [r.value for r in records if r.key == key]
    assert w.log().count("adding partitions failed") == 1  # retried quietly, said once
    assert w.proc.poll() is None
    assert w.stop(signal.SIGTERM) == 0


def test_config_sync_runs_beside_the_stream_loop_never_in_it(kafka, caplog):
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, "frozen", 1, {"compression.type": "zstd"})  # a config that is not protected
    mh.create_topic(tgt, "frozen", 1)
    caplog.set_level(logging.INFO, logger="kmirror.mirror.topics")
    sync = topics.ConfigSync(
        AdminClient({"bootstrap.servers": src.bootstrap}),
        AdminClient({"bootstrap.servers": tgt.bootstrap}),
        "east#0",
    )
    src.pause()
    try:
        assert sync.run(["frozen"]) is True  # started, and returned ...
        assert sync.busy  # ... while its describe waits on the frozen source (it cannot be answered)
        assert sync.run(["frozen"]) is False  # one at a time: this refresh starts none
        mh.wait_until(
            lambda: "topic frozen: could not describe the source topic's configs" in caplog.text,
            timeout=60,
            what="the sync's own timeout, logged",
        )
    finally:
        src.resume()
    mh.wait_until(lambda: not sync.busy, timeout=30, what="the first sync to end")
    assert overrides(tgt, "frozen") == {}

    def in_step() -> bool:
        if sync.busy:
            return False
        if overrides(tgt, "frozen") == {"compression.type": "zstd"}:
            return True  # and the sync that made it has ended (logged)
        sync.run(["frozen"])  # as the next topic refreshes do
        return False

    mh.wait_until(in_step, timeout=60, what="a later refresh's sync to bring the target in step")
    assert "destination topic frozen follows the source: compression.type=zstd" in caplog.text
