"""Scenario kerberos: the mirror logs in to a real MIT KDC with its keytab and mirrors through SASL/GSSAPI.

The clusters (Apache Kafka 4.3) are reached through their own SASL_PLAINTEXT listener with GSSAPI: the
brokers accept Kerberos logins for their service principal, and their standard authorizer lets only
User:kmirror in, so records copied prove the brokers knew the mirror by its Kerberos name. The brokers end
every login after 60 s (connections.max.reauth.ms) and the KDC issues tickets that live
``KDC['max_life']`` (3 minutes): the last tests run after the mirror's first ticket expired.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import time
from datetime import datetime
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

CONF = "/etc/kmirror"
VENV = "/opt/kmirror/venv"
REALM = "KMIRROR.TEST"
EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
KDC = json.loads((EPHEMERAL / "kdc" / "kdc.json").read_text())
CLUSTERS = json.loads((EPHEMERAL / "clusters" / "clusters.json").read_text())
BROKER_LOG = EPHEMERAL / "clusters" / "kafka-east" / "node-1" / "server.log"
KDC_LOG = EPHEMERAL / "kdc" / "kdc.log"
PRINCIPAL = f"kmirror@{REALM}"
KEYTAB = f"{CONF}/east/consumer.keytab"
NEG = "/tmp/kmirror-neg"

# Runs on the guest with kmirror's own virtualenv (the GSSAPI client): writes COUNT records to TOPIC on the
# source, then reads the topic on both clusters until the target holds as many, and compares them record
# by record (key, value, headers, timestamp, partition and order): kmirror.testing.compare.
RECORDS = r"""
import json, sys, time, uuid
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kmirror.testing.compare import compare, read_topics

source, target, topic, count, keytab, principal = sys.argv[1:7]
sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
        "sasl.kerberos.keytab": keytab, "sasl.kerberos.principal": principal}
run = uuid.uuid4().hex[:8]
p = Producer({"bootstrap.servers": source, **sasl, "linger.ms": 0, "enable.idempotence": True})
for i in range(int(count)):
    value = f"value {i} of {run}".encode()
    p.produce(topic, key=f"{run}-{i}".encode(), value=value, headers=[("run", run.encode())])
left = p.flush(60)
# the mirror looks for new source topics every topic.refresh.interval.ms: wait for the copy
admin, deadline = AdminClient({"bootstrap.servers": target, **sasl}), time.time() + 120
while topic not in admin.list_topics(timeout=10).topics and time.time() < deadline:
    time.sleep(1)
src = read_topics({"bootstrap.servers": source, **sasl}, [topic], expected=int(count), timeout=60)
total = sum(len(v) for v in src.values())
dst = read_topics({"bootstrap.servers": target, **sasl}, [topic], expected=total, timeout=120, settle=3)
row = compare(src, dst)[topic]
print(json.dumps({"unsent": left, "run": run, "source": row.source_records, "target": row.target_records,
                  "missing": row.missing, "duplicates": row.duplicates, "out_of_order": row.out_of_order,
                  "identical": row.identical}))
