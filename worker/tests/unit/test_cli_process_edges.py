"""The edges of the `kmirror` process, run as an operator runs it (`.venv/bin/kmirror` in a subprocess):
a closed stdout (`kmirror config-keys | head`), a metrics port already in use, the metrics address.

No broker is needed: the consumer and producer files point at a local socket that only listens, so a
test sees whether `kmirror run` tried to connect at all, or at 127.0.0.1:1 (nothing listens there).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cpu_budget import children_cpu, cpu_time_under

KMIRROR = str(Path(sys.executable).with_name("kmirror"))
TIMEOUT = 60


def python_env(buffered: bool = True) -> dict[str, str]:
    """The command's environment: stdout buffered (an operator's shell), or PYTHONUNBUFFERED set."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return env if buffered else {**env, "PYTHONUNBUFFERED": "1"}


def kmirror(
    *argv: str, stdout: int = subprocess.PIPE, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KMIRROR, *argv], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT, env=env
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def listening(address: str = "127.0.0.1") -> Iterator[socket.socket]:
    """A socket that listens and never accepts: a port in use, or a "broker" that records connections."""
    with socket.socket() as s:
        s.bind((address, 0))
        s.listen(16)
        s.setblocking(False)
        yield s


def connections(s: socket.socket) -> int:
    """How many connections are waiting on a listening socket (accepts and closes them)."""
    n = 0
    while True:
        try:
            conn, _ = s.accept()
        except BlockingIOError:
            return n
        conn.close()
        n += 1


def mirror_files(tmp_path: Path, bootstrap: str) -> tuple[str, str]:
    consumer = tmp_path / "east.properties"
    consumer.write_text(f"bootstrap.servers={bootstrap}\ngroup.id=kmirror-edges\n", encoding="utf-8")
    producer = tmp_path / "target.properties"
    producer.write_text(f"bootstrap.servers={bootstrap}\n", encoding="utf-8")
    return str(consumer), str(producer)


def run_argv(tmp_path: Path, bootstrap: str) -> list[str]:
    """`kmirror run` of every topic, with the client files of mirror_files(tmp_path, bootstrap)."""
    consumer, producer = mirror_files(tmp_path, bootstrap)
    return ["run", "--consumer.config", consumer, "--producer.config", producer, "--whitelist", ".*"]


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line holds `text` (e.g. a test's own temporary directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def assert_one_line_exit_2(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("kmirror"), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    for needle in needles:
        assert needle in done.stderr
    return done.stderr


# --- a closed stdout: quiet, exit 1, for every command that writes to stdout ---


@pytest.fixture
def closed_pipe() -> Iterator[int]:
    """The write end of a pipe whose reader is gone (`| head` after head exited): every write fails."""
    read, write = os.pipe()
    os.close(read)
    yield write
    os.close(write)


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "PYTHONUNBUFFERED"])
@pytest.mark.parametrize(
    "argv",
    [
        ["config-keys"],
        ["config-keys", "--markdown"],
        ["defaults"],
        ["defaults", "--markdown"],
        ["check-config", "--consumer.config", "{consumer}", "--producer.config", "{producer}"],
        ["check-config", "--consumer.config", "{consumer}", "--json"],
        ["--help"],
        ["run", "--help"],
        ["lag", "--help"],
        ["audit", "--help"],
        ["--version"],
    ],
    ids=" ".join,
)
def test_a_closed_stdout_ends_the_command_quietly(closed_pipe, tmp_path, argv, buffered):
    consumer, producer = mirror_files(tmp_path, "127.0.0.1:1")
    argv = [a.format(consumer=consumer, producer=producer) for a in argv]
    done = kmirror(*argv, stdout=closed_pipe, env=python_env(buffered))
    assert done.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored" at exit
    assert done.returncode == 1  # the output was not all written (argparse's own writes included)


def test_python_dash_m_entry_points_end_quietly_on_a_closed_stdout(closed_pipe):
    for module in ("kmirror", "kmirror.health.lagcheck"):
        done = subprocess.run(
            [sys.executable, "-m", module, "--help"],
            stdout=closed_pipe,
            stderr=subprocess.PIPE,
            text=True,
            timeout=TIMEOUT,
            env=python_env(buffered=True),
        )
        assert (done.returncode, done.stderr) == (1, ""), module


def test_an_open_stdout_keeps_exit_0():
    done = kmirror("config-keys")
    assert done.returncode == 0 and done.stderr == ""
    assert "groupid" in done.stdout


# --- a metrics port in use: one line, exit 2, before any client connects or any process starts ---


