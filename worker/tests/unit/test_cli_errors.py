"""kmirror.cli.main: one-line errors with exit 2, check-config verdicts, config-keys and defaults output.

`kmirror run` is only called on inputs it must refuse before any client connects; a guard fails the
test if a run ever gets as far as starting its streams.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference_samples import ZK_PRODUCER

from kmirror.cli import main
from kmirror.config import load, safety, translation
from kmirror.mirror import runner

DOCS_TABLE = Path(__file__).resolve().parents[3] / "docs" / "config-translation.md"

CONSUMER = """\
bootstrap.servers=127.0.0.1:1
groupid=dp-MirrorMaker-group
exclude.internal.topics=true
mirror.topics.whitelist=app_log
client.id=mirror_maker_consumer
"""
PRODUCER = """\
bootstrap.servers=127.0.0.1:1
acks=all
batch.size=100
client.id=mirror_maker_producer
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="mirror" password="sup3r-secret";
"""
UNSAFE_PRODUCER = """\
bootstrap.servers=127.0.0.1:1
acks=1
batch.size=100
client.id=mirror_maker_producer
"""


pytestmark = pytest.mark.usefixtures("cli_checks_only")  # worker/tests/unit/conftest.py


@pytest.fixture
def files(tmp_path):
    out = {}
    for name, text in {
        "consumer": CONSUMER,
        "producer": PRODUCER,
        "unsafe": UNSAFE_PRODUCER,
        "zk": ZK_PRODUCER,
        "unknown": CONSUMER + "foo.bar=1\nfetch.wait.maxx.ms=5\n",
        "jks": CONSUMER + "ssl.truststore.location=/etc/kafka/truststore.jks\n",
        "no-filter": CONSUMER.replace("mirror.topics.whitelist=app_log\n", ""),
        "autocommit": CONSUMER + "auto.commit.enabled=true\n",
        "no-idempotence": PRODUCER + "enable.idempotence=false\n",
    }.items():
        path = tmp_path / f"{name}.properties"
        path.write_text(text, encoding="utf-8")
        out[name] = str(path)
    return out


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors exit through SystemExit
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_usage_error(code: int, err: str) -> str:
    """argparse's own errors: exit 2 and one line (reported by `kmirror` or by the subcommand)."""
    assert code == 2, err
    assert err.startswith("kmirror"), err
    assert ": error: " in err
    assert err.count("\n") == 1, err
    return err


def assert_one_line_error(code: int, err: str, command: str) -> str:
    assert code == 2, err
    assert err.startswith(f"kmirror {command}: error: "), err
    assert err.endswith("\n")
    assert err.count("\n") == 1, err
    return err


# --- kmirror run: every refusal is one line and exit 2, before any network ---


def run_cli(capsys, files, *extra: str, consumer: str = "consumer", producer: str = "producer"):
    """`kmirror run` with two of the files fixture's client files (the valid pair by default)."""
    return cli(
        capsys, "run", "--consumer.config", files[consumer], "--producer.config", files[producer], *extra
    )


def run_error(capsys, files, *extra: str, consumer: str = "consumer", producer: str = "producer") -> str:
    code, out, err = run_cli(capsys, files, *extra, consumer=consumer, producer=producer)
    assert_one_line_error(code, err, "run")
    assert out == ""
    return err


def test_run_missing_consumer_file(capsys, files, tmp_path):
    missing = str(tmp_path / "missing.properties")
    files = {**files, "missing": missing}
    err = run_error(capsys, files, consumer="missing")
    assert missing in err


def test_run_missing_producer_file(capsys, files, tmp_path):
    files = {**files, "missing": str(tmp_path / "missing.properties")}
    err = run_error(capsys, files, producer="missing")
    assert "missing.properties" in err


def test_run_zookeeper_producer(capsys, files):
    err = run_error(capsys, files, producer="zk")
    assert files["zk"] in err
    assert "zk.connect" in err
    assert "bootstrap.servers" in err


