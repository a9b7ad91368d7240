"""The audit's pure parts: times and durations, offset ranges, time buckets. No Kafka, no Spark."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kmirror.errors import ConfigError

SOURCE = 0
TARGET = 1
SIDES = ("source", "target")

_UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d|w)$")
_RELATIVE = re.compile(r"^(?:now)?\s*-\s*(\d+(?:ms|s|m|h|d|w))$")
# Record timestamps older than this are not believable as epoch milliseconds (seconds by mistake).
_MIN_EPOCH_MS = 10_000_000_000


def parse_duration(text: str, option: str) -> int:
    """'10m' -> 600000. Units ms, s, m, h, d, w; a bare number is refused (ambiguous)."""
    m = _DURATION.match(text.strip().lower())
    if not m:
        raise ConfigError(
            f"invalid duration {text!r}", key=option, fix="give a number and a unit: 500ms, 30s, 10m, 2h, 1d"
        )
    value = int(m.group(1)) * _UNITS_MS[m.group(2)]
    if value <= 0:
        raise ConfigError(f"{text!r} is not a positive duration", key=option, fix="give e.g. 10m")
    return value


def parse_time(text: str, option: str, now_ms: int) -> int:
    """Epoch milliseconds from: an integer of milliseconds; ISO 8601 (no zone means UTC); 'now';
    '-2h' or 'now-2h' (relative to now)."""
    t = text.strip()
    if t.lower() == "now":
        return now_ms
    if re.fullmatch(r"-?\d+", t):
        value = int(t)
        if value < _MIN_EPOCH_MS and not t.startswith("-"):
            raise ConfigError(
                f"{t} looks like seconds, not milliseconds",
                key=option,
                fix=f"give epoch milliseconds ({value * 1000}) or an ISO 8601 time",
            )
        if not t.startswith("-"):
            return value
    m = _RELATIVE.match(t.lower())
    if m:
        return now_ms - parse_duration(m.group(1), option)
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"invalid time {text!r}",
            key=option,
            fix="give epoch milliseconds, an ISO 8601 time (2024-05-01T10:00:00Z), 'now' or '-2h'",
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def bucket_of(timestamp_ms: int, bucket_ms: int) -> int:
    """Start of the bucket holding the timestamp; buckets are aligned on the epoch (UTC)."""
    return timestamp_ms - timestamp_ms % bucket_ms


def output_dir(pattern: str, now: datetime) -> Path:
    """The output directory; strftime fields (%Y, %m, %d, %H, %M, %S) are filled with the UTC time, so a
    timer can write dated reports: --output /var/lib/kmirror/audit/%Y-%m-%dT%H%M."""
    return Path(now.astimezone(UTC).strftime(pattern) if "%" in pattern else pattern)


@dataclass(frozen=True, order=True)
class Span:
    """Offsets [start, end) of one partition of one cluster."""

    side: int
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)

    def as_list(self) -> list[object]:
        return [self.side, self.topic, self.partition, self.start, self.end]

    @classmethod
    def from_list(cls, v: list[object]) -> Span:
        return cls(int(v[0]), str(v[1]), int(v[2]), int(v[3]), int(v[4]))  # type: ignore[call-overload]


def planned_end(high_watermark: int, last_seen: int | None) -> int:
    """End of a partition: the high watermark, or past the last offset found by reading from
    high watermark - 1 to the end of the partition when that is further (brokers whose high watermark
    lags behind the log, such as the test broker, and records appended since)."""
    return max(high_watermark, last_seen + 1) if last_seen is not None else high_watermark


TASKS_PER_CORE = 2  # reading tasks per core: few consumers to start, and a slow one is caught up


def tasks(spans: Iterable[Span], max_records: int, cores: int) -> list[list[Span]]:
    """The reading tasks: each cluster's offsets cut into tasks of equal size (a task reads its ranges
    one after the other with one consumer, so a task never mixes clusters), about TASKS_PER_CORE tasks
    per core and none over `max_records` offsets. Largest first, so that the longest tasks start first."""
    if max_records < 1:
        raise ValueError("max_records must be positive")
    spans = [s for s in spans if s.size]
    total = sum(s.size for s in spans)
    size = max(1, min(max_records, -(-total // (TASKS_PER_CORE * max(1, cores)))))
    out: list[list[Span]] = []
    for side in sorted({s.side for s in spans}):
        mine = sorted((s for s in spans if s.side == side), key=lambda s: (s.topic, s.partition, s.start))
        offsets = sum(s.size for s in mine)
        count = max(1, round(offsets / size), -(-offsets // max_records))
        each = -(-offsets // count)  # the last task of the cluster may be a little smaller
        task: list[Span] = []
        room = each
        for s in mine:
            start = s.start
            while start < s.end:
                end = min(s.end, start + room)
                task.append(Span(s.side, s.topic, s.partition, start, end))
                room -= end - start
                start = end
                if room == 0:
                    out.append(task)
                    task, room = [], each
        if task:
            out.append(task)
    return sorted(out, key=lambda t: -sum(r.size for r in t))
