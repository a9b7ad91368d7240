"""The project's Ansible modules against Apache Kafka 4.3: kmirror_topic, kmirror_group_lag, kmirror_acl.

Each module runs in-process the way Ansible runs it (arguments in, one JSON result out), with check mode and
diff mode flags as Ansible passes them. The clusters (started once for this file): a one-node source and a
three-node target (default replication factor 3), both with the standard authorizer, ``User:admin`` as
super user over SASL_PLAINTEXT/SCRAM-SHA-512 and a mirror user without ACLs of its own; the tests' own
clients and the topic and lag modules use the PLAINTEXT listener (``User:ANONYMOUS``, a super user so that
the brokers' own traffic is allowed). kmirror_acl grants and revokes for real, in check mode first.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ansible_harness import ROLES, first_failure, load_module, run_role
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from test_acls import acl_module, run_module

from kmirror.testing.kafka import KafkaCluster, ScramUser, Security, running

topic_module = load_module(ROLES / "kmirror_topics/library/kmirror_topic.py", "kmirror_topic_module")
lag_module = load_module(ROLES / "kmirror_lag/library/kmirror_group_lag.py", "kmirror_group_lag_module")

ADMIN, ADMIN_PASS = "admin", "admin-secret"
MIRROR, MIRROR_PASS = "mirror", "mirror-secret"
SOURCE_TOPICS = {
    "orders.created": (3, {"retention.ms": "86400000"}),
    "orders.cancelled": (2, {}),
    "other": (1, {}),
}


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, KafkaCluster]]:
    security = Security(
        sasl_plaintext=True,
        scram=(ScramUser(ADMIN, ADMIN_PASS), ScramUser(MIRROR, MIRROR_PASS)),
        super_users=(f"User:{ADMIN}",),
    )
    cs = {
        "source": KafkaCluster("source", security=security),
        "target": KafkaCluster("target", size=3, security=security),
    }
    with running(cs, tmp_path_factory.mktemp("brokers")):
        yield cs


@pytest.fixture(scope="module")
def brokers(clusters: dict[str, KafkaCluster]) -> dict[str, str]:
    source = clusters["source"].bootstrap
    admin = AdminClient({"bootstrap.servers": source})
    new = [NewTopic(t, n, config=c) for t, (n, c) in SOURCE_TOPICS.items()]
    for fut in admin.create_topics(new, request_timeout=15).values():
        fut.result()
    p = Producer({"bootstrap.servers": source, "acks": "all"})
    for i in range(5):
        p.produce("orders.created", key=str(i).encode(), value=b"v", partition=0)
    assert p.flush(30) == 0
    coordinator_ready(admin, "kmirror-test")
    return {"source": source, "target": clusters["target"].bootstrap}


NOT_READY = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError._TIMED_OUT,
}


def coordinator_ready(admin: AdminClient, group: str, bound: float = 60.0) -> None:
    """Until the group's coordinator answers. A new cluster's first group request creates
    __consumer_offsets: Kafka 4.3 answers NOT_COORDINATOR, then the request times out (about 10 s
    measured), before it describes the group. kmirror_group_lag asks once (see docs/testing.md)."""
    deadline = time.monotonic() + bound
    while True:
        try:
            admin.describe_consumer_groups([group], request_timeout=10)[group].result()
            return
        except KafkaException as exc:
            assert exc.args[0].code() in NOT_READY and time.monotonic() < deadline, exc
        time.sleep(0.2)


@pytest.fixture
def files(brokers, tmp_path):
    consumer = tmp_path / "consumer.properties"
    consumer.write_text(f"bootstrap.servers={brokers['source']}\ngroup.id=kmirror-test\n")
    producer = tmp_path / "producer.properties"
    producer.write_text(f"bootstrap.servers={brokers['target']}\n")
    return {"consumer_config": str(consumer), "producer_config": str(producer)}


def admin_conf(c: KafkaCluster, user: str = ADMIN, password: str = ADMIN_PASS) -> dict[str, str]:
    return {
        "bootstrap.servers": c.listener("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
    }


def target_topics(brokers, *made: str) -> dict[str, int]:
    """The target's topics and their partition counts. ``made``: topics just created or grown, waited for
    until every node's metadata has them with a leader for each partition (a three-node cluster's brokers
    learn of a new topic a moment after the controller made it), at most 30 s."""
    admin = AdminClient({"bootstrap.servers": brokers["target"]})
    deadline = time.monotonic() + 30
    while True:
        md = admin.list_topics(timeout=10)
        listed = {t: m for t, m in md.topics.items() if m.error is None}
        if all(
            t in listed and listed[t].partitions and all(p.leader >= 0 for p in listed[t].partitions.values())
            for t in made
        ):
            return {t: len(m.partitions) for t, m in listed.items()}
        assert time.monotonic() < deadline, f"target metadata lacks {made} after 30 s: {sorted(listed)}"
        time.sleep(0.2)


def replicas(brokers, topic: str) -> list[int]:
    """Replicas of each partition of a topic on the target, once it is listed."""
    target_topics(brokers, topic)
    md = AdminClient({"bootstrap.servers": brokers["target"]}).list_topics(topic, timeout=10)
    return [len(p.replicas) for _, p in sorted(md.topics[topic].partitions.items())]


def test_kmirror_topic_check_mode_then_create_then_idempotent(brokers, files, capsys, monkeypatch):
    args = {**files, "whitelist": "orders.*", "_ansible_diff": True}
    plan = run_module(topic_module, {**args, "_ansible_check_mode": True}, capsys, monkeypatch)
    assert plan["changed"] is True
    assert sorted(c["name"] for c in plan["created"]) == ["orders.cancelled", "orders.created"]
    # What is set on the source topic, nothing it inherits from the source brokers.
    assert {c["name"]: c["configs"] for c in plan["created"]} == {
        "orders.cancelled": {},
        "orders.created": {"retention.ms": "86400000"},
    }
    assert "orders.created partitions=3 retention.ms=86400000" in plan["diff"]["after"]
    assert "orders.created" not in target_topics(brokers)  # check mode changed nothing

    done = run_module(topic_module, args, capsys, monkeypatch)
    assert done["changed"] is True and done["created"] == plan["created"]
    on_target = target_topics(brokers, "orders.created", "orders.cancelled")
    assert on_target["orders.created"] == 3 and on_target["orders.cancelled"] == 2
    assert "other" not in on_target  # not selected by the whitelist
    # The module returns once the controller made the topics; the node describe_configs asks may not know
    # them yet (seen in a full run: UNKNOWN_TOPIC_OR_PART).
    wait_listed(brokers["target"], "orders.created", 3)
    assert overrides(brokers["target"], "orders.created") == {"retention.ms": "86400000"}

    again = run_module(topic_module, args, capsys, monkeypatch)
    assert again["changed"] is False and again["created"] == []
    assert again["present"] == {"orders.cancelled": 2, "orders.created": 3}
    assert again["diff"]["before"] == again["diff"]["after"]


def create(bootstrap: str, name: str, partitions: int, config: dict[str, str], replication: int = 1) -> None:
    """Create a topic and wait until every node of the cluster lists it with a leader for each partition
    (CreateTopics answers once the controller has it; another node's metadata may lag behind, and a
    module run right after asks any node)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, replication, config=config)]).values():
        fut.result()
    wait_listed(bootstrap, name, partitions)


