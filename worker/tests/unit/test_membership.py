"""Group membership without a broker: assignor default, group.instance.id per stream, the stuck-group
rules, unowned partitions, the gauges, and the supervisor's one-at-a-time stop."""

from __future__ import annotations

import hashlib
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from kmirror.config import load_client_config, safety
from kmirror.errors import ConfigError
from kmirror.health import rules as health
from kmirror.kafkaio import partitions_to_give
from kmirror.mirror import metrics, runner
from kmirror.mirror.plan import MirrorOptions, build_plan, unassigned_warn_s

PRODUCER = "bootstrap.servers=127.0.0.1:1\n"


@pytest.fixture(autouse=True)
def _no_kafka_opts(monkeypatch):
    monkeypatch.delenv("KAFKA_OPTS", raising=False)


def plan_for(
    tmp_path: Path, consumer: str, *, static: bool | None = None, streams: int = 2, name: str = "east"
):
    """A plan from a consumer file NAME.properties in tmp_path; static None: the default."""
    c = tmp_path / f"{name}.properties"
    c.write_text("bootstrap.servers=127.0.0.1:1\ngroup.id=mirror\n" + consumer)
    p = tmp_path / "producer.properties"
    p.write_text(PRODUCER)
    chosen = {} if static is None else {"static_membership": static}
    return build_plan(
        MirrorOptions(
            consumer_configs=[str(c)],
            producer_config=str(p),
            include=".*",
            num_streams=streams,
            **chosen,
        )
    )


def test_cooperative_sticky_is_the_default_and_a_file_may_choose_another(tmp_path):
    assert safety.DEFAULTS["consumer"]["partition.assignment.strategy"] == "cooperative-sticky"
    default = tmp_path / "a.properties"
    default.write_text("bootstrap.servers=x:1\ngroup.id=g\n")
    assert load_client_config(default, "consumer").settings["partition.assignment.strategy"] == (
        "cooperative-sticky"
    )
    java = tmp_path / "b.properties"
    java.write_text(
        "bootstrap.servers=x:1\ngroup.id=g\n"
        "partition.assignment.strategy=org.apache.kafka.clients.consumer.RangeAssignor\n"
    )
    assert load_client_config(java, "consumer").settings["partition.assignment.strategy"] == "range"


def ids(specs) -> list[str]:
    return [s.consumer["group.instance.id"] for s in specs]


def path_hash(path: Path) -> str:
    return hashlib.sha256(str(path.absolute()).encode()).hexdigest()[:8]


def test_static_members_by_default_host_source_file_and_stream(tmp_path):
    specs = build_plan_specs(tmp_path, "", static=None)
    host = socket.gethostname().split(".")[0]
    where = path_hash(tmp_path / "east.properties")
    assert ids(specs) == [f"kmirror-{host}-east-{where}-0", f"kmirror-{host}-east-{where}-1"]


def test_static_ids_are_stable_across_restarts_of_one_process(tmp_path):
    assert ids(build_plan_specs(tmp_path, "", static=None)) == ids(
        build_plan_specs(tmp_path, "", static=True)
    )


