"""Fixtures shared by the tests of the deployment side (tests/ansible, tests/hosts, tests/terraform)."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from pathlib import Path

import pytest

# One pytest run collects every test tree on two xdist workers (one test file each at a time). The test
# modules that boot systemd-nspawn guests (tests/hosts, tests/terraform's envs/local end to end) take this
# lock for as long as their guests live, so they never boot, converge or tear down at the same time. It is
# not /tmp/kmirror-hosts.lock: a whole `make test` may run under that one (flock is per open file, so
# taking it again here would wait forever).
HOST_TESTS_LOCK = Path("/tmp/kmirror-pytest-hosts.lock")


@pytest.fixture(scope="module")
def host_tests_lock() -> Iterator[None]:
    with HOST_TESTS_LOCK.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
