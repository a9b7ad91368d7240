"""Disaster recovery on real embedded brokers: consumer groups fail over to the target at translated offsets.

An application group consumes a source topic under live traffic and commits as it goes; kmirror mirrors
with --groups into a target whose topic already held unrelated records (so target offsets differ from
source offsets); the source broker is killed (SIGKILL). The group, started against the target from the
offsets kmirror synced there, must read every mirrored record at or after the offset it had committed
(zero skipped); what it reads again before that offset is measured and printed (run with -s).

Source offsets are known from the records themselves: the traffic writes value b"topic:partition:i" as
the i-th record of each partition of a fresh topic, so its source offset is i (the application checks it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka_tools import LATEST, describe_group, offsets, read_values
from mirror_harness import (
    KMIRROR,
    TEST_CONSUMER_EXTRA,
    LiveTraffic,
    Worker,
    commit_offsets,
    committed,
    consumer_file,
    create_topic,
    end_offsets,
    mirror_worker,
    producer_file,
    run_args,
    wait_until,
)

from kmirror.failover.clusters import read_sync_data
from kmirror.testing.kafka import KafkaCluster as Cluster
from kmirror.testing.kafka import free_port
from kmirror.testing.kafka import kafka_clusters as clusters

SYNC_MS = "300"


class App:
    """An application consumer group on the source: reads slower than the traffic, commits every 300 ms."""

    def __init__(self, cluster: Cluster, group: str, topics: list[str], rate_per_s: float = 150.0) -> None:
        self.group, self.topics, self.rate = group, topics, rate_per_s
        self.consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 1000,
            }
        )
        self.committed: dict[tuple[str, int], int] = {}  # last successful commit
        self.processed: dict[tuple[str, int], int] = {}  # next offset to process
        self.bad: list[str] = []
        self.commits = self.commit_errors = 0
        self.assigned = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> App:
        self.consumer.subscribe(self.topics, on_assign=lambda c, ps: self.assigned.set())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        next_commit = time.monotonic() + 0.3
        while not self._stop.is_set():
            batch = self.consumer.consume(20, 0.1)
            for m in batch:
                if m.error() is not None:
                    continue
                _, p, i = m.value().decode().split(":")
                if int(i) != m.offset() or int(p) != m.partition():
                    self.bad.append(f"{m.topic()}/{m.partition()}@{m.offset()} holds {m.value()!r}")
                self.processed[(m.topic(), m.partition())] = m.offset() + 1
            if batch:
                time.sleep(len(batch) / self.rate)
            if time.monotonic() >= next_commit:
                offsets = [TopicPartition(t, p, o) for (t, p), o in self.processed.items()]
                if offsets:
                    try:
                        self.consumer.commit(offsets=offsets, asynchronous=False)
                        self.committed.update({(tp.topic, tp.partition): tp.offset for tp in offsets})
                        self.commits += 1
                    except KafkaException:
                        self.commit_errors += 1
                next_commit = time.monotonic() + 0.3

    def stop(self) -> None:
        """Stop reading and committing (the consumer is abandoned, as when its cluster dies)."""
        self._stop.set()
        self._thread.join(30)
        threading.Thread(target=self.consumer.close, daemon=True).start()


def prefill_unrelated(cluster: Cluster, topic: str, partitions: int) -> int:
    """Records on the target before mirroring begins: target offsets != source offsets."""
    p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    n = 0
    for part in range(partitions):
        for j in range(3 + 2 * part):
            p.produce(topic, b"unrelated:%d" % j, None, part)
            n += 1
    assert p.flush(30) == 0
    return n


def read_group_on_target(
    cluster: Cluster, group: str, topics: list[str]
) -> dict[tuple[str, int], list[bytes]]:
    """Start `group` on the target from its committed offsets (no reset allowed) and read to the end."""
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "error",  # a partition without a committed offset fails the test
            "enable.partition.eof": True,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
        }
    )
    parts: set[tuple[str, int]] = set()
    c.subscribe(topics, on_assign=lambda _c, ps: parts.update((tp.topic, tp.partition) for tp in ps))
    got: dict[tuple[str, int], list[bytes]] = defaultdict(list)
    at_end: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and (not parts or at_end < parts):
            for m in c.consume(500, 0.2):
                err = m.error()
                if err is None:
                    got[(m.topic(), m.partition())].append(m.value())
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add((m.topic(), m.partition()))
                else:
                    raise AssertionError(f"group {group} on the target: {err.str()}")
        assert parts and at_end >= parts, f"group {group} did not reach the end of {sorted(parts - at_end)}"
    finally:
        c.close()
    return got


def mirrored_offsets(cluster: Cluster, topic: str, partitions: int) -> dict[int, list[int]]:
    """Per partition, the source offsets of the mirrored records on the target, in target order."""
    c = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "__test-reader", "enable.partition.eof": True}
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[int]] = defaultdict(list)
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            for m in c.consume(1000, 0.2):
                if m.error() is None:
                    if m.value().startswith(topic.encode() + b":"):
                        out[m.partition()].append(int(m.value().split(b":")[2]))
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
    finally:
        c.close()
    return out


class Traffic(LiveTraffic):
    """LiveTraffic that ends quietly when its cluster was killed (records in flight are simply lost, and
    `sent` is not what arrived)."""

    require_acknowledged = False

    def _finish(self, p: Producer) -> None:
        p.flush(1)


def mirroring_now(target: Cluster, topics: list[str]) -> bool:
    """Whether records reached the target topics within the last 0.3 s."""
    c = Consumer({"bootstrap.servers": target.bootstrap, "group.id": "__test-ends"})
    try:
        md = c.list_topics(timeout=10)
        tps = [TopicPartition(t, p) for t in topics for p in md.topics[t].partitions]

        def total() -> int:
            return sum(c.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in tps)

        before = total()
        time.sleep(0.3)
        return total() > before
    finally:
        c.close()


def kill_source(source: Cluster, *traffic: LiveTraffic) -> None:
    """SIGKILL the source broker; the traffic generators stop (abandoned: their cluster is gone)."""
    assert source.process is not None
    source.process.send_signal(signal.SIGKILL)
    source.process.wait(10)
    for t in traffic:
        t._stop.set()


def checkpoints(target: Cluster, mirror: str, group: str) -> dict[tuple[str, int], int]:
    data = read_sync_data({"bootstrap.servers": target.bootstrap}, mirror)
    return {k: cp.source for k, cp in data.group_checkpoints(group).items()}


def failover(tmp_path: Path, group: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *KMIRROR,
            "failover",
            "--source.config",
            str(tmp_path / "consumer.properties"),
            "--target.config",
            str(tmp_path / "producer.properties"),
            "--group",
            group,
            "--source.timeout",
            "2",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def check_group(
    target: Cluster,
    group: str,
    topics: dict[str, int],
    app: App,
    plan: dict[str, object],
    label: str,
) -> dict[str, int]:
    """The group on the target reads every mirrored record at or after its checkpointed source offset
    (zero skipped). Returns the measured re-reads."""
    rows = {(r["topic"], r["partition"]): r for r in plan["partitions"]}  # type: ignore[union-attr,index]
    got = read_group_on_target(target, group, list(topics))
    skipped = rereads = reread_records = granularity = staleness = unrelated = crash_copies = 0
    for topic, n in topics.items():
        on_target = mirrored_offsets(target, topic, n)
        for p in range(n):
            row = rows.get((topic, p))
            if row is None:  # the group never committed this partition on the source
                continue
            cp = int(row["source_offset"])
            # The checkpoint never claims more than the application processed.
            assert cp <= app.processed.get((topic, p), 0), (label, topic, p, cp, app.processed)
            read = [
                int(v.split(b":")[2]) for v in got.get((topic, p), []) if v.startswith(topic.encode() + b":")
            ]
            unrelated += sum(1 for v in got.get((topic, p), []) if v.startswith(b"unrelated:"))
            wanted = {o for o in on_target.get(p, []) if o >= cp}
            missing = wanted - set(read)
            skipped += len(missing)
            assert not missing, f"{label}: group {group} skipped {topic}/{p} offsets {sorted(missing)[:10]}"
            last_commit = max(app.committed.get((topic, p), 0), cp)
            rereads += sum(1 for o in read if o < last_commit)
            reread_records += len({o for o in read if o < last_commit})
            sync_point = int(row["sync_point"])
            granularity += cp - sync_point
            staleness += last_commit - cp
            # The group starts at the sync point's first copy on the target; what it reads from below the
            # sync point can only be records a kmirror crash copied twice (written again after it).
            below = {o for o in read if o < sync_point}
            twice = {o for o, copies in Counter(on_target.get(p, [])).items() if copies > 1}
            assert below <= twice, (
                f"{label}: group {group} read {topic}/{p} offsets below its sync point {sync_point} that the "
                f"target holds once: {sorted(below - twice)[:10]}"
            )
            crash_copies += len(below)
    assert unrelated == 0, (
        f"{label}: group {group} read {unrelated} unrelated records written before mirroring"
    )
    result = {
        "rereads": rereads,  # records read again, each copy counted (a crash leaves duplicates)
        "reread_records": reread_records,  # distinct source offsets read again
        "sync_granularity": granularity,
        "checkpoint_staleness": staleness,
        "crash_copies_below_sync_point": crash_copies,
        "skipped": skipped,
        "app_commits": app.commits,
        "app_commit_errors": app.commit_errors,
    }
    # Re-reads are bounded by the records between the sync points used and the group's last commit
    # (the last commit may be newer than the last checkpoint taken before the source died), plus records
    # a kmirror crash copied twice that lie after the sync point's copy; each is read as many times as
    # the target holds it.
    assert reread_records <= granularity + staleness + crash_copies, (label, group, result)
    print(f"\n{label}: group {group}: {json.dumps(result)}")
    return result


def test_failover_after_source_sigkill_reads_every_uncommitted_record(tmp_path, workers):
    with clusters("source", "target", log_dir=tmp_path / "brokers") as k:
        src, tgt = k["source"], k["target"]
        create_topic(src, "orders", 6)
        create_topic(tgt, "orders", 6)
        prefill_unrelated(tgt, "orders", 6)
        w = mirror_worker(
            tmp_path,
            src,
            tgt,
            "orders",
            1,
            "--groups",
            "app.*",
            "--sync.group.offsets.interval.ms",
            SYNC_MS,
            "--metrics.port",
            str(port := free_port()),
        )
        workers.append(w)
        w.wait_for(": assigned ")
        traffic = Traffic(src, "orders", 6, rate_per_s=300).__enter__()
        with App(src, "app", ["orders"]) as app:
            assert app.assigned.wait(30)
            wait_until(lambda: len(app.committed) == 6, 60, "the application to commit every partition")
            wait_until(lambda: len(checkpoints(tgt, "mirror", "app")) == 6, 30, "checkpoints of the group")
            time.sleep(1.5)
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            kill_source(src, traffic)  # under live traffic, the application still committing
        assert not app.bad, app.bad[:5]
        # The mirror of the dead source is stopped (as playbooks/failover.yml does).
        w.kill9()

        plan = failover(tmp_path, "app", "--json", "--apply")
        assert plan.returncode == 0, plan.stderr
        result = json.loads(plan.stdout)
        assert result["source"] == "unreachable" and result["applied"] is True
        assert len(result["partitions"]) == 6 and not result["untranslated"]
        # Applying again changes nothing (never backwards, idempotent).
        again = json.loads(failover(tmp_path, "app", "--json", "--apply").stdout)
        assert again["committed"] == 0
        measured = check_group(tgt, "app", {"orders": 6}, app, result, "single worker")
        assert measured["skipped"] == 0
        # The metrics showed the group's checkpoint while the source was alive.
        gauges = {
            line.split(" ")[0]: float(line.split(" ")[1])
            for line in metrics.splitlines()
            if line.startswith("kmirror_") and 'group="app"' in line
        }
        assert gauges['kmirror_checkpoint_age_seconds{group="app",source="consumer"}'] < 10
        assert gauges['kmirror_translated_lag{group="app",source="consumer"}'] >= 0
        assert gauges['kmirror_untranslated_partitions{group="app",source="consumer"}'] == 0
        # kmirror lag shows the group's translated position on the target (the source is gone).
        lag = subprocess.run(
            [
                *KMIRROR,
                "lag",
                "--bootstrap-server",
                tgt.bootstrap,
                "--group",
                "app",
                "--translated-from",
                str(tmp_path / "consumer.properties"),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert lag.returncode == 0, lag.stderr
        translated = {(r["topic"], r["partition"]): r["offset"] for r in json.loads(lag.stdout)}
        assert translated == {(r["topic"], r["partition"]): r["translated"] for r in result["partitions"]}

        # The group now has a member on the target: --apply is refused with exit 3 and one line.
        c = Consumer(
            {"bootstrap.servers": tgt.bootstrap, "group.id": "app", "session.timeout.ms": 6000, **_fast()}
        )
        joined = threading.Event()
        c.subscribe(["orders"], on_assign=lambda *_: joined.set())
        deadline = time.monotonic() + 30
        while not joined.is_set() and time.monotonic() < deadline:
            c.poll(0.2)
        try:
            refused = failover(tmp_path, "app", "--apply")
            assert refused.returncode == 3, refused
            assert "active member" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
        finally:
            c.close()
        unknown = failover(tmp_path, "nobody")
        assert unknown.returncode == 4 and "unknown group 'nobody'" in unknown.stderr, unknown


def _fast() -> dict[str, object]:
    return {"heartbeat.interval.ms": 1000, "enable.auto.commit": False}


def test_failover_after_kmirror_crash_two_workers_several_groups_and_topics(tmp_path, workers):
    """kill -9 of every kmirror process mid-traffic and a restart (duplicates on the target), two workers
    in one mirror group, two topics, two application groups, then the source dies."""
    with clusters("source", "target", log_dir=tmp_path / "brokers") as k:
        src, tgt = k["source"], k["target"]
        topics = {"orders": 6, "events": 3}
        for t, n in topics.items():
            create_topic(src, t, n)
            create_topic(tgt, t, n)
            prefill_unrelated(tgt, t, n)
        args = run_args(
            consumer_file(tmp_path, src),
            producer_file(tmp_path, tgt),
            "--whitelist",
            "orders,events",
            "--num.streams",
            "1",
            "--groups",
            "app-.*",
            "--sync.group.offsets.interval.ms",
            SYNC_MS,
        )
        # Commit less often than the test's default, so that kill -9 leaves records written, not committed.
        args[args.index("--offset.commit.interval.ms") + 1] = "1500"

        # Each process its own consumer file (same name, so the same source name): static members, the
        # default, of two processes reading one file would share ids and fence each other.
        (tmp_path / "w1").mkdir()
        w1_args = list(args)
        w1_args[args.index("--consumer.config") + 1] = str(consumer_file(tmp_path / "w1", src))

        def start_two() -> list[Worker]:
            pair = [Worker(tmp_path, a, name=f"w{i}") for i, a in enumerate((args, w1_args))]
            workers.extend(pair)
            return pair

        first = start_two()
        orders = Traffic(src, "orders", 6, rate_per_s=240).__enter__()
        events = Traffic(src, "events", 3, rate_per_s=120).__enter__()
        with (
            App(src, "app-a", ["orders", "events"]) as app_a,
            App(src, "app-b", ["orders"], rate_per_s=100) as app_b,
        ):
            for w in first:
                w.wait_for(": assigned ")
            assert app_a.assigned.wait(30) and app_b.assigned.wait(30)
            wait_until(lambda: len(app_a.committed) == 9 and len(app_b.committed) == 6, 60, "every partition")
            wait_until(lambda: len(checkpoints(tgt, "mirror", "app-a")) == 9, 30, "checkpoints of app-a")
            wait_until(lambda: mirroring_now(tgt, list(topics)), 30, "the mirror writing")
            for w in first:  # crash mid-write: every kmirror process, no flush, no commit
                w.kill9()
            at_crash = {t: end_offsets(src, t, n) for t, n in topics.items()}
            time.sleep(0.5)
            second = start_two()
            wait_until(lambda: any(": assigned " in w.log() for w in second), 60, "the restarted mirror")
            wait_until(lambda: sum(app_a.committed.values()) > 400, 60, "app-a to commit")

            def duplicates() -> int:
                return sum(
                    len(offs) - len(set(offs))
                    for t, n in topics.items()
                    for offs in mirrored_offsets(tgt, t, n).values()
                )

            # Whatever the crash left written but not committed, the restarted mirror writes again. Wait until
            # it has committed past every record the source held at the crash: a kill -9 right after a commit
            # may leave no duplicates at all, so their number is reported, not waited for.
            def past_the_crash() -> bool:
                for t, n in topics.items():
                    now = committed(src, "mirror", t, n)
                    if any(now.get(p, -1) < at_crash[t][p] for p in range(n)):
                        return False
                return True

            wait_until(past_the_crash, 90, "the restarted mirror to commit past the crash point")
            time.sleep(3.0)  # the restarted mirror syncs the groups again
            kill_source(src, orders, events)
        for w in second:
            w.kill9()
        assert not app_a.bad and not app_b.bad
        dups = duplicates()
        print(f"\nduplicates on the target after kill -9 and restart: {dups}")

        for group, app, group_topics in (
            ("app-a", app_a, topics),
            ("app-b", app_b, {"orders": 6}),
        ):
            plan = failover(tmp_path, group, "--json", "--apply")
            assert plan.returncode == 0, plan.stderr
            result = json.loads(plan.stdout)
            assert result["source"] == "unreachable"
            assert len(result["partitions"]) == sum(group_topics.values()), result
            assert check_group(tgt, group, group_topics, app, result, "kmirror crash+restart")["skipped"] == 0


def test_failover_errors_are_one_line(tmp_path):
    """No sync data on the target: exit 4, one line naming the mirror group and the fix; a bad file: 2."""
    with clusters("target", log_dir=tmp_path / "brokers") as k:
        tgt = k["target"]
        consumer = tmp_path / "consumer.properties"
        consumer.write_text(f"bootstrap.servers=127.0.0.1:1\ngroup.id=mirror\n{TEST_CONSUMER_EXTRA}")
        producer_file(tmp_path, tgt)
        r = failover(tmp_path, "app")
        assert r.returncode == 4, r
        assert "no offset sync data for mirror group 'mirror'" in r.stderr and "--groups" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        os.remove(consumer)
        r = failover(tmp_path, "app")
        assert r.returncode == 2 and "consumer.properties" in r.stderr, r


def table_rows(text: str) -> dict[tuple[str, int], dict[str, str]]:
    """The rows of `kmirror failover`'s table (the header line names the columns)."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["Topic", "Pid"])
    names = lines[at].split()
    rows = {}
    for line in lines[at + 1 :]:
        cols = line.split()
        if len(cols) != len(names) or not cols[1].isdigit():
            break
        rows[(cols[0], int(cols[1]))] = dict(zip(names, cols, strict=True))
    return rows


