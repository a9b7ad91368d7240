"""kmirror_worker keeps kmirror_worker_keep_versions versions on a host (tasks/prune_versions.yml): the
current one whatever its age, then the most recently installed others; a second run removes nothing."""

from __future__ import annotations

import os
from pathlib import Path

from ansible_harness import ROLES, run_local_play


def prune(tmp_path: Path, versions: Path, current: str, keep: int) -> tuple[int, str]:
    play = [
        {
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {
                "kmirror_worker_versions_dir": str(versions),
                "kmirror_worker_version_dir": str(versions / current),
                "kmirror_worker_keep_versions": keep,
            },
            "tasks": [
                {"ansible.builtin.include_tasks": str(ROLES / "kmirror_worker/tasks/prune_versions.yml")}
            ],
        }
    ]
    proc = run_local_play(tmp_path, play)
    return proc.returncode, proc.stdout + proc.stderr


def test_keeps_the_current_and_the_newest_others(tmp_path):
    versions = tmp_path / "versions"
    for age, name in enumerate(["0.5.0", "0.4.0", "0.3.0", "0.2.0", "0.1.0"]):  # 0.5.0 installed last
        (versions / name / "venv").mkdir(parents=True)
        t = 1_700_000_000 - age * 3600
        os.utime(versions / name, (t, t))
    rc, out = prune(tmp_path, versions, current="0.2.0", keep=3)  # rolled back to an old one
    assert rc == 0, out
    assert sorted(p.name for p in versions.iterdir()) == ["0.2.0", "0.4.0", "0.5.0"]
    rc, out = prune(tmp_path, versions, current="0.2.0", keep=3)
    assert rc == 0 and "changed=0" in out, out
    rc, out = prune(tmp_path, versions, current="0.5.0", keep=1)
    assert rc == 0, out
    assert sorted(p.name for p in versions.iterdir()) == ["0.5.0"]
