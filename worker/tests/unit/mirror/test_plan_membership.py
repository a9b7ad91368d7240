"""kmirror.mirror.plan and group membership, without a broker: the assignor default, group.instance.id per
stream, the unassigned warning's bound. The stuck-group rules are in test_kafkaio.py and
health/test_rules.py, the gauges in test_metrics.py, the supervisor's one-at-a-time stop in test_runner.py."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

import pytest

from kmirror.config import load_client_config, safety
from kmirror.errors import ConfigError
from kmirror.mirror.plan import MirrorOptions, build_plan, unassigned_warn_s

from .plans import plan_for

pytestmark = pytest.mark.usefixtures("no_kafka_opts")  # worker/tests/unit/conftest.py


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