"""


def krb(cmd: str) -> str:
    """CMD with the deployed krb5.conf and a throw-away ticket cache (the unit sets the same KRB5_CONFIG)."""
    cache = "FILE:/tmp/kmirror-test-cc-$$"
    return f"env KRB5_CONFIG={CONF}/krb5.conf KRB5CCNAME={cache} sh -c '{cmd}; rc=$?; kdestroy -q; exit $rc'"


def mirror_and_compare(host, topic: str, count: int) -> dict:
    script = base64.b64encode(RECORDS.encode()).decode()
    host.check_output(
        f"echo {script} | base64 -d > /tmp/kmirror-records.py; chmod 0644 /tmp/kmirror-records.py"
    )
    out = host.check_output(
        "runuser -u kmirror -- "
        + krb(
            f"{VENV}/bin/python /tmp/kmirror-records.py {CLUSTERS['east']} {CLUSTERS['target']} {topic} "
            f"{count} {KEYTAB} {PRINCIPAL}"
        )
    )
    return json.loads(out.strip().splitlines()[-1])


def unit_started_at(host) -> float:
    stamp = host.check_output("systemctl show -p ActiveEnterTimestamp --value kmirror@east")
    return float(host.check_output(f"date -d '{stamp}' +%s"))


def service_tickets(since: float = 0.0) -> list[float]:
    """When the KDC gave the mirror's principal a ticket for the brokers' service principal (epoch seconds):
    a client asks for one only to log in to a broker, once its ticket cache has none that is valid."""
    wanted = f"{PRINCIPAL} for {KDC['service_principal']}"
    year = datetime.now().year
    out = []
    for line in KDC_LOG.read_text().splitlines():
        m = re.match(r"(\w{3} +\d+ \d\d:\d\d:\d\d) .*TGS_REQ .* ISSUE: .*", line)
        if m and line.endswith(wanted):
            t = datetime.strptime(f"{year} {m.group(1)}", "%Y %b %d %H:%M:%S").timestamp()
            if t >= since:
                out.append(t)
    return out


# --- the deployed files ---------------------------------------------------------------------------------


def test_krb5_conf_names_the_realm_and_its_kdc(host):
    f = host.file(f"{CONF}/krb5.conf")
    assert (f.user, f.group, f.mode) == ("root", "kmirror", 0o644)
    text = f.content_string
    assert f"default_realm = {REALM}" in text
    assert f"kdc = {KDC['kdc']}" in text
    assert "dns_lookup_kdc = false" in text


@pytest.mark.parametrize("side", ["consumer", "producer"])
def test_keytab_is_the_service_users_alone(host, side):
    f = host.file(f"{CONF}/east/{side}.keytab")
    assert (f.user, f.group, f.mode) == ("kmirror", "kmirror", 0o400)
    # it holds the mirror's own principal, not the brokers' service principal
    listing = host.check_output(f"runuser -u kmirror -- klist -k {CONF}/east/{side}.keytab")
    assert PRINCIPAL in listing
    assert KDC["service_principal"] not in listing
    assert host.run(f"runuser -u nobody -- cat {CONF}/east/{side}.keytab").rc != 0


@pytest.mark.parametrize("side", ["consumer", "producer"])
def test_jaas_kafkaclient_file(host, side):
    f = host.file(f"{CONF}/east/{side}_jaas.conf")
    assert (f.user, f.group, f.mode) == ("kmirror", "kmirror", 0o400)
    text = f.content_string
    assert "KafkaClient {" in text
    assert "com.sun.security.auth.module.Krb5LoginModule required" in text
    assert f'keyTab="{CONF}/east/{side}.keytab"' in text
    assert f'principal="{PRINCIPAL}";' in text
    assert 'serviceName="kafka"' in text
    props = host.file(f"{CONF}/east/{side}.properties").content_string.splitlines()
    for line in (
        "security.protocol=SASL_PLAINTEXT",
        "sasl.mechanism=GSSAPI",
        f"java.security.auth.login.config={CONF}/east/{side}_jaas.conf",
    ):
        assert line in props


def test_service_user_gets_a_ticket_with_the_deployed_keytab(host):
    out = host.check_output(
        "runuser -u kmirror -- "
        + krb(f"kinit -kt {KEYTAB} {PRINCIPAL} && kvno {KDC['service_principal']} && klist")
    )
    assert f"Default principal: {PRINCIPAL}" in out
    assert f"krbtgt/{REALM}@{REALM}" in out
    assert f"{KDC['service_principal']}: kvno = " in out


def test_another_user_cannot_log_in_as_the_mirror(host):
    assert host.run("runuser -u nobody -- " + krb(f"kinit -kt {KEYTAB} {PRINCIPAL}")).rc != 0


# --- the client and the running mirror ------------------------------------------------------------------


def test_host_has_the_gssapi_client(host):
    """check-config reports the client built on the controller against Debian's librdkafka, with GSSAPI."""
    assert host.package("librdkafka1").is_installed
    assert host.package("libsasl2-modules-gssapi-mit").is_installed
    cmd = host.run(
        f"runuser -u kmirror -- env KRB5_CONFIG={CONF}/krb5.conf {VENV}/bin/kmirror check-config --json "
        f"--consumer.config {CONF}/east/consumer.properties --producer.config {CONF}/east/producer.properties"
    )
    assert cmd.rc == 0, cmd.stderr
    report = json.loads(cmd.stdout)
    assert report["verdict"] == "SAFE"
    assert report["client"]["client"] == "confluent-kafka 2.0.2"
    assert report["client"]["librdkafka"] == "2.0.2"
    assert "GSSAPI" in report["client"]["sasl_mechanisms"]
    for f in report["files"]:
        assert f["settings"]["sasl.mechanisms"] == "GSSAPI"
        assert f["settings"]["sasl.kerberos.principal"] == PRINCIPAL


