"""From MirrorMaker options and properties files to a checked plan of streams (no network).

Everything that can be wrong with the input is found here, before any client connects: a run either
starts with a complete, safe configuration or does not start at all.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kmirror.config import ClientConfig, kerberos, load_client_config
from kmirror.config.filters import TopicFilter, compile_filter
from kmirror.errors import ConfigError
from kmirror.failover.groupsync import GroupSync
from kmirror.lineage.rename import SAME_NAME, Rename, rename
from kmirror.mirror.configguard import DEFAULT_PROTECTED, ConfigGuard
from kmirror.mirror.heartbeats import Heartbeat
from kmirror.mirror.spec import StreamSpec

DEFAULT_QUEUE_SIZE = 10_000
MAX_BATCH = 1_000
# Producers per stream. Brokers handle one request per connection at a time, so with acks=all one
# connection's round trips bound a stream's write rate; two connections nearly doubled it for 1 KB
# records in docs/benchmarks.md (more did not pay for small records).
DEFAULT_NUM_PRODUCERS = 2
# librdkafka's session.timeout.ms default: how long the group keeps a static member's partitions for it.
DEFAULT_SESSION_TIMEOUT_MS = 45_000


@dataclass
class MirrorOptions:
    consumer_configs: list[str]
    producer_config: str
    include: str | None = None
    exclude: str | None = None
    num_streams: int | None = None  # None: one per CPU core
    num_producers: int = DEFAULT_NUM_PRODUCERS
    queue_size: int | None = None
    offset_commit_interval_ms: int = 60_000
    abort_on_send_failure: bool = True
    allow_unsafe: bool = False
    topic_refresh_interval_ms: int = 30_000
    stats_interval_ms: int = 30_000
    replication_factor: int = -1
    # --config.properties.protect: the topic configs a destination takes from its source, once created, only
    # where it keeps as much (kmirror.mirror.configguard).
    config_properties_protect: str = DEFAULT_PROTECTED
    # KIP-345 static membership (the default): each stream joins with a group.instance.id that stays the
    # same across restarts of this process, so a restart within session.timeout.ms moves no partition.
    # False (--static.membership false): dynamic members that leave the group on stop, also when the
    # consumer file sets group.instance.id (docs/deployment.md, Restarts).
    static_membership: bool = True
    gap_policy: str = "continue"  # --gap.policy: continue or stop at a gap (kmirror.mirror.gaps)
    provenance_header: bool = False  # --provenance.header.enable (kmirror.lineage.provenance)
    provenance_peers: tuple[str, ...] = ("target",)  # --provenance.peers: whose headers are honoured
    topic_rename_format: str | None = None  # --topic.rename.format (kmirror.lineage.rename)
    target_name: str | None = None  # --target.name: the target's name in that format
    heartbeats_interval_ms: int = 0  # --heartbeats.interval.ms: 0 off (kmirror.mirror.heartbeats)
    groups: str | None = None  # --groups: Java regex of source groups whose offsets are synced
    sync_group_offsets_interval_ms: int = 60_000
    # --initial.offsets: where partitions without a committed offset start (kmirror.mirror.cutover)
    initial_offsets: str = "reset"
    # --source.name: each source's name (metrics label `source`, logs, /health), in --consumer.config order;
    # empty: from the consumer files (source_names).
    source_names: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Source:
    name: str
    config: ClientConfig
    topic_filter: TopicFilter
    rename: Rename = SAME_NAME
    # The name taken from the consumer file (source_names), which the group.instance.id keeps when
    # --source.name renames the source, so that naming a source moves no static member's partitions.
    file_name: str | None = None


@dataclass
class MirrorPlan:
    options: MirrorOptions
    sources: list[Source]
    producer: ClientConfig

    @property
    def streams_per_source(self) -> int:
        return self.options.num_streams or os.cpu_count() or 1

    def stream_specs(self) -> list[StreamSpec]:
        o = self.options
        batch = max(1, min(MAX_BATCH, self.producer_queue_size))
        return [
            StreamSpec(
                source=s.name,
                index=i,
                consumer=stream_consumer_settings(s, i, static=o.static_membership),
                producer=dict(self.producer.settings),
                topic_filter=s.topic_filter,
                batch_size=batch,
                commit_interval_ms=o.offset_commit_interval_ms,
                abort_on_send_failure=o.abort_on_send_failure,
                num_producers=o.num_producers,
                topic_refresh_ms=o.topic_refresh_interval_ms,
                stats_interval_ms=o.stats_interval_ms,
                replication_factor=o.replication_factor,
                config_guard=ConfigGuard(o.config_properties_protect),
                unassigned_warn_s=unassigned_warn_s(s.config.settings),
                offset_syncs=o.groups is not None,
                gap_policy=o.gap_policy,
                provenance=o.provenance_header,
                provenance_peers=o.provenance_peers,
                rename=s.rename,
                heartbeats=o.heartbeats_interval_ms > 0,
            )
            for s in self.sources
            for i in range(self.streams_per_source)
        ]

    def heartbeats(self) -> list[Heartbeat]:
        """One heartbeat writer and reader per source cluster (none without --heartbeats.interval.ms)."""
        o = self.options
        if o.heartbeats_interval_ms <= 0:
            return []
        return [
            Heartbeat(s.name, s.config.settings, self.producer.settings, o.heartbeats_interval_ms, s.rename)
            for s in self.sources
        ]

    def group_syncs(self) -> list[GroupSync]:
        """One group offset sync per source cluster (none without --groups)."""
        o = self.options
        if o.groups is None:
            return []
        return [
            GroupSync(
                source=s.name,
                mirror=s.config.settings["group.id"],
                source_settings=dict(s.config.settings),
                target_settings=dict(self.producer.settings),
                groups=TopicFilter(o.groups),
                topics=s.topic_filter,
                interval_ms=o.sync_group_offsets_interval_ms,
            )
            for s in self.sources
        ]

    @property
    def producer_queue_size(self) -> int:
        return int(self.producer.settings["queue.buffering.max.messages"])


# Kafka refuses a group.instance.id longer than this or with other characters (JoinGroupRequest).
MAX_INSTANCE_ID = 249
_NOT_IN_INSTANCE_ID = re.compile(r"[^A-Za-z0-9._-]")


def instance_base(source: Source) -> str:
    """The stable part of a source's group.instance.id: the file's group.instance.id, or
    kmirror-HOST-SOURCE-PATHHASH: the host name, the source's name and 8 hex digits of the SHA-256 of the
    consumer file's absolute path. All three stay the same across restarts of one process (same host, same
    unit and config); two processes on one host differ by their consumer files, so they never share an id
    unless they read the same file."""
    given = source.config.settings.get("group.instance.id", "").strip()
    if given:
        return given
    host = socket.gethostname().split(".")[0] or "localhost"
    where = hashlib.sha256(os.path.abspath(source.config.origin).encode()).hexdigest()[:8]
    name = source.file_name or source.name
    base = _NOT_IN_INSTANCE_ID.sub("_", f"kmirror-{host[:64]}-{name[:64]}")
    return f"{base}-{where}"


def stream_consumer_settings(source: Source, index: int, *, static: bool) -> dict[str, str]:
    """A stream's consumer settings: the source's, plus its own group.instance.id (BASE-INDEX) when
    static membership is on (the default); without it, no group.instance.id at all (dynamic member)."""
    settings = dict(source.config.settings)
    settings.pop("group.instance.id", None)
    if static:
        settings["group.instance.id"] = f"{instance_base(source)}-{index}"
    return settings


def unassigned_warn_s(consumer: dict[str, str]) -> float:
    """How long a stream may be without partitions before it warns that the group seems stuck:
    twice session.timeout.ms (a join that waits for a dead member ends within one session timeout)."""
    try:
        session_ms = int(consumer.get("session.timeout.ms", DEFAULT_SESSION_TIMEOUT_MS))
    except ValueError:
        session_ms = DEFAULT_SESSION_TIMEOUT_MS
    return 2 * session_ms / 1000


def source_names(paths: list[str]) -> list[str]:
    """A readable name per consumer file: its stem, or its folder's name where stems repeat."""
    stems = [Path(p).stem for p in paths]
    repeated = Counter(stems)
    names = [Path(p).parent.name if repeated[s] > 1 else s for p, s in zip(paths, stems, strict=True)]
    if len(set(names)) != len(names):
        names = [f"{n}-{i}" for i, n in enumerate(names)]
    return names


