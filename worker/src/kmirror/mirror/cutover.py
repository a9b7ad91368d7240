"""The preflight of ``kmirror run``, before any stream starts: taking over from MirrorMaker.

1. **Foreign members.** The mirror group of each source is described. Members that are not kmirror's (a
   group protocol other than kmirror's ``partition.assignment.strategy``: MirrorMaker 1 alone uses range;
   or MirrorMaker 1's client ids ``GROUP-0``, ``GROUP-1``..., which it sets itself: see
   :func:`foreign_members`) mean an old mirror still runs: kmirror and it cannot share the group (their
   assignors differ, and both would copy). Refused with one line naming the group, the members and the
   fix; exit 2.
2. **Where each partition starts.** A partition with a committed offset in the group resumes there: the
   same ``group.id`` as MirrorMaker 1 resumes from its offsets. For the others,
   ``--initial.offsets`` says: ``reset`` (default) leaves them to the consumer file's
   ``auto.offset.reset`` (earliest: everything is copied); ``target-end`` starts each one after the
   source record that the target partition's last record is a copy of, so a copy made by another tool
   (MirrorMaker 2, whose progress is in Connect's offsets; MirrorMaker 1 with offsets in ZooKeeper; a
   first start beside an existing copy) is continued without copying it again.

``target-end`` needs a copy that keeps topics, partitions and order (MirrorMaker 2 with
IdentityReplicationPolicy does): the target's last record of ``T[p]`` is looked for in source ``T[p]``
(same key, value, headers and timestamp: the first source record at or after the timestamp's offset
that is equal in all four). Not found is refused with one line: the copy does not keep partitions
(MirrorMaker 1 places records by key hash) or holds other records. When identical records follow the
match, the first is taken (nothing is missed) and the distance to the last identical one is reported as
the most records that may be copied twice. The offsets are committed with Kafka's admin API, which
refuses while the group has members: only a stopped mirror's group is changed.

The group is described, its offsets read and committed through :class:`kmirror.coordinator.GroupAdmin`
(a helper process): librdkafka can abort the process making these requests when the coordinator's
connection fails (librdkafka issue 4605), and this one is the supervisor of ``kmirror run``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription

from kmirror.config import admin_settings
from kmirror.config.filters import TopicFilter
from kmirror.coordinator import GroupAdmin
from kmirror.errors import ConfigError
from kmirror.kafkaio import error_line, silent_log
from kmirror.mirror.plan import MirrorPlan

log = logging.getLogger(__name__)
# librdkafka's own lines of the preflight's clients are dropped: a cluster that does not answer is said once
# by the preflight, then by the streams (which wait for it).
_CLIENT_LOG = silent_log("kmirror.cutover.client")

RESET = "reset"
TARGET_END = "target-end"
INITIAL_OFFSETS = (RESET, TARGET_END)
DEFAULT_INITIAL_OFFSETS = RESET
RUNBOOK = "docs/runbooks/cutover-from-mirrormaker.md"
# librdkafka's client.id when a file sets none: what kmirror's streams show in a group then.
LIBRDKAFKA_CLIENT_ID = "rdkafka"
TIMEOUT_S = 15.0
PROBE_S = 5.0  # the first metadata request: a source that does not answer is said after this
# How many target records before the end are read to find the last one (control records of
# transactions and compaction leave gaps), and how many source records after the match are looked at
# for identical ones (the duplicates bound).
TAIL_WINDOW = 50
AFTER_MATCH = 1000


@dataclass(frozen=True)
class SourceGroup:
    """What the preflight needs of one source: its name, consumer file, settings and topic filter."""

    name: str
    origin: str
    settings: Mapping[str, str]
    topics: TopicFilter

    @property
    def group(self) -> str:
        return self.settings["group.id"]


@dataclass(frozen=True)
class Start:
    """Where one partition starts after ``target-end``: ``offset`` (the match + 1), and how many identical
    records follow the match (records that may be copied twice)."""

    topic: str
    partition: int
    offset: int
    target_end: int
    may_repeat: int


def foreign_members(described: ConsumerGroupDescription | None, settings: Mapping[str, str]) -> list[str]:
    """The group's members that are not kmirror's, as ``CLIENT_ID@HOST``.

    Every member, when the group's protocol (once chosen) is not one of kmirror's assignors (the consumer
    file's ``partition.assignment.strategy``, cooperative-sticky by default; MirrorMaker 1 alone: range)
    or the group is a KIP-848 (consumer-protocol) group. Otherwise the members whose client.id is
    MirrorMaker 1's (``GROUP-N``, which it sets itself) and not the one the consumer file gives kmirror's
    streams: a MirrorMaker 1 that joined a cooperative group. Other client ids are kmirror's on other
    hosts (the Ansible roles give each host its own)."""
    if described is None or not described.members:
        return []
    ours_id = settings.get("client.id", "").strip() or LIBRDKAFKA_CLIENT_ID
    assignors = {
        a.strip() for a in settings.get("partition.assignment.strategy", "cooperative-sticky").split(",")
    }
    protocol = described.partition_assignor or ""
    kind = getattr(getattr(described, "type", None), "name", "CLASSIC")
    other_protocol = kind not in ("CLASSIC", "UNKNOWN") or (protocol != "" and protocol not in assignors)
    mm1_id = re.compile(re.escape(settings.get("group.id", "")) + r"-\d+")
    return [
        f"{m.client_id}@{(m.host or '?').lstrip('/')}"
        for m in described.members
        if other_protocol or (m.client_id != ours_id and mm1_id.fullmatch(m.client_id or ""))
    ]


def check_group(source: SourceGroup, groups: GroupAdmin) -> ConsumerGroupDescription | None:
    """Refuse a mirror group that still has members that are not kmirror's; the description."""
    described = groups.describe_group(source.group, TIMEOUT_S)
    foreign = foreign_members(described, source.settings)
    if foreign and described is not None:
        protocol = described.partition_assignor or "none chosen yet"
        raise ConfigError(
            f"consumer group {source.group!r} of source {source.name} still has {len(foreign)} member(s) "
            f"that are not kmirror (group protocol {protocol}): {', '.join(sorted(foreign))}",
            origin=source.origin,
            key="group.id",
            fix="stop every MirrorMaker process (and any other consumer) of this group first, then start "
            f"kmirror: it resumes from their committed offsets ({RUNBOOK})",
        )
    return described


def selected_partitions(admin: AdminClient, topics: TopicFilter) -> dict[str, int]:
    md = admin.list_topics(timeout=TIMEOUT_S)
    return {
        t: len(m.partitions)
        for t, m in md.topics.items()
        if m.error is None and topics.matches(t) and m.partitions
    }


def _content(m: Message) -> tuple[object, ...]:
    return (m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1])


