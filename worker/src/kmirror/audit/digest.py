"""The audit's per-record work, vectorised: 128-bit content digests of a batch of Kafka records, and the
matching of both clusters' digests that names the contents whose copies differ. numpy and xxhash only;
no Kafka, no Spark.

A record's content is (topic, timestamp, key, value, headers); the topic and the timestamp are compared
as they are, the rest as two 64-bit lanes (h1, h2) of one digest:
  * key, value, every header name and value: XXH3-128 (a fixed, published hash: every executor of a
    cluster computes the same digest whatever its Python), a NULL field a fixed value of its own;
  * the headers of a record: the sum of a mix of (position, name digest, value digest) per header, so that
    order counts, and their number;
  * the fields combined per lane with odd multipliers and the 64-bit finaliser of MurmurHash3.
Digests are never stored: they only need to agree within one audit.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import itemgetter

import numpy as np
from xxhash import xxh3_128_digest

U64 = np.uint64
Headers = Sequence[tuple[str | bytes, bytes | None]]  # a record's headers, as confluent-kafka gives them
# Per lane (h1, h2): multipliers of the key, value, headers and header count digests (odd, unrelated).
_K_KEY = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F], U64)
_K_VALUE = np.array([0x165667B19E3779F9, 0xD6E8FEB86659FD93], U64)
_K_HEADERS = np.array([0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53], U64)
_K_COUNT = np.array([0x27D4EB2F165667C5, 0x85EBCA77C2B2AE63], U64)
# Per header: multipliers of its name and value digests and of its position in the record.
_K_NAME = np.array([0xA0761D6478BD642F, 0xE7037ED1A0B428DB], U64)
_K_HVALUE = np.array([0x8EBC6AF09C88C6E3, 0x589965CC75374CC3], U64)
_K_POS = np.array([0x1D8E4E27C47D124F, 0xB492B66FBE98F273], U64)
# The digest of a NULL key, value or header value: not the digest of any byte string anyone will meet.
_NULL = np.array([0x6A09E667F3BCC908, 0xBB67AE8584CAA73B], U64)
# The sort key of the matching: the timestamp's and the topic's multipliers.
_K_TS = U64(0x9FB21C651E98DF25)
_K_TOPIC = U64(0x3C6EF372FE94F82B)


def fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser (every input bit reaches every output bit), on uint64 arrays."""
    x = x ^ (x >> U64(33))
    x = x * U64(0xFF51AFD7ED558CCD)
    x = x ^ (x >> U64(33))
    x = x * U64(0xC4CEB9FE1A85EC53)
    return x ^ (x >> U64(33))


def field_digests(items: Sequence[bytes | None]) -> np.ndarray:
    """XXH3-128 of every item as (n, 2) uint64; NULL items get the NULL digest."""
    if not items:
        return np.empty((0, 2), U64)
    if None in items:
        nulls = np.fromiter((x is None for x in items), bool, len(items))
        out = _digests([b"" if x is None else x for x in items]).copy()
        out[nulls] = _NULL
        return out
    return _digests(items)  # type: ignore[arg-type]  # no None in items


def _digests(items: Sequence[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(map(xxh3_128_digest, items)), U64).reshape(-1, 2)


def _name_digests(names: list[str | bytes]) -> np.ndarray:
    """Header names repeat: each distinct one is hashed once."""
    known = {n: xxh3_128_digest(n.encode() if isinstance(n, str) else n) for n in set(names)}
    return np.frombuffer(b"".join(map(known.__getitem__, names)), U64).reshape(-1, 2)


def header_digests(headers: Sequence[Headers | None]) -> tuple[np.ndarray, np.ndarray]:
    """Per record: the (n, 2) digest of its headers in order, and their number (None: no headers)."""
    n = len(headers)
    rows: Sequence[Headers] = (
        [h or () for h in headers] if None in headers else headers  # type: ignore[assignment]
    )
    counts = np.fromiter(map(len, rows), np.int64, n)
    out = np.zeros((n, 2), U64)
    total = int(counts.sum())
    if not total:
        return out, counts
    flat = list(chain.from_iterable(rows))
    starts = np.zeros(n, np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    position = (np.arange(total, dtype=np.int64) - np.repeat(starts, counts) + 1).astype(U64)
    mixed = fmix64(
        _name_digests(list(map(itemgetter(0), flat))) * _K_NAME
        + field_digests(list(map(itemgetter(1), flat))) * _K_HVALUE
        + position[:, None] * _K_POS
    )
    has = counts > 0
    out[has] = np.add.reduceat(mixed, starts[has], axis=0)
    return out, counts


def record_digests(
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: Sequence[Headers | None],
) -> tuple[np.ndarray, np.ndarray]:
    """The two 64-bit lanes (as int64, Spark's bigint) of every record's key, value and headers."""
    h, counts = header_digests(headers)
    x = fmix64(
        field_digests(keys) * _K_KEY
        + field_digests(values) * _K_VALUE
        + h * _K_HEADERS
        + counts.astype(U64)[:, None] * _K_COUNT
    )
    return x[:, 0].view(np.int64), x[:, 1].view(np.int64)


def reducer_of(h1: np.ndarray, reducers: int) -> np.ndarray:
    """Which of `reducers` matching tasks gets each digest: every copy of a content goes to the same one."""
    return (h1.view(U64) % U64(reducers)).astype(np.int64)


def differing(
    topic: np.ndarray, ts: np.ndarray, h1: np.ndarray, h2: np.ndarray, side: np.ndarray
) -> np.ndarray:
    """Indices of the records whose content (topic, ts, h1, h2) has a different number of copies on the
    source (side 0) and the target (side 1), grouped: the records of one content are adjacent.

    Sorts on one 64-bit mix of the four (fast); if two contents share that mix, sorts on the four."""
    n = len(ts)
    if n == 0:
        return np.empty(0, np.int64)
    mix = fmix64(h1.view(U64) ^ (ts.view(U64) * _K_TS) ^ (topic.astype(np.int64).view(U64) * _K_TOPIC))
    order = np.argsort(mix)
    m = mix[order]
    new = np.empty(n, bool)
    new[0] = True
    np.not_equal(m[1:], m[:-1], out=new[1:])
    same = ~new[1:]
    if same.any():
        a, b = order[1:][same], order[:-1][same]
        if (
            (topic[a] != topic[b]).any()
            or (ts[a] != ts[b]).any()
            or (h1[a] != h1[b]).any()
            or (h2[a] != h2[b]).any()
        ):
            order = np.lexsort((h2, h1, ts, topic))
            new[1:] = (
                (topic[order[1:]] != topic[order[:-1]])
                | (ts[order[1:]] != ts[order[:-1]])
                | (h1[order[1:]] != h1[order[:-1]])
                | (h2[order[1:]] != h2[order[:-1]])
            )
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, n))
    targets = np.add.reduceat(side[order].astype(np.int64), starts)
    unequal = sizes != 2 * targets  # source copies (size - targets) != target copies
    if not unequal.any():
        return np.empty(0, np.int64)
    return order[np.repeat(unequal, sizes)]


def bucket_counts(
    ts: np.ndarray, bucket_ms: int, in_flight_from: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Records per (bucket start, in flight): three arrays (bucket, in_flight, count)."""
    if len(ts) == 0:
        return np.empty(0, np.int64), np.empty(0, bool), np.empty(0, np.int64)
    unit = (ts - ts % bucket_ms) * 2 + (ts >= in_flight_from)
    keys, counts = np.unique(unit, return_counts=True)
    return keys // 2, (keys % 2).astype(bool), counts
