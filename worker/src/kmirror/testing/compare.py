"""Read topics completely (by assignment, no consumer group) and compare a source with its mirror.

A small, single-process check for the demo and tests; the Spark audit is the one for real volumes.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

Content = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]
Partitions = dict[tuple[str, int], list[Content]]
_LOG = logging.getLogger("kmirror.librdkafka.compare")


def read_topics(
    conf: Mapping[str, str],
    topics: Iterable[str],
    *,
    expected: int = 0,
    timeout: float = 60.0,
    settle: float = 1.0,
) -> Partitions:
    """Every record of the topics, per partition, in offset order; returns once at least `expected`
    records were read and nothing new came for `settle` seconds (or at `timeout`)."""
    c = Consumer(
        {
            **conf,
            "group.id": "kmirror-compare",
            "enable.auto.commit": "false",
            "enable.partition.eof": "false",
        },
        logger=_LOG,
    )
    out: Partitions = defaultdict(list)
    try:
        md = c.list_topics(timeout=10)
        c.assign(
            [
                TopicPartition(t, p, OFFSET_BEGINNING)
                for t in topics
                if t in md.topics
                for p in md.topics[t].partitions
            ]
        )
        deadline = time.monotonic() + timeout
        last_new, count = time.monotonic(), 0
        while time.monotonic() < deadline:
            batch = c.consume(1000, 0.2)
            for m in batch:
                if m.error() is None:
                    out[(m.topic(), m.partition())].append(
                        (m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1])
                    )
            count += len(batch)
            if batch:
                last_new = time.monotonic()
            elif count >= expected and time.monotonic() - last_new >= settle:
                break
    finally:
        c.close()
    return dict(out)


@dataclass
class TopicComparison:
    topic: str
    source_records: int = 0
    target_records: int = 0
    missing: int = 0  # in the source partition, not in the same target partition
    duplicates: int = 0  # extra copies on the target
    out_of_order: int = 0  # partitions whose first copies are not in source order
    partitions: set[int] = field(default_factory=set)

    @property
    def identical(self) -> bool:
        return (
            self.missing == 0
            and self.duplicates == 0
            and self.out_of_order == 0
            and self.source_records == self.target_records
        )


def compare(source: Partitions, target: Partitions) -> dict[str, TopicComparison]:
    """Per topic: what the target lacks, holds twice, or holds out of order, partition by partition."""
    result: dict[str, TopicComparison] = {}
    for topic, partition in sorted(set(source) | set(target)):
        row = result.setdefault(topic, TopicComparison(topic))
        row.partitions.add(partition)
        want = source.get((topic, partition), [])
        got = target.get((topic, partition), [])
        row.source_records += len(want)
        row.target_records += len(got)
        seen: set[Content] = set()
        firsts = []
        for rec in got:
            if rec in seen:
                row.duplicates += 1
            else:
                seen.add(rec)
                firsts.append(rec)
        wanted = set(want)
        row.missing += sum(1 for rec in want if rec not in seen)
        if [r for r in firsts if r in wanted] != [r for r in want if r in seen]:
            row.out_of_order += 1
    return result
