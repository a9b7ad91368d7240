"""kmirror.config.safety: unsafe values refused unless allowed, required ones filled in, engine keys owned."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmirror.config import MASK, ClientConfig, finish, load_client_config, safety, translate
from kmirror.errors import ConfigError

BOOT = "bootstrap.servers=127.0.0.1:1\n"
MAX_IN_FLIGHT = "max.in.flight.requests.per.connection"

# (role, file line, effective key, value kept with --allow.unsafe)
UNSAFE = [
    ("producer", "acks=1", "acks", "1"),
    ("producer", "acks=0", "acks", "0"),
    ("producer", "request.required.acks=1", "acks", "1"),
    ("producer", "enable.idempotence=false", "enable.idempotence", "false"),
    ("producer", "max.in.flight.requests.per.connection=6", "max.in.flight.requests.per.connection", "6"),
    ("producer", "max.in.flight=10", "max.in.flight.requests.per.connection", "10"),
    ("producer", "retries=0", "retries", "0"),
    ("producer", "message.send.max.retries=0", "retries", "0"),
    ("producer", "message.timeout.ms=300000", "message.timeout.ms", "300000"),
    ("producer", "delivery.timeout.ms=120000", "message.timeout.ms", "120000"),
    ("consumer", "enable.auto.commit=true", "enable.auto.commit", "true"),
    ("consumer", "auto.commit.enable=true", "enable.auto.commit", "true"),
    ("consumer", "auto.commit.enabled=true", "enable.auto.commit", "true"),
]
UNSAFE_IDS = [u[1] for u in UNSAFE]


def write(tmp_path: Path, role: str, body: str) -> Path:
    path = tmp_path / f"{role}.properties"
    path.write_text(BOOT + ("group.id=mirror\n" if role == "consumer" else "") + body, encoding="utf-8")
    return path


def load(tmp_path: Path, role: str, body: str, **kw: object) -> ClientConfig:
    return load_client_config(write(tmp_path, role, body), role, env={}, **kw)  # type: ignore[arg-type]


# --- refused unless allowed ---


@pytest.mark.parametrize(("role", "line", "key", "value"), UNSAFE, ids=UNSAFE_IDS)
def test_unsafe_value_is_refused(tmp_path, role, line, key, value):
    with pytest.raises(ConfigError) as err:
        load(tmp_path, role, line + "\n")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{tmp_path}/{role}.properties: {key}={value} is unsafe")
    assert "--allow.unsafe" in msg


@pytest.mark.parametrize(("role", "line", "key", "value"), UNSAFE, ids=UNSAFE_IDS)
def test_unsafe_value_is_kept_and_listed_when_allowed(tmp_path, role, line, key, value):
    cfg = load(tmp_path, role, line + "\n", allow_unsafe=True)
    assert cfg.settings[key] == value
    assert not cfg.safe
    assert [(v.key, v.value) for v in cfg.violations if v.key == key] == [(key, value)]


@pytest.mark.parametrize(("role", "line", "key", "value"), UNSAFE, ids=UNSAFE_IDS)
def test_finish_keeps_unsafe_value_when_allowed(role, line, key, value):
    """The same, without librdkafka's own check: kmirror.config.finish on a translated file."""
    file_key, file_value = line.split("=", 1)
    props = {"bootstrap.servers": "127.0.0.1:1", file_key: file_value}
    if role == "consumer":
        props["group.id"] = "mirror"
    cfg = finish(translate(props, role, f"{role}.properties", env={}), allow_unsafe=True)
    assert cfg.settings[key] == value
    assert [v.key for v in cfg.violations] == [key]
    with pytest.raises(ConfigError):
        finish(translate(props, role, f"{role}.properties", env={}), allow_unsafe=False)


def test_every_violation_is_listed(tmp_path):
    body = "acks=1\nenable.idempotence=false\nmax.in.flight.requests.per.connection=6\nretries=0\n"
    cfg = load(tmp_path, "producer", body, allow_unsafe=True)
    assert sorted(v.key for v in cfg.violations) == [
        "acks",
        "enable.idempotence",
        "max.in.flight.requests.per.connection",
        "retries",
    ]
    assert cfg.settings["acks"] == "1"
    assert cfg.settings["retries"] == "0"


