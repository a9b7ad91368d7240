"""Destination topics: created by kmirror with the source's partition count and topic configs.

Never left to the target broker's auto-creation (which would use the broker's default partition count
and configs). A mirror is a replica: the destination gets the source topic's effective topic-level
configs (retention, cleanup policy, compression, ...), whether they were set on the topic or inherited
from the source brokers, so it behaves the same whatever the target brokers' defaults are. Settings
that describe the source cluster rather than the data are not copied (:data:`NOT_COPIED`).
Used by the engine before it subscribes to a topic, and by the Ansible topics module.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from kmirror.errors import KmirrorError

log = logging.getLogger(__name__)

# Cluster-specific settings, and message.timestamp.type: LogAppendTime on the target would replace the
# source timestamps that kmirror copies.
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
        "local.retention.ms",
        "local.retention.bytes",
        "message.format.version",
    }
)
NOT_COPIED_PREFIXES = ("confluent.",)


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


class TopicError(KmirrorError):
    pass


def replicable_configs(entries: Mapping[str, object]) -> dict[str, str]:
    """The described topic configs a destination topic is created with."""
    out = {}
    for name, entry in entries.items():
        if (
            name in NOT_COPIED
            or name.startswith(NOT_COPIED_PREFIXES)
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


def plan(
    wanted: Mapping[str, int], existing: Mapping[str, int], configs: Mapping[str, Mapping[str, str]]
) -> list[TopicSpec]:
    """Topics to create: those wanted that do not exist, with the source's partitions and configs."""
    return [TopicSpec(t, n, dict(configs.get(t, {}))) for t, n in sorted(wanted.items()) if t not in existing]


def create(
    admin: AdminClient, specs: Iterable[TopicSpec], *, replication_factor: int = -1, timeout: float = 30.0
) -> list[str]:
    """Create topics; one that already exists (another worker won the race) is fine. Returns created names."""
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
            if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise TopicError(
                    f"could not create destination topic {name!r} on the target: {err.str()}; "
                    "grant the mirror principal CREATE on the target cluster or create the "
                    "topic beforehand"
                ) from None
    return created


def ensure(
    source: AdminClient, target: AdminClient, wanted: Mapping[str, int], *, replication_factor: int = -1
) -> dict[str, int]:
    """Make every wanted topic exist on the target; return the target's partition count of each."""
    existing = partition_counts(target)
    missing = [t for t in wanted if t not in existing]
    specs = plan(wanted, existing, describe_configs(source, missing))
    for name in create(target, specs, replication_factor=replication_factor):
        spec = next(s for s in specs if s.name == name)
        log.info(
            "created destination topic %s (%d partitions, configs %s)",
            name,
            spec.partitions,
            spec.configs or "{}",
        )
    if specs:
        existing = partition_counts(target)
    return {t: existing[t] for t in wanted if t in existing}
