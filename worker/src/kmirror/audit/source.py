"""A Spark Python Data Source that reads planned Kafka offset ranges with confluent-kafka, in executors,
and hands Spark the records' content digests packed by matching task, not the records.

Spark's Kafka connector is a JVM jar; this reads Kafka inside the Python workers instead, one Spark
partition per reading task (offset ranges of one cluster, read one after the other by one consumer).
Every record becomes (topic, side, partition, offset, timestamp, two 64-bit digest lanes, the key's first
81 bytes) (:mod:`kmirror.audit.digest`); a range's records are cut by digest into ``reducers`` shares,
packed ~4,000 records to a row ``(r, Arrow IPC stream)`` as each share fills, so that Spark moves a few
large values instead of a row per record; one more row per range (``r = -1``) holds its record counts
per time bucket. The class lives in an importable module (classes defined in ``__main__`` are pickled by
value); no consumer is kept on the reader (not picklable): each ``read()`` makes one and closes it in
``finally`` because Python workers are reused.

Options (all strings):
  ``tasks``      JSON list of the reading tasks, each a list of [side, topic, partition, start, end]
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
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kmirror.audit import provenance
from kmirror.audit.digest import Headers, bucket_counts, record_digests, reducer_of
from kmirror.audit.scope import SIDES, SOURCE, Span

if TYPE_CHECKING:
    from confluent_kafka import Consumer

FORMAT = "kmirror_kafka_ranges"
SCHEMA = "r int, blob binary"
KEY_PREFIX = 81  # bytes of a record key kept for the report
# A packed row's records: the range's topic index, side and partition are the same for every record and
# travel once, in the Arrow schema's metadata (unpack() makes columns of them again).
RECORDS = pa.schema(
    [
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("h1", pa.int64()),
        ("h2", pa.int64()),
        ("key", pa.binary()),
    ]
)
COUNTS = pa.schema([("bucket", pa.int64()), ("in_flight", pa.bool_()), ("records", pa.int64())])
CONSTANTS = {"topic": pa.int32(), "side": pa.int8(), "partition": pa.int32()}  # in the metadata
COUNTS_ROW = -1  # the value of r of the row that holds a range's record counts
BATCH = 10_000
GC_THRESHOLD = 50_000
# Records per packed row (~180 KB with short keys, 480 KB with 81-byte key prefixes): rows stay below the
# JVM's large-object size (G1 allocates a value over half a heap region, 512 KB with a 1 GB heap, as a
# "humongous" object, slowly).
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
        self.tasks = json.loads(options["tasks"])
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
        # --provenance: the target's cluster id (kmirror.audit.provenance)
        self.target_id = options.get("provenance") or None
        # --topic.rename.format: the target topic each (source) topic's copy is read from
        self.read_as: dict[str, str] = json.loads(options.get("read_as") or "{}")

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(task) for task in self.tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from confluent_kafka import Consumer

        from kmirror.audit.kafka import consumer_conf

        spans = [Span.from_list(v) for v in partition.value]
        c = Consumer(consumer_conf(self.confs[spans[0].side]))
        # Reading makes ~4 short-lived objects per record: at Python's default threshold the collector
        # runs every 700 of them and costs a fifth of the task (measured); the worker is reused, so the
        # threshold is restored.
        threshold = gc.get_threshold()
        gc.set_threshold(GC_THRESHOLD, *threshold[1:])
        try:
            for span in spans:
                digests = DigestedSpan(span, self.topics[span.topic], self.reducers)
                read_as = self.read_as.get(span.topic) if span.side != SOURCE else None
                batches = read_span(c, span, from_ms=self.from_ms, to_ms=self.to_ms, read_as=read_as)
                if self.target_id is not None:
                    batches = provenance.link_only(batches, span.side, self.target_id, span.topic)
                for batch in batches:
                    rows = digests.add(batch)
                    if rows is not None:
                        yield rows  # Spark stores these while the range is still being read
                yield digests.finish(self.bucket_ms, self.in_flight_from)
        finally:
            gc.set_threshold(*threshold)
            c.close()


class DigestedSpan:
    """One range's records as digests, packed into rows (r, Arrow IPC stream) for the matching tasks:
    a row is handed on as soon as a task's share fills one (memory: less than a row per matching task,
    and 8 B of timestamp per record for the counts)."""

    def __init__(self, span: Span, topic: int, reducers: int) -> None:
        self.span, self.reducers = span, reducers
        self.constants = {b"topic": b"%d" % topic, b"side": b"%d" % span.side,
                          b"partition": b"%d" % span.partition}  # fmt: skip
        self.schema = RECORDS.with_metadata(self.constants)
        self.waiting: list[list[pa.RecordBatch]] = [[] for _ in range(reducers)]
        self.stamps: list[np.ndarray] = []

    def add(self, batch: RecordBatch) -> pa.RecordBatch | None:
        """Digests these records; returns the rows that filled up (None: none did)."""
        offsets, stamps, keys, values, headers = batch
        h1, h2 = record_digests(keys, values, headers)
        # large_binary: a batch of long keys may pass 2 GB before they are cut
        prefix = pc.binary_slice(pa.array(keys, pa.large_binary()), 0, KEY_PREFIX).cast(pa.binary())
        self.stamps.append(stamps)
        records = pa.RecordBatch.from_arrays(
            [pa.array(offsets, pa.int64()), pa.array(stamps), pa.array(h1), pa.array(h2), prefix],
            schema=self.schema,
        )
        r = reducer_of(h1, self.reducers)
        order = np.argsort(r, kind="stable")
        bounds = np.searchsorted(r[order], np.arange(self.reducers + 1))
        rs: list[int] = []
        blobs: list[bytes] = []
        for i in map(int, np.flatnonzero(np.diff(bounds))):
            self.waiting[i].append(records.take(pa.array(order[bounds[i] : bounds[i + 1]])))
            self._pack(i, rs, blobs, whole_only=True)
        return _rows(rs, blobs) if rs else None

    def finish(self, bucket_ms: int, in_flight_from: int) -> pa.RecordBatch:
        """The rows not handed on yet, and the counts row (the range's records per time bucket)."""
        rs: list[int] = []
        blobs: list[bytes] = []
        for i in range(self.reducers):
            self._pack(i, rs, blobs, whole_only=False)
        stamps = np.concatenate(self.stamps) if self.stamps else np.empty(0, np.int64)
        bucket, fly, count = bucket_counts(stamps, bucket_ms, in_flight_from)
        counts = pa.RecordBatch.from_arrays(
            [pa.array(bucket), pa.array(fly), pa.array(count.astype(np.int64))],
            schema=COUNTS.with_metadata(self.constants),
        )
        rs.append(COUNTS_ROW)
        blobs.append(_ipc(counts))
        return _rows(rs, blobs)

    def _pack(self, i: int, rs: list[int], blobs: list[bytes], *, whole_only: bool) -> None:
        """Packs task i's waiting records into rows of BLOB_RECORDS (whole_only: keeps the rest)."""
        n = sum(b.num_rows for b in self.waiting[i])
        if n == 0 or (whole_only and n < BLOB_RECORDS):
            return
        waiting = pa.Table.from_batches(self.waiting[i], self.schema).combine_chunks()
        cut = n - n % BLOB_RECORDS if whole_only else n
        for lo in range(0, cut, BLOB_RECORDS):
            rs.append(i)
            blobs.append(_ipc(waiting.slice(lo, min(BLOB_RECORDS, cut - lo))))
        self.waiting[i] = waiting.slice(cut).to_batches()


def _rows(rs: list[int], blobs: list[bytes]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(rs, pa.int32()), pa.array(blobs, pa.binary())], names=["r", "blob"]
    )


