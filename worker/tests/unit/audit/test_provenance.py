"""``kmirror audit --provenance`` judges the source's origin headers as the mirror does (issue 34): a record
whose header is not honoured was copied, so it belongs to the link."""

from __future__ import annotations

import numpy as np

from kmirror.audit.provenance import link_only
from kmirror.audit.scope import SOURCE, TARGET
from kmirror.lineage.provenance import HEADER


def test_the_source_side_leaves_out_only_honoured_records_of_the_target() -> None:
    values = [b"from-west", b"forged-other-topic", b"forged-source", b"own"]
    headers = [
        [(HEADER, b"west/0/5/events")],
        [(HEADER, b"west/0/5/other"), ("app", b"a")],
        [(HEADER, b"east/0/5/events")],
        None,
    ]
    batch = ([0, 1, 2, 3], np.array([1, 2, 3, 4]), [None] * 4, values, headers)
    [(offsets, _, _, kept, own)] = list(link_only(iter([batch]), SOURCE, "west", "events"))
    assert (offsets, kept) == ([1, 2, 3], values[1:])
    assert own == [[("app", b"a")], None, None]  # compared without the header, as the copy is


def test_the_target_side_keeps_the_copies() -> None:
    headers = [[(HEADER, b"east/0/5/events")], None, [(HEADER, b"west/0/1/events")]]
    batch = ([0, 1, 2], np.array([1, 2, 3]), [None] * 3, [b"a", b"b", b"c"], headers)
    [(offsets, *_)] = list(link_only(iter([batch]), TARGET, "west", "events"))
    assert offsets == [0]
