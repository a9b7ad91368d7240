"""The variable validations of the AWS module and env, executed offline.

Their own directories cannot be initialised here (the hashicorp/aws plugin comes from the registry), but
their variables.tf files refer to no provider: each is copied alone into a scratch configuration and put
through `terraform test` there (plan only), with a valid set of values (envs/aws: its
terraform.tfvars.example) and one run per bad value that must be refused (expect_failures)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from tfcli import TERRAFORM_DIR, blocks, load, ok, terraform

GOOD_BROKERS = [
    {"name": "target", "cidr_blocks": ["10.0.10.0/24"], "ports": [9093]},
    {"name": "east", "cidr_blocks": ["172.20.0.0/22", "fd00:20::/64"], "ports": [9093, 9094]},
]
# config dir -> (valid values, var file with valid values, [(case, variable, bad values)])
CASES: dict[str, tuple[dict[str, Any], str | None, list[tuple[str, str, dict[str, Any]]]]] = {
    "modules/aws-mirror-hosts": (
        {
            "name": "kmirror-prod",
            "vpc_id": "vpc-0123456789abcdef0",
            "subnet_ids": ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0bbbbbbbbbbbbbbb2"],
            # Private blocks of any width, narrow public ones (an office, a bastion): accepted.
            "operator_cidr_blocks": ["10.0.250.0/24", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                     "203.0.113.7/32", "198.51.0.0/16", "fd00:1::/64", "fc00::/7",
                                     "2001:db8:1::/48"],
            "broker_egress": GOOD_BROKERS,
            "extra_egress": [{"description": "KDC", "cidr_blocks": ["10.0.5.0/24"], "protocol": "udp",
                              "from_port": 88, "to_port": 88}],
        },
        None,
        [
            ("upper_case_name", "name", {"name": "KMirror"}),
            ("name_too_long_for_iam_prefixes", "name", {"name": "k" * 38}),
            ("zero_instances", "instance_count", {"instance_count": 0}),
            ("fractional_instances", "instance_count", {"instance_count": 1.5}),
            ("no_vpc_id", "vpc_id", {"vpc_id": "10.0.0.0/16"}),
            ("no_subnets", "subnet_ids", {"subnet_ids": []}),
            ("not_a_subnet_id", "subnet_ids", {"subnet_ids": ["10.0.1.0/24"]}),
            ("repeated_subnet", "subnet_ids", {"subnet_ids": ["subnet-1", "subnet-1"]}),
            ("unknown_placement", "placement_strategy", {"placement_strategy": "pack"}),
            ("tiny_root_volume", "root_volume_size", {"root_volume_size": 4}),
            ("zero_hop_limit", "metadata_hop_limit", {"metadata_hop_limit": 0}),
            ("ssh_from_the_internet", "operator_cidr_blocks", {"operator_cidr_blocks": ["0.0.0.0/0"]}),
            ("ssh_from_the_internet_v6", "operator_cidr_blocks", {"operator_cidr_blocks": ["::/0"]}),
            # The whole internet in two halves, spelt differently, or a wide public block: by address range.
            ("ssh_from_two_halves", "operator_cidr_blocks",
             {"operator_cidr_blocks": ["0.0.0.0/1", "128.0.0.0/1"]}),
            ("ssh_from_a_host_bits_spelling", "operator_cidr_blocks",
             {"operator_cidr_blocks": ["10.1.2.3/0"]}),
            ("ssh_from_a_wide_public_block", "operator_cidr_blocks", {"operator_cidr_blocks": ["8.0.0.0/7"]}),
            ("ssh_from_a_public_block_next_to_private", "operator_cidr_blocks",
             {"operator_cidr_blocks": ["172.0.0.0/12"]}),
            ("ssh_from_half_the_v6_internet", "operator_cidr_blocks", {"operator_cidr_blocks": ["8000::/1"]}),
            ("ssh_from_a_wide_public_v6_block", "operator_cidr_blocks",
             {"operator_cidr_blocks": ["2001:db8::/32"]}),
            ("no_operator_network", "operator_cidr_blocks", {"operator_cidr_blocks": []}),
            ("not_a_cidr", "operator_cidr_blocks", {"operator_cidr_blocks": ["10.0.250.1"]}),
            ("only_one_cluster", "broker_egress", {"broker_egress": GOOD_BROKERS[:1]}),
            ("duplicate_cluster", "broker_egress", {"broker_egress": [GOOD_BROKERS[0], GOOD_BROKERS[0]]}),
            ("brokers_anywhere", "broker_egress",
             {"broker_egress": [GOOD_BROKERS[0], {**GOOD_BROKERS[1], "cidr_blocks": ["0.0.0.0/0"]}]}),
            ("brokers_anywhere_in_halves", "broker_egress",
             {"broker_egress": [GOOD_BROKERS[0],
                                {**GOOD_BROKERS[1], "cidr_blocks": ["0.0.0.0/1", "128.0.0.0/1"]}]}),
            ("broker_port_out_of_range", "broker_egress",
             {"broker_egress": [GOOD_BROKERS[0], {**GOOD_BROKERS[1], "ports": [70000]}]}),
            ("broker_without_ports", "broker_egress",
             {"broker_egress": [GOOD_BROKERS[0], {**GOOD_BROKERS[1], "ports": []}]}),
            ("icmp_egress", "extra_egress", {"extra_egress": [
                {"description": "ping", "cidr_blocks": ["10.0.0.0/8"], "protocol": "icmp", "from_port": 0,
                 "to_port": 0}]}),
            ("reversed_port_range", "extra_egress", {"extra_egress": [
                {"description": "x", "cidr_blocks": ["10.0.0.0/8"], "from_port": 90, "to_port": 80}]}),
            ("extra_egress_bad_cidr", "extra_egress", {"extra_egress": [
                {"description": "x", "cidr_blocks": ["nowhere"], "from_port": 80, "to_port": 80}]}),
        ],
    ),
    "envs/aws": (
        {},
        "terraform.tfvars.example",
        [
            ("cluster_without_broker_blocks", "broker_cidr_blocks",
             {"broker_cidr_blocks": {"target": ["10.0.10.0/24"]}}),
            ("ports_for_an_unknown_cluster", "extra_broker_ports", {"extra_broker_ports": {"north": [9095]}}),
        ],
    ),
}


def hcl(value: Any) -> str:
    # JSON values are HCL expressions (objects may use ':' between key and value).
    return json.dumps(value)


def tftest(valid: dict[str, Any], cases: list[tuple[str, str, dict[str, Any]]]) -> str:
    out = ["variables {", *(f"  {k} = {hcl(v)}" for k, v in valid.items()), "}", "",
           'run "valid_values_are_accepted" {', "  command = plan", "}"]
    for case, var, bad in cases:
        out += ["", f'run "refuses_{case}" {{', "  command = plan", "  variables {",
                *(f"    {k} = {hcl(v)}" for k, v in bad.items()), "  }",
                f"  expect_failures = [var.{var}]", "}"]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("d", list(CASES))
def test_every_validation_has_a_case(d: str) -> None:
    validated = {n for n, v in blocks(TERRAFORM_DIR / d, "variable").items() if v.get("validation")}
    assert validated, d
    assert validated <= {var for _c, var, _b in CASES[d][2]}, f"{d}: no bad-value case for some variable"


@pytest.mark.parametrize("d", list(CASES))
def test_validations_refuse_bad_values(d: str, tmp_path: Path) -> None:
    valid, var_file, cases = CASES[d]
    scratch = tmp_path / "config"
    (scratch / "tests").mkdir(parents=True)
    shutil.copy(TERRAFORM_DIR / d / "variables.tf", scratch / "variables.tf")
    assert set(load(scratch / "variables.tf")) == {"variable"}, f"{d}/variables.tf must hold variables only"
    (scratch / "versions.tf").write_text('terraform {\n  required_version = ">= 1.9"\n}\n')
    (scratch / "tests" / "variables.tftest.hcl").write_text(tftest(valid, cases))
    data_dir = tmp_path / "tfdata"
    ok(terraform("init", "-backend=false", "-input=false", "-no-color", cwd=scratch, data_dir=data_dir))
    extra = [f"-var-file={TERRAFORM_DIR / d / var_file}"] if var_file else []
    proc = terraform("test", "-no-color", *extra, cwd=scratch, data_dir=data_dir, timeout=600)
    passed = set(re.findall(r'run "([^"]+)"\.\.\. pass', proc.stdout))
    expected = {"valid_values_are_accepted", *(f"refuses_{c}" for c, _v, _b in cases)}
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert passed == expected, f"not passed: {sorted(expected - passed)}\n{proc.stdout}"
