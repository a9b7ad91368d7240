"""kmirror.mirror.configguard: which protected topic configs an existing destination takes from its source
(only values that keep at least as many records), and the option's input. On Apache Kafka:
tests/integration/test_topic_sync.py."""

from __future__ import annotations

import pickle

import pytest

from kmirror.errors import ConfigError
from kmirror.mirror.configguard import DEFAULT_GUARD, DEFAULT_PROTECTED, KEEPS_AS_MUCH, ConfigGuard


def test_the_default_protects_every_key_it_knows_an_order_for_and_nothing_else():
    assert all(DEFAULT_GUARD.protects(k) for k in KEEPS_AS_MUCH)
    for key in (
        "compression.type",
        "min.insync.replicas",
        "retention.msx",
        "xretention.ms",
        "segment.index.bytes",
    ):
        assert not DEFAULT_GUARD.protects(key), key
    assert DEFAULT_GUARD.raw == DEFAULT_PROTECTED


@pytest.mark.parametrize(
    ("key", "new", "old", "taken"),
    [
        ("retention.ms", "1", "604800000", False),  # the purge
        ("retention.ms", "604800000", "604800000", True),
        ("retention.ms", "2592000000", "604800000", True),
        ("retention.ms", "-1", "604800000", True),  # unlimited keeps everything
        ("retention.ms", "604800000", "-1", False),  # a limit where there was none
        ("retention.ms", "-1", "-1", True),
        ("retention.bytes", "1073741824", "-1", False),
        ("retention.bytes", "-1", "1073741824", True),
        ("retention.ms", "soon", "604800000", False),  # not a number: not judged, not taken
        ("delete.retention.ms", "0", "86400000", False),  # tombstones gone before a restore reads them
        ("delete.retention.ms", "172800000", "86400000", True),
        ("min.compaction.lag.ms", "0", "3600000", False),
        ("max.compaction.lag.ms", "1", "9223372036854775807", False),
        ("segment.ms", "1", "604800000", False),  # a segment per write on the target
        ("segment.bytes", "2147483647", "1073741824", True),
        ("max.message.bytes", "100", "1048588", False),  # the target would refuse what the source holds
        ("max.message.bytes", "8388608", "1048588", True),
        ("cleanup.policy", "compact", "delete", False),  # every older value of a key gone
        ("cleanup.policy", "delete", "compact", False),  # the compacted state expires
        ("cleanup.policy", "compact,delete", "compact", False),
        ("cleanup.policy", "compact", "compact,delete", True),  # deletes less
        ("cleanup.policy", "Delete", "compact, delete", True),
        ("retention.ms", None, "604800000", False),  # removed on the source: the target's default may be less
        ("retention.ms", "604800000", None, False),  # nothing known of the destination's value
        ("compression.type", "gzip", "zstd", True),  # not protected
        ("compression.type", None, "zstd", True),
    ],
)
def test_takes_only_what_keeps_as_much(key, new, old, taken):
    assert DEFAULT_GUARD.takes(key, new, old) is taken


def test_a_key_protected_without_a_known_order_never_changes():
    guard = ConfigGuard(r"compression\.type,retention\.ms")
    assert not guard.takes("compression.type", "gzip", "zstd")
    assert guard.takes("retention.ms", "-1", "1")
    assert (
        guard.rule("compression.type")
        == "taken from the source when the destination topic is created, never later"
    )
    assert guard.rule("retention.ms").endswith("later only a higher value or -1 (unlimited)")


def test_none_protects_nothing_and_patterns_are_javas_whole_key_matches():
    assert not ConfigGuard("none").protects("retention.ms")
    assert not ConfigGuard(" None ").protects("retention.ms")
    guard = ConfigGuard("'retention.*, segment\\.ms'")  # as MirrorMaker: spaces, surrounding quotes dropped
    assert (
        guard.protects("retention.ms") and guard.protects("retention.bytes") and guard.protects("segment.ms")
    )
    assert not guard.protects("delete.retention.ms")


@pytest.mark.parametrize(
    ("raw", "needle"), [("", "empty list"), (" , ", "empty list"), ("retention.(ms", "")]
)
def test_bad_input_is_one_line_naming_the_option(raw, needle):
    with pytest.raises(ConfigError) as caught:
        ConfigGuard(raw).check()
    message = str(caught.value)
    assert message.startswith("--config.properties.protect: ") and "\n" not in message
    assert needle in message


def test_it_crosses_to_a_stream_process():
    guard = ConfigGuard(r"segment\..*").check()
    copy = pickle.loads(pickle.dumps(guard))
    assert copy == guard and copy.protects("segment.ms") and not copy.protects("retention.ms")