def test_finite_delivery_timeout_is_refused_with_the_fix(tmp_path):
    """A finite timeout fails every queued record after that long without the target (the mirror stops
    and restarts in a loop): refused like acks=1, and the fix says what to write."""
    with pytest.raises(ConfigError) as err:
        load(tmp_path, "producer", "delivery.timeout.ms=120000\n")
    msg = str(err.value)
    assert "message.timeout.ms=120000 is unsafe" in msg
    assert "set message.timeout.ms=0" in msg


def test_allowed_finite_timeout_keeps_the_idempotent_producer(tmp_path):
    """--allow.unsafe with only a finite timeout: the producer stays idempotent (librdkafka accepts it)."""
    cfg = load(tmp_path, "producer", "message.timeout.ms=60000\n", allow_unsafe=True)
    assert cfg.settings["message.timeout.ms"] == "60000"
    assert cfg.settings["enable.idempotence"] == "true"
    assert [v.key for v in cfg.violations] == ["message.timeout.ms"]


def test_violation_render_names_file_key_value_and_fix():
    (v,) = safety.violations({"acks": "1"}, "producer", "p.properties")
    text = v.render()
    assert text.startswith("p.properties: acks=1 is unsafe")
    assert "set acks=all" in text
    assert "--allow.unsafe" in text
    assert "\n" not in text


@pytest.mark.parametrize(
    ("role", "settings"),
    [
        ("producer", {"acks": "all"}),
        ("producer", {"acks": "-1"}),
        ("producer", {"acks": "ALL"}),
        ("producer", {"max.in.flight.requests.per.connection": "1"}),
        ("producer", {"max.in.flight.requests.per.connection": "5"}),
        ("producer", {"retries": "10"}),
        ("producer", {"enable.idempotence": "true"}),
        ("producer", {"message.timeout.ms": "0"}),
        ("consumer", {"enable.auto.commit": "false"}),
        ("consumer", {}),
        ("producer", {}),
    ],
)
def test_safe_values_have_no_violations(role, settings):
    assert safety.violations(settings, role, "f") == []


@pytest.mark.parametrize(
    ("role", "settings", "key"),
    [
        ("producer", {"acks": "1"}, "acks"),
        ("producer", {MAX_IN_FLIGHT: "0"}, MAX_IN_FLIGHT),
        ("producer", {MAX_IN_FLIGHT: "many"}, MAX_IN_FLIGHT),
        ("producer", {"retries": "0"}, "retries"),
        ("producer", {"enable.idempotence": "false"}, "enable.idempotence"),
        ("consumer", {"enable.auto.commit": "true"}, "enable.auto.commit"),
    ],
)
def test_unsafe_values_are_violations(role, settings, key):
    assert [v.key for v in safety.violations(settings, role, "f")] == [key]


# --- required values filled in, defaults, engine-owned keys ---


def assert_filled_in(cfg: ClientConfig, required: dict[str, str]) -> None:
    """The settings hold each of these values (from an empty file: kmirror filled them in); safe."""
    assert {key: cfg.settings.get(key) for key in required} == required
    assert cfg.safe


def test_required_producer_values_are_filled_in(tmp_path):
    required = {
        "acks": "all",
        "enable.idempotence": "true",
        "max.in.flight.requests.per.connection": "5",
        "retries": "2147483647",
        "message.timeout.ms": "0",  # librdkafka: no limit, a record waits out any target outage
        "partitioner": "murmur2_random",
        "delivery.report.only.error": "true",
    }
    assert_filled_in(load(tmp_path, "producer", ""), required)


def test_required_consumer_values_are_filled_in(tmp_path):
    required = {
        "enable.auto.commit": "false",
        "enable.auto.offset.store": "false",
        "enable.partition.eof": "false",
    }
    assert_filled_in(load(tmp_path, "consumer", ""), required)


def test_consumer_defaults_to_earliest(tmp_path):
    assert load(tmp_path, "consumer", "").settings["auto.offset.reset"] == "earliest"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("auto.offset.reset=latest", "latest"),
        ("autooffset.reset=largest", "latest"),
        ("auto.offset.reset=earliest", "earliest"),
    ],
)
def test_file_offset_reset_wins_over_the_default(tmp_path, line, expected):
    assert load(tmp_path, "consumer", line + "\n").settings["auto.offset.reset"] == expected


