"""librdkafka's repeated lines, rate-limited (kmirror.mirror.repeats): one line per kind per window."""

from __future__ import annotations

import logging

from kmirror.mirror.repeats import Repeats


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
