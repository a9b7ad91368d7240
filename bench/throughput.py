"""Mirror throughput: kmirror (all guarantees on) vs the straightforward correct loop vs reading alone and
writing alone, on Apache Kafka 4.3 (one node per cluster, `kmirror.testing.kafka.BENCH_JVM`).

Per record size: one source cluster filled once and one target cluster (the target topic exists
beforehand with the source's partitions; writers append to it). Each contender runs in its own
process(es); the contenders are interleaved (A B C D A B C D ...) so that other work on the shared
machine slows each alike; each run reads with a fresh consumer group. The same yardstick for all
readers: the source group's committed offsets, sampled every 100 ms from outside. Rate = records / time
from the contender's first partition assignment (it logs "assigned") until every record is committed, so
process start and group join are not counted, for anyone. All readers commit every 500 ms.

* consume-only: batched consume + commit; nothing produced (the ceiling of reading here).
* produce-only: one producer writing the same records to the target, acks=all, idempotent, no reading
  at all (the ceiling of writing here).
* straightforward loop: subscribe, poll() one record, produce() it with a delivery callback, and every
  500 ms flush + commit (acks=all, idempotent): correct, and what most people write.
* kmirror: `kmirror run` with its defaults (one stream per core).

    .venv/bin/python bench/throughput.py [--records-100 N] [--records-1k N] [--repeat 3] [--write FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from sections import closing, machine_note, markers, parser, publish

from kmirror.testing.kafka import BENCH_JVM, KafkaCluster, KafkaError, start_together
from kmirror.testing.mirrors import mirror_files, run_command

TOPIC = "bench"
PARTITIONS = 6
COMMIT_MS = 500
QUIET = logging.getLogger("bench.librdkafka")
QUIET.setLevel(logging.ERROR)
GROUP_SETTINGS = {
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
    "auto.offset.reset": "earliest",
}
BEGIN, END = markers("throughput")


# ------------------------------------------------------------------------------------ contenders


def contender_consume(source: str, group: str) -> None:
    c = Consumer(
        {"bootstrap.servers": source, "group.id": group, "enable.auto.commit": False, **GROUP_SETTINGS},
        logger=QUIET,
    )
    c.subscribe([TOPIC], on_assign=_announce)
    stop = _stop_flag()
    next_commit = time.monotonic() + COMMIT_MS / 1000
    while not stop():
        for m in c.consume(500, 0.2):
            _ = m.value()
        if time.monotonic() >= next_commit:
            _commit(c)
            next_commit = time.monotonic() + COMMIT_MS / 1000
    c.close()


def contender_loop(source: str, target: str, group: str) -> None:
    c = Consumer(
        {"bootstrap.servers": source, "group.id": group, "enable.auto.commit": False, **GROUP_SETTINGS},
        logger=QUIET,
    )
    p = Producer({"bootstrap.servers": target, "acks": "all", "enable.idempotence": True}, logger=QUIET)
    failed: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            failed.append(str(err))

    c.subscribe([TOPIC], on_assign=_announce)
    stop = _stop_flag()
    next_commit = time.monotonic() + COMMIT_MS / 1000
    while not stop():
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            while True:
                try:
                    p.produce(
                        m.topic(),
                        m.value(),
                        m.key(),
                        m.partition(),
                        on_delivery=delivered,
                        timestamp=m.timestamp()[1],
                        headers=m.headers(),
                    )
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        if time.monotonic() >= next_commit:
            p.flush()
            if failed:
                raise SystemExit(f"delivery failed: {failed[0]}")
            _commit(c)
            next_commit = time.monotonic() + COMMIT_MS / 1000
    c.close()


def _announce(consumer: Consumer, partitions: list[TopicPartition]) -> None:
    print("assigned", flush=True)


def _commit(c: Consumer) -> None:
    with contextlib.suppress(KafkaException):  # nothing new to commit
        c.commit(asynchronous=False)


def _stop_flag() -> callable:  # type: ignore[valid-type]
    stopped = [False]
    signal.signal(signal.SIGTERM, lambda *_: stopped.__setitem__(0, True))
    return lambda: stopped[0]


# ------------------------------------------------------------------------------------ harness


def create_topic(cluster: KafkaCluster, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap}, logger=QUIET)
    for f in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        f.result()


def fill(
    cluster: KafkaCluster, n: int, size: int, partitions: int = PARTITIONS, compression: str = "none"
) -> None:
    create_topic(cluster, partitions)
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "compression.type": compression,
        },
        logger=QUIET,
    )
    body = os.urandom(size)
    for i in range(n):
        key = b"key-%d" % (i % 10_000)
        while True:
            try:
                p.produce(TOPIC, body, key, i % partitions, headers=[("seq", b"%d" % i)])
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])  # guest time is already counted in user
    return total - idle, total


def busy_since(start: tuple[int, int]) -> float:
    """Fraction of all cores busy (anything on the machine, brokers included) since start."""
    busy, total = cpu_ticks()
    return (busy - start[0]) / max(total - start[1], 1)


class Committed:
    """The group's committed total, read with one long-lived client (cheap to poll)."""

    def __init__(self, source: str, group: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": source, "group.id": group}, logger=QUIET)
        self.parts = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]

    def total(self) -> int:
        got = self.consumer.committed(self.parts, timeout=10)
        return sum(tp.offset for tp in got if tp.offset > 0)

    def close(self) -> None:
        self.consumer.close()


