"""The mirror's source gaps, for the audit: ranges the mirror could not copy because the source no longer
had them (kmirror.mirror.gaps), read from the sync topic on the target (written with ``kmirror run
--groups``; kmirror.failover.offsetsync :class:`Gap`).

Records purged on the source before they were mirrored are on neither cluster, so the comparison cannot
see them: the report names them from these records instead, as **lost on the source before mirroring**,
never as missing on the target. The sync records are keyed by the mirror's consumer group: the group.id
of ``--source.config`` (the mirror's consumer file), as for ``kmirror failover``. Without one, or without
the sync topic, the audit runs as before and says that gaps were not read (or that there were none).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaException

from kmirror.audit.scope import iso
from kmirror.config.filters import TopicFilter
from kmirror.failover.offsetsync import SYNC_TOPIC, Gap


@dataclass
class SourceGaps:
    """The gaps of the audited topics and window, and where they were looked for."""

    mirror: str | None  # the mirror's group (None: --source.config names none: not read)
    gaps: list[Gap] = field(default_factory=list)
    error: str | None = None  # the sync topic could not be read: one line

    def as_dict(self) -> dict[str, object]:
        """report.json's ``source_gaps``: where they were read from, and whether."""
        if self.mirror is None:
            status = "not read: --source.config has no group.id (give the mirror's consumer file)"
        elif self.error is not None:
            status = f"not read: {self.error}"
        else:
            status = "read"
        return {"mirror": self.mirror, "topic": SYNC_TOPIC, "status": status}


def in_window(gaps: Iterable[Gap], topics: TopicFilter, from_ms: int | None) -> list[Gap]:
    """The gaps of the audited topics that the mirror met at or after ``from_ms`` (the records it lost
    were written before it met the gap: an older gap cannot hold records of the window), in order of
    topic, partition and offset; a gap recorded twice (two streams, a restart) once."""
    seen: dict[tuple[str, int, int, int, bool], Gap] = {}
    for g in gaps:
        if not topics.matches(g.topic) or (from_ms is not None and g.ms < from_ms):
            continue
        key = (g.topic, g.partition, g.first, g.last, g.lost)
        if key not in seen or g.ms < seen[key].ms:
            seen[key] = g
    return [seen[k] for k in sorted(seen)]


def gap_row(g: Gap) -> dict[str, object]:
    """One gap in report.json's ``gaps``."""
    return {
        **g.as_dict(),
        "at": iso(g.ms),
        "kind": "lost" if g.lost else "no longer on the source",
    }


def describe(g: Mapping[str, object]) -> str:
    """One line of a gap (report.json's row), for stdout and the page."""
    what = (
        "lost on the source before mirroring (purged before the mirror copied them; on neither cluster)"
        if g["lost"]
        else "no longer on the source (truncated or recreated; mirrored again from the log start, not lost)"
    )
    return (
        f"gap: {g['topic']}/{g['partition']} offsets {g['first']}..{g['last']} ({g['records']:,} records) "
        f"{what}; met by the mirror at {g['at']}"
    )


def read(
    target: Mapping[str, str], mirror: str | None, topics: TopicFilter, from_ms: int | None, timeout: float
) -> SourceGaps:
    """The mirror's gaps from the target's sync topic (none when it has no such topic). A target that
    refuses or fails the read gives an error line in the report, never a failed audit."""
    if not mirror:
        return SourceGaps(None)
    from kmirror.failover.clusters import read_sync_data
    from kmirror.kafkaio import error_line

    try:
        data = read_sync_data(target, mirror, timeout)
    except KafkaException as exc:
        return SourceGaps(mirror, error=f"{SYNC_TOPIC} on the target: {error_line(exc)}")
    return SourceGaps(mirror, in_window(data.gaps, topics, from_ms))
