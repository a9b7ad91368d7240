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
* MirrorMaker 2 (heartbeats and checkpoints off), `--contenders mm2-bare`: the same with
  emit.heartbeats.enabled=false, emit.checkpoints.enabled=false and sync.group.offsets.enabled=false;
* kmirror: `kmirror run` with its defaults (every guarantee on), `--num.streams 2`, a fresh group.

`--contenders` picks and orders them (mm1 mm2 mm2-bare kmirror, all by default). With `--limits` (the
default) the interleaving also runs Kafka's own `kafka-producer-perf-test` (to a fresh target) and
`kafka-consumer-perf-test` (from the source), their rates as they print them (bench/peers_limits.py).

Both MirrorMaker 1 and kmirror commit every 500 ms (COMMIT_MS; both default to 60 s, which would make
"committed" mean "the next minute"). Every mirror writes to the target uncompressed (its producer's
default), whatever `--compression` the source has. The yardstick is the same for all: the target's end
offsets, sampled every 50 ms from outside. Rate = records / time from the first record on the target
until the last one is there (and, for MirrorMaker 1 and kmirror, until their source group has committed every
record), so process start, Connect's start and group joins count for no one; the seconds from process
start to the end are shown beside. CPU = user + system seconds of the mirror's whole process tree
(/proc/<pid>/stat, reaped children included) between the first record on the target and the end, per
million records. Peak RSS = the sum of every process' VmHWM in the tree at the end.

