"""``kmirror audit --provenance``: what one link of two active data centres copies.

With ``kmirror run --provenance.header.enable`` a cluster holds records written on it and copies stamped
with their origin (:mod:`kmirror.lineage.provenance`). The audit of the link source -> target compares:

* on the source, every record but those whose origin header is honoured and names the target (the mirror
  never copies them back; a header it does not honour is replaced and the record copied:
  :func:`kmirror.lineage.provenance.judge` with the default peers, the target);
* on the target, the copies: records with an origin header that is not the target's own (records
  written on the target carry none);

each without the provenance header (the source record has none). Everything else is as without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import compress

import numpy as np

from kmirror.audit.scope import SOURCE
from kmirror.lineage.provenance import DEFAULT_PEERS, HEADER, SKIP, judge, peer_ids

# offsets, timestamps, keys, values, headers (kmirror.audit.source.RecordBatch)
Batch = tuple[list[int], np.ndarray, list, list, list]


def link_only(batches: Iterator[Batch], side: int, target_id: str, topic: str) -> Iterator[Batch]:
    """The records of each batch (of ``topic``, as named on the source) that this link copies (or copied),
    with their own headers only."""
    back = (target_id + "/").encode()
    peers = peer_ids(DEFAULT_PEERS, "", target_id)
    topic_name = topic.encode()
    for offsets, stamps, keys, values, headers in batches:
        keep: list[bool] = []
        own: list[object] = []
        for record_headers in headers:
            origin = None
            hs = record_headers
            if hs:
                rest = []
                for name, value in hs:
                    if name == HEADER:
                        origin = value or b""
                    else:
                        rest.append((name, value))
                hs = rest or None
            if side == SOURCE:
                keep.append(origin is None or judge(origin, topic_name, peers) != SKIP)
            else:
                keep.append(origin is not None and not origin.startswith(back))
            own.append(hs)
        if all(keep):
            yield offsets, stamps, keys, values, own
        elif any(keep):
            yield (
                list(compress(offsets, keep)),
                stamps[np.array(keep)],
                list(compress(keys, keep)),
                list(compress(values, keep)),
                list(compress(own, keep)),
            )
