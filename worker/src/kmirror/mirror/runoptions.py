"""The options of ``kmirror run``, each once: its flags, where its value goes, its type, default and help.

:mod:`kmirror.options` adds them to the parser (:func:`add_run_options`), :mod:`kmirror.cli` builds the
:class:`~kmirror.mirror.plan.MirrorOptions` from the parsed values (:func:`mirror_options`); ``inventory``
names an option's key in a source cluster definition (roles/kmirror_config/files/cluster_definition.yml),
which templates/kmirror-instance.conf.j2 renders to the option (tests/ansible/test_templates.py checks that
the two agree).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from kmirror.lineage.provenance import parse_peers
from kmirror.mirror.configguard import DEFAULT_PROTECTED
from kmirror.mirror.configguard import OPTION as PROTECT_OPTION
from kmirror.mirror.cutover import DEFAULT_INITIAL_OFFSETS, INITIAL_OFFSETS
from kmirror.mirror.gaps import GAP_POLICIES
from kmirror.mirror.logformat import FORMATS as LOG_FORMATS
from kmirror.mirror.metrics import DEFAULT_ADDRESS as DEFAULT_METRICS_ADDRESS
from kmirror.mirror.plan import DEFAULT_NUM_PRODUCERS, DEFAULT_QUEUE_SIZE, MirrorOptions


def boolean(value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "yes", "1"):
        return True
    if v in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def peers(value: str) -> tuple[str, ...]:
    try:
        return parse_peers(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def port(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {value!r}")
    return number


def address(value: str) -> str:
    if not value.strip() or "\0" in value or any(c.isspace() for c in value):
        raise argparse.ArgumentTypeError(
            f"expected an IP address or host name (0.0.0.0 for every address), got {value!r}"
        )
    return value


@dataclass(frozen=True)
class RunOption:
    """One option of ``kmirror run``: the argparse arguments it is added with, and where its value goes.

    ``dest`` is the :class:`MirrorOptions` field the value goes to when ``plan`` (else the name the command
    reads it by). ``switch``: ``--opt`` alone means true, ``--opt true|false`` (and ``=``) either.
    ``sources``: also an option of ``check-config`` (the files and the topic filter).
    """

    flags: tuple[str, ...]
    dest: str
    help: str | None
    type: Callable[[str], Any] | None = None
    default: Any = None
    metavar: str | None = None
    choices: Sequence[str] | None = None
    action: str | None = None
    const: Any = None
    switch: bool = False
    required: bool = False
    plan: bool = True
    sources: bool = False
    inventory: str | None = None

    def kwargs(self, *, required: bool = True) -> dict[str, Any]:
        """The keyword arguments of ``add_argument`` (only those set, as written by hand before)."""
        given = {
            "dest": self.dest,
            "action": self.action,
            "type": self.type,
            "nargs": "?" if self.switch else None,
            "const": True if self.switch else self.const,
            "default": self.default,
            "metavar": "true|false" if self.switch else self.metavar,
            "choices": self.choices,
            "required": self.required and required,
            "help": self.help,
        }
        return {k: v for k, v in given.items() if v is not None and (k != "required" or v)}


def _flags(*flags: str) -> tuple[str, ...]:
    return flags


# Java MirrorMaker's plug-ins, refused by `run` (kmirror.cli).
JAVA_ONLY = (
    "--message.handler",
    "--message.handler.args",
    "--consumer.rebalance.listener",
    "--rebalance.listener.args",
)

RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption(
        _flags("--consumer.config"),
        "consumer_configs",
        "consumer properties of a source cluster; repeat once per source cluster",
        action="append",
        default=[],
        metavar="FILE",
        required=True,
        sources=True,
    ),
    RunOption(
        _flags("--producer.config"),
        "producer_config",
        "producer properties of the target cluster",
        metavar="FILE",
        required=True,
        sources=True,
    ),
    RunOption(
        _flags("--whitelist", "--include"),
        "include",
        "Java regex of topics to mirror, matched against the whole name; ',' means '|'",
        metavar="REGEX",
        sources=True,
        inventory="whitelist",
    ),
    RunOption(
        _flags("--blacklist", "--exclude"),
        "exclude",
        "Java regex of topics not to mirror (may be combined with --whitelist); internal "
        "topics (__*) are never mirrored",
        metavar="REGEX",
        sources=True,
        inventory="blacklist",
    ),
    RunOption(
        _flags("--allow.unsafe"),
        "allow_unsafe",
        "run even with settings that can lose records (acks=1, auto-commit, ...)",
        action="store_true",
        sources=True,
    ),
    RunOption(
        _flags("--num.streams"),
        "num_streams",
        "consumer streams (processes) per source cluster; default: one per CPU core",
        type=int,
        metavar="N",
        inventory="num_streams",
    ),
    RunOption(
        _flags("--num.producers"),
        "num_producers",
        "producers (target connections) per stream; a source partition always uses the same one "
        f"(default {DEFAULT_NUM_PRODUCERS})",
        type=int,
        default=DEFAULT_NUM_PRODUCERS,
        metavar="N",
        inventory="num_producers",
    ),
    RunOption(
        _flags("--queue.size"),
        "queue_size",
        f"records buffered between consumer and target per stream; reading blocks when full "
        f"(default {DEFAULT_QUEUE_SIZE}, or queue.buffering.max.messages from the producer file)",
        type=int,
        metavar="N",
        inventory="queue_size",
    ),
    RunOption(
        _flags("--offset.commit.interval.ms"),
        "offset_commit_interval_ms",
        "flush and commit every MS milliseconds (default 60000)",
        type=int,
        default=60_000,
        metavar="MS",
        inventory="offset_commit_interval_ms",
    ),
    RunOption(
        _flags("--abort.on.send.failure", "--abort.on.send.fail"),
        "abort_on_send_failure",
        "stop when a record cannot be delivered (default true; false needs --allow.unsafe)",
        type=boolean,
        switch=True,
        default=True,
    ),
    RunOption(
        _flags("--abortOnSendFail"),
        "abort_on_send_failure",
        argparse.SUPPRESS,
        action="store_const",
        const=True,
    ),
    RunOption(
        _flags("--new.consumer"),
        "new_consumer",
        "accepted for compatibility; kmirror always uses the broker-coordinated consumer",
        action="store_true",
        plan=False,
    ),
    *(
        RunOption(_flags(flag), "java_only", argparse.SUPPRESS, action="append", metavar="CLASS", plan=False)
        for flag in JAVA_ONLY
    ),
    RunOption(
        _flags("--topic.refresh.interval.ms"),
        "topic_refresh_interval_ms",
        "how often new source topics, partition counts and topic configs are looked at (default 30000)",
        type=int,
        default=30_000,
        metavar="MS",
        inventory="topic_refresh_interval_ms",
    ),
    RunOption(
        _flags("--stats.interval.ms"),
        "stats_interval_ms",
        "one stats line per stream every MS milliseconds (default 30000)",
        type=int,
        default=30_000,
        metavar="MS",
        inventory="stats_interval_ms",
    ),
    RunOption(
        _flags("--replication.factor"),
        "replication_factor",
        "replication factor of destination topics kmirror creates (default: the target's)",
        type=int,
        default=-1,
        metavar="N",
        inventory="replication_factor",
    ),
    RunOption(
        _flags(PROTECT_OPTION),
        "config_properties_protect",
        "topic configs that a destination topic, once created, takes from its source only where it then "
        "keeps at least as many records, so that whoever may alter a source topic cannot delete the copy's "
        "records (e.g. with retention.ms=1): Java regexes matched against the whole key, comma-separated "
        "(as MirrorMaker 2's config.properties.exclude). Retention and segment limits and "
        "max.message.bytes follow only upwards (-1, unlimited, included), cleanup.policy only by dropping "
        "a policy, other keys never; a change held back is logged. 'none': every change follows the source "
        f"(docs/security.md). Default: {DEFAULT_PROTECTED}",
        default=DEFAULT_PROTECTED,
        metavar="REGEX[,REGEX...]|none",
        inventory="config_properties_protect",
    ),
    RunOption(
        _flags("--static.membership"),
        "static_membership",
        "KIP-345 static membership (default: true): each stream joins the group with a "
        "group.instance.id that stays the same across restarts of this process (BASE-STREAM; BASE: the "
        "consumer file's group.instance.id, else kmirror-HOST-SOURCE-H, H: a hash of the consumer file's "
        "absolute path, so two processes on one host with their own files never collide), so a restart "
        "within session.timeout.ms moves no partitions; an instance stopped for good keeps its partitions "
        "until session.timeout.ms has passed. false: dynamic members, which leave the group one at a time on "
        "stop and whose partitions move at once (docs/deployment.md, Restarts)",
        type=boolean,
        switch=True,
        default=True,
        inventory="static_membership",
    ),
    RunOption(
        _flags("--gap.policy"),
        "gap_policy",
        "what a stream does when the source no longer has the offset it must continue from (records "
        "purged by retention or delete_records before they were mirrored; a partition truncated or a topic "
        "recreated below its position): always one WARNING line naming topic, partition and offsets, and "
        "the metrics kmirror_gaps_total and kmirror_gap_records_total; then continue from the source's log "
        "start (default) or stop with exit 4 and nothing committed past the gap "
        "(docs/runbooks/source-gap.md)",
        choices=GAP_POLICIES,
        default="continue",
        metavar="continue|stop",
    ),
    RunOption(
        _flags("--provenance.header.enable"),
        "provenance_header",
        "each copy carries a header kmirror.origin naming the record it copies (source cluster id, "
        "partition, offset, topic), and records whose origin is the target cluster are not copied back "
        "(counted: kmirror_skipped_origin_total, the stats line's skipped_origin). A header already there "
        "is honoured only as --provenance.peers says; any other is replaced by kmirror's own (counted: "
        "kmirror_distrusted_origin_total; docs/security.md). For two data centres mirroring the same "
        "topics both ways (docs/runbooks/active-active.md) and failback. Default false: copies stay "
        "byte-identical",
        type=boolean,
        switch=True,
        default=False,
        inventory="provenance_header",
    ),
    RunOption(
        _flags("--provenance.peers"),
        "provenance_peers",
        "with --provenance.header.enable: the clusters whose origin headers on the source are honoured, "
        "i.e. whose kmirror mirrors write copies into the source: 'target' (default: the target's own "
        "reverse mirror, two active data centres), 'none' (a one-way mirror: every header found on the "
        "source is replaced by kmirror's own), or cluster ids and 'target', comma-separated. A header "
        "naming the source itself, another cluster, another topic than the record's, or malformed, is "
        "never honoured (docs/security.md)",
        type=peers,
        default=("target",),
        metavar="target|none|IDS",
    ),
    RunOption(
        _flags("--topic.rename.format"),
        "topic_rename_format",
        "destination topic names: FORMAT with ${topic} (exactly once) and ${source} (--source.name), "
        "e.g. '${source}.${topic}' (MirrorMaker 2's layout) or '${topic}.replica'; topic creation, config "
        "and partition sync follow it. Default: the source topic's name. Not yet with --groups or "
        "--initial.offsets target-end (docs/runbooks/active-active.md)",
        metavar="FORMAT",
        inventory="topic_rename_format",
    ),
    RunOption(
        _flags("--target.name"),
        "target_name",
        "the target cluster's name (the inventory's); with a --topic.rename.format holding ${source}, "
        "source topics named as copies from the target (FORMAT with ${source}=NAME, e.g. west.events when "
        "mirroring west -> east) are not mirrored back",
        metavar="NAME",
    ),
    RunOption(
        _flags("--heartbeats.interval.ms"),
        "heartbeats_interval_ms",
        "write a heartbeat to the source's topic kmirror.heartbeats.SOURCE every MS milliseconds, "
        "mirror it, and read its copy on the target: kmirror_heartbeat_latency_seconds and "
        "kmirror_heartbeat_age_seconds per source, also when no data flows (alert KmirrorLinkStale). Other "
        "sources' heartbeat topics are never mirrored. Needs WRITE and CREATE on that topic of the source. "
        "Default 0: off",
        type=int,
        default=0,
        metavar="MS",
        inventory="heartbeats_interval_ms",
    ),
    RunOption(
        _flags("--groups"),
        "groups",
        "Java regex of source consumer groups whose committed offsets are translated and committed "
        "for the same group on the target (for failover; MirrorMaker 2's name); also writes sync points to "
        "the target's __kmirror-offset-syncs topic. The mirror's own group and __* groups are never synced",
        metavar="REGEX",
        inventory="groups",
    ),
    RunOption(
        _flags("--sync.group.offsets.interval.ms"),
        "sync_group_offsets_interval_ms",
        "how often --groups offsets are synced (default 60000)",
        type=int,
        default=60_000,
        metavar="MS",
        inventory="sync_group_offsets_interval_ms",
    ),
    RunOption(
        _flags("--source.name"),
        "source_names",
        "name of a source cluster in metrics (label source), /health and log lines; repeat once per "
        "--consumer.config, in the same order (default: the consumer file's name without extension, or its "
        "folder's name where names repeat). The Ansible role passes the inventory's source name",
        action="append",
        default=[],
        metavar="NAME",
        inventory="name",
    ),
    RunOption(
        _flags("--initial.offsets"),
        "initial_offsets",
        "where a partition without a committed offset in the mirror group starts (one with a "
        "committed offset always resumes there, e.g. MirrorMaker 1's when its group.id is reused). "
        "reset (default): the consumer file's auto.offset.reset (earliest: everything is copied). "
        "target-end: right after the source record that the target partition's last record is a copy "
        "of (same topic, partition, key, value, headers and timestamp), committed for the group before the "
        "streams start; for a cutover from MirrorMaker 2, from offsets kept in ZooKeeper or beside an "
        "existing copy. Refused (exit 2) while the group has members, when the copy "
        "does not keep partitions or when a cluster does not answer; a partition with nothing on the "
        "target starts at auto.offset.reset; identical records right after the match are counted in the "
        "logged bound of records copied twice (docs/runbooks/cutover-from-mirrormaker.md)",
        choices=list(INITIAL_OFFSETS),
        default=DEFAULT_INITIAL_OFFSETS,
    ),
    RunOption(
        _flags("--metrics.port"),
        "metrics_port",
        "serve Prometheus metrics on http://ADDR:PORT/metrics (default: off; 0: off)",
        type=port,
        metavar="PORT",
        plan=False,
        inventory="metrics_port",
    ),
    RunOption(
        _flags("--metrics.address"),
        "metrics_address",
        f"the address --metrics.port listens on (default {DEFAULT_METRICS_ADDRESS}: this host only; "
        "0.0.0.0 or :: for every address, so that Prometheus on another host can scrape it)",
        type=address,
        default=DEFAULT_METRICS_ADDRESS,
        metavar="ADDR",
        plan=False,
    ),
    RunOption(
        _flags("--log.level"),
        "log_level",
        "default INFO",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        plan=False,
        inventory="log_level",
    ),
    RunOption(
        _flags("--log.format"),
        "log_format",
        "text (default: TIME LEVEL PROCESS LOGGER: MESSAGE) or json (one object per line with time, "
        "level, process, logger, message and exception, for log shippers)",
        default="text",
        choices=list(LOG_FORMATS),
        plan=False,
    ),
)


def add_run_options(p: argparse.ArgumentParser, *, sources_only: bool = False) -> None:
    """The options of ``run`` (``sources_only``: those ``check-config`` shares, none of them required)."""
    for o in RUN_OPTIONS:
        if o.sources or not sources_only:
            p.add_argument(*o.flags, **o.kwargs(required=not sources_only))


def mirror_options(a: argparse.Namespace) -> MirrorOptions:
    """The plan's options from ``run``'s parsed command line."""
    return MirrorOptions(**{o.dest: getattr(a, o.dest) for o in RUN_OPTIONS if o.plan})


PLAN_FIELDS = frozenset(f.name for f in fields(MirrorOptions)) - {"notes"}