def test_failover_tables_agree_with_kafkas_own_tools(tmp_path, workers):
    """True watermarks: the group's source offsets, the target's end offsets and the group's position and
    lag on the target, before and after --apply, are what kafka-consumer-groups.sh --describe and
    kafka-get-offsets.sh report for the same group and partitions. Records are written in batches (an end
    offset is not the last batch's base offset + 1) and the target held unrelated records first."""
    with clusters("source", "target", log_dir=tmp_path / "brokers") as k:
        src, tgt = k["source"], k["target"]
        create_topic(src, "ledger", 3)
        create_topic(tgt, "ledger", 3)
        prefill_unrelated(tgt, "ledger", 3)
        sent = 0

        def produce_batched(n: int) -> None:
            nonlocal sent
            batched = Producer(
                {"bootstrap.servers": src.bootstrap, "linger.ms": 20, "batch.num.messages": 100}
            )
            for i in range(sent, sent + n):
                for p in range(3):
                    batched.produce("ledger", b"ledger:%d:%d" % (p, i), b"k%d" % (i % 5), p)
            assert batched.flush(30) == 0
            sent += n

        def synced_at(offset: int) -> bool:
            """Every partition has a sync point at exactly this source offset."""
            store = read_sync_data({"bootstrap.servers": tgt.bootstrap}, "mirror").store
            return all(
                (tr := store.translate("ledger", p, offset)) is not None and tr.sync_source == offset
                for p in range(3)
            )

        produce_batched(600)
        w = Worker(
            tmp_path,
            run_args(
                consumer_file(tmp_path, src),
                producer_file(tmp_path, tgt),
                "--whitelist",
                "ledger",
                "--num.streams",
                "1",  # one owner from start to end: no rebalance moves a partition between commit points
                "--groups",
                "app-.*",
                "--sync.group.offsets.interval.ms",
                SYNC_MS,
            ),
        )
        workers.append(w)
        # A sync point at 600 (the end when the mirror was assigned), then the group commits there, then
        # two more steps of 200 records each mirrored and synced: sync points at 800 and at 1000.
        wait_until(lambda: synced_at(600), 90, "sync points at 600")
        commit_group(src, "app-t", {("ledger", p): 600 for p in range(3)})
        for step in (800, 1000):
            produce_batched(200)
            wait_until(lambda s=step: synced_at(s), 90, f"sync points at {step}")
        wait_until(lambda: checkpoints(tgt, "mirror", "app-t") == {("ledger", p): 600 for p in range(3)}, 30)
        wait_until(
            lambda: all(o >= 0 for o in committed(tgt, "app-t", "ledger", 3).values()), 30, "group sync"
        )
        assert w.stop() == 0
        # The application goes on on the source after the mirror stopped: p0 to the end, p1 part way.
        commit_group(src, "app-t", {("ledger", 0): 1000, ("ledger", 1): 800, ("ledger", 2): 600})

        dry = failover(tmp_path, "app-t", "--json")
        assert dry.returncode == 0, dry.stderr
        plan = json.loads(dry.stdout)
        assert plan["source"] == "reachable" and not plan["untranslated"]
        rows = {(r["topic"], r["partition"]): r for r in plan["partitions"]}
        assert set(rows) == {("ledger", p) for p in range(3)}
        assert [rows[("ledger", p)]["action"] for p in range(2)] == ["commit", "commit"]

        # The source side: the group's committed offsets, as Kafka's tool describes the group there.
        on_source = describe_group(src, "app-t")
        assert {k: r["source_offset"] for k, r in rows.items()} == {k: v[0] for k, v in on_source.items()}
        assert (
            {k[1]: v[1] for k, v in on_source.items()}
            == offsets(src, "ledger", LATEST)
            == {0: 1000, 1: 1000, 2: 1000}
        )
        # The target before --apply: where the group sync left the group, and the partitions' ends.
        before = describe_group(tgt, "app-t")
        target_ends = offsets(tgt, "ledger", LATEST)
        assert {k: (r["on_target"], r["log_end"]) for k, r in rows.items()} == {
            k: (v[0], v[1]) for k, v in before.items()
        }
        assert {k[1]: r["log_end"] for k, r in rows.items()} == target_ends
        # The table shows the same numbers.
        shown = failover(tmp_path, "app-t")
        assert shown.returncode == 0, shown.stderr
        table = table_rows(shown.stdout)
        assert {
            k: (
                int(t["SourceOffset"]),
                int(t["Translated"]),
                int(t["OnTarget"]),
                int(t["LogEnd"]),
                int(t["Lag"]),
            )
            for k, t in table.items()
        } == {
            k: (r["source_offset"], r["translated"], r["on_target"], r["log_end"], r["lag"])
            for k, r in rows.items()
        }

        applied = failover(tmp_path, "app-t", "--json", "--apply")
        assert applied.returncode == 0, applied.stderr
        after_rows = {(r["topic"], r["partition"]): r for r in json.loads(applied.stdout)["partitions"]}
        assert after_rows == {k: {**r, "age_s": after_rows[k]["age_s"]} for k, r in rows.items()}
        # The target after --apply: the group's offsets, the ends and the lag the plan showed.
        after = describe_group(tgt, "app-t")
        expected = {
            k: (r["translated"] if r["action"] == "commit" else r["on_target"], r["log_end"], r["lag"])
            for k, r in rows.items()
        }
        assert after == expected
        assert offsets(tgt, "ledger", LATEST) == target_ends
        # p0 is at the end; p1 and p2 have the records mirrored after their offsets still to read, and
        # the group's first record there (Kafka's console consumer at the committed offset) is the copy of
        # the record at its source offset, the one before it the copy of the one before.
        assert [after[("ledger", p)][2] for p in range(3)] == [0, 200, 400]
        for p, source_offset in ((1, 800), (2, 600)):
            at = after[("ledger", p)][0]
            assert read_values(tgt, "ledger", p, at - 1, 2) == [
                f"ledger:{p}:{source_offset - 1}",
                f"ledger:{p}:{source_offset}",
            ]


