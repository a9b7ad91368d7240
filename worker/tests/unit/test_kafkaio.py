"""kmirror.kafkaio without a broker: whether a stuck group has partitions to give; librdkafka's repeated
lines rate-limited (one line per kind per window) on every client logger."""

from __future__ import annotations

import logging

from kmirror.kafkaio import OwnRepeats, Repeats, client_log, partitions_to_give, repeats


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


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def line(fac: str, text: str, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(
        "kmirror.librdkafka.consumer", level, "", 0, "%s [%s] %s", (fac, "rdkafka#consumer-1", text), None
    )


RESOLVE = (
    "[thrd:a:6667/bootstrap]: a:6667/bootstrap: Failed to resolve 'a:6667': Name or service not known "
    "(after {}ms in state CONNECT)"
)


def test_repeats_of_one_kind_are_held_back_for_the_window_then_counted() -> None:
    clock = Clock()
    r = Repeats(window_s=60, clock=clock)
    assert r.filter(line("FAIL", RESOLVE.format(0)))
    passed = [r.filter(line("FAIL", RESOLVE.format(i))) for i in range(1, 177)]
    assert not any(passed)
    clock.now = 61
    again = line("FAIL", RESOLVE.format(3))
    assert r.filter(again)
    assert again.getMessage().endswith("(176 more like it in the last 61 s)")


def test_different_brokers_and_failures_are_different_kinds() -> None:
    r = Repeats(window_s=60, clock=Clock())
    assert r.filter(line("FAIL", RESOLVE.format(0)))
    assert r.filter(line("FAIL", RESOLVE.format(0).replace("a:6667", "b:6667")))
    assert r.filter(line("SESSTMOUT", "session timed out", logging.WARNING))
    assert not r.filter(line("FAIL", RESOLVE.format(9)))


def test_the_last_failure_is_kept_without_librdkafka_timings_even_when_held_back() -> None:
    r = Repeats(window_s=60, clock=Clock())
    r.filter(line("FAIL", RESOLVE.format(0)))
    r.filter(line("FAIL", RESOLVE.format(5).replace("a:6667", "c:6667")))
    assert r.last_failure == "c:6667/bootstrap: Failed to resolve 'c:6667': Name or service not known"


def test_debug_and_info_lines_and_other_loggers_pass() -> None:
    r = Repeats(window_s=60, clock=Clock())
    for _ in range(3):
        assert r.filter(line("INIT", "initialized", logging.INFO))
    plain = logging.LogRecord("x", logging.ERROR, "", 0, "plain %s", ("text",), None)
    assert r.filter(plain) and r.filter(plain)


REFUSED = (
    "[thrd:127.0.0.1:60639/{}]: 127.0.0.1:60639/{}: Connect to ipv4#127.0.0.1:60639 failed: Connection "
    "refused (after 0ms in state CONNECT)"
)


def test_every_client_logger_holds_a_cut_link_to_one_line_per_broker_handle(caplog) -> None:
    """The lines of a cut link as the group sync's and sync writer's clients wrote them (about 1,500 per
    stream in 20 s, hundreds queued in one millisecond): one per broker handle reaches the log, once."""
    logger = client_log("groupsync")
    assert repeats(logger) is logger.filters[0] and client_log("groupsync") is logger
    assert len([f for f in logger.filters if isinstance(f, Repeats)]) == 1
    with caplog.at_level(logging.WARNING, logger="kmirror.librdkafka"):
        for i in range(1500):
            handle = "bootstrap" if i % 3 else "1"
            client = f"rdkafka#{'consumer' if i % 2 else 'producer'}-{i % 5 + 6}"
            logger.error("%s [%s] %s", "FAIL", client, REFUSED.format(handle, handle))
    shown = [r.getMessage() for r in caplog.records if r.name == "kmirror.librdkafka.groupsync"]
    assert len(shown) == 2, shown
    assert len(set(shown)) == 2


def test_kmirrors_own_repeated_warnings_pass_once_a_window_with_their_count() -> None:
    """The group offset sync's warning each second while a group coordinator answers FENCED_LEADER_EPOCH
    (seen after a source node restart), the sync writer's at every commit point."""
    clock = Clock()
    r = OwnRepeats(window_s=60, clock=clock)

    def warning(msg: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord("kmirror.failover.groupsync", logging.WARNING, "", 0, msg, args, None)

    fenced = "%s: group %s: %s"
    epoch = "Broker: Leader epoch is older than broker epoch"
    assert r.filter(warning(fenced, "consumer", "app-coord", epoch))
    for second in range(1, 60):
        clock.now = second
        assert not r.filter(warning(fenced, "consumer", "app-coord", epoch))
    assert r.filter(warning(fenced, "consumer", "other", epoch))
    assert r.filter(logging.LogRecord("x", logging.INFO, "", 0, "stats in=%d", (1,), None))
    clock.now = 61
    again = warning(fenced, "consumer", "app-coord", epoch)
    assert r.filter(again)
    assert again.getMessage() == f"consumer: group app-coord: {epoch} (59 more like it in the last 61 s)"


def test_the_group_sync_and_sync_writer_loggers_have_it() -> None:
    from kmirror.failover import groupsync, writer

    for module in (groupsync, writer):
        assert [f for f in module.log.filters if isinstance(f, OwnRepeats)], module.__name__
