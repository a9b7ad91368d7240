"""ACL bindings the mirror principals get (pure logic), and the kmirror_acl module without a cluster.

Granting the bindings for real, and what the mirror does with exactly them and with each one removed, is
proven against Apache Kafka's authorizer in worker/tests/integration/test_acls_enforced.py; molecule still
runs the module in check mode against its test brokers and checks its plan.
"""

from __future__ import annotations

import json
import sys

import pytest
from ansible_harness import ROLES, load_module

from kmirror.failover import offsetsync

bindings_mod = load_module(
    ROLES / "kmirror_acls/module_utils/kmirror_acl_bindings.py", "kmirror_acl_bindings"
)
sys.modules["ansible.module_utils.kmirror_acl_bindings"] = bindings_mod
acl_module = load_module(ROLES / "kmirror_acls/library/kmirror_acl.py", "kmirror_acl_module")
acl_filters = load_module(ROLES / "kmirror_acls/filter_plugins/kmirror_acls.py", "kmirror_acls_filters")

topic_patterns = bindings_mod.topic_patterns
bindings = bindings_mod.bindings
AclPatternError = bindings_mod.AclPatternError


@pytest.mark.parametrize(
    ("whitelist", "expected"),
    [
        ("payments", [("LITERAL", "payments")]),
        ("orders.*", [("PREFIXED", "orders")]),
        ("orders\\..*", [("PREFIXED", "orders.")]),
        ("orders.*,payments", [("PREFIXED", "orders"), ("LITERAL", "payments")]),
        ("orders.* | payments", [("PREFIXED", "orders"), ("LITERAL", "payments")]),
        (
            "'orders.created, orders.cancelled'",
            [("LITERAL", "orders.created"), ("LITERAL", "orders.cancelled")],
        ),
        ("a_b-c.d", [("LITERAL", "a_b-c.d")]),
        (".*", [("LITERAL", "*")]),
        ("x,.*", [("LITERAL", "*")]),
        (None, [("LITERAL", "*")]),  # no whitelist: the mirror reads every topic
        ("dup,dup", [("LITERAL", "dup")]),
    ],
)
def test_whitelist_to_patterns(whitelist, expected):
    assert topic_patterns(whitelist) == expected


@pytest.mark.parametrize("whitelist", ["orders[0-9]+", "(a|b)c", "x?", "a.*b", "^orders", ".*-dlq", "a\\d"])
def test_whitelists_acls_cannot_express_are_refused_with_the_fix(whitelist):
    with pytest.raises(AclPatternError, match="acl_topic_patterns"):
        topic_patterns(whitelist)


CANDIDATE_TOPICS = [
    "orders", "orders.created", "ordersX", "payments", "payments2", "refunds", "billing", "audit", "audit-eu",
    "other",
]  # fmt: skip


def covered(patterns, topic):
    return any(
        name == "*" or (name == topic if kind == "LITERAL" else topic.startswith(name))
        for kind, name in patterns
    )


@pytest.mark.parametrize(
    ("whitelist", "expected"),
    [
        # A comma inside parentheses: MirrorMaker (and kmirror.config.filters) read it as '|'; the ACL
        # bindings used to keep it inside the group and refused the whitelist.
        ("(orders,payments)", [("LITERAL", "orders"), ("LITERAL", "payments")]),
        (
            "orders.*,(payments, refunds)",
            [("PREFIXED", "orders"), ("LITERAL", "payments"), ("LITERAL", "refunds")],
        ),
        ("(?:audit.*,billing)", [("PREFIXED", "audit"), ("LITERAL", "billing")]),
    ],
)
def test_whitelist_grammar_is_the_workers(whitelist, expected):
    """The grant covers exactly the topics the worker's own filter (kmirror.config.filters) mirrors."""
    from kmirror.config.filters import TopicFilter

    patterns = topic_patterns(whitelist)
    assert patterns == expected
    granted = sorted(t for t in CANDIDATE_TOPICS if covered(patterns, t))
    assert granted == TopicFilter(include=whitelist).select(CANDIDATE_TOPICS)