Result = tuple[float, float, float]  # records/s, seconds, fraction of the machine's cores busy meanwhile


def stop_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the process's group; SIGKILL it if the process has not ended within timeout seconds."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def process_group(cmd: list[str], log: Path) -> tuple[Callable[[], int], Callable[[], None]]:
    """(start, stop) of a command in its own process group, its output in ``log``: start returns the
    pid of the group's root, stop ends the group (stop_group, 60 s)."""
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> int:
        with log.open("wb") as out:
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
        return procs[0].pid

    def stop() -> None:
        for proc in procs:
            stop_group(proc, 60)

    return start, stop


def measure(cmd: list[str], source: str, group: str, n: int, timeout: float = 600) -> Result:
    """Run a contender until it has committed n records; return (records/s, seconds, CPU busy)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    assigned = threading.Event()
    started: list[float] = []

    def watch() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if b"assigned" in line and not assigned.is_set():
                started.append(time.monotonic())
                assigned.set()

    threading.Thread(target=watch, daemon=True).start()
    deadline = time.monotonic() + timeout
    progress = Committed(source, group)
    cpu_start: tuple[int, int] | None = None
    try:
        while True:
            if cpu_start is None and assigned.is_set():
                cpu_start = cpu_ticks()
            done = progress.total() if assigned.is_set() else 0
            now = time.monotonic()
            if done >= n:
                break
            if proc.poll() is not None:
                raise SystemExit(f"{cmd} exited with {proc.returncode} after {done}/{n} records")
            if now > deadline:
                raise SystemExit(f"{cmd} did not finish within {timeout} s ({done}/{n})")
            time.sleep(0.1)
    finally:
        progress.close()
        stop_group(proc, 30)
    busy = busy_since(cpu_start) if cpu_start is not None else 0.0
    seconds = max(now - started[0], 1e-6)
    return n / seconds, seconds, busy


class BenchCluster(KafkaCluster):
    """A test cluster with the benchmark JVM (G1, the full JIT), which can take a minute to start while
    other work loads the 2-core machine: it is given 5 minutes instead of the tests' one."""

    def __init__(self, name: str) -> None:
        super().__init__(name, jvm=BENCH_JVM)

    def wait_ready(self, timeout: float = 300) -> None:
        super().wait_ready(timeout)


@contextlib.contextmanager
def bench_clusters(*names: str, workdir: Path, tries: int = 2) -> Iterator[dict[str, KafkaCluster]]:
    """One-node Apache Kafka clusters with the benchmark JVM, started side by side, stopped on exit. A start
    that times out (a JVM starved by other work on the shared machine) is tried again, up to `tries`."""
    cs: dict[str, KafkaCluster] = {n: BenchCluster(n) for n in names}
    for attempt in range(1, tries + 1):
        try:
            start_together(list(cs.values()), workdir)
            break
        except KafkaError as exc:
            if attempt == tries:
                raise
            print(f"cluster start failed, trying again: {exc}", file=sys.stderr, flush=True)
    try:
        yield cs
    finally:
        for c in cs.values():
            c.stop()


