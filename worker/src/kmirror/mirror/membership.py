"""A stream's group membership: the rebalance callbacks (commit only what is revoked, nothing when lost)
and the one STUCK warning when the stream has no partitions while its group has some to give.

The STUCK check needs every member's assignment, which only the group's coordinator tells (the consumer
knows its own): it describes the group through :class:`kmirror.coordinator.GroupAdmin`, a helper
process, because librdkafka can abort the process making that request when the coordinator's connection
fails (librdkafka issue 4605: a link cut under a stream without partitions was enough)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, TopicPartition

from kmirror.config import admin_settings
from kmirror.coordinator import CoordinatorCrashed, GroupAdmin
from kmirror.errors import ConfigError, KmirrorError
from kmirror.kafkaio import error_line, one_filter, partitions_to_give
from kmirror.mirror.clients import Clients
from kmirror.mirror.commits import CommitPoints
from kmirror.mirror.placement import Placement
from kmirror.mirror.spec import StreamSpec

log = logging.getLogger(__name__)


STUCK_CHECK_TIMEOUT_S = 10.0  # how long the STUCK check waits for the group's description

SELF_FENCE_WINDOW_S = 60.0
"""How long after the consumer's own session timeout a fencing is read as its own rejoin's doing."""


class SessionWatch(logging.Filter):
    """Notes when librdkafka says the consumer's group session timed out (its SESSTMOUT line).

    With a static member, librdkafka answers its own session timeout by joining again under the same
    group.instance.id; the coordinator gives the instance a new member id, and a request still in
    flight with the old one comes back FENCED_INSTANCE_ID, which librdkafka makes fatal (librdkafka
    issue 3437: a coordinator that died or stalled for longer than session.timeout.ms is enough). That
    fencing is not another process: the stream joins again (:meth:`Membership.self_fenced`)."""

    def __init__(self) -> None:
        super().__init__()
        self.timed_out_at: float | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and args and args[0] == "SESSTMOUT":
            self.timed_out_at = time.monotonic()
        return True


def session_watch(logger: logging.Logger) -> SessionWatch:
    """``logger``'s one :class:`SessionWatch`."""
    return one_filter(logger, SessionWatch)


class Rejoin(KmirrorError):
    """The stream's consumer was fenced by its own rejoin: close it and join with a new one (the engine
    does; met anywhere else, the stream stops with exit 1 and its unit restarts it)."""


