"""Scenario audit: the deployed audit host runs its scheduled audit for real: complete on an exact copy
(exit 0), incomplete after a record is planted on the source only (exit 1, the record named), each run
in its own dated report directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
VENV = "/opt/kmirror/venv"
REPORTS = "/var/lib/kmirror/audit/east"
SERVICE = "kmirror-audit-east.service"


def _reports(host):
    out = host.check_output(f"ls -1 {REPORTS}")
    return sorted(line for line in out.splitlines() if line.strip())


def _latest(host):
    name = _reports(host)[-1]
    return name, json.loads(host.check_output(f"cat {REPORTS}/{name}/report.json"))


def test_java_and_the_audit_packages(host):
    assert host.package("openjdk-17-jre-headless").is_installed
    script = "import pyspark, pyarrow, pandas, numpy, xxhash; print(pyspark.__version__)"
    out = host.check_output(f"{VENV}/bin/python -c '{script}'")
    assert out.startswith("4.")


def test_timer_enabled_and_waiting(host):
    timer = host.service("kmirror-audit-east.timer")
    assert timer.is_enabled and timer.is_running
    unit = host.file("/etc/systemd/system/kmirror-audit-east.service").content_string
    assert "--source.config /etc/kmirror/east/consumer.properties" in unit
    assert '--topics "orders.*"' in unit and "--from=-3h" in unit and "%%Y-%%m-%%dT" in unit
    assert host.file("/etc/tmpfiles.d/kmirror-audit.conf").content_string.strip().endswith("30d")


def test_scheduled_audit_proves_the_copy_complete_then_names_a_planted_drop(host):
    before = _reports(host)
    run = host.run(f"systemctl start {SERVICE}")
    assert run.rc == 0, host.run(f"journalctl -u {SERVICE} -n 30 --no-pager").stdout
    name, rep = _latest(host)
    assert name not in before
    assert rep["verdict"] == "complete" and rep["exit_code"] == 0
    assert rep["totals"]["source_records"] == rep["totals"]["target_records"] == 300
    html = host.file(f"{REPORTS}/{name}/report.html")
    assert html.user == "kmirror" and "<svg" in html.content_string
    assert "COMPLETE: 0 missing" in host.check_output(f"journalctl -u {SERVICE} --no-pager -o cat")
    # The driver JVM's class-data archive: recorded once into the unit's cache directory, then reused.
    cache = host.file("/var/cache/kmirror-audit/kmirror")
    assert cache.is_directory and cache.user == "kmirror"
    assert [f for f in cache.listdir() if f.endswith(".jsa")], cache.listdir()

    env = {**os.environ}
    planted = json.loads(
        subprocess.run(
            [sys.executable, str(HERE / "audit_fixture.py"), "plant", "--state-dir",
             os.environ["KMIRROR_MOLECULE_CLUSTERS"]],
            check=True, capture_output=True, text=True, env=env,
        ).stdout
    )  # fmt: skip
    run = host.run(f"systemctl start {SERVICE}")
    assert run.rc != 0  # exit 1: the unit fails, so monitoring sees it
    assert host.run(f"systemctl show -p Result --value {SERVICE}").stdout.strip() == "exit-code"
    name2, rep = _latest(host)
    assert name2 != name and len(_reports(host)) == len(before) + 2
    assert rep["verdict"] == "incomplete" and rep["totals"]["missing"] == 1
    (m,) = rep["missing_records"]
    assert (m["topic"], m["partition"], m["offset"], m["key"]) == (
        "orders",
        planted["partition"],
        planted["offset"],
        planted["key"],
    )