# A source name (--source.name): written into metric labels, log lines and group.instance.ids; the
# inventory's source name (roles/kmirror_config/files/cluster_definition.yml, key name) has the same rule.
SOURCE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def checked_source_names(names: list[str], sources: int) -> list[str]:
    """The --source.name values: none, or one per --consumer.config, each well formed, no two alike."""
    if not names:
        return []
    if len(names) != sources:
        raise ConfigError(
            f"given {len(names)} times for {sources} --consumer.config",
            key="--source.name",
            fix="give one --source.name per --consumer.config, in the same order, or none",
        )
    for name in names:
        if not SOURCE_NAME.fullmatch(name):
            raise ConfigError(
                f"{name!r} is not a source name",
                key="--source.name",
                fix="use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit",
            )
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(
            f"{', '.join(repeated)} given twice", key="--source.name", fix="give each source its own name"
        )
    return names


# The most each number option takes. MirrorMaker's options are Java ints (at most 2147483647); a stream
# is a process and each producer a set of connections, so far fewer of those.
JAVA_INT_MAX = 2**31 - 1
MAX_NUM_STREAMS = 1024
MAX_NUM_PRODUCERS = 64
MAX_REPLICATION_FACTOR = 2**15 - 1  # Kafka's replication factor is a 16-bit number


