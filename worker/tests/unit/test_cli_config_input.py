"""Hostile and mistaken configuration input: `kmirror check-config` and `kmirror run` both answer with one
line and exit 2, no traceback, nothing started (issue 20).

Inputs that used to crash the process (a lone surrogate reached librdkafka: segmentation fault or
SystemError) run in a child process, so that a regression fails the test instead of killing pytest;
the rest go through ``kmirror.cli.main`` with a guard that fails the test if `run` ever gets as far as
starting its streams.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cpu_budget import cpu_time_under

from kmirror.cli import main
from kmirror.config.properties import MAX_FILE_BYTES

CONSUMER = (
    "bootstrap.servers=127.0.0.1:1\ngroup.id=mirror\nmirror.topics.whitelist=app_log\nclient.id=mirror\n"
)
PRODUCER = "bootstrap.servers=127.0.0.1:1\nacks=all\nclient.id=mirror\n"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
COMMANDS = ["check-config", "run"]


pytestmark = pytest.mark.usefixtures("cli_checks_only")  # worker/tests/unit/conftest.py


def write(tmp_path: Path, name: str, data: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data.encode("latin-1") if isinstance(data, str) else data)
    return str(path)


def argv(command: str, consumer: str, producer: str) -> list[str]:
    if command == "run":
        return ["run", "--consumer.config", consumer, "--producer.config", producer]
    return ["check-config", "--consumer.config", consumer, "--producer.config", producer]


def one_line_exit_2(capsys, args: list[str]) -> str:
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 2, (code, err)
    assert err.startswith(f"kmirror {args[0]}: error: "), err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    if args[0] == "check-config":
        assert out == ""
    return err


# --- item 4: what used to crash ----------------------------------------------------------------------


def _child(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kmirror.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_lone_surrogates_are_one_line_errors_in_a_child_process(tmp_path):
    # Was: segmentation fault (rc 139) for a key, SystemError for client.id=x\uD800y.
    cases = {
        "key": (CONSUMER + "x\\uD800y=1\n", "line 5: the key holds a lone UTF-16 surrogate"),
        "value": (
            CONSUMER.replace("client.id=mirror", "client.id=x\\uD800y"),
            "line 4: the value of 'client.id' holds a lone UTF-16 surrogate",
        ),
    }
    producer = write(tmp_path, "producer.properties", PRODUCER)
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_OPTS"}
    children = []
    for name, (text, needle) in cases.items():
        consumer = write(tmp_path, f"{name}.properties", text)
        for command in COMMANDS:
            children.append((command, consumer, needle, _child(argv(command, consumer, producer), env)))
    for command, consumer, needle, child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 2, (command, child.returncode, err)
        assert (
            err == f"kmirror {command}: error: {consumer}: {needle} (a \\uD800-\\uDFFF escape without its "
            "pair), which has no UTF-8 form for librdkafka; write the character itself as \\uXXXX, or both "
            "halves of a surrogate pair (e.g. \\uD83D\\uDE00)\n"
        ), err
        assert out == ""


@pytest.mark.parametrize("command", COMMANDS)
def test_nul_in_a_value_is_refused_with_file_and_key(capsys, tmp_path, command):
    # librdkafka would silently cut the value at the NUL.
    consumer = write(
        tmp_path, "c.properties", CONSUMER.replace("client.id=mirror", "client.id=mir\\u0000ror")
    )
    producer = write(tmp_path, "p.properties", PRODUCER)
    err = one_line_exit_2(capsys, argv(command, consumer, producer))
    assert f"{consumer}: line 4: the value of 'client.id' holds a NUL character" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_nul_from_a_jaas_escape_is_refused(capsys, tmp_path, command):
    # The JAAS quoted string "a\0b" holds a NUL: librdkafka would log in with the password "a".
    producer = write(
        tmp_path,
        "p.properties",
        PRODUCER
        + "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        + f'sasl.jaas.config={PLAIN} required username="u" password="Hunter\\\\0two";\n',
    )
    consumer = write(tmp_path, "c.properties", CONSUMER)
    err = one_line_exit_2(capsys, argv(command, consumer, producer))
    assert f"{producer}: sasl.password: the value holds a NUL character" in err
    assert "Hunter" not in err


@pytest.mark.parametrize("command", COMMANDS)
def test_nul_in_a_jaas_file_path_is_refused(capsys, tmp_path, command):
    # Was: ValueError (embedded null byte) from opening the path.
    producer = write(
        tmp_path,
        "p.properties",
        PRODUCER + "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        "java.security.auth.login.config=/etc/kafka/jaas\\u0000.conf\n",
    )
    consumer = write(tmp_path, "c.properties", CONSUMER)
    err = one_line_exit_2(capsys, argv(command, consumer, producer))
    assert f"{producer}: line 6: the value of 'java.security.auth.login.config' holds a NUL character" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_kafka_opts_with_an_unterminated_quote(capsys, tmp_path, monkeypatch, command):
    # Was: ValueError (No closing quotation) from shlex. Kafka's scripts split $KAFKA_OPTS at blanks and
    # remove no quotes, so the JVM would look for a file named '"/etc/kafka/jaas.conf' (quote included).
    jaas = write(tmp_path, "jaas.conf", f'KafkaClient {{ {PLAIN} required username="u" password="p"; }};\n')
    producer = write(
        tmp_path, "p.properties", PRODUCER + "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
    )
    consumer = write(tmp_path, "c.properties", CONSUMER)
    monkeypatch.setenv("KAFKA_OPTS", f'-Xmx1g -Djava.security.auth.login.config="{jaas} -Dx=1')
    err = one_line_exit_2(capsys, argv(command, consumer, producer))
    assert f'"{jaas}: file not found' in err


def test_kafka_opts_is_split_at_blanks_like_kafkas_scripts(tmp_path):
    from kmirror.config.translate import _jaas_from_env

    assert _jaas_from_env({"KAFKA_OPTS": "-Xmx1g\t-Djava.security.auth.login.config=/a b\n-Dy"}) == "/a"
    assert _jaas_from_env({"KAFKA_OPTS": "-Djava.security.auth.login.config='/a'"}) == "'/a'"
    # The JVM keeps the last of repeated -D options.
    both = "-Djava.security.auth.login.config=/a -Djava.security.auth.login.config=/b"
    assert _jaas_from_env({"KAFKA_OPTS": both}) == "/b"
    assert _jaas_from_env({"KAFKA_OPTS": '"'}) is None


# --- item 11: size bounds, many unknown keys, a directory ---------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_a_huge_one_line_file_is_refused_at_once(capsys, tmp_path, command):
    # Was: 9 s and 1.4 GB, then SAFE.
    path = tmp_path / "huge.properties"
    with path.open("wb") as f:
        f.write(CONSUMER.encode() + b"x=")
        f.write(b"y" * (50 * 1024 * 1024))
    producer = write(tmp_path, "p.properties", PRODUCER)
    # Refused before it is read whole: CPU time of this process (cpu_budget.py), which a busy machine
    # does not stretch as it does the wall clock; reading and parsing the 50 MB takes far longer.
    with cpu_time_under(2, f"kmirror {command} refusing a 50 MB file", time.process_time):
        err = one_line_exit_2(capsys, argv(command, str(path), producer))
    assert (
        f"{path}: larger than {MAX_FILE_BYTES // 1024 // 1024} MiB, the limit for a consumer properties file"
        in err
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_many_unknown_keys_name_the_first_few_and_the_count(capsys, tmp_path, command):
    text = CONSUMER + "".join(f"unknown.key.{i}=1\n" for i in range(50_000))
    consumer = write(tmp_path, "c.properties", text)
    producer = write(tmp_path, "p.properties", PRODUCER)
    # About 2 s of CPU for 50,000 keys; work per key that grows with their number fails the bound. CPU time
    # of this process (cpu_budget.py), not the wall clock, which a busy machine stretches.
    with cpu_time_under(15, f"kmirror {command} with 50,000 unknown keys", time.process_time):
        err = one_line_exit_2(capsys, argv(command, consumer, producer))
    assert (
        f"{consumer}: unknown keys unknown.key.0, unknown.key.1, unknown.key.2, unknown.key.3, "
        "unknown.key.4 and 49,995 more, 50,000 in all (neither a Java client key" in err
    )
    assert len(err) < 400


def test_a_few_unknown_keys_are_all_named(capsys, tmp_path):
    consumer = write(tmp_path, "c.properties", CONSUMER + "foo.bar=1\nfetch.wait.maxx.ms=5\n")
    err = one_line_exit_2(capsys, ["check-config", "--consumer.config", consumer])
    assert f"{consumer}: unknown keys foo.bar, fetch.wait.maxx.ms (neither" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_a_directory_is_said_to_be_a_directory(capsys, tmp_path, command):
    producer = write(tmp_path, "p.properties", PRODUCER)
    err = one_line_exit_2(capsys, argv(command, str(tmp_path), producer))
    assert err.endswith(
        f"{tmp_path}: is a directory, not a file; give the path of the consumer properties file itself\n"
    )


def test_a_python_level_key_is_a_config_error(capsys, tmp_path):
    # confluent-kafka reads error_cb itself and raised TypeError for a string.
    consumer = write(tmp_path, "c.properties", CONSUMER + "error_cb=x\n")
    err = one_line_exit_2(capsys, ["check-config", "--consumer.config", consumer])
    assert f"{consumer}: " in err and "error_cb" in err


# --- item 3: check-config says how non-ASCII bytes were read -------------------------------------------


def test_check_config_points_out_non_ascii_bytes(capsys, tmp_path):
    consumer = write(
        tmp_path,
        "c.properties",
        CONSUMER.replace("client.id=mirror", "client.id=caf\xc3\xa9") + "ssl.key.password=p\xc3\xa4ss\n",
    )
    code = main(["check-config", "--consumer.config", consumer])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert (
        "  # client.id: line 4 has non-ASCII bytes, read as ISO-8859-1 (one character per byte), as "
        "MirrorMaker reads properties files: client.id='cafÃ©'; if the file is UTF-8 and 'café' was "
        "meant, write caf\\u00e9\n"
    ) in out
    assert "  # ssl.key.password: line 5 has non-ASCII bytes" in out
    assert "äss" not in out and "Ã¤ss" not in out
    assert "  client.id=cafÃ©\n" in out
