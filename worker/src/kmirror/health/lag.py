"""How far a mirror group is behind its source: committed offsets against log end offsets.

The same numbers as MirrorMaker's ConsumerOffsetChecker (Group, Topic, Pid, Offset, logSize, Lag,
Owner), read from the brokers instead of ZooKeeper. The group's committed offsets and members are asked
of its coordinator through :class:`kmirror.coordinator.GroupAdmin` (a helper process: librdkafka can abort
the asking process there, librdkafka issue 4605), so a crash is one line, exit 3.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from kmirror.authorization import authorization_error, refused
from kmirror.coordinator import GroupAdmin
from kmirror.errors import KmirrorError
from kmirror.health import rules as health
from kmirror.kafkaio import (
    client_log,
    error_line,
    has_list_offsets,
    listed_offsets,
    watermarks,
)

_LOG = client_log("lag")

NO_OFFSET = -1


class LagError(KmirrorError):
    """The group could not be read; `kmirror lag` exits 3 (UNKNOWN)."""

    exit_code = health.EXIT_UNKNOWN


@dataclass(frozen=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    offset: int  # committed offset, -1 when the group has committed nothing for the partition
    log_size: int  # log end offset (high watermark)
    lag: int
    owner: str  # member holding the partition, "none" when unassigned

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def compute(
    group: str,
    committed: Mapping[tuple[str, int], int],
    log_start: Mapping[tuple[str, int], int],
    log_end: Mapping[tuple[str, int], int],
    owners: Mapping[tuple[str, int], str],
) -> list[PartitionLag]:
    """Pure: one row per partition of log_end; with no commit, everything from the log start is lag."""
    rows = []
    for (topic, partition), end in sorted(log_end.items()):
        offset = committed.get((topic, partition), NO_OFFSET)
        start = log_start.get((topic, partition), 0)
        lag = max(0, end - max(offset, start))
        rows.append(
            PartitionLag(group, topic, partition, offset, end, lag, owners.get((topic, partition), "none"))
        )
    return rows


def group_lag(
    admin_conf: Mapping[str, str], group: str, topics: Iterable[str] | None = None, timeout: float = 10.0
) -> list[PartitionLag]:
    """Lag of every partition the group has committed, or of every partition of `topics`."""
    admin = AdminClient({**admin_conf, "logger": _LOG})
    groups = GroupAdmin(admin_conf, f"cluster {admin_conf.get('bootstrap.servers', '?')}")
    wanted: set[str] = set(topics or ())
    try:
        committed = groups.committed_offsets(group, timeout)
        wanted = set(topics) if topics is not None else {t for t, _ in committed}
        md = admin.list_topics(timeout=timeout)
        parts = [(t, p) for t in sorted(wanted) if t in md.topics for p in md.topics[t].partitions]
        if not parts:
            return []
        if has_list_offsets(admin):
            ends = listed_offsets(admin, parts, timeout)
            starts = listed_offsets(admin, parts, timeout, earliest=True)
        else:
            starts, ends = _watermarks(admin_conf, group, parts, timeout)
        owners = _owners(groups, group, timeout)
    except KmirrorError:
        raise
    except Exception as exc:
        err = authorization_error(exc)
        if err is not None:  # offsets, ends and members are DESCRIBE on the group and its topics
            resources = {"GROUP": group, "TOPIC": min(wanted) if wanted else "?"}
            cluster = f"cluster {admin_conf.get('bootstrap.servers', '?')}"
            raise refused(err, cluster, admin_conf, "DESCRIBE", resources).error("kmirror lag") from None
        raise KmirrorError(f"could not read the lag of group {group!r}: {error_line(exc)}") from None
    finally:
        groups.close()
    return compute(group, {k: v for k, v in committed.items() if k[0] in wanted}, starts, ends, owners)


def _watermarks(
    admin_conf: Mapping[str, str], group: str, parts: list[tuple[str, int]], timeout: float
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """Log start and end offsets from a consumer that never joins the group (clients without list_offsets)."""
    consumer = Consumer({**admin_conf, "group.id": group, "enable.auto.commit": False}, logger=_LOG)
    try:
        marks = watermarks(consumer, parts, timeout)
    finally:
        consumer.close()
    return {k: lo for k, (lo, _) in marks.items()}, {k: hi for k, (_, hi) in marks.items()}


def _owners(groups: GroupAdmin, group: str, timeout: float) -> dict[tuple[str, int], str]:
    described = groups.describe_group(group, timeout)
    owners: dict[tuple[str, int], str] = {}
    members = (described.members or []) if described is not None else []
    for member in members:
        assignment = member.assignment.topic_partitions if member.assignment else []
        for tp in assignment:
            owners[(tp.topic, tp.partition)] = f"{member.client_id}@{member.host.lstrip('/')}"
    return owners


def total(rows: Iterable[PartitionLag]) -> int:
    return sum(r.lag for r in rows)
