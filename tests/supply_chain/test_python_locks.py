"""The Python lock files (locks/, written by tools/locks.py: make lock). Every install the Makefile makes
takes its packages from them with pip --require-hashes, and the hosts' wheelhouse is downloaded from them
(tests/ansible/test_wheelhouse_lock.py). Offline checks: each lock pins every package with its hashes, holds
what its sources pin, agrees with the locks installed beside it, and the Makefile installs nothing else.
Whether a lock is exactly what its sources give today asks PyPI: make lock-check."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

import locks

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "roles" / "kmirror_worker" / "library" / "kmirror_wheelhouse.py"
# The sets installed into the project venv (make install, ansible-install, terraform-install, lock).
PROJECT_VENV = ("bootstrap", "dev", "ansible", "terraform", "lock")


def source_pins(path: Path) -> dict[str, str]:
    """name -> version of a requirements file's `name==version` lines."""
    out = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
            assert m, f"{path.name}: {line!r} is not name==version (the sources pin exact versions)"
            out[locks.normalize(m.group(1))] = m.group(2)
    return out


@pytest.mark.parametrize("name", [s.name for s in locks.SETS])
def test_each_lock_pins_every_package_with_its_hashes(name: str) -> None:
    text = locks.BY_NAME[name].path.read_text()
    pins = locks.parse(text)  # LockError on a line that is not name==version with --hash=sha256:...
    assert pins
    entries = re.findall(r"^[A-Za-z0-9]", text, re.M)
    assert len(entries) == len(pins), f"locks/{name}.txt: a package is listed twice"
    assert all(p.hashes for p in pins.values())


def test_a_pin_without_a_hash_is_refused() -> None:
    with pytest.raises(locks.LockError, match=r"^pip==26.3 has no --hash=sha256:"):
        locks.parse("pip==26.3 \\\n    # via -r requirements-pip.txt\n")
    with pytest.raises(locks.LockError, match="not a name==version pin"):
        locks.parse("pip>=26\n")


@pytest.mark.parametrize("name", [s.name for s in locks.SETS if s.sources])
def test_each_lock_holds_what_its_sources_ask_for(name: str) -> None:
    s = locks.BY_NAME[name]
    pins = locks.read(name)
    for source in s.sources:
        if source == locks.PYPROJECT:
            for req in map(Requirement, locks.project_requirements(s.extras)):
                pin = pins.get(locks.normalize(req.name))
                assert pin, f"locks/{name}.txt lacks {req.name} ({source}): run make lock"
                assert req.specifier.contains(pin.version), f"locks/{name}.txt: {req} but {pin.version}"
        else:
            for pkg, version in source_pins(ROOT / source).items():
                assert pkg in pins, f"locks/{name}.txt lacks {pkg} ({source}): run make lock"
                assert pins[pkg].version == version, (
                    f"locks/{name}.txt has {pkg}=={pins[pkg].version}, {source} pins {version}: run make lock"
                )


def test_the_sets_of_the_project_venv_agree() -> None:
    seen: dict[str, tuple[str, str]] = {}
    for name in PROJECT_VENV:
        for pkg, pin in locks.read(name).items():
            first = seen.setdefault(pkg, (name, pin.version))
            assert first[1] == pin.version, f"{pkg}: {first[1]} in {first[0]}, {pin.version} in {name}"


def test_pip_is_one_version_everywhere() -> None:
    (version,) = source_pins(ROOT / "requirements-pip.txt").values()
    for name in ("bootstrap", "checkov", "hosts", "hosts-audit"):
        assert locks.read(name)["pip"].version == version, name


@pytest.mark.parametrize("name", ["hosts", "hosts-audit"])
def test_the_hosts_get_the_versions_the_project_venv_was_tested_with(name: str) -> None:
    """kmirror's own dependencies at locks/dev.txt's versions, except one whose release there does not
    support the hosts' Python (said in the lock's header)."""
    s, dev, pins = locks.BY_NAME[name], locks.read("dev"), locks.read(name)
    text = s.path.read_text()
    python, platform, _ = locks.hosts_target()
    assert f"# For Python {python} on {platform}.\n" in text
    for pkg in locks.direct_dependencies(s.extras):
        note = f"# {pkg}: locks/dev.txt's {dev[pkg].version} does not support Python {python}.\n"
        assert pins[pkg].version == dev[pkg].version or note in text, f"locks/{name}.txt: {pkg}"


def test_the_gssapi_lock_is_the_clients_source() -> None:
    defaults = yaml.safe_load((ROOT / "roles/kmirror_worker/defaults/main.yml").read_text())
    name, version = defaults["kmirror_worker_gssapi_client"].split("==")
    assert {p: pin.version for p, pin in locks.read("hosts-gssapi").items()} == {name: version}


@pytest.mark.parametrize("name", [s.name for s in locks.SETS])
def test_the_wheelhouse_module_reads_each_lock_as_tools_locks_does(name: str) -> None:
    spec = importlib.util.spec_from_file_location("kmirror_wheelhouse_for_locks", MODULE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = locks.BY_NAME[name].path.read_text()
    theirs = {n: (p.version, p.hashes) for n, p in module.parse_lock(text).items()}
    assert theirs == {n: (p.version, p.hashes) for n, p in locks.parse(text).items()}


def make_commands(*targets: str) -> list[str]:
    """The commands `make -n -B TARGETS` would run, continuation lines joined."""
    proc = subprocess.run(
        ["make", "-n", "-B", *targets], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return re.sub(r"\\\n\s*", "", proc.stdout).splitlines()


def test_every_pip_install_of_the_makefile_checks_the_locks_hashes() -> None:
    targets = ("install", "ansible-install", "terraform-install", "lock")
    commands = [c for c in make_commands(*targets) if " pip " in c]
    installs = {}
    for command in commands:
        assert " pip install " in command, command
        assert "--upgrade" not in command.split(), command
        if command.endswith(" -e worker"):  # the worker itself, after its locked dependencies
            assert "--no-deps" in command.split() and "--no-build-isolation" in command.split(), command
            continue
        m = re.search(r" -r (locks/[a-z-]+\.txt)$", command)
        assert m and "--require-hashes" in command.split(), command
        # building a source distribution in an isolated environment would fetch its build backend unchecked
        assert "--only-binary :all:" in command or "--no-build-isolation" in command.split(), command
        installs[m.group(1)] = command
    assert sorted(installs) == sorted(
        f"locks/{n}.txt" for n in ("bootstrap", "dev", "ansible", "terraform", "checkov", "lock")
    )
    order = [c for c in commands if c.startswith(".venv/")]
    assert order[0].endswith("-r locks/bootstrap.txt"), "pip and the build backend come first"
