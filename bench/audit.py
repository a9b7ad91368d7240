"""Audit speed: the whole `kmirror audit` command and a warm Spark session against the raw read of the
same data by two processes (one per cluster, in parallel), measured in one run, contenders interleaved.

Data: two Apache Kafka 4.3 clusters of one node (`kmirror.testing.kafka.BENCH_JVM`) and two topics of N
records on the source (6 partitions, ~200 B values, a key, one header, timestamps spread over two
hours, 10-minute buckets) and their copy on the target:
`perfect` is an exact copy; `spread` lacks every 200th record and has every 2000th twice, so that every
bucket differs. Records read = both clusters (about 2 x N).

* raw read (2 processes, cold): two fresh Python processes started together, each reading every record
  of one cluster (key, value, headers, timestamp) with confluent-kafka and the audit's consumer
  settings, partition after partition; wall time from the start of both to the end of the last. The
  limit of reading the data once on this machine.
* kmirror audit command (cold): `python -m kmirror.audit ... --master local[2]`, wall time, JVM and
  Spark start included. Goal: at most 4x the raw read.
* kmirror audit, warm session: `kmirror.audit.job.run` in a `local[2]` session that already ran an
  audit, planning included. Goal: at least 85 % of the raw read's rate.

Peak RSS: the largest total resident memory of the contender's processes (driver, JVM, Python workers),
sampled every 100 ms; brokers not counted.

    flock /tmp/kmirror-bench.lock .venv/bin/python bench/audit.py [--records N] [--repeat 5]
                                                                   [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from sections import machine_note, markers, write_section

from kmirror.audit.kafka import consumer_conf, plan_cluster
from kmirror.config.filters import TopicFilter

PARTITIONS = 6
BASE_TS = 1_700_000_000_000
SPAN_MS = 2 * 3_600_000
QUIET = logging.getLogger("bench.librdkafka")
QUIET.setLevel(logging.ERROR)
BEGIN, END = markers("audit")
TOPICS = {"spread": "spread", "perfect": "none"}


def fill(bootstraps: dict[str, str], topic: str, n: int, *, gaps: str) -> tuple[int, int]:
    """Write N records to the source and the copy to the target; returns (missing, duplicated)."""
    for b in bootstraps.values():
        admin = AdminClient({"bootstrap.servers": b}, logger=QUIET)
        for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
            f.result()
    producers = {
        side: Producer(
            {"bootstrap.servers": b, "linger.ms": 20, "batch.size": 1_000_000, "enable.idempotence": True},
            logger=QUIET,
        )
        for side, b in bootstraps.items()
    }
    body = os.urandom(190)
    missing = duplicated = 0
    for i in range(n):
        key = b"key-%d" % (i % 10_000)
        value = b"%08d" % i + body
        headers = [("seq", b"%d" % i)]
        ts = BASE_TS + i * SPAN_MS // n
        copies = {"source": 1, "target": 1}
        if gaps == "spread" and i % 200 == 7:
            copies["target"], missing = 0, missing + 1
        elif gaps == "spread" and i % 2000 == 11:
            copies["target"], duplicated = 2, duplicated + 1
        for side, count in copies.items():
            for _ in range(count):
                while True:
                    try:
                        producers[side].produce(
                            topic, value, key, i % PARTITIONS, timestamp=ts, headers=headers
                        )
                        break
                    except BufferError:
                        producers[side].poll(0.05)
    for p in producers.values():
        assert p.flush(120) == 0
    return missing, duplicated


def raw_read(bootstrap: str, topic: str, keep: bool = True) -> int:
    """Every record of the topic with key, value, headers and timestamp: partition after partition up
    to the end the audit itself plans, with the audit's consumer settings. keep: the fields of every
    record are kept in a list (the issue's baseline); otherwise they are touched and dropped (streaming,
    the faster: no garbage collector walking a growing list)."""
    settings = {"bootstrap.servers": bootstrap}
    spans = plan_cluster(
        0, settings, TopicFilter(include=topic), from_ms=None, max_skew_ms=0, timeout=30, name="x"
    )
    c = Consumer(consumer_conf(settings), logger=QUIET)
    out, count = [], 0
    try:
        for span in spans:
            c.assign([TopicPartition(topic, span.partition, span.start)])
            pos = span.start
            while pos < span.end:
                for m in c.consume(min(10_000, span.end - pos), 0.2):
                    if m.error() is None:
                        pos = m.offset() + 1
                        row = (m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1])
                        if keep:
                            out.append(row)
                        else:
                            count += 1
            c.unassign()
    finally:
        c.close()
    return len(out) + count


# ------------------------------------------------------------------------------------------ memory


def _tree(root: int, skip: set[int]) -> list[int]:
    parents: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in skip:
            continue
        out.append(pid)
        todo += parents.get(pid, [])
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


@contextmanager
def peak_rss(root: int, skip: set[int]) -> Iterator[dict[str, int]]:
    """Samples the total RSS of root's process tree (less `skip` and their children) every 100 ms."""
    peak = {"bytes": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak["bytes"] = max(peak["bytes"], sum(_rss(p) for p in _tree(root, skip)))
            stop.wait(0.1)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        yield peak
    finally:
        stop.set()
        t.join()


# ------------------------------------------------------------------------------------------ contenders

Result = dict[str, float]


def contender_raw(bootstraps: dict[str, str], topic: str, keep: bool = True) -> Result:
    cmd = [sys.executable, __file__, "--raw-read"]
    t0 = time.monotonic()
    procs = [
        subprocess.Popen([*cmd, b, topic, "keep" if keep else "stream"], stdout=subprocess.PIPE, text=True)
        for b in bootstraps.values()
    ]
    counts = [int(p.communicate()[0]) for p in procs]
    return {"seconds": time.monotonic() - t0, "records": sum(counts)}


def contender_warm(spark: object, bootstraps: dict[str, str], topic: str, brokers: set[int]) -> Result:
    from kmirror.audit import job

    o = job.AuditOptions(
        source={"bootstrap.servers": bootstraps["source"]},
        target={"bootstrap.servers": bootstraps["target"]},
        topics=topic,
    )
    with peak_rss(os.getpid(), brokers) as peak:
        t0 = time.monotonic()
        rep = job.run(spark, o)  # type: ignore[arg-type]
        seconds = time.monotonic() - t0
    t = rep["totals"]
    timings = rep["timings_s"]
    return {
        "seconds": seconds,
        "records": t["source_records"] + t["target_records"],  # type: ignore[index]
        "found": t["missing"] + t["duplicated"],  # type: ignore[index]
        "rss": peak["bytes"],
        **{f"t_{k}": v for k, v in timings.items()},  # type: ignore[attr-defined]
    }


def contender_command(bootstraps: dict[str, str], topic: str, workdir: Path) -> Result:
    files = {}
    for side, b in bootstraps.items():
        files[side] = workdir / f"{side}.properties"
        files[side].write_text(f"bootstrap.servers={b}\n")
    out = workdir / "report"
    cmd = [sys.executable, "-m", "kmirror.audit", "--source.config", str(files["source"]), "--target.config",
           str(files["target"]), "--topics", topic, "--output", str(out), "--master", "local[2]"]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )  # fmt: skip
    with peak_rss(proc.pid, set()) as peak:
        _, err = proc.communicate()
    seconds = time.monotonic() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"the audit command failed: {err.strip()}")
    rep = json.loads((out / "report.json").read_text())
    t = rep["totals"]
    return {
        "seconds": seconds,
        "records": t["source_records"] + t["target_records"],
        "found": t["missing"] + t["duplicated"],
        "rss": peak["bytes"],
        **{f"t_{k}": v for k, v in rep["timings_s"].items()},
    }


