"""The one description of a cluster definition (roles/kmirror_config/files/cluster_definition.yml).

What is generated from it is current, every check it lists is what the role's filter refuses (with its
one-line message), every key is shown in inventory.example, and the secret rule Terraform applies is the
worker's own (kmirror.config.secrets).
"""

from __future__ import annotations

import copy
import re
from types import ModuleType

import pytest
import yaml
from ansible_harness import ROLES, ROOT, load_module

from kmirror.config.secrets import SECRET_MARKERS, is_secret

DEFINITION = ROLES / "kmirror_config/files/cluster_definition.yml"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return load_module(ROLES / "kmirror_config/files/cluster_definition.py", "kmirror_cluster_definition")


@pytest.fixture(scope="module")
def description() -> dict:
    return yaml.safe_load(DEFINITION.read_text())


def target(**change: object) -> dict:
    return {"name": "target", "bootstrap_servers": "t1:9092", **change}


def source(**change: object) -> dict:
    return {"name": "east", "bootstrap_servers": "e1:9092", "group_id": "g", "whitelist": ".*", **change}


# ------------------------------------------------------------------------------------------- generated


def test_the_generated_parts_are_current(generator):
    # The same check as `make lint`: regenerate (make cluster-definition) after editing the description.
    for path, text in generator.generated().items():
        assert path.read_text() == text, f"{path.relative_to(ROOT)} is stale: run make cluster-definition"


