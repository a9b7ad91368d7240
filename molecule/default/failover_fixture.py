#!/usr/bin/env python3
"""The failover step of molecule scenario default (failover.yml): an application group on a source cluster,
and the check that playbooks/failover.yml left it at the same position on the target.

    python failover_fixture.py consume --state-dir DIR --cluster south --group app-south --topic shipments
    python failover_fixture.py check --state-dir DIR --source south --target target --group app-south \
        --topic shipments

`consume` reads the topic to its end as the group and commits; `check` compares the group's committed offsets
on the source and the target: the target topic was empty before mirroring and the group committed where the
mirror has a sync point (its commit after copying everything), so the translation is exact.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kafka_fixture as kf


def consume(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "session.timeout.ms": 6000,
        }
    )
    parts: set[int] = set()
    c.subscribe([topic], on_assign=lambda _c, ps: parts.update(tp.partition for tp in ps))
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and (not parts or at_end < parts):
            for m in c.consume(500, 0.2):
                if m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
        if not parts or at_end < parts:
            raise SystemExit(f"group {group} did not reach the end of {topic}")
        positions = c.position([TopicPartition(topic, p) for p in sorted(parts)])
        c.commit(offsets=positions, asynchronous=False)
        return {tp.partition: tp.offset for tp in positions}
    finally:
        c.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["consume", "check"])
    ap.add_argument("--state-dir", type=Path, required=True)
    ap.add_argument("--cluster", help="consume: the source cluster")
    ap.add_argument("--source")
    ap.add_argument("--target")
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    a = ap.parse_args()
    info = kf.clusters(a.state_dir)
    if a.command == "consume":
        print(json.dumps(consume(info[a.cluster], a.group, a.topic)))
        return 0
    partitions = kf.topic_partitions(info[a.source])[a.topic]
    src = committed(info[a.source], a.group, a.topic, partitions)
    tgt = committed(info[a.target], a.group, a.topic, partitions)
    print(json.dumps({"source": src, "target": tgt}))
    if src != tgt or min(src.values()) < 0:
        print(f"group {a.group}: target offsets {tgt} differ from source offsets {src}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