def commit_group(cluster: Cluster, group: str, offsets_: dict[tuple[str, int], int]) -> None:
    """Commit offsets for a group without joining it (a standalone consumer, as tools do)."""
    commit_offsets(cluster, group, offsets_)


def groups_worker(tmp_path: Path, src: Cluster, tgt: Cluster, topic: str) -> Worker:
    """One stream mirroring `topic` with the groups app-.* synced, a sync point every 30 s (commit points).

    The tests using it need the copy to be one run of the stream (no rebalance between two sync points):
    its only consumer's session is 30 s, not the harness's 6 s, which a busy machine can starve (seen in
    a loaded run: both partitions reassigned mid-backlog, the backlog copied twice, no exact range)."""
    return mirror_worker(
        tmp_path,
        src,
        tgt,
        topic,
        1,
        "--groups",
        "app-.*",
        "--sync.group.offsets.interval.ms",
        SYNC_MS,
        "--offset.commit.interval.ms",
        "30000",
        consumer_extra="session.timeout.ms=30000\n",
    )


def exact_checkpoints(tgt: Cluster, group: str, partitions: int) -> bool:
    """Every partition of `group` checkpointed at a sync point of its own offset (exact translation)."""
    cps = read_sync_data({"bootstrap.servers": tgt.bootstrap}, "mirror").group_checkpoints(group)
    return len(cps) == partitions and all(cp.sync_source == cp.source for cp in cps.values())


