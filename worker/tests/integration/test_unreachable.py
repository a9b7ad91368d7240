"""A cluster that does not answer when kmirror starts is waited for, in a few lines (Apache Kafka 4.3).

Before, a source whose host names did not resolve wrote about 240 ERROR lines in 14 s and the stream
stopped with exit 1 once its first metadata request timed out; systemd restarted it every 10 s into the
same flood. Now each stream says once per stats interval which cluster does not answer, since when and
what failed, librdkafka's repeated lines are held to one per kind per minute, the process stays up, and
mirroring starts by itself when the cluster answers.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import mirror_harness as mh

from kmirror.testing.kafka import KafkaCluster

LIBRDKAFKA_LINES_MAX = 12
"""librdkafka lines allowed while a cluster is away for about half a minute: one per kind (an address
and what failed) per minute and per client, a handful of clients per stream."""


def unreachable_lines(w: mh.Worker, cluster: str) -> list[str]:
    return [
        line
        for line in w.log().splitlines()
        if f"{cluster} (bootstrap.servers" in line and "unreachable" in line
    ]


def librdkafka_lines(w: mh.Worker) -> list[str]:
    return [line for line in w.log().splitlines() if " kmirror.librdkafka." in line]


def wait_lines(w: mh.Worker, cluster: str, count: int, timeout: float = 90.0) -> list[str]:
    """The worker's first `count` lines about the cluster being away; librdkafka's own lines stay few."""
    deadline = time.monotonic() + timeout
    while len(unreachable_lines(w, cluster)) < count:
        assert w.proc.poll() is None, (
            f"kmirror exited ({w.proc.returncode}) while {cluster} was away:\n{w.log()}"
        )
        assert time.monotonic() < deadline, f"fewer than {count} lines about {cluster}:\n{w.log()}"
        time.sleep(0.5)
    noise = librdkafka_lines(w)
    assert len(noise) <= LIBRDKAFKA_LINES_MAX, "\n".join(noise)
    return unreachable_lines(w, cluster)


def written(src: KafkaCluster, topic: str) -> list[mh.Rec]:
    """100 records written to a new topic of two partitions."""
    mh.create_topic(src, topic, 2)
    records = mh.make_records(topic, 2, 50)
    mh.produce(src, records)
    return records


def start(tmp_path: Path, consumer: Path, tgt: KafkaCluster, topic: str) -> mh.Worker:
    return mh.Worker(
        tmp_path,
        mh.run_args(
            consumer,
            mh.producer_file(tmp_path, tgt),
            "--whitelist",
            topic,
            "--num.streams",
            "1",
            "--stats.interval.ms",
            "2000",
        ),
    )


def test_source_down_at_start_is_waited_for(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[mh.Worker]
) -> None:
    src, tgt = kafka["source"], kafka["target"]
    records = written(src, "away.src")
    node = src.nodes[0].node_id
    src.kill_node(node, signal.SIGKILL)
    w = start(tmp_path, mh.consumer_file(tmp_path, src, "g-away-src"), tgt, "away.src")
    workers.append(w)
    lines = wait_lines(w, "source cluster consumer", 2)
    assert src.bootstrap in lines[0] and "Connection refused" in lines[0], lines[0]
    src.start_node(node)
    mh.assert_mirrored(records, mh.read_all(tgt, ["away.src"], len(records), timeout=120))
    w.wait_for("source cluster consumer answers again")
    assert w.stop() == 0, w.log()


def test_target_frozen_at_start_is_waited_for(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[mh.Worker]
) -> None:
    src, tgt = kafka["source"], kafka["target"]
    records = written(src, "away.tgt")
    tgt.pause()
    try:
        w = start(tmp_path, mh.consumer_file(tmp_path, src, "g-away-tgt"), tgt, "away.tgt")
        workers.append(w)
        lines = wait_lines(w, "target cluster", 2)
        assert tgt.bootstrap in lines[0], lines[0]
    finally:
        tgt.resume()
    mh.assert_mirrored(records, mh.read_all(tgt, ["away.tgt"], len(records), timeout=120))
    w.wait_for("target cluster answers again")
    assert w.stop() == 0, w.log()


def test_a_source_that_does_not_resolve_says_so_in_few_lines(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[mh.Worker]
) -> None:
    """The reference documents' host names, which resolve nowhere: the flood the issue met."""
    tgt = kafka["target"]
    consumer = mh.write(
        tmp_path / "consumer.properties",
        "bootstrap.servers=kafka-source-server1.invalid:6667,kafka-source-server2.invalid:6667\n"
        "group.id=g-nowhere\n",
    )
    w = start(tmp_path, consumer, tgt, "anything")
    workers.append(w)
    lines = wait_lines(w, "source cluster consumer", 3)
    assert "Failed to resolve 'kafka-source-server" in lines[-1], lines[-1]
    assert w.stop() == 0, w.log()
