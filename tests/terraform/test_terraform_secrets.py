"""No secret through Terraform: a literal sasl.jaas.config (or any key the secret rule of
kmirror.config.secrets names: *password*, *secret*, *_pw, *token*, ...) in the inventory module's input,
at any depth of all_vars, is refused by `terraform plan` without the plan showing it, a Vault reference in
its place is what the plan and the inventory carry, and the inventory object output is sensitive."""

from __future__ import annotations

import json
import os
import re
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

# A resource that takes the inventory object: the plan shows its input as (sensitive value) when the
# module's output is sensitive (a root output would have to say sensitive = true itself).
resource "terraform_data" "inventory" {
  input = module.inventory.inventory
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


NESTED = [
    pytest.param({"kmirror_extra": {"db": {"admin_password": SECRET}}}, id="nested-map"),
    pytest.param({"kmirror_extra": [{"name": "x", "client_secret": SECRET}]}, id="map-in-list"),
    pytest.param({"kmirror_extra": {"auth.token": SECRET}}, id="nested-dot-token"),
    pytest.param({"kmirror_admin_pw": SECRET}, id="top-level-pw"),
    pytest.param({"kmirror_api_token": SECRET}, id="top-level-token"),
    pytest.param({"kmirror_extra": {"levels": [[{"db_pw": SECRET}]]}}, id="deep-pw"),
    # Keys and values that JSON escapes: the check reads the members of all_vars' JSON text.
    pytest.param({"kmirror_extra": {'odd"key\\_password': SECRET}}, id="escaped-key"),
    pytest.param({"kmirror_extra": {"<html>&_secret": SECRET}}, id="html-escaped-key"),
    pytest.param({"kmirror_extra": {"note": 'x\\","ok":"', "db_pw": SECRET}}, id="tricky-value-first"),
]


@pytest.mark.parametrize("all_vars", NESTED)
def test_a_secret_anywhere_in_all_vars_is_refused_and_not_shown(config, all_vars):
    proc = plan(config, "all-vars-nested", all_vars=all_vars)
    assert proc.returncode != 0, proc.stdout
    assert "all_vars: a secret" in " ".join((proc.stdout + proc.stderr).split())
    assert SECRET not in proc.stdout + proc.stderr


@pytest.mark.parametrize("key", ["db_pw", "sasl.oauthbearer.token", "my.token", "admin.pwd"])
def test_pw_and_token_properties_are_refused_and_not_shown(config, key):
    proc = plan(
        config,
        "pw-token",
        target_cluster={"bootstrap_servers": "t1:9093", "producer_properties": {key: SECRET}},
    )
    assert proc.returncode != 0, proc.stdout
    assert "target_cluster.producer_properties: a secret" in " ".join((proc.stdout + proc.stderr).split())
    assert SECRET not in proc.stdout + proc.stderr


def test_nested_references_and_plain_values_pass(config):
    """The nested check refuses secrets only: Vault references and non-secret keys at any depth pass."""
    all_vars = {
        "kmirror_extra": {
            "db": {"admin_password": "{{ vault_db_password }}", "host": "db1"},
            "retries": 3,  # a number under a plain key
            "note": '"db_pw":"not-a-member"',  # a string that looks like a member is no member
            "list": [{"api_token": "{{ vault_api_token }}"}, "plain"],
        },
        "kmirror_worker_pip_args": ["--index-url", "https://mirror/simple"],
    }
    proc = ok(plan(config, "nested-ok", all_vars=all_vars))
    assert "vault_api_token" in proc.stdout


def test_the_inventory_object_output_is_sensitive(config):
    proc = ok(plan(config, "sensitive", all_vars={"kmirror_marker": "VISIBLE-IN-YAML-ONLY"}))
    assert re.search(r"\+ input\s+= \(sensitive value\)", proc.stdout), proc.stdout
    # The YAML output (what the inventory file gets, holding no secret) stays reviewable in the plan.
    assert proc.stdout.count("VISIBLE-IN-YAML-ONLY") == 1