def test_groups_in_a_backlog_copied_at_full_speed_fail_over_exactly(tmp_path, workers):
    """Issue 24, item 1: a 60,000-record backlog per partition copied within one commit interval, so the
    only sync points are the start and the end. Groups committed near the start, in the middle and near
    the end translate exactly (between two points of one run that prove the range one-to-one) and, after
    the source dies, each re-reads nothing and skips nothing. The target held unrelated records first
    (target offsets != source offsets)."""
    per_partition, partitions = 60_000, 2
    with clusters("source", "target", log_dir=tmp_path / "brokers") as k:
        src, tgt = k["source"], k["target"]
        create_topic(src, "backlog", partitions)
        create_topic(tgt, "backlog", partitions)
        prefill_unrelated(tgt, "backlog", partitions)
        p = Producer({"bootstrap.servers": src.bootstrap, "linger.ms": 20, "enable.idempotence": True})
        for i in range(per_partition):
            for part in range(partitions):
                p.produce("backlog", b"backlog:%d:%d" % (part, i), None, part)
            if i % 10_000 == 0:
                p.flush(60)
        assert p.flush(60) == 0
        groups = {"app-start": 100, "app-middle": 24_000, "app-end": 59_990}
        for group, offset in groups.items():
            commit_group(src, group, {("backlog", part): offset for part in range(partitions)})
        w = groups_worker(tmp_path, src, tgt, "backlog")
        workers.append(w)
        wait_until(
            lambda: (
                committed(src, "mirror", "backlog", partitions)
                == dict.fromkeys(range(partitions), per_partition)
            ),
            180,
            "the backlog mirrored and committed",
        )

        def exact(group: str) -> bool:
            return exact_checkpoints(tgt, group, partitions)

        for group in groups:
            try:
                wait_until(lambda g=group: exact(g), 60, f"exact checkpoints of {group}")
            except AssertionError:
                data = read_sync_data({"bootstrap.servers": tgt.bootstrap}, "mirror")
                points = {tp: data.store._points[tp] for tp in data.store.partitions()}
                raise AssertionError(f"{group}: {data.group_checkpoints(group)}\n{points}") from None
        kill_source(src)
        w.kill9()
        on_target = mirrored_offsets(tgt, "backlog", partitions)
        for group, offset in groups.items():
            plan = failover(tmp_path, group, "--json", "--apply")
            assert plan.returncode == 0, plan.stderr
            rows = json.loads(plan.stdout)["partitions"]
            for row in rows:
                part = row["partition"]
                # exact: the target offset of the copy of source offset C, nothing read again
                where = on_target[part].index(offset) + (3 + 2 * part)  # after the unrelated records
                assert (row["source_offset"], row["translated"], row["sync_point"]) == (
                    offset,
                    where,
                    offset,
                ), (
                    group,
                    row,
                )
            got = read_group_on_target(tgt, group, ["backlog"])
            for part in range(partitions):
                read = [int(v.split(b":")[2]) for v in got[("backlog", part)]]
                assert read == list(range(offset, per_partition)), (group, part, read[:3], len(read))