def test_mirror_unit_is_active(host):
    svc = host.service("kmirror@east")
    assert svc.is_running and svc.is_enabled
    env = host.check_output("systemctl show -p Environment --value kmirror@east").split()
    assert f"KRB5_CONFIG={CONF}/krb5.conf" in env


def test_records_flow_from_source_to_target_and_are_identical(host):
    result = mirror_and_compare(host, "orders.kerberos", 300)
    assert result["unsent"] == 0
    assert result["source"] >= 300
    assert result["identical"], result
    # the clients logged in to the brokers with the mirror's own principal (only User:kmirror may read and
    # write there: the copy itself shows the brokers knew it)
    assert service_tickets()


def test_a_client_that_does_not_authenticate_is_refused():
    """The PyPI client on the controller (no SASL at all) gets no metadata from the GSSAPI listener: Kafka
    answers ApiVersions, then closes the connection on the first other request (and logs it)."""
    quiet = logging.getLogger("kmirror-molecule-quiet")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    before = BROKER_LOG.stat().st_size
    admin = AdminClient({"bootstrap.servers": CLUSTERS["east"], "logger": quiet})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    deadline = time.monotonic() + 30
    while True:
        with BROKER_LOG.open("rb") as f:
            f.seek(before)
            if b"Unexpected Kafka request of type METADATA during SASL handshake" in f.read():
                break
        assert time.monotonic() < deadline, f"{BROKER_LOG}: no refused SASL handshake logged"
        time.sleep(0.5)


# --- what check-config and run refuse -------------------------------------------------------------------


@pytest.fixture(scope="module")
def neg(host):
    """Minimal client files on the guest, readable by the service user (native librdkafka keys)."""
    other = KDC["keytabs"][f"other@{REALM}"]
    host.check_output(f"mkdir -p {NEG} && chmod 0755 {NEG}")
    host.ansible("copy", f"src={other} dest={NEG}/other.keytab owner=kmirror mode=0400", check=False)

    def write(name: str, principal: str, keytab: str, bootstrap: str, extra: str = "") -> str:
        text = (
            f"bootstrap.servers={bootstrap}\\nsecurity.protocol=SASL_PLAINTEXT\\nsasl.mechanism=GSSAPI\\n"
            f"sasl.kerberos.keytab={keytab}\\nsasl.kerberos.principal={principal}\\n{extra}"
        )
        host.check_output(f"printf '{text}' > {NEG}/{name} && chmod 0644 {NEG}/{name}")
        return f"{NEG}/{name}"

    files = {
        "consumer": write(
            "consumer.properties", PRINCIPAL, KEYTAB, CLUSTERS["east"], "group.id=kmirror-neg\\n"
        ),
        "wrong-principal": write("wrong-principal.properties", f"other@{REALM}", KEYTAB, CLUSTERS["target"]),
        "wrong-keytab": write(
            "wrong-keytab.properties", PRINCIPAL, f"{NEG}/other.keytab", CLUSTERS["target"]
        ),
        "other-principal": write(
            "other-principal.properties", f"other@{REALM}", f"{NEG}/other.keytab", CLUSTERS["target"]
        ),
        "good": write("producer.properties", PRINCIPAL, KEYTAB, CLUSTERS["target"]),
    }
    # the deployed krb5.conf with the KDC moved to a closed port
    unreachable = re.sub(r"kdc = \S+", "kdc = 10.213.0.1:9", host.file(f"{CONF}/krb5.conf").content_string)
    host.check_output(f"printf '%s' '{unreachable}' > {NEG}/krb5.conf && chmod 0644 {NEG}/krb5.conf")
    return files


