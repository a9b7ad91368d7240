"""A consumer group's committed offsets, read without crashing the client: used by lag, failover and the
group offset sync.

librdkafka (2.4 to at least 2.16) dereferences a missing consumer-group handle when an admin client's
OffsetFetch is answered NOT_COORDINATOR: the process dies with SIGSEGV (librdkafka issue 5040,
confluent-kafka-python 1982). Apache Kafka answers that way while a group's coordinator is still being
found or loaded, for example on the first group request a cluster ever gets or after the coordinator
moved. So the group is described first: describing finds the coordinator and waits for it to have
loaded, and a group the coordinator does not know has no committed offsets, so its offsets are never
asked for.
"""

from __future__ import annotations

import time

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

# Answers that mean "the coordinator is not ready yet": described again until the timeout.
_NOT_READY = {
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError._TIMED_OUT,
}
_UNKNOWN = {KafkaError.GROUP_ID_NOT_FOUND}


def _code(exc: KafkaException) -> int | None:
    err = exc.args[0] if exc.args else None
    return err.code() if isinstance(err, KafkaError) else None


def group_known(admin: AdminClient, group: str, timeout: float) -> bool:
    """Whether the group's coordinator knows the group (it has members or committed offsets)."""
    deadline = time.monotonic() + timeout
    while True:
        left = max(0.5, deadline - time.monotonic())
        try:
            described = admin.describe_consumer_groups([group], request_timeout=left)[group].result()
        except KafkaException as exc:
            if _code(exc) in _UNKNOWN:
                return False
            if _code(exc) in _NOT_READY and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            raise
        return described.state.name not in ("DEAD", "UNKNOWN")


def committed_offsets(admin: AdminClient, group: str, timeout: float) -> dict[tuple[str, int], int]:
    """{(topic, partition): committed offset} of the group; empty when the group is unknown."""
    if not group_known(admin, group, timeout):
        return {}
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=timeout)
    listed = fut[group].result().topic_partitions or []
    return {(tp.topic, tp.partition): tp.offset for tp in listed if tp.offset >= 0}