def test_a_metrics_port_in_use_is_one_line_exit_2_before_anything_starts(tmp_path):
    with listening() as busy, listening() as broker:
        port = busy.getsockname()[1]
        # It does little before it refuses: the child's CPU time (cpu_budget.py), which a busy machine does
        # not stretch as it does the wall clock (kmirror()'s TIMEOUT, 60 s, is the bound on a hang).
        with cpu_time_under(30, "kmirror run refusing a metrics port in use", children_cpu):
            done = kmirror(
                *run_argv(tmp_path, f"127.0.0.1:{broker.getsockname()[1]}"),
                "--num.streams",
                "2",
                "--groups",
                "app.*",
                "--metrics.port",
                str(port),
            )
        err = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        # the log lines before it say what the run was about to do; the error is the last line, and one
        assert err.startswith("kmirror run: error: --metrics.port: "), done.stderr
        assert f"127.0.0.1:{port}" in err
        assert "in use" in err and "another --metrics.port" in err
        assert connections(broker) == 0  # no client connected: neither a stream nor the group offset sync
    assert processes_mentioning(str(tmp_path)) == []  # no stream process left behind


def test_a_metrics_port_in_use_is_the_only_stderr_line_at_log_level_error(tmp_path):
    with listening() as busy:
        done = kmirror(
            *run_argv(tmp_path, "127.0.0.1:1"),
            "--metrics.port",
            str(busy.getsockname()[1]),
            "--log.level",
            "ERROR",
        )
    assert_one_line_exit_2(done, "--metrics.port", "in use")


# --- --metrics.address ---


@contextlib.contextmanager
def running_mirror(tmp_path: Path, *extra: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`kmirror run` (one stream, brokers at 127.0.0.1:1) until its metrics server is up; killed after."""
    argv = run_argv(tmp_path, "127.0.0.1:1")
    log = tmp_path / "stderr.txt"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [KMIRROR, *argv, "--num.streams", "1", *extra],
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )
    try:
        deadline = time.monotonic() + TIMEOUT
        while "metrics on http://" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        line = next(ln for ln in log.read_text().splitlines() if "metrics on http://" in ln)
        yield proc, line
    finally:
        proc.send_signal(signal.SIGKILL)  # a single-stream run is one process
        proc.wait(timeout=TIMEOUT)


def answers(address: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{address}:{port}/metrics", timeout=5) as response:
            return response.status == 200 and b"kmirror_records_in" in response.read()
    except ConnectionRefusedError:
        return False
    except OSError as exc:
        if isinstance(exc.__cause__ or getattr(exc, "reason", None), ConnectionRefusedError):
            return False
        raise


@pytest.mark.parametrize("given", [["--metrics.address", "127.0.0.1"], []], ids=["explicit", "default"])
def test_the_metrics_server_listens_on_the_given_address_only(tmp_path, given):
    port = free_port()
    with running_mirror(tmp_path, "--metrics.port", str(port), *given) as (_, line):
        assert f"metrics on http://127.0.0.1:{port}/metrics" in line
        assert answers("127.0.0.1", port)
        # all of 127/8 is this host: a server on every address answers at 127.0.0.2, this one does not
        assert not answers("127.0.0.2", port)


def test_every_address_when_asked(tmp_path):
    port = free_port()
    with running_mirror(tmp_path, "--metrics.port", str(port), "--metrics.address", "0.0.0.0") as (_, line):
        assert f"metrics on http://0.0.0.0:{port}/metrics" in line
        assert answers("127.0.0.1", port)
        assert answers("127.0.0.2", port)


# --- the metrics port under a flood of idle connections (issue 34, item 4) ---

FLOOD = 1200
# A request that never ends: no blank line after the headers.
HALF_REQUEST = b"GET /metrics HTTP/1.1\r\nHost: kmirror\r\n"
# Threads and open files a `kmirror run` may gain during the test on its own (librdkafka's threads and
# sockets come and go while it retries its brokers): far below one per connection.
SLACK = 16


def tasks(pid: int) -> int:
    """The process's threads, native ones included (librdkafka's)."""
    return len(os.listdir(f"/proc/{pid}/task"))


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def closed_by_server(s: socket.socket) -> bool:
    """The server closed this connection (end of stream or reset); False while it holds it open."""
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def get(port: int, path: str) -> tuple[int, str, bytes]:
    """Status, content type and body of a GET on the metrics port, 503 included."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=TIMEOUT) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def test_a_flood_of_idle_connections_neither_exhausts_the_metrics_port_nor_keeps_scrapes_out(tmp_path):
    from kmirror.mirror.httpserver import MAX_CONNECTIONS

    port = free_port()
    flood: list[socket.socket] = []
    with running_mirror(tmp_path, "--metrics.port", str(port)) as (proc, _):
        assert get(port, "/metrics")[0] == 200
        threads, files = tasks(proc.pid), open_files(proc.pid)
        try:
            most = threads
            for i in range(FLOOD):
                s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
                s.sendall(HALF_REQUEST)
                flood.append(s)
                if i % 50 == 49:
                    most = max(most, tasks(proc.pid))
            # One thread serves every connection (the server it replaced started one per connection).
            assert most <= threads + SLACK, (threads, most)
            # It holds at most MAX_CONNECTIONS of them: the rest were closed as they came.
            bound = files + MAX_CONNECTIONS + SLACK
            deadline = time.monotonic() + TIMEOUT
            while open_files(proc.pid) > bound:
                assert time.monotonic() < deadline, (files, open_files(proc.pid))
                time.sleep(0.1)
            # The flood still held open, scrapes are answered: Prometheus's page, and /health's JSON.
            status, kind, body = get(port, "/metrics")
            assert (status, kind.split(";")[0]) == (200, "text/plain")
            assert b"kmirror_records_in_total" in body
            status, kind, body = get(port, "/health")
            doc = json.loads(body)
            assert kind == "application/json" and isinstance(doc["streams"], list)
            assert (status, doc["status"]) in ((200, "ok"), (503, "unhealthy"))
            assert tasks(proc.pid) <= threads + SLACK
            # And every idle connection is closed: those it still held, after their deadline.
            deadline = time.monotonic() + TIMEOUT
            left = flood
            while left:
                assert time.monotonic() < deadline, f"{len(left)} idle connections still open"
                left = [s for s in left if not closed_by_server(s)]
                time.sleep(0.2)
            assert proc.poll() is None
        finally:
            for s in flood:
                s.close()


