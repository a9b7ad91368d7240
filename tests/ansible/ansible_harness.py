"""Paths of the deployment toolkit and a loader for its plugins and modules, shared by the tests/ansible tests
(`from ansible_harness import ...`; the fixtures are in conftest.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"
ROLES = ROOT / "roles"


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