def wait_listed(bootstrap: str, name: str, partitions: int) -> None:
    """Wait until every node of the cluster lists the topic with a leader for each partition."""
    deadline = time.monotonic() + 60
    for node in bootstrap.split(","):
        one = AdminClient({"bootstrap.servers": node})
        while True:
            t = one.list_topics(name, timeout=10).topics.get(name)
            listed = t is not None and t.error is None and len(t.partitions) == partitions
            if listed and all(p.leader >= 0 for p in t.partitions.values()):
                break
            assert time.monotonic() < deadline, f"{name} not listed by {node} within 60 s"
            time.sleep(0.2)


def overrides(bootstrap: str, topic: str) -> dict[str, str]:
    """The configs set on the topic (what kafka-configs.sh --describe lists for it)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(10)
    return {
        k: str(e.value) for k, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }


def test_kmirror_topic_uses_the_replication_factor_it_is_given(brokers, files, capsys, monkeypatch):
    # The role passes the source's replication_factor from the inventory (test_role_expressions.py).
    create(brokers["source"], "replicated", 2, {})
    done = run_module(
        topic_module, {**files, "topics": ["replicated"], "replication_factor": 2}, capsys, monkeypatch
    )
    assert done["changed"] is True and [c["name"] for c in done["created"]] == ["replicated"]
    assert replicas(brokers, "replicated") == [2, 2]  # not the three nodes' default of three
    default = run_module(topic_module, {**files, "topics": ["orders.cancelled"]}, capsys, monkeypatch)
    assert not default.get("failed"), default
    assert replicas(brokers, "orders.cancelled") == [3, 3]  # -1: the target's default


def test_kmirror_topic_brings_existing_topics_in_step(brokers, files, capsys, monkeypatch):
    create(
        brokers["source"],
        "existing",
        2,
        {"retention.ms": "1000", "compression.type": "zstd", "min.insync.replicas": "1"},
    )
    # Made on the target earlier: one partition, a longer retention, a segment.ms and a cleaner ratio the
    # source topic does not set, and the target's own durability.
    create(
        brokers["target"],
        "existing",
        1,
        {
            "retention.ms": "5000",
            "segment.ms": "60000",
            "min.cleanable.dirty.ratio": "0.2",
            "min.insync.replicas": "2",
        },
    )
    args = {**files, "topics": ["existing"], "_ansible_diff": True}

    plan = run_module(topic_module, {**args, "_ansible_check_mode": True}, capsys, monkeypatch)
    assert plan["changed"] is True and plan["created"] == []
    assert plan["altered"] == {
        "existing": {"set": {"compression.type": "zstd"}, "delete": ["min.cleanable.dirty.ratio"]}
    }
    # Protected (docs/security.md): a shorter retention would delete the copy's records, and a segment.ms the
    # source does not set is not removed (the target's default may be shorter).
    held = {
        "retention.ms": {"source": "1000", "kept": "5000"},
        "segment.ms": {"source": None, "kept": "60000"},
    }
    assert plan["held"] == {"existing": held}
    assert plan["partitions_added"] == {"existing": 2}
    assert (
        "existing partitions=1 compression.type=(unset),min.cleanable.dirty.ratio=0.2"
        in plan["diff"]["before"]
    )
    assert "existing partitions=2 compression.type=zstd" in plan["diff"]["after"]
    assert "compression.type" not in overrides(brokers["target"], "existing")  # check mode changed nothing

    done = run_module(topic_module, args, capsys, monkeypatch)
    assert done["changed"] is True
    assert done["partitions_added"] == {"existing": 2} and done["mismatched"] == {}
    assert target_topics(brokers, "existing")["existing"] == 2
    # compression.type as on the source, min.cleanable.dirty.ratio back to the target's default, the
    # protected ones kept, and the target's own durability setting kept (not a replicable config).
    assert overrides(brokers["target"], "existing") == {
        "retention.ms": "5000",
        "segment.ms": "60000",
        "compression.type": "zstd",
        "min.insync.replicas": "2",
    }
    again = run_module(topic_module, args, capsys, monkeypatch)
    assert again["changed"] is False and again["altered"] == {} and again["held"] == {"existing": held}

    # With nothing protected (the source's config_properties_protect: none) every change follows.
    unguarded = {**args, "config_properties_protect": "none"}
    done = run_module(topic_module, unguarded, capsys, monkeypatch)
    assert done["altered"] == {"existing": {"set": {"retention.ms": "1000"}, "delete": ["segment.ms"]}}
    assert done["held"] == {}
    assert overrides(brokers["target"], "existing") == {
        "retention.ms": "1000",
        "compression.type": "zstd",
        "min.insync.replicas": "2",
    }
    again = run_module(topic_module, unguarded, capsys, monkeypatch)
    assert again["changed"] is False and again["altered"] == {}
    assert again["diff"]["before"] == "existing partitions=2\n"


def test_kmirror_topic_refuses_a_bad_protected_list_in_one_line(brokers, files, capsys, monkeypatch):
    out = run_module(
        topic_module,
        {**files, "topics": ["orders.cancelled"], "config_properties_protect": "retention.(ms"},
        capsys,
        monkeypatch,
    )
    assert out["failed"] is True and out["msg"].startswith("--config.properties.protect: ")
    assert "\n" not in out["msg"]


def test_kmirror_topic_reports_partitions_the_target_refuses(
    clusters, brokers, files, tmp_path, capsys, monkeypatch
):
    # The module connects as the mirror does: the mirror user with the role's target bindings, and an
    # operator's DENY of ALTER on this topic.
    target = clusters["target"]
    granted = run_module(
        acl_module,
        {
            "side": "target",
            "principal": f"User:{MIRROR}",
            "whitelist": "narrow",
            "admin_config": admin_conf(target),
        },
        capsys,
        monkeypatch,
    )
    assert granted["changed"] is True, granted
    deny = AclBinding(
        ResourceType.TOPIC,
        "narrow",
        ResourcePatternType.LITERAL,
        f"User:{MIRROR}",
        "*",
        AclOperation.ALTER,
        AclPermissionType.DENY,
    )
    admin = AdminClient(admin_conf(target))  # kept until the answer came
    for f in admin.create_acls([deny]).values():
        f.result(10)
    create(brokers["source"], "narrow", 3, {})
    create(brokers["target"], "narrow", 1, {})
    target_topics(brokers, "narrow")
    producer = tmp_path / "mirror-producer.properties"
    producer.write_text(
        f"bootstrap.servers={target.listener('SASL_PLAINTEXT')}\nsecurity.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism=SCRAM-SHA-512\nsasl.username={MIRROR}\nsasl.password={MIRROR_PASS}\n"
    )
    out = run_module(
        topic_module, {**files, "producer_config": str(producer), "topics": ["narrow"]}, capsys, monkeypatch
    )
    # Reported with the broker's reason (and as a warning), not a failure.
    assert not out.get("failed"), out
    assert out["partitions_added"] == {}
    assert out["mismatched"] == {
        "narrow": {"source": 3, "target": 1, "reason": "Broker: Topic authorization failed"}
    }
    assert target_topics(brokers)["narrow"] == 1


def test_kmirror_topic_reports_a_broker_it_cannot_reach(files, tmp_path, capsys, monkeypatch):
    dead = tmp_path / "dead.properties"
    dead.write_text("bootstrap.servers=127.0.0.1:9\nsocket.connection.setup.timeout.ms=1000\n")
    out = run_module(topic_module, {**files, "producer_config": str(dead), "timeout": 3}, capsys, monkeypatch)
    assert out["failed"] is True


def test_kmirror_group_lag_of_a_group_that_never_committed(brokers, files, capsys, monkeypatch):
    out = run_module(
        lag_module,
        {"consumer_config": files["consumer_config"], "whitelist": "orders.*", "_ansible_check_mode": True},
        capsys,
        monkeypatch,
    )
    assert out["changed"] is False and out["group"] == "kmirror-test"
    assert out["consuming"] is False and out["committed_partitions"] == 0
    assert len(out["partitions"]) == 5  # 3 + 2 partitions of the selected topics
    assert out["total_lag"] == 5  # the five records, none committed


def acls_of(c: KafkaCluster, principal: str) -> set[str]:
    """The principal's bindings as Kafka lists them (kafka-acls.sh --list --principal)."""
    admin = AdminClient(admin_conf(c))
    flt = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        principal,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    found = admin.describe_acls(flt, request_timeout=10).result()
    return {f"{a.operation.name} {a.restype.name} {a.resource_pattern_type.name} {a.name}" for a in found}


