"""kmirror audit: prove with a Spark job that the target holds every source record, exactly once.

    kmirror audit --source.config FILE --target.config FILE --topics REGEX [--from TIME] [--to TIME]
                  [--bucket 10m] [--grace 5m] --output DIR [--master URL] [--exclude REGEX]
                  [--source.name NAME] [--target.name NAME] [--spark.log.level LEVEL]

Both clusters are read once, in parallel, inside Spark executors (confluent-kafka, one Spark partition
per offset range). Every record's content (topic, key, value, headers, timestamp) is hashed into 128
bits and the copies of each content are counted on both sides: missing (in the source, not in the
target), duplicated (extra copies in the target), unexpected (in the target, not in the source), each
named by partition and offset, and the record counts per topic and time bucket of the record timestamp.
Records newer than now - grace are in flight, not missing. Ranges the mirror could not copy because the
source no longer had them (source gaps, recorded on the target by `kmirror run --groups` under the
group.id of --source.config) are named as such: records lost on the source before mirroring, not missing.
Writes DIR/report.json and DIR/report.html.
While it runs, progress lines on stderr (clusters and topics planned, Spark's reading and matching tasks
done, each topic's result); Spark's own log stays off unless --spark.log.level asks for it.
The properties files are read as `kmirror run` reads them (Java and legacy keys, SASL, TLS).

Exit codes: 0 complete, 1 records missing, duplicated or lost in a source gap, 2 error (one line on stderr).

Also runs as `python -m kmirror.audit ...` and under spark-submit (the master and the driver's
settings then come from spark-submit):
    spark-submit --master URL "$(python -c 'import kmirror.audit.job as j; print(j.__file__)')" ...
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # run as a script (spark-submit): its directory must not shadow modules
    import os

    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

import argparse
import contextlib
import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from kmirror.audit import diff, gaps, report
from kmirror.audit.gaps import SourceGaps
from kmirror.audit.kafka import AuditError, plan_cluster
from kmirror.audit.progress import Progress
from kmirror.audit.scope import SOURCE, TARGET, Span, output_dir, parse_duration, parse_time
from kmirror.audit.spark import LOG_LEVELS
from kmirror.commandline import Parser, add_command, add_file_option, run_alone, seconds
from kmirror.config.filters import TopicFilter
from kmirror.errors import Command, KmirrorError
from kmirror.lineage.rename import Rename, rename

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_RANGE_SIZE = 1_000_000


@dataclass
class AuditOptions:
    source: Mapping[str, str]
    target: Mapping[str, str]
    topics: str
    exclude: str | None = None
    from_ms: int | None = None
    to_ms: int | None = None
    bucket_ms: int = 600_000
    grace_ms: int = 300_000
    max_skew_ms: int = 900_000
    now_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    range_size: int = DEFAULT_RANGE_SIZE
    max_listed: int = 1_000_000
    timeout: float = 30.0
    source_name: str = "source"
    target_name: str = "target"
    mirror: str | None = None  # the mirror's group (group.id of --source.config): its gaps on the target
    provenance: bool = False  # --provenance: the mirror stamps its copies (kmirror.audit.provenance)
    rename_format: str | None = None  # --topic.rename.format: the target's topics are renamed copies


@dataclass
class Plan:
    """The offset ranges to read on both clusters, and how long finding them took."""

    spans: list[Span]
    seconds: float
    gaps: SourceGaps = field(default_factory=lambda: SourceGaps(None))
    target_id: str | None = None  # --provenance: the target's cluster id
    read_as: dict[str, str] = field(default_factory=dict)  # --topic.rename.format: source -> target name


def plan(o: AuditOptions) -> Plan:
    """Which offsets to read (driver only, no Spark): the source first, then the target, so that the
    target's snapshot holds whatever of the source's the mirror has already copied."""
    t0 = time.monotonic()
    topics = TopicFilter(include=o.topics, exclude=o.exclude)
    kw = {"from_ms": o.from_ms, "max_skew_ms": o.max_skew_ms, "timeout": o.timeout}
    src = plan_cluster(SOURCE, o.source, topics, name="source", **kw)  # type: ignore[arg-type]
    names = rename(o.rename_format, o.source_name)
    copies = RenamedCopies(topics, names) if not names.identity else topics
    tgt = plan_cluster(TARGET, o.target, copies, name="target", **kw)  # type: ignore[arg-type]
    if not names.identity:  # the copies' spans under their source topic's name, compared with it
        tgt = [replace(s, topic=names.source_topic(s.topic) or s.topic) for s in tgt]
    if not src and not tgt:
        raise AuditError(
            f"nothing to audit: no non-empty topic matches {topics.describe()} on either cluster"
        )
    found = gaps.read(o.target, o.mirror, topics, o.from_ms, o.timeout)
    target_id = cluster_id(o.target, o.timeout) if o.provenance else None
    read_as = {} if names.identity else {s.topic: names(s.topic) for s in tgt}
    return Plan(src + tgt, time.monotonic() - t0, found, target_id, read_as)


def run(
    spark: SparkSession,
    o: AuditOptions,
    planned: Plan | None = None,
    spark_start_s: float | None = None,
    progress: Progress | None = None,
) -> dict[str, object]:
    """Plan (unless given), compare, and build the report (a dict, as written to report.json); with
    `progress`, Spark's stages as they go and each topic's result."""
    from kmirror.audit import spark as sp

    planned = planned or plan(o)
    spans = planned.spans
    t1 = time.monotonic()
    in_flight_from = o.now_ms - o.grace_ms
    with progress.stages(spark) if progress else contextlib.nullcontext():
        rows, groups = sp.compare(
            spark,
            spans,
            [o.source, o.target],
            from_ms=o.from_ms,
            to_ms=o.to_ms,
            bucket_ms=o.bucket_ms,
            in_flight_from=in_flight_from,
            range_size=o.range_size,
            provenance=planned.target_id,
            read_as=planned.read_as,
        )
    phase1 = diff.compare_sums(rows)
    differences = diff.classify(groups, o.bucket_ms, in_flight_from)
    t2 = time.monotonic()
    ctx = report.Context(
        source=o.source.get("bootstrap.servers", ""),
        target=o.target.get("bootstrap.servers", ""),
        source_name=o.source_name,
        target_name=o.target_name,
        topics_regex=o.topics,
        exclude_regex=o.exclude,
        from_ms=o.from_ms,
        to_ms=o.to_ms,
        bucket_ms=o.bucket_ms,
        grace_ms=o.grace_ms,
        now_ms=o.now_ms,
        spans=spans,
        timings={
            "plan": planned.seconds,
            **({} if spark_start_s is None else {"spark_start": spark_start_s}),
            "compare": t2 - t1,
        },
        spark={"version": str(spark.version), "master": str(spark.sparkContext.master)},
        max_listed=o.max_listed,
        source_gaps=planned.gaps,
    )
    rep = report.build(ctx, phase1, differences)
    if progress:
        progress.topics(rep)
    return rep


def write(rep: Mapping[str, object], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    j, h = out / "report.json", out / "report.html"
    j.write_text(json.dumps(rep, indent=1) + "\n")
    h.write_text(report.render_html(rep))
    return j, h


# ---------------------------------------------------------------------------------------------- CLI


def register(subparsers: argparse._SubParsersAction[Parser]) -> argparse.ArgumentParser:
    """Add `audit` to kmirror's sub-commands."""
    p = add_command(
        subparsers,
        "audit",
        help="prove the target holds every source record exactly once (a Spark job)",
        description=__doc__,
    )
    add_file_option(
        p,
        "--source.config",
        "properties of the source cluster (the mirror's consumer file works: its group.id names the mirror "
        "whose source gaps are read from the target's sync topic)",
    )
    add_file_option(
        p, "--target.config", "properties of the target cluster (the mirror's producer file works)"
    )
    p.add_argument(
        "--topics",
        required=True,
        metavar="REGEX",
        help="Java regex of the topics, matched against the whole name; ',' means '|' "
        "(the filter of `kmirror run --whitelist`)",
    )
    p.add_argument(
        "--exclude",
        "--blacklist",
        dest="exclude",
        metavar="REGEX",
        help="Java regex of topics to leave out (the filter of `kmirror run --blacklist`)",
    )
    p.add_argument(
        "--from",
        dest="from_",
        metavar="TIME",
        help="only records with a timestamp at or after TIME: epoch ms, ISO 8601 (UTC when no "
        "zone), 'now' or relative like -2h",
    )
    p.add_argument("--to", metavar="TIME", help="only records with a timestamp before TIME")
    p.add_argument("--bucket", default="10m", metavar="DURATION", help="time bucket (default 10m)")
    p.add_argument(
        "--grace",
        default="5m",
        metavar="DURATION",
        help="records newer than now - grace are in flight, not missing (default 5m)",
    )
    p.add_argument(
        "--output",
        required=True,
        metavar="DIR",
        help="where report.json and report.html go; strftime fields (%%Y-%%m-%%dT%%H%%M) are "
        "filled with the UTC time",
    )
    p.add_argument("--master", metavar="URL", help="Spark master (default local[*], or spark-submit's own)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting")
    p.add_argument(
        "--max-skew",
        default="15m",
        metavar="DURATION",
        help="with --from: start reading at the first offset whose timestamp is at least "
        "from - max-skew (records can be out of timestamp order; default 15m)",
    )
    p.add_argument(
        "--range-size",
        type=int,
        default=DEFAULT_RANGE_SIZE,
        metavar="N",
        help="offsets read by one Spark task at most (tasks are also cut to about two per core; "
        f"default {DEFAULT_RANGE_SIZE})",
    )
    p.add_argument(
        "--max-listed",
        type=int,
        default=1_000_000,
        metavar="N",
        help="records listed per kind in report.json (default 1000000)",
    )
    p.add_argument("--timeout", type=seconds(), default=30.0, metavar="S", help="broker request timeout")
    p.add_argument(
        "--source.name",
        dest="source_name",
        metavar="NAME",
        help="the source cluster's name in the report and progress lines (default: the source file's "
        "name without .properties; for consumer.properties, its folder's name, as in /etc/kmirror/NAME/)",
    )
    p.add_argument(
        "--target.name",
        dest="target_name",
        metavar="NAME",
        help="the target cluster's name (default: the target file's name without .properties; "
        "'target' for producer.properties)",
    )
    p.add_argument(
        "--topic.rename.format",
        dest="rename_format",
        metavar="FORMAT",
        help="the mirror's --topic.rename.format: each source topic is compared with its renamed copy on "
        "the target (${source} is --source.name)",
    )
    p.add_argument(
        "--provenance",
        action="store_true",
        help="the mirror runs with --provenance.header.enable (two active data centres): compare only what "
        "this link copies. Source records whose kmirror.origin header names the target are left out (the "
        "mirror never copies them back), so are target records written on the target (no origin header, "
        "or the target's own); the header is not part of the compared content",
    )
    p.add_argument(
        "--spark.log.level",
        dest="spark_log_level",
        default="off",
        type=str.lower,
        choices=LOG_LEVELS,
        metavar="LEVEL",
        help="Spark's own log on stderr: off (default: the audit's progress lines only), error, warn, "
        "info or debug (then also what Spark's JVM prints when it starts)",
    )
    # `--from -2h`: a relative time is a value, not an option (argparse only knows negative numbers).
    p._negative_number_matcher = re.compile(r"^-\d+(?:ms|s|m|h|d|w)?$|^-\d*\.\d+$")
    return p