@pytest.mark.parametrize(
    ("whitelist", "message"),
    [
        ("orders(", "invalid regex"),  # the worker refuses it: so do the ACLs, with its message
        ("'orders', 'payments'", "acl_topic_patterns"),  # inner quotes stay (MirrorMaker): no topic has them
    ],
)
def test_whitelists_the_worker_reads_differently_are_refused(whitelist, message):
    with pytest.raises(AclPatternError, match=message):
        topic_patterns(whitelist)


BLANK = ["", "   ", ",", " , ", "''", '""', "\t\n"]


@pytest.mark.parametrize("whitelist", BLANK, ids=[repr(w) for w in BLANK])
def test_an_empty_or_blank_whitelist_is_refused_as_the_worker_refuses_it(whitelist):
    """Issue 34, item 11: it was granted as every topic (TOPIC LITERAL *), on the target WRITE, CREATE, ALTER,
    ALTER_CONFIGS and READ included, although the worker refuses that whitelist."""
    from kmirror.config.filters import compile_filter
    from kmirror.errors import ConfigError

    with pytest.raises(ConfigError) as worker:
        compile_filter(whitelist, "whitelist")
    with pytest.raises(AclPatternError) as acl:
        topic_patterns(whitelist)
    assert str(acl.value) == str(worker.value)  # one rule, the worker's message
    assert str(acl.value).startswith(f"whitelist: empty topic pattern {whitelist!r}")
    for side in ("source", "target"):
        with pytest.raises(AclPatternError, match="empty topic pattern"):
            bindings(side, "User:m", whitelist=whitelist, group="g")


def test_the_roles_check_names_each_source_whose_whitelist_the_worker_refuses():
    sources = [
        {"name": "east", "whitelist": "orders.*"},
        {"name": "west", "whitelist": "   "},
        {"name": "north"},  # no whitelist: every topic
        {"name": "south", "whitelist": None},
        {"name": "up", "whitelist": ""},
        {"name": "bad", "whitelist": "orders("},
    ]
    assert acl_filters.kmirror_acl_whitelist_problems(sources) == [
        "kmirror_source_clusters[1] (west): whitelist: empty topic pattern '   ' (MirrorMaker matched no "
        "topic with it); give whitelist '.*' for every topic, or the names you mean, e.g. whitelist "
        "'orders.*'",
        "kmirror_source_clusters[4] (up): whitelist: empty topic pattern '' (MirrorMaker matched no topic "
        "with it); give whitelist '.*' for every topic, or the names you mean, e.g. whitelist 'orders.*'",
        f"kmirror_source_clusters[5] (bad): {acl_problem('orders(')}",
    ]
    assert acl_filters.kmirror_acl_whitelist_problems(sources[:1] + sources[2:4]) == []


def acl_problem(whitelist):
    with pytest.raises(AclPatternError) as exc:
        topic_patterns(whitelist)
    return str(exc.value)


def test_source_bindings():
    got = bindings("source", "User:mirror-east", whitelist="orders.*,payments", group="kmirror-east")
    rendered = {b.render() for b in got}
    for op in ("READ", "DESCRIBE", "DESCRIBE_CONFIGS"):
        assert f"ALLOW User:mirror-east from *: {op} on TOPIC PREFIXED 'orders'" in rendered
        assert f"ALLOW User:mirror-east from *: {op} on TOPIC LITERAL 'payments'" in rendered
    assert "ALLOW User:mirror-east from *: READ on GROUP LITERAL 'kmirror-east'" in rendered
    assert len(got) == 7
    assert not any(b.operation in ("WRITE", "CREATE", "ALL") for b in got)  # least privilege


def test_target_bindings():
    got = bindings(
        "target", "User:mirror-target", whitelist="orders.*", idempotent_write=True, host="10.0.0.5"
    )
    assert {(b.resource_type, b.pattern_type, b.name, b.operation) for b in got} == {
        ("TOPIC", "PREFIXED", "orders", "WRITE"),
        ("TOPIC", "PREFIXED", "orders", "DESCRIBE"),
        ("TOPIC", "PREFIXED", "orders", "CREATE"),
        ("TOPIC", "PREFIXED", "orders", "DESCRIBE_CONFIGS"),  # configs kept equal to the source's
        ("TOPIC", "PREFIXED", "orders", "ALTER_CONFIGS"),
        ("TOPIC", "PREFIXED", "orders", "ALTER"),  # partitions a source topic gains
        ("TOPIC", "PREFIXED", "orders", "READ"),  # kmirror audit reads the copy with the producer file
        ("CLUSTER", "LITERAL", "kafka-cluster", "IDEMPOTENT_WRITE"),
    }
    assert {b.host for b in got} == {"10.0.0.5"}


