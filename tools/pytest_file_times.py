"""A pytest plugin: the longest test files first, and at the end of a run where the time went, one line per
test file.

Loaded by pytest.ini (``-p pytest_file_times``). pytest-xdist's ``--dist loadfile`` hands out files by
their number of tests (its default reordering); :data:`LONGEST_FIRST` (the longest files of a measured run,
docs/testing.md) are collected first, which orders files of equal count. Handing them out strictly in this
order (``--no-loadscope-reorder``) ran every long file at once and a loaded run failed two tests, so make
test does not. With pytest-xdist the reports reach the controller, so
the table covers every worker. Each row: the file's wall time summed over its tests (setup, call and
teardown: a fixture that starts clusters counts), the CPU time its worker and the processes it waited for
spent meanwhile (brokers, `kmirror run`, guests' tools: a process's CPU counts when it is reaped, so a
module's clusters count at its last test), its number of tests and its slowest test. docs/testing.md
keeps the table of a whole ``make test`` run; the run's own table is at the end of CI's output.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator

import pytest

ROWS = 25

# The longest files of a measured `make test` (docs/testing.md, "Where the time goes"), longest first.
LONGEST_FIRST = (
    "worker/tests/integration/test_outage.py",
    "worker/tests/integration/test_failover.py",
    "worker/tests/integration/test_restarts.py",
    "worker/tests/integration/test_active_active.py",
    "worker/tests/integration/test_link_cuts.py",
    "tests/terraform/test_terraform_local_env.py",
    "worker/tests/integration/test_broker_faults.py",
    "worker/tests/integration/test_audit_cluster.py",
    "worker/tests/integration/test_audit.py",
    "worker/tests/integration/test_cutover.py",
    "worker/tests/integration/test_acls_enforced.py",
    "tests/hosts/test_manual_install.py",
)

_total: dict[str, float] = defaultdict(float)
_tests: dict[str, set[str]] = defaultdict(set)
_slowest: dict[str, tuple[float, str]] = {}
_per_test: dict[str, float] = defaultdict(float)
_cpu: dict[str, float] = defaultdict(float)


def _cpu_now() -> float:
    """CPU seconds of this process and of every child process it has reaped."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    item.stash[_CPU_START] = _cpu_now()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    now = _cpu_now()
    report.user_properties.append(("cpu_seconds", now - item.stash.get(_CPU_START, now)))
    item.stash[_CPU_START] = now


_CPU_START = pytest.StashKey[float]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(
        key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank))
    )  # stable: the rest keep order


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    _total[path] += report.duration
    _tests[path].add(report.nodeid)
    _per_test[report.nodeid] += report.duration
    _cpu[path] += sum(float(v) for k, v in report.user_properties if k == "cpu_seconds")
    spent = _per_test[report.nodeid]
    if spent > _slowest.get(path, (0.0, ""))[0]:
        _slowest[path] = (spent, report.nodeid.split("::", 1)[-1])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _total:
        return
    ranked = sorted(_total.items(), key=lambda kv: -kv[1])
    terminalreporter.section(f"time per test file (the {min(ROWS, len(ranked))} slowest of {len(ranked)})")
    terminalreporter.write_line(f"{'seconds':>8} {'cpu s':>7} {'tests':>5}  file  (slowest test, seconds)")
    for path, seconds in ranked[:ROWS]:
        slow, name = _slowest[path]
        terminalreporter.write_line(
            f"{seconds:8.1f} {_cpu[path]:7.1f} {len(_tests[path]):5d}  {path}  ({name[:60]}, {slow:.1f})"
        )
    rest = sum(s for _, s in ranked[ROWS:])
    rest_cpu = sum(_cpu[p] for p, _ in ranked[ROWS:])
    terminalreporter.write_line(
        f"{rest:8.1f} {rest_cpu:7.1f}        the other {max(0, len(ranked) - ROWS)} files"
    )
    terminalreporter.write_line(
        f"{sum(_total.values()):8.1f} {sum(_cpu.values()):7.1f}        all files (summed over the workers)"
    )