CONTENDERS = ("consume-only", "produce-only", "straightforward loop", "kmirror")


def contender_command(name: str, group: str, source: str, target: str, workdir: Path) -> list[str]:
    """The command line of a reading contender (each in its own process(es))."""
    me = str(Path(__file__).resolve())
    if name == "consume-only":
        return [sys.executable, me, "--contender", "consume", "--source", source, "--group", group]
    if name == "straightforward loop":
        return [sys.executable, me, "--contender", "loop", "--source", source, "--target", target,
                "--group", group]  # fmt: skip
    cfile, pfile = mirror_files(workdir, group, source, target, GROUP_SETTINGS)
    options = name.split()[1:]  # "kmirror --num.producers 3": kmirror with that option
    return run_command(cfile, pfile, TOPIC, "--offset.commit.interval.ms", str(COMMIT_MS),
                       "--stats.interval.ms", "600000", *options)  # fmt: skip


def run_size(size: int, n: int, workdir: Path, repeat: int, producers: list[int]) -> dict[str, list[Result]]:
    """Every contender `repeat` times, interleaved (A B C D A B C D ...); every run of each. producers: also
    kmirror with each of these `--num.producers`."""
    names = (*CONTENDERS, *(f"kmirror --num.producers {p}" for p in producers))
    results: dict[str, list[Result]] = {name: [] for name in names}
    with bench_clusters(f"source-{size}", f"target-{size}", workdir=workdir) as cs:
        source, target = cs[f"source-{size}"].bootstrap, cs[f"target-{size}"].bootstrap
        fill(cs[f"source-{size}"], n, size)
        create_topic(cs[f"target-{size}"])
        for attempt in range(repeat):
            for i, name in enumerate(names):
                group = f"bench-{size}-{i}-{attempt}"  # a fresh group: the whole topic again
                if name == "produce-only":
                    r = produce_only(target, n, size)
                else:
                    r = measure(contender_command(name, group, source, target, workdir), source, group, n)
                results[name].append(r)
                _show(size, f"{name} #{attempt}", r)
    return results


