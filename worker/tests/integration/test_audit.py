"""The Spark audit against real embedded brokers: planted drops, duplicates and extras are each found
exactly and named; a clean mirror made by `kmirror run` reports nothing; in-flight records are not
missing; the command line (python -m and spark-submit) end to end.

One Spark session (local[2]) is shared by the in-process tests of this module."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka_tools import EARLIEST, LATEST, committed_data_offsets, log_records, offsets
from mirror_harness import (
    KMIRROR,
    Rec,
    Worker,
    committed,
    consumer_file,
    create_topic,
    produce,
    producer_file,
    run_args,
    wait_until,
    write,
)

from kmirror.audit import job
from kmirror.audit import spark as audit_spark
from kmirror.audit.scope import SOURCE, TARGET, tasks

pytestmark = pytest.mark.audit

BASE_TS = 1_700_000_000_000  # 2023-11-14T22:13:20Z
MINUTE = 60_000
AUDIT = [sys.executable, "-m", "kmirror.audit"]


@pytest.fixture(scope="module")
def spark():
    s = audit_spark.session("local[2]")
    yield s
    s.stop()


class Log:
    """Records produced to one cluster, with the partition and offset each got (one record per batch)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.next: dict[tuple[str, int], int] = {}
        self.where: list[tuple[Rec, int]] = []

    def send(self, records):
        produce(self.cluster, records)
        for r in records:
            off = self.next.get((r.topic, r.partition), 0)
            self.next[(r.topic, r.partition)] = off + 1
            self.where.append((r, off))
        return [off for _, off in self.where[-len(records) :]]


def spread(topic, partitions, n, step_ms=1000, start=0, base=BASE_TS):
    """n records per partition, one every step_ms, with null keys, null values and header values."""
    out = []
    for i in range(start, start + n):
        for p in range(partitions):
            key = None if i % 11 == 0 else b"k%d" % (i % 7)
            value = None if i % 13 == 0 else b"%s:%d:%d" % (topic.encode(), p, i)
            headers = (("seq", b"%d" % i), ("opt", None if i % 2 else b""))
            out.append(Rec(topic, p, key, value, headers, base + i * step_ms + p))
    return out


def options(kafka, topics, **kw):
    return job.AuditOptions(
        source={"bootstrap.servers": kafka["source"].bootstrap},
        target={"bootstrap.servers": kafka["target"].bootstrap},
        topics=topics,
        **kw,
    )


def located(report, kind):
    return sorted((r["topic"], r["partition"], r["offset"]) for r in report[kind])


def plant(kafka):
    """Source: orders (3 partitions) and payments (2); target: payments has 3 partitions (placement
    differs), some records dropped, some twice, some the source never had."""
    src, tgt = Log(kafka["source"]), Log(kafka["target"])
    create_topic(kafka["source"], "orders", 3)
    create_topic(kafka["source"], "payments", 2)
    create_topic(kafka["target"], "orders", 3)
    create_topic(kafka["target"], "payments", 3)
    orders, payments = spread("orders", 3, 100), spread("payments", 2, 60)
    src.send(orders)
    src.send(payments)
    drop = {7, 150, 299}  # indexes into orders
    drop_pay = {0, 59}
    target_orders = [r for i, r in enumerate(orders) if i not in drop]
    moved = [
        Rec(r.topic, (i + 1) % 3, r.key, r.value, r.headers, r.timestamp)
        for i, r in enumerate(payments)
        if i not in drop_pay
    ]
    tgt.send(target_orders)
    tgt.send(moved)
    dup_offsets = tgt.send([orders[10], orders[11], moved[5]])  # second copies, at the end of partitions
    # Records the source never had: new content, and near twins of source records that differ only in a
    # header value (b"" vs None), in a NULL swapped between key and value, or in the timestamp.
    twin = orders[6]
    twin_headers = (twin.headers[0], ("opt", None if twin.headers[1][1] == b"" else b""))
    swapped_src = next(r for r in orders if r.key is None and r.value is not None)
    extras = [
        Rec("orders", 0, b"ghost", b"boo", (), BASE_TS + 5_500),
        Rec("orders", 1, twin.key, twin.value, twin_headers, twin.timestamp),
        Rec("orders", 2, swapped_src.value, None, swapped_src.headers, swapped_src.timestamp),
        Rec(
            "payments", 2, payments[1].key, payments[1].value, payments[1].headers, payments[1].timestamp + 1
        ),
    ]
    extra_offsets = tgt.send(extras)
    src_off = {id(r): off for r, off in src.where}
    missing = sorted((orders[i].topic, orders[i].partition, src_off[id(orders[i])]) for i in drop)
    missing += sorted(("payments", payments[i].partition, src_off[id(payments[i])]) for i in drop_pay)
    dups = sorted(
        (r.topic, r.partition, off)
        for r, off in zip([orders[10], orders[11], moved[5]], dup_offsets, strict=True)
    )
    unexpected = sorted((r.topic, r.partition, off) for r, off in zip(extras, extra_offsets, strict=True))
    return sorted(missing), dups, unexpected, len(orders) + len(payments)


