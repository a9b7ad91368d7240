"""`kmirror failback` on Apache Kafka: after a failover from east to west with provenance headers on and
writes on both sides of the cut, east's unmirrored tail is named exactly (and quarantined once), west's
writes since the failover are named, and the reverse mirror brings exactly those back: every record ends
up on east once, or is reported."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer
from mirror_harness import (
    KMIRROR,
    Worker,
    consumer_file,
    create_topic,
    producer_file,
    read_all,
    run_args,
    wait_until,
)

from kmirror.testing.kafka import KafkaCluster

TOPIC = "orders"
PARTITIONS = 3
MIRRORED, TAIL, NEW = 300, 50, 40  # per partition
EARLIEST = "auto.offset.reset=earliest\n"


def write(cluster: KafkaCluster, side: str, first: int, n: int) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for i in range(first, first + n):
        for part in range(PARTITIONS):
            p.produce(TOPIC, b"%s:%d:%d" % (side.encode(), part, i), b"k%d" % i, part)
    assert p.flush(30) == 0


def values(cluster: KafkaCluster, topic: str, expected: int) -> Counter[bytes]:
    return Counter(r.value or b"" for r in read_all(cluster, [topic], expected, timeout=60))


def failback(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *KMIRROR, "failback", "--old.config", str(tmp_path / "east" / "consumer.properties"),
            "--new.config", str(tmp_path / "east" / "producer.properties"), "--topics", TOPIC, *extra,
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_failback_names_the_tail_and_brings_back_exactly_the_new_writes(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[Worker]
) -> None:
    east, west = kafka["source"], kafka["target"]
    create_topic(east, TOPIC, PARTITIONS)
    (tmp_path / "east").mkdir()
    (tmp_path / "west").mkdir()
    forward = Worker(
        tmp_path,
        run_args(
            consumer_file(tmp_path / "east", east, group="kmirror-east"),
            producer_file(tmp_path / "east", west),
            "--whitelist", TOPIC, "--num.streams", "1", "--provenance.header.enable", "true",
        ),
        name="forward",
    )  # fmt: skip
    workers.append(forward)
    write(east, "east", 0, MIRRORED)
    wait_until(lambda: len(read_all(west, [TOPIC], 0, timeout=20)) >= MIRRORED * PARTITIONS, 120, "mirrored")
    forward.kill9()  # east is lost: what it receives from now on is never mirrored
    write(east, "east", MIRRORED, TAIL)  # the tail: written on east, never copied
    write(west, "west", 0, NEW)  # the applications, failed over, write on west

    out = failback(tmp_path, "--json")
    assert out.returncode == 1, out.stdout + out.stderr  # a tail exists
    parts = json.loads(out.stdout)["partitions"]
    assert [(p["topic"], p["partition"]) for p in parts] == [(TOPIC, i) for i in range(PARTITIONS)]
    for p in parts:
        tail = (p["copied_through"], p["old_end"], p["tail_records"])
        assert tail == (MIRRORED - 1, MIRRORED + TAIL, TAIL), p
        new = (p["last_copy_at"], p["new_end"], p["new_records"])
        assert new == (MIRRORED - 1, MIRRORED + NEW, NEW), p

    # The tail to a quarantine topic on east, once: a second run copies nothing more.
    for _ in range(2):
        out = failback(tmp_path, "--quarantine")
        assert out.returncode == 1, out.stdout + out.stderr
        assert f"failback: {TAIL * PARTITIONS} records on the old primary were never mirrored" in out.stdout
        quarantined = values(east, f"{TOPIC}.failback-tail", TAIL * PARTITIONS)
        want = {b"east:%d:%d" % (p, i) for p in range(PARTITIONS) for i in range(MIRRORED, MIRRORED + TAIL)}
        assert set(quarantined) == want and set(quarantined.values()) == {1}, quarantined.most_common(3)

    # The reverse mirror, from west's earliest offset: only what was written on west comes back.
    reverse = Worker(
        tmp_path,
        run_args(
            consumer_file(tmp_path / "west", west, group="kmirror-failback", extra=EARLIEST),
            producer_file(tmp_path / "west", east),
            "--whitelist", TOPIC, "--num.streams", "1", "--provenance.header.enable", "true",
        ),
        name="reverse",
    )  # fmt: skip
    workers.append(reverse)
    total = (MIRRORED + TAIL + NEW) * PARTITIONS
    wait_until(lambda: len(read_all(east, [TOPIC], 0, timeout=20)) >= total, 120, "west's writes on east")
    time.sleep(5)
    on_east = values(east, TOPIC, total)
    own = {b"east:%d:%d" % (p, i) for p in range(PARTITIONS) for i in range(MIRRORED + TAIL)}
    back = {b"west:%d:%d" % (p, i) for p in range(PARTITIONS) for i in range(NEW)}
    assert set(on_east) == own | back, (len(set(on_east) - own - back), len(own | back - set(on_east)))
    assert set(on_east.values()) == {1}, on_east.most_common(3)
    assert reverse.stop() == 0
    assert f"skipped_origin={MIRRORED * PARTITIONS}" in reverse.log(), reverse.log()[-2000:]
    # Now the failback has nothing left to report but the tail, and no new writes.
    out = failback(tmp_path)
    assert f"new primary new writes {NEW}" in out.stdout, out.stdout