def interleave(contenders: dict[str, Callable[[], Result]], repeat: int) -> dict[str, list[Result]]:
    """A B C A B C ...: load from other work on the machine hits every contender alike."""
    results: dict[str, list[Result]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, run in contenders.items():
            r = run()
            results[name].append(r)
            print(f"  {name}: {r['seconds']:.2f} s, {r['records'] / r['seconds']:,.0f} rec/s, "
                  f"load {os.getloadavg()[0]:.1f}", file=sys.stderr)  # fmt: skip
    return results


def median(runs: list[Result], key: str) -> float:
    return statistics.median(r[key] for r in runs if key in r)


def secs(runs: list[Result]) -> str:
    """Median (min-max) seconds."""
    v = [r["seconds"] for r in runs]
    return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="records per topic on the source")
    ap.add_argument("--repeat", type=int, default=5, help="runs per contender; the median is reported")
    ap.add_argument("--write", type=Path, help="replace the audit section of this markdown file")
    ap.add_argument("--raw-read", nargs=3, metavar=("BOOTSTRAP", "TOPIC", "MODE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.raw_read:
        print(raw_read(a.raw_read[0], a.raw_read[1], keep=a.raw_read[2] == "keep"))
        return 0
    from throughput import bench_clusters  # not at the top: the raw read's processes import this file

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    loads = [os.getloadavg()[0]]
    with (
        tempfile.TemporaryDirectory() as tmp,
        bench_clusters("source", "target", workdir=Path(tmp) / "brokers") as cs,
    ):
        bootstraps = {name: c.bootstrap for name, c in cs.items()}
        brokers = {pid for c in cs.values() for pid in c.pids}
        t0 = time.monotonic()
        planted = {topic: fill(bootstraps, topic, a.records, gaps=gaps) for topic, gaps in TOPICS.items()}
        print(f"filled {len(TOPICS)} topics in {time.monotonic() - t0:.1f} s", file=sys.stderr)

        # Cold: the whole command against the raw read, interleaved.
        cold = interleave(
            {
                "raw": lambda: contender_raw(bootstraps, "spread"),
                "stream": lambda: contender_raw(bootstraps, "spread", keep=False),
                "command": lambda: contender_command(bootstraps, "spread", Path(tmp)),
            },
            a.repeat,
        )
        loads.append(os.getloadavg()[0])
        # Warm: one session, one audit to warm it up, then both topics against the raw read.
        from kmirror.audit import spark as audit_spark

        t0 = time.monotonic()
        spark = audit_spark.session("local[2]")
        session_s = time.monotonic() - t0
        t0 = time.monotonic()
        contender_warm(spark, bootstraps, "perfect", brokers)
        first_s = time.monotonic() - t0
        warm = {}
        for topic in TOPICS:
            warm[topic] = interleave(
                {
                    "raw": lambda t=topic: contender_raw(bootstraps, t),
                    "stream": lambda t=topic: contender_raw(bootstraps, t, keep=False),
                    "warm": lambda t=topic: contender_warm(spark, bootstraps, t, brokers),
                },
                a.repeat,
            )
        spark.stop()
        loads.append(os.getloadavg()[0])
    want = {topic: sum(v) for topic, v in planted.items()}
    for runs in (cold["command"], warm["spread"]["warm"]):
        assert all(r["found"] == want["spread"] for r in runs), "differences missed"
    assert all(r["found"] == 0 for r in warm["perfect"]["warm"]), "differences invented"
    section = report(a, cold, warm, want, session_s, first_s, loads)
    print(section)
    if a.write:
        write_section(a.write, "audit", section)
    return 0


def report(  # noqa: PLR0917
    a: argparse.Namespace,
    cold: dict[str, list[Result]],
    warm: dict[str, dict[str, list[Result]]],
    want: dict[str, int],
    session_s: float,
    first_s: float,
    loads: list[float],
) -> str:
    mb = 1 << 20
    raw_cold, cmd = median(cold["raw"], "seconds"), median(cold["command"], "seconds")
    stream_cold = median(cold["stream"], "seconds")
    records = cold["raw"][0]["records"]
    lines = [
        BEGIN,
        "## Audit",
        "",
        machine_note(),
        f"Load average {' / '.join(f'{x:.1f}' for x in loads)} at the start / after the cold runs / at "
        f"the end; Spark `local[2]`. Each topic: {a.records:,} records on the source (6 partitions, ~200 B "
        "values, key, one header, two hours of timestamps, 10-minute buckets) and their copy on the target: "
        "`perfect` is exact; `spread` lacks every 200th record and has every 2000th twice (every bucket "
        "differs). "
        f"Median of {a.repeat} runs, seconds as median (min-max); the contenders interleaved (A B A B ...) "
        "so that other work on the machine slows each alike. Raw read = two fresh processes, one per "
        "cluster, reading every record (key, value, headers, timestamp) in parallel and keeping them in a "
        "list (the goals' baseline); "
        "streaming read = the same keeping nothing (faster: no garbage collector walking a growing list). "
        "All readers use the audit's consumer settings (`kmirror.audit.kafka.consumer_conf`).",
        "",
        "| topic | contender | records read | seconds | rec/s | vs raw read | goal | peak RSS | "
        "differences found |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| spread | raw read (2 processes, cold) | {records:,} | {secs(cold['raw'])} | "
        f"{records / raw_cold:,.0f} | 1.00x | | | - |",
        f"| spread | streaming read (2 processes, cold) | {records:,} | {secs(cold['stream'])} | "
        f"{records / stream_cold:,.0f} | {raw_cold / stream_cold:.2f}x the rate | | | - |",
        f"| spread | `kmirror audit` command (cold: JVM, Spark start) | {records:,} | "
        f"{secs(cold['command'])} | {records / cmd:,.0f} | **{cmd / raw_cold:.2f}x the time** | at most 4x | "
        f"{median(cold['command'], 'rss') / mb:,.0f} MB | {want['spread']:,} |",
    ]
    for topic, runs in warm.items():
        raw_s, audit_s = median(runs["raw"], "seconds"), median(runs["warm"], "seconds")
        stream_s = median(runs["stream"], "seconds")
        n = runs["raw"][0]["records"]
        lines += [
            f"| {topic} | raw read (2 processes, cold) | {n:,} | {secs(runs['raw'])} | {n / raw_s:,.0f} "
            "| 1.00x | | | - |",
            f"| {topic} | streaming read (2 processes, cold) | {n:,} | {secs(runs['stream'])} | "
            f"{n / stream_s:,.0f} | {raw_s / stream_s:.2f}x the rate | | | - |",
            f"| {topic} | `kmirror audit`, warm session | {n:,} | {secs(runs['warm'])} | "
            f"{n / audit_s:,.0f} | **{raw_s / audit_s:.0%} of the rate** ({stream_s / audit_s:.0%} of the "
            "streaming read's) | "
            "at least 85 % | "
            f"{median(runs['warm'], 'rss') / mb:,.0f} MB | {want[topic]:,} |",
        ]
    c = cold["command"]
    plan_s, compare_s = median(c, "t_plan"), median(c, "t_compare")
    start_s = median(c, "t_spark_start")
    rest = cmd - plan_s - compare_s - start_s
    warm_compare = median(warm["spread"]["warm"], "t_compare")
    lines += [
        "",
        f"Where the command's {cmd:.1f} s go (medians): Python start and imports, report writing and "
        f"JVM exit {rest:.1f} s; planning the offsets on the driver {plan_s:.1f} s; the JVM and Spark "
        f"session start {start_s:.1f} s; the one Spark job {compare_s:.1f} s, of which a warm session "
        f"needs {warm_compare:.1f} s: the rest ({compare_s - warm_compare:.1f} s) is what a first job "
        "pays once: Spark runs the Python Data Source's lookup, creation and read planning in Python "
        "processes of their own, one after the other, each a daemon importing pyspark, pandas and pyarrow "
        "(seen with a process monitor: about 5 s from the first of them to the first reading task on this "
        "machine); then the audit's Python daemon importing pyarrow, numpy, confluent-kafka and the "
        "audit's modules once for all its workers, and the JVM's JIT warming up (whole-stage code "
        "generation is off: the job evaluates a few rows per task). In the bench process: session start "
        f"{session_s:.1f} s, its first audit {first_s:.1f} s. The command maps the driver JVM's class-data "
        "archive when an earlier command recorded it (`~/.cache/kmirror`; the first command on a machine "
        "records it as its JVM exits).",
        "",
        "Reproduce: `make bench-audit` (or `flock /tmp/kmirror-bench.lock .venv/bin/python bench/audit.py "
        f"--records {a.records} --repeat {a.repeat} --write docs/benchmarks.md`).",
        END,
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
