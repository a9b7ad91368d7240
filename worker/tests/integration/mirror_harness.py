"""Real embedded clusters, real `kmirror` processes, and the checks that prove nothing was lost.

Shared by the integration tests (`from mirror_harness import ...`); the fixtures are in conftest.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.testing.embedded import Cluster

KMIRROR = [sys.executable, "-m", "kmirror"]
# The test broker holds JoinGroup for session.timeout.ms/2: keep it short in tests.
TEST_CONSUMER_EXTRA = "session.timeout.ms=6000\nheartbeat.interval.ms=1000\n"


@dataclass(frozen=True)
class Rec:
    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int

    @property
    def content(self) -> tuple[object, ...]:
        return (self.key, self.value, self.headers, self.timestamp)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def consumer_file(
    tmp_path: Path,
    cluster: Cluster,
    group: str = "mirror",
    extra: str = "",
    name: str = "consumer.properties",
) -> Path:
    return write(
        tmp_path / name,
        f"bootstrap.servers={cluster.bootstrap}\ngroup.id={group}\n{TEST_CONSUMER_EXTRA}{extra}",
    )


def producer_file(
    tmp_path: Path, cluster: Cluster, extra: str = "", name: str = "producer.properties"
) -> Path:
    return write(tmp_path / name, f"bootstrap.servers={cluster.bootstrap}\n{extra}")


def create_topic(cluster: Cluster, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
        f.result()


TRANSIENT = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN}


def topic_partitions(cluster: Cluster, bound: float = 60.0) -> dict[str, int]:
    """Topic -> partition count. Asks again on a retriable error (a loaded 2-core machine can reset a
    metadata connection; a broker of a 3-node cluster may be down in a fault test) until `bound` s."""
    deadline = time.monotonic() + bound
    while True:
        try:
            md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10)
            return {t: len(m.partitions) for t, m in md.topics.items()}
        except KafkaException as exc:
            err = exc.args[0]
            if not (err.retriable() or err.code() in TRANSIENT) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def generator(cluster: Cluster) -> Producer:
    """One record per batch, so that the test broker reports true high watermarks."""
    return Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "linger.ms": 0,
            "batch.num.messages": 1,
            "enable.idempotence": True,
        }
    )


def produce(cluster: Cluster, records: list[Rec]) -> None:
    p = generator(cluster)
    for r in records:
        p.produce(
            r.topic, r.value, r.key, r.partition, timestamp=r.timestamp, headers=list(r.headers) or None
        )
    assert p.flush(30) == 0


def make_records(topic: str, partitions: int, per_partition: int, start: int = 0) -> list[Rec]:
    out = []
    for i in range(start, start + per_partition):
        for p in range(partitions):
            out.append(
                Rec(
                    topic,
                    p,
                    b"k%d" % (i % 7),
                    b"%s:%d:%d" % (topic.encode(), p, i),
                    (("seq", b"%d" % i), ("p", b"%d" % p)),
                    1_700_000_000_000 + i,
                )
            )
    return out


def read_all(
    cluster: Cluster, topics: list[str], expected: int, timeout: float = 60.0, settle: float = 1.0
) -> list[Rec]:
    """Everything in the topics (read by assignment, no group), once at least `expected` records came
    and nothing new arrived for `settle` seconds."""
    deadline = time.monotonic() + timeout
    parts = topic_partitions(cluster)
    while not all(t in parts for t in topics) and time.monotonic() < deadline:
        time.sleep(0.3)
        parts = topic_partitions(cluster)
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "kmirror-test-reader",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in topics for p in range(parts.get(t, 0))])
    out: list[Rec] = []
    last_new = time.monotonic()
    try:
        while time.monotonic() < deadline:
            batch = c.consume(500, 0.2)
            for m in batch:
                if m.error() is None:
                    out.append(
                        Rec(
                            m.topic(),
                            m.partition(),
                            m.key(),
                            m.value(),
                            tuple(m.headers() or ()),
                            m.timestamp()[1],
                        )
                    )
            if batch:
                last_new = time.monotonic()
            elif len(out) >= expected and time.monotonic() - last_new >= settle:
                break
    finally:
        c.close()
    return out


def by_partition(records: list[Rec]) -> dict[tuple[str, int], list[Rec]]:
    out: dict[tuple[str, int], list[Rec]] = defaultdict(list)
    for r in records:
        out[(r.topic, r.partition)].append(r)
    return out


def assert_mirrored(source: list[Rec], target: list[Rec], *, exact: bool = False) -> None:
    """Every source record is on the target, in the same partition and order (first copies), with the
    same key, value, headers and timestamp. `exact`: and no duplicates."""
    src, tgt = by_partition(source), by_partition(target)
    for tp, records in src.items():
        got = tgt.get(tp, [])
        seen: set[tuple[object, ...]] = set()
        firsts = []
        for r in got:
            if r.content not in seen:
                seen.add(r.content)
                firsts.append(r.content)
        want = [r.content for r in records]
        missing = [w for w in want if w not in seen]
        assert not missing, (
            f"{tp}: {len(missing)} of {len(want)} records missing on the target, e.g. {missing[:3]}"
        )
        assert firsts == want, f"{tp}: order differs on the target"
        if exact:
            assert len(got) == len(want), f"{tp}: {len(got) - len(want)} duplicates on the target"
    extra = set(tgt) - set(src)
    assert not any(tgt[tp] for tp in extra), f"records in partitions the source does not have: {extra}"


class Worker:
    """A `kmirror run` process (its own session, so kill -9 can take the whole process group)."""

    def __init__(self, tmp_path: Path, args: list[str], name: str = "worker") -> None:
        self.log_path = tmp_path / f"{name}-{time.monotonic_ns()}.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [*KMIRROR, "run", *args], stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if self.proc.poll() is not None:
                raise AssertionError(f"worker exited ({self.proc.returncode}) before {text!r}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} within {timeout} s:\n{self.log()}")
            time.sleep(0.1)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        rc = self.proc.wait(timeout)
        self._log.close()
        return rc

    def kill9(self) -> None:
        """kill -9 the worker and every stream process it started."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()


