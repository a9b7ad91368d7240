"""Property-based tests of the command line: random argument lists for `kmirror run`, `check-config`, `lag`,
`failover` and `audit`, built from each command's real options (taken from its parser) with random and
hostile values (empty, NUL, huge and negative numbers, NaN, undecodable bytes as Python hands them over,
option-like text), end only in documented outcomes: a documented exit code, never a traceback, and
for an error exactly one line on stderr, in a few seconds of CPU time.

No cluster is reached: every file and every broker option points at 127.0.0.1:1 (nothing listens there),
and every wait is bounded (short timeouts are given first, so a generated one still wins). `kmirror run`
stops where it would start its streams (a stand-in for :func:`kmirror.mirror.runner.run` records that it
got there); the metrics server it starts before that is real, on a port that is always in use.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kmirror.cli import main
from kmirror.mirror import runner
from kmirror.options import build_parser

# What each command documents: its exit codes, and the code(s) of an error reported on stderr.
EXITS = {
    "run": {0, 1, 2, 3},  # 0 here: the arguments passed every check and the streams would start
    "check-config": {0, 1, 2},
    "lag": {0, 1, 2, 3},
    "failover": {0, 1, 2, 3, 4},
    "audit": {0, 1, 2},
}
ERRORS = {"run": {1, 2, 3}, "check-config": {2}, "lag": {2, 3}, "failover": {1, 2, 3, 4}, "audit": {2}}
# Exit codes that are also a status printed on stdout, not an error (lag --watch: 2 is ERR)
STATUSES = {"lag": {2}}
# Each case is timed twice (`check`): its CPU time, for "it does little work" (a command that spins, or
# whose checks grow with a hostile value), which load on other processes does not stretch as it does the
# wall clock; and its wall time, for "it does not hang" (a wait without a bound), with room for a busy CI
# machine. With 127.0.0.1:1 a connecting command fails within its short timeout (lag: ~0.6 s, 0.02 s of
# CPU); the wall bound no longer tells that from a wait of a 10 s or 30 s default timeout.
CPU_SECONDS_PER_CASE = 8.0
WALL_SECONDS_PER_CASE = 60.0

HOSTILE = [
    "",
    " ",
    "\0",
    "a\0b",
    "-1",
    "-0",
    "0",
    "1",
    "99999999999999999999999999999",
    "-99999999999999999999999999999",
    "1e308",
    "nan",
    "inf",
    "-inf",
    "0x10",
    "\udcff\udcfe",  # bytes that are not UTF-8, as Python decodes argv (surrogateescape)
    "\ud800",
    "é漢💥",
    "\n",
    "a\nb",
    "--",
    "-",
    "=",
    "--help",
    "%s%n%x",
    "${HOME}",
    "..",
    "*",
    "(",
    "[a&&b]",
    "\\",
    "'",
    '"',
]


def hostile() -> st.SearchStrategy[str]:
    return st.sampled_from(HOSTILE) | st.text(max_size=12)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[dict[str, object]]:
    """Files for the generated arguments, and a port that is in use on every address."""
    d = tmp_path_factory.mktemp("cli-properties")
    files = {
        "consumer": "bootstrap.servers=127.0.0.1:1\ngroup.id=kmirror-props\n",
        "consumer-filter": "bootstrap.servers=127.0.0.1:1\ngroup.id=kmirror-props\n"
        "mirror.topics.whitelist=.*\n",
        "producer": "bootstrap.servers=127.0.0.1:1\n",
        "unsafe": "bootstrap.servers=127.0.0.1:1\nacks=1\n",
        "zk": "zk.connect=127.0.0.1:1/kafka\n",
        "empty": "",
        "garbage": "\\u12\n=\n\\\n\0\0\0 = ===\n",
    }
    paths = {}
    for name, text in files.items():
        path = d / f"{name}.properties"
        path.write_text(text, encoding="utf-8")
        paths[name] = str(path)
    binary = d / "binary.properties"
    binary.write_bytes(b"\xff\xfe\x00bootstrap.servers=\x80\x81\n")
    paths["binary"] = str(binary)
    paths["directory"] = str(d)
    paths["missing"] = str(d / "missing.properties")
    busy = socket.socket(socket.AF_INET6)
    busy.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # every IPv4 and IPv6 address
    busy.bind(("::", 0))
    busy.listen(1)
    try:
        yield {"dir": d, "files": paths, "busy": busy.getsockname()[1]}
    finally:
        busy.close()


def options_of(command: str) -> list[argparse.Action]:
    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return [a for a in sub._name_parser_map[command]._actions if a.option_strings]


def value_for(action: argparse.Action, world: dict[str, object]) -> st.SearchStrategy[str]:
    """Values for one option: hostile ones, plus useful ones where that option takes something specific."""
    files: dict[str, str] = world["files"]  # type: ignore[assignment]
    dest, metavar = action.dest, action.metavar
    if metavar == "FILE" and dest != "state":
        return st.sampled_from(sorted(files.values())) | hostile()
    if dest in ("output", "state"):  # written to: relative to the test's directory, or inside it
        return (hostile() | st.just("out/%Y")).map(lambda v: str(world["dir"]) + "/" + v.lstrip("/"))
    if dest == "bootstrap":  # never a host that could be a real broker
        return st.sampled_from(["127.0.0.1:1", "127.0.0.1:0", "127.0.0.1:99999999", ":::", ",", ""]) | (
            hostile().map(lambda v: f"127.0.0.1:{v}")
        )
    if dest in ("timeout", "source_timeout", "interval"):  # seconds: never a long legitimate wait
        return st.sampled_from(["0.2", "0", "-5", "-0.1", "nan", "inf", "1e308", "86401", "x", ""])
    if dest == "count":
        return st.sampled_from(["1", "0", "-1", "x", "", "1.5"])
    if dest == "metrics_port":  # only ports that cannot be taken, or none
        busy = world["busy"]
        return hostile().map(lambda v: str(busy) if _a_port(v) else v) | st.sampled_from(["0", str(busy)])
    if dest == "metrics_address":
        return st.sampled_from(["127.0.0.1", "0.0.0.0", "::", "::1", "192.0.2.1", "999.1.1.1"]) | hostile()
    if dest == "master":  # never reached (the clusters do not answer first); no real Spark master
        return st.sampled_from(["local[1]", "spark://127.0.0.1:1"]) | hostile()
    return st.one_of(hostile(), plausible(action), plausible(action))  # a third hostile


def plausible(action: argparse.Action) -> st.SearchStrategy[str]:
    """Well-formed values, so that the checks behind the parser are reached (and their bounds)."""
    if action.choices:
        return st.sampled_from(sorted(map(str, action.choices)))
    if action.type is int:
        edges = ["1", "64", "65", "1024", "1025", "32767", "32768", str(2**31 - 1), str(2**31)]
        return st.integers(-3, 5000).map(str) | st.sampled_from(edges)
    by_metavar = {
        "true|false": ["true", "false", "yes", "no", "1", "0", "TRUE"],
        "REGEX": [".*", "orders.*", "a,b", "__consumer_offsets", "(?i)x"],
        "TIME": ["now", "-2h", "0", "2024-01-01T00:00", "1700000000000"],
        "DURATION": ["10m", "500ms", "0s", "-1m", "1d"],
        "KEY=VALUE": ["spark.ui.enabled=false", "x", "=y"],
        "T[,T]": ["orders", "a,b", ","],
        "CLASS": ["kafka.tools.MirrorMaker$defaultMirrorMakerMessageHandler"],
    }
    if action.metavar in by_metavar:
        return st.sampled_from(by_metavar[str(action.metavar)])
    if action.dest == "group":
        return st.sampled_from(["app", "kmirror-props", "__consumer_offsets"])
    return st.sampled_from(["x"])


def _a_port(value: str) -> bool:
    try:
        return 0 < int(value) < 65536
    except ValueError:
        return False


@st.composite
def argv_for(draw: st.DrawFn, command: str, world: dict[str, object]) -> list[str]:
    files: dict[str, str] = world["files"]  # type: ignore[assignment]
    # Bounded waits first: a generated value for the same option comes later and wins.
    argv = [command, *BOUNDED.get(command, [])]
    # The required options, mostly with useful values, so that the checks behind the parser are reached.
    useful = {
        "consumer_configs": files["consumer-filter"],
        "producer_config": files["producer"],
        "source_config": files["consumer"],
        "target_config": files["producer"],
        "group": "app",
        "topics": "orders.*",
        "output": str(world["dir"]) + "/report",
    }
    actions = options_of(command)
    for action in actions:
        if action.required and draw(st.integers(0, 9)) > 0:
            flag = action.option_strings[0]
            value = useful[action.dest] if draw(st.integers(0, 3)) else draw(value_for(action, world))
            argv += [flag, value]
    # Then any options, in any order, as `--opt value` or `--opt=value`, or a stray word.
    for _ in range(draw(st.integers(0, 4))):
        action = draw(st.sampled_from(actions))
        flag = draw(st.sampled_from(action.option_strings))
        if isinstance(action, argparse._HelpAction) and draw(st.integers(0, 9)) > 0:
            continue  # --help now and then
        if action.nargs == 0:
            argv.append(flag)
            continue
        value = draw(value_for(action, world))
        if action.nargs == "?" and draw(st.booleans()):
            argv.append(flag)
        elif draw(st.booleans()):
            argv.append(f"{flag}={value}")
        else:
            argv += [flag, value]
    if draw(st.integers(0, 9)) == 0:
        argv.append(draw(hostile()))
    return argv


BOUNDED = {
    "lag": ["--bootstrap-server", "127.0.0.1:1", "--timeout", "0.2", "--count", "1", "--interval", "0"],
    "failover": ["--timeout", "0.2", "--source.timeout", "0.2"],
    "audit": ["--timeout", "0.2"],
}


@pytest.fixture
def reached(monkeypatch) -> list[int]:
    """`kmirror run` stops where its streams would start (no client connects); records how many
    streams it would have started."""
    seen: list[int] = []

    def streams_would_start(specs, *args, **kwargs) -> int:
        seen.append(len(specs))
        return 0

    monkeypatch.setattr(runner, "run", streams_would_start)
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield seen
    root.handlers[:] = handlers  # `run` sets up logging on the captured stderr
    root.setLevel(level)


class Took(NamedTuple):
    cpu: float  # seconds of CPU time: the test process's (main in-process), or the forked child's
    wall: float


def outcome(capsys, argv: list[str]) -> tuple[int, str, str, Took]:
    started, cpu = time.monotonic(), time.process_time()  # main's threads too (librdkafka's)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse: usage errors (2), --help (0)
        code = exc.code if isinstance(exc.code, int) else 1
    took = Took(time.process_time() - cpu, time.monotonic() - started)
    out, err = capsys.readouterr()
    return code, out, err, took


# librdkafka issue 4605 (open upstream): an admin request that times out while its client is destroyed can
# abort the process ("rd_kafka_enq_once_del_source_return: Assertion ... failed") or crash it. `lag` and
# `failover` make such requests against 127.0.0.1:1 in every case, so they run in a child process of their
# own; a child killed by a signal is run again (twice at most), and a third crash fails the test.
UPSTREAM_CRASH_RETRIES = 2


def outcome_in_child(argv: list[str]) -> tuple[int, str, str, Took]:
    """`outcome`, in a forked child: a crash inside librdkafka takes the child, not the test process."""
    for attempt in range(UPSTREAM_CRASH_RETRIES + 1):
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            started = time.monotonic()
            pid = os.fork()
            if pid == 0:  # the child: main() with its own stdout and stderr, then exit at once
                code = 1
                try:
                    os.dup2(out.fileno(), 1)
                    os.dup2(err.fileno(), 2)
                    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
                    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
                    logging.getLogger().handlers[:] = []
                    try:
                        code = main(argv)
                    except SystemExit as exc:
                        code = exc.code if isinstance(exc.code, int) else 1
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            _, status, usage = os.wait4(pid, 0)  # the child's own CPU time
            took = Took(usage.ru_utime + usage.ru_stime, time.monotonic() - started)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        if os.WIFEXITED(status):
            return os.WEXITSTATUS(status), stdout, stderr, took
        if attempt == UPSTREAM_CRASH_RETRIES:
            raise AssertionError(
                f"kmirror {argv!r} died of signal {os.WTERMSIG(status)} {UPSTREAM_CRASH_RETRIES + 1} times:\n"
                f"{stderr}"
            )
        event("crash inside librdkafka (issue 4605), run again")
    raise AssertionError("unreachable")


def check(command: str, argv: list[str], code: int, err: str, took: Took) -> None:
    where = f"kmirror {' '.join(map(repr, argv))}"
    assert code in EXITS[command], f"{where}: exit {code}\n{err}"
    assert "Traceback" not in err, f"{where}\n{err}"
    assert took.cpu < CPU_SECONDS_PER_CASE, f"{where}: {took.cpu:.1f} s of CPU time"
    assert took.wall < WALL_SECONDS_PER_CASE, f"{where}: took {took.wall:.1f} s"
    if code in ERRORS[command] and (err or code not in STATUSES.get(command, ())):
        lines = err.splitlines()
        # check-config reports every problem it found, one line each; the other commands one line.
        many = code == 2 and command == "check-config" and lines[0].startswith("kmirror check-config:")
        assert len(lines) == 1 or many, f"{where}: exit {code}, {len(lines)} lines on stderr:\n{err}"
        assert err.endswith("\n"), f"{where}\n{err}"
        for line in lines:
            assert line.startswith("kmirror") and ": error: " in line, f"{where}\n{err}"


PROPERTY = settings(
    max_examples=60,
    deadline=None,  # each case is timed by `check` (a first Kafka client costs more than later ones)
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def in_tmp(world, monkeypatch) -> None:
    monkeypatch.chdir(world["dir"])  # relative paths the arguments name are the test's own


@PROPERTY
@given(data=st.data())
def test_run_ends_in_a_documented_outcome(capsys, world, reached, in_tmp, data):
    argv = data.draw(argv_for("run", world))
    before = len(reached)
    code, _, err, took = outcome(capsys, argv)
    check("run", argv, code, err, took)
    event(f"exit {code}" + (", streams would start" if len(reached) > before else ""))
    if len(reached) > before:  # passed every check: a port it was given was refused, so none was
        assert code == 0 and "--metrics.port" not in err
    elif code == 0:
        assert "--help" in argv or "-h" in argv, argv  # exit 0 without reaching the streams: --help only


@PROPERTY
@given(data=st.data())
def test_check_config_ends_in_a_documented_outcome(capsys, world, in_tmp, data):
    argv = data.draw(argv_for("check-config", world))
    code, out, err, took = outcome(capsys, argv)
    if code == 2 and "--json" in argv and not err:  # problems in the files, as a JSON document
        assert json.loads(out)["verdict"] == "INVALID", argv
        return
    check("check-config", argv, code, err, took)
    if code in (0, 1) and "--help" not in argv and "-h" not in argv:
        assert "verdict" in out and err == "", argv


@pytest.mark.parametrize("command", ["lag", "failover"])
@settings(PROPERTY, max_examples=25)
@given(data=st.data())
def test_lag_and_failover_end_in_a_documented_outcome(world, in_tmp, command, data):
    argv = data.draw(argv_for(command, world))
    code, _, err, took = outcome_in_child(argv)
    check(command, argv, code, err, took)


@settings(PROPERTY, max_examples=15)
@given(data=st.data())
def test_audit_ends_in_a_documented_outcome(capsys, world, in_tmp, data):
    argv = data.draw(argv_for("audit", world))
    code, _, err, took = outcome(capsys, argv)
    check("audit", argv, code, err, took)


def test_the_generated_options_are_the_commands_real_ones():
    # the generator reads the parsers: a new option is generated as soon as it exists
    flags = {f for a in options_of("run") for f in a.option_strings}
    assert {"--metrics.port", "--metrics.address", "--consumer.config", "--whitelist"} <= flags


def test_run_reaches_its_streams_within_the_bounds_and_not_beyond(capsys, world, reached, in_tmp):
    files = world["files"]
    base = ["run", "--consumer.config", files["consumer-filter"], "--producer.config", files["producer"]]
    code, _, err, _ = outcome(capsys, [*base, "--num.streams", "1024", "--num.producers", "64"])
    assert (code, reached) == (0, [1024]), err
    for option, value in [
        ("--num.streams", "1025"),
        ("--num.producers", "65"),
        ("--queue.size", str(2**31)),
        ("--offset.commit.interval.ms", str(2**31)),
        ("--replication.factor", "0"),
        ("--replication.factor", "32768"),
    ]:
        code, _, err, _ = outcome(capsys, [*base, option, value])
        assert code == 2 and err.count("\n") == 1 and option in err and "Traceback" not in err, err
    assert reached == [1024]
    code, _, err, _ = outcome(
        capsys, [*base, "--metrics.port", str(world["busy"]), "--metrics.address", "::"]
    )
    assert code == 2 and err.count("\n") == 1 and "in use" in err, err
    assert reached == [1024]


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["check-config", "\r"], "\\r"),  # argparse's own error quoted the carriage return as is
        (["check-config", "--producer.config", "a\nb\x1b[31m"], "a b\\x1b[31m"),  # a line break: a space
        (["check-config", "--producer.config", "\udcff.properties"], "\\udcff.properties"),  # crashed
    ],
)
def test_control_characters_and_undecodable_bytes_stay_on_one_line(capsys, in_tmp, argv, shown):
    code, _, err, _ = outcome(capsys, argv)
    assert code == 2 and err.count("\n") == 1 and shown in err, err
