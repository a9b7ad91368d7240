"""The audit bench's connector contender: the completeness check written the way a Spark user would, with
Spark's own Kafka connector (`spark.read.format("kafka")`, batch: startingOffsets earliest, endingOffsets
latest), on both clusters, with default Spark settings (`local[2]`, 1 GB driver as the audit's, no UI)
but 4 shuffle partitions instead of 200.

Same answer as `kmirror audit` (docs/health.md): a record's content is (topic, timestamp, key, value,
headers); the copies of each content are counted on both sides, grouped on the content itself (exact, no
hash); for a content with s source and t target copies: t < s -> s - t missing (the last source copies in
offset order), t > s > 0 -> t - s duplicated (the last target copies), s == 0 -> t unexpected; and per
topic and time bucket of the record timestamp the record counts of both sides. One Spark job; the
driver gets one row per bucket with the named records of its differing contents.

The jars (the connector, its token provider, kafka-clients, commons-pool2) come from Maven Central as
bench/poms/spark-sql-kafka.xml says, once, into ~/.cache/kmirror/spark-kafka-<hash>.

    python bench/spark_kafka.py jars                        # fetch; print the spark.jars value
    python bench/spark_kafka.py once SOURCE TARGET TOPIC    # fresh session, one audit, JSON on stdout
    python bench/spark_kafka.py serve SOURCE TARGET         # one session; a topic per stdin line -> JSON

Under spark-submit (a cluster that has the connector) the master and the jars are spark-submit's, and
kmirror need not be installed (docs/health.md, "The same check with Spark's Kafka connector"):

    spark-submit --master URL --packages org.apache.spark:spark-sql-kafka-0-10_2.13:VERSION \
        bench/spark_kafka.py once SOURCE_BOOTSTRAP TARGET_BOOTSTRAP TOPIC
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

POM = Path(__file__).with_name("poms") / "spark-sql-kafka.xml"
BUCKET_MS = 600_000
SHUFFLE_PARTITIONS = 4


def connector_jars() -> list[Path]:
    from kmirror.testing import jars

    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
    target = jars.cache_root().parent / f"spark-kafka-{digest}"
    lib = jars.copy_dependencies(POM, target, "Spark's Kafka connector")
    return sorted(lib.glob("*.jar"))


def session(master: str = "local[2]") -> Any:
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName("connector-audit")
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit (which owns master and jars)
        # The bench's local session; the connector's jars fetched by this file.
        b = b.master(master).config("spark.jars", ",".join(map(str, connector_jars())))
        b = b.config("spark.driver.memory", "1g").config("spark.ui.enabled", "false")
    spark = (
        b.config("spark.ui.showConsoleProgress", "false")
        # The one setting a Spark user changes for small data on a few cores: 200 shuffle partitions
        # (the default) cost a task each (measured once, 100,000 records a cluster, warm: 23 s; 2: 11-13 s).
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def audit(spark: Any, source: str, target: str, topic: str, bucket_ms: int = BUCKET_MS) -> dict[str, Any]:
    """The completeness check of `topic`: totals and per-bucket counts, as kmirror's report.json has them."""
    from pyspark.sql import functions as F

    def side(bootstrap: str, n: int) -> Any:
        return (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("includeHeaders", "true")
            .load()
            .select(
                "topic", "timestamp", "key", "value", "headers", "partition", "offset", F.lit(n).alias("side")
            )
        )

    at = F.struct("partition", "offset")
    contents = (
        side(source, 0)
        .unionByName(side(target, 1))
        .groupBy("topic", "timestamp", "key", "value", "headers")
        .agg(
            F.count_if(F.col("side") == 0).alias("s"),
            F.count_if(F.col("side") == 1).alias("t"),
            F.array_sort(F.collect_list(F.when(F.col("side") == 0, at))).alias("s_at"),
            F.array_sort(F.collect_list(F.when(F.col("side") == 1, at))).alias("t_at"),
        )
    )
    s, t = F.col("s"), F.col("t")
    missing = F.when(t < s, F.slice("s_at", t + 1, s - t))
    duplicated = F.when((t > s) & (s > 0), F.slice("t_at", s + 1, t - s))
    unexpected = F.when(s == 0, F.col("t_at"))
    ms = F.unix_millis("timestamp")
    per_bucket = (
        contents.select(
            "topic",
            (ms - ms % bucket_ms).alias("bucket"),
            "s",
            "t",
            F.coalesce(missing, F.array()).alias("missing"),
            F.coalesce(duplicated, F.array()).alias("duplicated"),
            F.coalesce(unexpected, F.array()).alias("unexpected"),
        )
        .groupBy("topic", "bucket")
        .agg(
            F.sum("s").alias("source_records"),
            F.sum("t").alias("target_records"),
            *(
                F.flatten(F.collect_list(name)).alias(name)
                for name in ("missing", "duplicated", "unexpected")
            ),
        )
    )
    buckets = []
    named: dict[str, list[tuple[int, int]]] = {"missing": [], "duplicated": [], "unexpected": []}
    for r in per_bucket.collect():
        row = {"topic": r["topic"], "start_ms": r["bucket"], "source_records": r["source_records"],
               "target_records": r["target_records"]}  # fmt: skip
        for name, found in named.items():
            row[name] = len(r[name])
            found += [(p, o) for p, o in r[name]]
        buckets.append(row)
    buckets.sort(key=lambda b: (b["topic"], b["start_ms"]))
    totals = {k: sum(b[k] for b in buckets) for k in ("source_records", "target_records", *named)}
    return {"totals": totals, "buckets": buckets, "named": {k: sorted(v) for k, v in named.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("jars")
    once = sub.add_parser("once")
    serve = sub.add_parser("serve")
    for p in (once, serve):
        p.add_argument("source")
        p.add_argument("target")
    once.add_argument("topic")
    a = ap.parse_args()
    if a.cmd == "jars":
        print(",".join(map(str, connector_jars())))
        return 0
    spark = session()
    try:
        topics = [a.topic] if a.cmd == "once" else (line.strip() for line in sys.stdin)
        for topic in topics:
            t0 = time.monotonic()
            out = audit(spark, a.source, a.target, topic)
            print(json.dumps({**out, "job_s": time.monotonic() - t0}), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
