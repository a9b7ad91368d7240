"""Scenario tls: the mirror reaches both clusters through Apache Kafka's SSL listener, which requires a client
certificate signed by the scenario's CA."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "default"))
import kafka_fixture as kf

CONF = "/etc/kmirror/east"
CERTS = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "certs"


def tls(with_client_cert: bool = True) -> dict:
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(CERTS / "ca.pem")}
    if with_client_cert:
        conf |= {
            "ssl.certificate.location": str(CERTS / "client.pem"),
            "ssl.key.location": str(CERTS / "client.key"),
            "ssl.key.password": (CERTS / "client.pass").read_text(),
        }
    return conf


@pytest.mark.parametrize("side", ["consumer", "producer"])
def test_tls_files_deployed_for_each_side(host, side):
    key = host.file(f"{CONF}/{side}-key.pem")
    assert (key.user, key.group, key.mode) == ("kmirror", "kmirror", 0o400)
    for name in ("ca", "cert"):
        f = host.file(f"{CONF}/{side}-{name}.pem")
        assert (f.user, f.group, f.mode) == ("root", "kmirror", 0o644)
    props = host.file(f"{CONF}/{side}.properties").content_string
    for line in (
        "security.protocol=SSL",
        f"ssl.ca.location={CONF}/{side}-ca.pem",
        f"ssl.certificate.location={CONF}/{side}-cert.pem",
        f"ssl.key.location={CONF}/{side}-key.pem",
    ):
        assert line in props.splitlines()
    assert "ssl.key.password=" in props  # the key is encrypted; the file is 0640 root:kmirror
    assert host.file(f"{CONF}/{side}.properties").mode == 0o640


def test_check_config_safe_as_service_user(host):
    cmd = host.run(
        f"runuser -u kmirror -- /opt/kmirror/venv/bin/kmirror check-config --json "
        f"--consumer.config {CONF}/consumer.properties --producer.config {CONF}/producer.properties"
    )
    assert cmd.rc == 0, cmd.stderr
    report = json.loads(cmd.stdout)
    assert report["verdict"] == "SAFE"
    for f in report["files"]:
        assert f["settings"]["security.protocol"] == "SSL"
        assert f["settings"]["ssl.key.password"] == "********"  # masked in every report


def test_mirror_runs(host):
    svc = host.service("kmirror@east")
    assert svc.is_running and svc.is_enabled


def test_records_arrive_through_mutual_tls():
    info = kf.clusters()
    for topic in kf.MIRRORED["east"]:
        keys = kf.produce(info["east"], topic, 20, tls())
        seen = kf.collect(info["target"], topic, keys, timeout=60, extra=tls())
        assert seen == keys, f"{topic}: {len(keys - seen)} records missing on the target"
    partitions = kf.topic_partitions(info["target"], tls())
    assert partitions["orders.created"] == 3 and "internal-east" not in partitions


def test_a_client_without_certificate_is_refused():
    quiet = logging.getLogger("kmirror-molecule-quiet")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    admin = AdminClient(
        {"bootstrap.servers": kf.clusters()["east"], **tls(with_client_cert=False)}, logger=quiet
    )
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


# --- after side_effect.yml: the source south added with the runbook, and every instance's metrics port ---

# kmirror_service_metrics_port_base (9570) + the source's position in kmirror_source_clusters.
METRICS_PORTS = {"east": 9570, "south": 9571}


def test_the_source_added_with_the_runbook_runs(host):
    svc = host.service("kmirror@south")
    assert svc.is_running and svc.is_enabled
    dropin = host.file("/etc/systemd/system/kmirror@south.service.d/10-kmirror.conf").content_string
    assert "--metrics.port 9571" in dropin
    assert host.file("/etc/kmirror/south/consumer-ca.pem").mode == 0o644


def scrape(url: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            totals[s.name] = totals.get(s.name, 0.0) + s.value
    return totals


@pytest.mark.parametrize("source", sorted(METRICS_PORTS))
def test_each_instance_answers_on_its_metrics_port_from_another_host(host, source):
    """Prometheus scrapes from elsewhere: the controller reads each instance's /metrics over the network."""
    port = METRICS_PORTS[source]
    address = host.ansible.get_variables()["ansible_host"]
    deadline = time.monotonic() + 60
    while True:  # a stream reports its counters after its first batch; south mirrored its 30 records
        totals = scrape(f"http://{address}:{port}/metrics")
        wanted = 30 if source == "south" else 0
        if "kmirror_commits_total" in totals and totals.get("kmirror_records_out_total", 0) >= wanted:
            break
        assert time.monotonic() < deadline, f"kmirror@{source} on {address}:{port}: {totals}"
        time.sleep(2)
    assert totals.get("kmirror_send_errors_total", 0) == 0
