"""The mirror's hot path across a change: `kmirror run` from a git revision (``--base``, default HEAD)
against the working tree, on the same data, interleaved.

For a change that must not slow the per-record path (a refactor of kmirror.mirror, a new option that is
off by default): the revision's worker/src is taken with `git archive` and run with PYTHONPATH pointing
at it; the working tree's is the installed one. Apache Kafka 4.3 clusters of one node
(`kmirror.testing.kafka.BENCH_JVM`): one source filled once (6 partitions, records with one header), a
fresh target per run; the two contenders interleaved (base, tree / tree, base / ...); rate and CPU as in
bench/groups.py (records / time from the first partition assignment until the mirror group committed
every record; user + system time of all kmirror processes per 1000 records).

    flock /tmp/kmirror-bench.lock .venv/bin/python bench/revisions.py [--base REV] [--records N]
                                                                       [--size B] [--repeat 5] [--write FILE]
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import groups
from groups import Result
from sections import closing, machine_note, markers, parser, publish
from throughput import COMMIT_MS, GROUP_SETTINGS, PARTITIONS, TOPIC

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


def report(results: dict[str, list[Result]], n: int, size: int, base: str, tree: str) -> str:
    table, ratios = groups.paired_runs(results, "base", "tree")
    commit, subject = revision(base)
    lines = [
        BEGIN,
        "## The hot path across a change: kmirror at a revision against the working tree",
        "",
        machine_note(),
        f"Base: `{commit}` ({subject}). Tree: {tree}. {n:,} records of {size} B in {PARTITIONS} partitions; "
        f"kmirror with its defaults (one stream per core), commit every {COMMIT_MS} ms; runs interleaved "
        "(base, tree / tree, base), each with a fresh target. CPU = user + system time of every kmirror "
        "process.",
        "",
        *table,
        "",
        ratios,
    ]
    options = f"--base {commit} --records {n} --size {size} --repeat {len(results['tree'])}"
    return closing(lines, END, f"bench-revisions BASE={commit}", "revisions.py", options)


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--base", default="HEAD", help="the git revision to compare with (default HEAD)")
    ap.add_argument("--tree", default="the working tree", help="how the section names the working tree")
    ap.add_argument("--records", type=int, default=600_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write", type=Path, help="replace the revisions section of this markdown file")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kmirror-bench-revisions-") as tmp:
        base_src = unpack(a.base, Path(tmp) / "base")
        results = run(a.records, a.size, a.repeat, Path(tmp) / "runs", base_src)
    return publish(report(results, a.records, a.size, a.base, a.tree), a.write, "revisions")


if __name__ == "__main__":
    sys.exit(main())
