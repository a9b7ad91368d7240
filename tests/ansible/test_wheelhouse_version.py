"""kmirror_wheelhouse's local_version: a second build of one source (0.1.0 -> 0.1.0+next) for upgrade and
rollback (docs/runbooks/upgrade-and-rollback.md), offline from the roles' cached wheelhouse; the source
tree stays as it was. Needs .state/wheelhouse (make wheelhouse; make test builds it first)."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from ansible_harness import ROLES, ROOT, run_local_play

WHEELHOUSE = ROOT / ".state" / "wheelhouse"
SOURCE = ROOT / "worker"


def build(tmp_path: Path, label: str) -> tuple[int, str]:
    play = [
        {
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "tasks": [
                {
                    "kmirror_wheelhouse": {
                        "source": str(SOURCE),
                        "dest": str(tmp_path / "wheelhouse"),
                        "local_version": label,
                        "lock": str(ROOT / "locks" / "hosts.txt"),
                        "pip_args": ["--no-index", "--find-links", str(WHEELHOUSE)],
                    },
                    "register": "built",
                },
                {"ansible.builtin.debug": {"msg": "VERSION={{ built.version }}"}},
            ],
        }
    ]
    proc = run_local_play(tmp_path, play, {"ANSIBLE_LIBRARY": str(ROLES / "kmirror_worker" / "library")})
    return proc.returncode, " ".join((proc.stdout + proc.stderr).split())


def source_version() -> str:
    m = re.search(r'^__version__ = "([^"]+)"', (SOURCE / "src/kmirror/__init__.py").read_text(), re.M)
    assert m
    return m.group(1)


def test_local_version_builds_a_second_version_of_the_source(tmp_path):
    assert (WHEELHOUSE / "SHA256SUMS").is_file(), f"{WHEELHOUSE}: build it first (make wheelhouse)"
    before = (SOURCE / "src/kmirror/__init__.py").read_text()
    version = source_version()
    rc, out = build(tmp_path, "next")
    assert rc == 0, out
    assert f"VERSION={version}+next" in out
    wheel = tmp_path / "wheelhouse" / f"kmirror-{version}+next-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        assert f'__version__ = "{version}+next"' in z.read("kmirror/__init__.py").decode()
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        assert f"Version: {version}+next" in z.read(meta).decode().splitlines()
    listed = sorted(ln.split()[1] for ln in (tmp_path / "wheelhouse" / "SHA256SUMS").read_text().splitlines())
    assert wheel.name in listed and any(n.startswith("pip-") for n in listed)
    assert (SOURCE / "src/kmirror/__init__.py").read_text() == before


def test_a_label_not_in_normal_form_is_refused(tmp_path):
    rc, out = build(tmp_path, "next/1")
    assert rc != 0
    assert "local_version 'next/1': give letters and digits separated by dots" in out
