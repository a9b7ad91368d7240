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

import sys
from pathlib import Path

import groups
from groups import Result
from sections import closing, machine_note, markers
from throughput import COMMIT_MS, GROUP_SETTINGS, PARTITIONS, TOPIC

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
    return groups.run(n, size, repeat, workdir, name="provenance", modes=MODES, command=command, prepare=None,
                      show_sync=False)  # fmt: skip


def report(results: dict[str, list[Result]], n: int, size: int) -> str:
    table, ratios = groups.paired_runs(results, "off", "on")
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
        *table,
        "",
        f"{ratios} The per-record work with it on: look for the header among the "
        "record's own, format `CLUSTER/PARTITION/OFFSET/TOPIC` and append it (`Stamp` in "
        "`worker/src/kmirror/lineage/provenance.py`; about 0.3 µs a record in a micro-benchmark); the rest "
        "is the header itself, which librdkafka encodes and sends with every record: about 50 bytes here "
        "(the header name, a 22-character cluster id, partition, offset and topic), half again the size of a "
        "100 B record. With it off the record's path is one `if` longer.",
    ]
    options = f"--records {n} --size {size} --repeat {len(results['on'])}"
    return closing(lines, END, "bench-provenance", "provenance.py", options)


def main() -> int:
    return groups.paired_main(__doc__, "provenance", run, report)


if __name__ == "__main__":
    sys.exit(main())
