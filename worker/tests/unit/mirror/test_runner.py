"""kmirror.mirror.runner: the supervisor stops streams one at a time, each after the others rebalanced."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kmirror.mirror import runner

from .plans import plan_for

pytestmark = pytest.mark.usefixtures("no_kafka_opts")  # worker/tests/unit/conftest.py

# --- the supervisor stops streams one at a time ---


class _Proc:
    """A real child process standing in for a stream process (sleeps until SIGTERM)."""

    def __init__(self) -> None:
        self.p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        self.pid = self.p.pid

    @property
    def exitcode(self) -> int | None:
        return self.p.poll()


class _Counter:
    def __init__(self) -> None:
        self.value = 0


class _Clock:
    """runner's `time` in a test: monotonic() moves only when the test moves it; the rest is `time`."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    """The supervisor's deadlines on a clock the test moves: what it does before and at a deadline, however
    long a busy machine takes between two steps (a stall would otherwise pass a deadline, or stretch a
    measured wait past any bound)."""
    fake = _Clock()
    monkeypatch.setattr(runner, "time", fake)
    return fake


@contextlib.contextmanager
def first_stopped(
    tmp_path: Path, properties: str, streams: int
) -> Iterator[tuple[runner._OneAtATime, list[_Proc], list[_Counter]]]:
    """A _OneAtATime over stand-in stream processes, its first step taken (stream 0 stopped); every
    process still running is killed after."""
    specs = plan_for(tmp_path, properties, static=False, streams=streams).stream_specs()
    procs = [_Proc() for _ in specs]
    counters = [_Counter() for _ in specs]
    try:
        turn = runner._OneAtATime(specs, procs, counters)  # type: ignore[arg-type]
        turn.step()
        procs[0].p.wait(10)
        yield turn, procs, counters
    finally:
        for p in procs:
            if p.exitcode is None:
                p.p.kill()
                p.p.wait()


def test_streams_are_stopped_in_turn_after_the_others_rebalanced(tmp_path, clock):
    # the clock stands still: no wait for a rebalance ends at its deadline (6 s), only by the rebalance
    with first_stopped(tmp_path, "session.timeout.ms=6000\n", 3) as (turn, procs, counters):
        assert procs[1].exitcode is None and procs[2].exitcode is None
        turn.step()  # stream 0 is gone: the others must rebalance first
        turn.step()
        assert procs[1].exitcode is None
        counters[1].value += 1  # stream 1 rebalanced, stream 2 not yet
        turn.step()
        assert procs[1].exitcode is None
        counters[2].value += 1
        turn.step()
        assert procs[1].p.wait(10) == -signal.SIGTERM
        assert procs[2].exitcode is None
        turn.step()  # stream 1 is gone: stream 2 must take its partitions first
        assert procs[2].exitcode is None
        counters[2].value += 1
        turn.step()
        assert procs[2].p.wait(10) == -signal.SIGTERM
        turn.step()  # nobody left: nothing happens
        assert turn.current is None or procs[turn.current].exitcode is not None


def test_a_rebalance_that_does_not_come_is_waited_for_at_most_the_session_timeout(tmp_path, clock):
    # Was: the time until stream 1 exited, within 0.8-5 s of wall clock (a busy machine stretches it). Now
    # on the supervisor's clock: stream 1 is not stopped 0.999 s after stream 0 exited, and is at 1 s.
    with first_stopped(tmp_path, "session.timeout.ms=1000\n", 2) as (turn, procs, _):
        assert turn.specs[0].unassigned_warn_s / 2 == 1.0  # the session timeout
        turn.step()  # stream 0 has exited: the wait for stream 1's rebalance starts
        clock.now = 0.999
        turn.step()
        assert turn.current == 0 and procs[1].exitcode is None  # still waiting: stream 1 not told to stop
        clock.now = 1.0
        turn.step()
        assert turn.current == 1  # the rebalance did not come: stream 1 is told to stop
        assert procs[1].p.wait(60) == -signal.SIGTERM