def median(runs: list[Result]) -> Result:
    """The run of median rate (its seconds and CPU with it)."""
    return sorted(runs)[len(runs) // 2]


def produce_only(target: str, n: int, size: int) -> Result:
    p = Producer(
        {
            "bootstrap.servers": target,
            "acks": "all",
            "enable.idempotence": True,
            "delivery.report.only.error": True,
        },
        logger=QUIET,
    )
    body = os.urandom(size)
    cpu_start = cpu_ticks()
    t0 = time.monotonic()
    for i in range(n):
        while True:
            try:
                p.produce(TOPIC, body, b"key-%d" % (i % 10_000), i % PARTITIONS, headers=[("seq", b"%d" % i)])
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
    seconds = time.monotonic() - t0
    return n / seconds, seconds, busy_since(cpu_start)


def _show(size: int, name: str, result: Result) -> None:
    rate, secs, busy = result
    print(
        f"  {size:>5} B  {name:22} {rate:>10,.0f} rec/s  {rate * size / 1e6:7.1f} MB/s  ({secs:.1f} s, "
        f"CPU {busy:.0%})",
        flush=True,
    )


def mirror_ceiling(read: Result, write: Result) -> float:
    """Records/s at which reading plus writing would take every core (costs from the solo runs)."""
    cores = os.cpu_count() or 1
    cost = read[2] * cores / read[0] + write[2] * cores / write[0]  # core-seconds per record
    return cores / cost if cost > 0 else float("inf")


def spread(runs: list[Result]) -> str:
    rates = [r[0] for r in runs]
    return f"{statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"


def report(
    all_results: dict[int, dict[str, list[Result]]], counts: dict[int, int], repeat: int, options: str
) -> str:
    lines = [
        BEGIN,
        "## Mirror throughput",
        "",
        machine_note(),
        f"Topic of {PARTITIONS} partitions; keyed records with one header; every reader commits every "
        f"{COMMIT_MS} ms; {repeat} runs per contender, interleaved; rec/s is the median (min-max); rate = "
        "records / time from the contender's first partition assignment until the source group has "
        "committed every record (each contender in its own processes). CPU is the share of all the "
        "machine's cores busy during the median run (brokers included). Mirror ceiling: reading alone and "
        "writing alone each cost measured core-time per record (CPU x cores / rate, brokers included); a "
        "mirror must do both on the same cores, so no mirror can exceed cores / (read cost + write cost) "
        "here (it counts other work on the machine too, so on a busy machine it is only indicative). The "
        "second ratio divides each run by the loop's run of the same round, the steadier comparison when "
        "the machine's load changes between rounds.",
        "",
        "| record size | records | contender | rec/s median (min-max) | MB/s | CPU | vs straightforward loop "
        "(medians) | vs the loop in the same round: median (min-max) | of the mirror ceiling |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size, runs in all_results.items():
        res = {name: median(r) for name, r in runs.items()}
        base = res["straightforward loop"][0]
        ceiling = mirror_ceiling(res["consume-only"], res["produce-only"])
        for name in runs:
            rate, _, busy = res[name]
            share = "" if name in ("consume-only", "produce-only") else f"{rate / ceiling:.0%}"
            shown = f"kmirror `{name.removeprefix('kmirror ')}`" if name.startswith("kmirror --") else name
            paired = [r[0] / b[0] for r, b in zip(runs[name], runs["straightforward loop"], strict=True)]
            lines.append(
                f"| {size} B | {counts[size]:,} | {shown} | {spread(runs[name])} | {rate * size / 1e6:.1f} | "
                f"{busy:.0%} | {rate / base:.2f}x | {statistics.median(paired):.2f}x "
                f"({min(paired):.2f}-{max(paired):.2f}) | {share} |"
            )
        lines.append(f"| {size} B | | mirror ceiling | {ceiling:,.0f} | {ceiling * size / 1e6:.1f} | | | | |")
    return closing(lines, END, "bench", "throughput.py", f"{options} --repeat {repeat}")


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--records-100", type=int, default=1_000_000)
    ap.add_argument("--records-1k", type=int, default=300_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs per contender; the median is reported")
    ap.add_argument("--sizes", type=int, nargs="+", choices=[100, 1000], default=[100, 1000])
    ap.add_argument(
        "--num-producers", type=int, nargs="*", default=[], help="also kmirror with each --num.producers"
    )
    ap.add_argument("--write", type=Path, help="replace the throughput section of this markdown file")
    ap.add_argument("--contender", choices=["consume", "loop"], help=argparse.SUPPRESS)
    ap.add_argument("--source", help=argparse.SUPPRESS)
    ap.add_argument("--target", help=argparse.SUPPRESS)
    ap.add_argument("--group", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.contender == "consume":
        contender_consume(a.source, a.group)
        return 0
    if a.contender == "loop":
        contender_loop(a.source, a.target, a.group)
        return 0
    counts = {s: n for s, n in {100: a.records_100, 1000: a.records_1k}.items() if s in a.sizes}
    with tempfile.TemporaryDirectory(prefix="kmirror-bench-") as tmp:
        results = {
            size: run_size(size, n, Path(tmp), a.repeat, a.num_producers) for size, n in counts.items()
        }
    options = " ".join(
        [f"--records-{'100' if s == 100 else '1k'} {n}" for s, n in counts.items()]
        + ([f"--sizes {' '.join(map(str, counts))}"] if len(counts) < 2 else [])
        + ([f"--num-producers {' '.join(map(str, a.num_producers))}"] if a.num_producers else [])
    )
    return publish(report(results, counts, a.repeat, options), a.write, "throughput")


if __name__ == "__main__":
    sys.exit(main())
