"""The Spark side of the audit: a session with modest settings, phase 1 (sums per bucket, hashed in the
JVM) and phase 2 (exact records of the differing buckets)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kmirror.audit.diff import BucketRow, ContentGroup
from kmirror.audit.plan import SIDES, Span, split

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def under_spark_submit() -> bool:
    """Started by spark-submit (which owns the master and the driver's settings)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def session(master: str | None, conf: Mapping[str, str] | None = None) -> SparkSession:
    """The audit's Spark session. Outside spark-submit: `master` (default local[*]), 1 GB driver, few
    shuffle partitions, no UI, the venv's Python for the workers, errors-only logging."""
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName("kmirror-audit")
    submitted = under_spark_submit()
    if master or not submitted:
        b = b.master(master or "local[*]")
    if not submitted:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        log4j = Path(tempfile.gettempdir()) / "kmirror-audit-log4j2.properties"
        if not log4j.exists():
            log4j.write_text(_LOG4J)
        b = b.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        b = b.config("spark.driver.memory", "1g").config("spark.ui.enabled", "false")
    if not submitted and (master or "local").startswith("local"):
        b = b.config("spark.sql.shuffle.partitions", "4")
    b = b.config("spark.ui.showConsoleProgress", "false")
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from kmirror.audit.source import KafkaRangeSource

    spark.dataSource.register(KafkaRangeSource)
    return spark


def read(
    spark: SparkSession,
    spans: Sequence[Span],
    settings: Sequence[Mapping[str, str]],
    *,
    from_ms: int | None,
    to_ms: int | None,
    bucket_ms: int,
    only: Mapping[str, Iterable[int]] | None = None,
) -> DataFrame:
    from kmirror.audit.source import FORMAT

    options = {
        "spans": json.dumps([s.as_list() for s in spans]),
        "from_ms": "" if from_ms is None else str(from_ms),
        "to_ms": "" if to_ms is None else str(to_ms),
        "bucket_ms": str(bucket_ms),
    }
    if only is not None:
        options["only"] = json.dumps({t: sorted(b) for t, b in only.items()})
    for side, name in enumerate(SIDES):
        options.update({f"{name}.{k}": v for k, v in settings[side].items()})
    return spark.read.format(FORMAT).options(**options).load()


def _content_hash_inputs() -> list[Column]:
    """The content (topic, timestamp, key, value, headers) as hash inputs. xxhash64 and hash skip NULLs,
    so every nullable field is preceded by its length (-1 for NULL): a NULL key and value X cannot hash
    like key X and a NULL value."""
    from pyspark.sql import functions as F

    def length(c: Column) -> Column:
        return F.coalesce(F.length(c), F.lit(-1))

    headers = F.transform("headers", lambda h: F.struct(h["key"], length(h["value"]).alias("n"), h["value"]))
    return [
        F.col("topic"),
        F.col("timestamp"),
        length(F.col("key")),
        F.col("key"),
        length(F.col("value")),
        F.col("value"),
        F.size("headers"),
        headers,
    ]


def bucket_sums(
    spark: SparkSession,
    spans: Sequence[Span],
    settings: Sequence[Mapping[str, str]],
    *,
    from_ms: int | None,
    to_ms: int | None,
    bucket_ms: int,
    in_flight_from: int,
    range_size: int,
) -> list[BucketRow]:
    """Phase 1: per side, topic, partition, bucket and in-flight flag: count, two checksums (sums of
    xxhash64 and murmur3 of the content as decimal(38,0): no overflow under ANSI mode), offset range."""
    from pyspark.sql import functions as F

    df = read(spark, split(spans, range_size), settings, from_ms=from_ms, to_ms=to_ms, bucket_ms=bucket_ms)
    cols = _content_hash_inputs()
    rows = (
        df.select(
            "side",
            "topic",
            "partition",
            "offset",
            (F.col("timestamp") - F.pmod("timestamp", F.lit(bucket_ms))).alias("bucket"),
            (F.col("timestamp") >= F.lit(in_flight_from)).alias("fly"),
            F.xxhash64(*cols).cast("decimal(38,0)").alias("h1"),
            F.hash(*cols).cast("decimal(38,0)").alias("h2"),
        )
        .groupBy("side", "topic", "partition", "bucket", "fly")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum("h1").alias("c1"),
            F.sum("h2").alias("c2"),
            F.min("offset").alias("lo"),
            F.max("offset").alias("hi"),
        )
        .collect()
    )
    return [
        BucketRow(r.side, r.topic, r.partition, r.bucket, r.fly, r.n, int(r.c1), int(r.c2), r.lo, r.hi)
        for r in rows
    ]


def content_groups(
    spark: SparkSession,
    spans: Sequence[Span],
    settings: Sequence[Mapping[str, str]],
    *,
    from_ms: int | None,
    to_ms: int | None,
    bucket_ms: int,
    only: Mapping[str, Iterable[int]],
    range_size: int,
) -> list[ContentGroup]:
    """Phase 2: the contents of the given buckets whose copies differ in number between the sides, with
    the partition and offset of every copy. Grouped on the full content, not on a hash."""
    from pyspark.sql import functions as F

    df = read(
        spark,
        split(spans, range_size),
        settings,
        from_ms=from_ms,
        to_ms=to_ms,
        bucket_ms=bucket_ms,
        only=only,
    )
    rows = (
        df.groupBy("topic", "timestamp", "key", "value", "headers")
        .agg(
            F.sum((F.col("side") == 0).cast("long")).alias("s"),
            F.sum((F.col("side") == 1).cast("long")).alias("t"),
            F.collect_list(F.struct("side", "partition", "offset")).alias("locs"),
        )
        .where(F.col("s") != F.col("t"))
        .select("topic", "timestamp", F.substring("key", 1, 81).alias("key"), "locs")
        .collect()
    )
    return [
        ContentGroup(
            r.topic,
            r.timestamp,
            None if r.key is None else bytes(r.key),
            [(x.side, x.partition, x.offset) for x in r.locs],
        )
        for r in rows
    ]
