#!/usr/bin/env python3
"""Scenario bidirectional's Kafka fixture: the topic events on both clusters, writing it, reading it whole.

Used by prepare.yml (``python pair_fixture.py topics --state-dir DIR``) and imported by the testinfra test.
Runs on the controller with the project's venv (confluent-kafka).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TOPIC = "events"
PARTITIONS = 3
CLUSTERS = ("east", "west")


def clusters(state: Path | None = None) -> dict[str, str]:
    state = state or Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "clusters"
    return json.loads((state / "clusters.json").read_text())


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if TOPIC not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS)], request_timeout=15)[TOPIC].result()


def produce(bootstrap: str, values: list[bytes]) -> None:
    """Write VALUES to events (acks=all), without keys: spread over the partitions."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    failures: list[str] = []
    for v in values:
        p.produce(TOPIC, value=v, on_delivery=lambda err, _msg: failures.append(str(err)) if err else None)
    if p.flush(30) or failures:
        raise RuntimeError(f"producing to {TOPIC} at {bootstrap} failed: {failures[:3]}")


def read_all(bootstrap: str, timeout: float = 30.0) -> list[bytes]:
    """Every record value in events now: each partition from its low to its high watermark."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "kmirror-molecule-verify", "enable.auto.commit": False}
    )
    values: list[bytes] = []
    try:
        md = c.list_topics(TOPIC, timeout=10).topics[TOPIC]
        ends: dict[int, int] = {}
        starts: list[TopicPartition] = []
        for p in md.partitions:
            low, high = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10, cached=False)
            if high > low:
                ends[p] = high
                starts.append(TopicPartition(TOPIC, p, low))
        c.assign(starts)
        left = set(ends)
        while left:
            m = c.poll(timeout)
            if m is None:
                raise RuntimeError(f"{TOPIC} at {bootstrap}: nothing read in {timeout} s from {sorted(left)}")
            if m.error() is not None:
                continue
            values.append(m.value() or b"")
            if m.offset() + 1 >= ends[m.partition()]:
                left.discard(m.partition())
    finally:
        c.close()
    return values


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("command", choices=["topics"])
    ap.add_argument("--state-dir", type=Path, default=None)
    a = ap.parse_args(argv)
    info = clusters(a.state_dir)
    try:
        for name in CLUSTERS:
            create_topic(info[name])
    except KafkaException as exc:
        print(f"pair_fixture: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({name: [TOPIC] for name in CLUSTERS}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
