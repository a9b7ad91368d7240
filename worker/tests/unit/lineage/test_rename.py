"""Destination topic names (kmirror.lineage.rename): the format's rules, its inverse, and the copies that are
never mirrored back."""

from __future__ import annotations

import pytest

from kmirror.errors import ConfigError
from kmirror.lineage.rename import SAME_NAME, rename


def test_without_a_format_every_topic_keeps_its_name() -> None:
    r = rename(None, "east")
    assert r is not None and r.identity and r("orders") == "orders" and r == SAME_NAME
    assert not r.came_from_target("west.orders")


@pytest.mark.parametrize(
    ("fmt", "topic", "expected"),
    [
        ("${source}.${topic}", "orders", "east.orders"),
        ("${topic}.replica", "orders", "orders.replica"),
        ("dc-${source}_${topic}-copy", "a.b", "dc-east_a.b-copy"),
    ],
)
def test_a_format_names_the_destination_and_back(fmt: str, topic: str, expected: str) -> None:
    r = rename(fmt, "east")
    assert not r.identity
    assert r(topic) == expected
    assert r.source_topic(expected) == topic
    assert r.source_topic("orders") is None


def test_renamed_copies_from_the_target_are_recognised() -> None:
    r = rename("${source}.${topic}", "west", target="east")
    assert r.came_from_target("east.events")  # east's events, copied to west: not back to east
    assert not r.came_from_target("events")
    assert not r.came_from_target("east.")  # nothing in the ${topic} place
    assert not r.came_from_target("eastern.events")
    # A format without ${source} cannot tell a copy: nothing is excluded.
    assert not rename("${topic}.replica", "west", target="east").came_from_target("events.replica")


@pytest.mark.parametrize(
    ("fmt", "words"),
    [
        ("${source}", "every source topic would get the same destination"),
        ("${topic}.${topic}", "ambiguous"),
        ("${source}.${name}", "unknown placeholder ${name}"),
        ("${source}/${topic}", "characters Kafka refuses"),
    ],
)
def test_a_format_that_could_merge_topics_or_that_kafka_refuses_is_one_line(fmt: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        rename(fmt, "east")
    line = str(err.value)
    assert line.startswith("--topic.rename.format: ") and words in line and "\n" not in line
    assert "; " in line  # the fix
