"""What failover costs the mirror: `kmirror run` throughput with `--groups` on versus off.

One embedded source filled once (6 partitions) with application groups that have committed offsets on it
(so the group offset sync has work every interval); a fresh embedded target per run; the two contenders
run alternately (off, on, off, on, ...) so that machine noise hits both; rate as in bench/throughput.py
(records / time from the first partition assignment until the mirror group committed every record). Both
commit every 500 ms (a sync point per partition at every commit point: more often than the default 60 s,
so the sync's cost shows); `--groups '.*' --sync.group.offsets.interval.ms 1000`.

    flock /tmp/kmirror-bench.lock .venv/bin/python bench/groups.py [--records N] [--repeat 5] [--write FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from sections import markers, write_section
from throughput import COMMIT_MS, GROUP_SETTINGS, PARTITIONS, QUIET, TOPIC, create_topic, fill, measure

from kmirror.embedded import clusters

APP_GROUPS = 5
SYNC_MS = 1000
BEGIN, END = markers("groups")


def commit_app_groups(source: str, n: int) -> None:
    """Application groups with committed offsets spread over the topic."""
    for g in range(APP_GROUPS):
        c = Consumer(
            {"bootstrap.servers": source, "group.id": f"app-{g}", "enable.auto.commit": False}, logger=QUIET
        )
        at = n // PARTITIONS * (g + 1) // (APP_GROUPS + 1)
        c.commit(offsets=[TopicPartition(TOPIC, p, at) for p in range(PARTITIONS)], asynchronous=False)
        c.close()


def command(workdir: Path, source: str, target: str, group: str, groups: bool) -> list[str]:
    cfile = workdir / f"{group}-consumer.properties"
    cfile.write_text(
        f"bootstrap.servers={source}\ngroup.id={group}\n"
        + "".join(f"{k}={v}\n" for k, v in GROUP_SETTINGS.items())
    )
    pfile = workdir / f"{group}-producer.properties"
    pfile.write_text(f"bootstrap.servers={target}\n")
    cmd = [
        sys.executable,
        "-m",
        "kmirror",
        "run",
        "--consumer.config",
        str(cfile),
        "--producer.config",
        str(pfile),
        "--whitelist",
        TOPIC,
        "--offset.commit.interval.ms",
        str(COMMIT_MS),
        "--stats.interval.ms",
        "600000",
    ]
    if groups:
        cmd += ["--groups", ".*", "--sync.group.offsets.interval.ms", str(SYNC_MS)]
    return cmd


def run(n: int, size: int, repeat: int, workdir: Path) -> dict[str, list[float]]:
    rates: dict[str, list[float]] = {"off": [], "on": []}
    workdir.mkdir(parents=True, exist_ok=True)
    with clusters("source", log_dir=workdir) as src_c:
        source = src_c["source"].bootstrap
        fill(src_c["source"], n, size)
        commit_app_groups(source, n)
        for attempt in range(repeat):
            for mode in ("off", "on"):
                with clusters(f"target-{mode}-{attempt}", log_dir=workdir) as tgt_c:
                    target = next(iter(tgt_c.values()))
                    create_topic(target)
                    group = f"bench-groups-{mode}-{attempt}"
                    cmd = command(workdir, source, target.bootstrap, group, mode == "on")
                    rate, seconds, busy = measure(cmd, source, group, n)
                    rates[mode].append(rate)
                    print(
                        f"  {mode:3} run {attempt}: {rate:,.0f} rec/s ({seconds:.1f} s, CPU {busy:.0%})",
                        flush=True,
                    )
    return rates


def report(rates: dict[str, list[float]], n: int, size: int) -> str:
    ratios = [on / off for off, on in zip(rates["off"], rates["on"], strict=True)]
    median = statistics.median(ratios)
    lines = [
        BEGIN,
        "## Failover offset sync: `--groups` on versus off",
        "",
        f"Machine: {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}; "
        f"embedded brokers on the same machine. {n:,} records of {size} B in {PARTITIONS} partitions, "
        f"{APP_GROUPS} application groups with committed offsets on the source; commit every {COMMIT_MS} ms "
        f"(a sync point per partition at each), `--groups '.*' --sync.group.offsets.interval.ms {SYNC_MS}`; "
        "runs alternate off/on, each with a fresh target.",
        "",
        "| run | off rec/s | on rec/s | on / off |",
        "|---|---|---|---|",
    ]
    for i, (off, on) in enumerate(zip(rates["off"], rates["on"], strict=True)):
        lines.append(f"| {i} | {off:,.0f} | {on:,.0f} | {on / off:.3f} |")
    lines += [
        f"| median | {statistics.median(rates['off']):,.0f} | {statistics.median(rates['on']):,.0f} | "
        f"**{median:.3f}** |",
        "",
        f"Cost of the offset sync: {max(0.0, 1 - median):.1%} of throughput (median of the paired ratios).",
        "",
        "Reproduce: `flock /tmp/kmirror-bench.lock .venv/bin/python bench/groups.py "
        "--write docs/benchmarks.md`.",
        END,
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write", type=Path, help="replace the groups section of this markdown file")
    a = ap.parse_args()
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"kmirror-bench-groups-{os.getpid()}"
    rates = run(a.records, a.size, a.repeat, workdir)
    section = report(rates, a.records, a.size)
    print(section)
    if a.write:
        write_section(a.write, "groups", section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
