#!/usr/bin/env python3
"""The audit scenario's records: a topic on the source cluster and its exact copy on the target, and a
record planted on the source only. Runs on the controller with the project's venv (confluent-kafka).

    audit_fixture.py fill --state-dir DIR       prepare.yml: 'orders' (3 partitions), 300 records, both sides
    audit_fixture.py plant --state-dir DIR      verify: one more record on the source only; prints it (JSON)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

TOPIC = "orders"
PARTITIONS = 3
RECORDS = 300


def clusters(state: Path) -> dict[str, str]:
    return json.loads((state / "clusters.json").read_text())


def produce(bootstrap: str, records: list[tuple[int, bytes, bytes, int]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for partition, key, value, ts in records:
        p.produce(TOPIC, value, key, partition, timestamp=ts)
    if p.flush(30):
        raise SystemExit(f"records not delivered to {bootstrap}")


def fill(state: Path) -> None:
    c = clusters(state)
    now = int(time.time() * 1000)
    # 30 minutes of records, ending 10 minutes ago: older than any grace window the scenario uses.
    records = [
        (i % PARTITIONS, b"k%d" % i, b"order %d" % i, now - 40 * 60_000 + i * 6_000) for i in range(RECORDS)
    ]
    for name in ("east", "target"):
        admin = AdminClient({"bootstrap.servers": c[name]})
        for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
            f.result()
        produce(c[name], records)


def plant(state: Path) -> None:
    c = clusters(state)
    record = (1, b"planted", b"only on the source", int(time.time() * 1000) - 20 * 60_000)
    produce(c["east"], [record])
    json.dump({"partition": 1, "offset": RECORDS // PARTITIONS, "key": "planted"}, sys.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("action", choices=["fill", "plant"])
    ap.add_argument("--state-dir", type=Path, required=True)
    a = ap.parse_args()
    {"fill": fill, "plant": plant}[a.action](a.state_dir)


if __name__ == "__main__":
    main()
