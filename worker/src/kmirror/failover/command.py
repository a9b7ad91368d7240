"""kmirror failover: move a consumer group from a source cluster to the target at the translated offsets.

    kmirror failover --source.config F --target.config F --group G [--json] [--apply]

F are the mirror's own consumer file (its group.id names the mirror's sync data; its brokers are the
source) and producer file (the target). Shows, per partition, the group's committed offset on the
source (read from the source when it answers within --source.timeout, else the last checkpoint the
mirror's group offset sync wrote to the target), the sync point it translates through, the translated
target offset, the group's committed offset on the target now, the checkpoint's age and the lag on the
target. With --apply, commits the translated offsets for the group on the target (only where they move
the group forward; a group is never moved backwards). Works when the source cluster is gone.

Exit codes: 0 done; 1 the target cannot be read or written; 2 bad configuration or options;
3 the group has active members on the target (--apply refused: stop them first);
4 unknown group, or no sync data for the mirror on the target (was kmirror run with --groups?).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from kmirror.commandline import Parser, add_command, add_file_option, seconds
from kmirror.config import admin_settings, load_client_config
from kmirror.coordinator import GroupAdmin
from kmirror.errors import Command, KmirrorError
from kmirror.failover import failback
from kmirror.failover.clusters import probe_conf, quiet, read_sync_data, reader_conf
from kmirror.failover.offsetsync import SYNC_TOPIC, Gap, Row, SyncData, build_rows
from kmirror.kafkaio import error_line, is_active, silenced, true_ends
from kmirror.lineage.provenance import origin_of

EXIT_TARGET = 1
EXIT_ACTIVE = 3
EXIT_NO_DATA = 4

ROW_FORMAT = "%-20s %-4s %-12s %-10s %-12s %-12s %-12s %-8s %-12s %-10s %s"
HEADER = (
    "Topic",
    "Pid",
    "SourceOffset",
    "From",
    "SyncPoint",
    "Translated",
    "OnTarget",
    "Age",
    "LogEnd",
    "Lag",
    "Action",
)


class FailoverError(KmirrorError):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def table(rows: list[Row]) -> str:
    lines = [ROW_FORMAT % HEADER]
    for r in rows:
        lines.append(
            ROW_FORMAT
            % (
                r.topic,
                r.partition,
                r.source_offset,
                r.source_from,
                "-" if r.sync_point is None else r.sync_point,
                "-" if r.translated is None else r.translated,
                r.on_target if r.on_target >= 0 else "none",
                "-" if r.age_s is None else f"{r.age_s:.0f}s",
                r.log_end,
                r.lag,
                r.action,
            )
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- command


def register(subparsers: argparse._SubParsersAction[Parser]) -> argparse.ArgumentParser:
    p = add_command(
        subparsers,
        "failover",
        help="show or apply a consumer group's translated offsets on the target (disaster recovery)",
        description=__doc__,
    )
    add_file_option(
        p,
        "--source.config",
        "the mirror's consumer properties (its group.id names the sync data; the source's brokers)",
    )
    add_file_option(p, "--target.config", "the mirror's producer properties")
    p.add_argument("--group", required=True, help="the application's consumer group")
    p.add_argument("--apply", action="store_true", help="commit the translated offsets on the target")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--timeout", type=seconds(), default=10.0, metavar="S", help="target request timeout (default 10)"
    )
    p.add_argument(
        "--source.timeout",
        dest="source_timeout",
        type=seconds(),
        default=5.0,
        metavar="S",
        help="how long to try the source before using the checkpoints (default 5)",
    )
    failback.register(subparsers)  # its companion for the way back
    return p


def _source_offsets(
    settings: Mapping[str, str], group: str, timeout: float
) -> dict[tuple[str, int], int] | None:
    """The group's committed offsets on the source, or None when the source does not answer."""
    conf = dict(admin_settings(settings))
    conf["socket.connection.setup.timeout.ms"] = str(int(timeout * 1000))
    try:
        with GroupAdmin(conf, "the source cluster") as groups:
            return groups.committed_offsets(group, timeout)
    except Exception:
        return None


# Records read forward from a sync point's translation to find the copy of the group's record by its
# provenance header; past this the sync point's (safe) translation is kept.
HEADER_SCAN = 1_000_000


def _cluster_id(settings: Mapping[str, str], timeout: float) -> str | None:
    """The source's cluster id (None when it does not answer)."""
    conf = dict(admin_settings(settings))
    conf["socket.connection.setup.timeout.ms"] = str(int(timeout * 1000))
    try:
        return AdminClient({**conf, "logger": quiet}).list_topics(timeout=timeout).cluster_id or None
    except KafkaException:
        return None


