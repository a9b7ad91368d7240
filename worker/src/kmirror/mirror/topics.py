"""Destination topics: created by kmirror with the source's partition count and topic configs, kept in step.

Never left to the target broker's auto-creation (which would use the broker's default partition count
and configs). A mirror is a replica, and the one rule of what is copied lives here
(:func:`replicable_configs`): the destination gets the configs **set on the source topic** (described with
source DYNAMIC_TOPIC_CONFIG: retention, cleanup policy, compression, ...); what the source topic inherits
from its brokers is not copied, so the destination inherits the target brokers' defaults there, as
MirrorMaker 2 does by default (``use.defaults.from=target``). A config removed from the source topic is
removed from the destination topic (back to the target's default). Never copied: read-only and sensitive
entries, and settings that describe the source cluster rather than the data (:data:`NOT_COPIED`,
:data:`NOT_COPIED_PREFIXES`); those are also never altered on the target. The same rule is used when a
topic is created (:func:`ensure`, the Ansible topics module) and while mirroring (:class:`ConfigSync`: a
source config change reaches the target at the next topic refresh, by incremental alter configs, in a
thread beside the stream loop). Once a destination topic exists, the keys ``--config.properties.protect``
names (retention, cleanup and segment settings by default: :mod:`kmirror.mirror.configguard`) follow the
source only where the copy keeps at least as much, so that a source topic's config cannot delete the
copy's records.

A source topic that gains partitions gets them on the target too (:func:`partitions_to_add`,
:func:`add_partitions`); where the target refuses, the engine routes the topic by key hash and reports the
mismatch. Used by the engine at every topic refresh, and by the Ansible topics module.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

try:  # confluent-kafka >= 2.2; the GSSAPI build for Kerberos hosts (2.0.2) cannot alter incrementally
    from confluent_kafka.admin import AlterConfigOpType
except ImportError:  # pragma: no cover - depends on the installed client
    AlterConfigOpType = None

from kmirror.errors import KmirrorError
from kmirror.kafkaio import error_line
from kmirror.lineage.rename import SAME_NAME, Rename
from kmirror.mirror.configguard import DEFAULT_GUARD, ConfigGuard

log = logging.getLogger(__name__)

# Cluster-specific settings (durability, throttles, tiered storage, format), and message.timestamp.*:
# LogAppendTime on the target would replace the source timestamps that kmirror copies.
NOT_COPIED = frozenset(
    {
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        "min.insync.replicas",
        "message.timestamp.type",
        "message.timestamp.difference.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms",
        "unclean.leader.election.enable",
        "remote.storage.enable",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "local.retention.ms",
        "local.retention.bytes",
        "message.format.version",
        # How the brokers answer old fetch versions; removed in Kafka 4.0, which refuses a topic naming it
        # (a 3.x source describes it for every topic: copied, it failed every mirror into a 4.x target).
        "message.downconversion.enable",
    }
)
NOT_COPIED_PREFIXES = ("confluent.",)
# A described entry's source when it is set on the topic itself (confluent-kafka gives the number).
_SET_ON_TOPIC = (ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


class TopicError(KmirrorError):
    pass


def replicable_configs(entries: Mapping[str, object]) -> dict[str, str]:
    """The rule of what is copied: the configs set on a topic (described with source
    DYNAMIC_TOPIC_CONFIG), except read-only and sensitive ones and those in :data:`NOT_COPIED` or starting
    with :data:`NOT_COPIED_PREFIXES`. Inherited values (broker defaults, static or dynamic broker
    configs) are never copied as overrides.

    Applied to both sides: a destination topic is in step when its replicable configs equal its source
    topic's (:func:`config_changes`)."""
    out = {}
    for name, entry in entries.items():
        if (
            name in NOT_COPIED
            or name.startswith(NOT_COPIED_PREFIXES)
            or getattr(entry, "source", None) not in _SET_ON_TOPIC
            or getattr(entry, "is_read_only", False)
            or getattr(entry, "is_sensitive", False)
        ):
            continue
        value = getattr(entry, "value", None)
        if value is not None:
            out[name] = str(value)
    return out


def partition_counts(admin: AdminClient, timeout: float = 10.0) -> dict[str, int]:
    md = admin.list_topics(timeout=timeout)
    return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}


def describe_configs(
    admin: AdminClient,
    topics: Iterable[str],
    timeout: float = 10.0,
) -> dict[str, dict[str, str]]:
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    if not resources:
        return {}
    out = {}
    for res, fut in admin.describe_configs(resources, request_timeout=timeout).items():
        out[res.name] = replicable_configs(fut.result())
    return out