def test_two_processes_on_one_host_with_their_own_files_get_distinct_ids(tmp_path):
    """Two units on one host: the same file name (and so the same source name) in two folders."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = ids(build_plan_specs(tmp_path / "a", "", static=None))
    b = ids(build_plan_specs(tmp_path / "b", "", static=None))
    assert not set(a) & set(b)
    assert [i.rsplit("-", 2)[0] for i in a] == [i.rsplit("-", 2)[0] for i in b]  # only the file differs


def test_a_relative_path_names_the_same_file_as_its_absolute_path(tmp_path, monkeypatch):
    absolute = ids(build_plan_specs(tmp_path, "", static=None))
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "producer.properties"
    relative = build_plan(
        MirrorOptions(
            consumer_configs=["east.properties"], producer_config=str(p), include=".*", num_streams=2
        )
    ).stream_specs()
    assert ids(relative) == absolute


def test_static_ids_are_ones_kafka_accepts(tmp_path):
    """Kafka takes at most 249 characters of A-Z a-z 0-9 . _ - (JoinGroupRequest.validateGroupInstanceId)."""
    name = "a source name with spaces and ünïcode " + "x" * 300
    specs = plan_for(tmp_path, "", name=name[:200], streams=3).stream_specs()
    for i in ids(specs):
        assert len(i) <= 249 and all(c.isascii() and (c.isalnum() or c in "._-") for c in i), i


def test_dynamic_members_with_static_membership_false(tmp_path):
    specs = build_plan_specs(tmp_path, "", static=False)
    assert all("group.instance.id" not in s.consumer for s in specs)


def test_dynamic_members_drop_an_instance_id_from_the_file(tmp_path):
    specs = build_plan_specs(tmp_path, "group.instance.id=mine\n", static=False)
    assert all("group.instance.id" not in s.consumer for s in specs)


def test_static_ids_start_from_the_files_group_instance_id(tmp_path):
    assert ids(build_plan_specs(tmp_path, "group.instance.id=dc1-mirror-a\n")) == [
        "dc1-mirror-a-0",
        "dc1-mirror-a-1",
    ]


@pytest.mark.parametrize("given", ["has space", "x" * 248])
def test_a_files_group_instance_id_kafka_would_refuse_is_one_line(tmp_path, given):
    with pytest.raises(ConfigError) as e:
        build_plan_specs(tmp_path, f"group.instance.id={given}\n")
    assert e.value.exit_code == 2
    assert "east.properties: group.instance.id: " in str(e.value) and "\n" not in str(e.value)
    build_plan_specs(tmp_path, f"group.instance.id={given}\n", static=False)  # dynamic: not used


def test_unassigned_warning_bound_is_twice_the_session_timeout(tmp_path):
    assert unassigned_warn_s({}) == 90.0
    assert unassigned_warn_s({"session.timeout.ms": "6000"}) == 12.0
    specs = build_plan_specs(tmp_path, "session.timeout.ms=10000\n", static=False)
    assert {s.unassigned_warn_s for s in specs} == {20.0}


def build_plan_specs(tmp_path: Path, consumer: str, *, static: bool | None = None):
    return plan_for(tmp_path, consumer, static=static).stream_specs()


# --- the stuck-group rules ---


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


def test_unowned_partitions():
    owners = {("t", 0): "c1@h", ("t", 1): "none"}
    assert health.unowned("STABLE", True, owners) == [("t", 1)]
    assert health.unowned("EMPTY", False, owners) == [("t", 0), ("t", 1)]
    assert health.unowned("STABLE", False, owners) == []


# --- gauges ---


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


def test_streams_are_stopped_in_turn_after_the_others_rebalanced(tmp_path):
    specs = plan_for(tmp_path, "session.timeout.ms=6000\n", static=False, streams=3).stream_specs()
    procs = [_Proc() for _ in specs]
    counters = [_Counter() for _ in specs]
    try:
        turn = runner._OneAtATime(specs, procs, counters)  # type: ignore[arg-type]
        turn.step()
        procs[0].p.wait(10)
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
    finally:
        for p in procs:
            if p.exitcode is None:
                p.p.kill()
                p.p.wait()


def test_a_rebalance_that_does_not_come_is_waited_for_at_most_the_session_timeout(tmp_path):
    specs = plan_for(tmp_path, "session.timeout.ms=1000\n", static=False, streams=2).stream_specs()
    procs = [_Proc() for _ in specs]
    counters = [_Counter() for _ in specs]
    try:
        turn = runner._OneAtATime(specs, procs, counters)  # type: ignore[arg-type]
        turn.step()
        procs[0].p.wait(10)
        turn.step()
        started = time.monotonic()
        while procs[1].exitcode is None and time.monotonic() - started < 10:
            turn.step()
            time.sleep(0.05)
        assert procs[1].exitcode == -signal.SIGTERM
        assert 0.8 <= time.monotonic() - started < 5
    finally:
        for p in procs:
            if p.exitcode is None:
                p.p.kill()
                p.p.wait()
