"""What a stream is told to do (StreamSpec), what a failed send is (Failure), and the engine's timings."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaError

from kmirror.config.filters import TopicFilter
from kmirror.lineage.rename import SAME_NAME, Rename
from kmirror.mirror.configguard import DEFAULT_GUARD, ConfigGuard


@dataclass(frozen=True)
class StreamSpec:
    """Everything one stream needs; picklable, so a stream can run in its own process."""

    source: str
    index: int
    consumer: dict[str, str]
    producer: dict[str, str]
    topic_filter: TopicFilter
    batch_size: int = 500
    commit_interval_ms: int = 60_000
    abort_on_send_failure: bool = True
    num_producers: int = 1
    topic_refresh_ms: int = 30_000
    stats_interval_ms: int = 30_000
    shutdown_timeout_s: float = 30.0
    replication_factor: int = -1
    # The topic configs a destination takes from its source only where it keeps as much
    # (--config.properties.protect; kmirror.mirror.configguard).
    config_guard: ConfigGuard = DEFAULT_GUARD
    # Seconds without partitions, while the group has partitions to give, before the stream warns.
    unassigned_warn_s: float = 90.0
    # Sync points at commit points (kmirror run --groups; kmirror.failover.offsetsync).
    offset_syncs: bool = False
    # At a gap (the source no longer has the offset to continue from): continue or stop (kmirror.mirror.gaps).
    gap_policy: str = "continue"
    # Each copy names its origin in a header; records whose origin is the target are not copied back
    # (--provenance.header.enable; kmirror.lineage.provenance).
    provenance: bool = False
    # Whose origin headers on the source are honoured (--provenance.peers; kmirror.lineage.provenance).
    provenance_peers: tuple[str, ...] = ("target",)
    # Destination topic names (--topic.rename.format; kmirror.lineage.rename): the source's without one.
    rename: Rename = SAME_NAME
    # --heartbeats.interval.ms: the source's heartbeat topic is mirrored too (kmirror.mirror.heartbeats).
    heartbeats: bool = False

    @property
    def label(self) -> str:
        return f"{self.source}#{self.index}"


@dataclass
class Failure:
    """The first record the target refused."""

    error: KafkaError
    topic: str
    partition: int
    source_offset: int | None = None
    key: bytes | None = None
    timestamp: int | None = None
    value: bytes | None = None

    def describe(self, source: str) -> str:
        where = f"source {source} topic {self.topic} partition {self.partition}"
        where += f" offset {self.source_offset}" if self.source_offset is not None else ""
        return f"send failed for {where}: {self.error.str()}"


STATISTICS_INTERVAL_MS = 5000  # librdkafka statistics (bytes, queue depth, lag) for metrics and stats lines
REPORT_INTERVAL_S = 2.0  # how often a stream hands its snapshot to the metrics collector
# The loop takes what the consumer has fetched without waiting; only when it has nothing does it wait, this
# long at most, for the first record (so the loop's timers run while the source is quiet). A batch is never
# held back to fill up: a record is handed to the producer as soon as the consumer has it.
IDLE_WAIT_S = 0.2
# Waiting for the target this long without a single acknowledgement: the stream is blocked (reading
# paused, logged, kmirror_target_blocked_seconds > 0). Short waits of a busy target are back-pressure.
BLOCKED_AFTER_S = 5.0
KEEPALIVE_INTERVAL_S = 1.0  # while blocked, poll the consumer (partitions paused) to stay in the group
# While a stream waits for the target (a commit point's flush, a full producer queue) it serves each producer
# this long at a time. Success reports are off (delivery.report.only.error), so a poll returns early only on
# a failure: a short one sees an emptied queue within milliseconds, not after 50 ms per producer.
ACK_POLL_S = 0.005


def queue_shares(records: int, producers: int) -> list[int]:
    """Split a stream's queue of ``records`` between its producers: the shares add up to ``records``,
    and no share is 0 (librdkafka's "no limit"), so a stream never has more producers than records.
    0 (no limit, as the operator's file may say) stays 0 for every producer."""
    if records <= 0:
        return [0] * producers
    n = max(1, min(producers, records))
    return [records // n + (1 if i < records % n else 0) for i in range(n)]
