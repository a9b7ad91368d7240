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
* Spark's Kafka connector, cold and warm (bench/spark_kafka.py): the same completeness check as a Spark
  user writes it, `spark.read.format("kafka")` on both clusters and a group-by on the record content,
  default Spark settings but 4 shuffle partitions; cold = a fresh Python process (`local[2]`, the
  connector's jars in spark.jars), wall time; warm = one request to a process whose session already ran
  it once.

Every contender that answers (the command, the warm session, the connector) must give the same answer as
the records planted by fill(): the per-bucket counts of both sides, and the same missing and duplicated
records named by partition and offset.

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
from sections import closing, machine_note, markers, parser, publish

from kmirror.audit.kafka import consumer_conf, plan_cluster
from kmirror.config.filters import TopicFilter

CONNECTOR = Path(__file__).with_name("spark_kafka.py")

PARTITIONS = 6
BASE_TS = 1_700_000_000_000
SPAN_MS = 2 * 3_600_000
QUIET = logging.getLogger("bench.librdkafka")
QUIET.setLevel(logging.ERROR)
BEGIN, END = markers("audit")
TOPICS = {"spread": "spread", "perfect": "none"}
# Per topic, each answering contender's answers (per-bucket counts, named records): all must be equal.
Answer = tuple[object, ...]
ANSWERS: dict[str, list[tuple[str, Answer]]] = {}


def report_answer(rep: dict[str, object]) -> Answer:
    """kmirror's report.json, reduced to what the connector contender computes too."""
    keys = ("topic", "start_ms", "source_records", "target_records", "missing", "duplicated", "unexpected")
    rows = tuple(tuple(b[k] for k in keys) for b in rep["buckets"])  # type: ignore[attr-defined]
    named = tuple(
        tuple(sorted((r["partition"], r["offset"]) for r in rep[f"{n}_records"]))  # type: ignore[attr-defined]
        for n in ("missing", "duplicated", "unexpected")
    )
    return rows, named


def connector_answer(out: dict[str, object]) -> Answer:
    keys = ("topic", "start_ms", "source_records", "target_records", "missing", "duplicated", "unexpected")
    rows = tuple(tuple(b[k] for k in keys) for b in out["buckets"])  # type: ignore[attr-defined]
    named = tuple(
        tuple(sorted(tuple(x) for x in out["named"][n]))  # type: ignore[index]
        for n in ("missing", "duplicated", "unexpected")
    )
    return rows, named


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
    ANSWERS.setdefault(topic, []).append(("warm", report_answer(rep)))
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
    ANSWERS.setdefault(topic, []).append(("command", report_answer(rep)))
    t = rep["totals"]
    return {
        "seconds": seconds,
        "records": t["source_records"] + t["target_records"],
        "found": t["missing"] + t["duplicated"],
        "rss": peak["bytes"],
        **{f"t_{k}": v for k, v in rep["timings_s"].items()},
    }


def _connector_result(out: dict[str, object], seconds: float, rss: int, name: str, topic: str) -> Result:
    ANSWERS.setdefault(topic, []).append((name, connector_answer(out)))
    t = out["totals"]
    return {
        "seconds": seconds,
        "records": t["source_records"] + t["target_records"],  # type: ignore[index]
        "found": t["missing"] + t["duplicated"] + t["unexpected"],  # type: ignore[index]
        "rss": rss,
        "t_job": out["job_s"],  # type: ignore[dict-item]
    }


def contender_connector_cold(bootstraps: dict[str, str], topic: str) -> Result:
    """A fresh process: Python, the JVM and a Spark session with the connector's jars, one audit."""
    cmd = [sys.executable, str(CONNECTOR), "once", bootstraps["source"], bootstraps["target"], topic]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with peak_rss(proc.pid, set()) as peak:
        out, err = proc.communicate()
    seconds = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the connector audit failed: {err.strip().splitlines()[-1:]}")
    return _connector_result(json.loads(out), seconds, peak["bytes"], "connector cold", topic)


class ConnectorSession:
    """A process holding one Spark session with the connector (warm after its first audit)."""

    def __init__(self, bootstraps: dict[str, str]) -> None:
        cmd = [sys.executable, str(CONNECTOR), "serve", bootstraps["source"], bootstraps["target"]]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )

    def run(self, topic: str) -> Result:
        assert self.proc.stdin and self.proc.stdout
        with peak_rss(self.proc.pid, set()) as peak:
            t0 = time.monotonic()
            self.proc.stdin.write(topic + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            seconds = time.monotonic() - t0
        if not line:
            raise SystemExit("the connector session ended")
        return _connector_result(json.loads(line), seconds, peak["bytes"], "connector warm", topic)

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


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
    ap = parser(__doc__)
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
                "connector": lambda: contender_connector_cold(bootstraps, "spread"),
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
        connector = ConnectorSession(bootstraps)
        connector_first_s = connector.run("perfect")["seconds"]  # session start and its first audit
        brokers |= {connector.proc.pid}  # not the bench process's: its RSS is measured apart
        warm = {}
        for topic in TOPICS:
            warm[topic] = interleave(
                {
                    "raw": lambda t=topic: contender_raw(bootstraps, t),
                    "stream": lambda t=topic: contender_raw(bootstraps, t, keep=False),
                    "warm": lambda t=topic: contender_warm(spark, bootstraps, t, brokers),
                    "connector": lambda t=topic: connector.run(t),
                },
                a.repeat,
            )
        connector.close()
        spark.stop()
        loads.append(os.getloadavg()[0])
    want = {topic: sum(v) for topic, v in planted.items()}
    for runs in (cold["command"], cold["connector"], warm["spread"]["warm"], warm["spread"]["connector"]):
        assert all(r["found"] == want["spread"] for r in runs), "differences missed"
    assert all(r["found"] == 0 for c in ("warm", "connector") for r in warm["perfect"][c]), (
        "differences invented"
    )
    for topic, answers in ANSWERS.items():
        first_name, first = answers[0]
        for name, answer in answers[1:]:
            assert answer == first, f"{topic}: {name}'s answer differs from {first_name}'s"
        rows: tuple[tuple[int, ...], ...] = first[0]  # type: ignore[assignment]
        found = (sum(r[4] for r in rows), sum(r[5] for r in rows))
        assert found == planted[topic], f"{topic}: {found} missing, duplicated; planted {planted[topic]}"
    section = report(a, cold, warm, want, (session_s, first_s, connector_first_s), loads)
    return publish(section, a.write, "audit")


def report(  # noqa: PLR0917
    a: argparse.Namespace,
    cold: dict[str, list[Result]],
    warm: dict[str, dict[str, list[Result]]],
    want: dict[str, int],
    starts: tuple[float, float, float],
    loads: list[float],
) -> str:
    mb = 1 << 20
    session_s, first_s, _ = starts
    raw_cold, cmd = median(cold["raw"], "seconds"), median(cold["command"], "seconds")
    conn = median(cold["connector"], "seconds")
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
        f"| spread | Spark's Kafka connector job (cold: JVM, Spark start) | {records:,} | "
        f"{secs(cold['connector'])} | {records / conn:,.0f} | {conn / raw_cold:.2f}x the time | | "
        f"{median(cold['connector'], 'rss') / mb:,.0f} MB | {want['spread']:,} |",
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
            f"| {topic} | Spark's Kafka connector job, warm session | {n:,} | {secs(runs['connector'])} | "
            f"{n / median(runs['connector'], 'seconds'):,.0f} | "
            f"{raw_s / median(runs['connector'], 'seconds'):.0%} of the rate | | "
            f"{median(runs['connector'], 'rss') / mb:,.0f} MB | {want[topic]:,} |",
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
        *connector_note(cold, warm, starts),
    ]
    return closing(lines, END, "bench-audit", "audit.py", f"--records {a.records} --repeat {a.repeat}")


