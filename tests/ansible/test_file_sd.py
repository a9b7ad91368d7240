"""Prometheus scrape targets written by Ansible (file-based service discovery): the role kmirror_service's
template kmirror-file-sd.json.j2, fed with the role's own metrics ports filter, rendered into a file that
Prometheus's promtool accepts as the file_sd of a scrape job; the path default is the one
monitoring/prometheus/prometheus.yml reads, and the argument spec documents the variables."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_harness import ROLES, ROOT, load_module

PORTS = load_module(ROLES / "kmirror_service/filter_plugins/kmirror_service.py", "kmirror_service_filters")
SOURCES = [{"name": "east"}, {"name": "west", "metrics_port": 9600}, {"name": "north"}]


def targets(render, sources=SOURCES, base=9570, address="10.0.0.7", host="worker1") -> list[dict]:
    ports = PORTS.kmirror_metrics_ports(sources, base)
    text = render(
        "kmirror-file-sd.json.j2",
        kmirror_sources=[s["name"] for s in sources],
        kmirror_ports=ports,
        kmirror_address=address,
        kmirror_host=host,
    )
    return json.loads(text)


def test_one_target_group_per_instance_with_source_and_host(render):
    assert targets(render) == [
        {"targets": ["10.0.0.7:9570"], "labels": {"kmirror_source": "east", "host": "worker1"}},
        {"targets": ["10.0.0.7:9600"], "labels": {"kmirror_source": "west", "host": "worker1"}},
        {"targets": ["10.0.0.7:9572"], "labels": {"kmirror_source": "north", "host": "worker1"}},
    ]


def test_instances_without_a_metrics_port_are_not_listed_and_ipv6_is_bracketed(render):
    got = targets(render, base=0, address="fd00::7")
    assert got == [{"targets": ["[fd00::7]:9600"], "labels": {"kmirror_source": "west", "host": "worker1"}}]
    assert targets(render, sources=[{"name": "east"}], base=0) == []


def test_promtool_accepts_the_rendered_file_as_file_sd(render, tmp_path):
    promtool = shutil.which("promtool") or shutil.which("promtool", path=str(ROOT / ".venv" / "bin"))
    if promtool is None:
        pytest.fail("promtool is missing: make ansible-install unpacks it from Debian's prometheus package")
    sd = tmp_path / "file_sd"
    sd.mkdir()
    for host in ("worker1", "worker2"):
        (sd / f"kmirror-{host}.json").write_text(json.dumps(targets(render, host=host)))
    config = yaml.safe_load((ROOT / "monitoring/prometheus/prometheus.yml").read_text())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "kmirror")
    job["file_sd_configs"][0]["files"] = [f"{sd}/*.json"]
    config["rule_files"] = []
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))

    def check_config() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [promtool, "check", "config", "prometheus.yml"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )

    done = check_config()
    assert done.returncode == 0, done.stdout + done.stderr
    # promtool checks each discovered file too; a broken one fails the check
    (sd / "kmirror-broken.json").write_text('[{"targets": "not a list"}]')
    broken = check_config()
    assert broken.returncode != 0 and "checking SD file" in broken.stdout + broken.stderr


def test_the_default_path_is_the_one_prometheus_reads_and_is_documented():
    defaults = yaml.safe_load((ROLES / "kmirror_service/defaults/main.yml").read_text())
    specs = yaml.safe_load((ROLES / "kmirror_service/meta/argument_specs.yml").read_text())
    options = specs["argument_specs"]["main"]["options"]
    for var in (
        "kmirror_service_file_sd_hosts",
        "kmirror_service_file_sd_dir",
        "kmirror_service_file_sd_address",
    ):
        assert var in defaults and options[var]["description"], var
    assert options["kmirror_service_file_sd_dir"]["default"] == defaults["kmirror_service_file_sd_dir"]
    assert "kmirror_prometheus" in defaults["kmirror_service_file_sd_hosts"]
    config = yaml.safe_load((ROOT / "monitoring/prometheus/prometheus.yml").read_text())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "kmirror")
    assert job["file_sd_configs"][0]["files"] == [f"{defaults['kmirror_service_file_sd_dir']}/*.json"]


def test_ansible_writes_the_file_on_the_prometheus_hosts(tmp_path):
    """The role's task file run by ansible-playbook on this machine (connection local): localhost is a worker
    and, being in the group kmirror_prometheus, the Prometheus host too (the default of
    kmirror_service_file_sd_hosts); the file lands in kmirror_service_file_sd_dir, and a second run changes
    nothing."""
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(
        f"[kmirror_workers]\nlocalhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
        "[kmirror_prometheus]\nlocalhost\n"
    )
    sd = tmp_path / "file_sd"
    role = ROLES / "kmirror_service"
    play = [
        {
            "hosts": "kmirror_workers",
            "gather_facts": False,
            "vars_files": [str(role / "defaults/main.yml"), str(role / "vars/main.yml")],
            "tasks": [
                {
                    "name": "File sd",
                    "ansible.builtin.include_tasks": str(role / "tasks/prometheus_targets.yml"),
                }
            ],
        }
    ]
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(play))
    given = {
        "kmirror_source_clusters": SOURCES,
        "kmirror_common_templates_dir": str(ROOT / "templates"),
        "kmirror_service_file_sd_dir": str(sd),
    }

    def run() -> str:
        done = subprocess.run(
            [
                str(Path(sys.executable).with_name("ansible-playbook")),
                *("-i", str(inventory), "-e", json.dumps(given), str(playbook)),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            env={
                **os.environ,
                "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_FILTER_PLUGINS": str(role / "filter_plugins"),
            },
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    first = run()
    assert "changed=2" in first, first  # the directory and the file
    written = json.loads((sd / "kmirror-localhost.json").read_text())
    # kmirror_service_metrics_address 0.0.0.0 (the default): the host's ansible_host or inventory name
    assert written == [
        {"targets": ["localhost:9570"], "labels": {"kmirror_source": "east", "host": "localhost"}},
        {"targets": ["localhost:9600"], "labels": {"kmirror_source": "west", "host": "localhost"}},
        {"targets": ["localhost:9572"], "labels": {"kmirror_source": "north", "host": "localhost"}},
    ]
    assert "changed=0" in run()
