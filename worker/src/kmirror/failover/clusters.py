"""Failover I/O on the clusters: the sync topic, its readers' settings and reading sync data (used by the
writer, the group sync, `kmirror failover` and `kmirror lag`). Groups and end offsets are read with
:mod:`kmirror.kafkaio`."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.config import admin_settings
from kmirror.failover.offsetsync import (
    SYNC_TOPIC,
    SYNC_TOPIC_CONFIG,
    SyncData,
)
from kmirror.kafkaio import client_log

log = logging.getLogger(__name__)
quiet = client_log("groupsync")

# Never joined, never commits; internal, so never synced. librdkafka looks up its coordinator all the same:
# without an ACL on it that lookup is refused (GROUP_AUTHORIZATION_FAILED), which the readers ignore.
PROBE_GROUP = "__kmirror-probe"


def ensure_sync_topic(admin: AdminClient, replication_factor: int = -1, timeout: float = 10.0) -> None:
    """Create the compacted sync topic on the target when it is missing."""
    md = admin.list_topics(timeout=timeout)
    if SYNC_TOPIC in md.topics and md.topics[SYNC_TOPIC].error is None:
        return
    futures = admin.create_topics(
        [NewTopic(SYNC_TOPIC, 1, replication_factor, config=dict(SYNC_TOPIC_CONFIG))], request_timeout=timeout
    )
    for f in futures.values():
        try:
            f.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def reader_conf(settings: Mapping[str, str]) -> dict[str, Any]:
    conf: dict[str, Any] = dict(admin_settings(settings))
    conf.update(
        {
            "group.id": PROBE_GROUP,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "latest",
            "isolation.level": "read_uncommitted",
        }
    )
    return conf


def probe_conf(settings: Mapping[str, str]) -> dict[str, Any]:
    """A reader assigned only while it probes: the broker answers at once (about 6 ms a probe)."""
    return {**reader_conf(settings), "fetch.wait.max.ms": 1}


# ------------------------------------------------------------------------------------------ reading


class SyncReader:
    """Follows the sync topic on the target; each :meth:`read` adds what is new to `data`."""

    def __init__(self, target_settings: Mapping[str, str], mirror: str) -> None:
        self.mirror = mirror
        self.data = SyncData.empty()
        self.consumer = Consumer(reader_conf(target_settings), logger=quiet)
        self._assigned = False

    def read(self, timeout: float = 10.0) -> SyncData:
        if not self._assigned:
            md = self.consumer.list_topics(timeout=timeout)  # all: naming the topic may auto-create it
            topic = md.topics.get(SYNC_TOPIC)
            if topic is None or topic.error is not None:
                return self.data
            self.consumer.assign([TopicPartition(SYNC_TOPIC, p, OFFSET_BEGINNING) for p in topic.partitions])
            self._assigned = True
            self._next = dict.fromkeys(topic.partitions, 0)
        # End of partition is reported once per arrival at the end: only wait where there is more to read.
        todo = set()
        for p, position in self._next.items():
            _, high = self.consumer.get_watermark_offsets(
                TopicPartition(SYNC_TOPIC, p), timeout=timeout, cached=False
            )
            if position < high:
                todo.add(p)
        deadline = time.monotonic() + timeout
        while todo and time.monotonic() < deadline:
            for m in self.consumer.consume(1000, 0.1):
                err = m.error()
                if err is None:
                    self._next[m.partition()] = m.offset() + 1
                    self.data.add_record(self.mirror, m.key(), m.value())
                elif err.code() == KafkaError._PARTITION_EOF:
                    todo.discard(m.partition())
                elif err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    raise KafkaException(err)  # asked again for ever otherwise: the caller names it
        return self.data

    def close(self) -> None:
        self.consumer.close()


def read_sync_data(target_settings: Mapping[str, str], mirror: str, timeout: float = 10.0) -> SyncData:
    reader = SyncReader(target_settings, mirror)
    try:
        return reader.read(timeout)
    finally:
        reader.close()
