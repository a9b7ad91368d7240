"""kmirror_wheelhouse downloads the hosts' wheels from a hashed lock (locks/hosts.txt, make lock) with pip
--require-hashes, and its SHA256SUMS lists the lock's hashes: a file whose digest the lock does not list, a
lock entry without a hash or a lock that lacks one of kmirror's dependencies stops the build with nothing
written. Offline, the roles' cached wheelhouse as the package index (as an air-gapped controller would have
it). The roles refuse the pins without hashes of earlier versions. Needs .state/wheelhouse (make wheelhouse;
make test builds it first)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_harness import ROLES, ROOT, run_local_play

WHEELHOUSE = ROOT / ".state" / "wheelhouse"
LOCK = ROOT / "locks" / "hosts.txt"
LIBRARY = {"ANSIBLE_LIBRARY": str(ROLES / "kmirror_worker" / "library")}


def lock_hashes(text: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for entry in re.split(r"\n(?=[A-Za-z0-9])", text):
        m = re.match(r"([A-Za-z0-9._-]+)==", entry)
        if m:
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = set(re.findall(r"sha256:([0-9a-f]{64})", entry))
    return out


def without(text: str, package: str) -> str:
    """TEXT without PACKAGE's entry (its pin, hashes and annotations)."""
    return re.sub(rf"^{re.escape(package)}==.*?(?=^[A-Za-z0-9]|\Z)", "", text, flags=re.M | re.S)


def build(tmp_path: Path, lock: Path) -> tuple[int, str, Path]:
    dest = tmp_path / "wheelhouse"
    play = [
        {
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "tasks": [
                {
                    "kmirror_wheelhouse": {
                        "source": str(ROOT / "worker"),
                        "dest": str(dest),
                        "lock": str(lock),
                        "pip_args": ["--no-index", "--find-links", str(WHEELHOUSE)],
                    }
                }
            ],
        }
    ]
    proc = run_local_play(tmp_path, play, LIBRARY)
    return proc.returncode, " ".join((proc.stdout + proc.stderr).split()), dest


@pytest.fixture(autouse=True)
def cached_wheelhouse() -> None:
    assert (WHEELHOUSE / "SHA256SUMS").is_file(), f"{WHEELHOUSE}: build it first (make wheelhouse)"


def test_the_wheelhouse_holds_the_locks_files_and_lists_their_hashes(tmp_path: Path) -> None:
    rc, out, dest = build(tmp_path, LOCK)
    assert rc == 0, out
    hashes = lock_hashes(LOCK.read_text())
    listed = dict(line.split()[::-1] for line in (dest / "SHA256SUMS").read_text().splitlines())
    names = {re.sub(r"_", "-", n.split("-")[0]).lower(): n for n in listed}
    assert set(names) == {*hashes, "kmirror"}
    for name, wheel in names.items():
        if name != "kmirror":
            assert listed[wheel] in hashes[name], wheel


def test_a_file_whose_digest_the_lock_does_not_list_is_refused(tmp_path: Path) -> None:
    text = LOCK.read_text()
    entry = re.search(r"^prometheus-client==.*?(?=^[A-Za-z0-9]|\Z)", text, re.M | re.S)
    assert entry
    tampered = re.sub(r"sha256:[0-9a-f]{4}", "sha256:0000", entry.group(0))
    lock = tmp_path / "tampered.txt"
    lock.write_text(text.replace(entry.group(0), tampered))
    rc, out, dest = build(tmp_path, lock)
    assert rc != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE" in out, out
    assert "prometheus-client==0.26.0" in out or "prometheus_client-" in out, out
    assert not dest.exists()


def test_a_lock_entry_without_a_hash_is_refused(tmp_path: Path) -> None:
    lock = tmp_path / "unhashed.txt"
    lock.write_text(re.sub(r" \\\n\s*--hash=sha256:[0-9a-f]{64}", "", LOCK.read_text()))
    rc, out, dest = build(tmp_path, lock)
    assert rc != 0
    assert f"lock {lock}: confluent-kafka==" in out and "has no --hash=sha256:" in out, out
    assert not dest.exists()


def test_a_lock_that_lacks_a_dependency_of_kmirror_is_refused(tmp_path: Path) -> None:
    lock = tmp_path / "partial.txt"
    lock.write_text(without(LOCK.read_text(), "confluent-kafka"))
    rc, out, dest = build(tmp_path, lock)
    assert rc != 0
    assert f"lock {lock} lacks confluent-kafka, required by kmirror" in out and "run make lock" in out, out
    assert not dest.exists()


@pytest.mark.parametrize(
    ("role", "variable"),
    [
        ("kmirror_worker", "kmirror_worker_requirements"),
        ("kmirror_audit", "kmirror_audit_requirements"),
        ("kmirror_audit", "kmirror_audit_packages"),
    ],
)
def test_pins_without_hashes_are_refused_by_the_roles(tmp_path: Path, role: str, variable: str) -> None:
    play = [
        {
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {variable: ["confluent-kafka==2.16.1"]},
            "tasks": [{"ansible.builtin.include_role": {"name": role, "tasks_from": "build.yml"}}],
        }
    ]
    proc = run_local_play(tmp_path, play, {"ANSIBLE_ROLES_PATH": str(ROLES)})
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0
    assert f"{variable}" in out and "no longer read" in out and "make lock" in out, out