With `--latency` (the default), after the throughput runs: end-to-end latency p50/p99 of each mirror at a
steady `--latency-rate` records/s (2000) for `--latency-seconds` (30) after `--latency-warmup` seconds
(30: the fresh brokers' JIT compilers settle first; with 5, every p99 measured the JIT), on a fresh source
and target per run, interleaved, `--repeat` runs (bench/peers_latency.py); then the same producer and
reader with no mirror, the reader on the source: the method's own floor.

    flock /tmp/kmirror-bench.lock .venv/bin/python bench/peers.py [--records-100 N] [--records-1k N]
        [--sizes 100 1000] [--compression none|lz4] [--contenders mm1 mm2 mm2-bare kmirror]
        [--no-limits] [--no-latency] [--latency-rate 2000] [--latency-seconds 30] [--latency-warmup 30]
        [--repeat 3] [--write FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from peers_latency import FETCH_WAIT_MS, Latency, steady_latency
from peers_limits import CONSUMER_TOOL, LIMITS, PRODUCER_TOOL, Limit, consumer_limit, producer_limit
from sections import closing, kafka_version, machine_note, markers, parser, publish
from throughput import (
    GROUP_SETTINGS,
    QUIET,
    TOPIC,
    Committed,
    bench_clusters,
    create_topic,
    fill,
    process_group,
)

from kmirror.testing.mirrormakers import MM1_LINE, MM2_LINE, MirrorMaker1, MirrorMaker2, tree_usage
from kmirror.testing.mirrors import mirror_files, run_command


def section_name(compression: str) -> str:
    """One section per compression (`make bench-peers` runs both): peers, peers-lz4."""
    return "peers" if compression == "none" else f"peers-{compression}"


MM2_BARE = "MirrorMaker 2 (heartbeats and checkpoints off)"
CONTENDERS = {"mm1": "MirrorMaker 1", "mm2": "MirrorMaker 2", "mm2-bare": MM2_BARE, "kmirror": "kmirror"}
SHORT = {"MirrorMaker 1": "MM1", "MirrorMaker 2": "MM2", MM2_BARE: "MM2 bare", "kmirror": "kmirror"}
DIRECT = "no mirror: the reader on the source"  # the latency method's own floor
NAMES = "|".join(re.escape(n) for n in sorted([*CONTENDERS.values(), DIRECT], key=len, reverse=True))
RUN_LINE = re.compile(
    rf"\s*(\d+) B  ({NAMES})\s+#\d+:\s+([0-9,.]+) rec/s\s+[0-9.]+ MB/s "
    r"\(([0-9.]+) s; ([0-9.]+) s from start, first record after ([0-9.]+) s\), "
    r"([0-9.]+) CPU s/M rec, ([0-9.]+) MB RSS"
)
LIMIT_LINE = re.compile(
    r"\s*(\d+) B  (limit: (?:producer|consumer) perf tool) #\d+:\s+([0-9,.]+) rec/s\s+[0-9.]+ MB/s "
    r"\(the tool's own rate; ([0-9.]+) s from start\)"
)
LATENCY_LINE = re.compile(
    rf"\s*latency  ({NAMES}) #\d+: p50 ([0-9.]+) ms, p99 ([0-9.]+) ms \(([0-9,]+) records, "
    r"timestamps kept ([0-9,]+)\)"
)
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


def launch(
    name: str, source: str, target: str, *, workdir: Path, group: str
) -> tuple[Callable[[], int], Callable[[], None]]:
    """(start, stop) of one mirror contender: start returns the pid of its process tree's root."""
    tool: MirrorMaker1 | MirrorMaker2
    if name == "kmirror":
        cfile, pfile = mirror_files(workdir, group, source, target, GROUP_SETTINGS)
        cmd = run_command(cfile, pfile, TOPIC, "--num.streams", str(STREAMS), "--offset.commit.interval.ms",
                          str(COMMIT_MS), "--stats.interval.ms", "600000")  # fmt: skip
        return process_group(cmd, workdir / f"{group}.log")
    if name == "MirrorMaker 1":
        tool = MirrorMaker1(workdir / group, source, target, TOPIC, group, num_streams=STREAMS,
                            commit_interval_ms=COMMIT_MS)  # fmt: skip
    else:
        extra = MM2_DEFAULTS if name == "MirrorMaker 2" else MM2_BARE_SETTINGS
        tool = MirrorMaker2(workdir / group, source, target, TOPIC, tasks_max=STREAMS, extra=extra)
    return (lambda: tool.start().pid), (lambda: tool.stop(60))


def run_one(name: str, source: str, target: str, *, partitions: int, n: int, workdir: Path, tag: str) -> Run:
    group = f"peers-{tag}"
    start, stop = launch(name, source, target, workdir=workdir, group=group)
    # MirrorMaker 2 commits no source group
    committed = None if name.startswith("MirrorMaker 2") else Committed(source, group)
    try:
        return measure(start, stop, target=target, partitions=partitions, n=n, committed=committed)
    finally:
        if committed:
            committed.close()


COMMIT_MS = 500
# MirrorMaker 2's own defaults where the harness turns features off for the cutover tests (ACL sync stays
# off: the bench clusters have no authorizer, so there is nothing to sync).
MM2_DEFAULTS = {"emit.heartbeats.enabled": "true", "emit.checkpoints.enabled": "true"}
# The flow alone (what the harness itself sets; stated here so that the row says what it measured).
MM2_BARE_SETTINGS = {
    "emit.heartbeats.enabled": "false",
    "emit.checkpoints.enabled": "false",
    "sync.group.offsets.enabled": "false",
}


def run_size(
    size: int, n: int, *, names: list[str], partitions: int, compression: str, repeat: int, workdir: Path
) -> dict[str, list[Run | Limit]]:
    results: dict[str, list[Run | Limit]] = {c: [] for c in names}
    with bench_clusters(f"source-{size}", workdir=workdir) as src:
        source = src[f"source-{size}"]
        fill(source, n, size, partitions, compression)
        for attempt in range(repeat):
            for i, name in enumerate(names):
                tag = f"{size}-{i}-{attempt}"
                r: Run | Limit
                if name == CONSUMER_TOOL:  # reads the source: no target
                    r = consumer_limit(source.bootstrap, TOPIC, n, f"peers-{tag}", workdir / f"peers-{tag}")
                else:
                    with bench_clusters(f"target-{tag}", workdir=workdir) as tgt:
                        target = next(iter(tgt.values()))
                        create_topic(target, partitions)
                        if name == PRODUCER_TOOL:
                            r = producer_limit(target.bootstrap, TOPIC, n, size=size, compression=compression,
                                               workdir=workdir / f"peers-{tag}")  # fmt: skip
                        else:
                            r = run_one(name, source.bootstrap, target.bootstrap, partitions=partitions, n=n,
                                        workdir=workdir, tag=tag)  # fmt: skip
                results[name].append(r)
                print(show(size, name, attempt, r), flush=True)
    return results


def show(size: int, name: str, attempt: int, r: Run | Limit) -> str:
    """The run's log line (RUN_LINE, LIMIT_LINE: `--from-log` reads them back)."""
    head = f"  {size:>5} B  {name:14} #{attempt}: {r.rate:>9,.0f} rec/s {r.rate * size / 1e6:6.1f} MB/s "
    if isinstance(r, Limit):
        return head + f"(the tool's own rate; {r.from_start:.1f} s from start)"
    return head + (
        f"({r.seconds:.1f} s; {r.from_start:.1f} s from start, first record after "
        f"{r.first_after:.1f} s), {r.cpu_per_m:.1f} CPU s/M rec, {r.rss_mb:.0f} MB RSS"
    )


def run_latency(
    names: list[str], *, partitions: int, compression: str, repeat: int, rate: int, seconds: float,
    warmup: float, workdir: Path,
) -> dict[str, list[Latency]]:  # fmt: skip
    """Each mirror's steady-rate latency (bench/peers_latency.py), interleaved, fresh clusters per run; then
    DIRECT: the same producer and reader, the reader on the source (no mirror, no target)."""
    results: dict[str, list[Latency]] = {c: [] for c in [*names, DIRECT]}
    for attempt in range(repeat):
        for i, name in enumerate(results):
            tag = f"latency-{i}-{attempt}"
            clusters = [f"source-{tag}"] + ([] if name == DIRECT else [f"target-{tag}"])
            with bench_clusters(*clusters, workdir=workdir) as cs:
                source = cs[f"source-{tag}"]
                target = cs.get(f"target-{tag}", source)
                for c in [source] if target is source else [source, target]:
                    create_topic(c, partitions)
                if name == DIRECT:
                    start, stop = os.getpid, (lambda: None)
                else:
                    start, stop = launch(
                        name, source.bootstrap, target.bootstrap, workdir=workdir, group=f"peers-{tag}"
                    )
                r = steady_latency(start, stop, source=source.bootstrap, target=target.bootstrap,
                                   partitions=partitions, rate=rate, seconds=seconds, warmup=warmup,
                                   compression=compression)  # fmt: skip
            results[name].append(r)
            print(
                f"  latency  {name} #{attempt}: p50 {r.p50:.1f} ms, p99 {r.p99:.1f} ms "
                f"({r.records:,} records, timestamps kept {r.kept:,})",
                flush=True,
            )
    return results


def spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def missing_note(counts: dict[int, int], a: argparse.Namespace) -> str:
    """What issue 21 asks for that this run did not measure (empty if nothing). The other compression has
    a section of its own."""
    left = []
    if min(counts.values(), default=0) < 3_000_000:
        left.append("3 M records of each size (`--records-100`, `--records-1k`)")
    if not a.limits:
        left.append("Kafka's own producer and consumer performance tools as limits (`--limits`)")
    if not a.latency:
        left.append("end-to-end latency at a steady rate (`--latency`)")
    if "mm2-bare" not in a.contenders:
        left.append("MirrorMaker 2 with heartbeats and checkpoints off (`--contenders ... mm2-bare`)")
    return f"Not in this run (issue 21 asks for them): {'; '.join(left)}." if left else ""


def report(
    results: dict[int, dict[str, list[Run | Limit]]],
    counts: dict[int, int],
    latency: dict[str, list[Latency]],
    a: argparse.Namespace,
    options: str,
) -> str:
    runs_text = " and ".join(f"{counts[s]:,} records of {s} B" for s in counts)
    mirrors = [CONTENDERS[c] for c in a.contenders]
    order = [SHORT[m] for m in mirrors] + (["producer perf tool", "consumer perf tool"] if a.limits else [])
    compressed = "uncompressed" if a.compression == "none" else a.compression + " on the source"
    begin, end = markers(section_name(a.compression))
    lines = [
        begin,
        f"## Side by side with MirrorMaker 1 and MirrorMaker 2 ({runs_text}, {compressed}, "
        f"{a.partitions} partitions, {a.repeat} runs each)",
        "",
        machine_note(),
        *filter(None, [missing_note(counts, a)]),
        f"MirrorMaker 1 from Apache Kafka {kafka_version(MM1_LINE)} (`kafka.tools.MirrorMaker`, the "
        "reference documents' data-loss-safe settings: acks=all, retries=2147483647, "
        "max.in.flight.requests.per.connection=1, enable.auto.commit=false, max.block.ms at max, "
        f"`--abort.on.send.failure true`, `--num.streams {STREAMS}`); MirrorMaker 2 from Apache Kafka "
        f"{kafka_version(MM2_LINE)} in dedicated mode (IdentityReplicationPolicy, tasks.max={STREAMS}, "
        "heartbeats and checkpoints on, otherwise its defaults; JVMs of both: "
        "`kmirror.testing.mirrormakers.TOOL_JVM`, -Xmx512m serial GC C1); "
        + (
            f"{MM2_BARE}: the same with emit.heartbeats.enabled=false, emit.checkpoints.enabled=false and "
            "sync.group.offsets.enabled=false (the flow alone); "
            if "mm2-bare" in a.contenders
            else ""
        )
        + f"kmirror with its defaults and `--num.streams {STREAMS}`. Compression: "
        + (
            "none anywhere. "
            if a.compression == "none"
            else f"the source's records are written with {a.compression} (as are the producer perf tool's "
            "and the latency producer's); every mirror writes to the target with its producer's default, "
            "no compression. "
        )
        + f"MirrorMaker 1 and kmirror commit every {COMMIT_MS} ms (both default to "
        "60 s). One source cluster filled once; a fresh target cluster per run; contenders interleaved "
        f"({', '.join(order)}, then again). **rec/s = records / time from the first record on the target "
        "until the last one is there and, for MirrorMaker 1 and kmirror, committed on the source**: nobody's "
        'start counts (MirrorMaker 2\'s Connect start is 20-35 s here; "from start" is the seconds from '
        "the process start to the end, start included). CPU = user + system seconds of the mirror's whole "
        "process tree (/proc/PID/stat) in that window, per million records. Peak RSS = sum of VmHWM of the "
        "tree's processes. Median (min-max) over the runs.",
    ]
    if a.limits:
        lines.append(
            "**Limits** (rows `limit: ...`): Kafka's own tools from the 4.3 jars with the same JVM flags, "
            "the same record size, count, partitions and compression. `kafka-producer-perf-test` "
            "(`org.apache.kafka.tools.ProducerPerformance`) writes the records (no key, no header) to a "
            "fresh target, unthrottled, acks=all, otherwise the Java producer's defaults; "
            "`kafka-consumer-perf-test` "
            "(`org.apache.kafka.tools.ConsumerPerformance`) reads them from the filled source with a fresh "
            "group. **Their rec/s is the tools' own figure, parsed from their output**: records/sec of the "
            "producer tool's final summary line, fetch.nMsg.sec of the consumer tool's result line (which "
            "leaves out its group join); MB/s = rec/s x record size / 10^6 as on the other rows (the tools "
            'print MiB/s). "from start" is the tool\'s JVM start to its exit; CPU and RSS are not measured '
            "for them. A mirror does both jobs on the same cores, so neither row is reachable by a mirror; "
            "they show how far each side alone goes here."
        )
    lines += [
        "",
        "| record size | contender | rec/s | MB/s | CPU s / M records | peak RSS MB | from start, s | "
        "rec/s vs kmirror | CPU/record vs kmirror |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size, runs in results.items():
        if not all(runs.values()):  # a partial log: only the sizes every contender finished
            continue
        mine = [r for r in runs.get("kmirror", []) if isinstance(r, Run)]
        k_rate = statistics.median(r.rate for r in mine) if mine else None
        k_cpu = statistics.median(r.cpu_per_m for r in mine) if mine else None
        for name, rs in runs.items():
            rates = [r.rate for r in rs]
            rate = statistics.median(rates)
            vs_rate = f"{rate / k_rate:.2f}x" if k_rate else "-"
            starts = spread([r.from_start for r in rs], ".1f")
            if name in LIMITS:
                lines.append(
                    f"| {size} B | {name} | {spread(rates, ',.0f')} | {rate * size / 1e6:.1f} | - | - | "
                    f"{starts} | {vs_rate} | - |"
                )
                continue
            runs_ = [r for r in rs if isinstance(r, Run)]
            cpu = statistics.median(r.cpu_per_m for r in runs_)
            vs_cpu = f"{cpu / k_cpu:.2f}x" if k_cpu else "-"
            cpus, rss = spread([r.cpu_per_m for r in runs_], ".1f"), spread([r.rss_mb for r in runs_], ".0f")
            lines.append(
                f"| {size} B | {name} | {spread(rates, ',.0f')} | {rate * size / 1e6:.1f} | {cpus} | {rss} | "
                f"{starts} | {vs_rate} | {vs_cpu} |"
            )
    if latency and all(latency.values()):
        slowest = min(
            (statistics.median(r.rate for r in rs) for runs in results.values() for n, rs in runs.items()
             if n not in LIMITS and rs),
            default=None,
        )  # fmt: skip
        below = (
            "rate not compared: no throughput rows"
            if slowest is None
            else f"{'below' if a.latency_rate < slowest else 'NOT below'} the slowest mirror's median rate "
            f"above, {slowest:,.0f} records/s"
        )
        lines += [
            "",
            f"**End-to-end latency at a steady {a.latency_rate:,} records/s** ({below}): a fresh source and "
            "target per run, topic of "
            f"{a.partitions} partitions, the same mirror settings, interleaved, {a.repeat} runs each. A "
            f"producer writes keyed records of 100 B ({compressed.replace(' on the source', '')}, acks=all, "
            "idempotent, linger.ms=5) to the source at that rate, each with its timestamp set to its send "
            "time (CreateTime) and that time in its value too; a reader on the target (every partition "
            f"assigned, fetch.wait.max.ms={FETCH_WAIT_MS}) takes, per record, its clock at arrival minus the "
            "record's timestamp. **Warm-up skipped**: while the mirror starts only probe records go out "
            "(one every 50 ms, partitions in turn) until the target holds a record of every source "
            f"partition; then the steady rate runs {a.latency_warmup:g} s uncounted, then "
            f'{a.latency_seconds:g} s counted. "timestamps kept" = counted records whose timestamp on the '
            "target is CreateTime and equal to the send time in their value (every mirror must keep the "
            "source's timestamp for this latency to mean anything). The last row runs the same producer "
            "and reader with no mirror, the reader on the source: the floor of this method here (two "
            "Python clients and one broker on the shared machine). p50 and p99 of each run; median "
            "(min-max) over the runs.",
            "",
            "| contender | p50 ms | p99 ms | records counted per run | timestamps kept |",
            "|---|---|---|---|---|",
        ]
        for name, ls in latency.items():
            kept = sum(r.kept for r in ls)
            total = sum(r.records for r in ls)
            lines.append(
                f"| {name} | {spread([r.p50 for r in ls], '.1f')} | {spread([r.p99 for r in ls], '.1f')} | "
                f"{statistics.median(r.records for r in ls):,.0f} | "
                f"{'all' if kept == total else 'NOT all:'} {kept:,} of {total:,} |"
            )
    return closing(lines, end, "bench-peers", "peers.py", options)


def from_log(
    path: Path, counts: dict[int, int], a: argparse.Namespace
) -> tuple[dict[int, dict[str, list[Run | Limit]]], dict[str, list[Latency]]]:
    """A previous run's results, read back from its log lines (RUN_LINE, LIMIT_LINE, LATENCY_LINE)."""
    names = names_of(a)
    results: dict[int, dict[str, list[Run | Limit]]] = {size: {c: [] for c in names} for size in counts}
    latency: dict[str, list[Latency]] = {CONTENDERS[c]: [] for c in a.contenders} if a.latency else {}
    if latency:
        latency[DIRECT] = []
    for line in path.read_text().splitlines():
        if (m := RUN_LINE.match(line)) and int(m[1]) in results and m[2] in names:
            rate, secs, start, first, cpu, rss = (float(m[i].replace(",", "")) for i in range(3, 9))
            results[int(m[1])][m[2]].append(Run(rate, secs, start, first, cpu, rss))
        elif (m := LIMIT_LINE.match(line)) and int(m[1]) in results and m[2] in names:
            results[int(m[1])][m[2]].append(Limit(float(m[3].replace(",", "")), float(m[4])))
        elif (m := LATENCY_LINE.match(line)) and m[1] in latency:
            records, kept = (int(m[i].replace(",", "")) for i in (4, 5))
            latency[m[1]].append(Latency(float(m[2]), float(m[3]), records, kept))
    return results, latency


def names_of(a: argparse.Namespace) -> list[str]:
    """The throughput runs' contenders in their interleaved order: the mirrors, then the limits."""
    return [CONTENDERS[c] for c in a.contenders] + (list(LIMITS) if a.limits else [])


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--records-100", type=int, default=3_000_000)
    ap.add_argument("--records-1k", type=int, default=3_000_000)
    ap.add_argument("--sizes", type=int, nargs="+", choices=[100, 1000], default=[100, 1000])
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--compression", choices=["none", "lz4"], default="none")
    ap.add_argument(
        "--contenders", nargs="+", choices=list(CONTENDERS), default=list(CONTENDERS),
        help="the mirrors to run, in this order (default: all)",
    )  # fmt: skip
    ap.add_argument(
        "--limits", action=argparse.BooleanOptionalAction, default=True,
        help="also Kafka's producer and consumer perf tools as limits (default: on)",
    )  # fmt: skip
    ap.add_argument(
        "--latency", action=argparse.BooleanOptionalAction, default=True,
        help="also each mirror's end-to-end latency at a steady rate (default: on)",
    )  # fmt: skip
    ap.add_argument("--latency-rate", type=int, default=2000, help="records/s of the latency runs (2000)")
    ap.add_argument("--latency-seconds", type=float, default=30, help="seconds counted per latency run (30)")
    ap.add_argument("--latency-warmup", type=float, default=30, help="seconds at that rate not counted (30)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per contender; median and spread reported")
    ap.add_argument("--write", type=Path, help="replace the peers section of this markdown file")
    ap.add_argument("--from-log", type=Path, help=argparse.SUPPRESS)  # re-render a previous run's lines
    a = ap.parse_args()
    counts = {s: n for s, n in {100: a.records_100, 1000: a.records_1k}.items() if s in a.sizes}
    latency: dict[str, list[Latency]] = {}
    if a.from_log:
        results, latency = from_log(a.from_log, counts, a)
    else:
        with tempfile.TemporaryDirectory(prefix="kmirror-bench-peers-") as tmp:
            results = {
                size: run_size(
                    size,
                    n,
                    names=names_of(a),
                    partitions=a.partitions,
                    compression=a.compression,
                    repeat=a.repeat,
                    workdir=Path(tmp),
                )
                for size, n in counts.items()
            }
            if a.latency:
                latency = run_latency(
                    [CONTENDERS[c] for c in a.contenders], partitions=a.partitions, compression=a.compression,
                    repeat=a.repeat, rate=a.latency_rate, seconds=a.latency_seconds, warmup=a.latency_warmup,
                    workdir=Path(tmp),
                )  # fmt: skip
    options = " ".join(
        [f"--records-{'100' if s == 100 else '1k'} {n}" for s, n in counts.items()]
        + [f"--sizes {' '.join(map(str, counts))}", f"--partitions {a.partitions}"]
        + [f"--compression {a.compression}"]
        + ([f"--contenders {' '.join(a.contenders)}"] if a.contenders != list(CONTENDERS) else [])
        + ([] if a.limits else ["--no-limits"])
        + (
            [
                f"--latency-rate {a.latency_rate}",
                f"--latency-seconds {a.latency_seconds:g}",
                f"--latency-warmup {a.latency_warmup:g}",
            ]
            if a.latency
            else ["--no-latency"]
        )
        + [f"--repeat {a.repeat}"]
    )
    return publish(report(results, counts, latency, a, options), a.write, section_name(a.compression))


if __name__ == "__main__":
    sys.exit(main())
