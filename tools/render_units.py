#!/usr/bin/env python3
"""Render kmirror's systemd units for a host installed without Ansible (docs/manual-install.md).

The same templates the kmirror_service role installs (templates/kmirror@.service.j2 and
templates/kmirror-instance.conf.j2), with the same filters and the roles' defaults (kmirror_common,
kmirror_service), so a hand-installed host runs exactly the unit an Ansible-managed one runs:

    python3 tools/render_units.py --sources sources.yml --out DIR

writes DIR/kmirror@.service and, per source, DIR/kmirror@<source>.service.d/10-kmirror.conf. sources.yml
is a YAML list of source definitions with the inventory's keys (name, whitelist, blacklist, num_streams,
metrics_port, log_level, ...; inventory.example). Needs Jinja2 and PyYAML (not Ansible).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import types
from pathlib import Path
from types import ModuleType
from typing import Any

import jinja2
import yaml

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "templates"
ROLES = ROOT / "roles"
# The role defaults the templates read (kmirror_service/tasks/main.yml passes these).
COMMON = ("kmirror_common_user", "kmirror_common_group", "kmirror_common_venv", "kmirror_common_config_dir")
SERVICE = (
    "kmirror_service_restart_sec",
    "kmirror_service_stop_timeout_sec",
    "kmirror_service_log_level",
    "kmirror_service_log_format",
    "kmirror_service_metrics_port_base",
    "kmirror_service_metrics_address",
    "kmirror_service_extra_directives",
)


def filter_error() -> type[Exception]:
    """The roles' filters raise Ansible's AnsibleFilterError; without Ansible installed, a ValueError."""
    try:
        import ansible.errors
    except ImportError:
        errors = types.ModuleType("ansible.errors")
        errors.AnsibleFilterError = ValueError  # type: ignore[attr-defined]
        sys.modules.setdefault("ansible", types.ModuleType("ansible"))
        sys.modules["ansible.errors"] = errors
        return ValueError
    return ansible.errors.AnsibleFilterError


def load_filters(path: Path) -> ModuleType:
    """A role's filter plugin module (loaded outside Ansible)."""
    filter_error()
    spec = importlib.util.spec_from_file_location(f"kmirror_render_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def role_defaults(env: jinja2.Environment) -> dict[str, Any]:
    """The defaults of kmirror_common and kmirror_service the templates need (their templating resolved)."""
    raw: dict[str, Any] = {}
    for role in ("kmirror_common", "kmirror_service"):
        raw.update(yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text()) or {})
    out: dict[str, Any] = {}
    for key in (*COMMON, "kmirror_common_install_dir", *SERVICE):
        value = raw[key]
        for _ in range(5):  # a default may name another (kmirror_common_venv: "{{ ..._install_dir }}/venv")
            if not (isinstance(value, str) and "{{" in value):
                break
            value = env.from_string(value).render(**raw)
        out[key] = value
    return out


def render(sources: list[dict[str, Any]], out: Path) -> list[Path]:
    env = jinja2.Environment(
        # Ansible's template module: trim_blocks=True, lstrip_blocks=False, keep_trailing_newline=True.
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(
        load_filters(ROLES / "kmirror_common/filter_plugins/kmirror_escape.py").FilterModule().filters()
    )
    d = role_defaults(env)
    ports = load_filters(ROLES / "kmirror_service/filter_plugins/kmirror_service.py").kmirror_metrics_ports(
        sources, d["kmirror_service_metrics_port_base"]
    )
    written = []
    out.mkdir(parents=True, exist_ok=True)
    unit = out / "kmirror@.service"
    unit.write_text(
        env.get_template("kmirror@.service.j2").render(
            kmirror_user=d["kmirror_common_user"],
            kmirror_group=d["kmirror_common_group"],
            kmirror_conf_dir=d["kmirror_common_config_dir"],
            kmirror_restart_sec=d["kmirror_service_restart_sec"],
            kmirror_stop_timeout_sec=d["kmirror_service_stop_timeout_sec"],
            kmirror_extra_directives=d["kmirror_service_extra_directives"],
        )
    )
    written.append(unit)
    for source in sources:
        dropin = out / f"kmirror@{source['name']}.service.d" / "10-kmirror.conf"
        dropin.parent.mkdir(parents=True, exist_ok=True)
        dropin.write_text(
            env.get_template("kmirror-instance.conf.j2").render(
                kmirror_source=source,
                kmirror_bin=f"{d['kmirror_common_venv']}/bin/kmirror",
                kmirror_conf_dir=d["kmirror_common_config_dir"],
                kmirror_log_level=d["kmirror_service_log_level"],
                kmirror_log_format=d["kmirror_service_log_format"],
                kmirror_metrics_port=ports[str(source["name"])],
                kmirror_metrics_address=d["kmirror_service_metrics_address"],
            )
        )
        written.append(dropin)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", required=True, type=Path, help="YAML list of source definitions")
    ap.add_argument("--out", required=True, type=Path, help="directory to write the units into")
    args = ap.parse_args(argv)
    try:
        sources = yaml.safe_load(args.sources.read_text())
    except (OSError, yaml.YAMLError) as exc:
        print(f"{args.sources}: {exc}; give a YAML list of source definitions", file=sys.stderr)
        return 2
    if not isinstance(sources, list) or not all(isinstance(s, dict) and s.get("name") for s in sources):
        print(
            f"{args.sources}: not a list of source definitions with a name each (see inventory.example)",
            file=sys.stderr,
        )
        return 2
    refused = filter_error()
    try:
        for path in render(sources, args.out):
            print(path)
    except (ValueError, refused) as exc:
        # a filter's refusal (a metrics port twice, a value no quoting can carry)
        print(f"{args.sources}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