def test_a_group_a_million_records_behind_fails_over_exactly(tmp_path, workers):
    """Issue 24, item 1: a group 1,000,000 records behind the head translates as exactly as one 10 behind.
    One partition of 1,000,100 records copied in one run (a 30 s commit interval: a few sync points, far
    apart), the target holding 3 unrelated records first. After the source dies, each group's
    translated offset on the target holds the copy of exactly its committed source offset: nothing re-read,
    nothing skipped, however far behind."""
    behind, topic = 1_000_000, "far"
    total = behind + 100
    groups = {"app-far": total - behind, "app-near": total - 10}
    with clusters("source", "target", log_dir=tmp_path / "brokers") as k:
        src, tgt = k["source"], k["target"]
        create_topic(src, topic, 1)
        create_topic(tgt, topic, 1)
        unrelated = prefill_unrelated(tgt, topic, 1)
        p = Producer({"bootstrap.servers": src.bootstrap, "linger.ms": 50, "enable.idempotence": True})
        for i in range(total):
            p.produce(topic, b"far:0:%d" % i, None, 0)
            if i % 50_000 == 49_999:
                p.flush(120)
        assert p.flush(120) == 0
        for group, offset in groups.items():
            commit_group(src, group, {(topic, 0): offset})
        w = groups_worker(tmp_path, src, tgt, topic)
        workers.append(w)
        wait_until(lambda: committed(src, "mirror", topic, 1) == {0: total}, 600, "the partition mirrored")

        def exact(group: str) -> bool:
            return exact_checkpoints(tgt, group, 1)

        for group in groups:
            wait_until(lambda g=group: exact(g), 120, f"an exact checkpoint of {group}")
        kill_source(src)
        w.kill9()
        reader = Consumer({"bootstrap.servers": tgt.bootstrap, "group.id": "kmirror-test-far"})
        try:
            for group, offset in groups.items():
                plan = failover(tmp_path, group, "--json", "--apply")
                assert plan.returncode == 0, plan.stderr
                (row,) = json.loads(plan.stdout)["partitions"]
                assert (row["source_offset"], row["translated"], row["sync_point"]) == (
                    offset,
                    offset + unrelated,
                    offset,
                ), (group, row)
                # the record at the translated offset is the copy of the group's next source record
                reader.assign([TopicPartition(topic, 0, row["translated"])])
                m = reader.poll(30)
                assert m is not None and m.error() is None and m.value() == b"far:0:%d" % offset, (group, m)
        finally:
            reader.close()
        print(f"1,000,000 behind: {groups} translated exactly (+{unrelated} unrelated records on the target)")
