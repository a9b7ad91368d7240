"""Provenance headers (kmirror.lineage.provenance): the stamp written on each copy, kept as it was on a copy
of a copy, and no record copied back to the cluster it was first written to."""

from __future__ import annotations

from confluent_kafka import Message

from kmirror.lineage.provenance import (
    DISTRUST,
    HEADER,
    KEEP,
    SKIP,
    Origin,
    Stamp,
    judge,
    origin_of,
    origin_value,
    parse_origin,
    parse_peers,
    peer_ids,
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
    east_to_west = Stamp("east", "west", ("target", "third"))  # third mirrors into east too
    west_to_east = Stamp("west", "east")
    third = [(HEADER, origin_value("third", "t", 0, 7))]
    assert east_to_west(record(1, list(third)), "t", 0) == third  # a peer's: kept as it is
    back = [(HEADER, origin_value("west", "t", 0, 7))]
    assert east_to_west(record(2, back), "t", 0) is None  # first written on the target
    assert east_to_west.skipped == 1
    # A cluster id that merely starts like the target's is another cluster: not a peer, so replaced.
    similar = [(HEADER, origin_value("westward", "t", 0, 7))]
    assert east_to_west(record(3, similar), "t", 0) == [(HEADER, b"east/0/3/t")]
    assert (east_to_west.skipped, east_to_west.distrusted) == (1, 1)
    assert west_to_east.skipped == 0


def test_foreign_values_of_the_header_name_no_origin() -> None:
    for value in (None, b"", b"x/1/2", b"x/one/2/t", b"/1/2/t", b"x/1/2/"):
        assert parse_origin(value) is None
    assert parse_origin(b"id/0/0/a/b") == Origin("id", "a/b", 0, 0)
    assert without_provenance([(HEADER, b"x")]) is None


# ------------------------------------------------------------------------- whose headers are honoured


def test_a_hostile_producers_headers_are_replaced_and_the_record_copied() -> None:
    """Issue 34: whatever a producer on the source writes as kmirror.origin, the record is copied, unless
    the header is a well-formed claim of the target (a peer) on the record's own topic."""
    stamp = Stamp("east", "west")
    forged = {
        "the source itself": b"east/0/999999/t",  # kmirror never copies a record into its origin
        "an unknown cluster": b"attacker/0/10500/t",
        "the target, another topic": b"west/0/7/other",  # e.g. an application forwarding headers
        "the target, no offset": b"west/0/x/t",
        "the target, no topic": b"west/0/7/",
        "malformed": b"west",
        "empty": b"",
        "no value": None,
    }
    for offset, (why, value) in enumerate(forged.items()):
        headers = stamp(record(offset, [("app", b"a"), (HEADER, value), (HEADER, b"west/0/1/t")]), "t", 0)
        assert headers == [("app", b"a"), (HEADER, b"east/0/%d/t" % offset)], why  # every value replaced
        assert origin_of(headers) == Origin("east", "t", 0, offset), why
    assert (stamp.skipped, stamp.distrusted) == (0, len(forged))
    assert stamp.last_distrusted == ("t", 0, len(forged) - 1, None)


def test_a_one_way_mirror_honours_no_header() -> None:
    """--provenance.peers none: a header naming the target (no mirror writes from there) is a forgery."""
    stamp = Stamp("east", "west", parse_peers("none"))
    assert stamp(record(5, [(HEADER, b"west/0/7/t")]), "t", 0) == [(HEADER, b"east/0/5/t")]
    assert (stamp.skipped, stamp.distrusted) == (0, 1)


def test_peers_and_the_verdicts() -> None:
    assert parse_peers("target") == ("target",)
    assert parse_peers(" none ") == ()
    assert parse_peers("target, abc,abc") == ("target", "abc")
    for bad in ("", ",", "none,target", "a/b"):
        try:
            parse_peers(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
    # The source is never a peer, whatever was configured; the target is named by its id.
    peers = peer_ids(("target", "east", "third"), "east", "west")
    assert peers == {b"west": True, b"third": False}
    assert judge(b"west/1/2/t", b"t", peers) == SKIP
    assert judge(b"third/1/2/t", b"t", peers) == KEEP
    assert judge(b"east/1/2/t", b"t", peers) == DISTRUST
    assert judge(b"third/1/2/u", b"t", peers) == DISTRUST
    assert judge(b"west/-1/2/t", b"t", peers) == DISTRUST
