"""What failover costs the mirror: `kmirror run` throughput with `--groups` on versus off; and what gap
detection costs: off again with `partition.assignment.strategy=range` (an eager assignor: no gap detection,
see `cooperative()` in kmirror.mirror.gaps) against off (cooperative-sticky: gap detection on).

Apache Kafka 4.3 clusters of one node (`kmirror.testing.kafka.BENCH_JVM`): one source filled once
(6 partitions) with application groups that have committed offsets on it (so the group offset sync has
work every interval); a fresh target cluster per run (the sync finds no earlier offsets); the three
contenders run interleaved (off, on, range / range, on, off / ...) so that machine noise hits all; rate
as in bench/throughput.py (records / time from the first partition assignment until the mirror group
committed every record), and the CPU time of all kmirror processes per record (steadier than rates on a
shared machine). All commit every 500 ms (with --groups a sync point per partition at every commit point:
more often than the default 60 s, so the sync's cost shows); on:
`--groups '.*' --sync.group.offsets.interval.ms 1000`.

    flock /tmp/kmirror-bench.lock .venv/bin/python bench/groups.py [--records N] [--repeat 5] [--write FILE]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from sections import closing, machine_note, markers, parser, publish
from throughput import (
    COMMIT_MS,
    GROUP_SETTINGS,
    PARTITIONS,
    QUIET,
    TOPIC,
    Committed,
    bench_clusters,
    create_topic,
    fill,
)

from kmirror.testing.mirrors import mirror_files, run_command

APP_GROUPS = 5
SYNC_MS = 1000
BEGIN, END = markers("groups")
SYNC_LINE = re.compile(r"sync points written, ([0-9.]+) s spent")
RUN_LINE = re.compile(
    r"\s*(off|on|range)\s+run \d+: ([0-9,]+) rec/s, ([0-9.]+) CPU s per 1000 records, ([0-9.]+) s at"
)


def commit_app_groups(source: str, n: int) -> None:
    """Application groups with committed offsets spread over the topic."""
    for g in range(APP_GROUPS):
        c = Consumer(
            {"bootstrap.servers": source, "group.id": f"app-{g}", "enable.auto.commit": False}, logger=QUIET
        )
        at = n // PARTITIONS * (g + 1) // (APP_GROUPS + 1)
        c.commit(offsets=[TopicPartition(TOPIC, p, at) for p in range(PARTITIONS)], asynchronous=False)
        c.close()


# The contenders: --groups off (gap detection on: the default cooperative-sticky assignor), --groups on, and
# --groups off with an eager assignor (gap detection off: auto.offset.reset stays librdkafka's own).
MODES = ("off", "on", "range")


def command(workdir: Path, source: str, target: str, group: str, mode: str) -> list[str]:
    settings = dict(GROUP_SETTINGS)
    if mode == "range":
        settings["partition.assignment.strategy"] = "range"
    cfile, pfile = mirror_files(workdir, group, source, target, settings)
    cmd = run_command(
        cfile, pfile, TOPIC, "--offset.commit.interval.ms", str(COMMIT_MS), "--stats.interval.ms", "600000"
    )
    if mode == "on":
        cmd += ["--groups", ".*", "--sync.group.offsets.interval.ms", str(SYNC_MS)]
    return cmd


Result = tuple[float, float, float]  # records/s, CPU seconds of kmirror per 1000 records, sync seconds


def measure_one(cmd: list[str], source: str, group: str, n: int, timeout: float = 600) -> Result:
    """Run kmirror until its group committed n records: rate (from the first assignment), the CPU time
    of all its processes per 1000 records, and the time its streams spent at sync points (from its log)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    lines: list[str] = []
    assigned: list[float] = []

    def watch() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace")
            lines.append(line)
            if "assigned" in line and not assigned:
                assigned.append(time.monotonic())

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    progress = Committed(source, group)
    deadline = time.monotonic() + timeout
    try:
        while not assigned or progress.total() < n:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{cmd} stopped or timed out:\n{''.join(lines[-20:])}")
            time.sleep(0.1)
        done = time.monotonic()
    finally:
        progress.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
        reader.join(10)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    sync_s = sum(float(m.group(1)) for line in lines if (m := SYNC_LINE.search(line)))
    return n / max(done - assigned[0], 1e-6), cpu / n * 1000, sync_s


