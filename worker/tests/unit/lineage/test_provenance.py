"""Provenance headers (kmirror.lineage.provenance): the stamp written on each copy, kept as it was on a copy
of a copy, and no record copied back to the cluster it was first written to."""

from __future__ import annotations

from confluent_kafka import Message

from kmirror.lineage.provenance import (
    HEADER,
    Origin,
    Stamp,
    origin_of,
    origin_value,
    parse_origin,
    without_provenance,
)


def record(offset: int, headers: list[tuple[str, bytes | None]] | None) -> Message:
    return Message(topic="a.b-c", partition=2, offset=offset, value=b"v", key=b"k", headers=headers)


def test_a_record_written_on_the_source_gets_its_origin() -> None:
    stamp = Stamp("EAST-id_1", "WEST-id_2")
    headers = stamp(record(41, [("app", b"x")]), "a.b-c", 2)
    assert headers == [("app", b"x"), (HEADER, b"EAST-id_1/2/41/a.b-c")]
    assert origin_of(headers) == Origin("EAST-id_1", "a.b-c", 2, 41)
    assert without_provenance(headers) == [("app", b"x")]
    assert stamp(record(42, None), "a.b-c", 2) == [(HEADER, b"EAST-id_1/2/42/a.b-c")]
    assert stamp.skipped == 0


def test_a_copy_keeps_its_first_origin_and_never_goes_back() -> None:
    east_to_west = Stamp("east", "west")
    west_to_east = Stamp("west", "east")
    third = [(HEADER, origin_value("third", "t", 0, 7))]
    assert east_to_west(record(1, list(third)), "t", 0) == third  # kept as it is
    back = [(HEADER, origin_value("west", "t", 0, 7))]
    assert east_to_west(record(2, back), "t", 0) is None  # first written on the target
    assert east_to_west.skipped == 1
    # A cluster id that merely starts like the target's is another cluster.
    similar = [(HEADER, origin_value("westward", "t", 0, 7))]
    assert east_to_west(record(3, similar), "t", 0) == similar
    assert west_to_east.skipped == 0


def test_foreign_values_of_the_header_name_no_origin() -> None:
    for value in (None, b"", b"x/1/2", b"x/one/2/t", b"/1/2/t", b"x/1/2/"):
        assert parse_origin(value) is None
    assert parse_origin(b"id/0/0/a/b") == Origin("id", "a/b", 0, 0)
    assert without_provenance([(HEADER, b"x")]) is None