@pytest.mark.parametrize(
    ("variable", "side"), [("kmirror_target_cluster", "target"), ("kmirror_source_clusters", "source")]
)
def test_the_argument_spec_holds_exactly_the_described_keys(generator, description, variable, side):
    spec = yaml.safe_load((ROLES / "kmirror_config/meta/argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"][variable]["options"]
    keys = [e["key"] for e in description["keys"] if side in e.get("sides", ("target", "source"))]
    assert list(options) == keys
    assert options == generator.argument_spec_options(description, side)
    assert not any(f in opt for opt in options.values() for f in ("sides", "per_side", "pattern"))


def test_a_region_is_replaced_between_its_markers_only(generator, description):
    text = (
        "a:\n"
        "  options:\n"
        "    # BEGIN generated: source cluster keys (anything)\n"
        "    stale: {}\n"
        "    # END generated: source cluster keys\n"
        "b: 1\n"
    )
    out = generator.with_regions(description, DEFINITION, text)
    assert out.startswith(
        "a:\n  options:\n    # BEGIN generated: source cluster keys (anything)\n    name:\n"
    )
    assert out.endswith("    # END generated: source cluster keys\nb: 1\n")
    assert "stale" not in out
    assert yaml.safe_load(out)["a"]["options"] == generator.argument_spec_options(description, "source")
    assert generator.with_regions(description, DEFINITION, out) == out  # stable


def test_a_region_without_its_end_line_is_refused(generator, description):
    with pytest.raises(SystemExit, match="no '# END generated: target cluster keys' line"):
        generator.with_regions(description, DEFINITION, "  # BEGIN generated: target cluster keys\n  x: 1\n")


def test_terraform_validations_one_per_check_for_each_variable(generator, description):
    for variable, loop in (
        ("target_cluster", "[var.target_cluster]"),
        ("source_clusters", "var.source_clusters"),
    ):
        text = generator.terraform_validations(description, variable)
        assert text.count("validation {") == len(description["terraform_checks"])
        assert text.count(f"alltrue([for c in {loop} : (") == len(description["terraform_checks"])
        messages = re.findall(r'error_message = "(.*)"\n', text)
        assert all(m.startswith(variable) for m in messages)
    source_text = generator.terraform_validations(description, "source_clusters")
    assert "source_clusters.consumer_properties: a secret" in source_text


def test_terraform_secret_regex_is_the_workers_rule(generator, description):
    text = generator.terraform_locals(description)
    hcl = re.search(r'secret_key_regex\s*=\s*("[^\n]*")', text)
    assert hcl
    pattern = yaml.safe_load(hcl.group(1))  # an HCL string of this form is a JSON (hence YAML) string
    assert pattern.startswith("(?i)")
    keys = [
        *SECRET_MARKERS,
        "SSL.KEY.PASSWORD",
        "sasl.password",
        "ssl_key_password",
        "ssl.keystore.location",
        "ssl.key.location",
        "client.id",
        "sasl.oauthbearer.config",
        "sasl.kerberos.keytab",
        "my.secret.x",
        "sasl.jaas.config",
        "ssl.keystore.key",
        "ssl_key",
        "sasl.oauthbearer.client.credentials.client.id",
        "key.serializer",
    ]
    for key in keys:
        assert bool(re.search(pattern[4:], key, re.IGNORECASE)) == is_secret(key), key
    protocols = re.search(r"cluster_security_protocols\s*=\s*(\[[^\n]*\])", text)
    assert protocols and yaml.safe_load(protocols.group(1)) == next(
        e["choices"] for e in description["keys"] if e["key"] == "security_protocol"
    )


# ---------------------------------------------------------------------------------------- the checks

# One violation per check of the description, (rule, key or keys) -> (side, change, expected message part).
# A check added to the description without a line here fails test_every_check_is_exercised.
VIOLATIONS = {
    ("nonempty", "bootstrap_servers"): ("target", {"bootstrap_servers": " "}, "no bootstrap_servers; set"),
    ("choice", "security_protocol"): (
        "source",
        {"security_protocol": "tls"},
        "security_protocol 'TLS' is unknown",
    ),
    ("choice", "sasl_mechanism"): (
        "target",
        {"security_protocol": "SASL_SSL"},
        "sasl_mechanism is missing; set",
    ),
    ("forbidden", "sasl_mechanism"): (
        "source",
        {"security_protocol": "SSL", "sasl_mechanism": "PLAIN"},
        "sasl_mechanism is set but security_protocol is SSL",
    ),
    ("required_all", "kerberos_principal,kerberos_keytab_src"): (
        "target",
        {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "gssapi", "kerberos_principal": "p"},
        "GSSAPI needs kerberos_keytab_src",
    ),
    ("required_all", "sasl_username,sasl_password"): (
        "source",
        {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256"},
        "SCRAM-SHA-256 needs sasl_username",
    ),
    ("mapping", "tls"): (
        "target",
        {"security_protocol": "SSL", "tls": "ca.pem"},
        "tls is not a mapping; use tls: {",
    ),
    ("forbidden", "tls"): (
        "source",
        {"security_protocol": "plaintext", "tls": {"ca_src": "a"}},
        "tls is set but security_protocol is PLAINTEXT",
    ),
    ("together", "tls.cert_src,tls.key_src"): (
        "target",
        {"security_protocol": "SSL", "tls": {"key_src": "k"}},
        "needs both tls.cert_src and tls.key_src",
    ),
    ("requires", "tls.key_password"): (
        "source",
        {"security_protocol": "SSL", "tls": {"key_password": "x"}},
        "tls.key_password without tls.key_src",
    ),
    ("mapping", "producer_properties"): (
        "target",
        {"producer_properties": ["acks=all"]},
        "producer_properties is not a mapping; use producer_properties: {key",
    ),
    ("mapping", "consumer_properties"): (
        "source",
        {"consumer_properties": "x"},
        "consumer_properties is not a mapping",
    ),
    ("nonempty", "group_id"): ("source", {"group_id": None}, "no group_id; set group_id"),
    ("any_of", "whitelist,blacklist"): (
        "source",
        {"whitelist": ""},
        "no whitelist or blacklist; set whitelist",
    ),
    ("positive_int", "num_streams"): (
        "source",
        {"num_streams": "-1"},
        "num_streams '-1'; give a positive number",
    ),
}


def check_id(check: dict) -> tuple[str, str]:
    return check["rule"], check.get("key") or ",".join(check["keys"])


def test_every_check_is_exercised(description):
    assert sorted(check_id(c) for c in description["checks"]) == sorted(VIOLATIONS)


@pytest.mark.parametrize("violation", sorted(VIOLATIONS), ids=lambda v: f"{v[0]}-{v[1]}")
def test_each_described_check_refuses_with_one_line(config_filters, violation):
    side, change, expected = VIOLATIONS[violation]
    cluster = target(**change) if side == "target" else source(**change)
    where = "kmirror_target_cluster" if side == "target" else "kmirror_source_clusters[0] (east)"
    with pytest.raises(config_filters.ClusterDefinitionError) as err:
        config_filters.check_cluster(cluster, where, source=side == "source")
    message = str(err.value)
    assert message.startswith(f"{where}: ") and "\n" not in message
    assert expected in message
    # The same cluster without the change passes.
    config_filters.check_cluster(target() if side == "target" else source(), where, source=side == "source")


def test_the_checks_come_from_the_description(config_filters, description, monkeypatch):
    changed = copy.deepcopy(description)
    changed["checks"].append(
        {
            "rule": "positive_int",
            "key": "queue_size",
            "sides": ["source"],
            "problem": "queue_size {value!r}",
            "fix": "give a positive number of records",
        }
    )
    changed["keys"][0]["per_side"]["source"]["pattern"] = "^[a-z]+$"
    monkeypatch.setattr(config_filters, "definition", lambda: changed)
    with pytest.raises(
        config_filters.ClusterDefinitionError, match=r"queue_size 0; give a positive number of records"
    ):
        config_filters.check_cluster(source(queue_size=0), "s", source=True)
    with pytest.raises(config_filters.ClusterDefinitionError, match="not usable as a systemd instance"):
        config_filters.check_definitions([source(name="East")], target())


def test_secret_properties_use_the_workers_rule(config_filters):
    for key in ("ssl_key", "sasl.oauthbearer.config", "ssl.truststore.password"):
        src = source(consumer_properties={key: "x"})
        sides = config_filters.kmirror_client_sides([src], target(), "/etc/kmirror")
        assert sides[0]["secret_properties"] is True
    sides = config_filters.kmirror_client_sides(
        [source(consumer_properties={"fetch.max.bytes": 1})], target(), "/e"
    )
    assert sides[0]["secret_properties"] is False


# ----------------------------------------------------------------------------------- inventory.example


def test_inventory_example_shows_every_key(description):
    text = (ROOT / "inventory.example").read_text()
    blocks = {
        "target": text[text.index("kmirror_target_cluster:") : text.index("kmirror_source_clusters:")],
        "source": text[text.index("kmirror_source_clusters:") : text.index("kmirror_config_krb5:")],
    }
    missing = []
    for e in description["keys"]:
        sides = e.get("sides", ("target", "source"))
        # A key of both sides may be shown on either; a side's own key in that side's block.
        shown_in = "".join(blocks[s] for s in sides)
        for key in [e["key"], *e.get("options", {})]:
            if not re.search(rf"(^|[\s#{{,]){re.escape(key)}:", shown_in, re.M):
                missing.append(f"{'/'.join(sides)}: {key}")
    assert not missing, f"inventory.example does not show {missing}"