def _positive(value: int | None, option: str, most: int = JAVA_INT_MAX) -> None:
    if value is not None and not 1 <= value <= most:
        raise ConfigError(
            f"must be 1 to {most}, got {value}", key=option, fix=f"give {option} a number from 1 to {most}"
        )


def build_plan(o: MirrorOptions) -> MirrorPlan:
    if not o.consumer_configs:
        raise ConfigError(
            "no source cluster",
            key="--consumer.config",
            fix="give --consumer.config FILE once per source cluster",
        )
    if not o.producer_config:
        raise ConfigError("no target cluster", key="--producer.config", fix="give --producer.config FILE")
    for value, option, most in (
        (o.num_streams, "--num.streams", MAX_NUM_STREAMS),
        (o.num_producers, "--num.producers", MAX_NUM_PRODUCERS),
        (o.queue_size, "--queue.size", JAVA_INT_MAX),
        (o.offset_commit_interval_ms, "--offset.commit.interval.ms", JAVA_INT_MAX),
        (o.topic_refresh_interval_ms, "--topic.refresh.interval.ms", JAVA_INT_MAX),
        (o.stats_interval_ms, "--stats.interval.ms", JAVA_INT_MAX),
        (o.sync_group_offsets_interval_ms, "--sync.group.offsets.interval.ms", JAVA_INT_MAX),
    ):
        _positive(value, option, most)
    if o.heartbeats_interval_ms:
        _positive(o.heartbeats_interval_ms, "--heartbeats.interval.ms", JAVA_INT_MAX)
    if o.replication_factor != -1:
        _positive(o.replication_factor, "--replication.factor", MAX_REPLICATION_FACTOR)
    if o.groups is not None:
        compile_filter(o.groups, "--groups")
    ConfigGuard(o.config_properties_protect).check()
    if o.topic_rename_format and (o.groups is not None or o.initial_offsets != "reset"):
        raise ConfigError(
            "cannot be combined with --groups or --initial.offsets target-end yet (their translation reads "
            "the destination topics under the source's names)",
            key="--topic.rename.format",
            fix="drop --groups/--initial.offsets, or mirror under the source's names",
        )
    if not o.abort_on_send_failure and not o.allow_unsafe:
        raise ConfigError(
            "is unsafe (a record that cannot be delivered is skipped and committed past)",
            key="--abort.on.send.failure=false",
            fix="drop it, or pass --allow.unsafe to run anyway",
        )
    producer = load_client_config(o.producer_config, "producer", allow_unsafe=o.allow_unsafe)
    if o.queue_size is not None or "queue.buffering.max.messages" not in producer.settings:
        producer.settings["queue.buffering.max.messages"] = str(o.queue_size or DEFAULT_QUEUE_SIZE)
    sources = []
    from_files = source_names(o.consumer_configs)
    given = checked_source_names(o.source_names, len(o.consumer_configs))
    for name, file_name, path in zip(given or from_files, from_files, o.consumer_configs, strict=True):
        cfg = load_client_config(path, "consumer", allow_unsafe=o.allow_unsafe)
        topics = topic_filter(cfg, o.include, o.exclude)
        if topics is None:
            raise ConfigError(
                "no topic filter for this source",
                origin=path,
                key="--whitelist",
                fix="give --whitelist REGEX (e.g. --whitelist '.*' for every topic) or --blacklist",
            )
        renamed = rename(o.topic_rename_format, name, o.target_name)
        sources.append(Source(name, cfg, topics, renamed, file_name=file_name))
        if o.static_membership:
            check_instance_id(cfg, o.num_streams or os.cpu_count() or 1)
    check_process([producer, *(s.config for s in sources)])
    return MirrorPlan(o, sources, producer)


