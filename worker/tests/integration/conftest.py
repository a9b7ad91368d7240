"""Fixtures of the integration tests: real clusters and the `kmirror run` processes a test started.

``kafka`` is a pair of Apache Kafka clusters (``source``, ``target``; KRaft, from Kafka's pinned jars). Tests
that need clusters configured their own way start them with ``kmirror.testing.kafka.running``.

The helpers the tests import are in mirror_harness.py (a uniquely named module: one pytest run collects every
test tree, and each tree's conftest.py is only ever loaded by pytest itself).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from mirror_harness import Worker

from kmirror.testing.kafka import KafkaCluster, kafka_clusters


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[dict[str, KafkaCluster]]:
    with kafka_clusters("source", "target", log_dir=tmp_path / "brokers") as c:
        yield c


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for w in started:
        if w.proc.poll() is None:
            os.killpg(w.proc.pid, signal.SIGKILL)
            w.proc.wait(10)
