"""One guest: its state file, its network namespace and veth, boot (systemd-nspawn), stop and teardown."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .system import BASE_ENV, PROG, HostsError, remove_tree, run, tail, unmount_all, warn, write_atomic

CONTROLLER_ADDRESS = "10.213.0.1"
SSH_OPTS = [
    "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
    "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=3",
]


@dataclass
class Host:
    name: str
    index: int
    state_dir: str
    rootfs: str
    identity_file: str
    pid: int = 0
    pid_start: str = ""

    @property
    def dir(self) -> Path:
        return Path(self.state_dir) / self.name

    @property
    def merged(self) -> Path:
        return self.dir / "root"

    @property
    def netns(self) -> str:
        return f"kmh-{self.index}"        # <= 7 chars

    @property
    def veth(self) -> str:
        return f"kmh-{self.index}-h"      # <= 9 chars (IFNAMSIZ limit is 15)

    @property
    def address(self) -> str:
        return f"10.213.{self.index}.2"

    @property
    def gateway(self) -> str:
        return f"10.213.{self.index}.1"

    @property
    def log(self) -> Path:
        return self.dir / "nspawn.log"

    def save(self) -> None:
        write_atomic(self.dir / "state.json", json.dumps(asdict(self), sort_keys=True) + "\n")

    def public(self) -> dict[str, object]:
        return {"name": self.name, "address": self.address, "port": 22, "user": "root",
                "identity_file": self.identity_file, "index": self.index,
                "controller_address": CONTROLLER_ADDRESS, "gateway": self.gateway,
                "netns": self.netns, "pid": self.pid}


def load_host(state_dir: Path, name: str) -> Host | None:
    try:
        data = json.loads((state_dir / name / "state.json").read_text())
        return Host(**data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        raise HostsError(f"unreadable state {state_dir / name / 'state.json'}: {exc}") from None


def all_hosts(state_dir: Path) -> list[Host]:
    if not state_dir.is_dir():
        return []
    hosts = [h for d in sorted(state_dir.iterdir()) if d.is_dir() and (h := load_host(state_dir, d.name))]
    return sorted(hosts, key=lambda h: h.index)


def proc_start(pid: int) -> str | None:
    """Start time of PID (field 22 of /proc/PID/stat), None if gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def alive(host: Host) -> bool:
    return host.pid > 0 and proc_start(host.pid) == host.pid_start


def netns_exists(ns: str) -> bool:
    return Path("/run/netns", ns).exists()


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def ensure_loopback() -> None:
    proc = run(["ip", "-4", "-o", "addr", "show", "dev", "lo"])
    if f" {CONTROLLER_ADDRESS}/32 " in proc.stdout + " ":
        return
    add = run(["ip", "addr", "add", f"{CONTROLLER_ADDRESS}/32", "dev", "lo"], check=False)
    if add.returncode != 0 and "File exists" not in add.stderr:  # a concurrent 'up' won the race
        raise HostsError(f"cannot add {CONTROLLER_ADDRESS}/32 to lo: {add.stderr.strip()}")


def remove_loopback() -> None:
    run(["ip", "addr", "del", f"{CONTROLLER_ADDRESS}/32", "dev", "lo"], check=False)


def ssh_cmd(host: Host, *remote: str) -> list[str]:
    return ["ssh", *SSH_OPTS, "-i", host.identity_file, "-p", "22", f"root@{host.address}", *remote]


