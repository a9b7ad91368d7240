"""CPU-time bounds for the unit tests that guard against work growing with hostile input (quadratic
parsing, catastrophic regex backtracking, reading a whole oversized file).

They bound the CPU time the guarded work itself used, never the wall clock: on a loaded machine (CI runs
two pytest-xdist workers, Kafka brokers and other jobs on two cores) the wall clock of a 0.4 s parse can
pass 3 s while its CPU time stays 0.4 s, but a regression that does more work uses more CPU time
whatever the load. So a bound in CPU seconds keeps the number the wall-clock bound had and fails only
on the regression. A hang is not this helper's business: that stays a generous wall-clock bound (a
subprocess timeout, pytest-timeout).

Clocks: ``time.thread_time`` for work done by the test's own thread (the parsers, the filter engine),
``time.process_time`` for in-process work that may use other threads (``kmirror.cli.main``: librdkafka's
threads), :func:`children_cpu` for child processes once they have been waited for.
"""

from __future__ import annotations

import contextlib
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass


def children_cpu() -> float:
    """User and system CPU seconds of this process's children that have ended and been waited for (and
    of the children they waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Spent:
    """The CPU seconds a `cpu_time_under` block used, set when the block ends."""

    seconds: float = 0.0


@contextlib.contextmanager
def cpu_time_under(limit: float, what: str, clock: Callable[[], float] = time.thread_time) -> Iterator[Spent]:
    """Fails the test if the block used `limit` CPU seconds or more by `clock` (this thread's by default).

    Inside a hypothesis test with ``deadline=None`` it is the per-example deadline, in CPU time: a failing
    example is shrunk as a missed deadline would be. A block that raises is not timed."""
    spent = Spent()
    started = clock()
    yield spent
    spent.seconds = clock() - started
    assert spent.seconds < limit, f"{what}: {spent.seconds:.2f} s of CPU time, the bound is {limit} s"
