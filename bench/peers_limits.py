"""Kafka's own performance tools as the limits of bench/peers.py: what one Java producer can write to the
target and what one Java consumer can read from the source here, with the records' size, count,
partitions and compression of the mirrors' runs.

* `kafka-producer-perf-test` (`org.apache.kafka.tools.ProducerPerformance`, Kafka 4.3 jars) writes
  `--num-records` records of `--record-size` bytes (no key, no header) to the target's topic, unthrottled,
  acks=all and the run's compression.type, otherwise the Java producer's defaults. Its rate: records/sec
  of its final summary line.
* `kafka-consumer-perf-test` (`org.apache.kafka.tools.ConsumerPerformance`) reads that many records of
  the filled source topic with a fresh group. Its rate: fetch.nMsg.sec of its result line, which leaves
  out the group's join (nMsg.sec counts it).

Both run with the MirrorMakers' JVM flags (`kmirror.testing.mirrormakers.TOOL_JVM`) and the 4.3 class path.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from kmirror.testing.mirrormakers import MM2_LINE, JavaTool

PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
PRODUCER_TOOL = "limit: producer perf tool"
CONSUMER_TOOL = "limit: consumer perf tool"
LIMITS = (PRODUCER_TOOL, CONSUMER_TOOL)
# "20000 records sent, 9930.5 records/sec (0.95 MB/sec), 1037.53 ms avg latency, ... 50th, ..."
SUMMARY = re.compile(r"(\d+) records sent, ([0-9.]+) records/sec \(([0-9.]+) MB/sec\).* 50th")
CONSUMER_HEADER = "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"


@dataclass
class Limit:
    rate: float  # records/s, the tool's own figure
    from_start: float  # seconds from the JVM's start to its exit


def run_tool(name: str, main: str, args: list[str], workdir: Path, timeout: float = 900) -> tuple[str, float]:
    """Run one tool to its end; (its stdout and stderr, seconds from start to exit)."""
    tool = JavaTool(name, workdir, MM2_LINE, main, args)
    t0 = time.monotonic()
    tool.start()
    assert tool.proc is not None
    try:
        code = tool.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        tool.stop(10)
        raise SystemExit(f"{name} did not finish within {timeout} s; see {tool.workdir}") from None
    seconds = time.monotonic() - t0
    out = tool.out_path.read_text(errors="replace")
    if code != 0:
        raise SystemExit(f"{name} exited with {code}: {out.strip().splitlines()[-3:]}")
    return out, seconds


def producer_limit(target: str, topic: str, n: int, *, size: int, compression: str, workdir: Path) -> Limit:
    out, seconds = run_tool(
        "producer-perf",
        PRODUCER_PERF,
        ["--bootstrap-server", target, "--topic", topic, "--num-records", str(n), "--record-size", str(size),
         "--throughput", "-1", "--command-property", "acks=all", f"compression.type={compression}"],
        workdir,
    )  # fmt: skip
    found = [m for line in out.splitlines() if (m := SUMMARY.search(line))]
    if not found or int(found[-1][1]) != n:
        raise SystemExit(f"no summary of {n} records in the producer perf tool's output: {out[-500:]!r}")
    return Limit(float(found[-1][2]), seconds)


def consumer_limit(source: str, topic: str, n: int, group: str, workdir: Path) -> Limit:
    out, seconds = run_tool(
        "consumer-perf",
        CONSUMER_PERF,
        ["--bootstrap-server", source, "--topic", topic, "--num-records", str(n), "--group", group,
         "--timeout", "60000"],
        workdir,
    )  # fmt: skip
    lines = out.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith(CONSUMER_HEADER)]
    if not heads or heads[-1] + 1 >= len(lines):
        raise SystemExit(f"no result line in the consumer perf tool's output: {out[-500:]!r}")
    names = lines[heads[-1]].split(", ")
    values = dict(zip(names, lines[heads[-1] + 1].split(", "), strict=False))
    if int(values["data.consumed.in.nMsg"]) < n:
        raise SystemExit(f"the consumer perf tool read {values['data.consumed.in.nMsg']} of {n} records")
    return Limit(float(values["fetch.nMsg.sec"]), seconds)