def run_args(consumer: Path | list[Path], producer: Path, *extra: str) -> list[str]:
    files = consumer if isinstance(consumer, list) else [consumer]
    args = [a for f in files for a in ("--consumer.config", str(f))]
    return [
        *args,
        "--producer.config",
        str(producer),
        "--offset.commit.interval.ms",
        "500",
        "--topic.refresh.interval.ms",
        "1000",
        "--stats.interval.ms",
        "2000",
        *extra,
    ]


def mirror_worker(
    tmp_path: Path,
    src: Cluster,
    tgt: Cluster,
    whitelist: str,
    streams: int,
    *extra: str,
    group: str = "mirror",
    consumer_extra: str = "",
) -> Worker:
    """`kmirror run` of the topics whitelist matches from src to tgt in a number of streams, with run_args'
    settings and any extra arguments; the consumer group is group, consumer_extra ends its consumer file."""
    return Worker(
        tmp_path,
        run_args(
            consumer_file(tmp_path, src, group, consumer_extra),
            producer_file(tmp_path, tgt),
            "--whitelist",
            whitelist,
            "--num.streams",
            str(streams),
            *extra,
        ),
    )


class LiveTraffic:
    """Keeps producing sequenced records to a topic's partitions until stopped; :meth:`stop` returns once
    the cluster has acknowledged every record sent (a node that was down can leave a backlog that takes
    long to flush on a loaded machine) and fails, in the test's thread, if any was not."""

    # librdkafka's default message.timeout.ms: by then each record is acknowledged or failed.
    FLUSH_BOUND_S = 300.0
    # Subclasses for clusters a test kills set it False (records in flight are lost there).
    require_acknowledged = True

    def __init__(self, cluster: Cluster, topic: str, partitions: int, rate_per_s: float = 400.0) -> None:
        self.cluster, self.topic, self.partitions, self.rate = cluster, topic, partitions, rate_per_s
        self.sent: list[Rec] = []
        self.failed: list[str] = []
        self.unacknowledged = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LiveTraffic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _delivered(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self.failed.append(str(err))

    def _run(self) -> None:
        p = generator(self.cluster)
        i = 0
        while not self._stop.is_set():
            for r in make_records(self.topic, self.partitions, 1, start=i):
                p.produce(
                    r.topic,
                    r.value,
                    r.key,
                    r.partition,
                    timestamp=r.timestamp,
                    headers=list(r.headers),
                    on_delivery=self._delivered,
                )
                self.sent.append(r)
            i += 1
            p.poll(0)
            time.sleep(self.partitions / self.rate)
        self._finish(p)

    def _finish(self, p: Producer) -> None:
        """Once stopped: wait until the cluster has acknowledged every record sent (or FLUSH_BOUND_S)."""
        deadline = time.monotonic() + self.FLUSH_BOUND_S
        while p.flush(5) > 0 and time.monotonic() < deadline:
            pass
        self.unacknowledged = len(p)

    def stop(self) -> list[Rec]:
        """Stop producing; every record sent, once the cluster acknowledged each."""
        self._stop.set()
        self._thread.join()
        assert not self.require_acknowledged or (self.unacknowledged == 0 and not self.failed), (
            f"test setup: {self.cluster.name} acknowledged not every record sent "
            f"({self.unacknowledged} unacknowledged after {self.FLUSH_BOUND_S:.0f} s, "
            f"{len(self.failed)} failed: {self.failed[:3]})"
        )
        return self.sent


T = TypeVar("T")

COORDINATOR_NOT_READY = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
}


def as_group(cluster: Cluster, group: str, request: Callable[[Consumer], T]) -> T:
    """The request made with a standalone consumer of the group (it does not join it, as tools do). Kafka
    answers NOT_COORDINATOR (or "load in progress") while the group's coordinator is being found or loaded,
    e.g. on a cluster's first group request: asked again, for up to 30 s."""
    deadline = time.monotonic() + 30
    while True:
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            return request(c)
        except KafkaException as exc:
            if exc.args[0].code() not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                raise
        finally:
            c.close()
        time.sleep(0.2)


def end_offsets(cluster: Cluster, topic: str, partitions: int) -> dict[int, int]:
    """The partitions' end offsets (high watermarks) now."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kmirror-test-ends"})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        }
    finally:
        c.close()


def committed(cluster: Cluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets."""
    got = as_group(
        cluster,
        group,
        lambda c: c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10),
    )
    return {tp.partition: tp.offset for tp in got}


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A running kmirror's metrics: (sample name, sorted labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def commit_offsets(cluster: Cluster, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets for a group without joining it."""
    tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
    as_group(cluster, group, lambda c: c.commit(offsets=tps, asynchronous=False))


def wait_until(predicate: object, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)
