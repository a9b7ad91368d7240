"""The Spark side of the audit: a session with modest settings and the one job that reads both clusters
once, digests every record in the reading tasks and names the records whose copies differ."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from kmirror.audit.diff import BucketRow, ContentGroup
from kmirror.audit.scope import SIDES, SOURCE, Span, bucket_of, tasks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LOG_LEVELS = ("off", "error", "warn", "info", "debug")
# Spark's own log, quiet by default: the audit says what it does itself (kmirror.audit.progress) and an
# error reaches the operator as its one line. The gateway's logger is named because Spark sets the root
# level of an "interpreter" (PySpark's driver) to WARN, printing "Setting default log level", unless
# that logger has a level of its own.
_LOG4J_TEMPLATE = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = {level}
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n
"""
_LOG4J = _LOG4J_TEMPLATE.format(level="off")
# What the driver JVM prints on stderr besides its log, at every start, and the audit drops unless Spark's
# log was asked for: Spark's launcher always adds the incubating vector module (JavaModuleOptions), and
# the JVM announces it.
_JVM_NOISE = ("WARNING: Using incubator modules:",)


# Records (digests, ~50 B each with a short key) per matching task at most: the memory of one task.
RECORDS_PER_MATCH = 2_000_000


def log4j_file(level: str = "off") -> Path:
    """The driver JVM's log4j2 configuration: a new file of this process, private to its user (mode 0600,
    created exclusively under a random name by mkstemp, removed at exit). Never a file at a known path in
    the shared temporary directory, which another local user could have put there with appenders of
    their own."""
    fd, name = tempfile.mkstemp(prefix="kmirror-audit-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(_LOG4J_TEMPLATE.format(level=level))
    atexit.register(Path(name).unlink, missing_ok=True)
    return Path(name)


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
    master: str | None,
    conf: Mapping[str, str] | None = None,
    archive: ClassArchive | None = None,
    log_level: str = "off",
) -> SparkSession:
    """The audit's Spark session. Outside spark-submit: `master` (default local[*]), 1 GB driver, no UI,
    the venv's Python for the workers, Spark's log at `log_level` (default off), the JVM's start-up notice
    dropped unless the log was asked for, and the class archive when given."""
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName("kmirror-audit")
    submitted = under_spark_submit()
    if master or not submitted:
        b = b.master(master or "local[*]")
    if not submitted:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        log4j = log4j_file(log_level)
        # C1 only: the JVM moves packed rows and plans one job; full (C2) compilation of Spark's code
        # cost seconds of CPU at every start (measured: the command 3-4 s faster cold, the job no slower).
        java = f"-Dlog4j2.configurationFile=file:{log4j} -XX:TieredStopAtLevel=1"
        b = b.config("spark.driver.extraJavaOptions", f"{java} {archive.java_options()}" if archive else java)
        b = b.config("spark.driver.memory", "1g").config("spark.ui.enabled", "false")
    b = b.config("spark.ui.showConsoleProgress", "false")
    b = b.config("spark.python.daemon.module", "kmirror.audit.daemon")
    # Spark moves a few hundred packed rows of digests (random bytes: compressing them is wasted CPU)
    # and evaluates a few rows per range: compiling generated code costs more than it saves.
    b = b.config("spark.shuffle.compress", "false").config("spark.sql.codegen.wholeStage", "false")
    # The matching tasks get their rows in Arrow batches of ~4 MB instead of one batch of all of them
    # (tens of MB grown by copying; measured: the matching stage a quarter faster, the JVM's CPU lower).
    b = b.config("spark.sql.execution.arrow.maxBytesPerBatch", str(4 << 20))
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    if not submitted:
        _launch_gateway(b._options, drop=() if log_level != "off" else _JVM_NOISE)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel(log_level.upper())
    _quiet_py4j(log_level)
    from kmirror.audit.source import KafkaRangeSource

    spark.dataSource.register(KafkaRangeSource)
    return spark