def connector_note(
    cold: dict[str, list[Result]],
    warm: dict[str, dict[str, list[Result]]],
    starts: tuple[float, float, float],
) -> list[str]:
    """What the connector rows mean, and which read path is faster, from this run's medians."""
    cmd, conn = median(cold["command"], "seconds"), median(cold["connector"], "seconds")
    ours = {t: median(r["warm"], "seconds") for t, r in warm.items()}
    theirs = {t: median(r["connector"], "seconds") for t, r in warm.items()}
    cold_faster = "the connector job" if conn < cmd else "`kmirror audit`"
    warm_faster = {t: "the connector job" if theirs[t] < ours[t] else "`kmirror audit`" for t in ours}
    if conn < cmd and all(theirs[t] < ours[t] for t in ours):
        verdict = (
            "Spark's Kafka connector job is faster, cold and warm: issue 21 asks to make it the default "
            "read path (not done by this bench)."
        )
    elif conn >= cmd and all(theirs[t] >= ours[t] for t in ours):
        verdict = "`kmirror audit`'s own read path is faster, cold and warm: it stays the default."
    else:
        verdict = "Neither read path is faster both cold and warm: `kmirror audit`'s own stays the default."
    warm_text = "; ".join(
        f"{t} {ours[t]:.2f} s against {theirs[t]:.2f} s ({warm_faster[t]} faster)" for t in ours
    )
    return [
        "Spark's Kafka connector rows: the same completeness check written as a Spark user writes it "
        '(bench/spark_kafka.py): `spark.read.format("kafka")` on both clusters (startingOffsets '
        "earliest, endingOffsets latest, headers included), a group-by on the record content itself "
        "(topic, timestamp, key, value, headers: exact, no hash) counting the copies on each side, and per "
        "10-minute bucket the counts and the missing, duplicated and unexpected records named by "
        "partition and offset; one Spark job, default Spark settings (`local[2]`, 1 GB driver as the "
        "audit's; no JIT or class-data tuning) but 4 shuffle partitions instead of 200 (the usual "
        "change for small data on a few cores: with 200, the warm job took about twice as long in a "
        "trial on 100,000 records a cluster). The jars are "
        "`org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0` and what it needs beyond pyspark's own jars "
        "(spark-token-provider-kafka-0-10_2.13 4.2.0, "
        "kafka-clients 3.9.2, commons-pool2): the venv's pyspark is 4.3.0 (Scala 2.13) and Maven Central "
        "has no 4.3.0 build of the connector, so this is the newest published one, on Spark 4.3.0 "
        "(bench/poms/spark-sql-kafka.xml; fetched with Maven into `~/.cache/kmirror`). Every run of "
        "every answering contender gave the same answer: the per-bucket counts of both sides and the "
        "same missing and duplicated records by partition and offset, those fill() planted (asserted). "
        f"Cold: the connector job {conn:.2f} s, the `kmirror audit` command {cmd:.2f} s ({cold_faster} "
        f"faster); warm (`kmirror audit` against the connector job): {warm_text}. The connector's warm "
        f"session process: start and first audit {starts[2]:.1f} s. {verdict}",
    ]


if __name__ == "__main__":
    sys.exit(main())
