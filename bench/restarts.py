"""What a clean restart of a two-stream `kmirror run` instance costs, for each way its streams can leave.

Contenders (one Apache Kafka 4.3 source and one target cluster of one node each, with
`kmirror.testing.kafka.BENCH_JVM`; each contender mirrors its own topic with its own group under live
traffic; the rounds interleaved A B C A B C ... so that load on the shared machine hits each alike):

* one at a time: dynamic members (`--static.membership false`; on SIGTERM the supervisor stops one
  stream, waits until its sibling took over its partitions, then stops the next).
* all at once: the same, but a second SIGTERM right after the first (every stream leaves together, as
  with systemd's default KillMode before the unit set KillMode=mixed).
* static: kmirror's default (KIP-345: no LeaveGroup; the new streams rejoin with the same ids).

Per round: SIGTERM, wait for the exit, start again, and measure the seconds from the start until every
target partition grew (records flow again). A round that does not flow within --stall-after seconds
counts as a stall; the instance is then killed and restarted until it flows, so the next round starts
from a working group.

    .venv/bin/python bench/restarts.py [--rounds 6] [--stall-after 60] [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from sections import machine_note, markers, parser, publish, reproduce
from throughput import bench_clusters

from kmirror.testing.kafka import KafkaCluster

PARTITIONS = 4
SESSION_MS = 6000
CONTENDERS = {
    "one at a time (--static.membership false)": ["--static.membership", "false"],
    "all at once": ["--static.membership", "false"],
    "static (default)": [],
}


class Traffic(threading.Thread):
    def __init__(self, cluster: KafkaCluster, topics: list[str]) -> None:
        super().__init__(daemon=True)
        self.cluster, self.topics, self.stop = cluster, topics, threading.Event()

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.cluster.bootstrap, "linger.ms": 5})
        i = 0
        while not self.stop.is_set():
            for t in self.topics:
                for part in range(PARTITIONS):
                    while not self.stop.is_set():
                        try:
                            p.produce(t, b"%d" % i, b"k%d" % i, part)
                            break
                        except BufferError:  # the broker is slow: wait, never give up
                            p.poll(0.1)
            p.poll(0)
            i += 1
            time.sleep(0.01)
        p.flush(30)


def ends(cluster: KafkaCluster, topic: str) -> list[int]:
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "bench-ends"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)]
    except Exception:
        return [-1] * PARTITIONS
    finally:
        c.close()


def flowing_after(target: KafkaCluster, topic: str, since: float, limit: float) -> float | None:
    before = ends(target, topic)
    while time.monotonic() - since < limit:
        now = ends(target, topic)
        if all(n > max(b, 0) for n, b in zip(now, before, strict=True)):
            return time.monotonic() - since
        time.sleep(0.2)
    return None


class Instance:
    def __init__(self, work: Path, name: str, src: KafkaCluster, tgt: KafkaCluster, extra: list[str]) -> None:
        self.consumer = work / f"{name}.properties"
        self.consumer.write_text(
            f"bootstrap.servers={src.bootstrap}\ngroup.id=bench-{name}\n"
            f"session.timeout.ms={SESSION_MS}\nheartbeat.interval.ms=1000\n"
        )
        self.producer = work / f"{name}-producer.properties"
        self.producer.write_text(f"bootstrap.servers={tgt.bootstrap}\n")
        self.name, self.extra, self.work = name, extra, work
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = (self.work / f"{self.name}.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kmirror", "run", "--consumer.config", str(self.consumer),
             "--producer.config", str(self.producer), "--whitelist", self.name, "--num.streams", "2",
             "--offset.commit.interval.ms", "1000", "--topic.refresh.interval.ms", "1000", *self.extra],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def stop(self, all_at_once: bool) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        if all_at_once:
            time.sleep(0.05)
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def run_rounds(
    a: argparse.Namespace,
    *,
    inst: dict[str, Instance],
    tgts: dict[str, KafkaCluster],
    names: dict[str, str],
    took: dict[str, list[float]],
    stalls: dict[str, int],
) -> None:
    for c, i in inst.items():
        i.start()
        if flowing_after(tgts[c], names[c], time.monotonic(), 120) is None:
            raise SystemExit(f"{c}: never started flowing")
    for r in range(a.rounds):
        for c, i in inst.items():
            i.stop(all_at_once=c == "all at once")
            start = time.monotonic()
            i.start()
            s = flowing_after(tgts[c], names[c], start, a.stall_after)
            if s is None:
                stalls[c] += 1
                s = a.stall_after  # a stalled round counts as the limit
                for _ in range(5):  # kill -9 every process and start again until the group works
                    i.kill()
                    i.start()
                    if flowing_after(tgts[c], names[c], time.monotonic(), a.stall_after) is not None:
                        break
                else:
                    raise SystemExit(f"{c}: the group did not recover")
            took[c].append(s)
            print(f"round {r}: {c}: {s:.1f} s", flush=True)


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--stall-after", type=float, default=60.0)
    ap.add_argument("--write", type=Path)
    a = ap.parse_args()
    names = {c: f"bench-restart-{i}" for i, c in enumerate(CONTENDERS)}
    took: dict[str, list[float]] = {c: [] for c in CONTENDERS}
    stalls: dict[str, int] = dict.fromkeys(CONTENDERS, 0)
    load = [os.getloadavg()[0]]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # unwind: brokers and instances are stopped
    with tempfile.TemporaryDirectory() as tmp, bench_clusters("source", "target", workdir=Path(tmp)) as cl:
        src = dict.fromkeys(CONTENDERS, cl["source"])
        tgts = dict.fromkeys(CONTENDERS, cl["target"])
        traffic = []
        for c in CONTENDERS:
            admin = AdminClient({"bootstrap.servers": src[c].bootstrap})
            admin.create_topics([NewTopic(names[c], PARTITIONS, 1)])[names[c]].result()
            traffic.append(Traffic(src[c], [names[c]]))
            traffic[-1].start()
        inst = {c: Instance(Path(tmp), names[c], src[c], tgts[c], CONTENDERS[c]) for c in CONTENDERS}
        try:
            run_rounds(a, inst=inst, tgts=tgts, names=names, took=took, stalls=stalls)
        finally:
            for i in inst.values():
                i.kill()
            for t in traffic:
                t.stop.set()
                t.join(60)
    load.append(os.getloadavg()[0])
    rows = [
        f"| {c} | {len(v)} | {statistics.median(v):.1f} | {min(v):.1f} | {max(v):.1f} | {stalls[c]} |"
        for c, v in took.items()
    ]
    begin, end = markers("restarts")
    section = "\n".join(
        [
            begin,
            "## Restarts",
            "",
            machine_note(),
            f"Load average {load[0]:.1f} at the start, {load[1]:.1f} at the end. A two-stream `kmirror run` "
            f"instance, {PARTITIONS} partitions under live traffic, "
            f"`session.timeout.ms={SESSION_MS}`; seconds from the restart until records flow again on every "
            f"partition; a round that did not flow within {a.stall_after:.0f} s is a stall (counted as "
            f"{a.stall_after:.0f} s). Contenders interleaved round by round.",
            "",
            "| streams leave | rounds | median s | min s | max s | stalls |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            reproduce("bench-restarts", "restarts.py", f"--rounds {a.rounds}") + " The other restart paths "
            "(crash, takeover, removal) are measured by "
            "`.venv/bin/pytest -s worker/tests/integration/test_restarts.py` (lines `RESTART ...`; "
            "section Restart paths).",
            end,
            "",
        ]
    )
    return publish(section, a.write, "restarts")


if __name__ == "__main__":
    sys.exit(main())
