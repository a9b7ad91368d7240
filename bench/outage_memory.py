"""Memory of one stream during a target outage: bounded by --queue.size, not by the backlog.

Apache Kafka 4.3, one node per cluster (`kmirror.testing.kafka.BENCH_JVM`). A source topic holds a backlog
of 1 KB records far larger than any queue; one `kmirror run` stream (one process: a single stream runs in
the supervisor) starts mirroring it, and once it is assigned the target broker is frozen (SIGSTOP), so
nothing is acknowledged from then on. The stream fills its queue,
blocks ("target unreachable since ..., N records waiting, reading paused") and stays blocked. Measured
from /proc: peak RSS (VmHWM) and RSS once blocked, for each queue size; a fresh consumer group per run
reads the same backlog. Runs of the queue sizes are interleaved (A B A B ...) so that other work on the
machine hits each alike; the median (min-max) per queue size is reported.

    flock /tmp/kmirror-bench.lock .venv/bin/python bench/outage_memory.py [--backlog N]
        [--queue 1000 10000 50000] [--repeat 3] [--write docs/benchmarks.md]
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sections import closing, machine_note, markers, parser, publish
from throughput import PARTITIONS, TOPIC, bench_clusters, fill

from kmirror.testing.kafka import KafkaCluster
from kmirror.testing.mirrors import mirror_files, run_command

RECORD_BYTES = 1000
BLOCKED_FOR_S = 10.0  # how long a run stays blocked before it is measured and stopped
BLOCKED = re.compile(r"target unreachable since \S+, (\d+) records waiting, reading paused")
NAME = "outage-memory"


@dataclass
class Run:
    queue: int
    peak_mb: float
    blocked_mb: float
    waiting: int


def rss_mb(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for {pid}")


def one_run(source: KafkaCluster, target: KafkaCluster, queue: int, group: str, workdir: Path) -> Run:
    workdir.mkdir(parents=True, exist_ok=True)
    settings = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}
    consumer, producer = mirror_files(workdir, group, source.bootstrap, target.bootstrap, settings)
    log_path = workdir / f"{group}.log"
    cmd = run_command(
        consumer,
        producer,
        TOPIC,
        "--num.streams",
        "1",
        "--queue.size",
        str(queue),
        "--stats.interval.ms",
        "1000",
    )
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    paused = False
    try:
        deadline = time.monotonic() + 120
        while "assigned" not in log_path.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kmirror did not start:\n{log_path.read_text(errors='replace')}")
            time.sleep(0.05)
        target.pause()
        paused = True
        while not BLOCKED.search(log_path.read_text(errors="replace")):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kmirror did not block:\n{log_path.read_text(errors='replace')}")
            time.sleep(0.2)
        time.sleep(BLOCKED_FOR_S)
        text = log_path.read_text(errors="replace")
        waiting = int(BLOCKED.findall(text)[-1])
        return Run(queue, rss_mb(proc.pid, "VmHWM"), rss_mb(proc.pid, "VmRSS"), waiting)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        if paused:
            target.resume()


def spread(values: list[float] | list[int]) -> str:
    """Median (min-max)."""
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def report(runs: list[Run], backlog: int, repeat: int) -> str:
    begin, end = markers(NAME)
    lines = [
        begin,
        "## Memory during a target outage",
        "",
        machine_note(),
        f"One stream (`--num.streams 1`, 2 producers) mirrors a backlog of {backlog:,} "
        f"records of {RECORD_BYTES} B ({backlog * RECORD_BYTES / 1e6:,.0f} MB, {PARTITIONS} partitions); "
        "once it is assigned the target is frozen (SIGSTOP), the stream fills its queue and blocks; "
        f"measured {BLOCKED_FOR_S:.0f} s after the first blocked line. Median (min-max) of {repeat} runs "
        "per queue size, interleaved. Peak RSS is the process's high-water mark (VmHWM): it includes what "
        "librdkafka's consumer prefetched before the stream blocked (at most "
        "`queued.max.messages.kbytes`, 64 MB by default), which the pause then releases.",
        "",
        "| --queue.size | records waiting for the target | peak RSS | RSS while blocked |",
        "|---|---|---|---|",
    ]
    for queue in sorted({r.queue for r in runs}):
        mine = [r for r in runs if r.queue == queue]
        lines.append(
            f"| {queue:,} | {spread([r.waiting for r in mine])} | {spread([r.peak_mb for r in mine])} MB "
            f"| {spread([r.blocked_mb for r in mine])} MB |"
        )
    sizes = " ".join(str(q) for q in sorted({r.queue for r in runs}))
    lines += [
        "",
        "Records waiting never exceed `--queue.size` (the stream's producers share it), and the memory "
        "follows the queue, not the backlog.",
    ]
    return closing(
        lines,
        end,
        "bench-outage",
        "outage_memory.py",
        f"--backlog {backlog} --queue {sizes} --repeat {repeat}",
    )


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--backlog", type=int, default=300_000)
    p.add_argument("--queue", type=int, nargs="+", default=[1_000, 10_000, 50_000])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--write", type=Path)
    a = p.parse_args()
    runs: list[Run] = []
    with (
        tempfile.TemporaryDirectory(prefix="kmirror-outage-memory-") as tmp,
        bench_clusters("source", "target", workdir=Path(tmp) / "brokers") as c,
    ):
        workdir = Path(tmp)
        fill(c["source"], a.backlog, RECORD_BYTES)
        for i in range(a.repeat):
            for queue in a.queue:
                run = one_run(c["source"], c["target"], queue, f"outage-{i}-{queue}", workdir)
                print(run, flush=True)
                runs.append(run)
    section = report(runs, a.backlog, a.repeat)
    return publish(section, a.write, NAME)


if __name__ == "__main__":
    sys.exit(main())