def test_planted_drops_duplicates_and_extras_are_found_exactly(kafka, spark, tmp_path):
    missing, dups, unexpected, n_source = plant(kafka)
    # The worker's topic filter: whole-name Java regexes, an exclude, never internal topics.
    planned = job.plan(options(kafka, ".*", exclude="pay.*"))
    assert {(s.side, s.topic) for s in planned.spans} == {(0, "orders"), (1, "orders")}
    # Small tasks: partitions are cut into several tasks, and one consumer reads the end of one partition
    # and the start of the next (the reading tasks of this run, as the job plans them).
    o = options(kafka, "orders|payments", bucket_ms=MINUTE, range_size=40)
    reading = tasks(job.plan(o).spans, 40, spark.sparkContext.defaultParallelism)
    assert any(len({(r.topic, r.partition) for r in t}) > 1 for t in reading)
    rep = job.run(spark, o)
    assert located(rep, "missing_records") == missing
    assert located(rep, "duplicated_records") == dups
    assert located(rep, "unexpected_records") == unexpected
    assert rep["in_flight_records"] == []
    t = rep["totals"]
    assert (t["missing"], t["duplicated"], t["unexpected"], t["in_flight"]) == (5, 3, 4, 0)
    assert t["source_records"] == n_source
    assert t["target_records"] == n_source - 5 + 3 + 4
    assert rep["exit_code"] == 1 and rep["verdict"] == "incomplete"
    # Every missing record is named with its content, and lies in a bucket whose completeness shows it.
    m = rep["missing_records"][0]
    assert set(m) == {"topic", "partition", "offset", "timestamp", "key"}
    differing = {(b["topic"], b["start_ms"]) for b in rep["buckets"] if not b["checksums_match"]}
    for r in rep["missing_records"]:
        assert (r["topic"], r["timestamp"] - r["timestamp"] % MINUTE) in differing
    short = {(r["topic"], r["timestamp"] - r["timestamp"] % MINUTE) for r in rep["missing_records"]}
    assert {(b["topic"], b["start_ms"]) for b in rep["buckets"] if b["completeness"] < 1} == short
    assert {b["topic"] for b in rep["buckets"]} == {"orders", "payments"}
    assert len(rep["buckets"]) == 2 * 2  # 100 s and 60 s of records, from 20 s into a minute
    paths = job.write(rep, tmp_path / "report")
    assert json.loads(paths[0].read_text())["totals"] == t
    page = paths[1].read_text()
    assert page.count("<svg") == 2 and "INCOMPLETE: 5 missing, 3 duplicated, 4 unexpected" in page

    # A time window: only records of [from, to) are compared.
    rep = job.run(
        spark,
        options(kafka, "orders", bucket_ms=MINUTE, from_ms=BASE_TS + 20_000, to_ms=BASE_TS + 60_000),
    )
    assert rep["totals"]["source_records"] == 40 * 3
    assert located(rep, "missing_records") == [m for m in missing if m[0] == "orders" and 20 <= m[2] < 60]
    assert rep["totals"]["duplicated"] == 0 and rep["totals"]["unexpected"] == 0


def wait_mirrored(cluster, group, topic, partitions, ends, timeout=90):
    wait_until(lambda: committed(cluster, group, topic, partitions) == ends, timeout, f"{topic} mirrored")


def end_offsets(cluster, topic, partitions):
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "probe"})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        }
    finally:
        c.close()


