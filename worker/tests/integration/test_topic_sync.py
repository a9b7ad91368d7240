"""Destination topics kept in step while `kmirror run` mirrors (real embedded brokers).

* A source topic config changed while the mirror runs reaches the target within the topic refresh interval.
* A source topic with more partitions than its destination: kmirror asks the target for the partitions;
  the test broker refuses (it has no CreatePartitions), so the mismatch is logged, exposed as
  `kmirror_topic_partition_mismatch`, and records keep flowing by key hash without loss. The planning of
  the successful case is proven in tests/unit/test_topic_planning.py. A source topic cannot grow on the
  test broker at all (no CreatePartitions; deleting a topic a librdkafka consumer is subscribed to crashes
  the consumer with SIGSEGV), so the target side of a mismatch is what is shown here.
"""

from __future__ import annotations

import signal

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from mirror_harness import (
    Rec,
    Worker,
    assert_mirrored,
    consumer_file,
    create_topic,
    make_records,
    produce,
    producer_file,
    read_all,
    run_args,
    topic_partitions,
    wait_until,
)
from test_metrics import scrape
from test_mirror import java_partition

from kmirror.testing.embedded import Cluster, free_port


# Not yet on Apache Kafka (docs/testing.md): on Kafka, describe_configs lists every inherited config,
# and the copy rule (replicable_configs) copies them all as target overrides, so a config deleted on
# the source becomes the source broker's default on the target, not 'back to the target's default'
# (the rule needs a decision: copy only what is set on the source topic, as MirrorMaker 2 does); and
# Kafka can add the partitions this test expects refused
@pytest.fixture
def kafka(tansu):
    return tansu


def topic_configs(cluster: Cluster, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    return {k: v.value for f in described.values() for k, v in f.result().items() if v.value is not None}


def alter(cluster: Cluster, topic: str, set_: dict[str, str], delete: tuple[str, ...] = ()) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for f in admin.incremental_alter_configs([resource]).values():
        f.result()


def test_source_config_changes_reach_the_target_while_mirroring(kafka, tmp_path, workers):
    src, tgt = kafka["source"], kafka["target"]
    create_topic(
        src,
        "synced",
        2,
        {"retention.ms": "86400000", "segment.ms": "3600000", "min.insync.replicas": "1"},
    )
    first = make_records("synced", 2, 20)
    produce(src, first)
    w = Worker(
        tmp_path,
        run_args(
            consumer_file(tmp_path, src),
            producer_file(tmp_path, tgt),
            "--whitelist",
            "synced",
            "--num.streams",
            "1",
            "--topic.refresh.interval.ms",
            "500",
        ),
    )
    workers.append(w)
    read_all(tgt, ["synced"], len(first))
    created = topic_configs(tgt, "synced")
    assert created.get("retention.ms") == "86400000" and created.get("segment.ms") == "3600000"
    assert "min.insync.replicas" not in created  # the source cluster's durability setting is not copied
    # A setting the target's operator made for this cluster: kmirror never touches it.
    alter(tgt, "synced", {"min.insync.replicas": "2"})

    alter(src, "synced", {"retention.ms": "3600000", "max.message.bytes": "2000000"}, delete=("segment.ms",))

    def followed() -> bool:
        c = topic_configs(tgt, "synced")
        return (
            c.get("retention.ms") == "3600000"
            and c.get("max.message.bytes") == "2000000"
            and "segment.ms" not in c
        )

    wait_until(followed, timeout=15, what="the target topic to follow the source's configs")
    assert topic_configs(tgt, "synced").get("min.insync.replicas") == "2"
    assert "destination topic synced follows the source: max.message.bytes=2000000, retention.ms=3600000" in (
        w.log()
    )
    assert "segment.ms (back to the target's default)" in w.log()

    # Mirroring went on through the change, and a refresh with nothing changed alters nothing.
    more = make_records("synced", 2, 20, start=20)
    produce(src, more)
    assert_mirrored(first + more, read_all(tgt, ["synced"], len(first) + len(more)), exact=True)
    assert w.log().count("follows the source") == 1
    assert w.stop(signal.SIGTERM) == 0


def test_missing_target_partitions_are_logged_exposed_and_records_flow_by_key(kafka, tmp_path, workers):
    src, tgt = kafka["source"], kafka["target"]
    create_topic(src, "keyed", 4)
    create_topic(tgt, "keyed", 2)  # the source grew to 4 since; the target cannot add partitions
    keys = [b"customer-%d" % (i % 13) for i in range(200)]
    records = [
        Rec("keyed", java_partition(k, 4), k, b"v%d" % i, (), 1_700_000_000_000 + i)
        for i, k in enumerate(keys)
    ]
    produce(src, records[:100])
    port = free_port()
    consumer = consumer_file(tmp_path, src, name="east.properties")
    w = Worker(
        tmp_path,
        run_args(
            consumer,
            producer_file(tmp_path, tgt),
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
    assert "target topic keyed has 2 partitions, source 4" in w.log()
    assert "CreatePartitions" in w.log()  # the broker's own reason is in the line

    def exposed() -> bool:
        return (
            scrape(port).get(("kmirror_topic_partition_mismatch", (("source", "east"), ("topic", "keyed"))))
            == 2
        )

    wait_until(exposed, timeout=30, what="kmirror_topic_partition_mismatch{source=east,topic=keyed} == 2")

    produce(src, records[100:])  # while it runs, retrying the partitions at every refresh
    target = read_all(tgt, ["keyed"], len(records))
    assert sorted(r.value for r in target) == sorted(r.value for r in records)  # nothing lost
    assert topic_partitions(tgt)["keyed"] == 2
    for r in target:
        assert r.partition == java_partition(r.key, 2), r
    for key in set(keys):
        assert [r.value for r in target if r.key == key] == [r.value for r in records if r.key == key]
    assert w.log().count("adding partitions failed") == 1  # retried quietly, said once
    assert w.proc.poll() is None
    assert w.stop(signal.SIGTERM) == 0