def test_kmirror_acl_check_mode_then_grant_then_idempotent_then_revoke(clusters, capsys, monkeypatch):
    source = clusters["source"]
    args = {
        "side": "source",
        "principal": "User:mirror-east",
        "whitelist": "orders.*,payments",
        "group": "kmirror-east",
        "admin_config": admin_conf(source),
        "_ansible_diff": True,
    }
    plan = run_module(acl_module, {**args, "_ansible_check_mode": True}, capsys, monkeypatch)
    assert plan["changed"] is True
    # READ, DESCRIBE, DESCRIBE_CONFIGS x 2 patterns + READ on the group
    assert len(plan["to_create"]) == 2 * 3 + 1 and plan["to_create"] == plan["bindings"]
    assert "ALLOW User:mirror-east from *: READ on GROUP LITERAL 'kmirror-east'" in plan["diff"]["after"]
    assert plan["diff"]["before"] == ""
    assert acls_of(source, "User:mirror-east") == set()  # check mode changed nothing

    done = run_module(acl_module, args, capsys, monkeypatch)
    assert done["changed"] is True and done["to_create"] == plan["to_create"]
    want = {
        "READ GROUP LITERAL kmirror-east",
        *(
            f"{op} TOPIC {kind} {name}"
            for op in ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")
            for kind, name in (("PREFIXED", "orders"), ("LITERAL", "payments"))
        ),
    }
    assert acls_of(source, "User:mirror-east") == want

    again = run_module(acl_module, {**args, "_ansible_check_mode": True}, capsys, monkeypatch)
    assert again["changed"] is False and again["to_create"] == []
    assert again["diff"]["before"] == again["diff"]["after"]

    gone = run_module(acl_module, {**args, "state": "absent"}, capsys, monkeypatch)
    assert gone["changed"] is True and len(gone["to_delete"]) == len(want)
    assert acls_of(source, "User:mirror-east") == set()