def check_config(host, producer: str, *, consumer: str | None = None, krb5: str = f"{CONF}/krb5.conf"):
    cons = f"--consumer.config {consumer} " if consumer else ""
    return host.run(
        f"runuser -u kmirror -- env KRB5_CONFIG={krb5} {VENV}/bin/kmirror check-config "
        f"{cons}--producer.config {producer}"
    )


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("wrong-principal", f"{KEYTAB} holds no key for other@{REALM} (it holds {PRINCIPAL})"),
        ("wrong-keytab", f"{NEG}/other.keytab holds no key for {PRINCIPAL} (it holds other@{REALM})"),
    ],
)
def test_check_config_names_a_keytab_that_cannot_log_in(host, neg, case, says):
    cmd = check_config(host, neg[case])
    assert cmd.rc == 2
    assert "Traceback" not in cmd.stderr
    lines = [line for line in cmd.stderr.splitlines() if says in line]  # one line (a summary may follow)
    assert len(lines) == 1, cmd.stderr
    assert neg[case] in lines[0] and "sasl.kerberos" in lines[0]


def test_check_config_names_an_unreachable_kdc(host, neg):
    start = time.monotonic()
    cmd = check_config(host, neg["good"], krb5=f"{NEG}/krb5.conf")
    assert cmd.rc == 2
    assert "Cannot contact any KDC for realm 'KMIRROR.TEST'" in cmd.stderr
    assert f"make the KDC that {NEG}/krb5.conf names for this realm reachable" in cmd.stderr
    assert time.monotonic() - start < 60


def test_check_config_refuses_two_principals_in_one_process_like_run(host, neg):
    cmd = check_config(host, neg["other-principal"], consumer=neg["consumer"])
    assert cmd.rc == 2
    assert "one process has one Kerberos ticket cache" in cmd.stderr


def test_run_with_a_wrong_keytab_stops_with_the_error_in_the_journal(host, neg):
    """As a unit, kmirror run exits 2 at once with the same one line in the journal (no silent retrying)."""
    unit = "kmirror-wrong-keytab"
    host.run(f"systemctl reset-failed {unit}")
    cmd = host.run(
        f"timeout 120 systemd-run --unit {unit} --wait --collect -p User=kmirror "
        f"-p Environment=KRB5_CONFIG={CONF}/krb5.conf {VENV}/bin/kmirror run "
        f"--consumer.config {neg['consumer']} --producer.config {neg['wrong-keytab']} --whitelist 'orders.*'"
    )
    assert cmd.rc == 2, cmd.stdout + cmd.stderr
    assert "status=2" in cmd.stdout + cmd.stderr
    journal = host.check_output(f"journalctl -o cat -u {unit}")
    assert f"holds no key for {PRINCIPAL}" in journal


# --- tickets shorter than the test ----------------------------------------------------------------------


def test_mirroring_goes_on_after_the_first_ticket_expired(host):
    """The KDC's tickets live 3 minutes; the brokers end every login after 60 s, so the mirror must log in
    again with renewed tickets (librdkafka's kinit): records still arrive, with no restart of the unit."""
    life = {"m": 60, "h": 3600, "s": 1}[KDC["max_life"][-1]] * int(KDC["max_life"][:-1])
    started = unit_started_at(host)
    expired = started + life + 15
    if time.time() < expired:
        time.sleep(expired - time.time())
    # Nothing but the mirror runs now: a service ticket issued after its first ticket expired is the
    # mirror logging in to a broker again (a login ends within 60 s, librdkafka renews its ticket cache
    # every 60 s: one is due within about two minutes).
    deadline = time.time() + 180
    while not service_tickets(since=expired):
        assert time.time() < deadline, "no login of the mirror after its first ticket expired"
        time.sleep(2)
    result = mirror_and_compare(host, "orders.kerberos-late", 100)
    assert result["identical"], result
    assert host.check_output("systemctl show -p NRestarts --value kmirror@east") == "0"
    assert host.service("kmirror@east").is_running
    # the KDC issued the mirror more than one ticket-granting ticket (the first one expired)
    kdc_log = KDC_LOG.read_text()
    assert len(re.findall(rf"AS_REQ .* ISSUE: .* {re.escape(PRINCIPAL)} for krbtgt", kdc_log)) >= 2
