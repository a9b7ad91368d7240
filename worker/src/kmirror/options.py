"""The ``kmirror`` command line: MirrorMaker's options (both ``--opt value`` and ``--opt=value``), kmirror's
own, and every sub-command's; the commands themselves are in :mod:`kmirror.cli`."""

from __future__ import annotations

import argparse

from kmirror import __version__, audit
from kmirror.commandline import add_command, top_parser
from kmirror.failover import command as failover
from kmirror.health import lagcheck
from kmirror.mirror.cutover import DEFAULT_INITIAL_OFFSETS, INITIAL_OFFSETS
from kmirror.mirror.gaps import GAP_POLICIES
from kmirror.mirror.logformat import FORMATS as LOG_FORMATS
from kmirror.mirror.metrics import DEFAULT_ADDRESS as DEFAULT_METRICS_ADDRESS
from kmirror.mirror.plan import (
    DEFAULT_NUM_PRODUCERS,
    DEFAULT_QUEUE_SIZE,
)

RUN_DESCRIPTION = """\
Mirror topics from one or more source clusters to a target cluster, losing nothing.
Takes kafka.tools.MirrorMaker's options and its consumer/producer properties files (Java and legacy
keys are translated; see docs/config-translation.md). Offsets are committed only for records the target
acknowledged; a record the target refuses stops the mirror (exit 3) without committing past it.
SIGTERM/SIGINT: flush, commit, exit 0."""


def _bool(value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "yes", "1"):
        return True
    if v in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {value!r}")
    return port


def _address(value: str) -> str:
    if not value.strip() or "\0" in value or any(c.isspace() for c in value):
        raise argparse.ArgumentTypeError(
            f"expected an IP address or host name (0.0.0.0 for every address), got {value!r}"
        )
    return value


def _add_sources(p: argparse.ArgumentParser, *, required: bool) -> None:
    p.add_argument(
        "--consumer.config",
        dest="consumer_configs",
        action="append",
        default=[],
        metavar="FILE",
        required=required,
        help="consumer properties of a source cluster; repeat once per source cluster",
    )
    p.add_argument(
        "--producer.config",
        dest="producer_config",
        metavar="FILE",
        required=required,
        help="producer properties of the target cluster",
    )
    p.add_argument(
        "--whitelist",
        "--include",
        dest="include",
        metavar="REGEX",
        help="Java regex of topics to mirror, matched against the whole name; ',' means '|'",
    )
    p.add_argument(
        "--blacklist",
        "--exclude",
        dest="exclude",
        metavar="REGEX",
        help="Java regex of topics not to mirror (may be combined with --whitelist); internal "
        "topics (__*) are never mirrored",
    )
    p.add_argument(
        "--allow.unsafe",
        dest="allow_unsafe",
        action="store_true",
        help="run even with settings that can lose records (acks=1, auto-commit, ...)",
    )


