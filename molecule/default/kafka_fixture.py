#!/usr/bin/env python3
"""The molecule scenarios' Kafka fixture: embedded clusters' topics, records to mirror, and reading them back.

Used by prepare.yml (``python kafka_fixture.py topics --state-dir DIR``) and imported by the testinfra tests.
Runs on the controller with the project's venv (confluent-kafka).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

# Per source cluster: topic -> (partitions, explicitly set configs). Topics the mirror must copy, and
# topics its whitelist/blacklist must leave alone (MIRRORED says which).
SOURCE_TOPICS = {
    "east": {
        "orders.created": (3, {"retention.ms": "86400000"}),
        "orders.cancelled": (2, {}),
        "payments": (2, {"max.message.bytes": "2097152"}),
        "internal-east": (1, {}),
    },
    "west": {
        "clicks": (4, {"cleanup.policy": "compact"}),
        "clicks.private": (1, {}),
    },
    "south": {
        "shipments": (2, {"retention.ms": "172800000"}),
    },
}
MIRRORED = {
    "east": ["orders.cancelled", "orders.created", "payments"],
    "west": ["clicks"],
}
# Scenario default's side effect adds the source south with playbooks/add_source_cluster.yml, checks its
# records arrive, then removes it again with playbooks/remove_source_cluster.yml.
ADDED = {"south": ["shipments"]}


def state_dir() -> Path:
    return Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "clusters"


def clusters(state: Path | None = None) -> dict[str, str]:
    return json.loads(((state or state_dir()) / "clusters.json").read_text())


def _base(bootstrap: str, extra: dict | None = None) -> dict:
    return {"bootstrap.servers": bootstrap, **(extra or {})}


def create_topics(bootstrap: str, topics: dict, extra: dict | None = None) -> None:
    admin = AdminClient(_base(bootstrap, extra))
    existing = admin.list_topics(timeout=10).topics
    new = [NewTopic(t, n, config=dict(c)) for t, (n, c) in topics.items() if t not in existing]
    for fut in admin.create_topics(new, request_timeout=15).values() if new else []:
        fut.result()


def topic_partitions(bootstrap: str, extra: dict | None = None) -> dict[str, int]:
    md = AdminClient(_base(bootstrap, extra)).list_topics(timeout=10)
    return {t: len(m.partitions) for t, m in md.topics.items() if m.error is None}


def topic_configs(bootstrap: str, topic: str, extra: dict | None = None) -> dict[str, str]:
    admin = AdminClient(_base(bootstrap, extra))
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([res], request_timeout=10)[res].result()
    return {k: e.value for k, e in entries.items() if e.value is not None}


def produce(bootstrap: str, topic: str, count: int, extra: dict | None = None) -> set[bytes]:
    """Produce COUNT keyed records (acks=all); return their keys."""
    run = uuid.uuid4().hex[:8]
    keys = {f"{topic}-{run}-{i}".encode() for i in range(count)}
    p = Producer(_base(bootstrap, {"acks": "all", "linger.ms": 0, **(extra or {})}))
    failures: list[str] = []
    for k in sorted(keys):
        p.produce(
            topic,
            key=k,
            value=b"v-" + k,
            headers=[("origin", b"kmirror-molecule")],
            on_delivery=lambda err, msg: failures.append(str(err)) if err else None,
        )
    if p.flush(30) or failures:
        raise RuntimeError(f"producing to {topic} failed: {failures[:3]}")
    return keys


def collect(
    bootstrap: str, topic: str, keys: set[bytes], timeout: float = 60.0, extra: dict | None = None
) -> set[bytes]:
    """Read TOPIC from the beginning (no group) until every key in KEYS was seen; return those seen."""
    c = Consumer(
        _base(
            bootstrap, {"group.id": "kmirror-molecule-verify", "enable.auto.commit": False, **(extra or {})}
        )
    )
    seen: set[bytes] = set()
    try:
        deadline = time.monotonic() + timeout
        assigned = False
        while time.monotonic() < deadline and not keys <= seen:
            if not assigned:
                md = c.list_topics(topic, timeout=5).topics.get(topic)
                if md is not None and md.error is None and md.partitions:
                    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in md.partitions])
                    assigned = True
                else:
                    time.sleep(0.5)
                    continue
            m = c.poll(0.5)
            if m is not None and m.error() is None and m.key() in keys:
                seen.add(m.key())
    finally:
        c.close()
    return seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("command", choices=["topics", "produce", "collect"])
    ap.add_argument("--state-dir", type=Path, default=None)
    ap.add_argument("--extra", default="{}", help="JSON of extra client settings (TLS)")
    ap.add_argument("--cluster", help="produce/collect: the cluster's name in clusters.json")
    ap.add_argument("--topic", help="produce/collect: the topic")
    ap.add_argument("--count", type=int, default=20, help="produce: how many records")
    ap.add_argument("--keys-file", type=Path, help="produce writes the keys there; collect waits for them")
    ap.add_argument("--timeout", type=float, default=60.0, help="collect: seconds to wait")
    a = ap.parse_args(argv)
    info = clusters(a.state_dir)
    extra = json.loads(a.extra)
    try:
        if a.command == "produce":
            keys = produce(info[a.cluster], a.topic, a.count, extra)
            a.keys_file.write_text(json.dumps(sorted(k.decode() for k in keys)))
            print(json.dumps({"produced": len(keys), "cluster": a.cluster, "topic": a.topic}))
            return 0
        if a.command == "collect":
            keys = {k.encode() for k in json.loads(a.keys_file.read_text())}
            seen = collect(info[a.cluster], a.topic, keys, timeout=a.timeout, extra=extra)
            print(
                json.dumps({"expected": len(keys), "seen": len(seen), "cluster": a.cluster, "topic": a.topic})
            )
            return 0 if seen == keys else 1
        for name, topics in SOURCE_TOPICS.items():
            if name in info:  # a scenario may start only some of the clusters
                create_topics(info[name], topics, extra)
    except KafkaException as exc:
        print(f"kafka_fixture: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({n: sorted(t) for n, t in SOURCE_TOPICS.items() if n in info}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