def _reader(settings: Mapping[str, str], group: str) -> Consumer:
    return Consumer(
        {
            **admin_settings(settings),
            "group.id": group,
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        },
        logger=_CLIENT_LOG,
    )


def _last_record(target: Consumer, topic: str, partition: int, lo: int, hi: int) -> Message | None:
    """The last data record of a target partition (offsets lo..hi-1), read from a window before hi."""
    tp = TopicPartition(topic, partition, max(lo, hi - TAIL_WINDOW))
    target.assign([tp])
    last: Message | None = None
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            for m in target.consume(TAIL_WINDOW, 0.5):
                if m.error() is None:
                    last = m
            if last is not None and last.offset() is not None and last.offset() >= hi - 1:
                break
            pos = target.position([TopicPartition(topic, partition)])[0].offset
            if pos >= hi:
                break
    finally:
        target.unassign()
    return last


def _find(source: Consumer, last: Message, hi: int) -> tuple[int, int] | None:
    """The first source offset whose record equals ``last`` (key, value, headers, timestamp), and the
    offset of the last identical record within AFTER_MATCH records after it; None if there is none
    before ``hi``."""
    topic, partition = last.topic(), last.partition()
    assert topic is not None and partition is not None
    ts = last.timestamp()[1]
    found = source.offsets_for_times([TopicPartition(topic, partition, ts)], timeout=TIMEOUT_S)[0]
    if found.offset < 0 or found.offset >= hi:  # no record with a timestamp >= ts
        return None
    want = _content(last)
    source.assign([TopicPartition(topic, partition, found.offset)])
    first: int | None = None
    latest: int | None = None
    pos = found.offset
    deadline = time.monotonic() + 5 * TIMEOUT_S
    try:
        while pos < hi and time.monotonic() < deadline:
            if first is not None and pos > first + AFTER_MATCH:
                break
            for m in source.consume(500, 0.5):
                if m.error() is not None:
                    continue
                off = m.offset()
                assert off is not None
                pos = off + 1
                if off < hi and _content(m) == want:
                    if first is None:
                        first = off
                    latest = off
    finally:
        source.unassign()
    if first is None or latest is None:
        return None
    return first, latest