class Membership:
    """A stream's side of its consumer group: the partitions it owns, the rebalance callbacks (commit
    only what is revoked, nothing when lost), the one STUCK warning, and its own fencing."""

    def __init__(
        self,
        spec: StreamSpec,
        clients: Clients,
        placement: Placement,
        points: CommitPoints,
        commit: Callable[[list[TopicPartition]], None],
    ) -> None:
        self.spec = spec
        self.clients = clients
        self.placement = placement
        self.points = points
        self.commit = commit  # the stream's commit point for the revoked partitions (flush, then commit)
        self.on_rebalanced: Callable[[], None] | None = None  # told after each assignment (the runner)
        self.assigned: set[tuple[str, int]] = set()
        self.unassigned_since = time.monotonic()
        self.stuck_checked = 0.0
        self.stuck_warned = False
        self.session = SessionWatch()  # replaced by the consumer logger's own at each join

    def joined(self, consumer_log: logging.Logger) -> None:
        """A new consumer joins: its logger's session watch, nothing timed out yet."""
        self.session = session_watch(consumer_log)
        self.session.timed_out_at = None

    def subscribe(self, consumer: Consumer, topics: list[str]) -> None:
        if topics:
            consumer.subscribe(
                topics, on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_lost
            )
        else:
            consumer.unsubscribe()

    # Rebalance callbacks. With cooperative-sticky (the default) they are incremental: on_assign gets the
    # partitions added, on_revoke and on_lost only those taken away (librdkafka then calls
    # incremental_assign/unassign itself); with an eager assignor (range) they get the whole set.
    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("%s: assigned %s", self.spec.label, show(partitions))
        self.assigned.update((tp.topic, tp.partition) for tp in partitions)
        self.placement.place_grown(consumer, partitions)
        if self.assigned and self.stuck_warned:
            log.info("%s: has partitions again", self.spec.label)
        self.stuck_warned = False
        if self.on_rebalanced is not None:
            self.on_rebalanced()
        self.points.assigned(consumer, partitions, self.placement.hashed)

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Still the owner: flush, commit the revoked partitions' positions (only those), let go."""
        log.info("%s: revoked %s", self.spec.label, show(partitions))
        self.commit(partitions)
        self.release(partitions)

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """No longer the owner (session expired, fenced): another member may own them already, so no
        commit; what was read since the last commit is mirrored again by the new owner."""
        log.warning(
            "%s: lost %s (left the group); their records since the last commit will be mirrored again "
            "by the new owner",
            self.spec.label,
            show(partitions),
        )
        self.release(partitions)

    def self_fenced(self) -> bool:
        """A fencing that followed this consumer's own session timeout (see :class:`SessionWatch`)."""
        at = self.session.timed_out_at
        return at is not None and time.monotonic() - at < SELF_FENCE_WINDOW_S

    def fatal(self, err: KafkaError) -> KmirrorError:
        """The stop for a fatal error of the consumer: its own rejoin's fencing (:class:`Rejoin`), another
        consumer with the same group.instance.id (exit 2), or another fatal error."""
        c = self.spec.consumer
        fenced = "group.instance.id" in err.str() or "fenced" in err.str().lower()
        if not (c.get("group.instance.id") and fenced):
            return KmirrorError(f"{self.spec.label}: fatal consumer error: {err.str()}")
        if self.self_fenced():
            return Rejoin(
                f"{self.spec.label}: fenced by its own rejoin after its group session timed out ({err.str()})"
            )
        # Static members (the default) of one id: the newer one fences the older, which stops for good
        # (exit 2: a restart would only fence the other one in turn).
        return ConfigError(
            f"fenced: another consumer of group {c.get('group.id')} joined with the same group.instance.id "
            f"{c.get('group.instance.id')} (a second kmirror process reading the same consumer file on this "
            "host, or another host with the same host name)",
            origin=self.spec.label,
            key="group.instance.id",
            fix="give each process its own consumer file or its own group.instance.id in it, or run with "
            "--static.membership false",
        )

    def release(self, partitions: list[TopicPartition]) -> None:
        self.points.released(partitions)
        for tp in partitions:
            self.assigned.discard((tp.topic, tp.partition))
        if not self.assigned:
            self.unassigned_since = time.monotonic()

    def release_all(self) -> None:
        """Every partition lost at once (the stream's consumer was fenced)."""
        self.release([TopicPartition(t, p) for t, p in sorted(self.assigned)])

    def unassigned_for(self, now: float) -> float:
        return 0.0 if self.assigned else now - self.unassigned_since

    def check_stuck(self, now: float) -> None:
        """No partitions for unassigned_warn_s: ask the group whether it has partitions to give (once per
        unassigned_warn_s) and say so once, clearly, if it does."""
        if self.stuck_warned or now - self.stuck_checked < self.spec.unassigned_warn_s:
            return
        self.stuck_checked = now
        group = self.spec.consumer.get("group.id", "")
        total = sum(self.placement.selected.values())
        # A helper process per check (at most one per unassigned_warn_s, only while unassigned), ended
        # with it: a stream that has partitions keeps no extra process.
        try:
            with GroupAdmin(admin_settings(self.spec.consumer), f"source {self.spec.source}") as admin:
                described = admin.describe_group(group, STUCK_CHECK_TIMEOUT_S)
        except Exception as exc:  # the check is advice: never let it stop the mirror; asked again later
            log.log(
                logging.WARNING if isinstance(exc, CoordinatorCrashed) else logging.DEBUG,
                "%s: STUCK check: could not describe group %s: %s (asked again in %.0f s)",
                self.spec.label,
                group,
                error_line(exc),
                self.spec.unassigned_warn_s,
            )
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
        self.stuck_warned = True
        log.warning(
            "%s: STUCK: no partitions for %.0f s while group %s has partitions to give (%s); a restart of "
            "every member of the group clears it (docs/deployment.md, Restarts)",
            self.spec.label,
            now - self.unassigned_since,
            group,
            why,
        )


def show(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions) or "nothing"