def by_headers(
    rows: list[Row], target: Mapping[str, str], data: SyncData, live_id: str | None, timeout: float
) -> list[Row]:
    """Each translation made exact where the copies carry provenance headers (--provenance.header.enable):
    from the sync point's translation T (never past the copy of the group's record C) read forward to
    the first copy of this source partition whose origin offset is at least C. Only headers naming the
    source cluster count: the one the mirror recorded in its sync points, else the live source's id; with
    neither (the source is gone and the mirror predates the record), no header is read. A header is no
    proof (anyone who writes to the target can put one there), but none can make this skip a record: T
    is safe, and a header read there can only stop the scan earlier. A partition whose copies carry no
    header keeps T."""
    reader = Consumer({**reader_conf(target), "enable.partition.eof": True}, logger=quiet)
    out = []
    try:
        for r in rows:
            source_id = data.store.source_cluster(r.topic, r.partition) or live_id
            if r.translated is None or r.translated >= r.log_end or source_id is None:
                out.append(r)
                continue
            found = _first_copy_from(reader, r, source_id, timeout)
            out.append(r if found is None else r.exact(found))
    finally:
        reader.close()
    return out


def _first_copy_from(reader: Consumer, r: Row, source_id: str, timeout: float) -> int | None:
    """The target offset of the first copy at or after r.translated of a source record at or after
    r.source_offset (r.log_end when every copy there is of an earlier record); None without headers."""
    assert r.translated is not None
    reader.assign([TopicPartition(r.topic, r.partition, r.translated)])
    seen_header = False
    read = 0
    deadline = time.monotonic() + timeout
    while read < HEADER_SCAN and time.monotonic() < deadline:
        for m in reader.consume(500, 0.5):
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return r.log_end if seen_header else None
                raise KafkaException(err)
            read += 1
            origin = origin_of(m.headers())
            if origin is None or origin != (source_id, r.topic, r.partition, origin.offset):
                continue  # another cluster's copy, or no copy of this partition
            seen_header = True
            if origin.offset >= r.source_offset:
                return m.offset()
        if not seen_header and read > 1000:
            return None  # no copy with a header among the first records: a mirror without provenance
    return None


@dataclass
class Plan:
    """What `kmirror failover` found for one group: its rows and the state around them."""

    group: str
    mirror: str
    live: dict[tuple[str, int], int] | None  # the group's offsets read from the source (None: checkpoints)
    state: str
    members: int
    rows: list[Row]
    gaps: list[Gap]


def _sync_data(target: Mapping[str, str], mirror: str, timeout: float) -> SyncData:
    where = target.get("bootstrap.servers")
    try:
        data = read_sync_data(target, mirror, timeout)
    except KafkaException as exc:
        raise FailoverError(f"target cluster {where}: {error_line(exc)}", EXIT_TARGET) from None
    if not len(data.store):
        raise FailoverError(
            f"no offset sync data for mirror group {mirror!r} on the target ({where}, topic {SYNC_TOPIC}); "
            "run the mirror with --groups (and give its consumer file as --source.config)",
            EXIT_NO_DATA,
        )
    return data


def _group_offsets(
    data: SyncData, source: Mapping[str, str], group: str, mirror: str, timeout: float
) -> dict[tuple[str, int], int] | None:
    """The group's offsets on the source of the partitions the mirror syncs (None: use the checkpoints)."""
    live = _source_offsets(source, group, timeout)
    if live is not None:  # only partitions the mirror has sync points for
        live = {k: v for k, v in live.items() if data.store.has(*k)}
    if not live and not data.group_checkpoints(group):
        why = "the source does not answer" if live is None else "it has no offsets on mirrored topics"
        raise FailoverError(
            f"unknown group {group!r}: no checkpoint of mirror {mirror!r} for it and {why}; check the name "
            "and that it matches kmirror run --groups",
            EXIT_NO_DATA,
        )
    return live or None  # the source answers but has nothing: the checkpoints