def current_configs(
    admin: AdminClient, topics: Iterable[str], timeout: float = 10.0
) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """The topics' :func:`replicable_configs` (what is set on them), one request:
    ({topic: {name: value}}, {topic: error}). The same for a source and for a destination topic."""
    described, errors = described_configs(admin, topics, timeout)
    return {t: d.set for t, d in described.items()}, errors


@dataclass(frozen=True)
class TopicConfigs:
    """One topic's configs as described: its :func:`replicable_configs` (``set``), and the value of every
    entry whether set on the topic or inherited (``effective``; sensitive ones left out)."""

    set: dict[str, str]
    effective: dict[str, str]


def effective_configs(entries: Mapping[str, object]) -> dict[str, str]:
    """The value of every described entry, wherever it comes from (sensitive ones left out)."""
    out = {}
    for name, entry in entries.items():
        value = getattr(entry, "value", None)
        if value is not None and not getattr(entry, "is_sensitive", False):
            out[name] = str(value)
    return out


def described_configs(
    admin: AdminClient, topics: Iterable[str], timeout: float = 10.0
) -> tuple[dict[str, TopicConfigs], dict[str, str]]:
    """The topics' configs (:class:`TopicConfigs`), one request: ({topic: configs}, {topic: error})."""
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    if not resources:
        return {}, {}
    out: dict[str, TopicConfigs] = {}
    errors: dict[str, str] = {}
    for res, fut in admin.describe_configs(resources, request_timeout=timeout).items():
        try:
            entries = fut.result()
        except KafkaException as exc:
            errors[res.name] = error_line(exc)
            continue
        out[res.name] = TopicConfigs(replicable_configs(entries), effective_configs(entries))
    return out, errors


@dataclass(frozen=True)
class ConfigChange:
    """What makes a destination topic's configs equal to its source topic's replicable ones; ``held``: the
    protected ones it keeps instead ({key: (the source's value or None where the source no longer sets it,
    the destination's effective value or None)}, :mod:`kmirror.mirror.configguard`)."""

    set: dict[str, str] = field(default_factory=dict)
    delete: tuple[str, ...] = ()
    held: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.set or self.delete)

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in sorted(self.set.items())]
        parts += [f"{k} (back to the target's default)" for k in self.delete]
        return ", ".join(parts)


def config_changes(
    source: Mapping[str, str],
    target: Mapping[str, str],
    guard: ConfigGuard = DEFAULT_GUARD,
    effective: Mapping[str, str] | None = None,
) -> ConfigChange:
    """The changes that make ``target`` follow ``source``: both a topic's :func:`replicable_configs`
    (what is set on the destination topic, what is set on the source topic); ``effective``: the
    destination's values whether set or inherited (default ``target``).

    Every source config whose value differs on the target is set; every replicable config set on the target
    and not on the source is deleted, so the destination falls back to the target's default (a config
    removed on the source, or one set on the destination by hand). Settings :func:`replicable_configs`
    leaves out (e.g. a ``min.insync.replicas`` the target's operator set) are never touched. Keys the
    ``guard`` protects are set only where the destination keeps at least as much, and never deleted: the
    others are ``held``.
    """
    current = target if effective is None else effective
    to_set: dict[str, str] = {}
    held: dict[str, tuple[str | None, str | None]] = {}
    for k, v in source.items():
        if target.get(k) == v:
            continue
        if guard.takes(k, v, current.get(k)):
            to_set[k] = v
        else:
            held[k] = (v, current.get(k))
    to_delete = []
    for k in sorted(target):
        if k in source:
            continue
        if guard.protects(k):
            held[k] = (None, target[k])
        else:
            to_delete.append(k)
    return ConfigChange(to_set, tuple(to_delete), held)


def alter_configs(
    admin: AdminClient, changes: Mapping[str, ConfigChange], timeout: float = 10.0
) -> dict[str, str]:
    """Apply the changes by incremental alter configs (one request); returns the refusals {topic: reason}."""
    if AlterConfigOpType is None:  # never the non-incremental AlterConfigs: it resets every other config
        why = "this confluent-kafka client has no incremental alter configs (2.2 or later has)"
        return {topic: why for topic, change in changes.items() if change}
    resources = []
    for topic, change in changes.items():
        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in change.set.items()
        ]
        entries += [
            ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in change.delete
        ]
        if entries:
            resources.append(ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries))
    if not resources:
        return {}
    refused = {}
    for res, fut in admin.incremental_alter_configs(resources, request_timeout=timeout).items():
        try:
            fut.result()
        except KafkaException as exc:
            refused[res.name] = error_line(exc)
    return refused


