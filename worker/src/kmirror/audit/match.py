"""The matching task of the audit (one Spark partition per digest range r, in a Spark Python worker): all
the digests of both clusters whose h1 falls in r come together here, so every copy of a content does; the
task returns the records of the contents whose copies differ, and passes the record counts per time bucket
on (the counts rows of the reading tasks land in some matching task's partition too)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema

from kmirror.audit.digest import differing
from kmirror.audit.source import COUNTS_ROW, unpack

COUNTS, RECORD = 0, 1  # values of kind
OUT = pa.schema(
    [
        ("kind", pa.int32()),
        ("topic", pa.int32()),
        ("side", pa.int32()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("h1", pa.int64()),
        ("h2", pa.int64()),
        ("key", pa.binary()),
        ("bucket", pa.int64()),
        ("in_flight", pa.bool_()),
        ("records", pa.int64()),
    ]
)
SCHEMA = from_arrow_schema(OUT)  # the same, as Spark's type of mapInArrow's output


def match(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """For mapInArrow: the (r, blob) rows of one partition. Counts rows pass through; the digests are
    matched together (exact whatever r they carry: every copy of a content has the same r)."""
    got = list(batches)
    if not got:
        return
    rows = pa.Table.from_batches(got)
    r = rows.column("r").to_numpy()
    blobs = rows.column("blob").to_pylist()
    is_counts = (r == COUNTS_ROW).tolist()
    counts = [b for b, c in zip(blobs, is_counts, strict=True) if c]
    digests = [b for b, c in zip(blobs, is_counts, strict=True) if not c]
    if counts:
        yield from _counts(unpack(counts)).to_batches()
    if digests:
        yield from _differing(unpack(digests)).to_batches()


def _counts(t: pa.Table) -> pa.Table:
    n = t.num_rows
    return _table(
        {
            "kind": np.full(n, COUNTS, np.int32),
            "topic": t.column("topic"),
            "side": t.column("side").cast(pa.int32()),
            "bucket": t.column("bucket"),
            "in_flight": t.column("in_flight"),
            "records": t.column("records"),
        },
        n,
    )


def _differing(t: pa.Table) -> pa.Table:
    cols = {name: t.column(name).to_numpy() for name in ("topic", "side", "timestamp", "h1", "h2")}
    idx = differing(cols["topic"], cols["timestamp"], cols["h1"], cols["h2"], cols["side"])
    d = t.take(pa.array(idx))
    return _table(
        {
            "kind": np.full(len(idx), RECORD, np.int32),
            **{name: d.column(name) for name in ("topic", "partition", "offset", "timestamp", "h1", "h2")},
            "side": d.column("side").cast(pa.int32()),
            "key": d.column("key"),
        },
        len(idx),
    )


def _table(columns: dict[str, object], n: int) -> pa.Table:
    """The output table: the columns given (numpy or Arrow), NULLs for the others."""
    arrays: list[pa.Array | pa.ChunkedArray] = []
    for f in OUT:
        c = columns.get(f.name)
        if c is None:
            arrays.append(pa.nulls(n, f.type))
        elif isinstance(c, pa.Array | pa.ChunkedArray):
            arrays.append(c)
        else:
            arrays.append(pa.array(c, f.type))
    return pa.Table.from_arrays(arrays, schema=OUT)