def target_end_starts(
    source: SourceGroup,
    target_settings: Mapping[str, str],
    missing: Mapping[str, list[int]],
) -> list[Start]:
    """For each partition without a committed offset, where to start so that the target's copy is
    continued: the source offset after its last record. Partitions the target has nothing of are left
    out (they start at auto.offset.reset). Refuses (ConfigError) where the copy does not match."""
    starts: list[Start] = []
    probe = f"{source.group}-kmirror-cutover"
    target = _reader(target_settings, probe)
    src = _reader(source.settings, probe)
    try:
        target_md = target.list_topics(timeout=TIMEOUT_S)
        for topic, partitions in sorted(missing.items()):
            tmeta = target_md.topics.get(topic)
            if tmeta is None or tmeta.error is not None:
                log.info(
                    "%s: %s is not on the target yet: its partitions start at auto.offset.reset",
                    source.name,
                    topic,
                )
                continue
            for p in partitions:
                where = f"{topic}[{p}]"
                if p not in tmeta.partitions:
                    raise ConfigError(
                        f"--initial.offsets {TARGET_END}: the target's {topic} has {len(tmeta.partitions)} "
                        f"partitions, the source's more ({where} has no copy to continue): this copy "
                        "does not keep partitions",
                        origin=source.origin,
                        key="group.id",
                        fix=_fix_no_match(source.group),
                    )
                lo, hi = target.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S)
                last = _last_record(target, topic, p, lo, hi) if hi > lo else None
                if last is None:
                    log.info(
                        "%s: %s: nothing on the target yet: starts at auto.offset.reset", source.name, where
                    )
                    continue
                slo, shi = src.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S)
                found = _find(src, last, shi)
                if found is None:
                    raise ConfigError(
                        f"--initial.offsets {TARGET_END}: the target's last record of {where} (offset "
                        f"{last.offset()}, timestamp {last.timestamp()[1]}) is not in source partition "
                        f"{where} (offsets {slo}-{shi - 1}; same key, value, headers and timestamp): this "
                        "copy does not keep partitions and order (MirrorMaker 1 places records by key "
                        "hash) or holds other records",
                        origin=source.origin,
                        key="group.id",
                        fix=_fix_no_match(source.group),
                    )
                first, latest = found
                starts.append(Start(topic, p, first + 1, hi, latest - first))
    finally:
        target.close()
        src.close()
    return starts


def _fix_no_match(group: str) -> str:
    return (
        f"start without --initial.offsets {TARGET_END}: reuse the old mirror's group.id (its committed "
        f"offsets), or set group {group!r}'s offsets first (kafka-consumer-groups.sh --reset-offsets) "
        f"({RUNBOOK})"
    )


def commit_starts(groups: GroupAdmin, source: SourceGroup, starts: list[Start]) -> None:
    """Commit the starting offsets for the group; Kafka refuses while the group has members."""
    offsets = [TopicPartition(s.topic, s.partition, s.offset) for s in starts]
    try:
        failed = groups.alter_offsets(source.group, offsets, TIMEOUT_S)
    except KafkaException as exc:
        raise ConfigError(
            f"--initial.offsets {TARGET_END}: Kafka did not take the starting offsets of group "
            f"{source.group!r}: {error_line(exc)}",
            origin=source.origin,
            key="group.id",
            fix="stop every member of the group (MirrorMaker or kmirror) and start again",
        ) from None
    if failed:
        raise ConfigError(
            f"--initial.offsets {TARGET_END}: Kafka refused the starting offsets of "
            + ", ".join(f"{topic}[{partition}] ({error.str()})" for topic, partition, error in failed),
            origin=source.origin,
            key="group.id",
            fix="stop every member of the group (MirrorMaker or kmirror) and start again",
        )


def preflight(
    sources: list[SourceGroup], target_settings: Mapping[str, str], initial_offsets: str = RESET
) -> None:
    """Before the streams start: refuse a group shared with another mirror, say where the partitions
    start, and with ``target-end`` commit the starts of those without an offset."""
    for source in sources:
        admin = AdminClient({**admin_settings(source.settings), "logger": _CLIENT_LOG})
        with GroupAdmin(admin_settings(source.settings), f"source {source.name}") as groups:
            _preflight(source, admin, groups, target_settings, initial_offsets)


