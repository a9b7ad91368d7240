#!/usr/bin/env python3
"""Real test hosts for kmirror: systemd-nspawn guests in network namespaces.

One tool for molecule create/destroy playbooks, Terraform's local environment
(terraform_data provisioners) and the demo.  Stdlib only, Python 3.11+, run as root.

    hosts.py prereqs                         install controller packages (only if missing)
    hosts.py rootfs [--dir DIR]              build the bookworm rootfs once + root SSH key
    hosts.py up --name NAME --index I        start a guest at 10.213.I.2 (prints a JSON line)
    hosts.py down --name NAME                stop and remove a guest (idempotent)
    hosts.py list                            JSON array of the hosts in the state dir
    hosts.py down-all [--keep-loopback]      stop every host, then drop 10.213.0.1 from lo
    hosts.py loopback [--remove]             add (or remove) 10.213.0.1/32 on the controller's lo
    hosts.py ssh --name NAME [-- CMD...]     ssh into a guest as root

Networking per host I (1..254): netns ``kmh-I`` holding ``eth0`` = 10.213.I.2/30 with a default
route via the host-side veth ``kmh-I-h`` = 10.213.I.1/30.  The controller also carries
10.213.0.1/32 on ``lo``; services bound there are reachable from every guest.

IP forwarding is NOT needed and is never enabled: a guest's packet to 10.213.0.1 (or to its
10.213.I.1) is addressed to the controller itself, so the kernel delivers it locally
(ip_local_deliver) and the reply leaves through the connected /30 route of that guest's veth.
Forwarding would only matter for guest-to-guest or guest-to-outside traffic, which these hosts
deliberately do not have (guests install from wheels shipped by the controller).

Environment overrides: KMIRROR_HOSTS_STATE_DIR (default /run/kmirror-hosts),
KMIRROR_HOSTS_CACHE_DIR (default /var/cache/kmirror-hosts).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NoReturn

PROG = "hosts.py"
DEFAULT_STATE_DIR = Path(os.environ.get("KMIRROR_HOSTS_STATE_DIR", "/run/kmirror-hosts"))
DEFAULT_CACHE_DIR = Path(os.environ.get("KMIRROR_HOSTS_CACHE_DIR", "/var/cache/kmirror-hosts"))
SUITE = "bookworm"
ROOTFS_NAME = f"rootfs-{SUITE}"
FALLBACK_MIRROR = "http://deb.debian.org/debian"
STAMP = ".kmirror-rootfs-complete"
CONTROLLER_PACKAGES = ["systemd-container", "debootstrap", "openssh-client", "iproute2"]
GUEST_PACKAGES = [
    "systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "python3-apt", "sudo",
    "iproute2", "ca-certificates", "python3-venv", "krb5-user", "libsasl2-modules-gssapi-mit",
]
# Bump when the post-debootstrap configuration below changes: forces a rebuild of the cache.
ROOTFS_CONFIG_VERSION = 1
CONTROLLER_ADDRESS = "10.213.0.1"
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
BOOT_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
SSH_OPTS = [
    "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
    "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=3",
]
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


class HostsError(Exception):
    """A failure reported to the user as one line, exit status 1."""


# --------------------------------------------------------------------------- helpers


def run(cmd: Sequence[str], *, check: bool = True, timeout: float | None = 120.0,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command quietly; raise HostsError with the last stderr line on failure."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout,
                              env=env if env is not None else {**os.environ, **BASE_ENV},
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise HostsError(f"command not found: {cmd[0]} (run '{PROG} prereqs')") from None
    except subprocess.TimeoutExpired:
        raise HostsError(f"timed out after {timeout:.0f}s: {' '.join(cmd)}") from None
    if check and proc.returncode != 0:
        msg = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise HostsError(f"'{' '.join(cmd)}' failed (exit {proc.returncode}): "
                         f"{msg[-1] if msg else 'no output'}")
    return proc


def emit(obj: object) -> None:
    print(json.dumps(obj, sort_keys=True), flush=True)


def warn(msg: str) -> None:
    print(f"{PROG}: warning: {msg}", file=sys.stderr, flush=True)


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(line.strip() for line in text[-lines:] if line.strip()) or "(empty log)"


def require_root() -> None:
    if os.geteuid() != 0:
        raise HostsError("must run as root")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Exclusive flock on PATH (created if needed) for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def mounts_under(root: Path) -> list[Path]:
    """Mount points at or below ROOT, deepest first."""
    found: list[Path] = []
    prefix = str(root).rstrip("/")
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            mp = line.split()[4].replace("\\040", " ")
            if mp == prefix or mp.startswith(prefix + "/"):
                found.append(Path(mp))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def is_mounted(path: Path) -> bool:
    return path in mounts_under(path)


def unmount_all(root: Path) -> None:
    for mp in mounts_under(root):
        for _ in range(10):
            if run(["umount", str(mp)], check=False).returncode == 0:
                break
            time.sleep(0.3)
        else:
            warn(f"{mp} stays busy; detaching it lazily")
            run(["umount", "-l", str(mp)])


def remove_tree(path: Path) -> None:
    """rm -rf that unmounts first and never crosses into another filesystem."""
    if not path.exists() and not path.is_symlink():
        return
    unmount_all(path)
    run(["rm", "-rf", "--one-file-system", str(path)], timeout=600)


# --------------------------------------------------------------------------- prereqs


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL when this process dies (prctl PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def dpkg_installed(pkg: str) -> bool:
    proc = run(["dpkg-query", "-W", "-f=${Status}", pkg], check=False)
    return proc.returncode == 0 and proc.stdout.strip() == "install ok installed"


def cmd_prereqs(_args: argparse.Namespace) -> None:
    require_root()
    missing = [p for p in CONTROLLER_PACKAGES if not dpkg_installed(p)]
    if missing:
        env = {**os.environ, **BASE_ENV, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
        if run(install, check=False, timeout=900, env=env).returncode != 0:
            # Most often the package lists are absent or stale: refresh once and retry.
            run(["apt-get", "update", "-q"], timeout=900, env=env)
            run(install, timeout=900, env=env)
    with open("/proc/filesystems") as fh:
        if not any(line.split()[-1] == "overlay" for line in fh if line.strip()):
            raise HostsError("the kernel has no overlay filesystem (needed for per-host roots)")
    emit({"installed": missing, "present": [p for p in CONTROLLER_PACKAGES if p not in missing]})


# --------------------------------------------------------------------------- rootfs


def find_mirror() -> str:
    """The first enabled 'deb' source serving SUITE (not -security/-updates) with 'main'."""
    entries: list[tuple[list[str], list[str], list[str], list[str]]] = []  # types, uris, suites, comps
    one_line = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]
    for path in one_line:
        with contextlib.suppress(OSError):
            for raw in path.read_text().splitlines():
                line = re.sub(r"\[[^\]]*\]", " ", raw.split("#", 1)[0]).split()
                if len(line) >= 3:
                    entries.append(([line[0]], [line[1]], [line[2]], line[3:]))
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        with contextlib.suppress(OSError):
            for stanza in re.split(r"\n\s*\n", path.read_text()):
                fields: dict[str, str] = {}
                key = ""
                for raw in stanza.splitlines():
                    if raw.startswith("#") or not raw.strip():
                        continue
                    if raw[0] in " \t" and key:
                        fields[key] += " " + raw.strip()
                    elif ":" in raw:
                        key, _, value = raw.partition(":")
                        key = key.strip().lower()
                        fields[key] = value.strip()
                if fields.get("enabled", "yes").lower() == "no":
                    continue
                entries.append((fields.get("types", "").split(), fields.get("uris", "").split(),
                                fields.get("suites", "").split(), fields.get("components", "").split()))
    for types, uris, suites, comps in entries:
        if "deb" in types and SUITE in suites and "main" in comps and uris:
            return uris[0].rstrip("/")
    warn(f"no '{SUITE} main' source in /etc/apt; using {FALLBACK_MIRROR}")
    return FALLBACK_MIRROR


def recipe_id() -> str:
    recipe = {"suite": SUITE, "variant": "minbase", "packages": sorted(GUEST_PACKAGES),
              "config": ROOTFS_CONFIG_VERSION}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def rootfs_complete(rootfs: Path) -> bool:
    try:
        return bool(json.loads((rootfs / STAMP).read_text()).get("recipe") == recipe_id())
    except (OSError, ValueError):
        return False


def overlays_using(rootfs: Path) -> int:
    pat = re.compile(r"(^|,)lowerdir=" + re.escape(str(rootfs)) + r"(,|:|$)")
    with open("/proc/self/mountinfo") as fh:
        return sum(1 for line in fh
                   if " - overlay " in line and pat.search(line.rsplit(" ", 1)[-1].strip()))


def configure_rootfs(root: Path) -> None:
    """Host-independent tweaks baked into the cached rootfs."""
    # Empty machine-id: each boot gets a transient id from nspawn, so guests differ.
    write_atomic(root / "etc/machine-id", "")
    # Host keys are generated per guest in 'up'; never share the ones debootstrap made.
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    dropin = root / "etc/ssh/sshd_config.d"
    dropin.mkdir(parents=True, exist_ok=True)
    write_atomic(dropin / "kmirror-hosts.conf",
                 "HostKey /etc/ssh/ssh_host_ed25519_key\nPasswordAuthentication no\n"
                 "PermitRootLogin prohibit-password\nUseDNS no\n")
    # apt-daily would hold the dpkg lock during converge (and has no registry to reach anyway).
    masked = root / "etc/systemd/system"
    masked.mkdir(parents=True, exist_ok=True)
    for unit in ("apt-daily.timer", "apt-daily-upgrade.timer"):
        link = masked / unit
        if not link.is_symlink():
            link.unlink(missing_ok=True)
            link.symlink_to("/dev/null")
    root_ssh = root / "root/.ssh"
    root_ssh.mkdir(mode=0o700, parents=True, exist_ok=True)


def ensure_keypair(cache: Path) -> Path:
    key = cache / "id_ed25519"
    if key.exists() and key.with_suffix(".pub").exists():
        return key
    cache.mkdir(parents=True, exist_ok=True)
    with locked(cache / ".key.lock"):
        if key.exists() and key.with_suffix(".pub").exists():
            return key
        tmpdir = Path(tempfile.mkdtemp(dir=cache, prefix=".key-"))
        try:
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "root@kmirror-hosts",
                 "-f", str(tmpdir / "k")])
            os.replace(tmpdir / "k.pub", key.with_suffix(".pub"))
            os.replace(tmpdir / "k", key)  # the private key last: its presence means "done"
        finally:
            shutil.rmtree(tmpdir, ignore_errors=True)
    return key


def build_rootfs(rootfs: Path, cache: Path, mirror: str | None) -> bool:
    """Build ROOTFS unless a complete one exists; return True if it was built now."""
    rootfs = rootfs.absolute()
    rootfs.parent.mkdir(parents=True, exist_ok=True)
    with locked(rootfs.parent / f".{rootfs.name}.lock"):
        if rootfs_complete(rootfs):
            return False
        if rootfs.exists():
            if in_use := overlays_using(rootfs):
                raise HostsError(f"{rootfs} is incomplete or outdated but {in_use} host(s) use it; "
                                 f"run '{PROG} down-all' first")
            remove_tree(rootfs)
        for stale in glob.glob(f"{rootfs}.tmp-*"):  # leftovers of interrupted builds
            remove_tree(Path(stale))
        if shutil.which("debootstrap", path=BASE_ENV["PATH"]) is None:
            raise HostsError(f"debootstrap not found (run '{PROG} prereqs')")
        mirror = mirror or find_mirror()
        tmp = Path(f"{rootfs}.tmp-{os.getpid()}")
        debs = cache / "debs"
        debs.mkdir(parents=True, exist_ok=True)
        log = rootfs.parent / f"{rootfs.name}.build.log"
        cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(GUEST_PACKAGES)}",
               f"--cache-dir={debs}", SUITE, str(tmp), mirror]
        env = {**BASE_ENV, "DEBIAN_FRONTEND": "noninteractive"}
        try:
            with open(log, "w") as fh:
                # Own process group + parent-death signal: if we are interrupted (or killed), no
                # orphaned debootstrap keeps writing into a directory that is being removed.
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fh,
                                        stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                        preexec_fn=die_with_parent)  # noqa: PLW1509 (no threads here)
                try:
                    returncode = proc.wait(timeout=1800)
                except BaseException:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    raise
            if returncode != 0:
                raise HostsError(f"debootstrap failed (exit {returncode}), log {log}: {tail(log, 5)}")
            configure_rootfs(tmp)
            write_atomic(tmp / STAMP, json.dumps({"recipe": recipe_id(), "suite": SUITE,
                                                  "mirror": mirror, "packages": GUEST_PACKAGES,
                                                  "built": int(time.time())}) + "\n")
            os.rename(tmp, rootfs)
        except subprocess.TimeoutExpired:
            raise HostsError(f"debootstrap timed out, log {log}") from None
        finally:
            if tmp.exists():
                remove_tree(tmp)
        return True


def cmd_rootfs(args: argparse.Namespace) -> None:
    require_root()
    t0 = time.monotonic()
    built = build_rootfs(args.dir, args.cache_dir, args.mirror)
    key = ensure_keypair(args.cache_dir)
    emit({"rootfs": str(args.dir.absolute()), "built": built, "identity_file": str(key),
          "seconds": round(time.monotonic() - t0, 1)})


# --------------------------------------------------------------------------- hosts


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


def check_args(name: str, index: int) -> None:
    if not NAME_RE.match(name):
        raise HostsError(f"invalid host name {name!r}: use lower-case letters, digits and '-' (max 63)")
    if not 1 <= index <= 254:
        raise HostsError(f"index {index} out of range 1..254 (10.213.0.0/24 is the controller's)")


def cmd_up(args: argparse.Namespace) -> None:
    require_root()
    check_args(args.name, args.index)
    state_dir: Path = args.state_dir.absolute()
    rootfs: Path = args.rootfs.absolute()
    key = args.cache_dir.absolute() / "id_ed25519"
    with locked(state_dir / ".lock"):
        host = load_host(state_dir, args.name)
        if host is not None and host.index != args.index:
            raise HostsError(f"{args.name} already exists with index {host.index}, not {args.index}")
        if host is not None and alive(host):
            ensure_loopback()
        else:
            if host is not None:  # stale or half-created: clean it up and start again
                teardown(host, args.stop_timeout)
            if not rootfs_complete(rootfs):
                raise HostsError(f"no complete rootfs at {rootfs} (run '{PROG} rootfs' first)")
            if not key.exists() or not key.with_suffix(".pub").exists():
                raise HostsError(f"no SSH key {key} (run '{PROG} rootfs' first)")
            for other in all_hosts(state_dir):
                if other.index == args.index:
                    raise HostsError(f"index {args.index} is already used by host {other.name}")
            host = Host(name=args.name, index=args.index, state_dir=str(state_dir),
                        rootfs=str(rootfs), identity_file=str(key))
            if netns_exists(host.netns) or link_exists(host.veth):
                raise HostsError(f"netns {host.netns} or link {host.veth} exists but is not managed "
                                 f"in {state_dir}; index {args.index} is taken")
            host.dir.mkdir(parents=True)
            host.save()  # first, so that 'down' can clean up whatever follows
            try:
                ensure_loopback()
                prepare_root(host, key.with_suffix(".pub").read_text())
                prepare_network(host)
                start_guest(host)
            except BaseException:
                teardown(host, args.stop_timeout)
                raise
    try:
        wait_ready(host, args.timeout)
    except HostsError:
        if not args.keep_on_failure:
            with locked(state_dir / ".lock"):
                teardown(host, args.stop_timeout)
        raise
    emit(host.public())


def down_one(state_dir: Path, name: str, timeout: float) -> dict[str, object]:
    with locked(state_dir / ".lock"):
        host = load_host(state_dir, name)
        if host is None:
            if (state_dir / name).exists():  # a dir without state.json: just remove it
                remove_tree(state_dir / name)
            return {"name": name, "removed": False}
        teardown(host, timeout)
        return {"name": name, "removed": True}


def cmd_down(args: argparse.Namespace) -> None:
    require_root()
    if not NAME_RE.match(args.name):
        raise HostsError(f"invalid host name {args.name!r}")
    t0 = time.monotonic()
    result = down_one(args.state_dir.absolute(), args.name, args.stop_timeout)
    emit({**result, "seconds": round(time.monotonic() - t0, 1)})


def cmd_down_all(args: argparse.Namespace) -> None:
    require_root()
    state_dir = args.state_dir.absolute()
    removed = [down_one(state_dir, h.name, args.stop_timeout)["name"] for h in all_hosts(state_dir)]
    if not args.keep_loopback:
        remove_loopback()
    emit({"removed": removed, "loopback_removed": not args.keep_loopback})


def cmd_list(args: argparse.Namespace) -> None:
    emit([{**h.public(), "running": alive(h)} for h in all_hosts(args.state_dir.absolute())])


def cmd_loopback(args: argparse.Namespace) -> None:
    require_root()
    if args.remove:
        remove_loopback()
    else:
        ensure_loopback()
    emit({"address": CONTROLLER_ADDRESS, "present": not args.remove})


def cmd_ssh(args: argparse.Namespace) -> NoReturn:
    host = load_host(args.state_dir.absolute(), args.name)
    if host is None or not alive(host):
        raise HostsError(f"host {args.name} is not running")
    remote = args.command[1:] if args.command[:1] == ["--"] else args.command
    cmd = ssh_cmd(host, *remote)
    os.execvp(cmd[0], cmd)


# --------------------------------------------------------------------------- CLI


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR,
                        help=f"runtime state (default {DEFAULT_STATE_DIR})")
    common.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR,
                        help=f"rootfs and SSH key cache (default {DEFAULT_CACHE_DIR})")
    stop = argparse.ArgumentParser(add_help=False)
    stop.add_argument("--stop-timeout", type=float, default=STOP_TIMEOUT,
                      help="seconds to wait after SIGTERM before SIGKILL")

    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command_name", required=True, metavar="COMMAND")
    sub.add_parser("prereqs", parents=[common], help="install controller packages if missing")
    r = sub.add_parser("rootfs", parents=[common], help="build the cached guest rootfs and SSH key")
    r.add_argument("--dir", type=Path, default=None, help=f"rootfs (default CACHE/{ROOTFS_NAME})")
    r.add_argument("--mirror", default=None, help="Debian mirror (default: from /etc/apt)")
    u = sub.add_parser("up", parents=[common, stop], help="start a host; prints its JSON")
    u.add_argument("--name", required=True)
    u.add_argument("--index", required=True, type=int, help="1..254: address 10.213.INDEX.2")
    u.add_argument("--rootfs", type=Path, default=None, help=f"default CACHE/{ROOTFS_NAME}")
    u.add_argument("--timeout", type=float, default=BOOT_TIMEOUT, help="boot timeout in seconds")
    u.add_argument("--keep-on-failure", action="store_true", help="leave a host that failed to boot")
    d = sub.add_parser("down", parents=[common, stop], help="stop and remove a host")
    d.add_argument("--name", required=True)
    sub.add_parser("list", parents=[common], help="JSON array of hosts")
    a = sub.add_parser("down-all", parents=[common, stop], help="remove every host")
    a.add_argument("--keep-loopback", action="store_true",
                   help=f"keep {CONTROLLER_ADDRESS} on lo (brokers may still use it)")
    lo = sub.add_parser("loopback", parents=[common], help=f"add {CONTROLLER_ADDRESS}/32 to lo")
    lo.add_argument("--remove", action="store_true")
    s = sub.add_parser("ssh", parents=[common], help="ssh into a host as root")
    s.add_argument("--name", required=True)
    s.add_argument("command", nargs=argparse.REMAINDER)
    return p


COMMANDS = {"prereqs": cmd_prereqs, "rootfs": cmd_rootfs, "up": cmd_up, "down": cmd_down,
            "list": cmd_list, "down-all": cmd_down_all, "loopback": cmd_loopback, "ssh": cmd_ssh}


class Terminated(BaseException):
    """SIGTERM/SIGHUP: unwind so that cleanup code (finally, teardown) still runs."""


def on_signal(signum: int, _frame: object) -> NoReturn:
    raise Terminated(signal.Signals(signum).name)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    if getattr(args, "dir", None) is None and args.command_name == "rootfs":
        args.dir = args.cache_dir / ROOTFS_NAME
    if getattr(args, "rootfs", None) is None and args.command_name == "up":
        args.rootfs = args.cache_dir / ROOTFS_NAME
    try:
        COMMANDS[args.command_name](args)
    except HostsError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: error: interrupted", file=sys.stderr)
        return 130
    except Terminated as exc:
        print(f"{PROG}: error: terminated by {exc}", file=sys.stderr)
        return 143
    return 0


if __name__ == "__main__":
    sys.exit(main())
