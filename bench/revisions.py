"""The mirror's hot path across a change: `kmirror run` from a git revision (``--base``, default HEAD)
against the working tree, on the same data, interleaved.

For a change that must not slow the per-record path (a refactor of kmirror.mirror, a new option that is
off by default): the revision's worker/src is taken with `git archive` and run with PYTHONPATH pointing
at it; the working tree's is the installed one. Apache Kafka 4.3 clusters of one node
(`kmirror.testing.kafka.BENCH_JVM`): one source filled once (6 partitions, records with one header), a
fresh target per run; the two contenders interleaved (base, tree / tree, base / ...); rate and CPU as in
bench/groups.py (records / time from the first partition assignment until the mirror group committed
every record; user + system time of all kmirror processes per 1000 records).

With `--latency-pairs N`, then N interleaved pairs of end-to-end latency runs at a steady rate below
saturation, the method of bench/peers_latency.py (`--latency-rate` records/s of 100 B, `--latency-warmup`
seconds uncounted, `--latency-seconds` counted), a fresh source and target per run; `--repeat 0` runs
only those.

    flock /tmp/kmirror-bench.lock .venv/bin/python bench/revisions.py [--base REV] [--records N]
        [--size B] [--repeat 5] [--latency-pairs N [--latency-rate 2000] [--latency-seconds 20]
        [--latency-warmup 30]] [--write FILE]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import groups
from groups import Result
from peers_latency import Latency, steady_latency
from sections import closing, machine_note, markers, parser, publish
from throughput import (
    COMMIT_MS,
    GROUP_SETTINGS,
    PARTITIONS,
    TOPIC,
    bench_clusters,
    create_topic,
    process_group,
)

from kmirror.testing.mirrors import mirror_files, run_command

MODES = ("base", "tree")
BEGIN, END = markers("revisions")
REPO = Path(__file__).resolve().parent.parent


def revision(rev: str) -> tuple[str, str]:
    """The revision's commit id (short) and its subject line."""
    git = ["git", "-C", str(REPO), "log", "-1", "--format=%h %s", rev]
    out = subprocess.run(git, check=True, capture_output=True, text=True).stdout.strip()
    commit, _, subject = out.partition(" ")
    return commit, subject if len(subject) <= 90 else subject[:89].rstrip() + "…"