def run(
    n: int,
    size: int,
    repeat: int,
    workdir: Path,
    *,
    name: str = "groups",
    modes: tuple[str, ...] = MODES,
    command: Callable[[Path, str, str, str, str], list[str]] = command,
    prepare: Callable[[str, int], None] | None = commit_app_groups,
    show_sync: bool = True,
) -> dict[str, list[Result]]:
    """The modes' runs interleaved (in order, then reversed, ...) against one filled source, each with a
    fresh target; ``prepare(source, n)`` once after the fill."""
    results: dict[str, list[Result]] = {m: [] for m in modes}
    workdir.mkdir(parents=True, exist_ok=True)
    with bench_clusters("source", workdir=workdir) as src_c:
        source = src_c["source"].bootstrap
        fill(src_c["source"], n, size)
        if prepare:
            prepare(source, n)
        for attempt in range(repeat):
            for mode in modes if attempt % 2 == 0 else tuple(reversed(modes)):
                with bench_clusters(f"target-{mode}-{attempt}", workdir=workdir) as tgt_c:
                    target = next(iter(tgt_c.values()))
                    create_topic(target)
                    group = f"bench-{name}-{mode}-{attempt}"
                    cmd = command(workdir, source, target.bootstrap, group, mode)
                    r = measure_one(cmd, source, group, n)
                    results[mode].append(r)
                    line = f"  {mode:3} run {attempt}: {r[0]:,.0f} rec/s, {r[1]:.5f} CPU s per 1000 records"
                    print(line + (f", {r[2]:.3f} s at sync points" if show_sync else ""), flush=True)
    return results