def options(a: argparse.Namespace, now: datetime) -> AuditOptions:
    from kmirror.config import connection_settings

    now_ms = int(now.timestamp() * 1000)
    from_ms = parse_time(a.from_, "--from", now_ms) if a.from_ else None
    to_ms = parse_time(a.to, "--to", now_ms) if a.to else None
    if from_ms is not None and to_ms is not None and from_ms >= to_ms:
        raise AuditError("--from must be before --to")
    if a.range_size < 1 or a.max_listed < 0:
        raise AuditError("--range-size must be at least 1 and --max-listed at least 0")
    TopicFilter(include=a.topics, exclude=a.exclude)  # refuses an invalid regex now
    return AuditOptions(
        source=connection_settings(a.source_config),
        target=connection_settings(a.target_config),
        topics=a.topics,
        exclude=a.exclude,
        from_ms=from_ms,
        to_ms=to_ms,
        bucket_ms=parse_duration(a.bucket, "--bucket"),
        grace_ms=parse_duration(a.grace, "--grace"),
        max_skew_ms=parse_duration(a.max_skew, "--max-skew"),
        now_ms=now_ms,
        range_size=a.range_size,
        max_listed=a.max_listed,
        timeout=a.timeout,
        source_name=a.source_name or default_name(a.source_config, "consumer", None),
        target_name=a.target_name or default_name(a.target_config, "producer", "target"),
        mirror=mirror_group(a.source_config),
        provenance=a.provenance,
        rename_format=a.rename_format,
    )