@pytest.mark.parametrize(
    ("extra", "which", "needles"),
    [
        ((), {"producer": "unsafe"}, ["acks=1", "--allow.unsafe"]),
        ((), {"consumer": "autocommit"}, ["enable.auto.commit=true"]),
        ((), {"consumer": "unknown"}, ["foo.bar", "fetch.wait.maxx.ms"]),
        ((), {"consumer": "jks"}, ["ssl.truststore.location", "ssl.ca.location"]),
        ((), {"consumer": "no-filter"}, ["--whitelist"]),
        (("--whitelist", "orders[a&&b]"), {}, ["--whitelist"]),
        (("--blacklist", "(tmp"), {}, ["--blacklist"]),
        (("--config.properties.protect", "retention.(ms"), {}, ["--config.properties.protect"]),
        (("--config.properties.protect", ""), {}, ["--config.properties.protect", "'none'"]),
    ],
    ids=[
        "unsafe_producer",
        "unsafe_consumer",
        "unknown_keys",
        "jks_truststore",
        "without_any_topic_filter",
        "invalid_whitelist",
        "invalid_blacklist",
        "invalid_protected_configs",
        "empty_protected_configs",
    ],
)
def test_run_refusal_names_the_cause(capsys, files, extra, which, needles):
    err = run_error(capsys, files, *extra, **which)
    for needle in needles:
        assert needle in err


@pytest.mark.parametrize("value", ["false", "no", "0"])
def test_run_abort_on_send_failure_false(capsys, files, value):
    err = run_error(capsys, files, "--abort.on.send.failure", value)
    assert "--abort.on.send.failure" in err
    assert "--allow.unsafe" in err


@pytest.mark.parametrize(
    "option", ["--num.streams", "--num.producers", "--queue.size", "--offset.commit.interval.ms"]
)
def test_run_non_positive_numbers(capsys, files, option):
    err = run_error(capsys, files, option, "0")
    assert option in err


@pytest.mark.parametrize(
    "option",
    [
        "--message.handler",
        "--message.handler.args",
        "--consumer.rebalance.listener",
        "--rebalance.listener.args",
    ],
)
def test_run_java_only_options(capsys, files, option):
    err = run_error(capsys, files, option, "com.example.Handler")
    assert "remove the option" in err


@pytest.mark.parametrize(
    "argv",
    [
        ("--bogus.option",),
        ("--num.streams", "two"),
        ("--abort.on.send.failure", "maybe"),
        ("--log.level", "CHATTY"),
        ("--whitelist",),
    ],
)
def test_run_bad_options(capsys, files, argv):
    code, out, err = run_cli(capsys, files, *argv)
    assert_one_line_usage_error(code, err)
    assert argv[0] in err
    assert out == ""


def test_run_without_required_files(capsys):
    code, _, err = cli(capsys, "run", "--whitelist", ".*")
    assert_one_line_error(code, err, "run")
    assert "--consumer.config" in err


def test_run_abbreviated_options_are_not_guessed(capsys, files):
    code, _, err = run_cli(capsys, files, "--num.stream", "2")
    assert_one_line_usage_error(code, err)
    assert "--num.stream" in err


@pytest.mark.parametrize(
    ("command", "argv", "option"),
    [
        ("run", ["--whitelist=--"], "--whitelist"),
        ("audit", ["--topics", "orders.*", "--output", "report", "--exclude=--"], "--exclude"),
        ("lag", ["--group=--"], "--group"),
        ("failover", ["--group=--"], "--group"),
    ],
)
def test_an_option_given_double_dash_is_refused(capsys, files, command, argv, option):
    """This Python's argparse turns ``--opt=--`` into an empty list (found by the audit property test: an
    exclude filter that was a list, and a traceback); every command refuses it in one line instead."""
    sides = (
        ["--consumer.config", files["consumer"], "--producer.config", files["producer"]]
        if command == "run"
        else ["--source.config", files["consumer"], "--target.config", files["producer"]]
    )
    code, _, err = cli(capsys, command, *sides, *argv)
    assert_one_line_error(code, err, command)
    assert option in err and "expected one argument, not --" in err


# --- kmirror check-config ---


def test_check_config_safe(capsys, files):
    code, out, err = cli(
        capsys, "check-config", "--consumer.config", files["consumer"], "--producer.config", files["producer"]
    )
    assert code == 0, err
    assert err == ""
    lines = out.splitlines()
    assert lines[-1] == "verdict: SAFE"
    assert "  group.id=dp-MirrorMaker-group" in lines
    assert "  acks=all" in lines
    assert "  sasl.username=mirror" in lines
    assert "  sasl.password=********" in lines
    assert "sup3r-secret" not in out
    assert any("include=app_log" in ln for ln in lines)


