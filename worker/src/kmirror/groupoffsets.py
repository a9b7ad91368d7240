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
from collections.abc import Sequence

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


# ---------------------------------------------------------------------------------------- ownership
# Whether a group has partitions to give a member that has none: the mirror's STUCK warning
# (kmirror.mirror.membership) asks it.

Key = tuple[str, int]
STABLE = "STABLE"


def partitions_to_give(state: str, owned: Sequence[Sequence[Key]], total: int) -> str | None:
    """Why a group that leaves a member without partitions has some to give it, or None when it has not
    (or the broker does not say). `state` is the group state's name, `owned` every listed member's
    partitions, `total` the partitions of the subscribed topics.

    A group that is not STABLE is still rebalancing (or has no live member at all): whoever waits for
    partitions waits for that rebalance. A STABLE group that lists its members has partitions to give
    when some have no owner, or when a member owns two or more (a balanced assignor gives an idle member
    one of them). A STABLE group whose broker lists no members cannot tell: None."""
    if state != STABLE:
        return f"group state {state}, not STABLE: a rebalance has not finished"
    if not owned:
        return None
    taken = {tp for member in owned for tp in member}
    if len(taken) < total:
        return f"{total - len(taken)} of {total} partitions have no owner"
    most = max(len(member) for member in owned)
    if most >= 2:
        return f"a member owns {most} partitions"
    return None
