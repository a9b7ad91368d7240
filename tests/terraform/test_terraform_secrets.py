"""No secret through Terraform: a literal sasl.jaas.config (or any key the secret rule of
kmirror.config.secrets names) in the inventory module's input is refused by `terraform plan` without the
plan showing it, and a Vault reference in its place is what the plan and the inventory carry."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tfcli import TERRAFORM_DIR, ok, terraform

SECRET = "HUNTER2-jaas-pw"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{SECRET}";'

MAIN_TF = """
variable "target_cluster" { type = any }
variable "source_clusters" { type = any }
variable "all_vars" { type = any }

module "inventory" {
  source          = "%(source)s"
  workers         = [{ name = "mirror-1", address = "10.0.1.10" }]
  target_cluster  = var.target_cluster
  source_clusters = var.source_clusters
  all_vars        = var.all_vars
}

output "inventory_yaml" {
  value = module.inventory.inventory_yaml
}
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("secrets")
    source = os.path.relpath(TERRAFORM_DIR / "modules" / "inventory", work)
    (work / "main.tf").write_text(MAIN_TF % {"source": source})
    data_dir = work / "tfdata"
    ok(terraform("init", "-backend=false", "-input=false", "-no-color", cwd=work, data_dir=data_dir))
    return work, data_dir


def plan(config: tuple[Path, Path], name: str, **over: object):
    work, data_dir = config
    values = {
        "target_cluster": {"bootstrap_servers": "t1:9093"},
        "source_clusters": [{"name": "east", "bootstrap_servers": "e1:9093", "whitelist": ".*"}],
        "all_vars": {},
        **over,
    }
    var_file = work / f"{name}.tfvars.json"
    var_file.write_text(json.dumps(values))
    args = ("plan", "-input=false", "-no-color", f"-var-file={var_file}")
    return terraform(*args, cwd=work, data_dir=data_dir)


@pytest.mark.parametrize(
    ("key", "where"),
    [
        ("sasl.jaas.config", "consumer"),
        ("sasl.jaas.config", "producer"),
        ("sasl.oauthbearer.client.secret", "producer"),
        ("sasl.oauthbearer.assertion.private.key.passphrase", "consumer"),
    ],
)
def test_a_literal_secret_is_refused_and_not_shown(config, key, where):
    cluster = {"consumer": "source_clusters", "producer": "target_cluster"}[where]
    over: dict[str, object] = (
        {
            "source_clusters": [
                {
                    "name": "east",
                    "bootstrap_servers": "e1:9093",
                    "whitelist": ".*",
                    "consumer_properties": {key: JAAS},
                }
            ]
        }
        if where == "consumer"
        else {"target_cluster": {"bootstrap_servers": "t1:9093", "producer_properties": {key: JAAS}}}
    )
    proc = plan(config, f"literal-{where}", **over)
    assert proc.returncode != 0
    assert f"{cluster}.{where}_properties: a secret" in " ".join((proc.stdout + proc.stderr).split())
    assert SECRET not in proc.stdout + proc.stderr


def test_a_literal_secret_in_all_vars_is_refused_and_not_shown(config):
    proc = plan(config, "all-vars", all_vars={"kmirror_admin_password": SECRET})
    assert proc.returncode != 0
    assert "all_vars: a secret" in " ".join((proc.stdout + proc.stderr).split())
    assert SECRET not in proc.stdout + proc.stderr


def test_a_vault_reference_is_what_the_plan_and_inventory_carry(config):
    proc = ok(
        plan(
            config,
            "reference",
            source_clusters=[
                {
                    "name": "east",
                    "bootstrap_servers": "e1:9093",
                    "whitelist": ".*",
                    "consumer_properties": {"sasl.jaas.config": "{{ vault_east_jaas }}"},
                }
            ],
        )
    )
    assert "vault_east_jaas" in proc.stdout  # the output's planned value: a reference, no secret
    assert SECRET not in proc.stdout