def test_failover_offset_sync_bindings():
    """kmirror run --groups: groups described on the source; committed and described on the target, the
    sync topic created, read and written (the target topics' READ is granted without --groups too: the
    audit reads them); nothing more without it."""
    src = bindings(
        "source", "User:m", whitelist="orders.*", group="kmirror-east", sync_groups="app-.*,billing"
    )
    assert {
        (b.resource_type, b.pattern_type, b.name, b.operation) for b in src if b.resource_type == "GROUP"
    } == {
        ("GROUP", "LITERAL", "kmirror-east", "READ"),
        ("GROUP", "PREFIXED", "app-", "DESCRIBE"),
        ("GROUP", "LITERAL", "billing", "DESCRIBE"),
    }
    tgt = bindings("target", "User:m", whitelist="orders.*", sync_groups="app-.*")
    got = {(b.resource_type, b.pattern_type, b.name, b.operation) for b in tgt}
    assert {
        ("GROUP", "PREFIXED", "app-", "READ"),
        ("GROUP", "PREFIXED", "app-", "DESCRIBE"),
        ("TOPIC", "PREFIXED", "orders", "READ"),
        ("TOPIC", "LITERAL", "__kmirror-offset-syncs", "CREATE"),
        ("TOPIC", "LITERAL", "__kmirror-offset-syncs", "DESCRIBE"),
        ("TOPIC", "LITERAL", "__kmirror-offset-syncs", "READ"),
        ("TOPIC", "LITERAL", "__kmirror-offset-syncs", "WRITE"),
    } <= got
    assert len(tgt) == len(bindings("target", "User:m", whitelist="orders.*")) + 6
    assert offsetsync.SYNC_TOPIC == "__kmirror-offset-syncs"  # the name the bindings grant


def test_renamed_copies_and_heartbeats_bindings():
    """--topic.rename.format: the target grants the copies' names; --heartbeats.interval.ms: the source's
    heartbeat topic is also written and made on the source, and its (renamed) copy is a destination topic."""
    from kmirror.mirror.heartbeats import heartbeat_topic

    tgt = bindings(
        "target",
        "User:m",
        whitelist="orders.*,payments",
        source_name="east",
        rename_format="${source}.${topic}",
        heartbeats=True,
    )
    names = {(b.pattern_type, b.name) for b in tgt}
    assert names == {
        ("PREFIXED", "east.orders"),
        ("LITERAL", "east.payments"),
        ("LITERAL", "east." + heartbeat_topic("east")),
    }
    copy_ops = {b.operation for b in tgt if b.name == "east.kmirror.heartbeats.east"}
    assert copy_ops >= {"WRITE", "READ", "CREATE"}
    src = bindings("source", "User:m", whitelist="orders.*", group="g", source_name="east", heartbeats=True)
    beats = {b.operation for b in src if b.name == heartbeat_topic("east")}
    assert beats == {"READ", "DESCRIBE", "DESCRIBE_CONFIGS", "WRITE", "CREATE"}
    # Every topic stays every topic; a format that could merge topics is refused as the worker refuses it.
    every = bindings("target", "User:m", source_name="e", rename_format="x.${topic}")
    assert {b.name for b in every} == {"*"}
    with pytest.raises(bindings_mod.AclPatternError, match=r"topic\.rename\.format"):
        bindings("target", "User:m", whitelist="a", source_name="e", rename_format="${source}")


def test_explicit_patterns_win():
    got = bindings(
        "target", "User:m", whitelist="a[0-9]", patterns=[{"name": "a", "pattern_type": "prefixed"}]
    )
    assert {(b.pattern_type, b.name) for b in got} == {("PREFIXED", "a")}


