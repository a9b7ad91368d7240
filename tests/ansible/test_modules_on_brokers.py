"""The project's Ansible modules against real (embedded) brokers: kmirror_topic, kmirror_group_lag,
kmirror_acl.

Each module runs in-process the way Ansible runs it (arguments in, one JSON result out), with check mode and
diff mode flags as Ansible passes them. The test brokers cannot store ACLs (create_acls aborts the client),
so kmirror_acl is run in check mode only: it reads the principal's bindings and reports its plan.
"""

from __future__ import annotations

import pytest
from ansible_harness import ROLES, load_module
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from test_acls import acl_module, run_module

# On the Tansu test broker until kmirror_acl runs against Kafka's authorizer (docs/testing.md).
from kmirror.testing.tansu import clusters

topic_module = load_module(ROLES / "kmirror_topics/library/kmirror_topic.py", "kmirror_topic_module")
lag_module = load_module(ROLES / "kmirror_lag/library/kmirror_group_lag.py", "kmirror_group_lag_module")

SOURCE_TOPICS = {
    "orders.created": (3, {"retention.ms": "86400000"}),
    "orders.cancelled": (2, {}),
    "other": (1, {}),
}


@pytest.fixture(scope="module")
def brokers():
    with clusters("source", "target") as started:
        source = started["source"].bootstrap
        admin = AdminClient({"bootstrap.servers": source})
        new = [NewTopic(t, n, config=c) for t, (n, c) in SOURCE_TOPICS.items()]
        for fut in admin.create_topics(new, request_timeout=15).values():
            fut.result()
        # one record per batch: the test broker's high watermark is only exact that way
        p = Producer({"bootstrap.servers": source, "linger.ms": 0, "batch.num.messages": 1, "acks": "all"})
        for i in range(5):
            p.produce("orders.created", key=str(i).encode(), value=b"v", partition=0)
            p.flush(10)
        yield {"source": source, "target": started["target"].bootstrap}


@pytest.fixture
def files(brokers, tmp_path):
    consumer = tmp_path / "consumer.properties"
    consumer.write_text(f"bootstrap.servers={brokers['source']}\ngroup.id=kmirror-test\n")
    producer = tmp_path / "producer.properties"
    producer.write_text(f"bootstrap.servers={brokers['target']}\n")
    return {"consumer_config": str(consumer), "producer_config": str(producer)}


def target_topics(brokers) -> dict[str, int]:
    md = AdminClient({"bootstrap.servers": brokers["target"]}).list_topics(timeout=10)
    return {t: len(m.partitions) for t, m in md.topics.items() if m.error is None}


def test_kmirror_topic_check_mode_then_create_then_idempotent(brokers, files, capsys, monkeypatch):
    args = {**files, "whitelist": "orders.*", "_ansible_diff": True}
    plan = run_module(topic_module, {**args, "_ansible_check_mode": True}, capsys, monkeypatch)
    assert plan["changed"] is True
    assert sorted(c["name"] for c in plan["created"]) == ["orders.cancelled", "orders.created"]
    assert "orders.created partitions=3 retention.ms=86400000" in plan["diff"]["after"]
    assert "orders.created" not in target_topics(brokers)  # check mode changed nothing

    done = run_module(topic_module, args, capsys, monkeypatch)
    assert done["changed"] is True and done["created"] == plan["created"]
    on_target = target_topics(brokers)
    assert on_target["orders.created"] == 3 and on_target["orders.cancelled"] == 2
    assert "other" not in on_target  # not selected by the whitelist

    again = run_module(topic_module, args, capsys, monkeypatch)
    assert again["changed"] is False and again["created"] == []
    assert again["present"] == {"orders.cancelled": 2, "orders.created": 3}
    assert again["diff"]["before"] == again["diff"]["after"]


def create(bootstrap: str, name: str, partitions: int, config: dict[str, str], replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, replication, config=config)]).values():
        fut.result()


def configs(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    return {k: v.value for f in described.values() for k, v in f.result().items()}


def test_kmirror_topic_uses_the_replication_factor_it_is_given(brokers, files, capsys, monkeypatch):
    # The role passes the source's replication_factor from the inventory (test_role_expressions.py).
    create(brokers["source"], "replicated", 2, {})
    done = run_module(
        topic_module, {**files, "topics": ["replicated"], "replication_factor": 3}, capsys, monkeypatch
    )
    assert done["changed"] is True and [c["name"] for c in done["created"]] == ["replicated"]
    md = AdminClient({"bootstrap.servers": brokers["target"]}).list_topics("replicated", timeout=10)
    # The test broker is one node but records the replica list it was asked for: three replicas each.
    assert [len(p.replicas) for p in md.topics["replicated"].partitions.values()] == [3, 3]


def test_kmirror_topic_brings_existing_topics_in_step(brokers, files, capsys, monkeypatch):
    create(brokers["source"], "existing", 2, {"retention.ms": "1000", "min.insync.replicas": "1"})
    # Made on the target earlier, with one partition, another retention and the target's own durability.
    create(brokers["target"], "existing", 1, {"retention.ms": "5000", "min.insync.replicas": "2"})
    args = {**files, "topics": ["existing"], "_ansible_diff": True}

    plan = run_module(topic_module, {**args, "_ansible_check_mode": True}, capsys, monkeypatch)
    assert plan["changed"] is True and plan["created"] == []
    assert plan["altered"] == {"existing": {"set": {"retention.ms": "1000"}, "delete": []}}
    assert plan["partitions_added"] == {"existing": 2}
    assert "existing partitions=1 retention.ms=5000" in plan["diff"]["before"]
    assert "existing partitions=2 retention.ms=1000" in plan["diff"]["after"]
    assert configs(brokers["target"], "existing")["retention.ms"] == "5000"  # check mode changed nothing

    done = run_module(topic_module, args, capsys, monkeypatch)
    assert done["changed"] is True
    on_target = configs(brokers["target"], "existing")
    assert on_target["retention.ms"] == "1000"
    assert on_target["min.insync.replicas"] == "2"  # not a replicable config: the target's own is kept
    # The test broker cannot add partitions: reported with its reason, as a warning, not a failure.
    assert done["partitions_added"] == {}
    assert done["mismatched"]["existing"]["source"] == 2 and done["mismatched"]["existing"]["target"] == 1
    assert "CreatePartitions" in done["mismatched"]["existing"]["reason"]

    again = run_module(topic_module, args, capsys, monkeypatch)
    assert again["changed"] is False and again["altered"] == {}
    assert again["diff"]["before"] == "existing partitions=1\n"


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


def test_kmirror_acl_check_mode_reads_and_plans(brokers, capsys, monkeypatch):
    out = run_module(
        acl_module,
        {
            "side": "source",
            "principal": "User:mirror-east",
            "whitelist": "orders.*,payments",
            "group": "kmirror-east",
            "admin_config": {"bootstrap.servers": brokers["source"]},
            "_ansible_check_mode": True,
            "_ansible_diff": True,
        },
        capsys,
        monkeypatch,
    )
    assert out["changed"] is True
    assert (
        len(out["to_create"]) == 2 * 3 + 1
    )  # READ, DESCRIBE, DESCRIBE_CONFIGS x 2 patterns + READ on the group
    assert "ALLOW User:mirror-east from *: READ on GROUP LITERAL 'kmirror-east'" in out["diff"]["after"]
