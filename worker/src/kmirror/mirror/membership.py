"""A stream's group membership: the rebalance callbacks (commit only what is revoked, nothing when lost)
and the one STUCK warning when the stream has no partitions while its group has some to give."""

from __future__ import annotations

import logging
import time

from confluent_kafka import (
    Consumer,
    TopicPartition,
)

from kmirror.errors import KmirrorError
from kmirror.kafkaio import describe_group, partitions_to_give
from kmirror.mirror.state import StreamState

log = logging.getLogger("kmirror.mirror.engine")


SELF_FENCE_WINDOW_S = 60.0
"""How long after the consumer's own session timeout a fencing is read as its own rejoin's doing."""


class SessionWatch(logging.Filter):
    """Notes when librdkafka says the consumer's group session timed out (its SESSTMOUT line).

    With a static member, librdkafka answers its own session timeout by joining again under the same
    group.instance.id; the coordinator gives the instance a new member id, and a request still in
    flight with the old one comes back FENCED_INSTANCE_ID, which librdkafka makes fatal (librdkafka
    issue 3437: a coordinator that died or stalled for longer than session.timeout.ms is enough). That
    fencing is not another process: the stream joins again (:meth:`GroupMembership._self_fenced`)."""

    def __init__(self) -> None:
        super().__init__()
        self.timed_out_at: float | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and args and args[0] == "SESSTMOUT":
            self.timed_out_at = time.monotonic()
        return True


def session_watch(logger: logging.Logger) -> SessionWatch:
    """``logger``'s one :class:`SessionWatch` (a process runs one stream: one watch is enough)."""
    for f in logger.filters:
        if isinstance(f, SessionWatch):
            return f
    watch = SessionWatch()
    logger.addFilter(watch)
    return watch


class Rejoin(KmirrorError):
    """The stream's consumer was fenced by its own rejoin: close it and join with a new one (the engine
    does; met anywhere else, the stream stops with exit 1 and its unit restarts it)."""


class GroupMembership(StreamState):
    """Mixin of :class:`kmirror.mirror.engine.Stream`: the consumer group side."""

    # Rebalance callbacks. With cooperative-sticky (the default) they are incremental: on_assign gets the
    # partitions added, on_revoke and on_lost only those taken away (librdkafka then calls
    # incremental_assign/unassign itself); with an eager assignor (range) they get the whole set.
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("%s: assigned %s", self.spec.label, show(partitions))
        self._assigned.update((tp.topic, tp.partition) for tp in partitions)
        self._place_grown(consumer, partitions)
        if self._assigned and self._stuck_warned:
            log.info("%s: has partitions again", self.spec.label)
        self._stuck_warned = False
        if self.on_rebalanced is not None:
            self.on_rebalanced()
        if self._read_counts is not None:
            for tp in partitions:
                self._read_counts[(tp.topic, tp.partition)] = 0
        if self._offset_syncs is not None:  # none of these produced yet by this stream
            self._offset_syncs.assigned(consumer, partitions, self._hashed)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Still the owner: flush, commit the revoked partitions' positions (only those), let go."""
        log.info("%s: revoked %s", self.spec.label, show(partitions))
        self._commit_positions(partitions)
        self._release(partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """No longer the owner (session expired, fenced): another member may own them already, so no
        commit; what was read since the last commit is mirrored again by the new owner."""
        log.warning(
            "%s: lost %s (left the group); their records since the last commit will be mirrored again "
            "by the new owner",
            self.spec.label,
            show(partitions),
        )
        self._release(partitions)

    def _self_fenced(self) -> bool:
        """A fencing that followed this consumer's own session timeout (see :class:`SessionWatch`)."""
        at = self._session.timed_out_at
        return at is not None and time.monotonic() - at < SELF_FENCE_WINDOW_S

    def _release(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._committed.pop((tp.topic, tp.partition), None)
            self._assigned.discard((tp.topic, tp.partition))
        if not self._assigned:
            self._unassigned_since = time.monotonic()

    def _check_stuck(self, now: float) -> None:
        """No partitions for unassigned_warn_s: ask the group whether it has partitions to give (once per
        unassigned_warn_s) and say so once, clearly, if it does."""
        if self._stuck_warned or now - self._stuck_checked < self.spec.unassigned_warn_s:
            return
        self._stuck_checked = now
        group = self.spec.consumer.get("group.id", "")
        total = sum(self._selected.values())
        try:
            described = describe_group(self._source_admin, group, 10)
        except Exception as exc:  # the check is advice: never let it stop the mirror
            log.debug("%s: could not describe group %s: %s", self.spec.label, group, exc)
            return
        if described is None:  # the coordinator does not know the group: nobody to give partitions
            return
        owned = [
            [(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else [])]
            for m in described.members or []
        ]
        why = partitions_to_give(described.state.name, owned, total) if total else None
        if why is None:
            return
        self._stuck_warned = True
        log.warning(
            "%s: STUCK: no partitions for %.0f s while group %s has partitions to give (%s); a restart of "
            "every member of the group clears it (docs/deployment.md, Restarts)",
            self.spec.label,
            now - self._unassigned_since,
            group,
            why,
        )


def show(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions) or "nothing"
