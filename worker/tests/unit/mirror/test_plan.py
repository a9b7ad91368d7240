"""kmirror.mirror.plan.build_plan: MirrorMaker options and files become a checked plan of streams."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from kmirror.config import ClientConfig, load_client_config
from kmirror.config.filters import TopicFilter
from kmirror.errors import ConfigError
from kmirror.mirror.plan import (
    DEFAULT_QUEUE_SIZE,
    MirrorOptions,
    build_plan,
    check_one_kerberos_principal,
    source_names,
    topic_filter,
)

pytestmark = pytest.mark.usefixtures("no_kafka_opts")  # worker/tests/unit/conftest.py

CONSUMER = "bootstrap.servers=127.0.0.1:1\ngroupid=mirror\n"
LEGACY_CONSUMER = CONSUMER + "mirror.topics.whitelist=app_log\n"
PRODUCER = "bootstrap.servers=127.0.0.1:1\nacks=all\n"


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture
def files(tmp_path):
    return {
        "consumer": write(tmp_path / "consumer.properties", CONSUMER),
        "legacy": write(tmp_path / "legacy-consumer.properties", LEGACY_CONSUMER),
        "producer": write(tmp_path / "producer.properties", PRODUCER),
    }


def options(files, **kw) -> MirrorOptions:
    kw.setdefault("consumer_configs", [files["consumer"]])
    kw.setdefault("producer_config", files["producer"])
    kw.setdefault("include", ".*")
    kw.setdefault("num_streams", 1)
    return MirrorOptions(**kw)


def refused(opts: MirrorOptions) -> str:
    with pytest.raises(ConfigError) as err:
        build_plan(opts)
    msg = str(err.value)
    assert "\n" not in msg
    return msg


# --- a good plan ---


def test_plan_from_minimal_files(files):
    plan = build_plan(options(files))
    (source,) = plan.sources
    assert source.name == "consumer"
    assert source.config.settings["group.id"] == "mirror"
    assert source.topic_filter == TopicFilter(".*", None)
    assert plan.producer.settings["acks"] == "all"
    assert plan.producer_queue_size == DEFAULT_QUEUE_SIZE
    assert plan.producer.settings["queue.buffering.max.messages"] == str(DEFAULT_QUEUE_SIZE)


def test_legacy_file_whitelist_is_used_without_a_cli_filter(files):
    plan = build_plan(options(files, consumer_configs=[files["legacy"]], include=None))
    assert plan.sources[0].topic_filter.include == "app_log"
    assert plan.sources[0].topic_filter.matches("app_log")
    assert not plan.sources[0].topic_filter.matches("orders")


def test_cli_whitelist_overrides_the_legacy_file_key(files):
    plan = build_plan(options(files, consumer_configs=[files["legacy"]], include="orders.*"))
    f = plan.sources[0].topic_filter
    assert f.include == "orders.*"
    assert f.matches("orders.eu")
    assert not f.matches("app_log")


def test_cli_blacklist_alone_is_a_filter(files):
    plan = build_plan(options(files, include=None, exclude="tmp.*"))
    f = plan.sources[0].topic_filter
    assert f.matches("orders")
    assert not f.matches("tmp1")


def test_cli_blacklist_overrides_the_legacy_file_blacklist(tmp_path, files):
    path = write(tmp_path / "bl.properties", CONSUMER + "mirror.topics.blacklist=orders\n")
    plan = build_plan(options(files, consumer_configs=[path], include=None, exclude="payments"))
    assert plan.sources[0].topic_filter.exclude == "payments"


# --- refusals ---


def test_no_whitelist_or_blacklist_at_all(files):
    msg = refused(options(files, include=None, exclude=None))
    assert "--whitelist" in msg
    assert files["consumer"] in msg


def test_missing_consumer_file(tmp_path, files):
    missing = str(tmp_path / "nowhere" / "consumer.properties")
    msg = refused(options(files, consumer_configs=[missing]))
    assert missing in msg
    assert "not found" in msg


def test_missing_producer_file(tmp_path, files):
    missing = str(tmp_path / "nowhere.properties")
    msg = refused(options(files, producer_config=missing))
    assert missing in msg
    assert "not found" in msg


def test_no_consumer_config(files):
    msg = refused(options(files, consumer_configs=[]))
    assert "--consumer.config" in msg


def test_abort_on_send_failure_false_needs_allow_unsafe(files):
    msg = refused(options(files, abort_on_send_failure=False))
    assert "--abort.on.send.failure" in msg
    assert "--allow.unsafe" in msg


def test_abort_on_send_failure_false_with_allow_unsafe(files):
    plan = build_plan(options(files, abort_on_send_failure=False, allow_unsafe=True))
    assert all(not spec.abort_on_send_failure for spec in plan.stream_specs())


@pytest.mark.parametrize(
    ("field", "option"),
    [
        ("num_streams", "--num.streams"),
        ("num_producers", "--num.producers"),
        ("queue_size", "--queue.size"),
        ("offset_commit_interval_ms", "--offset.commit.interval.ms"),
        ("topic_refresh_interval_ms", "--topic.refresh.interval.ms"),
        ("stats_interval_ms", "--stats.interval.ms"),
    ],
)
@pytest.mark.parametrize("value", [0, -1])
def test_non_positive_numbers_are_refused(files, field, option, value):
    msg = refused(options(files, **{field: value}))
    assert option in msg


def test_unsafe_producer_file_is_refused(tmp_path, files):
    path = write(tmp_path / "unsafe-producer.properties", PRODUCER.replace("acks=all", "acks=1"))
    msg = refused(options(files, producer_config=path))
    assert path in msg
    assert "acks=1" in msg


def test_unsafe_consumer_file_is_refused(tmp_path, files):
    path = write(tmp_path / "autocommit.properties", CONSUMER + "auto.commit.enable=true\n")
    msg = refused(options(files, consumer_configs=[path]))
    assert "enable.auto.commit=true" in msg


def test_unsafe_files_with_allow_unsafe(tmp_path, files):
    path = write(tmp_path / "autocommit.properties", CONSUMER + "auto.commit.enable=true\n")
    plan = build_plan(options(files, consumer_configs=[path], allow_unsafe=True))
    assert [v.key for v in plan.sources[0].config.violations] == ["enable.auto.commit"]


def test_unsafe_acks_with_allow_unsafe_is_planned(tmp_path, files):
    """--allow.unsafe runs with acks=1 and lists it (the operator's explicit choice)."""
    path = write(tmp_path / "unsafe-producer.properties", PRODUCER.replace("acks=all", "acks=1"))
    plan = build_plan(options(files, producer_config=path, allow_unsafe=True))
    assert plan.producer.settings["acks"] == "1"
    assert [v.key for v in plan.producer.violations] == ["acks"]


def test_invalid_whitelist_regex(files):
    msg = refused(options(files, include="orders[&&x]"))
    assert "--whitelist" in msg


def test_zookeeper_consumer_file(tmp_path, files):
    path = write(tmp_path / "zk.properties", "zk.connect=hdp1:2181/kafka\ngroupid=g\n")
    msg = refused(options(files, consumer_configs=[path]))
    assert path in msg
    assert "zk.connect" in msg


# --- sources and streams ---


def test_source_names_are_stems():
    assert source_names(["/etc/kmirror/dc1.properties", "/etc/kmirror/dc2.properties"]) == ["dc1", "dc2"]


def test_source_names_use_folders_when_stems_repeat():
    assert source_names(["/etc/dc1/consumer.properties", "/etc/dc2/consumer.properties"]) == ["dc1", "dc2"]


@pytest.mark.parametrize(
    "paths",
    [
        ["/a/c.properties", "/a/c.properties"],
        ["/x/c.properties", "/y/c.properties", "/x.properties"],
        ["/same/c.properties", "/same/c.conf", "/other/same.properties"],
        ["c.properties", "c.properties", "c.properties"],
    ],
)
def test_source_names_are_always_distinct(paths):
    names = source_names(paths)
    assert len(names) == len(paths)
    assert len(set(names)) == len(names)
    assert all(names)


@pytest.mark.parametrize(("sources", "streams"), [(1, 1), (1, 4), (2, 3), (3, 2)])
def test_stream_specs_count_is_sources_times_streams(tmp_path, files, sources, streams):
    paths = [write(tmp_path / f"dc{i}" / "consumer.properties", CONSUMER) for i in range(sources)]
    plan = build_plan(options(files, consumer_configs=paths, num_streams=streams))
    specs = plan.stream_specs()
    assert len(specs) == sources * streams
    assert len({s.label for s in specs}) == len(specs)
    names = source_names(paths)
    assert {s.source for s in specs} == set(names)
    for name in names:
        assert sorted(s.index for s in specs if s.source == name) == list(range(streams))


def test_default_streams_is_one_per_cpu(files):
    import os

    plan = build_plan(options(files, num_streams=None))
    assert len(plan.stream_specs()) == (os.cpu_count() or 1)


def test_queue_size_sets_the_producer_queue(files):
    plan = build_plan(options(files, queue_size=1234))
    assert plan.producer.settings["queue.buffering.max.messages"] == "1234"
    assert plan.producer_queue_size == 1234
    for spec in plan.stream_specs():
        assert spec.producer["queue.buffering.max.messages"] == "1234"
        assert 1 <= spec.batch_size <= 1234


def test_queue_size_overrides_the_producer_file(tmp_path, files):
    path = write(tmp_path / "q.properties", PRODUCER + "queue.buffering.max.messages=500\n")
    assert build_plan(options(files, producer_config=path)).producer_queue_size == 500
    assert build_plan(options(files, producer_config=path, queue_size=77)).producer_queue_size == 77


def test_stream_specs_carry_the_options(files):
    plan = build_plan(
        options(
            files,
            num_streams=2,
            num_producers=3,
            offset_commit_interval_ms=1000,
            topic_refresh_interval_ms=2000,
            stats_interval_ms=3000,
            replication_factor=2,
        )
    )
    for spec in plan.stream_specs():
        assert spec.num_producers == 3
        assert spec.commit_interval_ms == 1000
        assert spec.topic_refresh_ms == 2000
        assert spec.stats_interval_ms == 3000
        assert spec.replication_factor == 2
        assert spec.abort_on_send_failure is True
        assert spec.consumer["group.id"] == "mirror"
        assert spec.consumer["enable.auto.commit"] == "false"
        assert spec.producer["acks"] == "all"


def test_stream_specs_pickle(files):
    plan = build_plan(options(files, num_streams=2, include="orders.*", exclude="orders\\.tmp"))
    for spec in plan.stream_specs():
        copy = pickle.loads(pickle.dumps(spec))
        assert copy == spec
        assert copy.topic_filter.matches("orders.eu")
        assert not copy.topic_filter.matches("orders.tmp")


def test_reference_command_line(tmp_path):
    """--consumer.config x2 --num.streams 2 --producer.config --whitelist=".*" from the reference docs."""
    c1 = write(tmp_path / "sourceCluster1Consumer.config", CONSUMER)
    c2 = write(tmp_path / "sourceCluster2Consumer.config", CONSUMER)
    p = write(tmp_path / "targetClusterProducer.config", PRODUCER)
    opts = MirrorOptions(consumer_configs=[c1, c2], producer_config=p, include='".*"', num_streams=2)
    plan = build_plan(opts)
    assert [s.name for s in plan.sources] == ["sourceCluster1Consumer", "sourceCluster2Consumer"]
    assert len(plan.stream_specs()) == 4
    assert plan.sources[0].topic_filter.matches("orders")


def _kerberos(origin: str, principal: str | None, role: str = "consumer") -> ClientConfig:
    settings = {"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL", "sasl.mechanisms": "GSSAPI"}
    if principal is not None:
        settings["sasl.kerberos.principal"] = principal
    return ClientConfig(origin, role, settings)  # type: ignore[arg-type]


def test_one_kerberos_principal_per_process_is_accepted() -> None:
    scram = ClientConfig("p.properties", "producer", {"sasl.mechanisms": "SCRAM-SHA-512"})
    check_one_kerberos_principal(
        [_kerberos("c1.properties", "mirror@EX"), _kerberos("c2.properties", "mirror@EX"), scram]
    )


@pytest.mark.parametrize("second", ["target@EX", None])
def test_different_kerberos_principals_in_one_process_are_refused(second: str | None) -> None:
    with pytest.raises(ConfigError) as err:
        check_one_kerberos_principal(
            [_kerberos("p.properties", "mirror@EX", "producer"), _kerberos("c.properties", second)]
        )
    text = str(err.value)
    assert "\n" not in text
    assert "c.properties" in text and "sasl.kerberos.principal" in text
    assert "mirror@EX" in text and (second or "kafkaclient") in text
    assert "one principal" in text


# --- keys read from the wrong file, and file filters that lose to the command line (never silent) ---


@pytest.mark.parametrize("key", ["mirror.topics.whitelist", "mirror.topics.blacklist"])
def test_consumer_topic_filter_key_in_the_producer_file_is_refused(tmp_path, files, key):
    producer = write(tmp_path / "p.properties", PRODUCER + f"{key}=orders.*\n")
    msg = refused(options(files, producer_config=producer, include=None, consumer_configs=[files["legacy"]]))
    assert msg.startswith(f"{producer}: {key}: a consumer setting in a producer file")
    assert "move it to the consumer file of the source cluster" in msg


def test_file_whitelist_overridden_by_the_command_line_is_reported(files):
    plan = build_plan(options(files, consumer_configs=[files["legacy"]], include="orders.*"))
    assert "mirror.topics.whitelist=app_log: ignored (--whitelist given on the command line wins)" in (
        plan.sources[0].config.notes
    )


def test_file_blacklist_kept_when_only_whitelist_is_given(tmp_path, files):
    path = write(tmp_path / "bl.properties", CONSUMER + "mirror.topics.blacklist=tmp.*\n")
    plan = build_plan(options(files, consumer_configs=[path], include="o.*"))
    assert plan.sources[0].topic_filter == TopicFilter("o.*", "tmp.*")
    assert not any("ignored" in n for n in plan.sources[0].config.notes)


@pytest.mark.parametrize(("value", "needle"), [("orders(", "invalid regex"), ("", "empty topic pattern")])
def test_bad_file_whitelist_names_the_file_and_key(tmp_path, files, value, needle):
    path = write(tmp_path / "bad.properties", CONSUMER + f"mirror.topics.whitelist={value}\n")
    msg = refused(options(files, consumer_configs=[path], include=None))
    assert msg.startswith(f"{path}: mirror.topics.whitelist: ")
    assert needle in msg


def test_topic_filter_is_the_same_for_run_and_check_config(files):
    """`check-config` calls topic_filter() as build_plan does: same filter from the same inputs."""
    cfg = load_client_config(files["legacy"], "consumer")
    assert topic_filter(cfg, None, None) == TopicFilter("app_log", None)
    assert topic_filter(load_client_config(files["consumer"], "consumer"), None, None) is None
    plan = build_plan(options(files, consumer_configs=[files["legacy"]], include=None))
    assert plan.sources[0].topic_filter == topic_filter(cfg, None, None)


# --- failover options: --groups and its interval


def test_plan_groups_options(tmp_path):
    consumer = write(tmp_path / "east.properties", "bootstrap.servers=127.0.0.1:1\ngroup.id=kmirror-east\n")
    producer = write(tmp_path / "producer.properties", "bootstrap.servers=127.0.0.1:2\n")
    plain = build_plan(MirrorOptions([consumer], producer, include=".*", num_streams=2))
    assert not plain.group_syncs() and not any(s.offset_syncs for s in plain.stream_specs())
    plan = build_plan(
        MirrorOptions([consumer], producer, include=".*", num_streams=2, groups="app.*,billing")
    )
    assert all(s.offset_syncs for s in plan.stream_specs())
    (sync,) = plan.group_syncs()
    assert sync.mirror == "kmirror-east" and sync.interval_ms == 60_000
    assert sync.groups.matches("billing") and not sync.groups.matches("__consumer")
    with pytest.raises(ConfigError, match="--groups"):
        build_plan(MirrorOptions([consumer], producer, include=".*", groups="app(("))
    with pytest.raises(ConfigError, match=r"--sync\.group\.offsets\.interval\.ms"):
        build_plan(
            MirrorOptions([consumer], producer, include=".*", groups="a", sync_group_offsets_interval_ms=0)
        )
