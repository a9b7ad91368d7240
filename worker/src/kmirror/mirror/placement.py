"""A stream's topics: pick up new, removed or grown source topics, create and grow destination topics,
route by key hash when the target has fewer partitions, keep destination configs in step."""

from __future__ import annotations

import logging
from typing import cast

from confluent_kafka import (
    Consumer,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from kmirror.mirror import topics
from kmirror.mirror.authfail import WatchedAdmin
from kmirror.mirror.heartbeats import heartbeat_topic, is_heartbeat_topic
from kmirror.mirror.state import StreamState

log = logging.getLogger("kmirror.mirror.engine")


class TopicPlacement(StreamState):
    """Mixin of :class:`kmirror.mirror.engine.Stream`: where each source topic's records go."""

    # ------------------------------------------------------------------ topics

    def _refresh_topics(self) -> None:
        """Pick up new, removed or grown source topics; create missing destination topics first, add the
        partitions a source topic gained, and keep destination topic configs equal to the source's.

        Cheap when nothing changed: one metadata request and one describe-configs request on the source;
        the target is asked only about what changed (or about topics still short of partitions)."""
        consumer = self.consumer
        assert consumer is not None
        md = consumer.list_topics(timeout=10)
        source = {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}
        own_beats = heartbeat_topic(self.spec.source) if self.spec.heartbeats else None
        selected = {
            t: n
            for t, n in source.items()
            if t == own_beats or (self.spec.topic_filter.matches(t) and not is_heartbeat_topic(t))
        }
        back = sorted(t for t in selected if self.spec.rename.came_from_target(t))
        if back:  # renamed copies of the target's own topics: mirroring them would copy them back
            if back != self._not_back:
                log.info(
                    "%s: not mirrored, renamed copies of the target's topics (--topic.rename.format, "
                    "--target.name): %s",
                    self.spec.label,
                    ", ".join(back),
                )
            selected = {t: n for t, n in selected.items() if t not in back}
        self._not_back = back
        if selected != self._selected or self._short:
            self._place_topics(selected)
        if self._config_sync is None:
            self._config_admins = (
                WatchedAdmin(self._source_admin, "source"),
                WatchedAdmin(self._target_admin, "target"),
            )
            source, target = (cast(AdminClient, a) for a in self._config_admins)
            self._config_sync = topics.ConfigSync(source, target, self.spec.label, rename=self.spec.rename)
        self._config_sync.run(self._selected)
        self._raise_if_config_refused(*self._config_admins)

    def _place_grown(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """The group gave this stream a partition its last topic refresh did not know (a sibling saw the
        source topic grow first): place that topic now, before any of its records is produced, so they
        go to the added target partition or by key hash, never to a partition the target lacks."""
        grown = {tp.topic for tp in partitions if tp.partition >= self._selected.get(tp.topic, 1 << 31)}
        if not grown:
            return
        # Asked through the source admin client, never the consumer: this runs inside the consumer's own
        # rebalance callback, and a nested blocking call on the same handle (consumer.list_topics) clears
        # confluent-kafka's call state, so its next callback in this poll aborts the process (SIGABRT,
        # "CallState_get: Assertion `cs != NULL' failed", confluent-kafka 2.16.1).
        known = topics.partition_counts(self._source_admin)
        counts = {t: known[t] for t in grown if t in known}
        self._place_topics({**self._selected, **counts})

    def _not_placed(self, exc: Exception, selected: dict[str, int]) -> Exception | None:
        """A refusal of :func:`kmirror.mirror.topics.ensure`, named (error path only): the source's
        configs of the missing destination topics (DESCRIBE_CONFIGS, asked first) or their creation on
        the target (CREATE)."""
        rename = self.spec.rename
        try:
            present = topics.destination_counts(self._target_admin, selected, rename)
            missing = sorted(set(selected) - set(present))
        except KafkaException:
            missing = []
        topic = missing[0] if missing else min(selected, default="?")
        if isinstance(exc, topics.TopicError):
            why = "the destination topic does not exist"
            return self._refusal(exc, "target", "CREATE", rename(topic), why)
        return self._refusal(
            exc, "source", "DESCRIBE_CONFIGS", topic, "its configs are copied to the destination topic"
        )

    def _place_topics(self, selected: dict[str, int]) -> None:
        """Destination topics for the selected source topics: created, grown, or routed by key hash."""
        consumer = self.consumer
        assert consumer is not None
        rename = self.spec.rename
        try:
            target = topics.ensure(
                self._source_admin,
                self._target_admin,
                selected,
                replication_factor=self.spec.replication_factor,
                rename=rename,
            )
        except (KafkaException, topics.TopicError) as exc:
            raise self._not_placed(exc, selected) or exc from None
        grow = topics.partitions_to_add(selected, target)
        refused = {}
        if grow:
            denied = topics.add_partitions(self._target_admin, {rename(t): n for t, n in grow.items()})
            refused = {t: denied[rename(t)] for t in grow if rename(t) in denied}
        if len(refused) < len(grow):
            before = target
            target = {**target, **topics.destination_counts(self._target_admin, selected, rename)}
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
        grown |= {t for t, n in selected.items() if n > self._selected.get(t, n) and target.get(t, 0) >= n}
        for t in sorted(grown):
            for producer in self.producers:
                producer.list_topics(rename(t), timeout=10)
        selected = {t: n for t, n in selected.items() if t in target}
        short = {
            t: (n, target[t], refused.get(t, "the target still reports fewer partitions"))
            for t, n in selected.items()
            if target[t] < n
        }
        for t, (n, m, why) in sorted(short.items()):
            if self._short.get(t) != (n, m, why):
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
        for t in sorted(set(self._short) - set(short)):
            if t in selected:
                log.info(
                    "%s: target topic %s has the source's %d partitions: partition numbers are kept again",
                    self.spec.label,
                    rename(t),
                    selected[t],
                )
        self._short = short
        # The hot path's destination names, updated in place (the loop holds the dict) and never removed (a
        # batch may still hold records of a topic that was just dropped).
        if not rename.identity:
            self._dest.update({t: rename(t) for t in selected})
        self._hashed.clear()
        self._hashed.update(short)
        self.snap.partition_mismatch = {t: n - m for t, (n, m, _) in short.items()}
        if set(selected) != set(self._selected):
            log.info(
                "%s: mirroring %d topics: %s", self.spec.label, len(selected), ", ".join(sorted(selected))
            )
            if selected:
                consumer.subscribe(
                    sorted(selected),
                    on_assign=self._on_assign,
                    on_revoke=self._on_revoke,
                    on_lost=self._on_lost,
                )
            else:
                consumer.unsubscribe()
        self._selected = selected
