"""Providers from a registry are pinned (docs/security.md, Supply chain): each root configuration (envs/*)
pins every registry provider it needs to one release (`= X.Y.Z`), each module it calls allows that release,
and a committed .terraform.lock.hcl (what `terraform providers lock` writes where the registry is reachable)
names that release with its zh: hashes. This machine cannot reach the registry, so none is committed yet and
the last check has nothing to read; the first one committed is held to the pin."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tfcli import BUILTIN_SOURCES, CONFIG_DIRS, blocks, load, rel

ENV_DIRS = [d for d in CONFIG_DIRS if d.parent.name == "envs"]
_CONSTRAINT = re.compile(r"^\s*(=|!=|>=|<=|>|<|~>)?\s*(\d+(?:\.\d+)*)\s*$")


def provider_specs(d: Path) -> dict[str, dict[str, Any]]:
    """Provider name -> its required_providers entry (source, version) in D."""
    out: dict[str, dict[str, Any]] = {}
    for f in sorted(d.glob("*.tf")):
        for tf in load(f).get("terraform", []):
            for rp in tf.get("required_providers", []):
                out.update({name: spec for name, spec in rp.items() if isinstance(spec, dict)})
    return out


def registry_providers(d: Path) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in provider_specs(d).items() if s["source"] not in BUILTIN_SOURCES}


def version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def allows(constraints: str, version: str) -> bool:
    """Whether Terraform's version CONSTRAINTS (comma-separated) allow VERSION."""
    v = version_tuple(version)
    for part in constraints.split(","):
        m = _CONSTRAINT.match(part)
        assert m, f"cannot read the version constraint {part!r}"
        op, bound = m.group(1) or "=", version_tuple(m.group(2))
        if op == "~>":
            upper = (*bound[:-2], bound[-2] + 1) if len(bound) > 1 else (bound[0] + 1,)
            ok = bound <= v < upper
        else:
            ok = {
                "=": v == bound,
                "!=": v != bound,
                ">=": v >= bound,
                "<=": v <= bound,
                ">": v > bound,
                "<": v < bound,
            }[op]
        if not ok:
            return False
    return True


def pinned(d: Path) -> dict[str, str]:
    """Registry source -> the release D pins it to."""
    out = {}
    for name, spec in registry_providers(d).items():
        m = re.fullmatch(r"=\s*(\d+\.\d+\.\d+)", str(spec.get("version", "")).strip())
        assert m, f"{rel(d)}: {name} ({spec['source']}) is {spec.get('version')!r}, not one release (= X.Y.Z)"
        out[spec["source"]] = m.group(1)
    return out


def test_the_aws_env_needs_a_registry_provider() -> None:
    """The checks below have something to check: envs/aws needs hashicorp/aws."""
    assert any(s["source"] == "hashicorp/aws" for d in ENV_DIRS for s in registry_providers(d).values())


@pytest.mark.parametrize("d", ENV_DIRS, ids=rel)
def test_each_root_pins_its_registry_providers_to_one_release(d: Path) -> None:
    pinned(d)


@pytest.mark.parametrize("d", ENV_DIRS, ids=rel)
def test_the_modules_a_root_calls_allow_its_releases(d: Path) -> None:
    releases = pinned(d)
    for call, body in blocks(d, "module").items():
        module = (d / body["source"]).resolve()
        for name, spec in registry_providers(module).items():
            assert spec["source"] in releases, f"{rel(d)} calls {call}, which needs {spec['source']}: pin it"
            assert allows(str(spec["version"]), releases[spec["source"]]), (
                f"{rel(module)}: {name} {spec['version']!r} excludes {rel(d)}'s {releases[spec['source']]}"
            )


def lock_problems(lock: Path, releases: dict[str, str]) -> list[str]:
    """What is wrong with the Terraform lock file LOCK for the pinned RELEASES (source: version)."""
    locked = {label: body for p in load(lock).get("provider", []) for label, body in p.items()}
    problems = []
    for source, release in releases.items():
        entry = next((v for k, v in locked.items() if k.endswith(f"/{source}")), None)
        if entry is None:
            problems.append(f"{lock.name}: no entry for {source}")
        elif entry["version"] != release:
            problems.append(f"{lock.name}: {source} {entry['version']}, the configuration pins {release}")
        elif not any(str(h).startswith("zh:") for h in entry.get("hashes", [])):
            problems.append(f"{lock.name}: {source} has no zh: hashes")
    return problems


@pytest.mark.parametrize("d", ENV_DIRS, ids=rel)
def test_a_committed_lock_file_names_the_pinned_release_with_hashes(d: Path) -> None:
    lock = d / ".terraform.lock.hcl"
    if lock.exists():  # none could be written here (no registry); docs/terraform.md says how to write one
        assert lock_problems(lock, pinned(d)) == []


def test_the_lock_file_check(tmp_path: Path) -> None:
    lock = tmp_path / ".terraform.lock.hcl"
    entry = 'provider "registry.terraform.io/hashicorp/aws" {{\n  version = "{v}"\n  hashes = [{h}]\n}}\n'
    lock.write_text(entry.format(v="5.100.0", h='"h1:abc=", "zh:0123"'))
    assert lock_problems(lock, {"hashicorp/aws": "5.100.0"}) == []
    assert lock_problems(lock, {"hashicorp/aws": "5.99.0"}) == [
        ".terraform.lock.hcl: hashicorp/aws 5.100.0, the configuration pins 5.99.0"
    ]
    lock.write_text(entry.format(v="5.100.0", h='"h1:abc="'))
    assert lock_problems(lock, {"hashicorp/aws": "5.100.0"}) == [
        ".terraform.lock.hcl: hashicorp/aws has no zh: hashes"
    ]


def test_the_constraint_reader() -> None:
    assert allows(">= 5.0, < 6.0", "5.100.0") and not allows(">= 5.0, < 6.0", "6.0.0")
    assert allows("~> 5.40", "5.99.1") and not allows("~> 5.40.0", "5.41.0")
    assert allows("= 5.100.0", "5.100.0") and not allows("5.100.0", "5.100.1")
