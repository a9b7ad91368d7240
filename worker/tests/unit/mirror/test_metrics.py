"""kmirror.mirror.metrics: Collector.health, the judgement behind /health: each stream's state from what it
reported and how its process ended (the endpoint itself is tested against Kafka in
integration/test_health_endpoint.py); the membership gauges."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from kmirror.mirror import metrics
from kmirror.mirror.metrics import Collector, Snapshot


def judged(collector: Collector) -> tuple[bool, dict[str, str]]:
    healthy, doc = collector.health()
    assert doc["status"] == ("ok" if healthy else "unhealthy")
    return healthy, {s["stream"]: s["state"] for s in doc["streams"]}


def test_no_stream_is_not_healthy():
    assert judged(Collector()) == (False, {})


def test_states_from_reports_and_exits():
    c = Collector()
    for i in range(3):
        c.expect("east", i, f"east#{i}", unassigned_after_s=12.0)
    assert judged(c) == (False, dict.fromkeys(["east#0", "east#1", "east#2"], "starting"))
    c.update(Snapshot("east", 0, assigned_partitions=2))
    c.update(Snapshot("east", 1, assigned_partitions=0, unassigned_seconds=3.0))  # joining: not yet stuck
    c.update(Snapshot("east", 2, assigned_partitions=1))
    assert judged(c) == (True, dict.fromkeys(["east#0", "east#1", "east#2"], "running"))
    c.update(Snapshot("east", 1, assigned_partitions=0, unassigned_seconds=12.5))
    c.update(Snapshot("east", 2, assigned_partitions=1, blocked_seconds=7.0))
    assert judged(c) == (False, {"east#0": "running", "east#1": "unassigned", "east#2": "blocked"})
    c.ended("east", 1, 0)
    c.ended("east", 2, 3)
    c.update(Snapshot("east", 2, assigned_partitions=1))  # a late report does not revive an ended stream
    assert judged(c) == (False, {"east#0": "running", "east#1": "stopped", "east#2": "failed"})
    _, doc = c.health()
    failed = next(s for s in doc["streams"] if s["stream"] == "east#2")
    assert failed["exit_code"] == 3 and "code 3" in failed["reason"]


# --- the membership gauges


def test_assigned_and_unassigned_gauges_per_stream():
    c = metrics.Collector()
    c.update(metrics.Snapshot("east", 0, assigned_partitions=3))
    c.update(metrics.Snapshot("east", 1, assigned_partitions=0, unassigned_seconds=42.04))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(c)
    text = generate_latest(registry).decode()
    assert 'kmirror_assigned_partitions{source="east",stream="0"} 3.0' in text
    assert 'kmirror_assigned_partitions{source="east",stream="1"} 0.0' in text
    assert 'kmirror_unassigned_seconds{source="east",stream="0"} 0.0' in text
    assert 'kmirror_unassigned_seconds{source="east",stream="1"} 42.0' in text
