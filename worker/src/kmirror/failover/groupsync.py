"""The group offset sync of `kmirror run --groups`, and its metrics.

:class:`GroupSync`: one thread per source cluster in the supervisor process of ``kmirror run``. Every
``--sync.group.offsets.interval.ms`` it reads the new sync points, the committed offsets of the source
groups matching ``--groups``, and commits their translations for the same group id on the target when
the group has no active members there, never moving it backwards; it writes a checkpoint per partition.
Several workers of one mirror each run it: they compute the same safe translations.

The logic (what a sync point means, how offsets translate) is in :mod:`kmirror.failover.offsetsync`;
sync points are written by :mod:`kmirror.failover.writer`; reading them and the groups' offsets is in
:mod:`kmirror.failover.clusters` and :mod:`kmirror.kafkaio`. The requests to the groups' coordinators
(committed offsets, states, the commits) go through :class:`kmirror.coordinator.GroupAdmin`, a helper
process per cluster: librdkafka can abort the process making them when a coordinator's connection fails
(librdkafka issue 4605), and this thread runs in the supervisor of ``kmirror run``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from kmirror.authorization import AuthorizationFailed, authorization_error, principal, refused
from kmirror.config import admin_settings
from kmirror.config.filters import TopicFilter
from kmirror.coordinator import GroupAdmin
from kmirror.failover.clusters import SyncReader, probe_conf, quiet
from kmirror.failover.offsetsync import (
    SYNC_TOPIC,
    Checkpoint,
    SyncData,
    checkpoint_record,
    is_internal_group,
    plan_commits,
)
from kmirror.kafkaio import error_line, is_active, own_repeats, true_ends

if TYPE_CHECKING:
    from prometheus_client.core import Metric

log = logging.getLogger(__name__)
own_repeats(log)  # a failing request repeats its warning at every try: one line a minute, counted


# ------------------------------------------------------------------------------------------ group sync


@dataclass
class GroupStatus:
    """The latest checkpoint of one group, for the metrics."""

    last_checkpoint: float = 0.0  # time.time() of the last checkpoint written
    translated_lag: int = 0  # records on the target after the translated offsets
    rereads: int = 0  # records before the group's source offsets a failover would read again
    partitions: int = 0
    untranslated: int = 0  # partitions with no sync point at or before the group's offset yet


@dataclass
class GroupSync:
    """The group offset sync of one source cluster (a thread in the supervisor process)."""

    source: str
    mirror: str  # the mirror's consumer group id (names its sync data)
    source_settings: Mapping[str, str]
    target_settings: Mapping[str, str]
    groups: TopicFilter
    topics: TopicFilter
    interval_ms: int = 60_000
    timeout: float = 10.0
    status: dict[str, GroupStatus] = field(default_factory=dict)

    # Told the refusal that stopped the sync (the runner logs it and stops the mirror: exit 2, one line).
    on_refused: Callable[[AuthorizationFailed], None] | None = None
    refused: AuthorizationFailed | None = None

    def _asking(
        self, side: str, operation: str, resource: str | Mapping[str, str], note: str = ""
    ) -> _Asking:
        conf = self.source_settings if side == "source" else self.target_settings
        where = f"source cluster {self.source}" if side == "source" else "target cluster"
        return _Asking(where, conf, operation, resource, note)

    def run(self, stop: threading.Event) -> None:
        self._source = AdminClient({**admin_settings(self.source_settings), "logger": quiet})
        self._target = AdminClient({**admin_settings(self.target_settings), "logger": quiet})
        self._source_groups = GroupAdmin(
            admin_settings(self.source_settings), f"source cluster {self.source}"
        )
        self._target_groups = GroupAdmin(admin_settings(self.target_settings), "the target cluster")
        conf: dict[str, Any] = dict(admin_settings(self.target_settings))
        conf.update({"acks": "all", "enable.idempotence": True, "linger.ms": 5, "on_delivery": self._written})
        self._write_refused: KafkaError | None = None
        self._none_warned = False
        self._producer = Producer(conf, logger=quiet)
        self._reader = SyncReader(self.target_settings, self.mirror)
        self._probe = Consumer(probe_conf(self.target_settings), logger=quiet)
        log.info(
            "%s: syncing the offsets of groups %s to the target every %d ms",
            self.source,
            self.groups.include,
            self.interval_ms,
        )
        try:
            while not stop.is_set():
                try:
                    self.step()
                except AuthorizationFailed as exc:  # an ACL does not grant itself: stop, say which
                    self.refused = exc
                    if self.on_refused is not None:
                        self.on_refused(exc)  # logs it, unless the stream said its own error first
                    else:
                        log.error("%s", exc)
                    return
                except Exception as exc:  # other errors never stop the mirror; it retries next interval
                    log.warning("%s: group offset sync: %s", self.source, error_line(exc))
                stop.wait(self.interval_ms / 1000)
        finally:
            self._producer.flush(5)
            self._reader.close()
            self._probe.close()
            self._source_groups.close()
            self._target_groups.close()

    def step(self) -> None:
        with self._asking("target", "READ", SYNC_TOPIC, "sync points are read there"):
            data = self._reader.read(self.timeout)
        listed = self._source.list_consumer_groups(request_timeout=self.timeout).result()
        if not listed.valid and listed.errors:  # no broker answered (a cut link): not "no group"
            err = listed.errors[0]
            raise err if isinstance(err, KafkaException) else KafkaException(err)
        groups = sorted(
            g.group_id
            for g in listed.valid
            if self.groups.matches(g.group_id) and not is_internal_group(g.group_id, [self.mirror])
        )
        if not groups and not self._none_warned:
            self._none_warned = True  # Kafka lists only the groups the principal may DESCRIBE
            log.warning(
                "%s: no consumer group matching %s is listed by the source: none yet, or %s may not "
                "DESCRIBE them (the kmirror_acls role grants it)",
                self.source,
                self.groups.include,
                principal(self.source_settings) or "the mirror's principal",
            )
        for group in groups:
            try:
                self._sync_group(group, data)
            except KafkaException as exc:
                log.warning("%s: group %s: %s", self.source, group, error_line(exc))
        self._producer.flush(self.timeout)
        if self._write_refused is not None:
            with self._asking("target", "WRITE", SYNC_TOPIC, "checkpoints are written there"):
                raise KafkaException(self._write_refused)

    def _written(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None and self._write_refused is None and authorization_error(err) is not None:
            self._write_refused = err

    def _sync_group(self, group: str, data: SyncData) -> None:
        with self._asking("source", "DESCRIBE", group, "its committed offsets are read"):
            committed = self._source_groups.committed_offsets(group, self.timeout)
        source = {k: v for k, v in committed.items() if self.topics.matches(k[0])}
        if not source:
            return
        with self._asking("target", "DESCRIBE", group, "its offsets on the target are read"):
            target = self._target_groups.committed_offsets(group, self.timeout)
            state, members = self._target_groups.group_state(group, self.timeout)
        commits, untranslated = plan_commits(data.store, source, target)
        moving = [c for c in commits if c.moves]
        if moving and not is_active(state, members):
            offsets = [TopicPartition(c.topic, c.partition, c.translation.target) for c in moving]
            both = {"GROUP": group, "TOPIC": offsets[0].topic}  # an offset commit: READ on both
            with self._asking("target", "READ", both, "its translated offsets are committed"):
                for topic, _, error in self._target_groups.alter_offsets(group, offsets, self.timeout):
                    if authorization_error(error) is not None:
                        both["TOPIC"] = topic
                        raise KafkaException(error)
            log.debug(
                "%s: group %s: committed %d translated offsets on the target",
                self.source,
                group,
                len(offsets),
            )
        elif moving:
            log.info(
                "%s: group %s has active members on the target (%s): its offsets there are left alone",
                self.source,
                group,
                state,
            )
        now = time.time()
        for c in commits:
            cp = Checkpoint(
                group,
                c.topic,
                c.partition,
                c.translation.source,
                c.translation.target,
                c.translation.sync_source,
                int(now * 1000),
            )
            key, value = checkpoint_record(self.mirror, cp)
            self._producer.produce(SYNC_TOPIC, value, key)
            data.checkpoints[(group, c.topic, c.partition)] = cp
        self._producer.poll(0)
        with self._asking(
            "target", "READ", min((c.topic for c in commits), default="?"), "the partition's end is read"
        ):
            ends = true_ends(
                self._target, self._probe, [(c.topic, c.partition) for c in commits], self.timeout
            )
        self.status[group] = GroupStatus(
            last_checkpoint=now,
            translated_lag=sum(
                max(0, ends.get((c.topic, c.partition), 0) - max(c.translation.target, c.current))
                for c in commits
            ),
            rereads=sum(c.translation.rereads for c in commits),
            partitions=len(commits),
            untranslated=len(untranslated),
        )


class _Asking:
    """A request of the sync: an authorization error it raises becomes the :class:`AuthorizationFailed`
    naming the operation and the resource."""

    def __init__(
        self,
        cluster: str,
        conf: Mapping[str, str],
        operation: str,
        resource: str | Mapping[str, str],
        note: str,
    ) -> None:
        self.cluster, self.conf, self.operation, self.resource, self.note = (
            cluster,
            conf,
            operation,
            resource,
            note,
        )

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        err = authorization_error(exc)
        if err is not None:
            found = refused(err, self.cluster, self.conf, self.operation, self.resource, note=self.note)
            raise found.error("group offset sync (--groups)") from None


def metric_families(syncs: Iterable[GroupSync]) -> Iterator[Metric]:
    """Prometheus gauges of every group offset sync (registered with the run's metrics collector)."""
    from prometheus_client.core import GaugeMetricFamily

    labels = ["source", "group"]
    age = GaugeMetricFamily(
        "kmirror_checkpoint_age_seconds",
        "Seconds since the group's offsets were last translated",
        labels=labels,
    )
    lag = GaugeMetricFamily(
        "kmirror_translated_lag",
        "Records on the target after the group's translated offsets (what a failed-over group would read)",
        labels=labels,
    )
    rereads = GaugeMetricFamily(
        "kmirror_translation_rereads",
        "Records before the group's source offsets that a failover now would read again",
        labels=labels,
    )
    untranslated = GaugeMetricFamily(
        "kmirror_untranslated_partitions",
        "Partitions of the group with no sync point at or before its offset yet",
        labels=labels,
    )
    now = time.time()
    for s in syncs:
        for group, st in sorted(s.status.items()):
            age.add_metric([s.source, group], max(0.0, now - st.last_checkpoint))
            lag.add_metric([s.source, group], st.translated_lag)
            rereads.add_metric([s.source, group], st.rereads)
            untranslated.add_metric([s.source, group], st.untranslated)
    yield from (age, lag, rereads, untranslated)