def test_source_needs_the_group_and_principals_need_a_type():
    with pytest.raises(AclPatternError, match="group_id"):
        bindings("source", "User:m", whitelist="a")
    with pytest.raises(AclPatternError, match="User:NAME"):
        bindings("target", "mirror", whitelist="a")


@pytest.mark.parametrize(
    ("cluster", "principal"),
    [
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_username": "mirror-east",
            },
            "User:mirror-east",
        ),
        (
            {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "GSSAPI",
                "kerberos_principal": "kmirror/w1.example.com@EXAMPLE.COM",
            },
            "User:kmirror",
        ),
        ({"security_protocol": "PLAINTEXT"}, "User:ANONYMOUS"),
        ({"security_protocol": "SSL", "acl_principal": "User:CN=kmirror"}, "User:CN=kmirror"),
    ],
)
def test_principal_of_a_cluster_definition(cluster, principal):
    assert acl_filters.kmirror_acl_principal(cluster) == principal


def test_ssl_principal_must_be_given():
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="acl_principal"):
        acl_filters.kmirror_acl_principal({"name": "t", "security_protocol": "SSL"})


def run_module(module, args, capsys, monkeypatch):
    from ansible.module_utils import basic
    from ansible.module_utils.common.text.converters import to_bytes

    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def test_module_without_admin_config_only_computes(capsys, monkeypatch):
    out = run_module(
        acl_module,
        {
            "side": "source",
            "principal": "User:m",
            "whitelist": "orders.*",
            "group": "g",
            "_ansible_check_mode": True,
        },
        capsys,
        monkeypatch,
    )
    assert out["changed"] is False
    assert len(out["bindings"]) == 4 and out["to_create"] == []
    assert "not contacted" in out["msg"]


def test_module_reports_a_pattern_it_cannot_grant(capsys, monkeypatch):
    out = run_module(
        acl_module, {"side": "target", "principal": "User:m", "whitelist": "a[0-9]"}, capsys, monkeypatch
    )
    assert out["failed"] is True and "acl_topic_patterns" in out["msg"]


@pytest.mark.parametrize("whitelist", ["", "   "])
def test_module_refuses_an_empty_or_blank_whitelist(capsys, monkeypatch, whitelist):
    out = run_module(
        acl_module, {"side": "target", "principal": "User:m", "whitelist": whitelist}, capsys, monkeypatch
    )
    assert out["failed"] is True
    assert out["msg"].startswith(f"whitelist: empty topic pattern {whitelist!r}")
    assert "bindings" not in out


def test_module_in_check_mode_with_a_ca_not_deployed_yet_only_computes(capsys, monkeypatch, tmp_path):
    """The runbook's preview (--check) of a new TLS source: kmirror_config has not written the CA the
    admin settings name; the plan is shown without contacting the cluster."""
    ca = tmp_path / "north" / "consumer-ca.pem"
    args = {
        "side": "source",
        "principal": "User:m",
        "whitelist": "orders.*",
        "group": "g",
        "admin_config": {
            "bootstrap.servers": "127.0.0.1:1",
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca),
        },
    }
    preview = {**args, "_ansible_check_mode": True, "files_may_be_missing": True}
    out = run_module(acl_module, preview, capsys, monkeypatch)
    assert out["changed"] is True and out["to_create"] == out["bindings"] and len(out["bindings"]) == 4
    assert "admin_config ssl.ca.location is not deployed yet" in out["msg"] and "not contacted" in out["msg"]
    # Applied for real, or as the role's dry run (check mode in a play that applies everything else, where
    # kmirror_config has already deployed the files): a missing file is one clear failure naming the key.
    for real in (args, {**args, "_ansible_check_mode": True}):
        out = run_module(acl_module, real, capsys, monkeypatch)
        assert out["failed"] is True
        assert out["msg"].startswith(
            "admin_config: the file ssl.ca.location names does not exist on this host;"
        )


def test_group_names_may_hold_what_topic_names_cannot():
    """Kafka group ids are any string: only topic names are held to Kafka's topic characters."""
    assert topic_patterns("app:payments,(billing)", "groups") == [
        ("LITERAL", "app:payments"),
        ("LITERAL", "billing"),
    ]
    with pytest.raises(AclPatternError, match="acl_topic_patterns"):
        topic_patterns("app:payments")
