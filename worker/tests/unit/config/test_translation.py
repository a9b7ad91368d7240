"""Java client and legacy MirrorMaker keys become librdkafka keys (kmirror.config.translation, via
kmirror.config).

Every test reads a real properties file from tmp_path with kmirror.config.load_client_config, so the
translated settings also pass librdkafka's own offline check (no broker is contacted).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer

from kmirror.config import ClientConfig, load_client_config, translate, translation
from kmirror.errors import ConfigError

BOOT = "bootstrap.servers=127.0.0.1:1\n"


def write(tmp_path: Path, text: str, name: str = "client.properties") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def consumer(tmp_path: Path, body: str, *, boot: bool = True, group: bool = True) -> ClientConfig:
    text = (BOOT if boot else "") + ("group.id=mirror\n" if group else "") + body
    return load_client_config(write(tmp_path, text, "consumer.properties"), "consumer", env={})


def producer(tmp_path: Path, body: str, *, boot: bool = True) -> ClientConfig:
    text = (BOOT if boot else "") + body
    return load_client_config(write(tmp_path, text, "producer.properties"), "producer", env={})


def refusal(load: Callable[[Path, str], ClientConfig], tmp_path: Path, body: str) -> str:
    """The message of the ConfigError with which load (consumer or producer) refuses body: one line."""
    with pytest.raises(ConfigError) as err:
        load(tmp_path, body)
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def assert_translated(cfg: ClientConfig, legacy: list[str], expected: dict[str, str]) -> None:
    """The legacy keys are gone from the settings, which hold the expected values."""
    for key in legacy:
        assert key not in cfg.settings
    for key, value in expected.items():
        assert cfg.settings[key] == value


# --- consumer: legacy group, commit and fetch keys ---


def test_groupid_becomes_group_id(tmp_path):
    cfg = consumer(tmp_path, "groupid=dp-MirrorMaker-group\n", group=False)
    assert cfg.settings["group.id"] == "dp-MirrorMaker-group"
    assert "groupid" not in cfg.settings
    assert any("groupid" in n and "group.id" in n for n in cfg.notes)


@pytest.mark.parametrize("key", ["auto.commit.enable", "auto.commit.enabled", "autocommit.enable"])
def test_legacy_auto_commit_keys_become_enable_auto_commit(tmp_path, key):
    cfg = consumer(tmp_path, f"{key}=false\n")
    assert cfg.settings["enable.auto.commit"] == "false"
    assert key not in cfg.settings


def test_mirror_topics_whitelist_and_blacklist_become_the_file_topic_filter(tmp_path):
    cfg = consumer(tmp_path, "mirror.topics.whitelist=app_log,orders.*\nmirror.topics.blacklist=orders.tmp\n")
    assert cfg.include == "app_log,orders.*"
    assert cfg.exclude == "orders.tmp"
    assert "mirror.topics.whitelist" not in cfg.settings
    assert "mirror.topics.blacklist" not in cfg.settings


def test_no_legacy_topic_keys_means_no_file_filter(tmp_path):
    cfg = consumer(tmp_path, "")
    assert cfg.include is None
    assert cfg.exclude is None


def test_socket_buffersize_and_fetch_size(tmp_path):
    cfg = consumer(tmp_path, "socket.buffersize=1048576\nfetch.size=2097152\n")
    expected = {"socket.receive.buffer.bytes": "1048576", "max.partition.fetch.bytes": "2097152"}
    assert_translated(cfg, ["socket.buffersize", "fetch.size"], expected)


@pytest.mark.parametrize(
    ("java", "librdkafka"),
    [
        ("org.apache.kafka.clients.consumer.RangeAssignor", "range"),
        ("org.apache.kafka.clients.consumer.RoundRobinAssignor", "roundrobin"),
        ("org.apache.kafka.clients.consumer.CooperativeStickyAssignor", "cooperative-sticky"),
        (
            "org.apache.kafka.clients.consumer.RangeAssignor, "
            "org.apache.kafka.clients.consumer.RoundRobinAssignor",
            "range,roundrobin",
        ),
    ],
)
def test_assignor_class_names_become_librdkafka_names(tmp_path, java, librdkafka):
    cfg = consumer(tmp_path, f"partition.assignment.strategy={java}\n")
    assert cfg.settings["partition.assignment.strategy"] == librdkafka


def test_sticky_assignor_is_refused(tmp_path):
    msg = refusal(
        consumer, tmp_path, "partition.assignment.strategy=org.apache.kafka.clients.consumer.StickyAssignor\n"
    )
    assert "partition.assignment.strategy" in msg
    assert "consumer.properties" in msg
    assert "CooperativeStickyAssignor" in msg  # the fix


@pytest.mark.parametrize(("legacy", "new"), [("smallest", "earliest"), ("largest", "latest")])
@pytest.mark.parametrize("key", ["auto.offset.reset", "autooffset.reset"])
def test_legacy_offset_reset_values(tmp_path, key, legacy, new):
    cfg = consumer(tmp_path, f"{key}={legacy}\n")
    assert cfg.settings["auto.offset.reset"] == new


# --- producer: legacy broker lists, acks, batching, compression ---


def test_broker_list_07_form_drops_broker_ids(tmp_path):
    cfg = producer(tmp_path, "broker.list=0:127.0.0.1:1,1:127.0.0.1:2, 2:localhost:9092\n", boot=False)
    assert cfg.settings["bootstrap.servers"] == "127.0.0.1:1,127.0.0.1:2,localhost:9092"
    assert "broker.list" not in cfg.settings


def test_metadata_broker_list(tmp_path):
    cfg = producer(tmp_path, "metadata.broker.list=127.0.0.1:1,127.0.0.1:2\n", boot=False)
    assert cfg.settings["bootstrap.servers"] == "127.0.0.1:1,127.0.0.1:2"
    assert "metadata.broker.list" not in cfg.settings


def test_metadata_broker_list_in_a_consumer_file(tmp_path):
    cfg = consumer(tmp_path, "metadata.broker.list=127.0.0.1:1\n", boot=False)
    assert cfg.settings["bootstrap.servers"] == "127.0.0.1:1"


def test_broker_list_conflicting_with_bootstrap_servers_is_refused(tmp_path):
    msg = refusal(producer, tmp_path, "broker.list=0:127.0.0.2:9092\n")
    assert "broker.list" in msg
    assert "bootstrap.servers" in msg


@pytest.mark.parametrize("key", ["request.required.acks", "acks"])
def test_acks_minus_one_becomes_all(tmp_path, key):
    cfg = producer(tmp_path, f"{key}=-1\n")
    assert cfg.settings["acks"] == "all"
    assert cfg.safe


def test_buffer_memory_bytes_become_kbytes(tmp_path):
    cfg = producer(tmp_path, "buffer.memory=33554432\n")
    assert cfg.settings["queue.buffering.max.kbytes"] == "32768"
    assert "buffer.memory" not in cfg.settings


def test_buffer_memory_rounds_up_to_a_whole_kilobyte(tmp_path):
    cfg = producer(tmp_path, "buffer.memory=1025\n")
    assert cfg.settings["queue.buffering.max.kbytes"] == "2"


def test_buffer_memory_not_a_number(tmp_path):
    msg = refusal(producer, tmp_path, "buffer.memory=32MB\n")
    assert "buffer.memory" in msg
    assert "producer.properties" in msg


@pytest.mark.parametrize(
    ("codec", "expected"),
    [
        ("0", "none"),
        ("1", "gzip"),
        ("2", "snappy"),
        ("3", "lz4"),
        ("4", "zstd"),
        ("none", "none"),
        ("gzip", "gzip"),
        ("snappy", "snappy"),
        ("lz4", "lz4"),
        ("zstd", "zstd"),
        ("GZIPCompressionCodec", "gzip"),
        ("NoCompressionCodec", "none"),
    ],
)
def test_compression_codec(tmp_path, codec, expected):
    cfg = producer(tmp_path, f"compression.codec={codec}\n")
    assert cfg.settings["compression.type"] == expected
    assert "compression.codec" not in cfg.settings


def test_unknown_compression_codec(tmp_path):
    msg = refusal(producer, tmp_path, "compression.codec=7\n")
    assert "compression.codec" in msg
    assert "producer.properties" in msg


def test_queue_time_max_message_size(tmp_path):
    cfg = producer(tmp_path, "queue.time=1000\nmax.message.size=10000000\n")
    assert_translated(
        cfg, ["queue.time", "max.message.size"], {"linger.ms": "1000", "message.max.bytes": "10000000"}
    )


@pytest.mark.parametrize("key", ["queue.enqueueTimeout.ms", "block.on.buffer.full"])
def test_blocking_producer_keys_are_accepted_and_reported(tmp_path, key):
    value = "-1" if key.startswith("queue") else "true"
    cfg = producer(tmp_path, f"{key}={value}\n")
    assert key not in cfg.settings
    assert any(n.startswith(f"{key}: ignored") for n in cfg.notes)


def test_kafka_07_producer_sample_without_zookeeper(tmp_path):
    # The 0.7 producer sample from the reference docs, with broker.list in place of zk.connect.
    text = (
        "broker.list=0:127.0.0.1:1\n"
        "producer.type=async\n"
        "compression.codec=0\n"
        "serializer.class=kafka.serializer.DefaultEncoder\n"
        "max.message.size=10000000\n"
        "queue.time=1000\n"
        "queue.enqueueTimeout.ms=-1\n"
    )
    cfg = producer(tmp_path, text, boot=False)
    s = cfg.settings
    assert s["bootstrap.servers"] == "127.0.0.1:1"
    assert s["compression.type"] == "none"
    assert s["message.max.bytes"] == "10000000"
    assert s["linger.ms"] == "1000"
    for legacy in ("producer.type", "serializer.class", "queue.enqueueTimeout.ms", "broker.list"):
        assert legacy not in s
    assert cfg.safe


# --- security keys ---


def test_empty_endpoint_identification_becomes_none(tmp_path):
    cfg = producer(tmp_path, "ssl.endpoint.identification.algorithm=\n")
    assert cfg.settings["ssl.endpoint.identification.algorithm"] == "none"


def test_https_endpoint_identification_is_kept(tmp_path):
    cfg = producer(tmp_path, "ssl.endpoint.identification.algorithm=HTTPS\n")
    assert cfg.settings["ssl.endpoint.identification.algorithm"] == "https"


def test_sasl_mechanism_becomes_sasl_mechanisms(tmp_path):
    cfg = producer(tmp_path, "sasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=p\n")
    assert cfg.settings["sasl.mechanisms"] == "PLAIN"
    assert "sasl.mechanism" not in cfg.settings


# --- translate() is pure and also usable without files ---


def test_translate_maps_a_dict_without_files():
    cfg = translate(
        {"metadata.broker.list": "127.0.0.1:1", "groupid": "g", "auto.commit.enable": "false"},
        "consumer",
        "inline",
        env={},
    )
    assert cfg.settings == {
        "bootstrap.servers": "127.0.0.1:1",
        "group.id": "g",
        "enable.auto.commit": "false",
    }
    assert cfg.origin == "inline"
    assert cfg.role == "consumer"


def test_translate_without_brokers_is_refused():
    with pytest.raises(ConfigError) as err:
        translate({"group.id": "g"}, "consumer", "c.properties", env={})
    assert err.value.key == "bootstrap.servers"


def test_translate_without_group_is_refused():
    with pytest.raises(ConfigError) as err:
        translate({"bootstrap.servers": "127.0.0.1:1"}, "consumer", "c.properties", env={})
    assert err.value.key == "group.id"


# --- the table itself ---


def test_rule_keys_are_unique():
    keys = [r.key for r in translation.RULES]
    assert len(keys) == len(set(keys))


def test_rename_rules_have_targets_and_others_do_not():
    for r in translation.RULES:
        if r.action == "rename":
            assert r.target, r.key
        else:
            assert r.target is None, r.key


@pytest.mark.parametrize(
    "rule",
    [r for r in translation.RULES if r.action == "rename" and r.target != "bootstrap.servers"],
    ids=lambda r: r.key,
)
def test_every_rename_target_is_a_librdkafka_key(rule):
    """librdkafka decides what it knows: a rename to a key it does not know would always be refused."""
    # A producer instance knows consumer keys too (it only warns about them); nothing connects.
    try:
        Producer({rule.target: "@not-a-valid-value@"})
    except KafkaException as exc:
        assert "No such configuration property" not in exc.args[0].str()


def test_rule_for_refuses_any_zookeeper_prefixed_key():
    for key in ("zk.anything", "zookeeper.anything.else"):
        rule = translation.rule_for(key, "consumer")
        assert rule is not None
        assert rule.action == "refuse"
    assert translation.rule_for("linger.ms", "producer") is None


def test_markdown_has_a_row_per_rule():
    md = translation.markdown()
    for r in translation.RULES:
        assert f"| `{r.key}` |" in md
