"""Embedded brokers behind a front process (a TLS terminator, a SASL/GSSAPI front) that test hosts reach.

Each broker listens on 127.0.0.1 and advertises the front's address on `host`; the front forwards to it.
The processes of one set are recorded in a state directory (``pids.json``, ``clusters.json``) so that a
later ``down`` stops them: used by molecule's tls scenario and the Kerberos fronts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from kmirror.testing.tansu import broker_binary, free_port

READY_S = 20.0


def answers(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


def wait(host: str, port: int, what: str, proc: subprocess.Popen[bytes]) -> None:
    """Until host:port accepts connections; SystemExit naming `what` if proc dies or READY_S passes."""
    deadline = time.monotonic() + READY_S
    while not answers(host, port):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{what} did not start on {host}:{port}")
        time.sleep(0.05)


def start_broker(state: Path, name: str, host: str) -> tuple[subprocess.Popen[bytes], int, int]:
    """A broker `name` on 127.0.0.1:PLAIN advertising host:FRONT (the front still to be started):
    (its process, PLAIN, FRONT), once it answers."""
    plain, front = free_port("127.0.0.1"), free_port(host)
    p = subprocess.Popen(
        [
            broker_binary(),
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{plain}",
            "--advertised-listener-url",
            f"tcp://{host}:{front}",
            "--cluster-id",
            name,
        ],
        stdout=(state / f"broker-{name}.log").open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait("127.0.0.1", plain, f"broker {name}", p)
    return p, plain, front


def kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)


def save(state: Path, pids: list[int], clusters: dict[str, str]) -> None:
    (state / "pids.json").write_text(json.dumps(pids))
    (state / "clusters.json").write_text(json.dumps(clusters, indent=2))


def down(state: Path) -> None:
    path = state / "pids.json"
    if path.exists():
        kill(json.loads(path.read_text()))
        path.unlink()
    (state / "clusters.json").unlink(missing_ok=True)
