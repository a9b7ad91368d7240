"""What a stream knows, declared once for the parts of :class:`kmirror.mirror.engine.Stream`.

The stream is one class assembled from parts named after what they do (membership, placement, failures,
outage waits, and the engine's loop and commit points). Each part reads and writes the state declared
here; :meth:`kmirror.mirror.engine.Stream.__init__` gives it its first values. The methods below are the
ones a part calls in another part: declared here so each part can be read (and type-checked) alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

if TYPE_CHECKING:
    from kmirror.authorization import AuthorizationFailed, Refusal
    from kmirror.failover.writer import SyncWriter
    from kmirror.mirror import metrics, topics
    from kmirror.mirror.authfail import WatchedAdmin
    from kmirror.mirror.membership import SessionWatch
    from kmirror.mirror.spec import Failure, StreamSpec


class StreamState:
    spec: StreamSpec
    snap: metrics.Snapshot
    consumer: Consumer | None
    producers: list[Producer]
    on_rebalanced: Callable[[], None] | None  # told after each assignment (the runner)
    unacknowledged: int  # records the target had not acknowledged when the stream stopped
    clean: bool  # stopped with everything read acknowledged and committed
    _stop: bool
    _report: Callable[[metrics.Snapshot], None] | None
    _producer_stats: dict[int, tuple[int, int]]
    _failure: Failure | None
    _refused: Refusal | None  # the first request refused for lack of an ACL (kmirror.mirror.authfail)
    _source_admin: AdminClient
    _target_admin: AdminClient
    _target_log: logging.Logger
    # Topics: what is mirrored (partition count per topic), what goes by key hash (the target has fewer
    # partitions) and why, and the destination config sync.
    _selected: dict[str, int]
    _hashed: set[str]
    _dest: dict[str, str]  # source topic -> destination topic (--topic.rename.format only)
    _not_back: list[str]  # source topics that are renamed copies of the target's (not mirrored)
    _short: dict[str, tuple[int, int, str]]
    _config_sync: topics.ConfigSync | None
    _config_admins: tuple[WatchedAdmin, WatchedAdmin]  # the config sync's, watched for refusals
    # Commit points: the last offset committed per partition, and the offset sync writer (--groups).
    _committed: dict[tuple[str, int], int]
    _offset_syncs: SyncWriter | None
    _read_counts: dict[tuple[str, int], int] | None  # --groups: records read per partition in its run
    _last_stats: metrics.Snapshot | None
    # Target outages (slow path only): when the stream became blocked (monotonic and wall clock),
    # records read but never handed to a producer (first offset per partition: never committed past),
    # records the consumer returned while the stream was blocked (produced once there is room).
    _blocked_since: float | None
    _blocked_wall: float
    _unsent_from: dict[tuple[str, int], int]
    _held: list[Message]
    _waiting: bool
    # Group membership: the partitions this stream owns now, and since when it has owned none.
    _assigned: set[tuple[str, int]]
    _unassigned_since: float
    _stuck_checked: float
    _stuck_warned: bool
    _session: SessionWatch  # when librdkafka last said the group session timed out

    # Called across parts (each is defined in exactly one part).
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        raise NotImplementedError

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        raise NotImplementedError

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        raise NotImplementedError

    def _self_fenced(self) -> bool:
        raise NotImplementedError

    def _offset_reset(self, m: Message) -> None:
        raise NotImplementedError

    def _cluster(self, side: str) -> str:
        raise NotImplementedError

    def _raise_if_unauthenticated(self, serve: bool = False) -> None:
        raise NotImplementedError

    def _place_grown(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        raise NotImplementedError

    def _commit_positions(self, partitions: list[TopicPartition] | None) -> None:
        raise NotImplementedError

    def _wait_for_room(self, m: Message) -> bool:
        raise NotImplementedError

    def _message_error(self, m: Message) -> None:
        raise NotImplementedError

    def _queued(self) -> int:
        raise NotImplementedError

    def snapshot(self) -> metrics.Snapshot:
        raise NotImplementedError

    def _consumer_refusal(self, err: KafkaError, topic: str | None) -> AuthorizationFailed | None:
        raise NotImplementedError

    def _refusal(
        self, exc: BaseException | KafkaError | None, side: str, operation: str, resource: str, note: str = ""
    ) -> AuthorizationFailed | None:
        raise NotImplementedError

    def _raise_if_config_refused(self, *admins: WatchedAdmin) -> None:
        raise NotImplementedError
