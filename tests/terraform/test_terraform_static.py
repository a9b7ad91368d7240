"""The Terraform code without infrastructure: fmt, init, validate and `terraform test` wherever only built-in
providers are used (offline), and structural checks on every module and environment (descriptions, types,
module calls against the called modules' variables and outputs, the AWS hosts' network and disk posture).

The AWS module and env need the hashicorp/aws provider plugin for init/validate/plan/test; the registry is
out of reach here, so they get fmt, these structural tests and checkov (test_terraform_checkov.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tfcli import CONFIG_DIRS, ROOT, TERRAFORM_DIR, blocks, expr, load, ok, rel, terraform, uses_builtins_only

OFFLINE_DIRS = [d for d in CONFIG_DIRS if uses_builtins_only(d)]
ENV_DIRS = [d for d in CONFIG_DIRS if d.parent.name == "envs"]
META_ARGUMENTS = {"source", "version", "count", "for_each", "providers", "depends_on"}


def test_the_configurations_are_known() -> None:
    # A new module or env must be sorted in here on purpose: offline ones get the full terraform treatment.
    assert [rel(d) for d in CONFIG_DIRS] == [
        "envs/aws", "envs/local", "modules/aws-mirror-hosts", "modules/inventory", "modules/inventory-file"]
    assert [rel(d) for d in OFFLINE_DIRS] == ["envs/local", "modules/inventory", "modules/inventory-file"]


def test_fmt_check(tmp_path: Path) -> None:
    # .tf, .tfvars and .tftest.hcl files of every module and env.
    proc = terraform("fmt", "-check", "-recursive", "-diff", "-no-color", cwd=TERRAFORM_DIR,
                     data_dir=tmp_path)
    assert proc.returncode == 0, f"terraform fmt would change:\n{proc.stdout}{proc.stderr}"


@pytest.fixture(params=OFFLINE_DIRS, ids=rel)
def initialised(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path]:
    d: Path = request.param
    data_dir = tmp_path / "tfdata"
    ok(terraform("init", "-backend=false", "-input=false", "-no-color", cwd=d, data_dir=data_dir))
    return d, data_dir


def test_validate(initialised: tuple[Path, Path]) -> None:
    d, data_dir = initialised
    proc = terraform("validate", "-json", cwd=d, data_dir=data_dir)
    result = json.loads(proc.stdout)
    assert proc.returncode == 0 and result["valid"], proc.stdout
    assert result["warning_count"] == 0, result["diagnostics"]


def test_terraform_test(initialised: tuple[Path, Path]) -> None:
    d, data_dir = initialised
    runs = blocks(d / "tests", "run", "*.tftest.hcl")
    assert len(runs) >= 5, f"{rel(d)}: too few terraform test runs"
    proc = terraform("test", "-no-color", cwd=d, data_dir=data_dir, timeout=600)
    passed = set(re.findall(r'run "([^"]+)"\.\.\. pass', proc.stdout))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert passed == set(runs), f"runs not passed: {sorted(set(runs) - passed)}\n{proc.stdout}"
    assert f"{len(runs)} passed, 0 failed" in proc.stdout


@pytest.mark.parametrize("d", OFFLINE_DIRS, ids=rel)
def test_every_validation_has_an_expect_failures_run(d: Path) -> None:
    validated = {name for name, v in blocks(d, "variable").items() if v.get("validation")}
    runs = blocks(d / "tests", "run", "*.tftest.hcl")
    refused = {expr(e).removeprefix("var.") for r in runs.values() for e in r.get("expect_failures", [])}
    assert validated, f"{rel(d)} validates no variable"
    assert validated <= refused, f"{rel(d)}: no expect_failures run for {sorted(validated - refused)}"


@pytest.mark.parametrize("d", CONFIG_DIRS, ids=rel)
def test_every_variable_and_output_is_described(d: Path) -> None:
    variables, outputs = blocks(d, "variable"), blocks(d, "output")
    assert variables and outputs
    for name, v in variables.items():
        assert len(v.get("description", "").strip()) >= 10, f"{rel(d)}: variable {name} has no description"
        assert "type" in v, f"{rel(d)}: variable {name} has no type"
        for check in v.get("validation", []):
            assert check.get("error_message", "").strip().endswith("."), f"{rel(d)}: {name}: error_message"
    for name, o in outputs.items():
        assert len(o.get("description", "").strip()) >= 10, f"{rel(d)}: output {name} has no description"


@pytest.mark.parametrize("d", CONFIG_DIRS, ids=rel)
def test_every_config_has_a_readme_and_versions(d: Path) -> None:
    readme = (d / "README.md").read_text()
    assert "<!-- BEGIN_TF_DOCS -->" in readme and "```" in readme, f"{rel(d)}: README without tables or usage"
    assert "required_version" in (d / "versions.tf").read_text(), f"{rel(d)}: no required_version"


def test_readme_tables_are_current() -> None:
    proc = subprocess.run([sys.executable, str(TERRAFORM_DIR / "bin" / "tfdocs"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("d", ENV_DIRS, ids=rel)
def test_module_calls_match_the_modules(d: Path) -> None:
    """What `validate` would say about the module calls, for the envs whose provider cannot be installed."""
    calls = blocks(d, "module")
    assert calls
    # moved blocks name resources inside a module (module.X.<type>.<name>), not its outputs.
    text = re.sub(r"(?ms)^moved \{.*?^\}", "", "".join(f.read_text() for f in d.glob("*.tf")))
    for name, call in calls.items():
        mod = (d / call["source"]).resolve()
        variables, outputs = blocks(mod, "variable"), blocks(mod, "output")
        given = set(call) - META_ARGUMENTS
        unknown = sorted(given - set(variables))
        assert not unknown, f"{rel(d)}: module {name}: unknown arguments {unknown}"
        required = {v for v, body in variables.items() if "default" not in body}
        assert required <= given, f"{rel(d)}: module {name}: missing arguments {sorted(required - given)}"
        used = set(re.findall(rf"\bmodule\.{name}\.([A-Za-z0-9_]+)", text))
        assert used <= set(outputs), f"{rel(d)}: module {name}: no such outputs {sorted(used - set(outputs))}"


def test_aws_hosts_allow_only_what_the_mirror_needs() -> None:
    d = TERRAFORM_DIR / "modules" / "aws-mirror-hosts"
    resources = {f"{kind}.{name}": body for f in d.glob("*.tf") for item in load(f).get("resource", [])
                 for kind, by_name in item.items() for name, body in by_name.items()}
    # No inline rules on the group (Terraform then drops AWS's allow-all egress rule); one SSH rule kind in.
    group = resources["aws_security_group.this"]
    assert "ingress" not in group and "egress" not in group
    ingress = {k: v for k, v in resources.items() if k.startswith("aws_vpc_security_group_ingress_rule.")}
    assert list(ingress) == ["aws_vpc_security_group_ingress_rule.ssh"]
    ssh = ingress["aws_vpc_security_group_ingress_rule.ssh"]
    assert ssh["ip_protocol"] == "tcp"
    assert expr(ssh["from_port"]) == expr(ssh["to_port"]) == "var.ssh_port"
    assert expr(ssh["for_each"]) == "local.ssh_ingress_rules"
    egress = sorted(k.split(".")[1] for k in resources if k.startswith("aws_vpc_security_group_egress_rule."))
    assert egress == ["brokers", "extra"]
    assert resources["aws_vpc_security_group_egress_rule.brokers"]["ip_protocol"] == "tcp"
    # IMDSv2 only, encrypted root volumes, no public address unless asked.
    instance = resources["aws_instance.this"]
    assert instance["metadata_options"][0]["http_tokens"] == "required"
    assert instance["root_block_device"][0]["encrypted"] is True
    variables = blocks(d, "variable")
    assert variables["associate_public_ip_address"]["default"] is False
    assert variables["metadata_hop_limit"]["default"] == 1
    operator_checks = " ".join(c["condition"] for c in variables["operator_cidr_blocks"]["validation"])
    # By address range (prefix length and network address), not by spelling: the cases that must be refused
    # (0.0.0.0/1 with 128.0.0.0/1, ...) are in test_terraform_aws_variables.py.
    assert "cidrhost(c, 0)" in operator_checks and 'split("/", c)[1]' in operator_checks
    assert '"0.0.0.0/0"' not in operator_checks


def test_the_tools_are_ruff_clean() -> None:
    # terraform/bin/* have no .py suffix, so the repository-wide `ruff check <dirs>` does not pick them up.
    ruff = Path(sys.executable).parent / "ruff"
    proc = subprocess.run([str(ruff), "check", *map(str, sorted((TERRAFORM_DIR / "bin").iterdir()))],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
