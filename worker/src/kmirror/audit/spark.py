"""The Spark side of the audit: a session with modest settings and the one job that reads both clusters
once, hashes every record in the JVM and names the records whose copies differ."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kmirror.audit.diff import BucketRow, ContentGroup
from kmirror.audit.scope import SIDES, Span, split

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


# Up to this many differing contents are sent to every executor to find their copies; more (a target
# that lacks most of the source) are joined with a shuffle instead.
BROADCAST_MAX = 200_000


def under_spark_submit() -> bool:
    """Started by spark-submit (which owns the master and the driver's settings)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


class ClassArchive:
    """A class-data sharing archive of the classes Spark's driver JVM loads (Java 13+ dynamic CDS): the
    first command records it when its JVM exits (a few seconds, once), later ones map it instead of
    loading and verifying those classes again (measured here: a third less CPU for the session start).
    Kept in ~/.cache/kmirror (or $XDG_CACHE_HOME/kmirror), one per pyspark, Java and Python; the JVM
    itself ignores an archive that does not match its class path."""

    def __init__(self, path: Path, recording: Path | None) -> None:
        self.path, self.recording = path, recording

    @classmethod
    def find(cls) -> ClassArchive | None:
        import hashlib

        import pyspark

        java_home = os.environ.get("JAVA_HOME")
        java = shutil.which("java", path=os.path.join(java_home, "bin") if java_home else None)
        if not java:
            return None
        java = os.path.realpath(java)
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kmirror"
        ident = f"{pyspark.__file__}|{pyspark.__version__}|{java}|{os.stat(java).st_mtime_ns}|{sys.version}"
        path = base / f"spark-{pyspark.__version__}-{hashlib.sha256(ident.encode()).hexdigest()[:12]}.jsa"
        if path.is_file():
            return cls(path, None)
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError:
            return None
        return cls(path, path.with_name(f"{path.name}.{os.getpid()}.tmp"))

    def java_options(self) -> str:
        use = (
            f"-XX:ArchiveClassesAtExit={self.recording}"
            if self.recording
            else f"-XX:SharedArchiveFile={self.path}"
        )
        return f"{use} -Xlog:cds=off -Xlog:cds+dynamic=off"

    def finish(self) -> None:
        """After spark.stop(): when recording, end the JVM now and keep the archive it wrote."""
        if self.recording is None:
            return
        from pyspark import SparkContext

        proc = getattr(SparkContext._gateway, "proc", None)
        try:
            if proc is not None and proc.stdin is not None:
                proc.stdin.close()  # the gateway JVM exits at the end of its input, writing the archive
                proc.wait(timeout=120)
            if self.recording.is_file() and self.recording.stat().st_size:
                os.replace(self.recording, self.path)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            self.recording.unlink(missing_ok=True)


def session(
    master: str | None, conf: Mapping[str, str] | None = None, archive: ClassArchive | None = None
) -> SparkSession:
    """The audit's Spark session. Outside spark-submit: `master` (default local[*]), 1 GB driver, few
    shuffle partitions, no UI, the venv's Python for the workers, errors-only logging, and the class
    archive when given."""
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
        java = f"-Dlog4j2.configurationFile=file:{log4j}"
        b = b.config("spark.driver.extraJavaOptions", f"{java} {archive.java_options()}" if archive else java)
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
) -> DataFrame:
    from kmirror.audit.source import FORMAT

    options = {
        "spans": json.dumps([s.as_list() for s in spans]),
        "from_ms": "" if from_ms is None else str(from_ms),
        "to_ms": "" if to_ms is None else str(to_ms),
    }
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


def compare(
    spark: SparkSession,
    spans: Sequence[Span],
    settings: Sequence[Mapping[str, str]],
    *,
    from_ms: int | None,
    to_ms: int | None,
    bucket_ms: int,
    in_flight_from: int,
    range_size: int,
) -> tuple[list[BucketRow], list[ContentGroup]]:
    """Both clusters read once. Each record becomes (side, topic, partition, offset, timestamp, two
    64-bit content hashes, the key's first 81 bytes), kept in Spark's cache (memory, spilling to disk);
    the copies of each distinct (topic, timestamp, 128-bit hash) are counted per side in a hash
    aggregation; the driver gets the per-unit record counts and the contents whose copies differ; when
    there are any, the cached rows are joined with them for the partition and offset of every copy."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    df = read(spark, split(spans, range_size), settings, from_ms=from_ms, to_ms=to_ms)
    cols = _content_hash_inputs()
    hashed = df.select(
        "side",
        "topic",
        "partition",
        "offset",
        "timestamp",
        F.xxhash64(*cols).alias("h1"),
        F.xxhash64(F.lit(-1), *cols).alias("h2"),  # another seed: 128 bits together
        F.substring("key", 1, 81).alias("key"),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        different = F.col("s") != F.col("t")
        unit = (
            hashed.groupBy("topic", "timestamp", "h1", "h2")
            .agg(F.sum(1 - F.col("side")).alias("s"), F.sum("side").alias("t"))
            .select(
                "topic",
                (F.col("timestamp") - F.pmod("timestamp", F.lit(bucket_ms))).alias("bucket"),
                (F.col("timestamp") >= F.lit(in_flight_from)).alias("fly"),
                "s",
                "t",
                F.when(different, F.struct("timestamp", "h1", "h2")).alias("d"),
            )
            .groupBy("topic", "bucket", "fly", "d")
            .agg(F.sum("s").alias("s"), F.sum("t").alias("t"))
            .collect()
        )
        rows = [BucketRow(r.topic, r.bucket, r.fly, r.s, r.t, 0 if r.d is None else 1) for r in unit]
        keys = [(r.topic, r.d.timestamp, r.d.h1, r.d.h2) for r in unit if r.d is not None]
        if not keys:
            return rows, []
        wanted = spark.createDataFrame(keys, "topic string, timestamp bigint, h1 bigint, h2 bigint")
        if len(keys) <= BROADCAST_MAX:  # few differences (the usual case): no shuffle of the cache
            wanted = F.broadcast(wanted)
        found = (
            hashed.join(wanted, ["topic", "timestamp", "h1", "h2"])
            .select("topic", "timestamp", "h1", "h2", "key", "side", "partition", "offset")
            .collect()
        )
    finally:
        hashed.unpersist()
    by_content: dict[tuple[str, int, int, int], list[tuple[int, int, int]]] = {}
    key_of: dict[tuple[str, int, int, int], bytes | None] = {}
    for r in found:
        k = (r.topic, r.timestamp, r.h1, r.h2)
        by_content.setdefault(k, []).append((r.side, r.partition, r.offset))
        key_of[k] = None if r.key is None else bytes(r.key)
    groups = [ContentGroup(k[0], k[1], key_of[k], locs) for k, locs in by_content.items()]
    return rows, groups
