"""A stream's topics: pick up new, removed or grown source topics, create and grow destination topics,
route by key hash when the target has fewer partitions, keep destination configs in step."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import cast

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from kmirror.authorization import authorization_error
from kmirror.mirror import metrics, topics
from kmirror.mirror.authfail import Access, WatchedAdmin
from kmirror.mirror.clients import Clients
from kmirror.mirror.heartbeats import heartbeat_topic, is_heartbeat_topic
from kmirror.mirror.spec import StreamSpec

log = logging.getLogger(__name__)


class Placement:
    """Where a stream's source topics' records go: the topics it mirrors (partition count per topic), those
    that go by key hash because the target has fewer partitions (and why), the destination names
    (``--topic.rename.format``) and the destination config sync. The engine's loop holds :attr:`hashed`
    and :attr:`dest`, which are updated in place."""

    def __init__(
        self,
        spec: StreamSpec,
        snap: metrics.Snapshot,
        clients: Clients,
        access: Access,
        subscribe: Callable[[Consumer, list[str]], None],
    ) -> None:
        self.spec = spec
        self.snap = snap
        self.clients = clients
        self.access = access
        self.subscribe = subscribe  # the group membership's subscription, with its rebalance callbacks
        self.selected: dict[str, int] = {}
        self.hashed: set[str] = set()  # topics routed by key hash (target has fewer partitions)
        self.dest: dict[str, str] = {}  # source topic -> destination name (--topic.rename.format only)
        self.not_back: list[str] = []  # source topics that are renamed copies of the target's (not mirrored)
        self.short: dict[str, tuple[int, int, str]] = {}  # those topics: (source, target partitions, why)
        self.config_sync: topics.ConfigSync | None = None
        self.config_admins: tuple[WatchedAdmin, WatchedAdmin] | None = None  # the config sync's, watched

    def a_topic(self) -> str:
        """A mirrored topic to name in a grant (the producers write them all)."""
        return min(self.selected, default=self.spec.topic_filter.include or "?")

    def forget(self) -> None:
        """A new consumer subscribes at its next refresh (the stream joined its group again)."""
        self.selected = {}

    def refresh_again(self) -> None:
        """A topic refresh while mirroring. A request that failed on the way (a broker that closed the
        connection, as Kafka does at the end of every SASL session, or one that did not answer in time)
        is logged and asked again at the next refresh; the records keep flowing meanwhile. A refusal for
        lack of an ACL and a fatal error stop the stream, as at its start."""
        try:
            self.refresh()
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if not isinstance(err, KafkaError) or err.fatal() or authorization_error(exc) is not None:
                raise
            log.warning(
                "%s: topic refresh failed (%s); asked again at the next refresh", self.spec.label, err.str()
            )

    def refresh(self) -> None:
        """Pick up new, removed or grown source topics; create missing destination topics first, add the
        partitions a source topic gained, and keep destination topic configs equal to the source's.

        Cheap when nothing changed: one metadata request and one describe-configs request on the source;
        the target is asked only about what changed (or about topics still short of partitions)."""
        md = self.clients.the_consumer().list_topics(timeout=10)
        source = {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}
        own_beats = heartbeat_topic(self.spec.source) if self.spec.heartbeats else None
        selected = {
            t: n
            for t, n in source.items()
            if t == own_beats or (self.spec.topic_filter.matches(t) and not is_heartbeat_topic(t))
        }
        back = sorted(t for t in selected if self.spec.rename.came_from_target(t))
        if back:  # renamed copies of the target's own topics: mirroring them would copy them back
            if back != self.not_back:
                log.info(
                    "%s: not mirrored, renamed copies of the target's topics (--topic.rename.format, "
                    "--target.name): %s",
                    self.spec.label,
                    ", ".join(back),
                )
            selected = {t: n for t, n in selected.items() if t not in back}
        self.not_back = back
        if selected != self.selected or self.short:
            self._place_topics(selected)
        if self.config_sync is None or self.config_admins is None:
            self.config_admins = (
                WatchedAdmin(self.clients.source_admin, "source"),
                WatchedAdmin(self.clients.target_admin, "target"),
            )
            source, target = (cast(AdminClient, a) for a in self.config_admins)
            self.config_sync = topics.ConfigSync(
                source, target, self.spec.label, rename=self.spec.rename, guard=self.spec.config_guard
            )
        self.config_sync.run(self.selected)
        self.access.raise_if_config_refused(*self.config_admins)

    def place_grown(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """The group gave this stream a partition its last topic refresh did not know (a sibling saw the
        source topic grow first): place that topic now, before any of its records is produced, so they
        go to the added target partition or by key hash, never to a partition the target lacks."""
        grown = {tp.topic for tp in partitions if tp.partition >= self.selected.get(tp.topic, 1 << 31)}
        if not grown:
            return
        # Asked through the source admin client, never the consumer: this runs inside the consumer's own
        # rebalance callback, and a nested blocking call on the same handle (consumer.list_topics) clears
        # confluent-kafka's call state, so its next callback in this poll aborts the process (SIGABRT,
        # "CallState_get: Assertion `cs != NULL' failed", confluent-kafka 2.16.1).
        known = topics.partition_counts(self.clients.source_admin)
        counts = {t: known[t] for t in grown if t in known}
        self._place_topics({**self.selected, **counts})

    def _not_placed(self, exc: Exception, selected: dict[str, int]) -> Exception | None:
        """A refusal of :func:`kmirror.mirror.topics.ensure`, named (error path only): the source's
        configs of the missing destination topics (DESCRIBE_CONFIGS, asked first) or their creation on
        the target (CREATE)."""
        rename = self.spec.rename
        try:
            present = topics.destination_counts(self.clients.target_admin, selected, rename)
            missing = sorted(set(selected) - set(present))
        except KafkaException:
            missing = []
        topic = missing[0] if missing else min(selected, default="?")
        if isinstance(exc, topics.TopicError):
            why = "the destination topic does not exist"
            return self.access.refusal(exc, "target", "CREATE", rename(topic), why)
        return self.access.refusal(
            exc, "source", "DESCRIBE_CONFIGS", topic, "its configs are copied to the destination topic"
        )

    def _place_topics(self, selected: dict[str, int]) -> None:
        """Destination topics for the selected source topics: created, grown, or routed by key hash."""
        rename = self.spec.rename
        try:
            target = topics.ensure(
                self.clients.source_admin,
                self.clients.target_admin,
                selected,
                replication_factor=self.spec.replication_factor,
                rename=rename,
            )
        except (KafkaException, topics.TopicError) as exc:
            raise self._not_placed(exc, selected) or exc from None
        grow = topics.partitions_to_add(selected, target)
        refused = {}
        if grow:
            denied = topics.add_partitions(self.clients.target_admin, {rename(t): n for t, n in grow.items()})
            refused = {t: denied[rename(t)] for t in grow if rename(t) in denied}
        if len(refused) < len(grow):
            before = target
            target = {**target, **topics.destination_counts(self.clients.target_admin, selected, rename)}
            for t in sorted(set(grow) - set(refused)):
                log.info(
                    "%s: added partitions to destination topic %s: %d, was %d (the source's count)",
                    self.spec.label,
                    rename(t),
                    target.get(t, grow[t]),
                    before[t],
                )
        # The producers' own metadata must know a grown topic's new partitions before a record is sent to
        # one (librdkafka refuses a partition beyond the count it knows: "Unknown partition", a send
        # failure), whether this stream or a sibling added them on the target; any metadata reply updates it.
        grown = set(grow) - set(refused)
        grown |= {t for t, n in selected.items() if n > self.selected.get(t, n) and target.get(t, 0) >= n}
        for t in sorted(grown):
            for producer in self.clients.producers:
                producer.list_topics(rename(t), timeout=10)
        selected = {t: n for t, n in selected.items() if t in target}
        short = {
            t: (n, target[t], refused.get(t, "the target still reports fewer partitions"))
            for t, n in selected.items()
            if target[t] < n
        }
        for t, (n, m, why) in sorted(short.items()):
            if self.short.get(t) != (n, m, why):
                log.warning(
                    "%s: target topic %s has %d partitions, source %d (adding partitions failed: %s): "
                    "records are placed by key hash (Java's murmur2), so order is kept per key, not per "
                    "source partition; metric kmirror_topic_partition_mismatch",
                    self.spec.label,
                    rename(t),
                    m,
                    n,
                    why,
                )
        for t in sorted(set(self.short) - set(short)):
            if t in selected:
                log.info(
                    "%s: target topic %s has the source's %d partitions: partition numbers are kept again",
                    self.spec.label,
                    rename(t),
                    selected[t],
                )
        self.short = short
        # The hot path's destination names, updated in place (the loop holds the dict) and never removed (a
        # batch may still hold records of a topic that was just dropped).
        if not rename.identity:
            self.dest.update({t: rename(t) for t in selected})
        self.hashed.clear()
        self.hashed.update(short)
        self.snap.partition_mismatch = {t: n - m for t, (n, m, _) in short.items()}
        if set(selected) != set(self.selected):
            log.info(
                "%s: mirroring %d topics: %s", self.spec.label, len(selected), ", ".join(sorted(selected))
            )
            self.subscribe(self.clients.the_consumer(), sorted(selected))
        self.selected = selected
