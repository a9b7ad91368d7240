"""The ACLs the kmirror_acls role grants, applied by its own module to Apache Kafka with the authorizer on.

Source and target (Kafka 4.3, one node each) run the StandardAuthorizer with ``User:admin`` as super user;
the test's own admin work (granting, revoking) logs in as ``admin`` over SASL_PLAINTEXT/SCRAM-SHA-512. The
mirror logs in as ``User:mirror-src`` on the source and ``User:mirror-tgt`` on the target and gets
exactly the bindings roles/kmirror_acls/library/kmirror_acl.py computes and creates (not check mode).
The tests' producers and readers use the PLAINTEXT listener (``User:ANONYMOUS``, a super user so that
the brokers' own PLAINTEXT traffic is allowed).

``test_each_removed_acl`` removes one binding at a time and records what the mirror does: a finding
either way (see OUTCOMES).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AclBindingFilter,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)
from mirror_harness import (
    TEST_CONSUMER_EXTRA,
    Worker,
    assert_mirrored,
    create_topic,
    make_records,
    produce,
    read_all,
    run_args,
    write,
)
from tls_fixtures import scram_jaas

from kmirror.testing.kafka import KafkaCluster, ScramUser, Security, running

ROOT = Path(__file__).resolve().parents[3]
ADMIN, ADMIN_PASS = "admin", "admin-secret"
SRC_USER, SRC_PASS = "mirror-src", "src-secret"
TGT_USER, TGT_PASS = "mirror-tgt", "tgt-secret"
GROUP = "mirror-acl"
WHITELIST = "acl.*"


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


bindings_mod = _load(ROOT / "roles/kmirror_acls/module_utils/kmirror_acl_bindings.py", "kmirror_acl_bindings")
sys.modules["ansible.module_utils.kmirror_acl_bindings"] = bindings_mod
acl_module = _load(ROOT / "roles/kmirror_acls/library/kmirror_acl.py", "kmirror_acl_module")


def run_module(args: dict[str, Any]) -> dict[str, Any]:
    """The module's main() in this process, as Ansible would run it."""
    from ansible.module_utils import basic
    from ansible.module_utils.common.text.converters import to_bytes

    saved = getattr(basic, "_ANSIBLE_ARGS", None), getattr(basic, "_ANSIBLE_PROFILE", None)
    basic._ANSIBLE_ARGS = to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    basic._ANSIBLE_PROFILE = "legacy"  # type: ignore[attr-defined]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            acl_module.main()
    finally:
        basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE = saved  # type: ignore[attr-defined]
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def admin_conf(c: KafkaCluster) -> dict[str, str]:
    return {
        "bootstrap.servers": c.listener("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": ADMIN,
        "sasl.password": ADMIN_PASS,
    }


def module_args(side: str, c: KafkaCluster, **extra: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "side": side,
        "principal": f"User:{SRC_USER if side == 'source' else TGT_USER}",
        "whitelist": WHITELIST,
        "admin_config": admin_conf(c),
        **extra,
    }
    if side == "source":
        args["group"] = GROUP
    return args


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, KafkaCluster]]:
    def security(user: str, password: str) -> Security:
        return Security(
            sasl_plaintext=True,
            scram=(ScramUser(ADMIN, ADMIN_PASS), ScramUser(user, password)),
            super_users=(f"User:{ADMIN}",),
        )

    cs = {
        "source": KafkaCluster("source", security=security(SRC_USER, SRC_PASS)),
        "target": KafkaCluster("target", security=security(TGT_USER, TGT_PASS)),
    }
    with running(cs, tmp_path_factory.mktemp("brokers")):
        yield cs


@pytest.fixture(scope="module")
def granted(clusters: dict[str, KafkaCluster]) -> dict[str, list[dict[str, str]]]:
    """The role's module grants the bindings on each cluster; a second run has nothing to do."""
    t0 = time.monotonic()
    out = {side: run_module(module_args(side, clusters[side])) for side in ("source", "target")}
    took = time.monotonic() - t0
    for r in out.values():
        assert not r.get("failed"), r
        assert r["changed"] and r["to_create"] == r["bindings"], r
    assert len(out["source"]["bindings"]) == 4 and len(out["target"]["bindings"]) == 6
    again = {side: run_module(module_args(side, clusters[side])) for side in ("source", "target")}
    assert not any(r["changed"] or r["to_create"] for r in again.values()), again
    print(f"ACLs granted by kmirror_acl in {took:.2f} s")
    return {side: r["bindings"] for side, r in out.items()}


