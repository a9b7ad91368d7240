"""monitoring/prometheus/: the example scrape configuration and the alert rules, checked by Prometheus's own
promtool (`check config`, `check rules`, and the rule unit tests in kmirror-alerts.test.yml), and the
metric names the rules use against what the worker serves."""

from __future__ import annotations

import re
import shutil
import subprocess
from types import SimpleNamespace

import pytest
import yaml
from ansible_harness import ROOT
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kmirror.failover.groupsync import GroupStatus, metric_families
from kmirror.mirror.heartbeats import Heartbeat
from kmirror.mirror.heartbeats import metric_families as heartbeat_families
from kmirror.mirror.metrics import Collector, Snapshot

PROM = ROOT / "monitoring" / "prometheus"
# Metric names the rules may use before the worker serves them (none: every rule's metric is served).
PENDING: set[str] = set()


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool") or shutil.which("promtool", path=str(ROOT / ".venv" / "bin"))
    if path is None:
        pytest.fail("promtool is missing: make ansible-install unpacks it from Debian's prometheus package")
    return path


def run(promtool: str, *args: str) -> str:
    done = subprocess.run([promtool, *args], cwd=PROM, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_scrape_configuration_is_valid(promtool):
    out = run(promtool, "check", "config", "prometheus.yml")
    assert "SUCCESS" in out


def test_alert_rules_are_valid(promtool):
    out = run(promtool, "check", "rules", "kmirror-alerts.yml")
    groups = yaml.safe_load((PROM / "kmirror-alerts.yml").read_text())["groups"]
    alerts = [r["alert"] for g in groups for r in g["rules"]]
    assert f"SUCCESS: {len(alerts)} rules found" in out


def test_alert_rule_unit_tests_pass(promtool):
    assert "SUCCESS" in run(promtool, "test", "rules", "kmirror-alerts.test.yml")


def test_every_alert_is_unit_tested():
    rules = yaml.safe_load((PROM / "kmirror-alerts.yml").read_text())
    tests = yaml.safe_load((PROM / "kmirror-alerts.test.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    tested = {a["alertname"] for t in tests["tests"] for a in t["alert_rule_test"] if a["exp_alerts"]}
    quiet = {a["alertname"] for t in tests["tests"] for a in t["alert_rule_test"] if not a["exp_alerts"]}
    assert tested == alerts  # each one fires in a test ...
    assert quiet >= alerts - {"KmirrorRestarting"}  # ... and (but for one) is shown quiet in another case
    # the issue's list: mirror down, stream without partitions, lag growing, send errors, target blocked,
    # audit failed
    issue = ("InstanceDown", "WithoutPartitions", "LagGrowing", "SendErrors", "TargetBlocked", "AuditFailed")
    for needed in issue:
        assert any(needed in a for a in alerts), needed


def served_metric_names() -> set[str]:
    """The sample names a running worker serves (its Collector, rendered by prometheus_client)."""
    collector = Collector()
    collector.update(
        Snapshot("east", 0, records_in=1, partition_lag={("orders", 0): 5}, gap_records={"orders": 3})
    )
    # the group offset sync's gauges (--groups), as the runner adds them: one synced group
    sync = SimpleNamespace(source="east", status={"app": GroupStatus()})
    collector.extra.append(lambda: metric_families([sync]))  # type: ignore[list-item]
    # the heartbeats' families (--heartbeats.interval.ms), one heartbeat seen on the target
    beat = Heartbeat("east", {}, {}, 1000)
    beat.newest_ms, beat.latency_s = 1_700_000_000_000, 0.2
    collector.extra.append(lambda: heartbeat_families([beat]))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def test_the_rules_use_the_names_the_worker_serves():
    text = (PROM / "kmirror-alerts.yml").read_text()
    used = set(re.findall(r"\b(kmirror_[a-z_]+)\b", text)) - {"kmirror_source"}
    served = served_metric_names()
    assert "kmirror_send_errors_total" in served  # prometheus_client adds _total to counters
    assert used, "no kmirror metric in the rules"
    assert used - served <= PENDING, f"not served by the worker: {sorted(used - served - PENDING)}"


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but '-' and '_' dropped, spaces become '-'."""
    return {
        re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in markdown.splitlines()
        if line.startswith("#")
    }


def test_every_alert_links_a_runbook_that_exists():
    groups = yaml.safe_load((PROM / "kmirror-alerts.yml").read_text())["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert rules
    for rule in rules:
        url = rule["annotations"].get("runbook_url")
        assert url, f"{rule['alert']}: no runbook_url"
        path, _, anchor = url.partition("#")
        assert path.startswith("docs/runbooks/") and (ROOT / path).is_file(), f"{rule['alert']}: {url}"
        assert anchor in anchors((ROOT / path).read_text()), (
            f"{rule['alert']}: no section #{anchor} in {path}"
        )
    # the failover metrics have alerts
    exprs = " ".join(r["expr"] for r in rules)
    assert "kmirror_checkpoint_age_seconds" in exprs and "kmirror_untranslated_partitions" in exprs
