"""One variable selects source clusters in every playbook and role: kmirror_sources_selected (kmirror_common).

The playbooks run for real with ansible-playbook on this machine (connection local, the worker group is
localhost) up to where they would need systemd or a broker: their checks of the selection, the failover's
"is the instance deployed here", remove_source_cluster.yml in check mode on directories under pytest's tmp
dir. The names it replaced still work for one release, with a warning naming the new variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import add_all_plugin_dirs
from ansible.template import Templar, trust_as_template
from ansible_harness import ROLES, ROOT, load_module

F = load_module(ROLES / "kmirror_common/filter_plugins/kmirror_common.py", "kmirror_common_selection")
SOURCES = [{"name": "east"}, {"name": "west"}, {"name": "north"}]
DEPRECATED = "is deprecated and will be removed in the next release: use -e kmirror_sources_selected="


def test_names_from_a_list_or_a_comma_separated_string() -> None:
    assert F.kmirror_source_names("east, west,,east") == ["east", "west"]
    assert F.kmirror_source_names(["east", " west "]) == ["east", "west"]
    assert F.kmirror_source_names("") == F.kmirror_source_names(None) == F.kmirror_source_names([]) == []
    with pytest.raises(AnsibleFilterError, match="give source names as a list or as NAME"):
        F.kmirror_source_names({"east": 1})


def test_selected_sources_all_some_or_an_unknown_name() -> None:
    assert F.kmirror_selected_sources(SOURCES, []) == SOURCES
    assert F.kmirror_selected_sources(SOURCES, "north,east") == [SOURCES[0], SOURCES[2]]  # inventory order
    with pytest.raises(
        AnsibleFilterError, match=r"names south, not in kmirror_source_clusters \(defined: east, "
    ):
        F.kmirror_selected_sources(SOURCES, "east,south")


def test_replaced_names_are_read_and_must_agree() -> None:
    assert F.kmirror_sources_from_renamed({}) == []
    assert F.kmirror_sources_from_renamed({"kmirror_new_source": "west"}) == ["west"]
    both = {"kmirror_restart_only": "east,west", "kmirror_audit_only": ["east", "west"]}
    assert F.kmirror_sources_from_renamed(both) == ["east", "west"]
    with pytest.raises(AnsibleFilterError, match="name different sources: set only kmirror_sources_selected"):
        F.kmirror_sources_from_renamed({"kmirror_new_source": "west", "kmirror_service_only": ["east"]})


# Every role's "which sources" expression reads kmirror_sources_selected (evaluated by Ansible's templar).
add_all_plugin_dirs(str(ROLES / "kmirror_common"))


@pytest.mark.parametrize(
    ("role", "kind", "name"),
    [
        ("kmirror_config", "vars", "kmirror_config_sources"),
        ("kmirror_acls", "vars", "kmirror_acls_sources"),
        ("kmirror_topics", "vars", "kmirror_topics_sources"),
        ("kmirror_service", "vars", "kmirror_service_sources"),
        ("kmirror_lag", "defaults", "kmirror_lag_sources"),
    ],
)
def test_every_role_reads_the_one_variable(role: str, kind: str, name: str) -> None:
    common = {  # trusted, as a role's defaults are in a play
        k: trust_as_template(v) if isinstance(v, str) else v
        for k, v in yaml.safe_load((ROLES / "kmirror_common/defaults/main.yml").read_text()).items()
    }
    data = yaml.safe_load((ROLES / role / kind / "main.yml").read_text())
    for selected, expected in (("west", ["west"]), (["north", "east"], ["east", "north"]), ([], None)):
        variables = {
            **common,
            **data,
            "kmirror_source_clusters": SOURCES,
            "kmirror_sources_selected": selected,
        }
        got = Templar(loader=DataLoader(), variables=variables).template(trust_as_template(data[name]))
        names = [s if isinstance(s, str) else s["name"] for s in got]
        assert names == (expected or ["east", "west", "north"]), (role, selected, got)


def run(tmp_path: Path, playbook: Path | str, *extra: str) -> tuple[int, str]:
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(
        f"[kmirror_workers]\nlocalhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    )
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "-i",
            str(inventory),
            "-e",
            json.dumps({"kmirror_source_clusters": SOURCES}),
            *extra,
            str(playbook),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"},
    )
    return proc.returncode, " ".join((proc.stdout + proc.stderr).split())  # unwrapped


def show_selection(tmp_path: Path) -> Path:
    play = [
        {
            "hosts": "kmirror_workers",
            "gather_facts": False,
            "roles": ["kmirror_common"],
            "tasks": [
                {
                    "name": "Show the selection",
                    "ansible.builtin.debug": {
                        "msg": "SELECTED={{ kmirror_source_clusters"
                        " | kmirror_selected_sources(kmirror_common_sources_selected)"
                        " | map(attribute='name') | join(',') }}"
                    },
                }
            ],
        }
    ]
    path = tmp_path / "show.yml"
    path.write_text(json.dumps(play))
    return path


@pytest.mark.parametrize(
    ("given", "selected", "warned"),
    [
        ([], "east,west,north", None),
        (["-e", "kmirror_sources_selected=west,east"], "east,west", None),
        (["-e", '{"kmirror_sources_selected": ["north"]}'], "north", None),
        (["-e", "kmirror_new_source=north"], "north", "kmirror_new_source"),
        (["-e", "kmirror_restart_only=east,west"], "east,west", "kmirror_restart_only"),
        (["-e", '{"kmirror_audit_only": ["west"]}'], "west", "kmirror_audit_only"),
        (["-e", '{"kmirror_service_only": ["west"]}'], "west", "kmirror_service_only"),
        # Both, naming the same sources: the new one is used, the old one still warned about.
        (
            ["-e", "kmirror_remove_source=west", "-e", "kmirror_sources_selected=west"],
            "west",
            "kmirror_remove_source",
        ),
    ],
)
def test_the_selection_and_the_replaced_names(
    tmp_path: Path, given: list[str], selected: str, warned
) -> None:
    rc, out = run(tmp_path, show_selection(tmp_path), *given)
    assert rc == 0, out
    assert f"SELECTED={selected}" in out
    if warned:
        assert f"[WARNING]: {warned} {DEPRECATED}{selected}" in out, out
    else:
        assert DEPRECATED not in out


def test_an_old_and_the_new_name_that_disagree_fail(tmp_path: Path) -> None:
    rc, out = run(
        tmp_path,
        show_selection(tmp_path),
        "-e",
        "kmirror_new_source=north",
        "-e",
        "kmirror_sources_selected=east",
    )
    assert rc != 0
    assert (
        "kmirror_sources_selected (east) and the deprecated kmirror_new_source (north) name different "
        "sources: set only kmirror_sources_selected" in out
    ), out


def test_an_unknown_source_fails_naming_the_defined_ones(tmp_path: Path) -> None:
    rc, out = run(tmp_path, ROOT / "playbooks/rolling_restart.yml", "-e", "kmirror_sources_selected=south")
    assert rc != 0
    assert (
        "kmirror_sources_selected names south, not in kmirror_source_clusters (defined: east, west, north)"
        in out
    )


@pytest.mark.parametrize("given", [[], ["-e", "kmirror_sources_selected=south"]])
def test_add_source_cluster_needs_defined_names(tmp_path: Path, given: list[str]) -> None:
    rc, out = run(tmp_path, ROOT / "playbooks/add_source_cluster.yml", *given)
    assert rc != 0
    assert (
        "Give -e kmirror_sources_selected=NAME[,NAME...] of source clusters defined in "
        "kmirror_source_clusters (defined: east, west, north)" in out
    ), out


@pytest.mark.parametrize(
    ("given", "warned"),
    [(["-e", "kmirror_sources_selected=east"], False), (["-e", "kmirror_failover_source=east"], True)],
)
def test_failover_takes_its_one_source_from_the_selection(
    tmp_path: Path, given: list[str], warned: bool
) -> None:
    # The groups are checked, then the instance: none is deployed on this machine.
    assert not Path("/etc/systemd/system/kmirror@east.service.d").exists()
    rc, out = run(
        tmp_path, ROOT / "playbooks/failover.yml", *given, "-e", '{"kmirror_failover_groups": ["g"]}'
    )
    assert rc != 0
    assert "kmirror@east is not deployed on localhost" in out, out
    assert ("[WARNING]: kmirror_failover_source " + DEPRECATED + "east" in out) == warned, out


def test_failover_refuses_more_than_one_source(tmp_path: Path) -> None:
    rc, out = run(
        tmp_path,
        ROOT / "playbooks/failover.yml",
        "-e",
        "kmirror_sources_selected=east,west",
        "-e",
        '{"kmirror_failover_groups": ["g"]}',
    )
    assert rc != 0
    assert "Give one source: -e kmirror_sources_selected=NAME (the instance kmirror@NAME)" in out, out


@pytest.mark.parametrize(
    ("given", "removed"),
    [
        (
            ["-e", "kmirror_sources_selected=east,gone"],
            ["east", "gone"],
        ),  # gone: already out of the inventory
        (["-e", "kmirror_remove_source=west"], ["west"]),
    ],
)
def test_remove_source_cluster_handles_each_selected_source(
    tmp_path: Path, given: list[str], removed: list[str]
) -> None:
    conf, units = tmp_path / "etc", tmp_path / "units"
    for name in ("east", "west", "gone"):
        (conf / name).mkdir(parents=True)
    units.mkdir()
    rc, out = run(
        tmp_path,
        ROOT / "playbooks/remove_source_cluster.yml",
        *given,
        "-e",
        f"kmirror_remove_config_dir={conf}",
        "-e",
        f"kmirror_remove_unit_dir={units}",
        "--check",
    )
    assert rc == 0, out
    for name in ("east", "west", "gone"):
        assert (f"changed: [localhost] => (item={conf}/{name})" in out) == (name in removed), (name, out)
        assert (f"(item={units}/kmirror@{name}.service.d)" in out) == (name in removed), (name, out)
