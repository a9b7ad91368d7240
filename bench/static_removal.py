"""An instance removed for good: how long its partitions wait before another instance mirrors them.

Two one-stream `kmirror run` instances `a` and `b` (each its own consumer file, as two hosts or two units
have) share a group on a 4-partition topic of an Apache Kafka 4.3 cluster (one node) under live traffic.
`a` gets SIGTERM and never comes back; measured: the seconds from the SIGTERM until `b` owns every
partition (its log's assignments). Consumer files keep librdkafka's default `session.timeout.ms` (45 s).
Contenders, interleaved round by round:

* dynamic (`--static.membership false`): `a`'s streams leave the group on stop, one rebalance.
* static (the default): `a`'s members stay in the group until their session expires.
* static + RemoveStaticMembers: the same, and right after `a` exited the operator step of
  docs/runbooks/remove-instance.md removes its ids (`tools/RemoveStaticMembers.java`, Kafka's Admin API
  RemoveMembersFromConsumerGroup, run with Kafka's own jars, compiled beforehand; its JVM start counts).

    .venv/bin/python bench/static_removal.py [--rounds 3]
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

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.testing import jars
from kmirror.testing.kafka import kafka_clusters

PARTITIONS = 4
TOPIC = "removal"
TOOL = Path(__file__).resolve().parent.parent / "tools" / "RemoveStaticMembers.java"
CONTENDERS = ("dynamic", "static", "static + RemoveStaticMembers")


class Traffic(threading.Thread):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.stop = bootstrap, threading.Event()

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        while not self.stop.is_set():
            for part in range(PARTITIONS):
                p.produce(TOPIC, b"x" * 100, partition=part)
            p.poll(0)
            time.sleep(0.02)
        p.flush(30)


def owned(log: Path) -> set[str]:
    """The partitions an instance's stream owns now, from its log (assigned adds, revoked/lost removes)."""
    own: set[str] = set()
    for line in log.read_text(errors="replace").splitlines():
        for verb in (": assigned ", ": revoked ", ": lost "):
            if verb in line:
                named = {p for p in line.split(verb, 1)[1].split(" (", 1)[0].split(", ") if p != "nothing"}
                own = own | named if verb == ": assigned " else own - named
    return own


def wait(what: str, check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"no {what} within {timeout:.0f} s")
        time.sleep(0.1)


def one_round(src: str, tgt: str, work: Path, contender: str, n: int) -> tuple[float, float | None]:
    group = f"g-{CONTENDERS.index(contender)}-{n}"
    procs: dict[str, subprocess.Popen[bytes]] = {}
    logs: dict[str, Path] = {}
    for name in ("a", "b"):
        d = work / f"{group}-{name}"
        d.mkdir()
        (d / "consumer.properties").write_text(f"bootstrap.servers={src}\ngroup.id={group}\n")
        (d / "producer.properties").write_text(f"bootstrap.servers={tgt}\n")
        args = [
            "--consumer.config",
            str(d / "consumer.properties"),
            "--producer.config",
            str(d / "producer.properties"),
        ]
        args += ["--whitelist", TOPIC, "--num.streams", "1", "--stats.interval.ms", "60000"]
        if contender == "dynamic":
            args += ["--static.membership", "false"]
        logs[name] = d / "kmirror.log"
        with logs[name].open("wb") as out:
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "kmirror", "run", *args], stdout=out, stderr=subprocess.STDOUT
            )
    everything = {f"{TOPIC}[{p}]" for p in range(PARTITIONS)}
    try:
        wait(
            "sharing",
            lambda: (
                owned(logs["a"]) and owned(logs["b"]) and owned(logs["a"]) | owned(logs["b"]) == everything
            ),
            120,
        )
        start = time.monotonic()
        procs["a"].send_signal(signal.SIGTERM)
        procs["a"].wait(60)
        tool_s = None
        if contender.endswith("RemoveStaticMembers"):
            ids = [
                line.split("group.instance.id ", 1)[1].split(")", 1)[0]
                for line in logs["a"].read_text().splitlines()
                if "(static, group.instance.id " in line
            ]
            admin = work / "admin.properties"
            admin.write_text(f"bootstrap.servers={src}\n")
            began = time.monotonic()
            r = subprocess.run(
                [
                    jars.java(),
                    "-cp",
                    f"{jars.classpath()}:{work / 'classes'}",
                    "RemoveStaticMembers",
                    str(admin),
                    group,
                    *ids,
                ],
                capture_output=True,
                text=True,
                timeout=180,
            )
            tool_s = time.monotonic() - began
            if r.returncode != 0:
                raise SystemExit(f"RemoveStaticMembers failed ({r.returncode}): {r.stdout} {r.stderr[-500:]}")
        wait("takeover", lambda: owned(logs["b"]) == everything, 120)
        return time.monotonic() - start, tool_s
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="kmirror-bench-removal-") as tmp,
        kafka_clusters("source", "target", log_dir=Path(tmp)) as c,
    ):
        src, tgt = c["source"].bootstrap, c["target"].bootstrap
        admin = AdminClient({"bootstrap.servers": src})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result()
        # The runbook compiles the tool beforehand: the step itself is one JVM start and one request.
        javac = str(Path(jars.java()).resolve().with_name("javac"))
        subprocess.run(
            [javac, "-cp", jars.classpath(), "-d", str(Path(tmp) / "classes"), str(TOOL)], check=True
        )
        traffic = Traffic(src)
        traffic.start()
        seconds: dict[str, list[float]] = {k: [] for k in CONTENDERS}
        tool: list[float] = []
        load = os.getloadavg()[0]
        for n in range(a.rounds):
            for contender in CONTENDERS:
                took, tool_s = one_round(src, tgt, Path(tmp), contender, n)
                seconds[contender].append(took)
                if tool_s is not None:
                    tool.append(tool_s)
                print(
                    f"round {n} {contender}: {took:.1f} s" + (f" (tool {tool_s:.1f} s)" if tool_s else ""),
                    flush=True,
                )
        traffic.stop.set()
        traffic.join(60)
    print(
        f"\nload average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; "
        "session.timeout.ms 45000"
    )
    print("| a removed for good, members | rounds | median s | max s |\n|---|---|---|---|")
    for k, v in seconds.items():
        print(f"| {k} | {len(v)} | {statistics.median(v):.1f} | {max(v):.1f} |")
    if tool:
        print(
            f"RemoveStaticMembers itself (JVM start and the request): median {statistics.median(tool):.1f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