def test_clean_mirror_by_kmirror_run_reports_nothing_and_recent_gaps_are_in_flight(
    kafka, spark, tmp_path, workers
):
    src, tgt = kafka["source"], kafka["target"]
    create_topic(src, "clean", 3)
    now = int(time.time() * 1000)
    old = spread("clean", 3, 400, step_ms=250)
    produce(src, old)
    ends = end_offsets(src, "clean", 3)
    w = Worker(
        tmp_path, run_args(consumer_file(tmp_path, src), producer_file(tmp_path, tgt), "--whitelist", "clean")
    )
    workers.append(w)
    wait_mirrored(src, "mirror", "clean", 3, ends)
    assert w.stop() == 0
    # The mirror batches its writes: the target's high watermarks lag behind its logs on the test broker.
    rep = job.run(spark, options(kafka, "clean", bucket_ms=MINUTE))
    t = rep["totals"]
    assert (t["source_records"], t["target_records"]) == (1200, 1200)
    assert (t["missing"], t["duplicated"], t["unexpected"], t["in_flight"]) == (0, 0, 0, 0)
    assert rep["exit_code"] == 0 and rep["verdict"] == "complete"
    assert all(b["checksums_match"] and b["completeness"] == 1.0 for b in rep["buckets"])
    assert rep["missing_records"] == rep["duplicated_records"] == rep["unexpected_records"] == []

    # Records written after the mirror stopped: the recent ones are in flight, the old ones missing.
    recent = spread("clean", 3, 5, start=1000, step_ms=1, base=now)
    late_old = spread("clean", 3, 1, start=2000)
    produce(src, recent + late_old)
    rep = job.run(spark, options(kafka, "clean", bucket_ms=MINUTE, grace_ms=10 * MINUTE))
    t = rep["totals"]
    assert (t["in_flight"], t["missing"], t["duplicated"], t["unexpected"]) == (15, 3, 0, 0)
    assert {r["partition"] for r in rep["in_flight_records"]} == {0, 1, 2}
    assert located(rep, "missing_records") == [("clean", p, 405) for p in range(3)]
    assert rep["exit_code"] == 1
    rep = job.run(spark, options(kafka, "clean", bucket_ms=MINUTE, to_ms=BASE_TS + 200_000))
    assert rep["exit_code"] == 0 and rep["totals"]["source_records"] == 3 * 400