class RenamedCopies:
    """The target's topics that are renamed copies of selected source topics (for plan_cluster)."""

    def __init__(self, topics: TopicFilter, names: Rename) -> None:
        self.topics, self.names = topics, names

    def select(self, found: Iterable[str]) -> list[str]:
        # Not a copy: "__", which no filter selects (internal topics never are).
        return sorted(t for t in found if self.topics.matches(self.names.source_topic(t) or "__"))

    def describe(self) -> str:
        return f"{self.topics.describe()}, renamed as {self.names('<topic>')}"


def cluster_id(settings: Mapping[str, str], timeout: float) -> str:
    """A cluster's id (its metadata's), for --provenance."""
    from confluent_kafka.admin import AdminClient

    from kmirror.kafkaio import silent_log

    admin = AdminClient({**settings, "logger": silent_log("kmirror.audit.client")})
    found = admin.list_topics(timeout=timeout)
    if not found.cluster_id:
        raise AuditError("--provenance: the target cluster reports no cluster id (Kafka 0.10.1 or later)")
    return str(found.cluster_id)


def mirror_group(path: str) -> str | None:
    """The group.id of the source file (the mirror's consumer file names the mirror, as for `kmirror
    failover`): its gaps are read from the target's sync topic."""
    from kmirror.config import load_client_config

    return load_client_config(path, None, allow_unsafe=True).settings.get("group.id") or None


