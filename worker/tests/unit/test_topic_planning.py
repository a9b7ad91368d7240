"""kmirror.mirror.topics planning without a cluster: which configs are copied, what a sync changes, which
partitions are added, and how a partition mismatch is exposed. (The test broker cannot add partitions, so
the planning of partition growth is proven here; tests/integration/test_topic_sync.py shows the refusal
path live.)"""

from __future__ import annotations

from confluent_kafka.admin import ConfigEntry, ConfigSource
from prometheus_client.core import GaugeMetricFamily

from kmirror.mirror import metrics, topics


def entry(name: str, value: str | None, **flags: bool) -> ConfigEntry:
    return ConfigEntry(name, value, source=ConfigSource.DEFAULT_CONFIG, **flags)


def test_replicable_configs_are_the_effective_ones_minus_cluster_settings_and_secrets():
    described = {
        "retention.ms": entry("retention.ms", "86400000"),  # set on the topic
        "cleanup.policy": entry("cleanup.policy", "delete"),  # inherited from the source brokers' default
        "min.insync.replicas": entry("min.insync.replicas", "2"),  # the source cluster's durability
        "message.timestamp.type": entry("message.timestamp.type", "CreateTime"),
        "confluent.tier.enable": entry("confluent.tier.enable", "false"),
        "segment.index.bytes": entry("segment.index.bytes", "10485760", is_read_only=True),
        "some.password": entry("some.password", "secret", is_sensitive=True),
        "no.value": entry("no.value", None),
    }
    assert topics.replicable_configs(described) == {"retention.ms": "86400000", "cleanup.policy": "delete"}


def test_config_changes_set_what_differs_and_leave_target_only_settings_alone():
    source = {"retention.ms": "1000", "cleanup.policy": "compact", "max.message.bytes": "2000000"}
    target = {"retention.ms": "604800000", "cleanup.policy": "compact", "min.insync.replicas": "2"}
    change = topics.config_changes(source, target)
    assert change.set == {"retention.ms": "1000", "max.message.bytes": "2000000"}
    assert change.delete == ()
    assert "min.insync.replicas" not in change.set  # the target's own durability setting is kept
    assert change.describe() == "max.message.bytes=2000000, retention.ms=1000"


def test_config_changes_delete_only_what_the_source_stopped_reporting():
    # A broker that describes only explicitly set configs: segment.ms was removed on the source.
    target = {"retention.ms": "1000", "segment.ms": "60000", "min.insync.replicas": "2"}
    change = topics.config_changes(
        {"retention.ms": "1000"}, target, dropped={"segment.ms", "gone.everywhere"}
    )
    assert change.set == {}
    assert change.delete == ("segment.ms",)  # not min.insync.replicas (never reported), not one absent
    assert bool(change) is True
    assert not topics.config_changes({"a": "1"}, {"a": "1"}, dropped=())


def test_partitions_to_add_only_where_the_target_has_fewer():
    source = {"grown": 6, "same": 3, "bigger.on.target": 2, "not.on.target": 4}
    target = {"grown": 4, "same": 3, "bigger.on.target": 5}
    assert topics.partitions_to_add(source, target) == {"grown": 6}
    assert topics.partitions_to_add({}, target) == {}


def test_partition_mismatch_gauge_one_series_per_source_and_topic():
    collector = metrics.Collector()
    for stream in (0, 1):  # every stream of a source sees the same topics
        snap = metrics.Snapshot("east", stream)
        snap.partition_mismatch = {"grown": 2}
        collector.update(snap)
    west = metrics.Snapshot("west", 0)
    collector.update(west)
    families = {f.name: f for f in collector.collect() if isinstance(f, GaugeMetricFamily)}
    samples = families["kmirror_topic_partition_mismatch"].samples
    assert [(s.labels, s.value) for s in samples] == [({"source": "east", "topic": "grown"}, 2)]