def mirror_files(tmp_path: Path, clusters: dict[str, KafkaCluster]) -> tuple[Path, Path]:
    sasl = "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
    consumer = write(
        tmp_path / "source.properties",
        f"bootstrap.servers={clusters['source'].listener('SASL_PLAINTEXT')}\ngroup.id={GROUP}\n"
        f"{TEST_CONSUMER_EXTRA}{sasl}sasl.jaas.config={scram_jaas(SRC_USER, SRC_PASS)}\n",
    )
    producer = write(
        tmp_path / "target.properties",
        f"bootstrap.servers={clusters['target'].listener('SASL_PLAINTEXT')}\n{sasl}"
        f"sasl.jaas.config={scram_jaas(TGT_USER, TGT_PASS)}\n",
    )
    return consumer, producer


def topic_config(c: KafkaCluster, topic: str, key: str) -> str | None:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})  # kept until the answer came
    got = admin.describe_configs([res])[res].result(10)
    entry = got.get(key)
    return None if entry is None else str(entry.value)


def wait_for(what: str, predicate: Any, timeout: float) -> float:
    t0 = time.monotonic()
    while not predicate():
        assert time.monotonic() - t0 < timeout, f"no {what} within {timeout} s"
        time.sleep(0.2)
    return time.monotonic() - t0