def _ipc(data: pa.RecordBatch | pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as w:
        w.write(data)
    return sink.getvalue().to_pybytes()


def unpack(blobs: list[bytes]) -> pa.Table:
    """The rows packed by :class:`DigestedSpan` (all records, or all counts), as one table with
    the topic, side and partition columns."""
    tables = []
    for blob in blobs:
        t = pa.ipc.open_stream(blob).read_all()
        meta = t.schema.metadata
        for name, kind in CONSTANTS.items():
            if name.encode() in meta:
                t = t.append_column(name, pa.array(np.full(t.num_rows, int(meta[name.encode()])), kind))
        tables.append(t.replace_schema_metadata(None))
    return pa.concat_tables(tables)


# offsets, timestamps (int64 array), keys, values, headers of the records of one consume()
RecordBatch = tuple[list[int], np.ndarray, list["bytes | None"], list["bytes | None"], list["Headers | None"]]


def read_span(
    c: Consumer,
    span: Span,
    *,
    from_ms: int | None,
    to_ms: int | None,
    read_as: str | None = None,
) -> Iterator[RecordBatch]:
    """The records of one span, one consume() at a time, as columns, with this consumer (assigned to
    the span's partition only: librdkafka drops what it fetched for an earlier assignment).

    The per-record work is what any reader must do (one call per field) and no more: the fields are
    taken column by column with ``map`` over the message list (no Python frame per record)."""
    from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

    from kmirror.audit.kafka import UNUSED_GROUP_ERRORS

    c.assign([TopicPartition(read_as or span.topic, span.partition, span.start)])
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
                if err.code() != KafkaError._PARTITION_EOF and err.code() not in UNUSED_GROUP_ERRORS:
                    raise KafkaException(err)
            eof = any(err.code() == KafkaError._PARTITION_EOF for err in errors)
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


def _within(stamps: np.ndarray, from_ms: int | None, to_ms: int | None) -> np.ndarray:
    keep = np.ones(len(stamps), bool)
    if from_ms is not None:
        keep &= stamps >= from_ms
    if to_ms is not None:
        keep &= stamps < to_ms
    return keep


_STAMP = operator.itemgetter(1)
