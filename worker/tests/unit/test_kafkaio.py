"""kmirror.kafkaio: whether a stuck group has partitions to give, without a broker."""

from __future__ import annotations

from kmirror.kafkaio import partitions_to_give


def test_partitions_to_give_while_a_rebalance_does_not_finish():
    assert "not STABLE" in (partitions_to_give("PREPARING_REBALANCE", [], 4) or "")
    assert "not STABLE" in (partitions_to_give("UNKNOWN", [], 4) or "")
    assert "not STABLE" in (partitions_to_give("EMPTY", [], 4) or "")


def test_partitions_to_give_in_a_stable_group_that_lists_its_members():
    a, b = [("t", 0), ("t", 1)], [("t", 2)]
    assert partitions_to_give("STABLE", [a, b], 4) == "1 of 4 partitions have no owner"
    assert partitions_to_give("STABLE", [a, b], 3) == "a member owns 2 partitions"
    # More members than partitions: an idle member is normal.
    assert partitions_to_give("STABLE", [[("t", 0)], [("t", 1)], []], 2) is None


def test_a_stable_group_without_a_member_list_cannot_tell():
    assert partitions_to_give("STABLE", [], 4) is None
