"""Two active data centres on Apache Kafka: the same topic written on both clusters at once and mirrored both
ways by two `kmirror run` instances (east -> west, west -> east).

With ``--provenance.header.enable true`` each cluster ends with exactly the union of what was written on
both (every record once, each side's records in their partition and order) and stays so; without it the
records loop between the clusters for ever, which is what the runbook warns of.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from mirror_harness import (
    KMIRROR,
    Worker,
    commit_offsets,
    consumer_file,
    create_topic,
    producer_file,
    read_all,
    run_args,
    scrape,
    topic_partitions,
    wait_until,
)

from kmirror.lineage.provenance import HEADER, origin_of
from kmirror.testing.kafka import KafkaCluster, free_port

TOPIC = "events"
PARTITIONS = 3


def pair(
    tmp_path: Path,
    kafka: dict[str, KafkaCluster],
    workers: list[Worker],
    *extra: str,
    whitelist: str = TOPIC,
    ports: dict[str, int] | None = None,
) -> tuple[KafkaCluster, KafkaCluster]:
    """Clusters east and west, topic events on both, and one mirror each way with the same options."""
    east, west = kafka["source"], kafka["target"]
    for c in (east, west):
        create_topic(c, TOPIC, PARTITIONS)
    for name, other, src, dst in (("east", "west", east, west), ("west", "east", west, east)):
        d = tmp_path / name
        d.mkdir()
        workers.append(
            Worker(
                tmp_path,
                run_args(
                    consumer_file(d, src, group=f"kmirror-{name}"),
                    producer_file(d, dst),
                    "--whitelist",
                    whitelist,
                    "--num.streams",
                    "1",
                    "--source.name",
                    name,
                    "--target.name",
                    other,
                    *(["--metrics.port", str(ports[name])] if ports else []),
                    *extra,
                ),
                name=f"from-{name}",
            )
        )
    for w in workers:
        w.wait_for("stats in=", timeout=120)
    return east, west


def write_both(east: KafkaCluster, west: KafkaCluster, per_side: int) -> None:
    """Both sides write ``per_side`` records to events at the same time, in small batches."""

    def write(cluster: KafkaCluster, side: str) -> None:
        p = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "linger.ms": 5})
        for i in range(per_side):
            p.produce(TOPIC, b"%s:%d" % (side.encode(), i), b"k%d" % (i % 11), i % PARTITIONS)
            if i % 100 == 99:
                p.flush(30)
                time.sleep(0.05)
        assert p.flush(30) == 0

    threads = [threading.Thread(target=write, args=(c, s)) for c, s in ((east, "east"), (west, "west"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)


def counts(cluster: KafkaCluster) -> int:
    return len(read_all(cluster, [TOPIC], 0, timeout=30, settle=1.0))


def test_both_ways_with_provenance_each_cluster_holds_the_union_once(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[Worker]
) -> None:
    east, west = pair(tmp_path, kafka, workers, "--provenance.header.enable", "true", "--groups", "app")
    per_side = 3000
    write_both(east, west, per_side)
    union = 2 * per_side
    wait_until(lambda: counts(east) >= union and counts(west) >= union, 120, "both sides hold the union")
    time.sleep(30)  # nothing comes back: the counts stay the same
    for name, cluster, other in (("east", east, "west"), ("west", west, "east")):
        got = read_all(cluster, [TOPIC], union, timeout=60)
        values = Counter(r.value for r in got)
        want = {b"%s:%d" % (s.encode(), i) for s in ("east", "west") for i in range(per_side)}
        assert set(values) == want, (
            f"{name}: {len(want - set(values))} missing, {len(set(values) - want)} foreign"
        )
        twice = {v: n for v, n in values.items() if n > 1}
        assert not twice, f"{name}: {len(twice)} records more than once, e.g. {list(twice.items())[:3]}"
        # The other side's records: each in its partition, in the order written, with the origin header.
        for p in range(PARTITIONS):
            copies = [r for r in got if r.partition == p and (r.value or b"").startswith(other.encode())]
            seq = [int((r.value or b"").split(b":")[1]) for r in copies]
            assert seq == sorted(seq), f"{name} partition {p}: copies out of order"
            for r in copies:
                origin = origin_of(list(r.headers))
                assert origin is not None and (origin.topic, origin.partition) == (TOPIC, p), r
            own = [r for r in got if r.partition == p and (r.value or b"").startswith(name.encode())]
            assert all(HEADER not in dict(r.headers) for r in own), f"{name}: a local record was stamped"
    # Each mirror read the other's copies back and did not copy them: counted in its stats line.
    for w in workers:
        w.stop()
        skipped = re.findall(r"skipped_origin=(\d+)", w.log())
        assert skipped and int(skipped[-1]) == per_side, (skipped[-3:], w.log()[-2000:])
    # The audit of the link east -> west compares what it copies: east's own records and their copies.
    out = subprocess.run(
        [
            *KMIRROR, "audit", "--source.config", str(tmp_path / "east" / "consumer.properties"),
            "--target.config", str(tmp_path / "east" / "producer.properties"), "--topics", TOPIC,
            "--provenance", "--grace", "1s", "--master", "local[2]", "--output", str(tmp_path / "audit"),
        ],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    n = f"{per_side:,}"
    summary = f"0 missing, 0 duplicated, 0 unexpected, 0 in flight; {n} source and {n} target"
    assert summary in out.stdout, out.stdout
    failover_is_exact(tmp_path, east, west)


def failover_is_exact(tmp_path: Path, east: KafkaCluster, west: KafkaCluster) -> None:
    """An application group on east moves to west at the copy of its next record: 0 read again, 0
    skipped, wherever it committed, although east's partitions interleave west's copies (which the mirror
    skips, so its sync points alone could not translate exactly)."""
    east_id = AdminClient({"bootstrap.servers": east.bootstrap}).list_topics(timeout=30).cluster_id
    on_west = read_all(west, [TOPIC], 1, timeout=60)
    copies: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
    offsets = {p: 0 for p in range(PARTITIONS)}
    for r in on_west:  # read in offset order per partition
        origin = origin_of(list(r.headers))
        if origin is not None and origin.cluster == east_id:
            copies[r.partition].append((offsets[r.partition], origin.offset))
        offsets[r.partition] += 1
    ends = offsets
    on_east = read_all(east, [TOPIC], 1, timeout=60)
    east_ends = {p: len([r for r in on_east if r.partition == p]) for p in copies}
    for fraction in (0.37, 0.81, 1.0):
        committed = {(TOPIC, p): int(east_ends[p] * fraction) for p in range(PARTITIONS)}
        commit_offsets(east, "app", committed)
        out = subprocess.run(
            [
                *KMIRROR, "failover", "--source.config", str(tmp_path / "east" / "consumer.properties"),
                "--target.config", str(tmp_path / "east" / "producer.properties"), "--group", "app", "--json",
            ],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr
        for row in json.loads(out.stdout)["partitions"]:
            p, c = row["partition"], committed[(TOPIC, row["partition"])]
            want = next((at for at, origin in copies[p] if origin >= c), ends[p])
            assert row["translated"] == want, (fraction, row, want)
            assert row["by_header"] or want == ends[p], row  # at the end already: nothing to look for


def test_both_ways_without_provenance_the_records_loop(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[Worker]
) -> None:
    east, west = pair(tmp_path, kafka, workers)
    write_both(east, west, 100)
    union = 200
    wait_until(lambda: counts(east) > 2 * union, 120, "the records come back to where they were written")
    first = counts(east)
    time.sleep(5)
    assert counts(east) > first, "the loop goes on: every record is copied back again and again"


def test_both_ways_renamed_each_cluster_holds_its_topic_and_the_others_copy(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[Worker]
) -> None:
    """MirrorMaker 2's layout: ${source}.${topic}. The whitelist takes the renamed copies too, and still
    no copy goes back (no east.west.events): each mirror knows its target's name."""
    east, west = pair(
        tmp_path, kafka, workers, "--topic.rename.format", "${source}.${topic}", whitelist=r".*events"
    )
    per_side = 2000
    write_both(east, west, per_side)
    for cluster, other in ((east, "west"), (west, "east")):
        copy = f"{other}.{TOPIC}"
        wait_until(lambda c=cluster, t=copy: len(read_all(c, [t], 0, timeout=30)) >= per_side, 120, copy)
    time.sleep(10)  # a chain would have started by now
    for name, cluster, other in (("east", east, "west"), ("west", west, "east")):
        names = set(topic_partitions(cluster))
        assert {n for n in names if n.endswith(TOPIC)} == {TOPIC, f"{other}.{TOPIC}"}, names
        own = read_all(cluster, [TOPIC], per_side)
        assert sorted(r.value for r in own) == sorted(b"%s:%d" % (name.encode(), i) for i in range(per_side))
        copied = read_all(cluster, [f"{other}.{TOPIC}"], per_side)
        values = [r.value or b"" for r in copied]
        want = {b"%s:%d" % (other.encode(), i) for i in range(per_side)}
        assert len(values) == per_side and set(values) == want, f"{name}: the copy is not exact"
        for p in range(PARTITIONS):  # partitions and order kept
            seq = [int((r.value or b"").split(b":")[1]) for r in copied if r.partition == p]
            assert seq == sorted(seq) and all(i % PARTITIONS == p for i in seq), f"{name} partition {p}"
    for w in workers:
        assert "not mirrored, renamed copies of the target's topics" in w.log(), w.log()[-2000:]
    # The audit compares east's events with its renamed copy on west.
    out = subprocess.run(
        [
            *KMIRROR, "audit", "--source.config", str(tmp_path / "east" / "consumer.properties"),
            "--target.config", str(tmp_path / "east" / "producer.properties"), "--topics", TOPIC,
            "--source.name", "east", "--topic.rename.format", "${source}.${topic}", "--grace", "1s",
            "--master", "local[2]", "--output", str(tmp_path / "audit"),
        ],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    n = f"{per_side:,}"
    assert f"0 missing, 0 duplicated, 0 unexpected, 0 in flight; {n} source and {n} target" in out.stdout


def test_heartbeats_give_each_link_its_latency_when_idle_and_never_travel_back(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[Worker]
) -> None:
    """Both ways, same names, no provenance, every topic whitelisted: each mirror copies its own source's
    heartbeats and never the other's copy, and reports its link's latency while no data flows."""
    ports = {"east": free_port(), "west": free_port()}
    east, west = pair(
        tmp_path, kafka, workers, "--heartbeats.interval.ms", "500", whitelist=".*", ports=ports
    )
    clusters = {"east": east, "west": west}

    def latency(name: str) -> float | None:
        return scrape(ports[name]).get(("kmirror_heartbeat_latency_seconds", (("source", name),)))

    for name in ports:
        wait_until(lambda n=name: latency(n) is not None, 120, f"{name}'s heartbeat on the other side")
    time.sleep(5)
    for name, other in (("east", "west"), ("west", "east")):
        metrics = scrape(ports[name])
        age = metrics[("kmirror_heartbeat_age_seconds", (("source", name),))]
        sent = metrics[("kmirror_heartbeats_sent_total", (("source", name),))]
        lat = latency(name)
        assert lat is not None and lat < 10 and age < 10 and sent >= 5, (lat, age, sent)
        beats = {t for t in topic_partitions(clusters[name]) if t.startswith("kmirror.heartbeats.")}
        assert beats == {f"kmirror.heartbeats.{name}", f"kmirror.heartbeats.{other}"}, beats
    for w in workers:
        w.stop()
    # No heartbeat went back: each cluster's copy of the other's heartbeats holds no more than the original.
    for name, other in (("east", "west"), ("west", "east")):
        original = read_all(clusters[other], [f"kmirror.heartbeats.{other}"], 1, timeout=30)
        copy = read_all(clusters[name], [f"kmirror.heartbeats.{other}"], 1, timeout=30)
        assert 0 < len(copy) <= len(original), (name, len(copy), len(original))
        assert [r.value for r in copy] == [r.value for r in original[: len(copy)]]
