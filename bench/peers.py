"""kmirror side by side with the tools it replaces: MirrorMaker 1 and MirrorMaker 2, on the same clusters.

Apache Kafka 4.3 clusters of one node (`kmirror.testing.kafka.BENCH_JVM`). Per record size: one source
cluster filled once (keyed records with one header, `--partitions` partitions, `--compression` on the
source's producer); a fresh target cluster per run (the topic created beforehand with the source's
partitions), so that every run copies the whole topic into an empty target and carries no state over.
The contenders run interleaved (A B C A B C ...), `--repeat` times each:

* MirrorMaker 1: `kafka.tools.MirrorMaker` from the 3.9 jars with the reference documents' data-loss-safe
  settings (acks=all, retries at max, max.in.flight.requests.per.connection=1, no auto commit, producer
  blocking when full, `--abort.on.send.failure true`), `--num.streams 2`, a fresh group;
* MirrorMaker 2: `org.apache.kafka.connect.mirror.MirrorMaker` (4.3) in dedicated mode,
  IdentityReplicationPolicy, tasks.max=2, heartbeats and checkpoints on (its defaults), otherwise the
  harness' settings (`kmirror.testing.mirrormakers.MirrorMaker2`);
* kmirror: `kmirror run` with its defaults (every guarantee on), `--num.streams 2`, a fresh group.

Both MirrorMaker 1 and kmirror commit every `--commit-ms` (500 ms; both default to 60 s, which would
make "committed" mean "the next minute"). The yardstick is the same for all: the target's end offsets,
sampled every 50 ms from outside. Rate = records / time from the first record on the target until the
last one is there (and, for MirrorMaker 1 and kmirror, until their source group has committed every
record), so process start, Connect's start and group joins count for no one; the seconds from process
start to the end are shown beside. CPU = user + system seconds of the mirror's whole process tree
(/proc/<pid>/stat, reaped children included) between the first record on the target and the end, per
million records. Peak RSS = the sum of every process' VmHWM in the tree at the end.

    flock /tmp/kmirror-bench.lock .venv/bin/python bench/peers.py [--records-100 N] [--records-1k N]
        [--sizes 100 1000] [--compression none|lz4] [--repeat 3] [--write FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from sections import closing, kafka_version, machine_note, markers, parser, publish
from throughput import GROUP_SETTINGS, QUIET, TOPIC, Committed, bench_clusters, create_topic, fill, stop_group

from kmirror.testing.mirrormakers import MM1_LINE, MM2_LINE, MirrorMaker1, MirrorMaker2, tree_usage
from kmirror.testing.mirrors import mirror_files, run_command

BEGIN, END = markers("peers")
RUN_LINE = re.compile(
    r"\s*(\d+) B  (MirrorMaker 1|MirrorMaker 2|kmirror)\s+#\d+:\s+([0-9,.]+) rec/s\s+[0-9.]+ MB/s "
    r"\(([0-9.]+) s; ([0-9.]+) s from start, first record after ([0-9.]+) s\), "
    r"([0-9.]+) CPU s/M rec, ([0-9.]+) MB RSS"
)
CONTENDERS = ("MirrorMaker 1", "MirrorMaker 2", "kmirror")
STREAMS = 2


class TargetEnds:
    """The sum of the target topic's end offsets, read with one long-lived client."""

    def __init__(self, target: str, partitions: int) -> None:
        self.consumer = Consumer({"bootstrap.servers": target, "group.id": "bench-peers-probe"}, logger=QUIET)
        self.parts = [TopicPartition(TOPIC, p) for p in range(partitions)]
        self.last: dict[int, int] = {}
        deadline = time.monotonic() + 60  # until this client's metadata knows every partition
        while len(self.consumer.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions) < partitions:
            if time.monotonic() > deadline:
                raise SystemExit(f"the target's topic {TOPIC} did not show {partitions} partitions")
            time.sleep(0.1)

    def total(self) -> int:
        """The sum of the end offsets; a partition that fails to answer now (a leader not elected yet)
        counts with its last answer."""
        for tp in self.parts:
            with contextlib.suppress(KafkaException):
                self.last[tp.partition] = self.consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1]
        return sum(self.last.values())

    def close(self) -> None:
        self.consumer.close()


@dataclass
class Run:
    rate: float  # records/s, first record on the target .. last on the target (and committed)
    seconds: float  # that time
    from_start: float  # seconds from the process start to the end
    first_after: float  # seconds from the process start to the first record on the target
    cpu_per_m: float  # CPU seconds of the process tree per million records (measured window)
    rss_mb: float  # peak RSS of the tree, MB