def _preflight(
    source: SourceGroup,
    admin: AdminClient,
    groups: GroupAdmin,
    target_settings: Mapping[str, str],
    initial_offsets: str,
) -> None:
    """The preflight of one source: its group checked, where its partitions start said (and committed
    with ``target-end``)."""
    try:
        # A first quick answer: a source that is down costs a few seconds here, not every timeout below.
        # With target-end a source that does not answer refuses the start, so it is given the full
        # timeout: a busy source (or machine) that answers in 6 s must not stop the mirror.
        admin.list_topics(timeout=TIMEOUT_S if initial_offsets == TARGET_END else PROBE_S)
        described = check_group(source, groups)
        selected = selected_partitions(admin, source.topics)
        committed = groups.committed_offsets(source.group, TIMEOUT_S)
    except KafkaException as exc:
        why = error_line(exc)
        if initial_offsets == TARGET_END:
            raise ConfigError(
                f"--initial.offsets {TARGET_END}: source {source.name} did not answer ({why}): the "
                "starting offsets cannot be found",
                origin=source.origin,
                key="bootstrap.servers",
                fix="start again once the source cluster answers (without the option its partitions "
                "would start at auto.offset.reset and be copied again)",
            ) from None
        # The preflight is a check, not the mirror: a source that does not answer now is the streams'
        # to report (they wait for it); the group check is skipped for this start.
        log.warning(
            "%s: could not check group %s before starting (%s): started without the check",
            source.name,
            source.group,
            why,
        )
        return
    _starts(
        source,
        groups,
        described,
        committed,
        selected,
        target_settings=target_settings,
        mode=initial_offsets,
    )


def _starts(
    source: SourceGroup,
    groups: GroupAdmin,
    described: ConsumerGroupDescription | None,
    committed: Mapping[tuple[str, int], int],
    selected: Mapping[str, int],
    *,
    target_settings: Mapping[str, str],
    mode: str,
) -> None:
    """Say where the partitions start; with target-end, find and commit the starts of those without an
    offset."""
    missing = {t: [p for p in range(n) if (t, p) not in committed] for t, n in selected.items()}
    missing = {t: ps for t, ps in missing.items() if ps}
    total = sum(selected.values())
    without = sum(len(ps) for ps in missing.values())
    log.info(
        "%s: group %s: %d of %d selected partitions resume from committed offsets; %d have none%s",
        source.name,
        source.group,
        total - without,
        total,
        without,
        "" if not without else f" (--initial.offsets {mode})",
    )
    if mode != TARGET_END or not missing:
        return
    members = described.members if described is not None else []
    if members:
        raise ConfigError(
            f"--initial.offsets {TARGET_END}: group {source.group!r} of source {source.name} has "
            f"{len(members)} running kmirror member(s) "
            f"({', '.join(sorted(f'{m.client_id}@{m.host.lstrip(chr(47))}' for m in members))}): "
            "their partitions already started",
            origin=source.origin,
            key="group.id",
            fix=f"stop every member first, or start without --initial.offsets {TARGET_END}",
        )
    try:
        starts = target_end_starts(source, target_settings, missing)
        if starts:
            commit_starts(groups, source, starts)
    except KafkaException as exc:
        raise ConfigError(
            f"--initial.offsets {TARGET_END}: reading the copy failed ({error_line(exc)}): nothing committed",
            origin=source.origin,
            key="group.id",
            fix="start again once both clusters answer",
        ) from None
    if not starts:
        return
    for s in starts:
        log.info(
            "%s: %s[%d]: the target's copy ends at offset %d; starting at source offset %d%s",
            source.name,
            s.topic,
            s.partition,
            s.target_end,
            s.offset,
            f" ({s.may_repeat} identical records follow: up to {s.may_repeat} copied twice)"
            if s.may_repeat
            else "",
        )
    log.info(
        "%s: group %s: --initial.offsets %s committed the start of %d partitions after the target's "
        "copy (at most %d records copied twice)",
        source.name,
        source.group,
        TARGET_END,
        len(starts),
        sum(s.may_repeat for s in starts),
    )


def sources_of(plan: MirrorPlan) -> list[SourceGroup]:
    """The preflight's view of a plan's sources."""
    return [
        SourceGroup(s.name, s.config.origin, dict(s.config.settings), s.topic_filter) for s in plan.sources
    ]