def default_name(path: str, generic: str, fallback: str | None) -> str:
    """A cluster's name from its properties file: the file's stem, unless it is the generic one (the
    mirror's consumer.properties / producer.properties): then the folder's name (the Ansible layout
    /etc/kmirror/<source>/) or `fallback`."""
    p = Path(path)
    if p.stem != generic:
        return p.stem
    return fallback or p.resolve().parent.name or generic


def _spark_conf(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k.strip():
            raise AuditError(f"--conf {p!r}: expected KEY=VALUE")
        out[k.strip()] = v.strip()
    return out


_EXCEPTION_LINE = re.compile(r"^\s*(?:\w+\.)*(\w*(?:Error|Exception)): (.+)$")


def short_error(exc: BaseException) -> str:
    """One line for an operator from an exception that may carry a JVM or Python worker trace: the
    last 'SomethingError: message' line of the innermost cause, else the first line."""
    text = str(exc)
    found = [m for m in map(_EXCEPTION_LINE.match, text.splitlines()) if m]
    line = (
        f"{found[-1].group(1)}: {found[-1].group(2)}"
        if found
        else text.strip().splitlines()[0]
        if text.strip()
        else type(exc).__name__
    )
    return " ".join(line.split())[:500]


def cmd_audit(a: argparse.Namespace) -> int:
    now = datetime.now(UTC)
    try:
        opts = options(a, now)
        conf = _spark_conf(a.conf)
        out = output_dir(a.output, now)
        out.mkdir(parents=True, exist_ok=True)
    except KmirrorError as exc:
        raise AuditError(" ".join(str(exc).split())) from None
    except OSError as exc:
        raise AuditError(f"{a.output}: {exc.strerror or exc}") from None
    from kmirror.audit import spark as sp

    spark = None
    archive = None if sp.under_spark_submit() else sp.ClassArchive.find()
    progress = Progress()
    try:
        planned = plan(opts)  # cluster problems show before Spark starts
        progress.planned(planned.spans, [opts.source_name, opts.target_name])
        master = a.master or ("spark-submit's master" if sp.under_spark_submit() else "local[*]")
        progress.say(f"starting Spark ({master})")
        t0 = time.monotonic()
        spark = sp.session(a.master, conf, archive, log_level=a.spark_log_level)
        progress.say(f"Spark {spark.version} started in {time.monotonic() - t0:.1f} s")
        rep = run(spark, opts, planned, spark_start_s=time.monotonic() - t0, progress=progress)
        paths = write(rep, out)
    except KmirrorError as exc:
        raise AuditError(" ".join(str(exc).split())) from None
    except Exception as exc:
        raise AuditError(short_error(exc)) from None
    finally:
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.stop()
            if archive is not None:
                archive.finish()
    print(f"kmirror audit: {rep['summary']}")
    for g in rep["gaps"]:  # type: ignore[attr-defined]
        print(f"kmirror audit: {gaps.describe(g)}")
    print(f"kmirror audit: report {paths[1]} ({paths[0].name} beside it)")
    return int(rep["exit_code"])  # type: ignore[call-overload]


COMMANDS = {"audit": Command(cmd_audit, error_exit=report.EXIT_ERROR)}


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m kmirror.audit ...` or spark-submit: the same as `kmirror audit ...`."""
    return run_alone("audit", register, COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