def test_producer_default_linger_can_be_changed(tmp_path):
    assert load(tmp_path, "producer", "").settings["linger.ms"] == "5"
    assert load(tmp_path, "producer", "linger.ms=50\n").settings["linger.ms"] == "50"


def test_safe_values_set_in_the_file_are_kept(tmp_path):
    cfg = load(tmp_path, "producer", "max.in.flight.requests.per.connection=1\nretries=100\nacks=all\n")
    assert cfg.settings["max.in.flight.requests.per.connection"] == "1"
    assert cfg.settings["retries"] == "100"
    assert cfg.safe


ENGINE_OWNED = [
    ("consumer", "enable.auto.offset.store", "true"),
    ("consumer", "enable.partition.eof", "true"),
    ("producer", "partitioner", "consistent_random"),
    ("producer", "delivery.report.only.error", "false"),
]


@pytest.mark.parametrize(("role", "key", "value"), ENGINE_OWNED, ids=[e[1] for e in ENGINE_OWNED])
@pytest.mark.parametrize("allow_unsafe", [False, True])
def test_engine_owned_keys_set_differently_are_refused(tmp_path, role, key, value, allow_unsafe):
    with pytest.raises(ConfigError) as err:
        load(tmp_path, role, f"{key}={value}\n", allow_unsafe=allow_unsafe)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{tmp_path}/{role}.properties: {key}: ")
    assert f"remove {key}" in msg


@pytest.mark.parametrize("role", ["consumer", "producer"])
def test_engine_owned_keys_set_to_the_engine_value_are_accepted(tmp_path, role):
    body = "".join(f"{k}={v}\n" for k, v in safety.ENGINE_OWNED[role].items())
    cfg = load(tmp_path, role, body)
    for k, v in safety.ENGINE_OWNED[role].items():
        assert cfg.settings[k] == v


def test_apply_layers_defaults_operator_required_and_engine_values():
    out = safety.apply({"linger.ms": "100", "acks": "1", "partitioner": "random"}, "producer")
    assert out["linger.ms"] == "100"  # operator over default
    assert out["acks"] == "1"  # unsafe value kept; the caller refuses it
    assert out["retries"] == "2147483647"  # required filled in
    assert out["partitioner"] == "murmur2_random"  # engine-owned over everything


# --- secrets ---


def test_masked_hides_secrets_only(tmp_path):
    body = (
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=mirror\n"
        "sasl.password=t0p-secret\nssl.key.password=k3y-secret\n"
    )
    cfg = load(tmp_path, "producer", body)
    shown = cfg.masked()
    assert shown["sasl.password"] == MASK
    assert shown["ssl.key.password"] == MASK
    assert shown["sasl.username"] == "mirror"
    assert shown["bootstrap.servers"] == "127.0.0.1:1"
    assert "t0p-secret" not in repr(shown)
    assert cfg.settings["sasl.password"] == "t0p-secret"  # the client still gets the real value


# --- the published table ---


def test_table_lists_required_defaults_and_engine_owned():
    table = safety.table()
    assert set(table) == {"consumer", "producer"}
    required = {r["key"]: r["value"] for r in table["producer"]["required"]}
    assert required == {
        "acks": "all",
        "enable.idempotence": "true",
        "max.in.flight.requests.per.connection": "5",
        "retries": "2147483647",
        "message.timeout.ms": "0",
    }
    assert {r["key"]: r["value"] for r in table["consumer"]["required"]} == {"enable.auto.commit": "false"}
    assert {"key": "auto.offset.reset", "value": "earliest"} in table["consumer"]["defaults"]
    assert all(r["why"] for role in table.values() for r in role["required"])


def test_unsafe_value_message_explains_the_safe_value():
    """The bracket explains the value to set, right after it (it used to follow the unsafe value it
    does not describe: "acks=1 is unsafe (a record is acknowledged only once every in-sync replica...)")."""
    from kmirror.config import safety

    (v,) = safety.violations({"acks": "1"}, "producer", "p.properties")
    assert v.render() == (
        "p.properties: acks=1 is unsafe; set acks=all (a record is acknowledged only once every in-sync "
        "replica of the target has it) or pass --allow.unsafe to run anyway"
    )
