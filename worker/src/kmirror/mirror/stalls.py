"""Partitions the stream's consumer stopped fetching, found in librdkafka's own statistics.

librdkafka's fetcher can stay stuck on a partition after its leader moved: seen after a source node was
SIGKILLed and started again, the stream's position and lag on two partitions froze for minutes while the
source kept growing and the other partitions flowed (librdkafka issues 2625, 3396 and 4492 report the same;
a new consumer clears it). A partition is *stalled* when, for ``after_s`` without a break,

* its position (librdkafka's ``app_offset``, the next record handed to the stream) has not moved,
* records wait past it on the source (``consumer_lag`` > 0) or its fetcher is not fetching (a
  ``fetch_state`` other than ``active``),
* and nothing of it is fetched and waiting to be read (``fetchq_cnt`` 0: a stream that is merely slow has
  its fetch queue full),

while the stream is reading: a stream blocked on its target pauses its partitions on purpose, and its
watch starts again when it reads again. The engine then replaces its consumer (commit, close, join
again). A partition that stays stalled after that (its leader gone for good, say) is tried again after
twice the time, up to :data:`MAX_AFTER_S`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_AFTER_S", "STALL_AFTER_S", "Fetch", "StallWatch", "fetches"]

STALL_AFTER_S = 30.0  # six statistics intervals (spec.STATISTICS_INTERVAL_MS)
MAX_AFTER_S = 600.0

Key = tuple[str, int]


@dataclass(frozen=True)
class Fetch:
    """One partition as librdkafka's consumer statistics show it."""

    state: str  # fetch_state: none, stopping, stopped, offset-query, offset-wait, validate-epoch-wait, active
    position: int  # app_offset (-1001: none yet)
    lag: int  # consumer_lag (-1: unknown)
    queued: int  # fetchq_cnt: fetched, not read by the stream yet

    def waiting(self) -> bool:
        """Records wait past the position, or the fetcher is not fetching; none is queued for the stream."""
        return self.queued == 0 and (self.lag > 0 or self.state != "active")

    def show(self) -> str:
        return f"fetch state {self.state}, position {self.position}, lag {self.lag}"


def fetches(stats: Mapping[str, Any]) -> dict[Key, Fetch]:
    """The partitions a consumer's statistics document shows it fetching for the stream (assigned ones)."""
    out: dict[Key, Fetch] = {}
    for topic, t in stats.get("topics", {}).items():
        for pid, p in t.get("partitions", {}).items():
            state = p.get("fetch_state")
            if int(pid) < 0 or state in (None, "none", "stopping", "stopped"):
                continue
            out[(topic, int(pid))] = Fetch(
                str(state),
                int(p.get("app_offset", -1001)),
                int(p.get("consumer_lag", -1)),
                int(p.get("fetchq_cnt", 0)),
            )
    return out


class StallWatch:
    """Each partition's last change; :meth:`observe` names the partitions stalled for the watch's time."""

    def __init__(self, after_s: float = STALL_AFTER_S) -> None:
        self.base_s = after_s
        self.after_s = after_s
        self._since: dict[
            Key, tuple[Fetch, float]
        ] = {}  # the partition's fetch when it last changed, and then
        self.found: list[tuple[Key, Fetch, float]] = []  # stalled: (partition, its fetch, seconds stalled)

    def observe(self, now: float, seen: Mapping[Key, Fetch], reading: bool) -> list[tuple[Key, Fetch, float]]:
        """Fold one statistics document in; what is stalled now (also kept in :attr:`found`)."""
        if not reading:
            self._since.clear()
            return []
        since: dict[Key, tuple[Fetch, float]] = {}
        stalled: list[tuple[Key, Fetch, float]] = []
        for key, fetch in seen.items():
            before = self._since.get(key)
            if (
                before is None
                or not fetch.waiting()
                or (before[0].position, before[0].state)
                != (
                    fetch.position,
                    fetch.state,
                )
            ):
                since[key] = (fetch, now)
                continue
            since[key] = before
            if now - before[1] >= self.after_s:
                stalled.append((key, fetch, now - before[1]))
        self._since = since
        if not stalled and self.after_s != self.base_s and all(not f.waiting() for f in seen.values()):
            self.after_s = self.base_s  # everything fetches again: the next stall is acted on as soon
        self.found = stalled
        return stalled

    def acted(self) -> None:
        """The consumer was replaced: watch the new one from scratch, and wait twice as long next time."""
        self._since.clear()
        self.found = []
        self.after_s = min(self.after_s * 2, MAX_AFTER_S)
