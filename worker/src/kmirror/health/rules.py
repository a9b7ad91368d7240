"""Burrow-style health of a consumer group, evaluated over a sliding window of lag samples. Pure.

LinkedIn's Burrow judges a group by how its committed offsets and lag *move*, not by a lag threshold
(wiki "Consumer Lag Evaluation Rules"; its evaluator applies them in order of severity). kmirror samples
the group (committed offset, log end offset, lag, whether a live consumer holds the partition) every
interval and keeps the last N samples per partition. Per partition, in this order:

1. REWIND: the current lag is non-zero and the committed offset went backwards within the window
   without coming back to where it was (Burrow checks this before rule 2, since its PR #716, so that a
   reset after a period of zero lag is still seen).
2. OK: the current lag is zero, or the lag was zero at any sample of the window.
3. OK, warming up: fewer than N samples yet (no trend is called on a partial window; ``complete``
   tells how full it is).
4. STOP: no live consumer holds the partition and the time since the committed offset last moved is
   longer than the span during which it moved (Burrow: "now minus the last commit is more than the last
   commit minus the first"). The brokers do not tell when an offset was committed; kmirror takes "no
   live member owns the partition" for "no longer committing" (on brokers that return no member
   assignments, an empty group).
5. STALL: the committed offset did not move over the whole window while a consumer is still there
   (Burrow: it keeps committing the same offset).
6. WARN: the offsets advance but the lag never decreased from one sample to the next over the window
   (the consumer is slower than the producers).
7. OK otherwise.

The group's status is Burrow's: OK, WARN when the worst partition is WARN, ERR when the worst is STOP,
STALL or REWIND. ``NOTFOUND`` when the group has nothing to evaluate.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import pairwise


class Status(IntEnum):
    """Partition and group statuses, in Burrow's order of severity."""

    NOTFOUND = 0
    OK = 1
    WARN = 2
    ERR = 3
    STOP = 4
    STALL = 5
    REWIND = 6


# Exit codes of `kmirror lag --watch`, in the Nagios plugin convention monitoring systems understand.
EXIT_OK = 0
EXIT_WARN = 1
EXIT_ERR = 2
EXIT_UNKNOWN = 3  # the group could not be read or does not exist


@dataclass(frozen=True)
class Sample:
    """One observation of one partition of a group."""

    timestamp: float  # seconds since the epoch when the sample was taken
    offset: int  # committed offset, -1 when nothing was committed
    log_size: int  # log end offset
    lag: int
    consumed: bool  # a live consumer holds the partition


@dataclass(frozen=True)
class PartitionHealth:
    status: Status
    reason: str
    complete: float  # fraction of the window filled
    samples: int
    current_lag: int

    def as_dict(self) -> dict[str, object]:
        return {
            "status": self.status.name,
            "reason": self.reason,
            "complete": round(self.complete, 3),
            "samples": self.samples,
            "current_lag": self.current_lag,
        }


def _rewound(samples: Sequence[Sample]) -> tuple[int, int] | None:
    """(from, to) of the last rewind in the window that was not made good: an offset lower than the one
    before it, after which the offset did not get back to the value it had before the rewind."""
    found = None
    for prev, cur in pairwise(samples):
        if cur.offset < prev.offset:
            found = (prev.offset, cur.offset)
        elif found is not None and cur.offset >= found[0]:
            found = None
    return found


