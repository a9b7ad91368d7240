"""Heartbeats (``--heartbeats.interval.ms``, off by default): each source's end-to-end latency, also when no
data flows.

Every interval the supervisor writes one small record to the source cluster's topic
``kmirror.heartbeats.<source>`` (``<source>``: ``--source.name``; one partition, kept a day; made when
missing). The streams mirror that topic like any other (also when the whitelist does not name it;
heartbeat topics of other sources are never mirrored, so two data centres never pass them back and
forth), under its renamed name with ``--topic.rename.format``. The supervisor reads the copy on the
target: ``kmirror_heartbeat_latency_seconds`` is when the newest heartbeat arrived minus when it was
written, ``kmirror_heartbeat_age_seconds`` how old the newest heartbeat on the target is now (it grows
while the link copies nothing; alert ``KmirrorLinkStale``).

Anyone who may write to the heartbeat topic on the source can write a heartbeat of their own. One dated
more than :data:`FUTURE_SKEW_S` after its arrival is not taken as the newest (it would pin the age at 0
and keep ``KmirrorLinkStale`` from ever firing): it is counted (``kmirror_heartbeats_future_total``) and
logged once per source until a good one comes.

The writer needs WRITE and CREATE on the heartbeat topic of the source, the reader READ on its copy on
the target; a refusal is one WARNING line (again when the reason changes) and never stops the mirror.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Mapping

from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Metric

from kmirror.config import admin_settings
from kmirror.kafkaio import error_line, silent_log
from kmirror.lineage.rename import SAME_NAME, Rename

log = logging.getLogger(__name__)

PREFIX = "kmirror.heartbeats."
RETENTION_MS = 86_400_000  # a day of heartbeats on the source
# A heartbeat dated this far after its arrival on the target is not believed (clocks of two data centres
# may differ by seconds, not minutes).
FUTURE_SKEW_S = 60.0


def heartbeat_topic(source: str) -> str:
    return PREFIX + source


def is_heartbeat_topic(topic: str) -> bool:
    return topic.startswith(PREFIX)


class Heartbeat:
    """One source's heartbeats: written to the source, read back from the target (a supervisor thread)."""

    def __init__(
        self,
        source: str,
        source_settings: Mapping[str, str],
        target_settings: Mapping[str, str],
        interval_ms: int,
        rename: Rename = SAME_NAME,
    ) -> None:
        self.source = source
        self.topic = heartbeat_topic(source)
        self.copy = rename(self.topic)
        self.interval_s = interval_ms / 1000
        self._source = admin_settings(source_settings)
        self._target = admin_settings(target_settings)
        self.sent = 0
        self.newest_ms: int | None = None  # timestamp of the newest heartbeat seen on the target
        self.latency_s: float | None = None  # its arrival minus its writing
        self.future = 0  # heartbeats dated more than FUTURE_SKEW_S after their arrival: not believed
        self._future_warned = False  # said once until a believable heartbeat comes
        self._problem: str | None = None

    def run(self, stop: threading.Event) -> None:
        quiet = silent_log("kmirror.heartbeats.client")
        producer = Producer({**self._source, "acks": "all", "linger.ms": 0, "logger": quiet})
        reader = Consumer(
            {
                **self._target,
                "group.id": f"kmirror-heartbeats-{socket.gethostname()}",
                "enable.auto.commit": False,
                "logger": quiet,
            }
        )
        reader.assign([TopicPartition(self.copy, 0, OFFSET_END)])
        made = False
        next_beat = 0.0
        try:
            while not stop.is_set():
                now = time.time()
                if now >= next_beat:
                    next_beat = now + self.interval_s
                    made = made or self._make_topic()
                    if made:
                        self._beat(producer, now)
                for m in reader.consume(100, min(0.5, self.interval_s)):
                    if m.error() is None:
                        self.arrived(m.timestamp()[1], time.time())
                producer.poll(0)
        finally:
            producer.flush(5)
            reader.close()

    def arrived(self, written_ms: int, now: float) -> None:
        """A heartbeat written at ``written_ms`` (its timestamp) read from the target at ``now``."""
        if written_ms / 1000 > now + FUTURE_SKEW_S:
            if not self._future_warned:
                self._future_warned = True
                log.warning(
                    "%s: a heartbeat on the target is dated %.0f s after it arrived (written by a clock far "
                    "ahead, or by someone else who may write to %s on the source): not believed, counted "
                    "in kmirror_heartbeats_future_total",
                    self.source,
                    written_ms / 1000 - now,
                    self.topic,
                )
            self.future += 1
            return
        self._future_warned = False
        if self.newest_ms is None or written_ms > self.newest_ms:
            self.newest_ms = written_ms
            self.latency_s = max(0.0, now - written_ms / 1000)

    def _make_topic(self) -> bool:
        admin = AdminClient({**self._source, "logger": silent_log("kmirror.heartbeats.client")})
        new = NewTopic(self.topic, num_partitions=1, config={"retention.ms": str(RETENTION_MS)})
        try:
            admin.create_topics([new], request_timeout=10)[self.topic].result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                self._warn(f"cannot create {self.topic} on the source: {error_line(exc)}")
                return False
        return True

    def _beat(self, producer: Producer, now: float) -> None:
        value = json.dumps({"source": self.source, "host": socket.gethostname(), "time": now}).encode()

        def delivered(err: KafkaError | None, _msg: object) -> None:
            if err is not None:
                self._warn(f"heartbeat not written to {self.topic} on the source: {err.str()}")
            else:
                self.sent += 1
                if self._problem is not None:
                    self._problem = None
                    log.info("%s: heartbeats written again", self.source)

        try:
            producer.produce(self.topic, value, self.source.encode(), 0, on_delivery=delivered)
        except (BufferError, KafkaException) as exc:
            self._warn(f"heartbeat not written to {self.topic}: {exc}")

    def _warn(self, problem: str) -> None:
        if problem != self._problem:
            self._problem = problem
            log.warning("%s: %s (tried again each interval; the mirror goes on)", self.source, problem)


def metric_families(beats: Iterable[Heartbeat]) -> Iterator[Metric]:
    """Prometheus families of every source's heartbeats (registered with the run's metrics collector)."""
    latency = GaugeMetricFamily(
        "kmirror_heartbeat_latency_seconds",
        "When the newest heartbeat arrived on the target minus when it was written on the source",
        labels=["source"],
    )
    age = GaugeMetricFamily(
        "kmirror_heartbeat_age_seconds",
        "Seconds since the newest heartbeat seen on the target was written on the source (grows while the "
        "link copies nothing)",
        labels=["source"],
    )
    sent = CounterMetricFamily(
        "kmirror_heartbeats_sent", "Heartbeats written to the source cluster", labels=["source"]
    )
    future = CounterMetricFamily(
        "kmirror_heartbeats_future",
        f"Heartbeats on the target dated more than {FUTURE_SKEW_S:.0f} s after their arrival: not believed",
        labels=["source"],
    )
    now = time.time()
    for b in beats:
        sent.add_metric([b.source], b.sent)
        future.add_metric([b.source], b.future)
        if b.newest_ms is not None and b.latency_s is not None:
            latency.add_metric([b.source], round(b.latency_s, 3))
            age.add_metric([b.source], round(max(0.0, now - b.newest_ms / 1000), 3))
    yield latency
    yield age
    yield sent
    yield future