def check_instance_id(cfg: ClientConfig, streams: int) -> None:
    """A group.instance.id from the file, with the stream's -N, must be one Kafka accepts."""
    given = cfg.settings.get("group.instance.id", "").strip()
    longest = f"{given}-{streams - 1}"
    if given and (_NOT_IN_INSTANCE_ID.search(given) or len(longest) > MAX_INSTANCE_ID):
        raise ConfigError(
            f"{given!r} is not a group.instance.id Kafka accepts (each stream adds -N; at most "
            f"{MAX_INSTANCE_ID} characters of A-Z a-z 0-9 . _ -)",
            origin=cfg.origin,
            key="group.instance.id",
            fix="use a shorter id of those characters, or remove the key (kmirror then derives one)",
        )


def check_process(configs: list[ClientConfig]) -> None:
    """What one kmirror process needs of all its files together; `run` and `check-config` both call it.

    One Kerberos principal per process, and each Kerberos keytab really logs in (a wrong keytab, a
    principal it does not hold or an unreachable KDC is one clear line, not a mirror that retries forever).
    """
    check_one_kerberos_principal(configs)
    tried: set[tuple[str, str]] = set()
    for cfg in configs:
        settings = cfg.settings
        login = (settings.get("sasl.kerberos.keytab", ""), settings.get("sasl.kerberos.principal", ""))
        if login not in tried:
            tried.add(login)
            kerberos.check_login(cfg.settings, cfg.origin)


def topic_filter(cfg: ClientConfig, include: str | None, exclude: str | None) -> TopicFilter | None:
    """A source's topic filter as `run` uses it (None: none at all; `check-config` uses it too).

    --whitelist/--blacklist from the command line win over the consumer file's Kafka 0.7 keys
    mirror.topics.whitelist/blacklist, each on its own; a file key that loses is reported in the notes.
    """
    chosen: list[str | None] = []
    for given, option, key, in_file in (
        (include, "--whitelist", "mirror.topics.whitelist", cfg.include),
        (exclude, "--blacklist", "mirror.topics.blacklist", cfg.exclude),
    ):
        if given is not None:
            if in_file is not None:
                cfg.notes.append(f"{key}={in_file}: ignored ({option} given on the command line wins)")
            chosen.append(given)
            continue
        if in_file is not None:
            try:
                compile_filter(in_file, key)
            except ConfigError as exc:
                raise ConfigError(exc.problem, origin=cfg.origin, key=key, fix=exc.fix) from None
        chosen.append(in_file)
    if chosen[0] is None and chosen[1] is None:
        return None
    return TopicFilter(chosen[0], chosen[1])


def check_one_kerberos_principal(configs: list[ClientConfig]) -> None:
    """librdkafka keeps Kerberos tickets in the process's one default ticket cache: clients of one
    process that log in as different principals would overwrite each other's tickets."""
    principals: dict[str, str] = {}
    for cfg in configs:
        if kerberos.uses_gssapi(cfg.settings):
            principals.setdefault(cfg.settings.get("sasl.kerberos.principal", "kafkaclient"), cfg.origin)
    if len(principals) > 1:
        (first, first_file), (second, second_file) = list(principals.items())[:2]
        raise ConfigError(
            f"Kerberos principal {first!r} ({first_file}) differs from {second!r} ({second_file}); one "
            "process has one Kerberos ticket cache",
            origin=second_file,
            key="sasl.kerberos.principal",
            fix="use one principal for all the files of one kmirror process (one keytab may hold it), or "
            "run the sources as separate instances",
        )
