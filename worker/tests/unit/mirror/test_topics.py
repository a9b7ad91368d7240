"""kmirror.mirror.topics planning without a cluster: which configs are copied, what a sync changes, which
partitions are added, how a partition mismatch is exposed, and that a creation that reached no broker is
not taken for a refusal. The same on Apache Kafka:
tests/integration/test_topic_sync.py (config sync; a target that refuses partitions),
test_partition_growth.py (partitions added)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigSource
from prometheus_client.core import GaugeMetricFamily

from kmirror.kafkaio import silent_log
from kmirror.mirror import metrics, topics
from kmirror.mirror.configguard import ConfigGuard

UNGUARDED = ConfigGuard("none")


def entry(
    name: str, value: str | None, source: ConfigSource = ConfigSource.DYNAMIC_TOPIC_CONFIG, **flags: bool
) -> ConfigEntry:
    # As confluent-kafka describes them: the source as its number, not the enum.
    return ConfigEntry(name, value, source=source.value, **flags)  # type: ignore[arg-type]


def test_replicable_configs_are_those_set_on_the_topic_minus_cluster_settings_and_secrets():
    described = {
        "retention.ms": entry("retention.ms", "86400000"),  # set on the topic
        "compression.type": entry("compression.type", "zstd"),  # set on the topic
        # inherited, whichever way: the destination inherits the target's own instead
        "cleanup.policy": entry("cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG),
        "segment.ms": entry("segment.ms", "7200000", ConfigSource.STATIC_BROKER_CONFIG),
        "max.message.bytes": entry("max.message.bytes", "2000000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        "segment.bytes": entry("segment.bytes", "1000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        # set on the topic but never copied
        "min.insync.replicas": entry("min.insync.replicas", "2"),  # the source cluster's durability
        "message.timestamp.type": entry("message.timestamp.type", "LogAppendTime"),
        "confluent.tier.enable": entry("confluent.tier.enable", "false"),
        "segment.index.bytes": entry("segment.index.bytes", "10485760", is_read_only=True),
        "some.password": entry("some.password", "secret", is_sensitive=True),
        "no.value": entry("no.value", None),
    }
    assert topics.replicable_configs(described) == {"retention.ms": "86400000", "compression.type": "zstd"}
    # The enum where a caller builds its own entries.
    assert topics.replicable_configs(
        {"a": ConfigEntry("a", "1", source=ConfigSource.DYNAMIC_TOPIC_CONFIG)}
    ) == {"a": "1"}


def test_config_changes_set_what_differs_and_delete_what_only_the_target_sets():
    # Both sides as replicable_configs gives them: what is set on each topic. Nothing protected here (the
    # guard's own tests are below).
    source = {"retention.ms": "1000", "cleanup.policy": "compact", "max.message.bytes": "2000000"}
    target = {"retention.ms": "604800000", "cleanup.policy": "compact", "segment.ms": "60000"}
    change = topics.config_changes(source, target, UNGUARDED)
    assert change.set == {"retention.ms": "1000", "max.message.bytes": "2000000"}
    assert change.delete == ("segment.ms",)  # removed on the source (or set by hand on the target)
    assert bool(change) is True
    assert (
        change.describe()
        == "max.message.bytes=2000000, retention.ms=1000, segment.ms (back to the target's default)"
    )
    assert not topics.config_changes({"a": "1"}, {"a": "1"})
    assert not topics.config_changes({}, {})


def test_by_default_a_source_config_cannot_make_the_copy_delete_records():
    source = {
        "retention.ms": "1",  # the attack of issue 34, item 5: the copy purged within minutes
        "retention.bytes": "1024",
        "cleanup.policy": "compact",
        "segment.ms": "1",
        "max.message.bytes": "100",
        "compression.type": "zstd",  # not protected: follows
    }
    target = {"retention.ms": "604800000", "cleanup.policy": "delete", "delete.retention.ms": "86400000"}
    effective = {**target, "retention.bytes": "-1", "segment.ms": "604800000", "max.message.bytes": "1048588"}
    change = topics.config_changes(source, target, effective=effective)
    assert change.set == {"compression.type": "zstd"}
    assert change.delete == ()  # delete.retention.ms removed on the source: kept, not the target's default
    assert change.held == {
        "retention.ms": ("1", "604800000"),
        "retention.bytes": ("1024", "-1"),
        "cleanup.policy": ("compact", "delete"),
        "segment.ms": ("1", "604800000"),
        "max.message.bytes": ("100", "1048588"),
        "delete.retention.ms": (None, "86400000"),
    }
    # Without the destination's inherited values, what is set on it is all it is judged by.
    assert topics.config_changes({"retention.ms": "5"}, {}).held == {"retention.ms": ("5", None)}


def test_a_protected_config_follows_where_the_copy_keeps_as_much():
    target = {"retention.ms": "86400000", "cleanup.policy": "compact,delete", "min.compaction.lag.ms": "0"}
    source = {"retention.ms": "-1", "cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}
    change = topics.config_changes(source, target)
    assert change.set == source and not change.held
    # A higher limit, the same one (made explicit), and unlimited over a limit, all keep as much.
    effective = {"retention.bytes": "1073741824", "segment.bytes": "1073741824"}
    up = {"retention.bytes": "2147483648", "segment.bytes": "1073741824"}
    assert topics.config_changes(up, {}, effective=effective).set == up


def test_the_option_names_what_is_protected():
    source, target = (
        {"retention.ms": "1", "segment.ms": "1"},
        {"retention.ms": "604800000", "segment.ms": "9"},
    )
    only_segments = topics.config_changes(source, target, ConfigGuard(r"segment\..*"))
    assert (only_segments.set, set(only_segments.held)) == ({"retention.ms": "1"}, {"segment.ms"})
    assert topics.config_changes(source, target, UNGUARDED).set == source
    # A key protected by the operator that has no known order never changes once the topic exists.
    change = topics.config_changes(
        {"compression.type": "gzip"}, {"compression.type": "zstd"}, ConfigGuard("comp.*")
    )
    assert change.held == {"compression.type": ("gzip", "zstd")} and not change


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


def test_a_creation_that_never_reached_the_target_is_asked_again_not_refused():
    """No broker listens (a cut link): the KafkaException stays, which the stream retries; a TopicError
    would stop it with a line asking for a CREATE grant it may well have."""
    admin = AdminClient({"bootstrap.servers": "127.0.0.1:1", "logger": silent_log("kmirror.test.topics")})
    with pytest.raises(KafkaException) as raised:
        topics.create(admin, [topics.TopicSpec("t", 1)], timeout=1.0)
    assert raised.value.args[0].code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT)
