"""The commands of tools/hosts.py and their argument parser."""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from .guests import (
    CONTROLLER_ADDRESS,
    Host,
    alive,
    all_hosts,
    ensure_loopback,
    link_exists,
    load_host,
    netns_exists,
    prepare_network,
    prepare_root,
    remove_loopback,
    ssh_cmd,
    start_guest,
    teardown,
    wait_ready,
)
from .rootfs import CONTROLLER_PACKAGES, ROOTFS_NAME, build_rootfs, ensure_keypair, rootfs_complete
from .system import BASE_ENV, PROG, HostsError, dpkg_installed, emit, locked, remove_tree, require_root, run

DESCRIPTION = "Real test hosts for kmirror: systemd-nspawn guests in network namespaces."
DEFAULT_STATE_DIR = Path(os.environ.get("KMIRROR_HOSTS_STATE_DIR", "/run/kmirror-hosts"))
DEFAULT_CACHE_DIR = Path(os.environ.get("KMIRROR_HOSTS_CACHE_DIR", "/var/cache/kmirror-hosts"))
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
BOOT_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0


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


def cmd_rootfs(args: argparse.Namespace) -> None:
    require_root()
    t0 = time.monotonic()
    built = build_rootfs(args.dir, args.cache_dir, args.mirror)
    key = ensure_keypair(args.cache_dir)
    emit({"rootfs": str(args.dir.absolute()), "built": built, "identity_file": str(key),
          "seconds": round(time.monotonic() - t0, 1)})


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


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR,
                        help=f"runtime state (default {DEFAULT_STATE_DIR})")
    common.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR,
                        help=f"rootfs and SSH key cache (default {DEFAULT_CACHE_DIR})")
    stop = argparse.ArgumentParser(add_help=False)
    stop.add_argument("--stop-timeout", type=float, default=STOP_TIMEOUT,
                      help="seconds to wait after SIGTERM before SIGKILL")

    p = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION)
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