def plan(a: argparse.Namespace, source: Mapping[str, str], target: Mapping[str, str]) -> Plan:
    """Read both clusters and translate the group's offsets (nothing is changed)."""
    mirror, group = source["group.id"], a.group
    where = target.get("bootstrap.servers")
    if group == mirror or group.startswith("__"):
        raise FailoverError(
            f"group {group!r} is the mirror's own or an internal group; it is never failed over", 2
        )
    data = _sync_data(target, mirror, a.timeout)
    live = _group_offsets(data, source, group, mirror, a.source_timeout)
    admin = AdminClient({**admin_settings(target), "logger": quiet})
    try:
        with GroupAdmin(admin_settings(target), "the target cluster") as groups:
            state, members = groups.group_state(group, a.timeout)
            on_target = groups.committed_offsets(group, a.timeout)
        parts = set(data.group_checkpoints(group)) | set(live or {})
        probe = Consumer(probe_conf(target), logger=quiet)
        try:
            ends = true_ends(admin, probe, sorted(p for p in parts if data.store.has(*p)), a.timeout)
        finally:
            probe.close()
        rows = build_rows(
            data,
            group,
            source_committed=live,
            target_committed=on_target,
            log_ends=ends,
            now_ms=int(time.time() * 1000),
        )
        rows = by_headers(rows, target, data, _cluster_id(source, a.source_timeout), a.timeout)
    except KafkaException as exc:
        raise FailoverError(f"target cluster {where}: {error_line(exc)}", EXIT_TARGET) from None
    # Ranges the mirror could not copy that the group had not read yet: it will not find them on the target.
    at = {(r.topic, r.partition): r.source_offset for r in rows}
    gaps = [
        g
        for g in data.gaps
        if (g.topic, g.partition) in at and g.lost and g.last >= at[(g.topic, g.partition)]
    ]
    return Plan(group, mirror, live, state, members, rows, gaps)


def apply(p: Plan, target: Mapping[str, str], timeout: float) -> list[TopicPartition]:
    """Commit the translated offsets that move the group forward (refused while it has members)."""
    if is_active(p.state, p.members):
        raise FailoverError(
            f"group {p.group!r} has {p.members} active member(s) on the target (state {p.state}); stop its "
            "consumers there, then run again",
            EXIT_ACTIVE,
        )
    applied = [TopicPartition(r.topic, r.partition, r.translated) for r in p.rows if r.action == "commit"]
    if applied:
        try:
            with GroupAdmin(admin_settings(target), "the target cluster") as groups:
                groups.alter_offsets(p.group, applied, timeout)
        except KafkaException as exc:
            where = target.get("bootstrap.servers")
            raise FailoverError(
                f"committing group {p.group!r} on the target ({where}): {error_line(exc)}", EXIT_TARGET
            ) from None
    return applied


def report(p: Plan, applied: list[TopicPartition] | None) -> dict[str, object]:
    """The --json document."""
    return {
        "group": p.group,
        "mirror": p.mirror,
        "source": "reachable" if p.live is not None else "unreachable",
        "target_state": p.state,
        "active": is_active(p.state, p.members),
        "applied": applied is not None,
        "committed": len(applied or []),
        "partitions": [r.as_dict() for r in p.rows],
        "untranslated": [f"{r.topic}/{r.partition}" for r in p.rows if r.translated is None],
        "gaps": [g.as_dict() for g in p.gaps],
    }


def text(p: Plan, applied: list[TopicPartition] | None) -> list[str]:
    """The report for a terminal."""
    origin = "read from the source" if p.live is not None else "source unreachable: from the last checkpoints"
    head = f"group {p.group} (mirror {p.mirror}; offsets {origin}; on the target: state {p.state})"
    out = [head, table(p.rows)]
    out += [
        f"gap: {g.topic}/{g.partition} offsets {g.first}..{g.last} ({g.last - g.first + 1} records) were "
        "purged on the source before they were mirrored: the group will not find them on the target "
        "(docs/runbooks/source-gap.md)"
        for g in p.gaps
    ]
    if is_active(p.state, p.members):
        out.append(f"note: the group has {p.members} active member(s) on the target; --apply is refused")
    if applied is not None:
        out.append(f"committed {len(applied)} partition(s) for group {p.group} on the target")
    else:
        out.append("(nothing changed; --apply commits the partitions marked commit)")
    return out


def cmd_failover(a: argparse.Namespace) -> int:
    source = load_client_config(a.source_config, "consumer", allow_unsafe=True).settings
    target = load_client_config(a.target_config, "producer", allow_unsafe=True).settings
    # librdkafka's own lines (a broker refusing connections, ...) are not the operator's: the command says
    # what failed in its one line (the mirror's group sync logs them, through the same loggers).
    with silenced("kmirror.librdkafka"):
        p = plan(a, source, target)
        applied = apply(p, target, a.timeout) if a.apply else None
    if a.json:
        print(json.dumps(report(p, applied), indent=2))
    else:
        print("\n".join(text(p, applied)))
    return 0


COMMANDS = {"failover": Command(cmd_failover), **failback.COMMANDS}
