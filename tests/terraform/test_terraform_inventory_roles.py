"""The inventory module's output against the roles' own argument specs, with Ansible's validator.

A configuration that calls modules/inventory with every key it knows (SCRAM + TLS + mutual TLS, GSSAPI,
ACL settings, every tuning key, properties) is applied offline (it creates nothing: outputs only), and the
cluster definitions it writes are checked with ansible-core's ArgumentSpecValidator against every
roles/*/meta/argument_specs.yml that declares them, after resolving the Vault references the way Ansible's
templating would. An unknown key, a wrong type or a missing required key fails here, not on a host."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from tfcli import ROOT, TERRAFORM_DIR, ok, terraform

CLUSTER_VARS = ("kmirror_target_cluster", "kmirror_source_clusters")
# What the operator's Vault file would define for the references the inventory holds.
VAULT = {
    "vault_kmirror_target_password": "t-secret",
    "vault_target_key": "k-secret",
    "vault_target_admin": {"bootstrap.servers": "t1:9093", "security.protocol": "SASL_SSL"},
    "vault_east_admin": {"bootstrap.servers": "e1:9093"},
    "vault_east_truststore": "ts-secret",
}

MAIN_TF = """
module "inventory" {
  source = "%(source)s"

  workers = [
    { name = "mirror-1", address = "10.0.1.10", user = "admin", port = 2222, ssh_private_key_file = "/k" },
    { name = "mirror-2", address = "mirror-2.dc2.example.com", ssh_common_args = "-o ProxyJump=bastion" },
  ]
  audit_hosts = [{ name = "audit-1", address = "10.0.3.10" }]
  target_cluster = {
    bootstrap_servers        = "t1:9093,t2:9093"
    security_protocol        = "SASL_SSL"
    sasl_mechanism           = "SCRAM-SHA-512"
    sasl_username            = "mirror-target"
    tls = {
      ca_src = "files/ca.pem", cert_src = "files/c.pem", key_src = "files/k.pem",
      key_password_var = "vault_target_key", verify_hostname = true
    }
    acl_principal            = "User:mirror-target"
    acl_host                 = "*"
    acl_topic_patterns       = [{ name = "orders", pattern_type = "PREFIXED" }, { name = "clicks" }]
    acl_admin_properties_var = "vault_target_admin"
    producer_properties      = { "compression.type" = "lz4", "linger.ms" = 20 }
  }
  source_clusters = [
    {
      name = "east", bootstrap_servers = "e1:9093", group_id = "mm-east", whitelist = "orders.*,payments",
      blacklist = "orders\\\\.tmp", num_streams = 2, num_producers = 1, queue_size = 10000,
      offset_commit_interval_ms = 60000, topic_refresh_interval_ms = 30000, stats_interval_ms = 60000,
      replication_factor = 3, log_level = "INFO", security_protocol = "SSL",
      tls = { ca_src = "files/east-ca.pem" },
      acl_principal = "User:CN=mirror", acl_admin_properties_var = "vault_east_admin",
      consumer_properties = {
        "fetch.max.bytes" = "104857600", "ssl.truststore.password" = "{{ vault_east_truststore }}"
      }
    },
    {
      name = "west", bootstrap_servers = "w1:9094,w2:9094", whitelist = "clicks.*",
      security_protocol = "SASL_PLAINTEXT",
      sasl_mechanism = "GSSAPI", kerberos_principal = "kmirror/{{ inventory_hostname }}@DC3.EXAMPLE.COM",
      kerberos_keytab_src   = "files/keytabs/kmirror-{{ inventory_hostname }}.keytab",
      kerberos_service_name = "kafka"
    },
  ]
}

output "inventory_yaml" {
  value = module.inventory.inventory_yaml
}

output "secret_variables" {
  value = module.inventory.secret_variables
}
"""


def resolve(value: Any) -> Any:
    """Vault references replaced by their values, as Ansible templating would do before a role validates."""
    if isinstance(value, dict):
        return {k: resolve(v) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v) for v in value]
    if isinstance(value, str) and (m := re.fullmatch(r"\{\{\s*(\w+)\s*\}\}", value)) and m.group(1) in VAULT:
        return VAULT[m.group(1)]
    return value


def role_specs() -> dict[str, dict[str, Any]]:
    """Role:entry point -> the options of CLUSTER_VARS it declares."""
    out = {}
    for f in sorted((ROOT / "roles").glob("*/meta/argument_specs.yml")):
        for entry, spec in yaml.safe_load(f.read_text())["argument_specs"].items():
            options = {k: v for k, v in (spec.get("options") or {}).items() if k in CLUSTER_VARS}
            if options:
                out[f"{f.parents[1].name}:{entry}"] = options
    return out


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("inventory-roles")
    source = os.path.relpath(TERRAFORM_DIR / "modules" / "inventory", work)
    (work / "main.tf").write_text(MAIN_TF % {"source": source})
    data_dir = work / "tfdata"
    ok(terraform("init", "-input=false", "-no-color", cwd=work, data_dir=data_dir))
    ok(terraform("apply", "-auto-approve", "-input=false", "-no-color", cwd=work, data_dir=data_dir))
    outputs = json.loads(ok(terraform("output", "-json", cwd=work, data_dir=data_dir)).stdout)
    assert outputs["secret_variables"]["value"] == sorted(VAULT)
    return yaml.safe_load(outputs["inventory_yaml"]["value"])


def test_the_layout_is_the_fixed_one(inventory: dict[str, Any]) -> None:
    assert set(inventory["all"]["children"]) == {"kmirror_workers", "kmirror_audit"}
    assert inventory["all"]["children"]["kmirror_workers"]["hosts"]["mirror-1"] == {
        "ansible_host": "10.0.1.10", "ansible_user": "admin", "ansible_port": 2222,
        "ansible_ssh_private_key_file": "/k"}
    assert list(inventory["all"]["children"]["kmirror_audit"]["hosts"]) == ["audit-1"]
    assert set(inventory["all"]["vars"]) == set(CLUSTER_VARS)
    # No secret value anywhere: only references.
    text = json.dumps(inventory)
    assert not {"t-secret", "k-secret", "ts-secret"} & set(re.findall(r"[\w-]+", text))


@pytest.mark.parametrize("role", sorted(role_specs()))
def test_the_roles_accept_every_key(inventory: dict[str, Any], role: str) -> None:
    spec = role_specs()[role]
    params = {k: resolve(v) for k, v in inventory["all"]["vars"].items() if k in spec}
    result = ArgumentSpecValidator(spec).validate(params)
    assert not result.error_messages, f"{role}: {result.error_messages}"
    if "kmirror_config" in role:
        # The complete spec: every key the module writes is known to it (unknown ones were errors above).
        sources = {s["name"]: s for s in result.validated_parameters["kmirror_source_clusters"]}
        assert sources["east"]["tls"]["verify_hostname"] is True  # the role's default, applied
        assert sources["west"]["group_id"] == "kmirror-west"


def test_the_complete_spec_is_among_them() -> None:
    assert "kmirror_config:main" in role_specs()
    assert "options" in role_specs()["kmirror_config:main"]["kmirror_target_cluster"]
