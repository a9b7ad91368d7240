"""Demo data: keyed records with headers, and the source/target comparison table (both demos)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.testing import compare


def say(text: str) -> None:
    print(f"[demo] {text}", flush=True)


def create_topics(bootstrap: str, topics: Mapping[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(t, n, 1, config={"retention.ms": "604800000"}) for t, n in topics.items()]
    )
    for f in futures.values():
        f.result()


def fill(bootstrap: str, topics: Iterable[str], records_per_topic: int, start: int = 0) -> int:
    """Write keyed records with headers and CreateTime; returns how many were written.

    One record per request, so that the embedded broker reports exact log end offsets (see
    docs/testing.md); the mirror itself batches normally.
    """
    p = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1, "enable.idempotence": True}
    )
    n = 0
    for topic in topics:
        for i in range(start, start + records_per_topic):
            key = f"{topic[:-1]}-{i % 97}".encode()
            value = f'{{"topic":"{topic}","seq":{i},"amount":{(i * 37) % 1000}}}'.encode()
            headers = [("source", b"demo"), ("seq", str(i).encode())]
            while True:
                try:
                    p.produce(topic, value, key, timestamp=1_750_000_000_000 + i, headers=headers)
                    break
                except BufferError:
                    p.poll(0.1)
            n += 1
    if p.flush(60) != 0:
        raise SystemExit("the demo's own producer could not deliver its records")
    return n


def compare_table(source_bootstrap: str, target_bootstrap: str, topics: list[str], expected: int) -> bool:
    """Read both sides record by record, print one row per topic; True when the target is an exact copy."""
    source = compare.read_topics({"bootstrap.servers": source_bootstrap}, topics, expected=expected)
    target = compare.read_topics({"bootstrap.servers": target_bootstrap}, topics, expected=expected)
    result = compare.compare(source, target)
    head = ("topic", "partitions", "source", "target", "missing", "dupes")
    print("{:12} {:>10} {:>8} {:>8} {:>8} {:>6}  same".format(*head))
    for row in result.values():
        cells = (
            row.topic,
            len(row.partitions),
            row.source_records,
            row.target_records,
            row.missing,
            row.duplicates,
            "yes" if row.identical else "NO",
        )
        print("{:12} {:>10} {:>8} {:>8} {:>8} {:>6}  {}".format(*cells))
    first = source.get((topics[0], 0)) or [(None, None, (), 0)]
    key, _, headers, ts = first[0]
    say(f"first record of {topics[0]}[0] on both sides: key={key!r} headers={headers!r} timestamp={ts}")
    return all(r.identical for r in result.values()) and set(result) == set(topics)