class ConfigSync:
    """Keeps destination topic configs equal to the source's replicable ones while mirroring.

    Each :meth:`run` describes the source topics (one request) and compares them with what was last made
    equal on the target; only topics whose source configs changed (or that were never synced by this
    process) are described on the target (one request) and altered where they differ (one request): set
    where the source's value differs, deleted where the target has a replicable config the source has not;
    a key the ``guard`` protects only where the copy keeps at least as much (a change held back is logged
    once, as a warning naming the key, both values and the rule). A refusal (e.g. no ALTER_CONFIGS on the
    target) is logged once per topic and reason, retried at the next run, and never stops the mirror.

    Off the record path: :meth:`run` (called from the stream loop at each topic refresh) only starts
    :meth:`sync` in a thread of its own and returns. librdkafka sends DescribeConfigs to the node the
    metadata names as controller; when that node accepts connections but does not answer (frozen, or a
    black-holed network), each describe waited its whole timeout, and the stream loop with it: 10 s at
    every refresh (bench/config_sync_stall.py). One sync at a time: a refresh while the last one still
    waits starts none.
    """

    def __init__(
        self,
        source: AdminClient,
        target: AdminClient,
        label: str,
        timeout: float = 10.0,
        rename: Rename = SAME_NAME,
        *,
        guard: ConfigGuard = DEFAULT_GUARD,
    ) -> None:
        self.source, self.target, self.label, self.timeout = source, target, label, timeout
        self.rename = rename
        self.guard = guard
        self.synced: dict[str, dict[str, str]] = {}
        self._problems: dict[str, str] = {}
        self._held: dict[tuple[str, str], tuple[str | None, str | None]] = {}  # (topic, key): said for these
        self._thread: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        """A sync started by :meth:`run` has not finished yet."""
        return self._thread is not None and self._thread.is_alive()

    def run(self, topics: Iterable[str]) -> bool:
        """Start a :meth:`sync` of these topics in the background and return at once; False (nothing
        started) while the previous one still runs."""
        if self.busy:
            return False
        wanted = sorted(topics)
        self._thread = threading.Thread(
            target=self._sync_logged, args=(wanted,), name=f"config-sync {self.label}", daemon=True
        )
        self._thread.start()
        return True

    def _sync_logged(self, topics: list[str]) -> None:
        try:
            self.sync(topics)
        except Exception as exc:  # a thread's exception would otherwise be lost; retried at the next run
            self._problem("*", f"topic config sync failed: {exc!r}")

    def sync(self, topics: Iterable[str]) -> dict[str, ConfigChange]:
        """Bring the target configs of these topics in step (blocking); returns the changes applied."""
        wanted = sorted(topics)
        self.synced = {t: c for t, c in self.synced.items() if t in wanted}
        try:
            described, errors = current_configs(self.source, wanted, self.timeout)
            for t, reason in errors.items():
                self._problem(t, f"could not describe the source topic's configs: {reason}")
            todo = {t: c for t, c in described.items() if self.synced.get(t) != c}
            if not todo:
                return {}
            dest = {t: self.rename(t) for t in todo}
            on_target, errors = described_configs(self.target, dest.values(), self.timeout)
            for t, reason in errors.items():
                self._problem(t, f"could not describe the destination topic's configs: {reason}")
            changes = {
                t: config_changes(c, on_target[dest[t]].set, self.guard, on_target[dest[t]].effective)
                for t, c in todo.items()
                if dest[t] in on_target
            }
            altered = alter_configs(self.target, {dest[t]: c for t, c in changes.items() if c}, self.timeout)
            refused = {t: altered[d] for t, d in dest.items() if d in altered}
        except KafkaException as exc:
            self._problem("*", f"topic config sync failed: {error_line(exc)}")
            return {}
        applied = {}
        for t, change in changes.items():
            if t in refused:
                self._problem(
                    t,
                    f"could not alter the destination topic's configs ({change.describe()}): {refused[t]}; "
                    "grant the mirror principal ALTER_CONFIGS and DESCRIBE_CONFIGS on the target topics",
                )
                continue
            self.synced[t] = todo[t]
            self._say_held(t, dest[t], change.held)
            if self._problems.pop(t, None) is not None:
                log.info(
                    "%s: destination topic %s: configs in step with the source again", self.label, dest[t]
                )
            if change:
                applied[t] = change
                log.info(
                    "%s: destination topic %s follows the source: %s", self.label, dest[t], change.describe()
                )
        self._problems.pop("*", None)
        return applied

    def _say_held(self, topic: str, dest: str, held: dict[str, tuple[str | None, str | None]]) -> None:
        """One warning per protected key and source value that the destination did not take."""
        for key, (wanted, kept) in sorted(held.items()):
            if self._held.get((topic, key)) == (wanted, kept):
                continue
            self._held[(topic, key)] = (wanted, kept)
            log.warning(
                "%s: destination topic %s keeps %s=%s, not the source's %s: a protected config is %s "
                "(--config.properties.protect, docs/security.md); to follow the source, alter it on the "
                "target by hand",
                self.label,
                dest,
                key,
                kept if kept is not None else "(unset)",
                wanted if wanted is not None else "removal of it",
                self.guard.rule(key),
            )
        for topic_key in [k for k in self._held if k[0] == topic and k[1] not in held]:
            del self._held[topic_key]

    def _problem(self, topic: str, message: str) -> None:
        if self._problems.get(topic) != message:
            self._problems[topic] = message
            log.warning(
                "%s: %s%s (retried at each topic refresh)",
                self.label,
                "" if topic == "*" else f"topic {topic}: ",
                message,
            )


