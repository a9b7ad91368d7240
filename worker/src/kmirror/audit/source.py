"""A Spark Python Data Source that reads planned Kafka offset ranges with confluent-kafka, in executors,
and hands Spark each range's content digests packed by matching task, not its records.

Spark's Kafka connector is a JVM jar; this reads Kafka inside the Python workers instead, one Spark
partition per offset range. Every record becomes (topic, side, partition, offset, timestamp, two 64-bit
digest lanes, the key's first 81 bytes) (:mod:`kmirror.audit.digest`); a range's records are cut by
digest into ``reducers`` parts, and each part is one row ``(r, Arrow IPC stream)``, so that Spark moves a
few large values instead of a row per record; one more row (``r = -1``) holds the range's record counts
per time bucket. The class lives in an importable module (classes defined in ``__main__`` are pickled by
value); no consumer is kept on the reader (not picklable): each ``read()`` makes one and closes it in
``finally`` because Python workers are reused.

Options (all strings):
  ``spans``      JSON list of [side, topic, partition, start, end]
  ``topics``     JSON list of the topic names (a record carries its topic's index)
  ``source.KEY``/``target.KEY``  librdkafka settings of each cluster (Spark redacts the values of keys
                 that look secret in plans and logs)
  ``from_ms``, ``to_ms``  keep records with from <= timestamp < to (optional)
  ``bucket_ms``, ``in_flight_from``, ``reducers``  the time buckets, the in-flight cut, the matching tasks
"""

from __future__ import annotations

import bisect
import gc
import json
import operator
import time
from collections.abc import Iterator, Mapping
from itertools import compress

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kmirror.audit.digest import Headers, bucket_counts, record_digests, reducer_of
from kmirror.audit.scope import SIDES, Span

FORMAT = "kmirror_kafka_ranges"
SCHEMA = "r int, blob binary"
KEY_PREFIX = 81  # bytes of a record key kept for the report
RECORDS = pa.schema(
    [
        ("topic", pa.int32()),
        ("side", pa.int8()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("h1", pa.int64()),
        ("h2", pa.int64()),
        ("key", pa.large_binary()),
    ]
)
COUNTS = pa.schema(
    [
        ("topic", pa.int32()),
        ("side", pa.int8()),
        ("bucket", pa.int64()),
        ("in_flight", pa.bool_()),
        ("records", pa.int64()),
    ]
)
COUNTS_ROW = -1  # the value of r of the row that holds a range's record counts
BATCH = 10_000
GC_THRESHOLD = 50_000
# Records per packed row (~250 KB): rows stay below the JVM's large-object size (G1 allocates a value over
# half a heap region, 512 KB with a 1 GB heap, as a "humongous" object, slowly).
BLOB_RECORDS = 4_096
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
        self.topics = {t: i for i, t in enumerate(json.loads(options["topics"]))}
        self.bucket_ms = int(options["bucket_ms"])
        self.in_flight_from = int(options["in_flight_from"])
        self.reducers = int(options["reducers"])

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(s.as_list()) for s in self.spans]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        span = Span.from_list(partition.value)
        digests = DigestedSpan(span, self.topics[span.topic])
        # Reading makes ~4 short-lived objects per record: at Python's default threshold the collector
        # runs every 700 of them and costs a fifth of the task (measured); the worker is reused, so the
        # threshold is restored.
        threshold = gc.get_threshold()
        gc.set_threshold(GC_THRESHOLD, *threshold[1:])
        try:
            for batch in read_span(span, self.confs[span.side], from_ms=self.from_ms, to_ms=self.to_ms):
                digests.add(batch)
        finally:
            gc.set_threshold(*threshold)
        yield digests.packed(self.reducers, self.bucket_ms, self.in_flight_from)