def test_mirror_does_its_whole_job_with_exactly_the_roles_acls(
    tmp_path: Path,
    clusters: dict[str, KafkaCluster],
    granted: dict[str, list[dict[str, str]]],
    workers: list[Worker],
) -> None:
    source, target = clusters["source"], clusters["target"]
    topic = "acl.orders"
    create_topic(source, topic, 3, {"max.message.bytes": "200000"})
    records = make_records(topic, 3, 100)
    produce(source, records)
    consumer, producer = mirror_files(tmp_path, clusters)
    t0 = time.monotonic()
    w = Worker(tmp_path, run_args(consumer, producer, "--whitelist", WHITELIST, "--num.streams", "1"))
    workers.append(w)
    assert_mirrored(records, read_all(target, [topic], len(records), timeout=60), exact=True)
    mirrored = time.monotonic() - t0
    # Created by the mirror (CREATE) with the source's configs (DESCRIBE_CONFIGS on the source).
    assert topic_config(target, topic, "max.message.bytes") == "200000"
    # A config changed on the source reaches the target (DESCRIBE_CONFIGS, ALTER_CONFIGS on the target).
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.bytes", "123456789", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    admin.incremental_alter_configs([res])[res].result(10)
    synced = wait_for(
        "config sync", lambda: topic_config(target, topic, "retention.bytes") == "123456789", 30
    )
    # Offsets committed on the source (READ on the group): the group is at the end of every partition.
    c = Consumer({"bootstrap.servers": source.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:

        def at_end() -> bool:
            got = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
            return all(tp.offset == 100 for tp in got)

        committed = wait_for("commits at the end", at_end, 30)
    finally:
        c.close()
    assert w.stop() == 0, w.log()
    assert "authorization" not in w.log().lower(), w.log()
    print(
        f"with the role's ACLs: 300 records identical {mirrored:.1f} s after start, config change synced in "
        f"{synced:.1f} s, commits at the end {committed:.1f} s after that"
    )


# What the mirror does when one binding is removed (the others kept), found on Kafka 4.3:
# ("exit", pattern of its one ERROR line), ("mirrors", why the binding was not needed here), or
# ("stalls", pattern of the warning it logs while it neither mirrors nor exits).
OUTCOMES: dict[tuple[str, str, str], tuple[str, str]] = {
    ("source", "GROUP", "READ"): ("stalls", r"FindCoordinator response error: Group authorization failed"),
    ("source", "TOPIC", "READ"): (
        "stalls",
        r"Fetch from broker \d+ failed: Broker: Topic authorization failed",
    ),
    ("source", "TOPIC", "DESCRIBE"): ("mirrors", "READ implies DESCRIBE"),
    ("source", "TOPIC", "DESCRIBE_CONFIGS"): ("exit", r"source#0: Kafka error: Topic authorization failed"),
    ("target", "TOPIC", "CREATE"): (
        "exit",
        r"could not create destination topic 'acl\.rm-[^']*' on the target: "
        r"Authorization failed\.; grant the mirror principal CREATE",
    ),
    ("target", "TOPIC", "WRITE"): (
        "exit",
        r"source#0: Kafka error: Failed to acquire idempotence PID .*Cluster authorization failed",
    ),
    ("target", "TOPIC", "DESCRIBE"): ("mirrors", "WRITE implies DESCRIBE"),
    ("target", "TOPIC", "DESCRIBE_CONFIGS"): ("mirrors", "ALTER_CONFIGS implies DESCRIBE_CONFIGS"),
    ("target", "TOPIC", "ALTER_CONFIGS"): ("mirrors", "created with its configs: nothing to alter"),
    ("target", "TOPIC", "ALTER"): ("mirrors", "no partitions to add"),
}  # fmt: skip
STALL_S = 20.0


@pytest.mark.parametrize("key", list(OUTCOMES), ids="-".join)
def test_each_removed_acl(
    tmp_path: Path,
    clusters: dict[str, KafkaCluster],
    granted: dict[str, list[dict[str, str]]],
    key: tuple[str, str, str],
) -> None:
    side, resource_type, operation = key
    cluster = clusters[side]
    (bd,) = [b for b in granted[side] if (b["resource_type"], b["operation"]) == (resource_type, operation)]
    binding = acl_module.to_kafka(bindings_mod.Binding(**bd))
    admin = AdminClient(admin_conf(cluster))
    flt = AclBindingFilter(
        binding.restype,
        binding.name,
        binding.resource_pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission_type,
    )
    (deleted,) = admin.delete_acls([flt]).values()
    assert len(deleted.result()) == 1
    try:
        topic = f"acl.rm-{'-'.join(key)}"
        create_topic(clusters["source"], topic, 1, {"max.message.bytes": "300000"})
        records = make_records(topic, 1, 5)
        produce(clusters["source"], records)
        consumer, producer = mirror_files(tmp_path, clusters)
        t0 = time.monotonic()
        w = Worker(tmp_path, run_args(consumer, producer, "--whitelist", WHITELIST, "--num.streams", "1"))
        kind, detail = OUTCOMES[key]
        try:
            if kind == "exit":
                rc = w.proc.wait(STALL_S)
                took = time.monotonic() - t0
                errors = [line for line in w.log().splitlines() if " ERROR " in line]
                assert rc == 1 and len(errors) == 1 and re.search(detail, errors[0]), w.log()
                what = f"exit {rc} after {took:.1f} s: {errors[0].split(': ', 1)[1]}"
            elif kind == "mirrors":
                got = read_all(clusters["target"], [topic], len(records), timeout=STALL_S)
                assert_mirrored(records, got)
                what = f"mirrors anyway ({detail}) in {time.monotonic() - t0:.1f} s"
            else:
                with pytest.raises(subprocess.TimeoutExpired):
                    w.proc.wait(STALL_S)
                log = w.log()
                warnings = re.findall(detail, log)
                assert warnings, log
                assert not read_all(clusters["target"], [topic], 0, timeout=3), "records arrived"
                what = (
                    f"no exit, nothing mirrored after {STALL_S:.0f} s; {len(warnings)} warning line(s) "
                    f"'{detail}'; nothing else says which ACL"
                )
        finally:
            if w.proc.poll() is None:
                w.stop(signal.SIGTERM, 60)
        acl = f"{bd['operation']} on {bd['resource_type']} {bd['pattern_type']} {bd['name']!r}"
        print(f"without {acl} ({side}): {what}")
    finally:
        for f in admin.create_acls([binding]).values():
            f.result()
