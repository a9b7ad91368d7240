"""Provenance: each record kmirror writes names the record it is a copy of, and no record goes back to the
cluster it came from (``--provenance.header.enable true``; off by default, so copies stay byte-identical).

The header ``kmirror.origin`` holds ``CLUSTER/PARTITION/OFFSET/TOPIC`` (ASCII; CLUSTER is the Kafka
cluster id of the cluster where the record was first written, which never contains ``/``; the topic is
last, so any topic name parses).

**Whose headers are honoured** (docs/security.md). Anyone who may write to the source can put a header of
that name on a record, so a header found on a source record is a claim, not a fact. It is honoured only
when it is well formed, names one of the mirror's *peers* (``--provenance.peers``: by default the target,
whose own reverse mirror is the one writer of copies into this source in two active data centres and in a
failback), never the source itself (kmirror never copies a record into the cluster it came from), and names
the topic the record is in (a reverse mirror keeps topic names; its renamed copies are never selected).
An honoured header naming the target means the record came from there: it is not copied back, counted in
``kmirror_skipped_origin_total`` and the stats line's ``skipped_origin``; one naming another peer is kept
(the origin stays the first cluster along a chain). Every other header is *distrusted*: the record is
copied, like any record written on the source, and the claim is replaced by kmirror's own stamp (this
source, partition, offset, topic), counted in ``kmirror_distrusted_origin_total``. So every header on the
target naming this source was written by this mirror, which is what ``kmirror failover`` and ``kmirror
failback`` read.

The per-record cost: a header lookup and one small bytes value; a record that already carries a header
adds one split and a dict lookup (docs/benchmarks.md, provenance).
"""

from __future__ import annotations

from typing import NamedTuple

from confluent_kafka import Message

HEADER = "kmirror.origin"

Headers = list[tuple[str, bytes | None]]


class Origin(NamedTuple):
    cluster: str
    topic: str
    partition: int
    offset: int


def origin_value(cluster: str, topic: str, partition: int, offset: int) -> bytes:
    return f"{cluster}/{partition}/{offset}/{topic}".encode()


def parse_origin(value: bytes | str | None) -> Origin | None:
    """The origin a header value names; None for a value that is not one (a foreign header of that name)."""
    if value is None:
        return None
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    parts = text.split("/", 3)
    if len(parts) != 4 or not parts[0] or not parts[3]:
        return None
    try:
        partition, offset = int(parts[1]), int(parts[2])
    except ValueError:
        return None
    return Origin(parts[0], parts[3], partition, offset)


def origin_of(headers: Headers | None) -> Origin | None:
    """The origin named by a record's provenance header (None: it has none)."""
    for name, value in headers or ():
        if name == HEADER:
            return parse_origin(value)
    return None


def without_provenance(headers: Headers | None) -> Headers | None:
    """The headers as the record had them before kmirror stamped it (None when nothing is left)."""
    if not headers:
        return headers
    kept = [h for h in headers if h[0] != HEADER]
    return kept or None


TARGET = "target"  # in --provenance.peers: the target cluster, whatever its id
NO_PEERS = "none"  # --provenance.peers none: no header on the source is honoured (a one-way mirror)
DEFAULT_PEERS = (TARGET,)

# What a mirror does with a source record's origin header (judge).
SKIP = 0  # honoured, names the target: not copied back
KEEP = 1  # honoured, names another peer: copied with the header as it is
DISTRUST = 2  # not honoured: copied, the header replaced by this mirror's own


def parse_peers(text: str) -> tuple[str, ...]:
    """``--provenance.peers``: ``target`` (default), ``none``, or cluster ids and ``target`` (commas)."""
    items = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if items == (NO_PEERS,):
        return ()
    if not items or NO_PEERS in items:
        raise ValueError(
            f"{text!r}: give 'target', 'none', or cluster ids (and 'target') separated by commas"
        )
    bad = [p for p in items if "/" in p]
    if bad:
        raise ValueError(f"{bad[0]!r} is no cluster id (it holds '/')")
    return items


def peer_ids(peers: tuple[str, ...], source_id: str, target_id: str) -> dict[bytes, bool]:
    """The cluster ids whose headers are honoured (value: it is the target), never the source's own."""
    ids = {(target_id if p == TARGET else p): None for p in peers}
    return {c.encode(): c == target_id for c in ids if c != source_id}


def judge(value: bytes | None, topic: bytes, peers: dict[bytes, bool]) -> int:
    """SKIP, KEEP or DISTRUST for a header value found on a record of ``topic`` (see the module's text)."""
    if not value:
        return DISTRUST
    parts = value.split(b"/", 3)
    if len(parts) != 4 or parts[3] != topic or not parts[1].isdigit() or not parts[2].isdigit():
        return DISTRUST
    target = peers.get(parts[0])
    if target is None:
        return DISTRUST
    return SKIP if target else KEEP


class Stamp:
    """The headers to write for one record read from ``source_id``'s cluster into ``target_id``'s, or None
    when its honoured origin is the target (not copied; ``skipped`` counts them). A header that is not
    honoured is replaced by this mirror's own (``distrusted`` counts them, ``last_distrusted`` names the
    newest: topic, partition, offset and the value found)."""

    __slots__ = ("_peers", "_prefix", "_topics", "distrusted", "last_distrusted", "skipped")

    def __init__(self, source_id: str, target_id: str, peers: tuple[str, ...] = DEFAULT_PEERS) -> None:
        if source_id == target_id:
            raise ValueError(f"source and target are the same cluster ({source_id})")
        self._prefix = source_id + "/"
        self._peers = peer_ids(peers, source_id, target_id)
        self._topics: dict[str, bytes] = {}
        self.skipped = 0
        self.distrusted = 0
        self.last_distrusted: tuple[str, int, int, bytes | None] | None = None

    def __call__(self, m: Message, topic: str, partition: int) -> Headers | None:
        headers: Headers | None = m.headers()
        if headers:
            for name, value in headers:
                if name == HEADER:
                    name_ = self._topics.get(topic)
                    if name_ is None:
                        name_ = self._topics[topic] = topic.encode()
                    verdict = judge(value, name_, self._peers)
                    if verdict == SKIP:
                        self.skipped += 1
                        return None
                    if verdict == KEEP:
                        return headers
                    self.distrusted += 1
                    self.last_distrusted = (topic, partition, m.offset(), value)
                    headers = [h for h in headers if h[0] != HEADER]  # every value of it: none is ours
                    break
        else:
            headers = []
        headers.append((HEADER, f"{self._prefix}{partition}/{m.offset()}/{topic}".encode()))
        return headers