def test_kmirror_acl_with_an_admin_that_may_not_change_acls(clusters, capsys, monkeypatch):
    # admin_config logs in as the mirror user, no administrator: the authorizer refuses its CreateAcls
    # (ALTER on the cluster); the task fails with one line naming the fix, and nothing is granted.
    target = clusters["target"]
    out = run_module(
        acl_module,
        {
            "side": "target",
            "principal": "User:mirror-west",
            "whitelist": "orders.*",
            "admin_config": admin_conf(target, MIRROR, MIRROR_PASS),
        },
        capsys,
        monkeypatch,
    )
    assert out["failed"] is True
    assert out["msg"] == (
        "ACL request failed: Broker: Cluster authorization failed: the principal of admin_config may not "
        "change ACLs; give admin_config the credentials of a super user or of a principal with ALTER "
        "(and DESCRIBE) on the cluster"
    )
    assert acls_of(target, "User:mirror-west") == set()


@pytest.mark.parametrize("whitelist", ["", "   "], ids=["empty", "blank"])
def test_kmirror_acl_refuses_an_empty_or_blank_whitelist_and_grants_nothing(
    clusters, capsys, monkeypatch, whitelist
):
    """Issue 34, item 11: granted as every topic before (WRITE, CREATE, ALTER, ALTER_CONFIGS, READ on TOPIC
    LITERAL *); now the worker's refusal, and nothing on the cluster."""
    target = clusters["target"]
    principal = f"User:mirror-blank-{len(whitelist)}"
    args = {
        "side": "target",
        "principal": principal,
        "whitelist": whitelist,
        "admin_config": admin_conf(target),
    }
    out = run_module(acl_module, args, capsys, monkeypatch)
    assert out["failed"] is True
    assert out["msg"].startswith(
        f"whitelist: empty topic pattern {whitelist!r} (MirrorMaker matched no topic"
    )
    assert acls_of(target, principal) == set()


