"""Provenance: each record kmirror writes names the record it is a copy of, and no record goes back to the
cluster it came from (``--provenance.header.enable true``; off by default, so copies stay byte-identical).

The header ``kmirror.origin`` holds ``CLUSTER/PARTITION/OFFSET/TOPIC`` (ASCII; CLUSTER is the Kafka
cluster id of the cluster where the record was first written, which never contains ``/``; the topic is
last, so any topic name parses). A record that already carries the header (it was mirrored before, into
the cluster kmirror now reads) keeps it unchanged, so the origin is always the first cluster. A record
whose origin is the target cluster is not copied: it would go back where it was written (two data
centres mirroring the same topic both ways). Those records are counted, never silently dropped:
``kmirror_skipped_origin_total`` and the stats line's ``skipped_origin``.

The per-record cost is a header lookup and one small bytes value (docs/benchmarks.md, provenance).
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


class Stamp:
    """The headers to write for one record read from ``source_id``'s cluster into ``target_id``'s, or None
    when the record's origin is the target (it is not copied; ``skipped`` counts them)."""

    __slots__ = ("_back", "_prefix", "skipped")

    def __init__(self, source_id: str, target_id: str) -> None:
        if source_id == target_id:
            raise ValueError(f"source and target are the same cluster ({source_id})")
        self._prefix = source_id + "/"
        self._back = (target_id + "/").encode()
        self.skipped = 0

    def __call__(self, m: Message, topic: str, partition: int) -> Headers | None:
        headers: Headers | None = m.headers()
        if headers:
            for name, value in headers:
                if name == HEADER:
                    if value is not None and value.startswith(self._back):
                        self.skipped += 1
                        return None
                    return headers
        else:
            headers = []
        headers.append((HEADER, f"{self._prefix}{partition}/{m.offset()}/{topic}".encode()))
        return headers