@pytest.mark.parametrize(
    ("address", "needle"),
    [
        ("192.0.2.1", "cannot listen on 192.0.2.1:"),  # TEST-NET-1: not an address of this host
        ("999.1.2.3", "cannot listen on 999.1.2.3:"),
        ("no-such-host.invalid", "cannot listen on no-such-host.invalid:"),
        ("", "expected an IP address or host name"),
        (" ", "expected an IP address or host name"),
    ],
)
def test_a_bad_metrics_address_is_one_line_exit_2(tmp_path, address, needle):
    with listening() as broker:
        done = kmirror(
            *run_argv(tmp_path, f"127.0.0.1:{broker.getsockname()[1]}"),
            "--metrics.port",
            str(free_port()),
            "--metrics.address",
            address,
            "--log.level",
            "ERROR",
        )
        assert_one_line_exit_2(done, "--metrics.address", needle)
        assert connections(broker) == 0


@pytest.mark.parametrize("port", ["70000", "-1", "http", ""])
def test_a_bad_metrics_port_is_one_line_exit_2(tmp_path, port):
    done = kmirror(*run_argv(tmp_path, "127.0.0.1:1"), f"--metrics.port={port}")
    assert_one_line_exit_2(done, "--metrics.port")


# --- seconds options: a wait that never ends or a crash before, one line and exit 2 now ---


@pytest.mark.parametrize(
    "argv",
    [
        ["failover", "--source.config", "{consumer}", "--target.config", "{producer}", "--group", "app",
         "--timeout", "-5"],  # librdkafka waited forever
        ["failover", "--source.config", "{consumer}", "--target.config", "{producer}", "--group", "app",
         "--source.timeout", "nan"],
        ["lag", "--bootstrap-server", "127.0.0.1:1", "--group", "app", "--timeout", "0.2", "--watch",
         "--count", "2", "--interval", "inf"],  # OverflowError from time.sleep
        ["lag", "--bootstrap-server", "127.0.0.1:1", "--group", "app", "--timeout", "-1"],
        ["audit", "--source.config", "{consumer}", "--target.config", "{producer}", "--topics", "x",
         "--timeout", "-5"],  # librdkafka waited forever
    ],
    ids=lambda argv: " ".join(argv[-2:]),
)  # fmt: skip
def test_seconds_options_refuse_what_never_ends(tmp_path, argv):
    consumer, producer = mirror_files(tmp_path, "127.0.0.1:1")
    argv = [a.format(consumer=consumer, producer=producer) for a in argv]
    done = subprocess.run([KMIRROR, *argv], capture_output=True, text=True, timeout=TIMEOUT)  # a hang: 60 s
    assert_one_line_exit_2(done, argv[-2], "expected seconds")
