"""Generate what comes from cluster_definition.yml (the one description of a cluster definition).

    python roles/kmirror_config/files/cluster_definition.py           # rewrite the generated parts
    python roles/kmirror_config/files/cluster_definition.py --check   # exit 1 when one is stale (make lint)

Writes, between ``# BEGIN generated: <region>`` and ``# END generated: <region>`` lines:
  - roles/kmirror_config/meta/argument_specs.yml: the cluster options (regions ``target cluster keys``,
    ``source cluster keys``);
  - terraform/modules/inventory/variables.tf: the validations of var.target_cluster and of every item of
    var.source_clusters (regions ``target_cluster checks``, ``source_clusters checks``), from one list;
and the whole terraform/modules/inventory/cluster_definition.tf (the choices Terraform validates, and the
secret-key regex of :mod:`kmirror.config.secrets`). The filter plugin reads the description itself at
run time.
Importable: :func:`argument_spec_options`, :func:`terraform_validations`, :func:`terraform_locals`,
:func:`generated`.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
DEFINITION = Path(__file__).with_suffix(".yml")
ARGUMENT_SPECS = ROOT / "roles/kmirror_config/meta/argument_specs.yml"
TERRAFORM_FILE = ROOT / "terraform/modules/inventory/cluster_definition.tf"
TERRAFORM_VARIABLES = ROOT / "terraform/modules/inventory/variables.tf"
# Terraform variable -> the collection its validations loop over as `c`.
TERRAFORM_CLUSTERS = {"target_cluster": "[var.target_cluster]", "source_clusters": "var.source_clusters"}
TERRAFORM_PROPERTIES = {"target_cluster": "producer_properties", "source_clusters": "consumer_properties"}
SIDES = ("target", "source")
# Fields of the description that are not Ansible argument spec fields.
OWN_FIELDS = ("key", "sides", "per_side", "pattern")
MARKER_RE = re.compile(r"^(?P<indent> *)# BEGIN generated: (?P<region>\w+ (cluster keys|checks))\b.*$")
COMMAND = "make cluster-definition"


def load(path: Path = DEFINITION) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def side_keys(definition: dict, side: str) -> list[dict]:
    """The keys of one side, in order, with that side's overrides applied."""
    return [
        {**e, **e.get("per_side", {}).get(side, {})}
        for e in definition["keys"]
        if side in e.get("sides", SIDES)
    ]


def _description_first(item: tuple[str, Any]) -> bool:
    return item[0] != "description"


def argument_spec_options(definition: dict, side: str) -> dict[str, Any]:
    """The ``options`` of kmirror_target_cluster (side "target") or of a kmirror_source_clusters item."""
    return {
        e["key"]: {k: v for k, v in sorted(e.items(), key=_description_first) if k not in OWN_FIELDS}
        for e in side_keys(definition, side)
    }


class _Dumper(yaml.SafeDumper):
    """Block style with indented sequences (as the rest of the argument specs and yamllint want)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def options_yaml(definition: dict, side: str, indent: int) -> str:
    text = yaml.dump(
        argument_spec_options(definition, side),
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        width=110 - indent,
        allow_unicode=True,
    )
    return "".join(" " * indent + line if line.strip() else line for line in text.splitlines(keepends=True))


def region_text(definition: dict, region: str, indent: int) -> str:
    side, _, what = region.partition(" ")
    if what == "cluster keys" and side in SIDES:
        return options_yaml(definition, side, indent)
    if what == "checks" and side in TERRAFORM_CLUSTERS:
        return terraform_validations(definition, side, indent)
    raise ValueError(f"unknown generated region {region!r}")


def with_regions(definition: dict, path: Path, current: str) -> str:
    """``current`` (the text of ``path``) with every generated region replaced."""
    out: list[str] = []
    lines = current.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        m = MARKER_RE.match(line.rstrip("\n"))
        if not m:
            continue
        end = f"# END generated: {m['region']}"
        while i < len(lines) and lines[i].strip() != end:
            i += 1
        if i == len(lines):
            raise SystemExit(f"{path}: no '{end}' line after its BEGIN line; restore it")
        out.append(region_text(definition, m["region"], len(m["indent"])))
    return "".join(out)


def terraform_validations(definition: dict, variable: str, indent: int = 2) -> str:
    """One validation block per terraform_checks item, over every cluster of ``variable``."""
    pad = " " * indent
    clusters = TERRAFORM_CLUSTERS[variable]
    out = []
    for check in definition["terraform_checks"]:
        message = check["message"].replace("{properties}", TERRAFORM_PROPERTIES[variable])
        message = variable + (message if message.startswith(".") else ": " + message)
        out.append(
            f"{pad}validation {{\n"
            f"{pad}  condition     = alltrue([for c in {clusters} : ({check['condition']})])\n"
            f"{pad}  error_message = {_hcl(message)}\n"
            f"{pad}}}\n"
        )
    return "".join(out)


def _hcl(value: Any) -> str:
    # JSON strings and lists of strings are valid HCL (no ${ or %{ sequences in these values).
    text = json.dumps(value, separators=(", ", ": "))
    assert "${" not in text and "%{" not in text
    return text


def terraform_locals(definition: dict) -> str:
    from kmirror.config.secrets import key_regex

    choices = {e["key"]: e["choices"] for e in definition["keys"] if "choices" in e}
    password_mechanisms = next(
        c["when"]["sasl_mechanism"]["in"]
        for c in definition["checks"]
        if c["rule"] == "required_all" and "sasl_password" in c["keys"]
    )
    values = {
        "cluster_security_protocols": choices["security_protocol"],
        "cluster_sasl_mechanisms": choices["sasl_mechanism"],
        "cluster_password_mechanisms": password_mechanisms,
        "cluster_log_levels": choices["log_level"],
        "secret_key_regex": key_regex(),
    }
    expressions = {k: _hcl(v) for k, v in values.items()} | definition.get("terraform_locals", {})
    width = max(len(k) for k in expressions)
    body = "".join(f"  {k.ljust(width)} = {v}\n" for k, v in expressions.items())
    return (
        f"# Generated by `{COMMAND}` from roles/kmirror_config/files/cluster_definition.yml and\n"
        "# kmirror.config.secrets (worker/src/kmirror/config/secrets.py): do not edit, edit those and "
        "regenerate.\n"
        f"locals {{\n{body}}}\n"
    )


def generated(definition: dict | None = None) -> dict[Path, str]:
    """Every generated file and its expected content."""
    d = definition or load()
    out = {f: with_regions(d, f, f.read_text("utf-8")) for f in (ARGUMENT_SPECS, TERRAFORM_VARIABLES)}
    out[TERRAFORM_FILE] = terraform_locals(d)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a generated part is stale")
    args = parser.parse_args(argv)
    stale = 0
    for path, text in generated().items():
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current == text:
            continue
        rel = path.relative_to(ROOT)
        if args.check:
            diff = difflib.unified_diff(
                current.splitlines(keepends=True), text.splitlines(keepends=True), str(rel), f"{rel} (new)"
            )
            sys.stdout.writelines(diff)
            print(f"{rel} is stale: run {COMMAND}")
            stale = 1
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {rel}")
    return stale


if __name__ == "__main__":
    sys.exit(main())
