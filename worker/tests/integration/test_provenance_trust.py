"""Issue 34, item 1: a hostile producer on the source writes records with forged ``kmirror.origin`` headers.

Anyone who may write to a source topic can put that header on a record. kmirror honours it only when it
is a well-formed claim of a peer (by default the target, whose reverse mirror is the one writer of copies
into the source) on the record's own topic; every other header is replaced by kmirror's own stamp and the
record copied (docs/security.md). On real Apache Kafka clusters:

1. forged headers (the target on another topic, the source itself, an unknown cluster, malformed) do not
   make a record skipped: each is on the target, stamped with its true origin, and counted;
2. ``kmirror failover`` with the source gone and a forged copy at the translation point (mirrored by the
   hostile producer's header, and one planted on the target directly) lands the group on the copy of
   its own record, not the log end;
3. ``kmirror failback`` with a record naming the old primary planted on the old primary before the cut
   and one on the new primary after it still names (and quarantines) the whole unmirrored tail.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from confluent_kafka.admin import AdminClient
from mirror_harness import (
    Rec,
    Worker,
    commit_offsets,
    committed,
    create_topic,
    make_records,
    mirror_worker,
    produce,
    read_all,
    wait_until,
)
from test_failback import failback
from test_failover import checkpoints, failover, kill_source

from kmirror.failover.failback import QUARANTINE_HEADER
from kmirror.lineage.provenance import HEADER, Origin, origin_of
from kmirror.testing.kafka import KafkaCluster

TOPIC = "orders"


def cluster_id(cluster: KafkaCluster) -> str:
    return str(AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=30).cluster_id)


def forged(record: Rec, value: bytes) -> Rec:
    """The record as a hostile producer writes it: with its own kmirror.origin header."""
    return replace(record, headers=(*record.headers, (HEADER, value)))


def create(cluster: KafkaCluster) -> None:
    create_topic(cluster, TOPIC, 1)


def test_forged_headers_never_make_a_record_skipped(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[Worker]
) -> None:
    src, tgt = kafka["source"], kafka["target"]
    create(src)
    src_id, tgt_id = cluster_id(src), cluster_id(tgt)
    records = make_records(TOPIC, 1, 20)
    claims = {
        5: b"%s/0/3/other-topic" % tgt_id.encode(),  # the target's, another topic: a forwarded header
        8: b"%s/0/123456/%s" % (src_id.encode(), TOPIC.encode()),  # the source itself
        11: b"attacker/0/10500/%s" % TOPIC.encode(),  # an unknown cluster
        14: b"%s" % tgt_id.encode(),  # malformed
    }
    for i, value in claims.items():
        records[i] = forged(records[i], value)
    produce(src, records)
    w = mirror_worker(tmp_path, src, tgt, TOPIC, 1, "--provenance.header.enable", "true")
    workers.append(w)
    wait_until(lambda: committed(src, "mirror", TOPIC, 1) == {0: 20}, 120, "the source mirrored")
    got = read_all(tgt, [TOPIC], len(records), timeout=60)
    assert [r.value for r in got] == [r.value for r in records], "a record was skipped"
    for offset, r in enumerate(got):  # every copy names its true origin, once
        assert [v for n, v in r.headers if n == HEADER] == [
            b"%s/0/%d/%s" % (src_id.encode(), offset, b"orders")
        ]
        assert origin_of(list(r.headers)) == Origin(src_id, TOPIC, 0, offset)
    assert w.stop() == 0
    stats = re.findall(r"skipped_origin=(\d+) distrusted_origin=(\d+)", w.log())
    assert stats and stats[-1] == ("0", str(len(claims))), w.log()[-2000:]
    assert "carried a kmirror.origin header that is not honoured" in w.log()


def test_failover_with_the_source_gone_ignores_forged_copies(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[Worker]
) -> None:
    """The issue's case: one forged record at the translation point moved a group to the log end."""
    src, tgt = kafka["source"], kafka["target"]
    create(src)
    groups = (
        "--provenance.header.enable",
        "true",
        "--groups",
        "app",
        "--sync.group.offsets.interval.ms",
        "300",
    )
    first = make_records(TOPIC, 1, 500)
    produce(src, first)
    w = mirror_worker(tmp_path, src, tgt, TOPIC, 1, *groups)
    workers.append(w)
    wait_until(lambda: committed(src, "mirror", TOPIC, 1) == {0: 500}, 120, "the first 500 mirrored")
    assert w.stop() == 0  # its last sync point: source 500 -> target 500
    # While the mirror is stopped: one copy planted on the target directly, naming another cluster...
    produce(
        tgt,
        [
            forged(
                replace(make_records(TOPIC, 1, 1)[0], value=b"planted"),
                b"attacker/0/0/%s" % TOPIC.encode(),
            )
        ],
    )
    # ...and the hostile producer's record on the source, at the translation point, then 10,000 more.
    rest = make_records(TOPIC, 1, 10_000, start=501)
    produce(src, [forged(make_records(TOPIC, 1, 1, start=500)[0], b"attacker/0/0/orders"), *rest])
    commit_offsets(src, "app", {(TOPIC, 0): 510})
    w = mirror_worker(tmp_path, src, tgt, TOPIC, 1, *groups)  # another run: no exact interpolation
    workers.append(w)
    wait_until(lambda: committed(src, "mirror", TOPIC, 1) == {0: 10_501}, 180, "everything mirrored")
    wait_until(lambda: checkpoints(tgt, "mirror", "app") == {(TOPIC, 0): 510}, 60, "app's checkpoint")
    kill_source(src)
    w.kill9()
    on_target = [r.value for r in read_all(tgt, [TOPIC], 10_502, timeout=60)]
    want = on_target.index(b"orders:0:510")  # the copy of the group's next record
    out = failover(tmp_path, "app", "--json", "--apply")
    assert out.returncode == 0, out.stdout + out.stderr
    plan = json.loads(out.stdout)
    assert plan["source"] == "unreachable", plan
    [row] = plan["partitions"]
    assert want == 511  # after the planted record
    assert (row["translated"], row["by_header"], row["log_end"]) == (want, True, 10_502), row