def acl_role_vars(clusters: dict[str, KafkaCluster], principal: str, west_whitelist: str) -> dict:
    source, target = clusters["source"], clusters["target"]

    def src(name: str, whitelist: str) -> dict:
        return {
            "name": name,
            "bootstrap_servers": source.bootstrap,
            "group_id": f"kmirror-{name}",
            "whitelist": whitelist,
            "acl_principal": principal,
            "acl_admin_properties": admin_conf(source),
        }

    return {
        "kmirror_common_venv": str(Path(sys.executable).parents[1]),  # this venv: kmirror, confluent-kafka
        "kmirror_target_cluster": {
            "name": "target",
            "bootstrap_servers": target.bootstrap,
            "acl_principal": principal,
            "acl_admin_properties": admin_conf(target),
        },
        "kmirror_source_clusters": [src("east", "orders.*"), src("west", west_whitelist)],
    }


@pytest.mark.parametrize("whitelist", ["", "   "], ids=["empty", "blank"])
def test_the_acls_role_refuses_an_empty_or_blank_whitelist_before_granting_anything(
    clusters, tmp_path, whitelist
):
    """The role for real (ansible-playbook, the module against these brokers): east's whitelist is good,
    west's is refused; the play stops at the check with the worker's message, before east's grants too."""
    principal = f"User:mirror-role-{len(whitelist)}"
    proc = run_role(tmp_path, "kmirror_acls", acl_role_vars(clusters, principal, whitelist))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert first_failure(out) == (
        "kmirror_acls : Check the whitelists of the sources (the worker's rule)",
        f"kmirror_source_clusters[1] (west): whitelist: empty topic pattern {whitelist!r} (MirrorMaker "
        "matched no topic with it); give whitelist '.*' for every topic, or the names you mean, e.g. "
        "whitelist 'orders.*' (no ACL was granted)",
    )
    assert acls_of(clusters["source"], principal) == set()
    assert acls_of(clusters["target"], principal) == set()


def test_the_acls_role_grants_good_whitelists(clusters, tmp_path):
    """The same run with west's whitelist set: the check lets it through and the role grants for real (so the
    refusals above are the check's, not a broken harness)."""
    principal = "User:mirror-role-ok"
    proc = run_role(tmp_path, "kmirror_acls", acl_role_vars(clusters, principal, "payments"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    topics = {"PREFIXED orders", "LITERAL payments"}
    assert acls_of(clusters["source"], principal) == {
        *(f"{op} TOPIC {t}" for op in ("READ", "DESCRIBE", "DESCRIBE_CONFIGS") for t in topics),
        "READ GROUP LITERAL kmirror-east",
        "READ GROUP LITERAL kmirror-west",
    }
    target_ops = ("WRITE", "DESCRIBE", "CREATE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALTER", "READ")
    assert acls_of(clusters["target"], principal) == {f"{op} TOPIC {t}" for op in target_ops for t in topics}