def report(results: dict[str, list[Result]], n: int, size: int) -> str:
    off, on, eager = results["off"], results["on"], results["range"]
    eager_rates = [c[0] / a[0] for a, c in zip(off, eager, strict=True)]
    eager_cpus = [c[1] / a[1] for a, c in zip(off, eager, strict=True)]
    rate_ratios = [b[0] / a[0] for a, b in zip(off, on, strict=True)]
    cpu_ratios = [b[1] / a[1] for a, b in zip(off, on, strict=True)]
    rate_ratio, cpu_ratio = statistics.median(rate_ratios), statistics.median(cpu_ratios)
    streams = os.cpu_count() or 1  # kmirror's default --num.streams
    sync_share = statistics.median(b[2] / streams / (n / b[0]) for b in on)  # of each stream's time
    commit_points = [streams * (n / b[0]) / (COMMIT_MS / 1000) for b in on]
    per_point_ms = statistics.median(b[2] * 1000 / k for b, k in zip(on, commit_points, strict=True))
    lines = [
        BEGIN,
        "## Failover offset sync: `--groups` on versus off; gap detection",
        "",
        machine_note(),
        "Wall-clock rates are the noisiest figure here; CPU time per record is the steadier measure. "
        f"{n:,} records of {size} B in {PARTITIONS} partitions, "
        f"{APP_GROUPS} application groups with committed offsets on the source; kmirror with its defaults "
        f"(one stream per core), commit every {COMMIT_MS} ms (a sync point per partition at each: far more "
        f"often than the default 60 s), `--groups '.*' --sync.group.offsets.interval.ms {SYNC_MS}`; runs "
        "interleaved (off, on, range / range, on, off), each with a fresh target. CPU = user + system time "
        "of every kmirror process; sync = time the streams spent measuring target ends and writing sync "
        "points.",
        "",
        "| run | off rec/s | on rec/s | range rec/s | off CPU s / 1000 rec | on CPU s / 1000 rec "
        "| range CPU s / 1000 rec | on: s at sync points |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, (a, b, c) in enumerate(zip(off, on, eager, strict=True)):
        lines.append(
            f"| {i} | {a[0]:,.0f} | {b[0]:,.0f} | {c[0]:,.0f} | {a[1]:.4f} | {b[1]:.4f} | {c[1]:.4f} "
            f"| {b[2]:.3f} |"
        )
    lines += [
        "",
        f"Median (min-max) of the paired ratios (on / off): throughput **{rate_ratio:.3f}** "
        f"({min(rate_ratios):.3f}-{max(rate_ratios):.3f}), CPU per record **{cpu_ratio:.3f}** "
        f"({min(cpu_ratios):.3f}-{max(cpu_ratios):.3f}). Each stream spent a median **{sync_share:.1%}** "
        "of its time at sync points, "
        f"about **{per_point_ms:.0f} ms per commit point** (ListOffsets, end probe, produce): the cost "
        f"is that time divided by `--offset.commit.interval.ms`, {per_point_ms / COMMIT_MS:.1%} here and "
        f"{per_point_ms / 60_000:.2%} at the default 60 s. The group offset sync runs in the supervisor "
        "process and does no per-record work.",
        "",
        "Gap detection: *range* is *off* with `partition.assignment.strategy=range`, an eager assignor, with "
        "which kmirror leaves `auto.offset.reset` to librdkafka and detects no gaps (`cooperative()` in "
        "`worker/src/kmirror/mirror/gaps.py`); *off* has the default cooperative-sticky assignor and "
        "`auto.offset.reset=error`, gap detection on. The two differ in the assignor as well (an eager one "
        "revokes every partition of every stream at each rebalance, as at the start when the second stream "
        "joins), so a difference between them includes the assignor's. Median (min-max) of the paired "
        "ratios (off / range): "
        f"throughput **{statistics.median(1 / r for r in eager_rates):.3f}** "
        f"({min(1 / r for r in eager_rates):.3f}-{max(1 / r for r in eager_rates):.3f}), CPU per record "
        f"**{statistics.median(1 / r for r in eager_cpus):.3f}** "
        f"({min(1 / r for r in eager_cpus):.3f}-{max(1 / r for r in eager_cpus):.3f}). Gap detection has "
        "no per-record work: `auto.offset.reset=error` only changes how librdkafka delivers an offset "
        "reset (an `_AUTO_OFFSET_RESET` event among the consumer's errors, handled in `Gaps._offset_reset`, "
        "`worker/src/kmirror/mirror/gaps.py`); a record's path (`Stream._loop` in "
        "`worker/src/kmirror/mirror/engine.py`) is the same with it on or off.",
    ]
    return closing(lines, END, "bench-groups", "groups.py", f"--records {n} --size {size} --repeat {len(on)}")


def paired_runs(results: dict[str, list[Result]], first: str, second: str) -> tuple[list[str], str]:
    """Two interleaved modes run by run (a table of rate and CPU per 1000 records), and the sentence with
    the medians (min-max) of their paired ratios, ``second`` / ``first``."""
    a_runs, b_runs = results[first], results[second]
    rates = [b[0] / a[0] for a, b in zip(a_runs, b_runs, strict=True)]
    cpus = [b[1] / a[1] for a, b in zip(a_runs, b_runs, strict=True)]
    table = [
        f"| run | {first} rec/s | {second} rec/s | {first} CPU s / 1000 rec | {second} CPU s / 1000 rec |",
        "|---|---|---|---|---|",
        *(
            f"| {i} | {a[0]:,.0f} | {b[0]:,.0f} | {a[1]:.4f} | {b[1]:.4f} |"
            for i, (a, b) in enumerate(zip(a_runs, b_runs, strict=True))
        ),
    ]
    ratios = (
        f"Median (min-max) of the paired ratios ({second} / {first}): throughput "
        f"**{statistics.median(rates):.3f}** ({min(rates):.3f}-{max(rates):.3f}), CPU per record "
        f"**{statistics.median(cpus):.3f}** ({min(cpus):.3f}-{max(cpus):.3f})."
    )
    return table, ratios


def paired_main(
    doc: str | None,
    name: str,
    run: Callable[[int, int, int, Path], dict[str, list[Result]]],
    report: Callable[[dict[str, list[Result]], int, int], str],
    from_log: Callable[[Path], dict[str, list[Result]]] | None = None,
) -> int:
    """The command line of a benchmark of kmirror run in interleaved modes (this one, bench/provenance.py)."""
    ap = parser(doc)
    ap.add_argument("--records", type=int, default=600_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write", type=Path, help=f"replace the {name} section of this markdown file")
    if from_log:
        ap.add_argument("--from-log", type=Path, help=argparse.SUPPRESS)  # re-render a previous run's lines
    a = ap.parse_args()
    if from_log and a.from_log:
        results = from_log(a.from_log)
    else:
        with tempfile.TemporaryDirectory(prefix=f"kmirror-bench-{name}-") as tmp:
            results = run(a.records, a.size, a.repeat, Path(tmp))
    return publish(report(results, a.records, a.size), a.write, name)


def results_from_log(log: Path) -> dict[str, list[Result]]:
    results: dict[str, list[Result]] = {m: [] for m in MODES}
    for line in log.read_text().splitlines():
        if m := RUN_LINE.match(line):
            results[m[1]].append((float(m[2].replace(",", "")), float(m[3]), float(m[4])))
    return results


def main() -> int:
    return paired_main(__doc__, "groups", run, report, results_from_log)


if __name__ == "__main__":
    sys.exit(main())
