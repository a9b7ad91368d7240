"""inventory.example is valid: its layout passes the roles' own argument specs and definition checks.

The Terraform inventory module (terraform/modules/inventory) writes the same layout, so a change here is a
change of the fixed inventory layout.
"""

from __future__ import annotations

import copy

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_harness import ROLES, ROOT


@pytest.fixture(scope="module")
def inventory_vars() -> dict:
    inv = yaml.safe_load((ROOT / "inventory.example").read_text())
    return inv["all"]["children"]["kmirror_workers"]["vars"]


def role_spec(role: str) -> dict:
    spec = yaml.safe_load((ROLES / role / "meta/argument_specs.yml").read_text())
    return spec["argument_specs"]["main"]["options"]


def strip_docs(options: dict) -> dict:
    """An argument_specs.yml options block as a module argument_spec (without the documentation keys)."""
    out = {}
    for name, opt in options.items():
        o = {k: v for k, v in opt.items() if k not in ("description", "version_added")}
        if "options" in o:
            o["options"] = strip_docs(o["options"])
        out[name] = o
    return out


@pytest.mark.parametrize("role", ["kmirror_config", "kmirror_service"])
def test_inventory_passes_the_roles_argument_specs(inventory_vars, role):
    spec = strip_docs(role_spec(role))
    params = {k: copy.deepcopy(v) for k, v in inventory_vars.items() if k in spec}
    assert "kmirror_source_clusters" in params and "kmirror_target_cluster" in params
    result = ArgumentSpecValidator(spec).validate(params)
    assert not result.error_messages, result.error_messages


def test_inventory_has_two_sources_and_one_target(inventory_vars, config_filters):
    sides = config_filters.kmirror_client_sides(
        inventory_vars["kmirror_source_clusters"], inventory_vars["kmirror_target_cluster"], "/etc/kmirror"
    )
    assert sorted({s["source"] for s in sides}) == ["east", "west"]
    # the consumer sides use each source's own principal, the producer sides the target's
    kinds = {(s["source"], s["side"]): s["mechanism"] for s in sides}
    assert kinds[("west", "consumer")] == "GSSAPI" and kinds[("west", "producer")] == "SCRAM-SHA-512"


def test_an_unknown_cluster_key_is_refused_by_the_spec(inventory_vars):
    spec = strip_docs(role_spec("kmirror_config"))
    params = {k: copy.deepcopy(v) for k, v in inventory_vars.items() if k in spec}
    params["kmirror_source_clusters"][0]["whitelsit"] = "typo.*"
    result = ArgumentSpecValidator(spec).validate(params)
    assert any("whitelsit" in m for m in result.error_messages)
