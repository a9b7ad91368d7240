"""The running worker's Prometheus metrics and stats lines, scraped from a real `kmirror run`."""

from __future__ import annotations

import re
from pathlib import Path

import mirror_harness as mh

from kmirror.testing.embedded import free_port

HEALTH_MD = Path(__file__).resolve().parents[3] / "docs/health.md"


def total(samples: dict, name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


def test_metrics_count_what_was_mirrored(kafka, tmp_path, workers):
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, "metered", 4)
    records = mh.make_records("metered", 4, 250)
    mh.produce(src, records)
    port = free_port()
    w = mh.mirror_worker(
        tmp_path, src, tgt, "metered", 2, "--metrics.port", str(port), "--offset.commit.interval.ms", "1000"
    )
    workers.append(w)
    w.wait_for("metrics on http://")

    def caught_up() -> bool:
        s = mh.scrape(port)
        return total(s, "kmirror_records_out_total") == len(records) and total(
            s, "kmirror_records_in_total"
        ) == len(records)

    mh.wait_until(caught_up, timeout=60, what="records_in and records_out reaching every record")

    # Both streams report, also one that got its partitions only after the other had read everything
    # (cooperative rebalancing on Kafka can give the first stream all partitions, then move half).
    def streams() -> set[str]:
        samples = mh.scrape(port)
        return {dict(labels)["stream"] for (name, labels) in samples if name == "kmirror_records_in_total"}

    mh.wait_until(lambda: streams() == {"0", "1"}, timeout=30, what="both streams' metrics")
    s = mh.scrape(port)
    # Every record is committed (at a commit interval or a revocation), and the commits are counted; a stream
    # that got its partitions after the other had read everything has nothing to commit.
    mh.wait_until(
        lambda: mh.committed(src, "mirror", "metered", 4) == dict.fromkeys(range(4), 250),
        timeout=30,
        what="offsets committed to the end",
    )
    mh.wait_until(
        lambda: total(mh.scrape(port), "kmirror_commits_total") >= 1, timeout=30, what="commits counted"
    )
    assert total(s, "kmirror_send_errors_total") == 0
    # Observed once per batch read; on Kafka one stream may read all 1000 records in a single batch.
    assert total(s, "kmirror_replication_latency_seconds_count") >= 1
    # librdkafka's statistics arrive every 5 s: bytes and per-partition lag of every partition.
    mh.wait_until(lambda: total(mh.scrape(port), "kmirror_bytes_in_total") > 0, timeout=30, what="bytes_in")
    mh.wait_until(
        lambda: len([k for k in mh.scrape(port) if k[0] == "kmirror_partition_lag"]) == 4,
        timeout=30,
        what="lag of the 4 partitions",
    )
    assert total(mh.scrape(port), "kmirror_partition_lag") == 0
    value_bytes = sum(len(r.value) for r in records)
    mh.wait_until(
        lambda: total(mh.scrape(port), "kmirror_bytes_out_total") >= value_bytes,
        timeout=30,
        what="bytes_out covering every value sent",
    )
    # Every --stats.interval.ms (2 s here: run_args) each stream logs a stats line.
    mh.wait_until(
        lambda: {m.group(1) for m in re.finditer(r"#(\d+): stats ", w.log())} == {"0", "1"},
        timeout=30,
        what="a stats line of each stream",
    )
    assert w.stop() == 0
    # Each stream's stats line is the one docs/health.md shows (the unit test
    # mirror/test_metrics_stats_line.py checks the formatter against the same pattern).
    documented = re.findall(r"`([^`]*: stats [^`]*)`", HEALTH_MD.read_text(encoding="utf-8"))
    assert len(documented) == 1, documented
    values = {"<source>": r"[A-Za-z0-9_.-]+", "<stream>": r"\d+", "...": r"\d+"}
    parts = re.split(r"(<source>|<stream>|\.\.\.)", documented[0])
    pattern = re.compile("".join(values.get(p, re.escape(p)) for p in parts) + "$")
    stats = [line for line in w.log().splitlines() if ": stats " in line]
    assert stats and all(pattern.search(line) for line in stats), (stats, documented)
