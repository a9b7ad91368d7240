"""Instance names found on a host or given to the audit follow the cluster definition's name rule
(filter kmirror_instance_names, roles/kmirror_common/filter_plugins/kmirror_instance_names.py).

kmirror_service's removal of dropped instances (tasks/remove_dropped.yml) took its names from the files
found in the unit directory, so a file kmirror@...service named '..' and the removal task removed
<config dir>/.. (issue 34, Low). The role's own expressions are evaluated here with Ansible's templar (the
kmirror_common filters loaded, as in a play), from the files a host could hold. The audit role's check of
its instances' names used a regex with '$' through Ansible's match test, which let 'east\n' through; it is
run for real. And the filter on its own.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import add_all_plugin_dirs
from ansible.template import Templar, trust_as_template
from ansible_harness import ROLES, first_failure, load_module, run_role

add_all_plugin_dirs(str(ROLES / "kmirror_common"))
NAMES = load_module(
    ROLES / "kmirror_common/filter_plugins/kmirror_instance_names.py", "kmirror_instance_names"
)
TASKS = yaml.safe_load((ROLES / "kmirror_service/tasks/remove_dropped.yml").read_text())
UNIT_DIR = "/etc/systemd/system"
CONF_DIR = "/etc/kmirror"


def task(name: str) -> dict:
    return next(t for t in TASKS if t["name"] == name)


def template(expr: object, variables: dict) -> object:
    return Templar(loader=DataLoader(), variables=variables).template(
        trust_as_template(expr) if isinstance(expr, str) else expr
    )


def run_tasks(found: list[str], sources: list[str]) -> tuple[dict, list[str]]:
    """The facts of 'Work out the instances dropped' and the paths 'Remove ...' would remove, for the files
    ``found`` in the unit directory (as find returns them) and the inventory's ``sources``."""
    variables = {
        "kmirror_service_installed": {"files": [{"path": f"{UNIT_DIR}/{f}"} for f in found]},
        "kmirror_source_clusters": [{"name": s} for s in sources],
        "kmirror_service_unit_dir": UNIT_DIR,
        "kmirror_common_config_dir": CONF_DIR,
    }
    work = task("Work out the instances dropped from the inventory")
    local = {k: template(v, variables) for k, v in work.get("vars", {}).items()}
    facts = {k: template(v, {**variables, **local}) for k, v in work["ansible.builtin.set_fact"].items()}
    removed = template(
        task("Remove the dropped instances' drop-ins and configuration")["loop"], {**variables, **facts}
    )
    return facts, list(removed)


HOSTILE = [
    "kmirror@...service",  # names '..': <config dir>/.. is /etc
    "kmirror@..service",  # names '.': the configuration root itself
    "kmirror@...service.d",
    "kmirror@.hidden.service",
    "kmirror@-x.service",
    "kmirror@a\nb.service",
    "kmirror@" + "x" * 64 + ".service",
]


def test_only_instance_names_are_stopped_and_removed():
    found = ["kmirror@east.service.d", "kmirror@west.service.d", "kmirror@west.service", *HOSTILE]
    facts, removed = run_tasks(found, ["east"])
    assert facts["kmirror_service_dropped"] == ["west"]
    assert removed == [f"{UNIT_DIR}/kmirror@west.service.d", f"{CONF_DIR}/west"]
    for path in removed:  # nothing above the unit directory or the configuration root
        assert posixpath.normpath(path).startswith((f"{UNIT_DIR}/kmirror@", f"{CONF_DIR}/")), path
    # What names no instance is reported and left alone.
    assert set(facts["kmirror_service_not_instances"]) == {
        "..",
        ".",
        ".hidden",
        "-x",
        "kmirror@a\nb.service",
        "x" * 64,
    }


def test_nothing_is_removed_when_only_hostile_files_are_found():
    facts, removed = run_tasks(HOSTILE, ["east"])
    assert facts["kmirror_service_dropped"] == []
    assert removed == []


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("east", True),
        ("dc-1.eu_west", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("..", False),
        (".", False),
        ("", False),
        ("a/b", False),
        ("east\n", False),  # a regex with '$' would match it (re.match): the rule is matched whole
        (".east", False),
        (5, False),
    ],
)
def test_the_name_rule_is_the_cluster_definitions(name, ok):
    assert NAMES.kmirror_instance_names([name]) == ([name] if ok else [])
    definition = yaml.safe_load((ROLES / "kmirror_config/files/cluster_definition.yml").read_text())
    rule = next(e["pattern"] for e in definition["keys"] if e["key"] == "name")
    assert NAMES.instance_name_pattern().pattern == rule


def test_the_audit_role_refuses_a_source_name_with_a_line_break(tmp_path: Path):
    variables = {
        "kmirror_source_clusters": [{"name": "east\n", "bootstrap_servers": "e1:9092", "whitelist": ".*"}],
        "kmirror_audit_install_java": False,
        # Were the check to let the name through, the play would stop at the Java check, writing nothing.
        "kmirror_audit_java_home": str(tmp_path / "no-jvm"),
        "kmirror_audit_report_dir": str(tmp_path / "reports"),
    }
    proc = run_role(tmp_path, "kmirror_audit", variables)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    task, message = first_failure(out)
    assert task == "kmirror_audit : Check that there is something to audit", out
    assert message.startswith("No source cluster to audit, or a name that cannot name a unit")
    assert not (tmp_path / "reports").exists()