def test_failback_finds_the_tail_despite_planted_headers(
    tmp_path: Path, kafka: dict[str, KafkaCluster], workers: list[Worker]
) -> None:
    east, west = kafka["source"], kafka["target"]
    create(east)
    east_id = cluster_id(east).encode()
    mirrored, tail, new = 300, 50, 40
    records = make_records(TOPIC, 1, mirrored)
    records[150] = forged(records[150], b"%s/0/999999/orders" % east_id)  # "everything is copied"
    produce(east, records)
    w = mirror_worker(tmp_path, east, west, TOPIC, 1, "--provenance.header.enable", "true")
    workers.append(w)
    wait_until(lambda: len(read_all(west, [TOPIC], 0, timeout=20)) >= mirrored, 120, "mirrored")
    w.kill9()  # east is lost
    produce(east, make_records(TOPIC, 1, tail, start=mirrored))  # the tail: never copied
    # After the failover the applications, and the hostile producer, write on west; it claims the tail.
    planted = forged(
        make_records(TOPIC, 1, 1, start=10_000)[0], b"%s/0/%d/orders" % (east_id, mirrored + tail - 1)
    )
    writes = [replace(r, value=b"west:%d" % i) for i, r in enumerate(make_records(TOPIC, 1, new))]
    produce(west, [*writes, planted])
    (tmp_path / "east").mkdir()
    for name in ("consumer.properties", "producer.properties"):
        (tmp_path / "east" / name).write_text((tmp_path / name).read_text())
    out = failback(tmp_path, "--json")
    assert out.returncode == 1, out.stdout + out.stderr  # a tail exists
    [p] = json.loads(out.stdout)["partitions"]
    assert (p["copied_through"], p["old_end"], p["tail_records"]) == (mirrored - 1, mirrored + tail, tail), p
    assert (p["last_copy_at"], p["new_records"]) == (mirrored - 1, new + 1), p
    # Planted in the quarantine topic before the first --quarantine: as many records as the tail, one with
    # a quarantine header naming a tail record but another value. The count decided "copied" before.
    quarantine = f"{TOPIC}.failback-tail"
    create_topic(east, quarantine, 1)
    junk = [
        replace(r, topic=quarantine, value=b"junk:%d" % i) for i, r in enumerate(make_records(TOPIC, 1, tail))
    ]
    junk[0] = replace(junk[0], headers=((QUARANTINE_HEADER, b"%s/0/%d" % (TOPIC.encode(), mirrored)),))
    produce(east, junk)
    for _ in range(2):  # the second run copies nothing more
        out = failback(tmp_path, "--quarantine")
        assert out.returncode == 1, out.stdout + out.stderr
        quarantined = [r.value for r in read_all(east, [quarantine], 2 * tail, timeout=60)]
        assert quarantined[tail:] == [b"orders:0:%d" % i for i in range(mirrored, mirrored + tail)]