def audit_cli(args, runner=AUDIT, timeout=300):
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.run([*runner, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_command_line_end_to_end(kafka, tmp_path):
    missing, _dups, _unexpected, _n = plant(kafka)
    # The mirror's own files: Java keys translated as for `kmirror run`.
    consumer = write(
        tmp_path / "consumer.properties",
        f"bootstrap.servers={kafka['source'].bootstrap}\ngroup.id=mirror\nauto.offset.reset=earliest\n",
    )
    producer = write(
        tmp_path / "producer.properties",
        f"metadata.broker.list={kafka['target'].bootstrap}\nacks=all\ncompression.type=lz4\n",
    )
    out = audit_cli(
        [
            "--source.config", str(consumer), "--target.config", str(producer), "--topics", "orders,payments",
            "--from", "2023-11-14T22:13:20Z", "--to", str(BASE_TS + 100_000), "--bucket", "1m",
            "--output", str(tmp_path / "audits" / "%Y-%m-%d"), "--master", "local[2]",
        ]
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    assert "INCOMPLETE: 5 missing, 3 duplicated, 4 unexpected, 0 in flight" in out.stdout
    dated = list((tmp_path / "audits").iterdir())
    assert len(dated) == 1 and dated[0].name == time.strftime("%Y-%m-%d", time.gmtime())
    rep = json.loads((dated[0] / "report.json").read_text())
    assert located(rep, "missing_records") == missing
    assert (dated[0] / "report.html").read_text().count("<svg") == 2
    # The mirror's group (group.id) has no sync topic on this target: no gaps, the audit as before.
    assert rep["source_gaps"]["status"] == "read" and rep["gaps"] == [] and rep["totals"]["lost_in_gaps"] == 0

    # Errors: one line, exit 2, before any Spark starts.
    def fails(source, target, topics, *extra):
        args = ["--source.config", str(source), "--target.config", str(target), "--topics", topics]
        out = audit_cli([*args, "--output", str(tmp_path / "o"), *extra])
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert out.stderr.startswith("kmirror audit: error: ")
        return out.stderr

    assert "file not found" in fails(consumer, tmp_path / "nope", "x")
    bad = write(tmp_path / "bad.properties", f"bootstrap.servers={kafka['source'].bootstrap}\nzk.connect=x\n")
    assert "zk.connect" in fails(bad, producer, "x")
    assert "nothing to audit" in fails(consumer, producer, "nothing.*")
    assert "--bucket" in fails(consumer, producer, "x", "--bucket", "10")
    kafka["target"].pause()
    try:
        err = fails(consumer, producer, "orders", "--timeout", "3")
    finally:
        kafka["target"].resume()
    assert "target cluster" in err


def test_spark_submit_runs_the_job(kafka, tmp_path):
    src, tgt = Log(kafka["source"]), Log(kafka["target"])
    create_topic(kafka["source"], "same", 2)
    create_topic(kafka["target"], "same", 2)  # as a mirror makes it, not as auto-creation would (1 partition)
    records = spread("same", 2, 50)
    src.send(records)
    tgt.send(records)
    spark_submit = Path(sys.executable).parent / "spark-submit"
    out = audit_cli(
        [
            "--source.config", str(producer_file(tmp_path, kafka["source"], name="s.properties")),
            "--target.config", str(producer_file(tmp_path, kafka["target"], name="t.properties")),
            "--topics", "same", "--output", str(tmp_path / "submitted"),
        ],
        runner=[str(spark_submit), "--master", "local[2]", "--driver-memory", "512m", job.__file__],
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert (
        "COMPLETE: 0 missing, 0 duplicated, 0 unexpected, 0 in flight; 100 source and 100 target"
        in out.stdout
    )
    rep = json.loads((tmp_path / "submitted" / "report.json").read_text())
    assert rep["spark"]["master"] == "local[2]" and rep["exit_code"] == 0


def test_audit_ranges_and_counts_agree_with_kafkas_own_tools(kafka, spark):
    """The offsets the audit reads on each cluster are the partitions' earliest to latest offsets as
    kafka-get-offsets.sh reports them, and the records it counts are the ones kafka-dump-log.sh shows a
    read_committed reader gets: a transactional source (transaction markers and an aborted transaction
    take offsets but are no records) and partitions whose log start was moved by deleting records."""
    src, tgt = kafka["source"], kafka["target"]
    for cluster in (src, tgt):
        create_topic(cluster, "txn", 2)
        create_topic(cluster, "trimmed", 2)
    committed_1, aborted, committed_2 = (
        spread("txn", 2, 30),
        spread("txn", 2, 10, start=30),
        spread("txn", 2, 20, start=40),
    )
    p = Producer({"bootstrap.servers": src.bootstrap, "transactional.id": "audit-txn", "linger.ms": 5})
    p.init_transactions(30)
    for records, commit in ((committed_1, True), (aborted, False), (committed_2, True)):
        p.begin_transaction()
        for r in records:
            p.produce(r.topic, r.value, r.key, r.partition, timestamp=r.timestamp, headers=list(r.headers))
        assert p.flush(30) == 0  # written to the log, even the transaction about to be aborted
        (p.commit_transaction if commit else p.abort_transaction)(30)
    produce(tgt, committed_1 + committed_2)  # the target holds the committed records, plainly
    trimmed = spread("trimmed", 2, 40)
    for cluster in (src, tgt):
        produce(cluster, trimmed)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for f in admin.delete_records([TopicPartition("trimmed", 1, 15)]).values():
            assert f.result().low_watermark == 15  # the new log start offset

    o = options(kafka, "txn|trimmed", bucket_ms=MINUTE)
    planned = job.plan(o)
    rep = job.run(spark, o, planned)
    spans = {(s.side, s.topic, s.partition): (s.start, s.end) for s in planned.spans}
    for side, name, cluster in ((SOURCE, "source", src), (TARGET, "target", tgt)):
        tool_ranges: dict[tuple[int, str, int], tuple[int, int]] = {}
        for topic in ("txn", "trimmed"):
            first, last = offsets(cluster, topic, EARLIEST), offsets(cluster, topic, LATEST)
            tool_ranges.update({(side, topic, p): (first[p], last[p]) for p in first})
            counted = sum(
                len(committed_data_offsets(log_records(cluster, topic, p), first[p], last[p])) for p in first
            )
            row = next(t for t in rep["topics"] if t["topic"] == topic)
            assert row[f"{name}_records"] == counted, (name, topic, row, counted)
        assert {k: v for k, v in spans.items() if k[0] == side} == tool_ranges
        assert rep["clusters"][name]["partitions"] == len(tool_ranges)
        assert rep["clusters"][name]["offsets_planned"] == sum(e - s for s, e in tool_ranges.values())
    # What the tools showed, spelled out: on the source each partition of txn holds 3 markers and 10
    # aborted records besides its 50 records; trimmed/1 starts at 15 on both clusters.
    assert spans[(SOURCE, "txn", 0)] == (0, 63) and spans[(TARGET, "txn", 0)] == (0, 50)
    assert spans[(SOURCE, "trimmed", 1)] == spans[(TARGET, "trimmed", 1)] == (15, 40)
    t = rep["totals"]
    assert (t["source_records"], t["target_records"]) == (2 * 50 + 40 + 25,) * 2
    assert (t["missing"], t["duplicated"], t["unexpected"], t["in_flight"]) == (0, 0, 0, 0)
    assert rep["verdict"] == "complete"


SVG = "{http://www.w3.org/2000/svg}"


def charts(page):
    """The report's SVG charts, parsed (each is well-formed XML)."""
    return [ET.fromstring(m) for m in re.findall(r"<svg .*?</svg>", page, re.S)]


def test_progress_on_stderr_spark_quiet_and_a_report_an_operator_can_act_on(kafka, tmp_path):
    """One missing record in 176 old ones, 24 recent ones not copied yet (in flight), the mirror's own
    files in the Ansible layout (/etc/kmirror/<source>/consumer.properties): the command says what it
    does on stderr and nothing of Spark's; the report names the clusters, shows the one loss as a full
    bar on its own axis over a labelled time axis, folds the in-flight records into one row, and says
    which offsets to copy again."""
    src, tgt = kafka["source"], kafka["target"]
    for cluster in (src, tgt):
        create_topic(cluster, "orders", 2)
    now = int(time.time() * 1000)
    base = now - now % (5 * MINUTE) - 90 * MINUTE  # 176 records over 44 minutes, 9 buckets of 5m
    old = [Rec("orders", i % 2, b"k%d" % i, b"v%d" % i, (), base + i * 15_000) for i in range(176)]
    recent = [Rec("orders", i % 2, b"r%d" % i, b"new", (), now - 60_000 + i) for i in range(24)]
    dropped = old[101]
    s, t = Log(src), Log(tgt)
    s.send(old + recent)
    t.send([r for r in old if r is not dropped])
    dropped_offset = next(off for r, off in s.where if r is dropped)
    conf = tmp_path / "etc" / "east"
    conf.mkdir(parents=True)
    consumer = write(conf / "consumer.properties", f"bootstrap.servers={src.bootstrap}\ngroup.id=mirror\n")
    producer = write(conf / "producer.properties", f"bootstrap.servers={tgt.bootstrap}\nacks=all\n")
    args = ["--source.config", str(consumer), "--target.config", str(producer), "--topics", "orders",
            "--bucket", "5m", "--master", "local[2]"]  # fmt: skip
    out = audit_cli([*args, "--target.name", "dc2", "--output", str(tmp_path / "report")])
    assert out.returncode == 1, out.stdout + out.stderr

    # Progress: every stderr line is the audit's own, in the order of the work; none of Spark's.
    lines = out.stderr.splitlines()
    assert lines and all(line.startswith("kmirror audit: ") for line in lines), out.stderr
    said = [line.removeprefix("kmirror audit: ") for line in lines]

    def at(text):
        return next(i for i, line in enumerate(said) if line.startswith(text))

    assert "reading source east topic orders: 2 partition(s), 200 offsets" in said
    assert "reading target dc2 topic orders: 2 partition(s), 175 offsets" in said
    reading = re.fullmatch(r"reading: (\d+) Spark task\(s\)", said[at("reading: ")])
    assert reading, said
    n_read = int(reading[1])
    matching = re.fullmatch(r"matching: (\d+) Spark task\(s\)", said[at("matching: ")])
    assert matching, said
    n_match = int(matching[1])
    done = [at(f"reading: {n_read}/{n_read} task(s) done"), at(f"matching: {n_match}/{n_match} task(s) done")]
    result = at("topic orders: ")
    assert (
        said[result] == "topic orders: 200 source, 175 target records; 1 missing, 0 duplicated, "
        "0 unexpected, 24 in flight: INCOMPLETE"
    )
    assert at("reading source east") < at("starting Spark") < at("reading: ") < done[0] < done[1] < result

    rep = json.loads((tmp_path / "report" / "report.json").read_text())
    page = (tmp_path / "report" / "report.html").read_text()
    # Clusters by name, never by address.
    assert rep["clusters"]["source"]["name"] == "east" and rep["clusters"]["target"]["name"] == "dc2"
    assert "<h1>kmirror audit: east &rarr; dc2</h1>" in page
    assert src.bootstrap not in page and tgt.bootstrap not in page
    assert re.findall(r'<b class="cluster">(.*?)</b>', page) == ["east", "dc2"]

    # The one loss is a bar as tall as its panel, on the panel's own axis (top label 1), in its bucket.
    (svg,) = charts(page)
    bars = svg.findall(f".//{SVG}rect[@class='missing-count']")
    assert [b.get("data-count") for b in bars] == ["1"]
    bucket = next(g for g in svg.iter(f"{SVG}g") if g.find(f"{SVG}rect[@class='missing-count']") is not None)
    assert bucket.get("data-bucket") == iso_ms(dropped.timestamp - dropped.timestamp % (5 * MINUTE))
    assert float(bars[0].get("height")) >= 50  # the panel is 56 px high; 1/176 of it would be 0.3 px
    assert svg.find(f".//{SVG}text[@class='bad-max']").text == "1"
    # A labelled time axis: several ticks, left to right, each on a multiple of one step.
    ticks = svg.findall(f".//{SVG}text[@class='tick']")
    assert len(ticks) >= 4, [t.text for t in ticks]
    xs, ms = [float(t.get("x")) for t in ticks], [int(t.get("data-ms")) for t in ticks]
    assert xs == sorted(xs) and len(set(t.text for t in ticks)) == len(ticks)
    step = ms[1] - ms[0]
    assert all(m % step == 0 for m in ms) and all(b - a == step for a, b in itertools.pairwise(ms))
    assert ticks[0].text.endswith(
        time.strftime("%H:%M", time.gmtime(ms[0] / 1000))
    )  # with the date after midnight

    # The 24 in-flight records: one summary row (each is in report.json), not 24.
    assert len(rep["in_flight_records"]) == 24
    flight = re.search(r'<table class="in-flight">(.*?)</table>', page, re.S)[1]
    assert flight.count("<tr>") == 2 and "<td>24</td>" in flight
    assert '<td class="l">r0</td>' not in page  # no in-flight record listed one by one

    # What next: the source range to copy again, and where to look.
    assert rep["remirror"] == [
        {
            "topic": "orders",
            "partition": dropped.partition,
            "from_offset": dropped_offset,
            "to_offset": dropped_offset,
            "missing": 1,
            "first_timestamp": iso_ms(dropped.timestamp),
            "last_timestamp": iso_ms(dropped.timestamp),
        }
    ]
    nxt = re.search(r'<div class="next" id="what-next">(.*?)</div>', page, re.S)[1]
    assert (
        f"Re-mirror these ranges of source east: orders/{dropped.partition} offsets "
        f"{dropped_offset}-{dropped_offset} (1 missing)" in nxt
    )
    assert "kmirror@east" in nxt and "24 recent records are not on target dc2 yet" in nxt

    # Spark's own log when asked for: its INFO lines and the JVM's start-up notice come through.
    out = audit_cli([*args, "--spark.log.level", "info", "--output", str(tmp_path / "verbose")])
    assert out.returncode == 1, out.stdout + out.stderr
    assert re.search(r"^\d\d:\d\d:\d\d INFO SparkContext: Running Spark version", out.stderr, re.M), (
        out.stderr
    )
    assert "WARNING: Using incubator modules" in out.stderr
    assert "kmirror audit: reading target target topic orders" in out.stderr  # default name: 'target'


def iso_ms(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def test_a_source_gap_of_the_mirror_is_named_as_lost_before_mirroring_not_missing(kafka, tmp_path, workers):
    """A mirror run with --groups, stopped; more records; delete_records past its position on one partition;
    the mirror restarted meets the gap (its GAP line) and keeps it on the target. `kmirror audit` given the
    mirror's own files names the gap: partition, offsets, records, lost on the source before mirroring;
    none of them counts as missing on the target, and the audit fails (exit 1: the target lacks them)."""
    src, tgt = kafka["source"], kafka["target"]
    topic, group = "gapped", "kmirror-east"
    create_topic(src, topic, 2)
    conf = tmp_path / "etc" / "east"
    conf.mkdir(parents=True)
    args = run_args(
        consumer_file(conf, src, group),
        producer_file(conf, tgt),
        "--whitelist",
        topic,
        "--num.streams",
        "1",
        "--groups",
        "app-none",
    )
    produce(src, spread(topic, 2, 50))

    def mirrored(w: Worker, ends: dict[int, int]) -> None:  # generous: under load a start takes long
        try:
            wait_mirrored(src, group, topic, 2, ends, timeout=240)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the mirror's log:\n{w.log()[-6000:]}") from None

    w = Worker(tmp_path, args)
    workers.append(w)
    mirrored(w, {0: 50, 1: 50})
    assert w.stop() == 0, w.log()
    produce(src, spread(topic, 2, 50, start=50))
    admin = AdminClient({"bootstrap.servers": src.bootstrap})
    for f in admin.delete_records([TopicPartition(topic, 0, 80)]).values():
        f.result()  # offsets 50..79 of partition 0 are gone, never mirrored
    w = Worker(tmp_path, args)
    workers.append(w)
    w.wait_for(
        f"GAP in source cluster consumer topic {topic} partition 0: offsets 50..79 (30 records) purged", 240
    )
    mirrored(w, {0: 100, 1: 100})
    assert w.stop() == 0, w.log()

    # The records of the second half: the first half of partition 0 was purged on the source after it was
    # mirrored (the audit would rightly call those unexpected on the target).
    out = audit_cli(
        [
            "audit", "--source.config", str(conf / "consumer.properties"),
            "--target.config", str(conf / "producer.properties"), "--topics", topic,
            "--from", str(BASE_TS + 50_000), "--master", "local[2]", "--output", str(tmp_path / "audit"),
        ],
        runner=KMIRROR,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    assert (
        "kmirror audit: INCOMPLETE: 0 missing, 0 duplicated, 0 unexpected, 0 in flight, 30 lost on the "
        "source before mirroring (1 source gap(s)); 70 source and 70 target records in 1 topic(s)"
        in out.stdout
    ), out.stdout
    gap_lines = [line for line in out.stdout.splitlines() if "gap:" in line]
    assert len(gap_lines) == 1 and gap_lines[0].startswith(
        f"kmirror audit: gap: {topic}/0 offsets 50..79 (30 records) lost on the source before mirroring "
        "(purged before the mirror copied them; on neither cluster); met by the mirror at "
    ), out.stdout
    assert (
        f"kmirror audit: topic {topic}: 70 source, 70 target records; 0 missing, 0 duplicated, "
        "0 unexpected, 0 in flight, 30 lost on the source before mirroring: INCOMPLETE" in out.stderr
    ), out.stderr

    rep = json.loads((tmp_path / "audit" / "report.json").read_text())
    assert rep["source_gaps"] == {"mirror": group, "topic": "__kmirror-offset-syncs", "status": "read"}
    (gap,) = rep["gaps"]
    assert (gap["topic"], gap["partition"], gap["first"], gap["last"], gap["records"]) == (
        topic,
        0,
        50,
        79,
        30,
    )
    assert gap["lost"] is True and gap["kind"] == "lost" and gap["at"] == iso_ms(gap["ms"])
    t = rep["totals"]
    assert (t["missing"], t["lost_in_gaps"], t["source_records"], t["target_records"]) == (0, 30, 70, 70)
    assert (t["duplicated"], t["unexpected"], t["in_flight"]) == (0, 0, 0)
    assert rep["missing_records"] == [] and rep["remirror"] == []
    assert rep["next_steps"][0] == (
        "Lost on source east before the mirror copied them (source gaps, not missing on the target): "
        f"{topic}/0 offsets 50-79 (30 records, met at {gap['at']}). They are on neither cluster: nothing to "
        "re-mirror; produce them again upstream if you can, and find why the mirror fell behind retention "
        "(docs/runbooks/source-gap.md)."
    )
    page = (tmp_path / "audit" / "report.html").read_text()
    table = re.search(r'<table class="gaps">(.*?)</table>', page, re.S)[1]
    assert table.count("<tr>") == 2 and "<td>0</td><td>50</td><td>79</td><td>30</td>" in table