def partitions_to_add(source: Mapping[str, int], target: Mapping[str, int]) -> dict[str, int]:
    """Topics whose destination has fewer partitions than the source, with the total to ask the target for
    (Kafka can only add partitions: a destination with more is left alone, records keep their number)."""
    return {t: n for t, n in sorted(source.items()) if t in target and target[t] < n}


def add_partitions(admin: AdminClient, totals: Mapping[str, int], timeout: float = 30.0) -> dict[str, str]:
    """Ask the target for the partitions (one request); returns the refusals {topic: reason}.

    A topic that already has the count (another worker added them first) is not a refusal."""
    if not totals:
        return {}
    new = [NewPartitions(t, n) for t, n in totals.items()]
    refused = {}
    for name, fut in admin.create_partitions(new, request_timeout=timeout, operation_timeout=timeout).items():
        try:
            fut.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.INVALID_PARTITIONS:
                refused[name] = error_line(exc)
    return refused


def plan(
    wanted: Mapping[str, int], existing: Mapping[str, int], configs: Mapping[str, Mapping[str, str]]
) -> list[TopicSpec]:
    """Topics to create: those wanted that do not exist, with the source's partitions and configs."""
    return [TopicSpec(t, n, dict(configs.get(t, {}))) for t, n in sorted(wanted.items()) if t not in existing]


# A request that failed on the way to the target, not a refusal of the topic.
_ON_THE_WAY = frozenset({KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN})


def create(
    admin: AdminClient, specs: Iterable[TopicSpec], *, replication_factor: int = -1, timeout: float = 30.0
) -> list[str]:
    """Create topics; one that already exists (another worker won the race) is fine. Returns created names.
    A refusal is a :class:`TopicError`; a request that failed on the way (a cut link, a timeout) stays the
    KafkaException, which the stream asks again."""
    new = [
        NewTopic(
            s.name, num_partitions=s.partitions, replication_factor=replication_factor, config=dict(s.configs)
        )
        for s in specs
    ]
    if not new:
        return []
    created = []
    for name, fut in admin.create_topics(new, request_timeout=timeout, operation_timeout=timeout).items():
        try:
            fut.result()
            created.append(name)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.code() in _ON_THE_WAY or (err.retriable() and not err.fatal()):
                raise  # the request did not get its answer (a link cut): the caller asks again
            if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise TopicError(
                    f"could not create destination topic {name!r} on the target: {err.str()}; "
                    "grant the mirror principal CREATE on the target cluster or create the "
                    "topic beforehand"
                ) from None
    return created


def ensure(
    source: AdminClient,
    target: AdminClient,
    wanted: Mapping[str, int],
    *,
    replication_factor: int = -1,
    rename: Rename = SAME_NAME,
) -> dict[str, int]:
    """Make every wanted source topic's destination exist on the target; return the target's partition
    count of each (keyed by the source topic)."""
    existing = destination_counts(target, wanted, rename)
    missing = [t for t in wanted if t not in existing]
    configs = describe_configs(source, missing)
    specs = [TopicSpec(rename(s.name), s.partitions, s.configs) for s in plan(wanted, existing, configs)]
    for name in create(target, specs, replication_factor=replication_factor):
        spec = next(s for s in specs if s.name == name)
        log.info(
            "created destination topic %s (%d partitions, configs %s)",
            name,
            spec.partitions,
            spec.configs or "{}",
        )
    if specs:
        existing = destination_counts(target, wanted, rename)
    return {t: existing[t] for t in wanted if t in existing}


def destination_counts(
    target: AdminClient, topics: Iterable[str], rename: Rename = SAME_NAME, timeout: float = 10.0
) -> dict[str, int]:
    """The target's partition count of each source topic's destination that exists (keyed by source topic)."""
    counts = partition_counts(target, timeout)
    return {t: counts[rename(t)] for t in topics if rename(t) in counts}
