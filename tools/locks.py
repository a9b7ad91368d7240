"""The Python lock files (locks/*.txt): every package an install takes, pinned to one version with the
SHA-256 of every file PyPI serves for that version, so that pip installs them with --require-hashes and
refuses a file whose digest is not listed (docs/security.md, Supply chain).

    python tools/locks.py compile [NAME ...]   write the locks from their sources (make lock)
    python tools/locks.py check [NAME ...]     exit 1 when a lock is not what its sources give (lock-check)

uv (pinned in locks/lock.txt; make lock installs it into the project venv) resolves each install set for
its Python and platform. The versions a lock already holds are kept unless its sources now ask for others
(uv's preferences), so a lock changes only where its sources changed; give --upgrade to let every package
a source does not pin move to its newest release. Source-only packages (pyspark) have their metadata
built with the venv's own setuptools (no build isolation): locking fetches nothing but the index's files.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ROOT / "locks"
COMMAND = "make lock"
# The project's venvs (make install's .venv and checkov's): Python 3.12, Linux x86_64, glibc 2.36 (Debian 12).
CONTROLLER = ("3.12", "x86_64-manylinux_2_36")
WORKER_DEFAULTS = ROOT / "roles" / "kmirror_worker" / "defaults" / "main.yml"
PYPROJECT = "worker/pyproject.toml"


@dataclass(frozen=True)
class LockSet:
    """One install set: the lock NAME (locks/NAME.txt) compiled from SOURCES (requirement files, or
    worker/pyproject.toml with EXTRAS), with the versions of the CONSTRAINTS locks where they overlap (the
    sets installed into one venv agree)."""

    name: str
    purpose: str
    sources: tuple[str, ...]
    extras: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    hosts: bool = False  # for the managed hosts' Python and platform (roles/kmirror_worker/defaults)
    no_deps: bool = False

    @property
    def path(self) -> Path:
        return LOCKS / f"{self.name}.txt"


SETS = (
    LockSet(
        "bootstrap",
        "make install: pip and the build backend, installed into the project venv before anything else",
        ("requirements-pip.txt", "requirements-build.txt"),
    ),
    LockSet(
        "dev",
        "make install: the worker's dependencies with its audit extra, and the test tools",
        (PYPROJECT, "requirements-dev.txt"),
        extras=("audit",),
        constraints=("bootstrap",),
    ),
    LockSet(
        "ansible",
        "make ansible-install, into the project venv",
        ("requirements-ansible.txt",),
        constraints=("bootstrap", "dev"),
    ),
    LockSet(
        "terraform",
        "make terraform-install, into the project venv",
        ("requirements-terraform.txt",),
        constraints=("bootstrap", "dev", "ansible"),
    ),
    LockSet(
        "checkov",
        "make terraform-install: checkov's own venv (.state/venv-checkov)",
        ("requirements-pip.txt", "terraform/requirements-checkov.txt"),
    ),
    LockSet(
        "lock",
        "make lock: uv, into the project venv",
        ("requirements-lock.txt",),
        constraints=("bootstrap", "dev"),
    ),
    LockSet(
        "hosts",
        "the managed hosts' wheelhouse (role kmirror_worker): kmirror's dependencies and pip",
        (PYPROJECT, "requirements-pip.txt"),
        hosts=True,
    ),
    LockSet(
        "hosts-audit",
        "the audit hosts' wheelhouse (playbooks/audit.yml): kmirror's dependencies with its audit extra, pip",
        (PYPROJECT, "requirements-pip.txt"),
        extras=("audit",),
        constraints=("hosts",),
        hosts=True,
    ),
    LockSet(
        "hosts-gssapi",
        "the GSSAPI client built from its source for Kerberos hosts (kmirror_worker_gssapi_client)",
        (),
        hosts=True,
        no_deps=True,
    ),
)
BY_NAME = {s.name: s for s in SETS}


class LockError(Exception):
    pass


@dataclass(frozen=True)
class Pin:
    name: str  # normalized
    version: str
    hashes: frozenset[str]


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")


def parse(text: str) -> dict[str, Pin]:
    """The pins of a hashed requirements file: one entry per `name==version` line with its --hash options
    (as roles/kmirror_worker/library/kmirror_wheelhouse.py reads them); LockError for any other line."""
    out: dict[str, Pin] = {}
    for raw in re.sub(r"\\\n", " ", text).splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if not line:
            continue
        m = _PIN.match(line)
        if not m:
            raise LockError(f"not a name==version pin: {line[:80]!r}")
        hashes = frozenset(re.findall(r"--hash=sha256:([0-9a-f]{64})", line))
        if not hashes:
            raise LockError(f"{m.group(1)}=={m.group(2)} has no --hash=sha256:...")
        out[normalize(m.group(1))] = Pin(normalize(m.group(1)), m.group(2), hashes)
    return out


def read(name: str) -> dict[str, Pin]:
    return parse(BY_NAME[name].path.read_text())


def hosts_target() -> tuple[str, str, str]:
    """The managed hosts' Python version, uv's name of their platform and kmirror_worker_gssapi_client,
    from the role's defaults (their one source)."""
    defaults = yaml.safe_load(WORKER_DEFAULTS.read_text())
    platform = str(defaults["kmirror_worker_platforms"][0])  # e.g. manylinux_2_28_x86_64
    m = re.fullmatch(r"(manylinux_\d+_\d+)_(x86_64|aarch64)", platform)
    if not m:
        raise LockError(
            f"{WORKER_DEFAULTS}: kmirror_worker_platforms[0] is {platform!r}, not manylinux_X_Y_ARCH"
        )
    return (
        str(defaults["kmirror_worker_python_version"]),
        f"{m.group(2)}-{m.group(1)}",
        str(defaults["kmirror_worker_gssapi_client"]),
    )