@pytest.mark.parametrize(
    ("role", "name", "needle"),
    [
        ("--producer.config", "unsafe", "acks=1"),
        ("--producer.config", "no-idempotence", "enable.idempotence=false"),
        ("--consumer.config", "autocommit", "enable.auto.commit=true"),
    ],
    ids=["acks", "idempotence", "auto_commit"],
)
def test_check_config_unsafe(capsys, files, role, name, needle):
    code, out, err = cli(capsys, "check-config", role, files[name])
    assert code == 1, err
    assert out.splitlines()[-1] == "verdict: UNSAFE"
    assert needle in out
    assert "sup3r-secret" not in out


def test_check_config_abort_on_send_failure_false_is_unsafe(capsys, files):
    code, out, _ = cli(
        capsys, "check-config", "--producer.config", files["producer"], "--abort.on.send.failure", "false"
    )
    assert code == 1
    assert out.splitlines()[-1] == "verdict: UNSAFE"
    assert "--abort.on.send.failure=false" in out


def test_check_config_json(capsys, files):
    code, out, err = cli(
        capsys,
        "check-config",
        "--json",
        "--consumer.config",
        files["consumer"],
        "--producer.config",
        files["producer"],
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["verdict"] == "SAFE"
    assert report["unsafe"] == []
    consumer, producer = report["files"]
    assert consumer["role"] == "consumer"
    assert consumer["settings"]["group.id"] == "dp-MirrorMaker-group"
    assert consumer["include"] == "app_log"
    assert producer["role"] == "producer"
    assert producer["settings"]["sasl.password"] == "********"
    assert "sup3r-secret" not in out


def test_check_config_json_unsafe(capsys, files):
    code, out, err = cli(capsys, "check-config", "--json", "--producer.config", files["no-idempotence"])
    assert code == 1, err
    report = json.loads(out)
    assert report["verdict"] == "UNSAFE"
    assert any("enable.idempotence" in u for u in report["unsafe"])


# files check-config refuses: the option naming it, the files fixture's name, a word of the error
CHECK_CONFIG_REFUSALS = [
    ("--producer.config", "zk", "zk.connect"),
    ("--consumer.config", "unknown", "foo.bar"),
    ("--consumer.config", "jks", "ssl.truststore.location"),
]


@pytest.mark.parametrize(("role", "name", "needle"), CHECK_CONFIG_REFUSALS)
def test_check_config_errors(capsys, files, role, name, needle):
    code, out, err = cli(capsys, "check-config", role, files[name])
    assert_one_line_error(code, err, "check-config")
    assert needle in err
    assert files[name] in err
    assert out == ""


@pytest.mark.parametrize(("role", "name", "needle"), CHECK_CONFIG_REFUSALS)
def test_check_config_errors_as_json(capsys, files, role, name, needle):
    """With --json a refused file is a JSON document too (verdict INVALID), on stdout; exit 2."""
    code, out, err = cli(capsys, "check-config", "--json", role, files[name])
    assert (code, err) == (2, "")
    report = json.loads(out)
    assert report["verdict"] == "INVALID"
    (problem,) = report["problems"]
    assert problem["file"] == files[name]
    assert needle in (problem["key"] or "") + problem["problem"]
    assert problem["fix"] and problem["message"].startswith(files[name])


def test_check_config_missing_file(capsys, tmp_path):
    missing = str(tmp_path / "missing.properties")
    code, _, err = cli(capsys, "check-config", "--consumer.config", missing)
    assert_one_line_error(code, err, "check-config")
    assert missing in err


def test_check_config_nothing_to_check(capsys):
    code, _, err = cli(capsys, "check-config")
    assert_one_line_error(code, err, "check-config")


def test_check_config_unknown_option(capsys, files):
    code, _, err = cli(capsys, "check-config", "--producer.config", files["producer"], "--bogus")
    assert_one_line_usage_error(code, err)
    assert "--bogus" in err


# --- kmirror config-keys and defaults ---


def test_config_keys_markdown_matches_the_docs(capsys):
    code, out, err = cli(capsys, "config-keys", "--markdown")
    assert code == 0, err
    assert out == translation.markdown()
    if DOCS_TABLE.exists():
        assert out == DOCS_TABLE.read_text(encoding="utf-8"), "regenerate docs/config-translation.md"
    else:
        assert "| `groupid` | consumer | translated | `group.id` |" in out


def test_config_keys_plain(capsys):
    code, out, _ = cli(capsys, "config-keys")
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "group.id" in rows["groupid"]
    assert "refuse" in rows["zk.connect"]


def test_defaults_is_json_with_the_required_settings(capsys):
    code, out, _ = cli(capsys, "defaults")
    assert code == 0
    table = json.loads(out)
    assert table == safety.table()
    required = {r["key"]: r["value"] for r in table["producer"]["required"]}
    assert required["acks"] == "all"
    assert {r["key"]: r["value"] for r in table["consumer"]["required"]}["enable.auto.commit"] == "false"


def test_unknown_command(capsys):
    code, _, err = cli(capsys, "mirror")
    assert_one_line_usage_error(code, err)
    assert "mirror" in err


# --- check-config and run agree on every file (issue 10: nothing dropped silently) ---

KERBEROS = """\
security.protocol=SASL_PLAINTEXT
sasl.mechanism=GSSAPI
sasl.kerberos.service.name=kafka
sasl.kerberos.keytab=/etc/kmirror/mirror.keytab
sasl.kerberos.kinit.cmd=/bin/true
"""


@pytest.fixture
def more_files(files, tmp_path):
    for name, text in {
        "producer-whitelist": PRODUCER + "mirror.topics.whitelist=app_log\n",
        "producer-blacklist": PRODUCER + "mirror.topics.blacklist=tmp.*\n",
        "consumer-bad-regex": CONSUMER.replace("=app_log", "=app_log("),
        "consumer-empty-filter": CONSUMER.replace("=app_log", "="),
        "kerberos-consumer": CONSUMER + KERBEROS + "sasl.kerberos.principal=mirror-east@EXAMPLE.COM\n",
        "kerberos-producer": PRODUCER.split("security.protocol", maxsplit=1)[0]
        + KERBEROS
        + "sasl.kerberos.principal=mirror-target@EXAMPLE.COM\n",
    }.items():
        path = tmp_path / f"{name}.properties"
        path.write_text(text, encoding="utf-8")
        files[name] = str(path)
    return files


AGREEMENT_CASES = [
    ("consumer", "producer"),
    ("consumer", "unsafe"),
    ("autocommit", "producer"),
    ("consumer", "no-idempotence"),
    ("consumer", "zk"),
    ("unknown", "producer"),
    ("jks", "producer"),
    ("consumer", "producer-whitelist"),
    ("consumer", "producer-blacklist"),
    ("consumer-bad-regex", "producer"),
    ("consumer-empty-filter", "producer"),
]


def run_and_check_config_agree(capsys, monkeypatch, consumer: str, producer: str) -> str | None:
    """Whatever `run` refuses, `check-config` refuses with the same line; what `run --allow.unsafe`
    accepts, `check-config` accepts (verdict SAFE or UNSAFE). Returns check-config's output if accepted."""
    started = []
    monkeypatch.setattr(runner, "run", lambda *a, **kw: started.append(a) or 0)
    argv = ["--consumer.config", consumer, "--producer.config", producer]
    run_code, _, run_err = cli(capsys, "run", *argv, "--allow.unsafe")
    check_code, check_out, check_err = cli(capsys, "check-config", *argv)
    if run_code == 0:
        assert started, "run accepted the files but did not start"
        assert check_code in (0, 1), check_err
        assert check_out.splitlines()[-1] in ("verdict: SAFE", "verdict: UNSAFE")
        return check_out
    assert_one_line_error(run_code, run_err, "run")
    assert_one_line_error(check_code, check_err, "check-config")
    assert run_err.removeprefix("kmirror run: ") == check_err.removeprefix("kmirror check-config: ")
    return None


@pytest.mark.parametrize(("consumer", "producer"), AGREEMENT_CASES)
def test_check_config_and_run_agree(capsys, monkeypatch, more_files, consumer, producer):
    run_and_check_config_agree(capsys, monkeypatch, more_files[consumer], more_files[producer])


# A valid value for the keys whose value is converted; 1000 for the others.
SAMPLE_VALUES = {
    "compression.codec": "1",
    "auto.offset.reset": "smallest",
    "autooffset.reset": "smallest",
    "partition.assignment.strategy": "range",
    "acks": "all",
    "request.required.acks": "-1",
    "buffer.memory": "33554432",
    "auto.commit.enable": "false",
    "auto.commit.enabled": "false",
    "autocommit.enable": "false",
    "groupid": "dp-MirrorMaker-group",
}


@pytest.mark.parametrize("rule", [r for r in translation.RULES if r.scope != "both"], ids=lambda r: r.key)
def test_a_key_in_the_other_sides_file_is_never_dropped_silently(capsys, monkeypatch, files, tmp_path, rule):
    """Every key the table gives to one side only, written in the other side's file: `run` and
    `check-config` agree, and an accepted key is applied (librdkafka knows it for this side) or reported."""
    role = "producer" if rule.scope == "consumer" else "consumer"
    path = tmp_path / f"{role}-with-{rule.key}.properties"
    base = CONSUMER if role == "consumer" else PRODUCER
    path.write_text(base + f"{rule.key}={SAMPLE_VALUES.get(rule.key, '1000')}\n", encoding="utf-8")
    pair = (str(path), files["producer"]) if role == "consumer" else (files["consumer"], str(path))
    out = run_and_check_config_agree(capsys, monkeypatch, *pair)
    if out is not None:
        mentioned = rule.key in out or (rule.target is not None and f"  {rule.target}=" in out)
        assert mentioned, f"{rule.key} in a {role} file: neither applied nor reported"


@pytest.mark.parametrize("key", ["mirror.topics.whitelist", "mirror.topics.blacklist"])
def test_topic_filter_in_the_producer_file_is_refused_by_both(capsys, more_files, key):
    name = "producer-" + key.rsplit(".", 1)[1]
    for command in ("run", "check-config"):
        argv = ["--consumer.config", more_files["consumer"], "--producer.config", more_files[name]]
        code, out, err = cli(capsys, command, *argv)
        assert_one_line_error(code, err, command)
        assert f"{more_files[name]}: {key}: a consumer setting in a producer file" in err
        assert "move it to the consumer file of the source cluster" in err
        assert out == ""


def test_different_kerberos_principals_refused_by_check_config_too(capsys, monkeypatch, more_files):
    # The confluent-kafka wheel's librdkafka has no GSSAPI (its offline check would refuse both files
    # first); the principal check comes after it, so skip librdkafka's check for these two files only.
    monkeypatch.setattr(load, "validate_with_librdkafka", lambda cfg: None)
    errors = []
    for command in ("run", "check-config"):
        code, out, err = cli(
            capsys,
            command,
            "--consumer.config",
            more_files["kerberos-consumer"],
            "--producer.config",
            more_files["kerberos-producer"],
        )
        assert_one_line_error(code, err, command)
        assert "sasl.kerberos.principal" in err and "mirror-east@EXAMPLE.COM" in err
        assert out == ""
        errors.append(err.split(": error: ", 1)[1])
    assert errors[0] == errors[1]


def test_check_config_uses_the_command_line_filter_like_run(capsys, files):
    code, out, err = cli(
        capsys, "check-config", "--json", "--consumer.config", files["consumer"], "--whitelist", "orders.*"
    )
    assert code == 0, err
    (report,) = json.loads(out)["files"]
    assert (report["include"], report["exclude"]) == ("orders.*", None)
    assert (
        "mirror.topics.whitelist=app_log: ignored (--whitelist given on the command line wins)"
        in (report["notes"])
    )


def test_check_config_refuses_an_invalid_command_line_filter_like_run(capsys, files):
    code, _, err = cli(capsys, "check-config", "--consumer.config", files["consumer"], "--blacklist", "a(")
    assert_one_line_error(code, err, "check-config")
    assert "--blacklist" in err and "invalid regex" in err


def test_check_config_says_when_run_needs_a_filter(capsys, files):
    """A file without mirror.topics.* is fine (the filter is usually on the command line); the report
    says that `run` will need one."""
    code, out, err = cli(capsys, "check-config", "--consumer.config", files["no-filter"])
    assert code == 0, err
    assert "  # no topic filter: kmirror run needs --whitelist REGEX (or --blacklist)" in out.splitlines()
