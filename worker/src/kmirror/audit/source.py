"""A Spark Python Data Source that reads planned Kafka offset ranges with confluent-kafka, in executors.

Spark's Kafka connector is a JVM jar; this reads Kafka inside the Python workers instead, one Spark
partition per offset range, and yields Arrow record batches (the fastest way measured here). The
class lives in an importable module (classes defined in ``__main__`` are pickled by value); no consumer
is kept on the reader (not picklable): each ``read()`` makes one and closes it in ``finally`` because
Python workers are reused.

Options (all strings):
  ``spans``      JSON list of [side, topic, partition, start, end]
  ``source.KEY``/``target.KEY``  librdkafka settings of each cluster (Spark redacts the values of keys
                 that look secret in plans and logs)
  ``from_ms``, ``to_ms``  keep records with from <= timestamp < to (optional)
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kmirror.audit.scope import SIDES, Span

FORMAT = "kmirror_kafka_ranges"
SCHEMA = (
    "side int, topic string, partition int, offset bigint, timestamp bigint, key binary, value binary, "
    "headers array<struct<key: string, value: binary>>"
)
_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
BATCH = 10_000
STALL_S = 60.0  # no record for this long while records are still due: the range cannot be read


class KafkaRangeSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaRangeReader(dict(self.options))


class KafkaRangeReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.spans = [Span.from_list(v) for v in json.loads(options["spans"])]
        self.confs = {
            side: {k[len(name) + 1 :]: v for k, v in options.items() if k.startswith(name + ".")}
            for side, name in enumerate(SIDES)
        }
        self.from_ms = int(options["from_ms"]) if options.get("from_ms") else None
        self.to_ms = int(options["to_ms"]) if options.get("to_ms") else None

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(s.as_list()) for s in self.spans]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        span = Span.from_list(partition.value)
        yield from read_span(
            span,
            self.confs[span.side],
            from_ms=self.from_ms,
            to_ms=self.to_ms,
        )


def read_span(
    span: Span,
    settings: Mapping[str, str],
    *,
    from_ms: int | None,
    to_ms: int | None,
) -> Iterator[pa.RecordBatch]:
    """The records of one span as Arrow batches of the source's schema."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    from kmirror.audit.kafka import consumer_conf

    low = -(2**63) if from_ms is None else from_ms
    high = 2**63 - 1 if to_ms is None else to_ms
    c = Consumer(consumer_conf(settings))
    try:
        c.assign([TopicPartition(span.topic, span.partition, span.start)])
        offsets: list[int] = []
        stamps: list[int] = []
        keys: list[bytes | None] = []
        values: list[bytes | None] = []
        headers: list[list[tuple[str, bytes | None]]] = []
        pos, last_progress = span.start, time.monotonic()
        while pos < span.end:
            msgs = c.consume(min(BATCH, span.end - pos), 0.2)
            if not msgs:
                if time.monotonic() - last_progress > STALL_S:
                    raise RuntimeError(
                        f"{SIDES[span.side]} {span.topic}/{span.partition}: nothing read after offset "
                        f"{pos - 1} in {STALL_S:.0f} s (planned end {span.end})"
                    )
                continue
            last_progress = time.monotonic()
            eof = False
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof = True
                        continue
                    raise KafkaException(err)
                off = m.offset()
                if off >= span.end:
                    pos = span.end
                    break
                pos = off + 1
                ts = m.timestamp()[1]
                if ts < low or ts >= high:
                    continue
                offsets.append(off)
                stamps.append(ts)
                keys.append(m.key())
                values.append(m.value())
                headers.append(m.headers() or [])
            if len(offsets) >= BATCH:
                yield _batch(span, offsets, stamps, keys, values, headers)
                offsets, stamps, keys, values, headers = [], [], [], [], []
            if eof and pos < span.end:
                break  # the log ends before the planned end: control records or records removed
        if offsets:
            yield _batch(span, offsets, stamps, keys, values, headers)
    finally:
        c.close()


def _batch(  # noqa: PLR0917
    span: Span,
    offsets: list[int],
    stamps: list[int],
    keys: list[bytes | None],
    values: list[bytes | None],
    headers: list[list[tuple[str, bytes | None]]],
) -> pa.RecordBatch:
    n = len(offsets)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([span.side] * n, pa.int32()),
            pa.array([span.topic] * n, pa.string()),
            pa.array([span.partition] * n, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array(stamps, pa.int64()),
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(headers, _HEADERS),
        ],
        names=["side", "topic", "partition", "offset", "timestamp", "key", "value", "headers"],
    )