def build_parser() -> argparse.ArgumentParser:
    top, sub = top_parser("kmirror: a drop-in MirrorMaker that loses nothing.")
    top.add_argument("--version", action="version", version=f"kmirror {__version__}")

    run = add_command(sub, "run", help="mirror topics (MirrorMaker's options)", description=RUN_DESCRIPTION)
    _add_sources(run, required=True)
    run.add_argument(
        "--num.streams",
        dest="num_streams",
        type=int,
        metavar="N",
        help="consumer streams (processes) per source cluster; default: one per CPU core",
    )
    run.add_argument(
        "--num.producers",
        dest="num_producers",
        type=int,
        default=DEFAULT_NUM_PRODUCERS,
        metavar="N",
        help="producers (target connections) per stream; a source partition always uses the same one "
        f"(default {DEFAULT_NUM_PRODUCERS})",
    )
    run.add_argument(
        "--queue.size",
        dest="queue_size",
        type=int,
        metavar="N",
        help=f"records buffered between consumer and target per stream; reading blocks when full "
        f"(default {DEFAULT_QUEUE_SIZE}, or queue.buffering.max.messages from the producer file)",
    )
    run.add_argument(
        "--offset.commit.interval.ms",
        dest="commit_ms",
        type=int,
        default=60_000,
        metavar="MS",
        help="flush and commit every MS milliseconds (default 60000)",
    )
    run.add_argument(
        "--abort.on.send.failure",
        "--abort.on.send.fail",
        dest="abort",
        type=_bool,
        nargs="?",
        const=True,
        default=True,
        metavar="true|false",
        help="stop when a record cannot be delivered (default true; false needs --allow.unsafe)",
    )
    run.add_argument(
        "--abortOnSendFail", dest="abort", action="store_const", const=True, help=argparse.SUPPRESS
    )
    run.add_argument(
        "--new.consumer",
        dest="new_consumer",
        action="store_true",
        help="accepted for compatibility; kmirror always uses the broker-coordinated consumer",
    )
    for java_only in (
        "--message.handler",
        "--message.handler.args",
        "--consumer.rebalance.listener",
        "--rebalance.listener.args",
    ):
        run.add_argument(
            java_only, dest="java_only", action="append", metavar="CLASS", help=argparse.SUPPRESS
        )
    run.add_argument(
        "--topic.refresh.interval.ms",
        dest="refresh_ms",
        type=int,
        default=30_000,
        metavar="MS",
        help="how often new source topics, partition counts and topic configs are looked at (default 30000)",
    )
    run.add_argument(
        "--stats.interval.ms",
        dest="stats_ms",
        type=int,
        default=30_000,
        metavar="MS",
        help="one stats line per stream every MS milliseconds (default 30000)",
    )
    run.add_argument(
        "--replication.factor",
        dest="replication_factor",
        type=int,
        default=-1,
        metavar="N",
        help="replication factor of destination topics kmirror creates (default: the target's)",
    )
    run.add_argument(
        "--static.membership",
        dest="static_membership",
        type=_bool,
        nargs="?",
        const=True,
        default=True,
        metavar="true|false",
        help="KIP-345 static membership (default: true): each stream joins the group with a "
        "group.instance.id that stays the same across restarts of this process (BASE-STREAM; BASE: the "
        "consumer file's group.instance.id, else kmirror-HOST-SOURCE-H, H: a hash of the consumer file's "
        "absolute path, so two processes on one host with their own files never collide), so a restart "
        "within session.timeout.ms moves no partitions; an instance stopped for good keeps its partitions "
        "until session.timeout.ms has passed. false: dynamic members, which leave the group one at a time on "
        "stop and whose partitions move at once (docs/deployment.md, Restarts)",
    )
    run.add_argument(
        "--gap.policy",
        dest="gap_policy",
        choices=GAP_POLICIES,
        default="continue",
        metavar="continue|stop",
        help="what a stream does when the source no longer has the offset it must continue from (records "
        "purged by retention or delete_records before they were mirrored; a partition truncated or a topic "
        "recreated below its position): always one WARNING line naming topic, partition and offsets, and "
        "the metrics kmirror_gaps_total and kmirror_gap_records_total; then continue from the source's log "
        "start (default) or stop with exit 4 and nothing committed past the gap "
        "(docs/runbooks/source-gap.md)",
    )
    run.add_argument(
        "--provenance.header.enable",
        dest="provenance_header",
        type=_bool,
        nargs="?",
        const=True,
        default=False,
        metavar="true|false",
        help="each copy carries a header kmirror.origin naming the record it copies (source cluster id, "
        "partition, offset, topic; a header already there is kept), and records whose origin is the target "
        "cluster are not copied back (counted: kmirror_skipped_origin_total, the stats line's "
        "skipped_origin). For two data centres mirroring the same topics both ways "
        "(docs/runbooks/active-active.md). Default false: copies stay byte-identical",
    )
    run.add_argument(
        "--topic.rename.format",
        dest="topic_rename_format",
        metavar="FORMAT",
        help="destination topic names: FORMAT with ${topic} (exactly once) and ${source} (--source.name), "
        "e.g. '${source}.${topic}' (MirrorMaker 2's layout) or '${topic}.replica'; topic creation, config "
        "and partition sync follow it. Default: the source topic's name. Not yet with --groups or "
        "--initial.offsets target-end (docs/runbooks/active-active.md)",
    )
    run.add_argument(
        "--target.name",
        dest="target_name",
        metavar="NAME",
        help="the target cluster's name (the inventory's); with a --topic.rename.format holding ${source}, "
        "source topics named as copies from the target (FORMAT with ${source}=NAME, e.g. west.events when "
        "mirroring west -> east) are not mirrored back",
    )
    run.add_argument(
        "--heartbeats.interval.ms",
        dest="heartbeats_ms",
        type=int,
        default=0,
        metavar="MS",
        help="write a heartbeat to the source's topic kmirror.heartbeats.SOURCE every MS milliseconds, "
        "mirror it, and read its copy on the target: kmirror_heartbeat_latency_seconds and "
        "kmirror_heartbeat_age_seconds per source, also when no data flows (alert KmirrorLinkStale). Other "
        "sources' heartbeat topics are never mirrored. Needs WRITE and CREATE on that topic of the source. "
        "Default 0: off",
    )
    run.add_argument(
        "--groups",
        dest="groups",
        metavar="REGEX",
        help="Java regex of source consumer groups whose committed offsets are translated and committed "
        "for the same group on the target (for failover; MirrorMaker 2's name); also writes sync points to "
        "the target's __kmirror-offset-syncs topic. The mirror's own group and __* groups are never synced",
    )
    run.add_argument(
        "--sync.group.offsets.interval.ms",
        dest="sync_groups_ms",
        type=int,
        default=60_000,
        metavar="MS",
        help="how often --groups offsets are synced (default 60000)",
    )
    run.add_argument(
        "--source.name",
        dest="source_names",
        action="append",
        default=[],
        metavar="NAME",
        help="name of a source cluster in metrics (label source), /health and log lines; repeat once per "
        "--consumer.config, in the same order (default: the consumer file's name without extension, or its "
        "folder's name where names repeat). The Ansible role passes the inventory's source name",
    )
    run.add_argument(
        "--initial.offsets",
        dest="initial_offsets",
        choices=list(INITIAL_OFFSETS),
        default=DEFAULT_INITIAL_OFFSETS,
        help="where a partition without a committed offset in the mirror group starts (one with a "
        "committed offset always resumes there, e.g. MirrorMaker 1's when its group.id is reused). "
        "reset (default): the consumer file's auto.offset.reset (earliest: everything is copied). "
        "target-end: right after the source record that the target partition's last record is a copy "
        "of (same topic, partition, key, value, headers and timestamp), committed for the group before the "
        "streams start; for a cutover from MirrorMaker 2, from offsets kept in ZooKeeper or beside an "
        "existing copy. Refused (exit 2) while the group has members, when the copy "
        "does not keep partitions or when a cluster does not answer; a partition with nothing on the "
        "target starts at auto.offset.reset; identical records right after the match are counted in the "
        "logged bound of records copied twice (docs/runbooks/cutover-from-mirrormaker.md)",
    )
    run.add_argument(
        "--metrics.port",
        dest="metrics_port",
        type=_port,
        metavar="PORT",
        help="serve Prometheus metrics on http://ADDR:PORT/metrics (default: off; 0: off)",
    )
    run.add_argument(
        "--metrics.address",
        dest="metrics_address",
        type=_address,
        default=DEFAULT_METRICS_ADDRESS,
        metavar="ADDR",
        help=f"the address --metrics.port listens on (default {DEFAULT_METRICS_ADDRESS}: this host only; "
        "0.0.0.0 or :: for every address, so that Prometheus on another host can scrape it)",
    )
    run.add_argument(
        "--log.level",
        dest="log_level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="default INFO",
    )
    run.add_argument(
        "--log.format",
        dest="log_format",
        default="text",
        choices=list(LOG_FORMATS),
        help="text (default: TIME LEVEL PROCESS LOGGER: MESSAGE) or json (one object per line with time, "
        "level, process, logger, message and exception, for log shippers)",
    )

    check = sub.add_parser(
        "check-config",
        allow_abbrev=False,
        help="print the effective client settings (secrets masked) and a safety verdict",
        description="Translate and check consumer/producer files as `run` would, print the "
        "effective librdkafka settings with secrets masked, and a verdict. "
        "Exit 0 SAFE, 1 UNSAFE, 2 invalid.",
    )
    _add_sources(check, required=False)
    check.add_argument(
        "--abort.on.send.failure", dest="abort", type=_bool, default=True, metavar="true|false"
    )
    check.add_argument("--json", action="store_true", help="machine-readable output")

    keys = sub.add_parser(
        "config-keys",
        help="the Java/legacy key translation table",
        description="Print how each Java or legacy MirrorMaker key is handled.",
    )
    keys.add_argument("--markdown", action="store_true", help="the table as published in the docs")

    defaults = sub.add_parser(
        "defaults",
        help="the data-loss-safe client settings, as JSON",
        description="Print the required, default and engine-owned client settings as JSON "
        "(role kmirror_config renders them from the same module).",
    )
    defaults.add_argument("--markdown", action="store_true", help="the table as published in the docs")
    lagcheck.register(sub)
    audit.register(sub)
    failover.register(sub)
    return top
