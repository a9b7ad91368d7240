"""Demo data: keyed records with headers, and the source/target comparison table (both demos).

The records carry the wall-clock time they were written as their CreateTime, so no retention the demo's
topics or brokers have can expire them while the demo runs. librdkafka's own lines go to a logger whose
lines are held back and printed only when the demo fails (:func:`held_client_lines`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Iterator, Mapping

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.health import lag
from kmirror.kafkaio import client_log
from kmirror.testing import compare

# A week, like Kafka's default: the records are stamped with the time they are written, so it never bites.
RETENTION_MS = "604800000"
_LOG = client_log("demo")


class HeldLines(logging.Handler):
    """Keeps librdkafka's lines (every client's logger is under ``kmirror.librdkafka``) until asked."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}")

    def dump(self) -> None:
        if self.lines:
            say(f"librdkafka's lines while the demo ran ({len(self.lines)}):")
            for line in self.lines[-50:]:
                print(f"  {line}", flush=True)


@contextlib.contextmanager
def held_client_lines() -> Iterator[HeldLines]:
    """While inside, every demo client's librdkafka lines go into a :class:`HeldLines`, not the terminal."""
    held = HeldLines()
    parent = logging.getLogger("kmirror.librdkafka")
    level, propagate = parent.level, parent.propagate
    parent.addHandler(held)
    parent.setLevel(logging.WARNING)
    parent.propagate = False
    try:
        yield held
    finally:
        parent.removeHandler(held)
        parent.setLevel(level)
        parent.propagate = propagate


def say(text: str) -> None:
    print(f"[demo] {text}", flush=True)


def create_topics(bootstrap: str, topics: Mapping[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap}, logger=_LOG)
    futures = admin.create_topics(
        [NewTopic(t, n, 1, config={"retention.ms": RETENTION_MS}) for t, n in topics.items()]
    )
    for f in futures.values():
        f.result()


def fill(bootstrap: str, topics: Iterable[str], records_per_topic: int, start: int = 0) -> dict[str, int]:
    """Write keyed records with headers, stamped with the time of writing; returns how many each topic got.

    One record per request, so that the broker reports exact log end offsets as they are written; the
    mirror itself batches normally.
    """
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 0,
            "batch.num.messages": 1,
            "enable.idempotence": True,
        },
        logger=_LOG,
    )
    written: dict[str, int] = {}
    for topic in topics:
        for i in range(start, start + records_per_topic):
            key = f"{topic[:-1]}-{i % 97}".encode()
            value = f'{{"topic":"{topic}","seq":{i},"amount":{(i * 37) % 1000}}}'.encode()
            headers: list[tuple[str, str | bytes | None]] = [("source", b"demo"), ("seq", str(i).encode())]
            while True:
                try:
                    p.produce(topic, value, key, timestamp=int(time.time() * 1000), headers=headers)
                    break
                except BufferError:
                    p.poll(0.1)
        written[topic] = records_per_topic
    if p.flush(60) != 0:
        raise SystemExit("[demo] the demo's own producer could not deliver its records")
    return written


def add(totals: dict[str, int], more: Mapping[str, int]) -> None:
    for topic, n in more.items():
        totals[topic] = totals.get(topic, 0) + n


def mirrored(rows: Iterable[lag.PartitionLag]) -> tuple[int, int]:
    """(records the group has committed, records it is behind), counted against the source's log end:
    the first never exceeds what is written, however the writing and the reading interleave."""
    rows = list(rows)
    behind = lag.total(rows)
    return sum(r.log_size for r in rows) - behind, behind


def compare_table(source_bootstrap: str, target_bootstrap: str, written: Mapping[str, int]) -> bool:
    """Read both sides record by record and print one row per topic. True only when, for every topic, the
    source still holds every record the demo wrote and the target holds each of them once, in order."""
    topics = list(written)
    expected = sum(written.values())
    source = compare.read_topics({"bootstrap.servers": source_bootstrap}, topics, expected=expected)
    target = compare.read_topics({"bootstrap.servers": target_bootstrap}, topics, expected=expected)
    result = compare.compare(source, target)
    head = ("topic", "partitions", "written", "source", "target", "missing", "dupes")
    print("{:12} {:>10} {:>8} {:>8} {:>8} {:>8} {:>6}  exact copy".format(*head))
    exact = True
    for topic in topics:
        row = result.get(topic, compare.TopicComparison(topic))
        ok = row.identical and row.source_records == written[topic]
        exact &= ok
        cells = (
            topic,
            len(row.partitions),
            written[topic],
            row.source_records,
            row.target_records,
            row.missing,
            row.duplicates,
            "yes" if ok else "NO",
        )
        print("{:12} {:>10} {:>8} {:>8} {:>8} {:>8} {:>6}  {}".format(*cells))
        if row.source_records != written[topic]:
            say(f"{topic}: the source holds {row.source_records} of the {written[topic]} records written")
    first = source.get((topics[0], 0)) or [(None, None, (), 0)]
    key, _, headers, ts = first[0]
    say(f"first record of {topics[0]}[0] on both sides: key={key!r} headers={headers!r} timestamp={ts}")
    return exact