def measure(
    start: Callable[[], int],
    stop: Callable[[], None],
    *,
    target: str,
    partitions: int,
    n: int,
    committed: Committed | None,
    timeout: float = 900,
) -> Run:
    ends = TargetEnds(target, partitions)
    try:
        t0 = time.monotonic()
        pid = start()
        deadline = t0 + timeout
        first = cpu0 = None
        while True:
            on_target = ends.total()
            now = time.monotonic()
            if first is None and on_target > 0:
                first, cpu0 = now, tree_usage(pid)[0]
            if on_target >= n and (committed is None or committed.total() >= n):
                break
            if now > deadline:
                raise SystemExit(
                    f"pid {pid} did not finish within {timeout} s ({on_target}/{n} on the target)"
                )
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                raise SystemExit(f"pid {pid} exited after {on_target}/{n} records") from None
            time.sleep(0.05)
        done = time.monotonic()
        cpu1, rss = tree_usage(pid)
    finally:
        ends.close()
        stop()
    assert first is not None and cpu0 is not None
    seconds = max(done - first, 1e-6)
    return Run(n / seconds, seconds, done - t0, first - t0, (cpu1 - cpu0) / n * 1e6, rss / 1e6)


def run_one(name: str, source: str, target: str, *, partitions: int, n: int, workdir: Path, tag: str) -> Run:
    group = f"peers-{tag}"
    tool: MirrorMaker1 | MirrorMaker2
    if name == "kmirror":
        cfile, pfile = mirror_files(workdir, group, source, target, GROUP_SETTINGS)
        cmd = run_command(cfile, pfile, TOPIC, "--num.streams", str(STREAMS), "--offset.commit.interval.ms",
                          str(COMMIT_MS), "--stats.interval.ms", "600000")  # fmt: skip
        log = (workdir / f"{group}.log").open("wb")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        start, stop = (lambda: proc.pid), (lambda: stop_group(proc, 60))
    else:
        if name == "MirrorMaker 1":
            tool = MirrorMaker1(workdir / group, source, target, TOPIC, group, num_streams=STREAMS,
                                commit_interval_ms=COMMIT_MS)  # fmt: skip
        else:
            tool = MirrorMaker2(workdir / group, source, target, TOPIC, tasks_max=STREAMS, extra=MM2_DEFAULTS)
        start, stop = (lambda: tool.start().pid), (lambda: tool.stop(60))
    committed = None if name == "MirrorMaker 2" else Committed(source, group)  # MM2 commits no source group
    try:
        return measure(start, stop, target=target, partitions=partitions, n=n, committed=committed)
    finally:
        if committed:
            committed.close()


COMMIT_MS = 500
# MirrorMaker 2's own defaults where the harness turns features off for the cutover tests (ACL sync stays
# off: the bench clusters have no authorizer, so there is nothing to sync).
MM2_DEFAULTS = {"emit.heartbeats.enabled": "true", "emit.checkpoints.enabled": "true"}


def run_size(
    size: int, n: int, *, partitions: int, compression: str, repeat: int, workdir: Path
) -> dict[str, list[Run]]:
    results: dict[str, list[Run]] = {c: [] for c in CONTENDERS}
    with bench_clusters(f"source-{size}", workdir=workdir) as src:
        source = src[f"source-{size}"]
        fill(source, n, size, partitions, compression)
        for attempt in range(repeat):
            for i, name in enumerate(CONTENDERS):
                tag = f"{size}-{i}-{attempt}"
                with bench_clusters(f"target-{tag}", workdir=workdir) as tgt:
                    target = next(iter(tgt.values()))
                    create_topic(target, partitions)
                    r = run_one(
                        name,
                        source.bootstrap,
                        target.bootstrap,
                        partitions=partitions,
                        n=n,
                        workdir=workdir,
                        tag=tag,
                    )
                results[name].append(r)
                print(
                    f"  {size:>5} B  {name:14} #{attempt}: {r.rate:>9,.0f} rec/s "
                    f"{r.rate * size / 1e6:6.1f} MB/s "
                    f"({r.seconds:.1f} s; {r.from_start:.1f} s from start, first record after "
                    f"{r.first_after:.1f} s), {r.cpu_per_m:.1f} CPU s/M rec, {r.rss_mb:.0f} MB RSS",
                    flush=True,
                )
    return results


def spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def report(
    results: dict[int, dict[str, list[Run]]],
    counts: dict[int, int],
    *,
    partitions: int,
    compression: str,
    repeat: int,
    options: str,
) -> str:
    runs_text = " and ".join(f"{counts[s]:,} records of {s} B" for s in counts)
    lines = [
        BEGIN,
        f"## Side by side with MirrorMaker 1 and MirrorMaker 2 ({runs_text}, "
        f"{'uncompressed' if compression == 'none' else compression + ' on the source'}, "
        f"{partitions} partitions, {repeat} runs each)",
        "",
        machine_note(),
        "Not in this section (issue 21 asks for them; `--records-100`, `--records-1k` and "
        "`--compression lz4` run the first two): 3 M records, lz4, Kafka's own producer and consumer "
        "performance tools as limits, end-to-end latency at a steady rate, MirrorMaker 2 with heartbeats and "
        "checkpoints off.",
        f"MirrorMaker 1 from Apache Kafka {kafka_version(MM1_LINE)} (`kafka.tools.MirrorMaker`, the "
        "reference documents' data-loss-safe settings: acks=all, retries=2147483647, "
        "max.in.flight.requests.per.connection=1, enable.auto.commit=false, max.block.ms at max, "
        f"`--abort.on.send.failure true`, `--num.streams {STREAMS}`); MirrorMaker 2 from Apache Kafka "
        f"{kafka_version(MM2_LINE)} in dedicated mode (IdentityReplicationPolicy, tasks.max={STREAMS}, "
        "heartbeats and checkpoints on, otherwise its defaults; JVMs of both: "
        "`kmirror.testing.mirrormakers.TOOL_JVM`, -Xmx512m serial GC C1); kmirror with its defaults and "
        f"`--num.streams {STREAMS}`. MirrorMaker 1 and kmirror commit every {COMMIT_MS} ms (both default to "
        "60 s). One source cluster filled once; a fresh target cluster per run; contenders interleaved "
        "(MM1, MM2, kmirror, MM1, ...). **rec/s = records / time from the first record on the target until "
        "the last one is there and, for MirrorMaker 1 and kmirror, committed on the source**: nobody's "
        'start counts (MirrorMaker 2\'s Connect start is 20-35 s here; "from start" is the seconds from '
        "the process start to the end, start included). CPU = user + system seconds of the mirror's whole "
        "process tree (/proc/PID/stat) in that window, per million records. Peak RSS = sum of VmHWM of the "
        "tree's processes. Median (min-max) over the runs.",
        "",
        "| record size | contender | rec/s | MB/s | CPU s / M records | peak RSS MB | from start, s | "
        "rec/s vs kmirror | CPU/record vs kmirror |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size, runs in results.items():
        if not all(runs.values()):  # a partial log: only the sizes every contender finished
            continue
        k_rate = statistics.median(r.rate for r in runs["kmirror"])
        k_cpu = statistics.median(r.cpu_per_m for r in runs["kmirror"])
        for name, rs in runs.items():
            rate = statistics.median(r.rate for r in rs)
            cpu = statistics.median(r.cpu_per_m for r in rs)
            lines.append(
                f"| {size} B | {name} | {spread([r.rate for r in rs], ',.0f')} | {rate * size / 1e6:.1f} | "
                f"{spread([r.cpu_per_m for r in rs], '.1f')} | {spread([r.rss_mb for r in rs], '.0f')} | "
                f"{spread([r.from_start for r in rs], '.1f')} | {rate / k_rate:.2f}x | {cpu / k_cpu:.2f}x |"
            )
    return closing(lines, END, "bench-peers", "peers.py", options)


def measure_all(counts: dict[int, int], a: argparse.Namespace) -> dict[int, dict[str, list[Run]]]:
    with tempfile.TemporaryDirectory(prefix="kmirror-bench-peers-") as tmp:
        return {
            size: run_size(
                size,
                n,
                partitions=a.partitions,
                compression=a.compression,
                repeat=a.repeat,
                workdir=Path(tmp),
            )
            for size, n in counts.items()
        }


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--records-100", type=int, default=1_000_000)
    ap.add_argument("--records-1k", type=int, default=300_000)
    ap.add_argument("--sizes", type=int, nargs="+", choices=[100, 1000], default=[100, 1000])
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--compression", choices=["none", "lz4"], default="none")
    ap.add_argument("--repeat", type=int, default=3, help="runs per contender; median and spread reported")
    ap.add_argument("--write", type=Path, help="replace the peers section of this markdown file")
    ap.add_argument("--from-log", type=Path, help=argparse.SUPPRESS)  # re-render a previous run's lines
    a = ap.parse_args()
    counts = {s: n for s, n in {100: a.records_100, 1000: a.records_1k}.items() if s in a.sizes}
    if a.from_log:
        results: dict[int, dict[str, list[Run]]] = {size: {c: [] for c in CONTENDERS} for size in counts}
        for line in a.from_log.read_text().splitlines():
            if (m := RUN_LINE.match(line)) and int(m[1]) in results:
                rate, secs, start, first, cpu, rss = (float(m[i].replace(",", "")) for i in range(3, 9))
                results[int(m[1])][m[2]].append(Run(rate, secs, start, first, cpu, rss))
    else:
        results = measure_all(counts, a)
    options = " ".join(
        [f"--records-{'100' if s == 100 else '1k'} {n}" for s, n in counts.items()]
        + [f"--sizes {' '.join(map(str, counts))}", f"--partitions {a.partitions}"]
        + [f"--compression {a.compression}", f"--repeat {a.repeat}"]
    )
    section = report(
        results, counts, partitions=a.partitions, compression=a.compression, repeat=a.repeat, options=options
    )
    return publish(section, a.write, "peers")


if __name__ == "__main__":
    sys.exit(main())
