"""Driver side of the audit: which partitions to read and from which offset to which (confluent-kafka).

End offsets are planned as max(high watermark, past the last offset found by reading from high
watermark - 1 to the end of the partition): correct on Kafka, and it finds the true end on brokers whose
high watermark lags behind the log (the embedded test broker).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kmirror.audit.scope import Span, planned_end
from kmirror.authorization import authorization_error, refused
from kmirror.errors import KmirrorError
from kmirror.kafkaio import client_log, error_line, watermarks

_LOG = client_log("audit")


class AuditError(KmirrorError):
    """The audit could not run; `kmirror audit` exits 2."""

    exit_code = 2


# The readers' group (kmirror-audit) is never joined and nothing is committed for it, but librdkafka looks
# up its coordinator all the same: a principal without an ACL on that group is told so, which does not
# stop reading assigned partitions from given offsets.
UNUSED_GROUP_ERRORS = frozenset({KafkaError.GROUP_AUTHORIZATION_FAILED})


def consumer_conf(settings: Mapping[str, str]) -> dict[str, object]:
    """A group-less reader: assigned partitions, nothing committed, bounded prefetch."""
    return {
        **settings,
        "group.id": "kmirror-audit",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "queued.max.messages.kbytes": 65536,
        # librdkafka postpones a partition's next fetch by this much once its queue is full (default
        # 1000 ms): a reader a little slower than the broker then stalls for a second at a time.
        "fetch.queue.backoff.ms": 10,
        "fetch.wait.max.ms": 50,  # the end of a partition is seen 50 ms after the last record, not 500
        "log_level": 3,
    }


class Selector(Protocol):
    """Which of a cluster's topics are read (a TopicFilter; on the target, maybe their renamed copies)."""

    def select(self, topics: Iterable[str]) -> list[str]: ...


def plan_cluster(
    side: int,
    settings: Mapping[str, str],
    topics: Selector,
    *,
    from_ms: int | None,
    max_skew_ms: int,
    timeout: float,
    name: str,
) -> list[Span]:
    """Spans [start, end) of every partition of the matching topics of one cluster."""
    c = Consumer(consumer_conf(settings), logger=_LOG)
    names: list[str] = []
    try:
        try:
            md = c.list_topics(timeout=timeout)
        except KafkaException as exc:
            raise AuditError(
                f"{name} cluster ({settings.get('bootstrap.servers')}): {error_line(exc)}"
            ) from None
        names = topics.select(md.topics)
        keys = [(t, p) for t in names for p in sorted(md.topics[t].partitions)]
        if not keys:
            return []
        marks = watermarks(c, keys, timeout)
        starts = {k: low for k, (low, _) in marks.items()}
        if from_ms is not None:
            # First offset whose timestamp is at least from - skew; -1 means none: nothing to read.
            asked = [TopicPartition(t, p, from_ms - max_skew_ms) for (t, p) in marks]
            for tp in c.offsets_for_times(asked, timeout=timeout):
                low, high = marks[(tp.topic, tp.partition)]
                starts[(tp.topic, tp.partition)] = high if tp.offset < 0 else max(low, tp.offset)
        last = _probe_ends(c, marks, timeout)
        spans = []
        for key, (_low, high) in marks.items():
            end = planned_end(high, last.get(key))
            start = starts[key]
            if end > start:
                spans.append(Span(side, key[0], key[1], start, end))
        return spans
    except KafkaException as exc:
        err = authorization_error(exc)
        if err is not None:  # offsets need DESCRIBE, the probe a fetch READ (which implies DESCRIBE)
            topic = str(exc.args[1]) if len(exc.args) > 1 else min(names, default="?")
            refusal = refused(
                err, f"{name} cluster", settings, "READ", topic, note="the audit reads the topics"
            )
            raise AuditError(str(refusal.error("kmirror audit"))) from None
        raise AuditError(f"{name} cluster: {error_line(exc)}") from None
    finally:
        c.close()


def _probe_ends(
    c: Consumer, marks: Mapping[tuple[str, int], tuple[int, int]], timeout: float
) -> dict[tuple[str, int], int]:
    """The last offset of every non-empty partition, read from high watermark - 1 to end of partition."""
    todo = {k for k, (low, high) in marks.items() if high > low}
    if not todo:
        return {}
    c.assign([TopicPartition(t, p, max(marks[(t, p)][0], marks[(t, p)][1] - 1)) for t, p in sorted(todo)])
    last: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + timeout
    while todo and time.monotonic() < deadline:
        m = c.poll(0.2)  # one at a time: consume(n) would wait for n records or its whole timeout
        if m is None:
            continue
        key = (m.topic(), m.partition())
        err = m.error()
        if err is None:
            last[key] = max(last.get(key, -1), m.offset())
        elif err.code() == KafkaError._PARTITION_EOF:
            todo.discard(key)
        elif err.code() not in UNUSED_GROUP_ERRORS:
            raise KafkaException(err, m.topic())
    c.unassign()
    if todo:
        missing = ", ".join(f"{t}/{p}" for t, p in sorted(todo)[:5])
        raise AuditError(
            f"could not find the end of {len(todo)} partition(s) within {timeout:.0f} s: {missing}"
        )
    return last