def unpack(rev: str, into: Path) -> Path:
    """The revision's worker/src, unpacked into ``into``; its directory (for PYTHONPATH)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = into / "base.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "-C", str(REPO), "archive", rev, "worker/src"], check=True, stdout=f)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    src = into / "worker" / "src"
    found = subprocess.run(
        ["env", f"PYTHONPATH={src}", sys.executable, "-c", "import kmirror; print(kmirror.__file__)"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    if not found.startswith(str(src)):
        raise SystemExit(f"PYTHONPATH={src} does not take precedence over the installed kmirror ({found})")
    return src


def run(n: int, size: int, repeat: int, workdir: Path, base_src: Path) -> dict[str, list[Result]]:
    def command(workdir: Path, source: str, target: str, group: str, mode: str) -> list[str]:
        cfile, pfile = mirror_files(workdir, group, source, target, dict(GROUP_SETTINGS))
        cmd = run_command(cfile, pfile, TOPIC, "--offset.commit.interval.ms", str(COMMIT_MS),
                          "--stats.interval.ms", "600000")  # fmt: skip
        return ["env", f"PYTHONPATH={base_src}", *cmd] if mode == "base" else cmd

    return groups.run(n, size, repeat, workdir, name="revisions", modes=MODES, command=command, prepare=None,
                      show_sync=False)  # fmt: skip


def one_latency(
    mode: str, tag: str, workdir: Path, base_src: Path, *, rate: int, seconds: float, warmup: float
) -> Latency:
    """One latency run of base or tree (bench/peers_latency.py) on a fresh source and target."""
    with bench_clusters(f"source-{tag}", f"target-{tag}", workdir=workdir) as cs:
        source, target = cs[f"source-{tag}"].bootstrap, cs[f"target-{tag}"].bootstrap
        for c in cs.values():
            create_topic(c, PARTITIONS)
        cfile, pfile = mirror_files(workdir / tag, tag, source, target, dict(GROUP_SETTINGS))
        cmd = run_command(cfile, pfile, TOPIC, "--offset.commit.interval.ms", str(COMMIT_MS),
                          "--stats.interval.ms", "600000")  # fmt: skip
        if mode == "base":
            cmd = ["env", f"PYTHONPATH={base_src}", *cmd]
        start, stop = process_group(cmd, workdir / tag / "kmirror.log")
        return steady_latency(start, stop, source=source, target=target, partitions=PARTITIONS, rate=rate,
                              seconds=seconds, warmup=warmup, compression="none")  # fmt: skip


def latency_pairs(
    pairs: int, workdir: Path, base_src: Path, *, rate: int, seconds: float, warmup: float
) -> dict[str, list[Latency]]:
    """End-to-end latency of base and tree at a steady rate (bench/peers_latency.py), interleaved."""
    out: dict[str, list[Latency]] = {m: [] for m in MODES}
    for i in range(pairs):
        for mode in MODES if i % 2 == 0 else MODES[::-1]:
            r = one_latency(
                mode, f"latency-{mode}-{i}", workdir, base_src, rate=rate, seconds=seconds, warmup=warmup
            )
            out[mode].append(r)
            print(
                f"  latency {mode} #{i}: p50 {r.p50:.1f} ms, p99 {r.p99:.1f} ms ({r.records:,} records)",
                flush=True,
            )
    return out


def latency_lines(latency: dict[str, list[Latency]], rate: int, seconds: float, warmup: float) -> list[str]:
    """The latency pairs as a table and the medians."""
    if not latency or not latency["tree"]:
        return []
    base, tree = latency["base"], latency["tree"]
    rows = [
        f"| {i} | {b.p50:.1f} | {t.p50:.1f} | {b.p99:.1f} | {t.p99:.1f} |"
        for i, (b, t) in enumerate(zip(base, tree, strict=True))
    ]

    def med(xs: list[Latency], q: str) -> float:
        return statistics.median(getattr(x, q) for x in xs)

    return [
        "",
        f"End-to-end latency at a steady {rate:,} records/s of 100 B (bench/peers_latency.py: a fresh source "
        f"and target per run, {warmup:g} s uncounted, then {seconds:g} s counted; pairs interleaved):",
        "",
        "| pair | base p50 ms | tree p50 ms | base p99 ms | tree p99 ms |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"Medians: p50 {med(base, 'p50'):.1f} ms (base) against {med(tree, 'p50'):.1f} ms (tree); p99 "
        f"{med(base, 'p99'):.1f} ms against {med(tree, 'p99'):.1f} ms.",
    ]


def report(
    results: dict[str, list[Result]],
    n: int,
    size: int,
    base: str,
    tree: str,
    *,
    latency: list[str] | None = None,
    latency_options: str = "",
) -> str:
    commit, subject = revision(base)
    lines = [
        BEGIN,
        "## The hot path across a change: kmirror at a revision against the working tree",
        "",
        machine_note(),
        f"Base: `{commit}` ({subject}). Tree: {tree}. kmirror with its defaults (one stream per core), "
        f"commit every {COMMIT_MS} ms.",
    ]
    if results["tree"]:
        table, ratios = groups.paired_runs(results, "base", "tree")
        lines += [
            f"Throughput: {n:,} records of {size} B in {PARTITIONS} partitions; runs interleaved (base, "
            "tree / tree, base), each with a fresh target. CPU = user + system time of every kmirror "
            "process.",
            "",
            *table,
            "",
            ratios,
        ]
    lines += latency or []
    options = f"--base {commit} --records {n} --size {size} --repeat {len(results['tree'])}{latency_options}"
    return closing(lines, END, f"bench-revisions BASE={commit}", "revisions.py", options)


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--base", default="HEAD", help="the git revision to compare with (default HEAD)")
    ap.add_argument("--tree", default="the working tree", help="how the section names the working tree")
    ap.add_argument("--records", type=int, default=600_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--latency-pairs", type=int, default=0, help="latency pairs after the throughput runs (0)"
    )
    ap.add_argument("--latency-rate", type=int, default=2000, help="records/s of the latency runs (2000)")
    ap.add_argument("--latency-seconds", type=float, default=20, help="seconds counted per latency run (20)")
    ap.add_argument("--latency-warmup", type=float, default=30, help="seconds at that rate not counted (30)")
    ap.add_argument("--write", type=Path, help="replace the revisions section of this markdown file")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kmirror-bench-revisions-") as tmp:
        base_src = unpack(a.base, Path(tmp) / "base")
        results: dict[str, list[Result]] = {m: [] for m in MODES}
        if a.repeat:
            results = run(a.records, a.size, a.repeat, Path(tmp) / "runs", base_src)
        latency = latency_pairs(a.latency_pairs, Path(tmp) / "latency", base_src, rate=a.latency_rate,
                                seconds=a.latency_seconds, warmup=a.latency_warmup)  # fmt: skip
    lines = latency_lines(latency, a.latency_rate, a.latency_seconds, a.latency_warmup)
    latency_options = (
        f" --latency-pairs {a.latency_pairs} --latency-rate {a.latency_rate} "
        f"--latency-seconds {a.latency_seconds:g} --latency-warmup {a.latency_warmup:g}"
        if a.latency_pairs
        else ""
    )
    section = report(
        results, a.records, a.size, a.base, a.tree, latency=lines, latency_options=latency_options
    )
    return publish(section, a.write, "revisions")


if __name__ == "__main__":
    sys.exit(main())
