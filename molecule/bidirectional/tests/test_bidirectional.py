"""Scenario bidirectional: kmb-west mirrors east into west, kmb-east west into east, both with the provenance
header and heartbeats. Records written on either side arrive on the other exactly once and never come back."""

from __future__ import annotations

import collections
import os
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import pair_fixture as pf

# Worker host -> (its source, its target): host_vars/<host>.yml.
LINKS = {"kmb-west": ("east", "west"), "kmb-east": ("west", "east")}
METRICS_PORT = 9570  # each source's metrics_port
COUNTS = {"east": 30, "west": 20}  # records written to events on each side


def link(host) -> tuple[str, str]:
    return LINKS[host.backend.get_hostname()]


def test_each_host_runs_its_direction_only(host):
    source, target = link(host)
    svc = host.service(f"kmirror@{source}")
    assert svc.is_running and svc.is_enabled
    assert not host.service(f"kmirror@{target}").is_running


def test_each_instance_runs_with_provenance_and_heartbeats(host):
    source, _ = link(host)
    dropin = host.file(f"/etc/systemd/system/kmirror@{source}.service.d/10-kmirror.conf").content_string
    assert "--provenance.header.enable true" in dropin
    assert "--heartbeats.interval.ms 2000" in dropin
    assert f"--metrics.port {METRICS_PORT}" in dropin


def metric(url: str, name: str, source: str) -> list[float]:
    """The values of the samples NAME of SOURCE that the instance's /metrics serves now."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    families = text_string_to_metric_families(text)
    return [
        s.value for f in families for s in f.samples if s.name == name and s.labels.get("source") == source
    ]


def addresses() -> dict[str, str]:
    """Each worker host's address, as create.yml wrote it for molecule."""
    config = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "instance_config.yml"
    return {i["instance"]: i["address"] for i in yaml.safe_load(config.read_text())}


def test_each_side_holds_what_both_sides_wrote_exactly_once():
    info = pf.clusters()
    run = uuid.uuid4().hex[:8]
    written = {side: [f"bidi-{run}-{side}-{i}".encode() for i in range(n)] for side, n in COUNTS.items()}
    for side, values in written.items():
        pf.produce(info[side], values)
    union = sorted(written["east"] + written["west"])

    def this_run(side: str) -> list[bytes]:
        return sorted(v for v in pf.read_all(info[side]) if v.startswith(f"bidi-{run}-".encode()))

    deadline = time.monotonic() + 120
    while any(len(this_run(side)) < len(union) for side in COUNTS):
        assert time.monotonic() < deadline, {side: len(this_run(side)) for side in COUNTS}
        time.sleep(2)
    time.sleep(15)  # a copy copied back (a loop) would show up by now: the instances commit every 5 s
    for side in COUNTS:
        everything = pf.read_all(info[side])
        assert this_run(side) == union, f"{side}: not exactly what both sides wrote"
        twice = [v for v, n in collections.Counter(everything).items() if n > 1]
        assert not twice, f"{side}: {len(twice)} records more than once, e.g. {twice[:3]}"
    # Each instance read the copies of what its target's side wrote, and did not copy them back.
    where = addresses()
    for name, (source, target) in LINKS.items():
        url = f"http://{where[name]}:{METRICS_PORT}/metrics"
        skipped = metric(url, "kmirror_skipped_origin_total", source)
        assert sum(skipped) >= COUNTS[target], f"{source} -> {target}: kmirror_skipped_origin_total {skipped}"
        assert sum(metric(url, "kmirror_send_errors_total", source)) == 0


def test_each_link_reports_its_heartbeat_latency(host):
    source, target = link(host)
    url = f"http://{host.ansible.get_variables()['ansible_host']}:{METRICS_PORT}/metrics"
    deadline = time.monotonic() + 60
    while not (latency := metric(url, "kmirror_heartbeat_latency_seconds", source)):
        assert time.monotonic() < deadline, f"{url}: no kmirror_heartbeat_latency_seconds for {source}"
        time.sleep(2)
    assert 0 <= latency[0] < 30, f"{source} -> {target}: heartbeat latency {latency[0]} s"