class DigestedSpan:
    """One range's records as digests, kept until the range is read (memory: ~40 B + key per record)."""

    def __init__(self, span: Span, topic: int) -> None:
        self.span, self.topic = span, topic
        self.parts: list[tuple[list[int], np.ndarray, np.ndarray, np.ndarray, pa.Array]] = []

    def add(self, batch: RecordBatch) -> None:
        offsets, stamps, keys, values, headers = batch
        h1, h2 = record_digests(keys, values, headers)
        prefix = pc.binary_slice(pa.array(keys, pa.large_binary()), 0, KEY_PREFIX)
        self.parts.append((offsets, stamps, h1, h2, prefix))

    def packed(self, reducers: int, bucket_ms: int, in_flight_from: int) -> pa.RecordBatch:
        """Rows (r, Arrow IPC stream): the records of each matching task r, and the counts row."""
        n = sum(len(p[0]) for p in self.parts)
        cols = [np.concatenate([p[i] for p in self.parts]) if self.parts else np.empty(0, np.int64)
                for i in range(4)]  # fmt: skip
        offsets, stamps, h1, h2 = (c.astype(np.int64, copy=False) for c in cols)
        keys = pa.chunked_array([p[4] for p in self.parts], pa.large_binary()).combine_chunks()
        table = pa.RecordBatch.from_arrays(
            [
                pa.array(np.full(n, self.topic, np.int32)),
                pa.array(np.full(n, self.span.side, np.int8)),
                pa.array(np.full(n, self.span.partition, np.int32)),
                pa.array(offsets),
                pa.array(stamps),
                pa.array(h1),
                pa.array(h2),
                keys,
            ],
            schema=RECORDS,
        )
        rs, blobs = [], []
        if n:
            r = reducer_of(h1, reducers)
            order = np.argsort(r, kind="stable")
            bounds = np.searchsorted(r[order], np.arange(reducers + 1))
            for i in range(reducers):
                for lo in range(bounds[i], bounds[i + 1], BLOB_RECORDS):
                    rs.append(i)
                    hi = min(lo + BLOB_RECORDS, bounds[i + 1])
                    blobs.append(_ipc(table.take(pa.array(order[lo:hi]))))
        bucket, fly, count = bucket_counts(stamps, bucket_ms, in_flight_from)
        m = len(bucket)
        counts = pa.RecordBatch.from_arrays(
            [
                pa.array(np.full(m, self.topic, np.int32)),
                pa.array(np.full(m, self.span.side, np.int8)),
                pa.array(bucket),
                pa.array(fly),
                pa.array(count.astype(np.int64)),
            ],
            schema=COUNTS,
        )
        rs.append(COUNTS_ROW)
        blobs.append(_ipc(counts))
        return pa.RecordBatch.from_arrays(
            [pa.array(rs, pa.int32()), pa.array(blobs, pa.binary())], names=["r", "blob"]
        )


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


def unpack(blobs: list[bytes]) -> pa.Table:
    """The rows packed by :meth:`DigestedSpan.packed` (all of one r), as one table."""
    return pa.concat_tables(pa.ipc.open_stream(b).read_all() for b in blobs)


# offsets, timestamps (int64 array), keys, values, headers of the records of one consume()
RecordBatch = tuple[list[int], np.ndarray, list["bytes | None"], list["bytes | None"], list["Headers | None"]]


def read_span(
    span: Span,
    settings: Mapping[str, str],
    *,
    from_ms: int | None,
    to_ms: int | None,
) -> Iterator[RecordBatch]:
    """The records of one span, one consume() at a time, as columns.

    The per-record work is what any reader must do (one call per field) and no more: the fields are
    taken column by column with ``map`` over the message list (no Python frame per record)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

    from kmirror.audit.kafka import consumer_conf

    c = Consumer(consumer_conf(settings))
    try:
        c.assign([TopicPartition(span.topic, span.partition, span.start)])
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
            errors = list(filter(None, map(Message.error, msgs)))
            if errors:
                for err in errors:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(err)
                eof = True
                msgs = [m for m in msgs if m.error() is None]
            offsets = list(map(Message.offset, msgs))
            if offsets and offsets[-1] >= span.end:  # one partition: offsets ascend
                cut = bisect.bisect_left(offsets, span.end)
                msgs, offsets = msgs[:cut], offsets[:cut]
                pos = span.end
            elif offsets:
                pos = offsets[-1] + 1
            if offsets:
                stamps = np.fromiter(map(_STAMP, map(Message.timestamp, msgs)), np.int64, len(msgs))
                if from_ms is not None or to_ms is not None:
                    keep = _within(stamps, from_ms, to_ms)
                    msgs, offsets, stamps = (
                        list(compress(msgs, keep)),
                        list(compress(offsets, keep)),
                        stamps[keep],
                    )
                if msgs:
                    yield (
                        offsets,
                        stamps,
                        list(map(Message.key, msgs)),
                        list(map(Message.value, msgs)),
                        list(map(Message.headers, msgs)),
                    )
            if eof and pos < span.end:
                break  # the log ends before the planned end: control records or records removed
    finally:
        c.close()


def _within(stamps: np.ndarray, from_ms: int | None, to_ms: int | None) -> np.ndarray:
    keep = np.ones(len(stamps), bool)
    if from_ms is not None:
        keep &= stamps >= from_ms
    if to_ms is not None:
        keep &= stamps < to_ms
    return keep


_STAMP = operator.itemgetter(1)