def project_requirements(extras: tuple[str, ...]) -> list[str]:
    """kmirror's own requirements (worker/pyproject.toml), with those of EXTRAS."""
    project = tomllib.loads((ROOT / PYPROJECT).read_text())["project"]
    return [*project["dependencies"], *(r for e in extras for r in project["optional-dependencies"][e])]


def direct_dependencies(extras: tuple[str, ...]) -> list[str]:
    """The names of kmirror's own dependencies, with EXTRAS."""
    return [normalize(_name(r)) for r in project_requirements(extras)]


def _name(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    if not m:
        raise LockError(f"{PYPROJECT}: cannot read the name of {req!r}")
    return m.group(1)


def compile_lock(s: LockSet, out: Path, upgrade: bool = False) -> None:
    """Write the lock of S to OUT (its current text there, if any, is uv's preferences)."""
    with tempfile.TemporaryDirectory(prefix="kmirror-locks-") as tmp:
        inputs = list(s.sources)
        constraints = [f"locks/{c}.txt" for c in s.constraints]
        python, platform = CONTROLLER
        pins: dict[str, str] = {}
        notes: list[str] = []
        # Derived inputs are written under TMP with the name of the file they come from, which the lock's
        # annotations then name.
        if s.hosts:
            python, platform, gssapi_client = hosts_target()
            if s.no_deps:
                src = Path(tmp) / "roles/kmirror_worker/defaults/main.yml"
                src.parent.mkdir(parents=True)
                src.write_text(gssapi_client + "\n")
                inputs.append(str(src))
            else:
                # The hosts get the versions of kmirror's own dependencies that the project venv has
                # (locks/dev.txt, what the tests ran with) where those support the hosts' Python; the rest
                # is resolved for the hosts' Python.
                dev = read("dev")
                pins = {n: dev[n].version for n in direct_dependencies(s.extras) if n in dev}
                (Path(tmp) / "locks").mkdir()
                constraints.append(str(Path(tmp) / "locks" / "dev.txt"))
        cmd = [
            sys.executable, "-m", "uv", "pip", "compile", "--quiet", "--generate-hashes",
            "--python", sys.executable, "--python-version", python, "--python-platform", platform,
            "--no-build-isolation", "--custom-compile-command", COMMAND, "--output-file", str(out),
        ]  # fmt: skip
        cmd += [a for e in s.extras for a in ("--extra", e)] + (["--no-deps"] if s.no_deps else [])
        cmd += (["--upgrade"] if upgrade else []) + [a for c in constraints for a in ("--constraint", c)]
        while True:
            if s.hosts and not s.no_deps:
                Path(constraints[-1]).write_text("".join(f"{n}=={v}\n" for n, v in pins.items()))
            proc = subprocess.run([*cmd, *inputs], cwd=ROOT, capture_output=True, text=True, check=False)
            unsupported = re.search(r"([A-Za-z0-9._-]+)==(\S+) depends on Python", proc.stderr)
            if proc.returncode == 0 or not unsupported or normalize(unsupported.group(1)) not in pins:
                break
            name = normalize(unsupported.group(1))
            notes.append(f"# {name}: locks/dev.txt's {pins.pop(name)} does not support Python {python}.\n")
        if proc.returncode != 0:
            raise LockError(f"locks/{s.name}.txt: uv pip compile failed:\n{proc.stderr.strip()}")
        text = out.read_text().replace(tmp + "/", "")
        header, _, body = text.partition(f"#    {COMMAND}\n")
        out.write_text(
            f"{header}#    {COMMAND}\n# {s.purpose}.\n# For Python {python} on {platform}.\n"
            + "".join(notes)
            + body
        )


def compile_all(names: list[str], upgrade: bool) -> None:
    for name in names:  # in SETS' order: a lock is compiled after the locks it is constrained by
        s = BY_NAME[name]
        s.path.parent.mkdir(exist_ok=True)
        compile_lock(s, s.path, upgrade)
        print(f"locks/{name}.txt: {len(read(name))} packages")


def check_all(names: list[str]) -> list[str]:
    """The locks that are not what their sources give now, with the difference."""
    stale = []
    with tempfile.TemporaryDirectory(prefix="kmirror-locks-check-") as tmp:
        for name in names:
            s = BY_NAME[name]
            if not s.path.is_file():
                stale.append(f"locks/{name}.txt is missing")
                continue
            out = Path(tmp) / f"{name}.txt"
            shutil.copyfile(s.path, out)
            compile_lock(s, out)
            if out.read_text() != s.path.read_text():
                diff = difflib.unified_diff(
                    s.path.read_text().splitlines(),
                    out.read_text().splitlines(),
                    f"locks/{name}.txt",
                    "now",
                    n=1,
                )
                stale.append("\n".join(list(diff)[:40]))
    return stale


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python tools/locks.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="write the locks from their sources")
    c.add_argument("--upgrade", action="store_true", help="move what no source pins to its newest release")
    c.add_argument("names", nargs="*", metavar="NAME")
    k = sub.add_parser("check", help="exit 1 when a lock is not what its sources give")
    k.add_argument("names", nargs="*", metavar="NAME")
    args = p.parse_args(argv)
    names = [s.name for s in SETS if not args.names or s.name in args.names]
    unknown = sorted(set(args.names) - set(BY_NAME))
    if unknown:
        print(f"tools/locks.py: no lock {', '.join(unknown)}; known: {', '.join(BY_NAME)}", file=sys.stderr)
        return 2
    try:
        if args.cmd == "compile":
            compile_all(names, args.upgrade)
            return 0
        stale = check_all(names)
    except LockError as e:
        print(f"tools/locks.py: {e}", file=sys.stderr)
        return 2
    for s in stale:
        print(s, file=sys.stderr)
    if stale:
        print(f"{len(stale)} lock(s) not current with their sources: run {COMMAND}", file=sys.stderr)
        return 1
    print(f"{len(names)} locks current with their sources")
    return 0


if __name__ == "__main__":
    sys.exit(main())