def wait_ready(host: Host, timeout: float) -> None:
    """Wait until sshd answers and systemd reports running or degraded."""
    deadline = time.monotonic() + timeout
    last = "no answer from sshd"
    while True:
        if not alive(host):
            raise HostsError(f"{host.name}: systemd-nspawn exited during boot; log: {tail(host.log)}")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise HostsError(f"{host.name}: not ready after {timeout:g}s ({last}); "
                             f"log {host.log}: {tail(host.log)}")
        try:
            proc = subprocess.run(ssh_cmd(host, "systemctl", "is-system-running"), capture_output=True,
                                  text=True, timeout=min(10.0, max(remaining, 1.0)),
                                  stdin=subprocess.DEVNULL)
            state = proc.stdout.strip()
            if state in ("running", "degraded"):
                if state == "degraded":
                    failed = subprocess.run(
                        ssh_cmd(host, "systemctl", "--failed", "--plain", "--no-legend"),
                        capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
                    units = [ln.split()[0] for ln in failed.stdout.splitlines() if ln.strip()]
                    warn(f"{host.name}: systemd is degraded, failed units: {', '.join(units) or '?'}")
                return
            last = f"systemd state '{state}'" if state else (proc.stderr.strip() or last)
        except subprocess.TimeoutExpired:
            last = "ssh timed out"
        time.sleep(0.25)


def prepare_root(host: Host, pubkey: str) -> None:
    upper, work, merged = host.dir / "upper", host.dir / "work", host.merged
    for d in (upper, work, merged):
        d.mkdir(parents=True, exist_ok=True)
    run(["mount", "-t", "overlay", "overlay", "-o",
         f"lowerdir={host.rootfs},upperdir={upper},workdir={work}", str(merged)])
    write_atomic(merged / "etc/hostname", host.name + "\n")
    write_atomic(merged / "etc/hosts",
                 f"127.0.0.1\tlocalhost\n{host.address}\t{host.name}\n"
                 f"{CONTROLLER_ADDRESS}\tkmirror-controller\n"
                 "::1\tlocalhost ip6-localhost ip6-loopback\n")
    ssh_dir = merged / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(ssh_dir / "authorized_keys", pubkey.strip() + "\n", mode=0o600)
    for key in (merged / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{host.name}",
         "-f", str(merged / "etc/ssh/ssh_host_ed25519_key")])


def prepare_network(host: Host) -> None:
    ns = host.netns
    run(["ip", "netns", "add", ns])
    run(["ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])
    run(["ip", "-n", ns, "addr", "add", f"{host.address}/30", "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])
    run(["ip", "addr", "add", f"{host.gateway}/30", "dev", host.veth])
    run(["ip", "link", "set", host.veth, "up"])
    run(["ip", "-n", ns, "route", "add", "default", "via", host.gateway])


def start_guest(host: Host) -> None:
    cmd = ["systemd-nspawn", "-D", str(host.merged), "-b", "-M", host.name, "--register=no",
           "--keep-unit", f"--network-namespace-path=/run/netns/{host.netns}", "--console=passive"]
    if shutil.which("systemd-nspawn", path=BASE_ENV["PATH"]) is None:
        raise HostsError(f"systemd-nspawn not found (run '{PROG} prereqs')")
    with open(host.log, "ab") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=dict(BASE_ENV), close_fds=True)
    host.pid = proc.pid
    host.pid_start = proc_start(proc.pid) or ""
    proc.returncode = 0  # detached on purpose: silence Popen's "still running" warning
    host.save()


def stop_guest(host: Host, timeout: float) -> None:
    if alive(host):
        os.kill(host.pid, signal.SIGTERM)  # nspawn asks the guest's systemd to power off
        deadline = time.monotonic() + timeout
        while alive(host) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(host):
            warn(f"{host.name}: still running after {timeout:.0f}s; sending SIGKILL")
            with contextlib.suppress(ProcessLookupError):
                os.kill(host.pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while alive(host) and time.monotonic() < deadline:
                time.sleep(0.1)
    # Anything still in the guest's network namespace (e.g. the guest's init after a SIGKILLed
    # nspawn) is killed too; killing a PID namespace's init takes the rest of it along.
    if netns_exists(host.netns):
        pids = run(["ip", "netns", "pids", host.netns], check=False).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if proc_start(int(p)) is not None]
            time.sleep(0.1)


def teardown(host: Host, timeout: float) -> None:
    stop_guest(host, timeout)
    if host.dir.exists():
        unmount_all(host.dir)
    if link_exists(host.veth):
        run(["ip", "link", "del", host.veth], check=False)
    if netns_exists(host.netns):
        run(["ip", "netns", "del", host.netns])
    remove_tree(host.dir)
