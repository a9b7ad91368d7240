"""Fixtures shared by the unit tests (fixtures only: never imported by name)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from kmirror.mirror import runner


@pytest.fixture
def cli_checks_only(monkeypatch: pytest.MonkeyPatch, no_kafka_opts: None) -> Iterator[None]:
    """`kmirror run` in-process stops before its streams would start (a test fails if it gets there),
    KAFKA_OPTS from the environment is ignored, and the logging `run` sets up is undone afterwards."""

    def no_network(*args: object, **kwargs: object) -> int:
        pytest.fail("kmirror run got past its checks and would have started mirroring")

    monkeypatch.setattr(runner, "run", no_network)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def no_kafka_opts(monkeypatch: pytest.MonkeyPatch) -> None:
    """KAFKA_OPTS from the environment is ignored (a JAAS file it names would be read for every plan)."""
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
