"""What provenance headers cost the mirror: `kmirror run` with `--provenance.header.enable true` versus
its default (off), on the per-record path (kmirror.lineage.provenance.Stamp: a header lookup and one small
bytes value per record).

Apache Kafka 4.3 clusters of one node (`kmirror.testing.kafka.BENCH_JVM`): one source filled once
(6 partitions, records with one header), a fresh target per run; the two contenders interleaved
(off, on / on, off / ...); rate and CPU as in bench/groups.py (records / time from the first partition
assignment until the mirror group committed every record; user + system time of all kmirror processes
per 1000 records, the steadier figure on a shared machine).

    flock /tmp/kmirror-bench.lock .venv/bin/python bench/provenance.py [--records N] [--size B]
                                                                        [--repeat 5] [--write FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from groups import Result, measure_one
from sections import machine_note, markers, write_section
from throughput import COMMIT_MS, GROUP_SETTINGS, PARTITIONS, TOPIC, bench_clusters, create_topic, fill

from kmirror.testing.mirrors import mirror_files, run_command

MODES = ("off", "on")
BEGIN, END = markers("provenance")


def command(workdir: Path, source: str, target: str, group: str, mode: str) -> list[str]:
    cfile, pfile = mirror_files(workdir, group, source, target, dict(GROUP_SETTINGS))
    cmd = run_command(
        cfile, pfile, TOPIC, "--offset.commit.interval.ms", str(COMMIT_MS), "--stats.interval.ms", "600000"
    )
    return [*cmd, "--provenance.header.enable", "true"] if mode == "on" else cmd


def run(n: int, size: int, repeat: int, workdir: Path) -> dict[str, list[Result]]:
    results: dict[str, list[Result]] = {m: [] for m in MODES}
    workdir.mkdir(parents=True, exist_ok=True)
    with bench_clusters("source", workdir=workdir) as src_c:
        source = src_c["source"].bootstrap
        fill(src_c["source"], n, size)
        for attempt in range(repeat):
            for mode in MODES if attempt % 2 == 0 else tuple(reversed(MODES)):
                with bench_clusters(f"target-{mode}-{attempt}", workdir=workdir) as tgt_c:
                    target = next(iter(tgt_c.values()))
                    create_topic(target)
                    group = f"bench-provenance-{mode}-{attempt}"
                    r = measure_one(command(workdir, source, target.bootstrap, group, mode), source, group, n)
                    results[mode].append(r)
                    print(
                        f"  {mode:3} run {attempt}: {r[0]:,.0f} rec/s, {r[1]:.5f} CPU s per 1000 records",
                        flush=True,
                    )
    return results


def report(results: dict[str, list[Result]], n: int, size: int) -> str:
    off, on = results["off"], results["on"]
    rates = [b[0] / a[0] for a, b in zip(off, on, strict=True)]
    cpus = [b[1] / a[1] for a, b in zip(off, on, strict=True)]
    lines = [
        BEGIN,
        "## Provenance headers: `--provenance.header.enable` on versus off",
        "",
        machine_note(),
        f"{n:,} records of {size} B in {PARTITIONS} partitions; kmirror with its defaults (one stream per "
        f"core), commit every {COMMIT_MS} ms; runs interleaved (off, on / on, off), each with a fresh "
        "target. "
        "CPU = user + system time of every kmirror process.",
        "",
        "| run | off rec/s | on rec/s | off CPU s / 1000 rec | on CPU s / 1000 rec |",
        "|---|---|---|---|---|",
    ]
    for i, (a, b) in enumerate(zip(off, on, strict=True)):
        lines.append(f"| {i} | {a[0]:,.0f} | {b[0]:,.0f} | {a[1]:.4f} | {b[1]:.4f} |")
    lines += [
        "",
        f"Median (min-max) of the paired ratios (on / off): throughput **{statistics.median(rates):.3f}** "
        f"({min(rates):.3f}-{max(rates):.3f}), CPU per record **{statistics.median(cpus):.3f}** "
        f"({min(cpus):.3f}-{max(cpus):.3f}). The per-record work with it on: look for the header among the "
        "record's own, format `CLUSTER/PARTITION/OFFSET/TOPIC` and append it (`Stamp` in "
        "`worker/src/kmirror/lineage/provenance.py`; about 0.3 µs a record in a micro-benchmark); the rest "
        "is the header itself, which librdkafka encodes and sends with every record: about 50 bytes here "
        "(the header name, a 22-character cluster id, partition, offset and topic), half again the size of a "
        "100 B record. With it off the record's path is one `if` longer.",
        "",
        "Reproduce: `make bench-provenance` (or `flock /tmp/kmirror-bench.lock .venv/bin/python "
        f"bench/provenance.py --records {n} --size {size} --repeat {len(on)} --write docs/benchmarks.md`).",
        END,
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=600_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write", type=Path, help="replace the provenance section of this markdown file")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kmirror-bench-provenance-") as tmp:
        results = run(a.records, a.size, a.repeat, Path(tmp))
    section = report(results, a.records, a.size)
    print(section)
    if a.write:
        write_section(a.write, "provenance", section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
