"""Real-host test of tools/hosts.py: two systemd-nspawn guests, no mocks, no skips.

Needs root on a Debian 12 controller with network access to the Debian mirror (the first run
builds the cached rootfs, ~60 s).  Run:  pytest -s tests/hosts   (-s shows the timings).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HOSTS_PY = Path(__file__).resolve().parents[2] / "tools" / "hosts.py"
# A state dir of its own keeps 'list' exact even when other hosts run on this controller.
STATE_DIR = "/run/kmirror-hosts-pytest"
GUESTS = {"kmh-test-a": 201, "kmh-test-b": 202}  # indices chosen not to clash with scenarios
CONTROLLER = "10.213.0.1"
TIMINGS: dict[str, float] = {}


def hosts_py(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(HOSTS_PY), *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def ok(*args: str, timeout: float = 300) -> Any:
    """Run hosts.py, demand success, return its JSON output."""
    proc = hosts_py(*args, timeout=timeout)
    assert proc.returncode == 0, f"hosts.py {' '.join(args)} failed: {proc.stderr.strip()}"
    return json.loads(proc.stdout)


def timed(label: str, *args: str, timeout: float = 300) -> Any:
    t0 = time.monotonic()
    out = ok(*args, timeout=timeout)
    TIMINGS[label] = round(time.monotonic() - t0, 2)
    return out


def ssh(host: dict[str, Any], command: str) -> subprocess.CompletedProcess[str]:
    """Plain OpenSSH with exactly what up's JSON tells a client (what Ansible would use)."""
    return subprocess.run(
        ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=5",
         "-i", host["identity_file"], "-p", str(host["port"]), f"{host['user']}@{host['address']}",
         command],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def netns_names() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def mount_points() -> list[str]:
    with open("/proc/self/mountinfo") as fh:
        return [line.split()[4] for line in fh]


def proc_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.fixture(scope="module")
def guests(host_tests_lock: None) -> Iterator[dict[str, dict[str, Any]]]:
    assert os.geteuid() == 0, "these tests start real hosts and must run as root"
    timed("prereqs", "prereqs", timeout=900)
    timed("rootfs", "rootfs", timeout=1800)
    started: dict[str, dict[str, Any]] = {}
    try:
        for name, index in GUESTS.items():
            started[name] = timed(f"up {name}", "up", "--name", name, "--index", str(index),
                                  "--state-dir", STATE_DIR)
        yield started
    finally:
        # Runs even when a test (or an 'up') failed; 'down' is idempotent, so this is harmless
        # after test_down_removes_everything already removed the hosts.
        for name in GUESTS:
            t0 = time.monotonic()
            proc = hosts_py("down", "--name", name, "--state-dir", STATE_DIR)
            TIMINGS.setdefault(f"down {name}", round(time.monotonic() - t0, 2))
            if proc.returncode != 0:
                print(f"cleanup of {name} failed: {proc.stderr.strip()}", file=sys.stderr)
        print("\nhosts.py timings (s): " + json.dumps(TIMINGS))


def test_up_prints_connection_json(guests: dict[str, dict[str, Any]]) -> None:
    for name, index in GUESTS.items():
        host = guests[name]
        assert host["name"] == name
        assert host["address"] == f"10.213.{index}.2"
        assert host["port"] == 22
        assert host["user"] == "root"
        assert Path(host["identity_file"]).is_file()
        assert host["controller_address"] == CONTROLLER


def test_systemd_is_running_over_ssh(guests: dict[str, dict[str, Any]]) -> None:
    host_keys = set()
    for name, host in guests.items():
        proc = ssh(host, "systemctl is-system-running; cat /proc/1/comm; hostname; "
                         "command -v kinit; cat /etc/ssh/ssh_host_ed25519_key.pub")
        assert proc.returncode == 0, proc.stderr
        state, init, hostname, kinit, host_key = proc.stdout.strip().splitlines()
        assert state == "running", f"{name}: systemd is {state}"
        assert init == "systemd"
        assert hostname == name
        assert kinit == "/usr/bin/kinit"
        host_keys.add(host_key.split()[1])
    assert len(host_keys) == len(guests), "each guest must have its own SSH host key"


def test_guests_reach_a_listener_on_the_controller(guests: dict[str, dict[str, Any]]) -> None:
    peers: dict[str, str] = {}
    with socket.create_server((CONTROLLER, 0)) as server:
        server.settimeout(30)
        port = server.getsockname()[1]

        def serve() -> None:
            for _ in guests:
                conn, (peer, _port) = server.accept()
                with conn:
                    conn.settimeout(10)
                    who = conn.makefile().readline().strip()
                    peers[who] = peer
                    conn.sendall(f"hello {who}\n".encode())

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        for name, host in guests.items():
            client = (f"import socket; s = socket.create_connection(('{CONTROLLER}', {port}), 10); "
                      f"s.sendall(b'{name}\\n'); print(s.makefile().readline().strip())")
            proc = ssh(host, f'python3 -c "{client}"')
            assert proc.returncode == 0, f"{name}: {proc.stderr.strip()}"
            assert proc.stdout.strip() == f"hello {name}"
        thread.join(timeout=30)
    # Seen from the controller, each connection comes straight from the guest's own address.
    assert peers == {name: host["address"] for name, host in guests.items()}


def test_up_again_is_idempotent(guests: dict[str, dict[str, Any]]) -> None:
    for name, index in GUESTS.items():
        t0 = time.monotonic()
        again = ok("up", "--name", name, "--index", str(index), "--state-dir", STATE_DIR)
        TIMINGS[f"up again {name}"] = round(time.monotonic() - t0, 2)
        assert again == guests[name]  # same guest, same nspawn pid: nothing was restarted
    listed = ok("list", "--state-dir", STATE_DIR)
    assert sorted(h["name"] for h in listed) == sorted(GUESTS)
    assert all(h["running"] for h in listed)


def test_down_removes_everything(guests: dict[str, dict[str, Any]]) -> None:
    for name, host in guests.items():
        out = timed(f"down {name}", "down", "--name", name, "--state-dir", STATE_DIR)
        assert out["removed"] is True
        assert not proc_running(host["pid"]), f"{name}: systemd-nspawn still running"
        assert host["netns"] not in netns_names()
        assert not Path(f"/sys/class/net/kmh-{GUESTS[name]}-h").exists()
        assert not any(mp.startswith(f"{STATE_DIR}/{name}") for mp in mount_points())
        assert not Path(STATE_DIR, name).exists()
        again = ok("down", "--name", name, "--state-dir", STATE_DIR)
        assert again["removed"] is False
    assert ok("list", "--state-dir", STATE_DIR) == []
