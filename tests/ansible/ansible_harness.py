"""Paths of the deployment toolkit and a loader for its plugins and modules, shared by the tests/ansible tests
(`from ansible_harness import ...`; the fixtures are in conftest.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"
ROLES = ROOT / "roles"
UNIT_DEFAULTS = {
    "kmirror_user": "kmirror",
    "kmirror_group": "kmirror",
    "kmirror_conf_dir": "/etc/kmirror",
    "kmirror_restart_sec": 10,
    "kmirror_stop_timeout_sec": 60,
    "kmirror_extra_directives": [],
}
"""kmirror@.service.j2's variables as kmirror_service/tasks/main.yml sets them with the roles' defaults
(kmirror_common, kmirror_service)."""


def run_local_play(
    tmp_path: Path, play: list[dict], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The play (JSON, which is YAML, in tmp_path/play.yml) run by ansible-playbook on localhost with this
    Python, no colours, and env added to the environment; the finished process, its output captured."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps(play))
    return subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", str(playbook)],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
            **(env or {}),
        },
    )


def run_role(tmp_path: Path, role: str, variables: dict, *args: str) -> subprocess.CompletedProcess[str]:
    """The role run by ansible-playbook on localhost (connection local, this Python), ``variables`` as extra
    vars (a JSON file: values kept exact), ``args`` added (e.g. --check); results as JSON; output captured."""
    (tmp_path / "play.yml").write_text(
        json.dumps([{"hosts": "localhost", "gather_facts": False, "roles": [role]}])
    )
    (tmp_path / "vars.json").write_text(json.dumps(variables))
    return subprocess.run(
        [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "-e",
            f"@{tmp_path / 'vars.json'}",
            *args,
            str(tmp_path / "play.yml"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "ANSIBLE_ROLES_PATH": str(ROLES),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
        },
    )


def first_failure(out: str) -> tuple[str, str]:
    """The first failure of a run_role output: the task's name and its message."""
    marker = "fatal: [localhost]: FAILED! => "
    start = out.index(marker)
    before = out[:start]
    task = before[before.rindex("TASK [") + len("TASK [") :].split("]", 1)[0]
    return task, json.JSONDecoder().raw_decode(out[start + len(marker) :])[0]["msg"]


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