def _launch_gateway(options: Mapping[str, object], drop: Sequence[str]) -> None:
    """Starts the driver JVM as pyspark would for these session options, with its stderr through a pipe
    that a thread copies to ours, leaving out the lines that start with one of `drop`. Nothing to do when
    a JVM is already running (an earlier session of this process)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False)
    for k, v in options.items():
        conf.set(k, str(v))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    proc = gateway.proc
    threading.Thread(target=_copy_stderr, args=(proc.stderr, drop), name="spark-stderr", daemon=True).start()
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm


def _copy_stderr(pipe: IO[bytes], drop: Sequence[str]) -> None:
    """Copies the JVM's stderr to this process's (file descriptor 2), line by line, until the JVM ends.
    It never stops reading while the JVM runs: a full pipe would block the JVM's next write."""
    prefixes = tuple(d.encode() for d in drop)
    for line in iter(pipe.readline, b""):
        if prefixes and line.startswith(prefixes):
            continue
        with contextlib.suppress(OSError):
            os.write(2, line)


def _quiet_py4j(log_level: str) -> None:
    """py4j's own Python log (connections opened and closed) follows Spark's level."""
    import logging

    levels = {"off": logging.CRITICAL + 1, "error": logging.ERROR, "warn": logging.WARNING}
    logging.getLogger("py4j").setLevel(levels.get(log_level, logging.getLevelName(log_level.upper())))


def read(
    spark: SparkSession,
    reading: Sequence[Sequence[Span]],
    settings: Sequence[Mapping[str, str]],
    **options: object,
) -> DataFrame:
    """The (r, blob) rows of the Data Source (:mod:`kmirror.audit.source`): one Spark partition per
    reading task, each the spans of one cluster."""
    from kmirror.audit.source import FORMAT

    opts = {k: "" if v is None else v if isinstance(v, str) else json.dumps(v) for k, v in options.items()}
    opts["tasks"] = json.dumps([[s.as_list() for s in task] for task in reading])
    for side, name in enumerate(SIDES):
        opts.update({f"{name}.{k}": v for k, v in settings[side].items()})
    return spark.read.format(FORMAT).options(**opts).load()


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
    provenance: str | None = None,
    read_as: Mapping[str, str] | None = None,
) -> tuple[list[BucketRow], list[ContentGroup]]:
    """Both clusters read once, in one Spark job of two stages. Reading tasks (offset ranges of one
    cluster, at most `range_size` offsets, about two per core) digest every record and cut the digests
    into `reducers` shares by digest; Spark brings share i of every range to matching task i
    (:func:`kmirror.audit.match.match`), which returns the records of the contents whose copies
    differ; the record counts per time bucket come back beside them."""
    from pyspark.sql import functions as F

    from kmirror.audit.match import RECORD, SCHEMA, match

    topics = sorted({s.topic for s in spans})
    total = sum(s.size for s in spans)
    cores = spark.sparkContext.defaultParallelism
    reducers = max(cores, -(-total // RECORDS_PER_MATCH))
    df = read(
        spark,
        tasks(spans, range_size, cores),
        settings,
        topics=topics,
        from_ms=from_ms,
        to_ms=to_ms,
        bucket_ms=bucket_ms,
        in_flight_from=in_flight_from,
        reducers=reducers,
        provenance=provenance,
        read_as=dict(read_as or {}),
    )
    # Matching task i gets exactly the rows of r = i (and some counts rows, r = -1): placed by value, not
    # by hash (two r of a hash partitioning may share a task), no sort and no coalescing of the shuffle.
    out = df.repartitionById(reducers, F.pmod("r", F.lit(reducers))).mapInArrow(match, SCHEMA).toArrow()
    c = {name: out.column(name).to_pylist() for name in out.column_names}
    rows: list[BucketRow] = []
    by_content: dict[tuple[str, int, int, int], list[tuple[int, int, int]]] = {}
    key_of: dict[tuple[str, int, int, int], bytes | None] = {}
    for i, kind in enumerate(c["kind"]):
        topic = topics[c["topic"][i]]
        if kind == RECORD:
            k = (topic, c["timestamp"][i], c["h1"][i], c["h2"][i])
            by_content.setdefault(k, []).append((c["side"][i], c["partition"][i], c["offset"][i]))
            key_of[k] = c["key"][i]
        else:
            records = c["records"][i]
            source, target = (records, 0) if c["side"][i] == SOURCE else (0, records)
            rows.append(BucketRow(topic, c["bucket"][i], c["in_flight"][i], source, target))
    groups = []
    for k, locations in by_content.items():
        topic, ts = k[0], k[1]
        rows.append(BucketRow(topic, bucket_of(ts, bucket_ms), ts >= in_flight_from, 0, 0, 1))
        groups.append(ContentGroup(topic, ts, key_of[k], locations))
    return rows, groups
