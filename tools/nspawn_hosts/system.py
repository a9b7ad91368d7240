"""Running commands, locks, atomic writes and mounts; the one error type the CLI reports."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

PROG = "hosts.py"
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


class HostsError(Exception):
    """A failure reported to the user as one line, exit status 1."""



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



def die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL when this process dies (prctl PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def dpkg_installed(pkg: str) -> bool:
    proc = run(["dpkg-query", "-W", "-f=${Status}", pkg], check=False)
    return proc.returncode == 0 and proc.stdout.strip() == "install ok installed"
