"""Expressions in the roles' defaults and vars, evaluated by Ansible's own templar (filters included)."""

from __future__ import annotations

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import add_all_plugin_dirs
from ansible.template import Templar, trust_as_template
from ansible_harness import ROLES

# Every role depends on kmirror_common (meta/main.yml): its defaults and filters are there as in a play.
add_all_plugin_dirs(str(ROLES / "kmirror_common"))
COMMON = {  # trusted, as a role's defaults are in a play
    k: trust_as_template(v) if isinstance(v, str) else v
    for k, v in yaml.safe_load((ROLES / "kmirror_common/defaults/main.yml").read_text()).items()
}


def evaluate(role: str, kind: str, name: str, **variables: object) -> object:
    data = yaml.safe_load((ROLES / role / kind / "main.yml").read_text())
    templar = Templar(loader=DataLoader(), variables={**COMMON, **data, **variables})
    return templar.template(trust_as_template(data[name]))


SOURCES = [
    {"name": "east", "consumer_properties": {"socket.receive.buffer.bytes": 8388608}},
    {"name": "west"},  # no consumer_properties at all
    {"name": "north", "consumer_properties": {}},
]


@pytest.mark.parametrize(
    ("sources", "target", "rmem", "wmem"),
    [
        (
            SOURCES,
            {"name": "t", "producer_properties": {"socket.send.buffer.bytes": 16777216}},
            8388608,
            16777216,
        ),
        ([{"name": "west"}], {"name": "t"}, 4194304, 4194304),
    ],
)
def test_sysctl_limits_cover_every_cluster(sources, target, rmem, wmem):
    given = {"kmirror_source_clusters": sources, "kmirror_target_cluster": target}
    assert int(evaluate("kmirror_sysctl", "defaults", "kmirror_sysctl_rmem_max", **given)) == rmem
    assert int(evaluate("kmirror_sysctl", "defaults", "kmirror_sysctl_wmem_max", **given)) == wmem


@pytest.mark.parametrize(
    ("state", "upgraded", "expected"),
    [("started", False, ["west"]), ("started", True, ["east", "west"]), ("stopped", True, [])],
)
def test_restart_list_of_the_handlers(state, upgraded, expected):
    got = evaluate(
        "kmirror_service",
        "vars",
        "kmirror_service_restart_list",
        kmirror_service_state=state,
        kmirror_worker_upgraded=upgraded,
        kmirror_source_clusters=[{"name": "east"}, {"name": "west"}, {"name": "south"}],
        kmirror_config_changed_sources=["west"],
        kmirror_service_changed_sources=[],
        kmirror_service_started_sources=["south"],
    )
    assert got == expected


def test_shared_defaults_live_in_kmirror_common_only():
    """The service user, virtualenv, configuration root and socket buffers: one definition each."""
    for role_dir in sorted(ROLES.glob("kmirror_*")):
        meta = yaml.safe_load((role_dir / "meta/main.yml").read_text())
        deps = [d["role"] if isinstance(d, dict) else d for d in meta.get("dependencies") or []]
        assert deps == ([] if role_dir.name == "kmirror_common" else ["kmirror_common"]), role_dir.name
        defaults = role_dir / "defaults/main.yml"
        values = yaml.safe_load(defaults.read_text()) if defaults.exists() else {}
        if role_dir.name != "kmirror_common":
            for key, value in values.items():
                assert not key.endswith(("_venv", "_user", "_group", "_config_dir", "_buffer_bytes")), key
                assert value not in ("kmirror", "/opt/kmirror", "/etc/kmirror", 4194304), key
    sysctl = {"kmirror_source_clusters": [{"name": "east"}], "kmirror_target_cluster": {"name": "t"}}
    raised = {**sysctl, "kmirror_common_socket_receive_buffer_bytes": 16777216}
    assert int(evaluate("kmirror_sysctl", "defaults", "kmirror_sysctl_rmem_max", **raised)) == 16777216


@pytest.mark.parametrize("role", ["kmirror_config", "kmirror_topics", "kmirror_acls", "kmirror_service"])
def test_the_selection_limits_a_role_to_the_named_sources(role):
    name = f"{role}_sources"
    sources = [{"name": "east"}, {"name": "west"}]
    every = evaluate(role, "vars", name, kmirror_source_clusters=sources, kmirror_sources_selected=[])
    one = evaluate(role, "vars", name, kmirror_source_clusters=sources, kmirror_sources_selected="west")
    assert [s["name"] for s in every] == ["east", "west"]
    assert [s["name"] for s in one] == ["west"]


def test_topics_get_each_sources_replication_factor_else_the_roles():
    sources = [
        {"name": "east", "replication_factor": 3},  # as `kmirror run --replication.factor 3` gets it
        {"name": "west"},
        {"name": "north", "replication_factor": None},
    ]
    got = evaluate(
        "kmirror_topics",
        "vars",
        "kmirror_topics_replication_factors",
        kmirror_topics_sources=sources,  # what vars/main.yml makes of kmirror_source_clusters (tested above)
        kmirror_topics_replication_factor=2,
    )
    assert got == {"east": 3, "west": 2, "north": 2}
    default = evaluate(
        "kmirror_topics",
        "vars",
        "kmirror_topics_replication_factors",
        kmirror_topics_sources=[{"name": "west"}],
        kmirror_topics_replication_factor=-1,
    )
    assert default == {"west": -1}
