"""The cached guest root filesystem (debootstrap of Debian bookworm) and the SSH key guests accept."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from .system import (
    BASE_ENV,
    PROG,
    HostsError,
    die_with_parent,
    locked,
    remove_tree,
    run,
    tail,
    warn,
    write_atomic,
)

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