def evaluate(samples: Sequence[Sample], window: int, now: float | None = None) -> PartitionHealth:
    """The status of one partition from its last samples (oldest first); `now` defaults to the newest."""
    if not samples:
        return PartitionHealth(Status.NOTFOUND, "no samples", 0.0, 0, 0)
    samples = list(samples)[-window:]
    last = samples[-1]
    now = last.timestamp if now is None else now
    complete = min(1.0, len(samples) / window)

    def result(status: Status, reason: str) -> PartitionHealth:
        return PartitionHealth(status, reason, complete, len(samples), last.lag)

    rewind = _rewound(samples)
    if last.lag > 0 and rewind is not None:
        return result(Status.REWIND, f"committed offset went back from {rewind[0]} to {rewind[1]}")
    if last.lag == 0:
        return result(Status.OK, "no lag")
    if any(s.lag == 0 for s in samples):
        return result(Status.OK, "lag was zero within the window")
    if len(samples) < window:
        return result(Status.OK, f"warming up ({len(samples)}/{window} samples)")
    moves = [cur.timestamp for prev, cur in pairwise(samples) if cur.offset != prev.offset]
    first = samples[0].timestamp
    last_move = moves[-1] if moves else first
    if not last.consumed and now - last_move > last_move - first:
        idle = now - last_move
        why = f"no consumer; offset {last.offset} unchanged for {idle:.1f} s with lag {last.lag}"
        return result(Status.STOP, why)
    if not moves:
        return result(Status.STALL, f"offset {last.offset} unchanged over the window with lag {last.lag}")
    if all(cur.lag >= prev.lag for prev, cur in pairwise(samples)):
        return result(Status.WARN, f"lag never decreased over the window ({samples[0].lag} -> {last.lag})")
    return result(Status.OK, "lag decreasing")


def group_status(partitions: Iterable[PartitionHealth]) -> tuple[Status, Status]:
    """(group status, worst partition status): ERR when any partition is STOP, STALL or REWIND."""
    worst = max((p.status for p in partitions), default=Status.NOTFOUND)
    if worst > Status.ERR:
        return Status.ERR, worst
    return worst, worst


def exit_code(status: Status) -> int:
    return {
        Status.OK: EXIT_OK,
        Status.WARN: EXIT_WARN,
        Status.ERR: EXIT_ERR,
        Status.STOP: EXIT_ERR,
        Status.STALL: EXIT_ERR,
        Status.REWIND: EXIT_ERR,
    }.get(status, EXIT_UNKNOWN)


Key = tuple[str, int]


@dataclass
class Window:
    """The last `size` samples of every partition of one group."""

    size: int
    samples: dict[Key, deque[Sample]] = field(default_factory=dict)

    def add(self, observed: Mapping[Key, Sample]) -> None:
        """Record one round of samples; partitions the group no longer has are forgotten."""
        for key in list(self.samples):
            if key not in observed:
                del self.samples[key]
        for key, sample in observed.items():
            self.samples.setdefault(key, deque(maxlen=self.size)).append(sample)

    def evaluate(self, now: float | None = None) -> dict[Key, PartitionHealth]:
        return {key: evaluate(list(s), self.size, now) for key, s in sorted(self.samples.items())}

    def to_json(self) -> dict[str, object]:
        return {
            "size": self.size,
            "partitions": [
                {"topic": t, "partition": p, "samples": [list(_row(s)) for s in q]}
                for (t, p), q in sorted(self.samples.items())
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object], size: int) -> Window:
        w = cls(size)
        for part in data.get("partitions", []):  # type: ignore[attr-defined]
            q: deque[Sample] = deque(maxlen=size)
            for ts, off, end, lag, consumed in part["samples"]:
                q.append(Sample(float(ts), int(off), int(end), int(lag), bool(consumed)))
            w.samples[(str(part["topic"]), int(part["partition"]))] = q
        return w


def _row(s: Sample) -> tuple[float, int, int, int, bool]:
    return (s.timestamp, s.offset, s.log_size, s.lag, s.consumed)


# ---------------------------------------------------------------------------------------- ownership


def unowned(state: str, members_listed: bool, owners: Mapping[Key, str]) -> list[Key]:
    """The partitions no member of the group owns: those without an owner when the broker lists the
    members; every partition when the group has no live member (EMPTY, DEAD); none when a live group's
    broker lists no members (it cannot tell)."""
    if members_listed:
        return sorted(k for k, owner in owners.items() if owner == "none")
    if state in ("EMPTY", "DEAD"):
        return sorted(owners)
    return []
