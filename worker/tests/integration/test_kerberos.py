"""Kerberos end to end on the controller: a real MIT KDC, two Apache Kafka 4.3 clusters with SASL/GSSAPI
listeners of their own (SASL_PLAINTEXT and SASL_SSL; the broker logs in with the service principal's
keytab), and kmirror on the GSSAPI client (confluent-kafka 2.0.2 built against Debian 12's librdkafka-dev,
the client the kmirror_worker role gives Kerberos hosts).

The mirror reads ``east`` over SASL_PLAINTEXT and writes ``target`` over SASL_SSL. Both clusters run the
standard authorizer with ``User:kmirror`` (the mirror's principal, mapped by Kafka's DEFAULT rule) as the
only super user besides the brokers' own PLAINTEXT traffic: a copy proves the broker knew the mirror by its
Kerberos name, and ``other``, who logs in with a valid keytab, sees nothing.

What it needs is installed here on first use (root, Debian 12): the KDC, krb5 tools and the build
dependencies from apt, and the client wheel, built once and cached under .state/source-builds (the same
cache the role uses) with a Python 3.11 virtualenv under .state/gssapi-client.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from tls_fixtures import make_certs

from kmirror.testing.kafka import Security, kafka_clusters
from kmirror.testing.mirrors import run_command

ROOT = Path(__file__).resolve().parents[3]
STATE = ROOT / ".state"
CLIENT = "confluent-kafka==2.0.2"
APT = [
    "krb5-kdc",
    "krb5-admin-server",
    "krb5-user",
    "librdkafka-dev",
    "libsasl2-dev",
    "libsasl2-modules-gssapi-mit",
    "python3.11-dev",
    "python3.11-venv",
    "gcc",
]
HOST = "127.0.0.1"
REALM = "KMIRROR.TEST"
PRINCIPAL = f"kmirror@{REALM}"


def sh(*argv: str, env: dict | None = None, timeout: float = 900) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stderr[-2000:]}"
    return proc.stdout


def ensure_apt() -> None:
    missing = [
        p for p in APT if subprocess.run(["dpkg", "-s", p], capture_output=True, check=False).returncode != 0
    ]
    if missing:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        sh("apt-get", "-o", "DPkg::Lock::Timeout=600", "update", env=env)
        sh(
            "apt-get",
            "-o",
            "DPkg::Lock::Timeout=600",
            "install",
            "-y",
            "--no-install-recommends",
            *missing,
            env=env,
        )


def client_python() -> str:
    """A Python 3.11 virtualenv with the GSSAPI client wheel (built once, cached) and kmirror's other deps."""
    venv = STATE / "gssapi-client"
    python = venv / "bin" / "python"
    if (
        python.exists()
        and subprocess.run(
            [str(python), "-c", "import confluent_kafka, prometheus_client"], capture_output=True, check=False
        ).returncode
        == 0
    ):
        return str(python)
    cache = STATE / "source-builds"
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob("confluent_kafka-2.0.2-cp311-*.whl"))
    if not wheels:
        sdist = STATE / "sdists"
        sh(
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--dest",
            str(sdist),
            CLIENT,
        )
        sh(
            "/usr/bin/python3.11",
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(cache),
            str(next(sdist.glob("confluent-kafka-2.0.2.tar.gz"))),
        )
        wheels = sorted(cache.glob("confluent_kafka-2.0.2-cp311-*.whl"))
    shutil.rmtree(venv, ignore_errors=True)
    sh("/usr/bin/python3.11", "-m", "venv", str(venv))
    sh(str(python), "-m", "pip", "install", "--quiet", str(wheels[0]), "prometheus-client")
    return str(python)


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """KDC (tickets of 3 minutes); clusters east/target with GSSAPI listeners; the client's Python."""
    ensure_apt()
    python = client_python()
    d = tmp_path_factory.mktemp("kerberos")
    kdc_py = ROOT / "molecule/kerberos/kdc.py"
    kdc = json.loads(
        sh(
            sys.executable,
            str(kdc_py),
            "up",
            "--state-dir",
            str(d / "kdc"),
            "--host",
            HOST,
            "--max-life",
            "3m",
            "kmirror",
            "other",
            "stale",
        )
    )
    try:
        certs = make_certs(d / "certs")
        security = Security(
            sasl_plaintext=True,
            sasl_ssl=True,
            tls=certs.broker_tls,
            kerberos=(Path(kdc["service_keytab"]), kdc["service_principal"], Path(kdc["krb5_conf"])),
            super_users=("User:kmirror",),
        )
        with kafka_clusters("east", "target", log_dir=d / "brokers", security=security) as cs:
            env = {
                **os.environ,
                "KRB5_CONFIG": kdc["krb5_conf"],
                "KRB5CCNAME": f"FILE:{d / 'ccache'}",
                "PYTHONPATH": str(ROOT / "worker" / "src"),
            }
            yield {
                "kdc": kdc,
                # the mirror reads east over SASL_PLAINTEXT and writes target over SASL_SSL
                "clusters": {
                    "east": cs["east"].listener("SASL_PLAINTEXT"),
                    "target": cs["target"].listener("SASL_SSL"),
                },
                "protocols": {"east": "SASL_PLAINTEXT", "target": "SASL_SSL"},
                "ca": str(certs.ca),
                "python": python,
                "env": env,
                "dir": d,
                "broker_logs": {n: c.log_path for n, c in cs.items()},
            }
    finally:
        sh(sys.executable, str(kdc_py), "down", "--state-dir", str(d / "kdc"))


def client(realm: dict, cluster: str, keytab: str, principal: str = PRINCIPAL) -> dict[str, str]:
    """librdkafka settings of a GSSAPI client of `cluster` (SASL_SSL trusts the test CA)."""
    conf = {
        "bootstrap.servers": realm["clusters"][cluster],
        "security.protocol": realm["protocols"][cluster],
        "sasl.mechanism": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.keytab": keytab,
        "sasl.kerberos.principal": principal,
    }
    if conf["security.protocol"] == "SASL_SSL":
        conf["ssl.ca.location"] = realm["ca"]
    return conf


def props(path: Path, conf: dict[str, str], extra: str = "") -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()) + extra)
    return path


def kmirror(
    realm: dict, *args: str, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [realm["python"], "-m", "kmirror", *args],
        capture_output=True,
        text=True,
        env=env or realm["env"],
        timeout=timeout,
        check=False,
    )


# Runs on the GSSAPI client: produce COUNT records, compare both clusters' copies, or list the topics
# a principal may see.
RECORDS = r"""
import json, sys, time
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kmirror.testing.compare import compare, read_topics
mode, source, target, topic, count = sys.argv[1:6]
source, target = json.loads(source), json.loads(target)
if mode == "produce":
    p = Producer({**source, "linger.ms": 0, "enable.idempotence": True})
    for i in range(int(count)):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("i", str(i).encode())])
    print(json.dumps({"unsent": p.flush(60)}))
elif mode == "topics":
    admin = AdminClient(source)
    print(json.dumps(sorted(t for t in admin.list_topics(timeout=30).topics if not t.startswith("__"))))
else:
    # the mirror looks for new source topics every topic.refresh.interval.ms: wait for the copy
    admin, deadline = AdminClient(target), time.time() + 120
    while topic not in admin.list_topics(timeout=10).topics and time.time() < deadline:
        time.sleep(1)
    n = int(count)
    src = read_topics(source, [topic], expected=n, timeout=60)
    dst = read_topics(target, [topic], expected=n, timeout=90, settle=2)
    row = compare(src, dst)[topic]
    out = {"source": row.source_records, "target": row.target_records, "identical": row.identical}
    print(json.dumps(out))
"""


def records(
    realm: dict, mode: str, topic: str, count: int, source: dict, target: dict | None = None
) -> object:
    proc = subprocess.run(
        [
            realm["python"],
            "-c",
            RECORDS,
            mode,
            json.dumps(source),
            json.dumps(target or {}),
            topic,
            str(count),
        ],
        capture_output=True,
        text=True,
        env=realm["env"],
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_kmirror_mirrors_through_kerberos_on_the_gssapi_client(realm, tmp_path):
    keytabs = realm["kdc"]["keytabs"]
    keytab = keytabs[PRINCIPAL]
    source, target = client(realm, "east", keytab), client(realm, "target", keytab)
    consumer = props(tmp_path / "c.properties", source, "group.id=mirror\nsession.timeout.ms=6000\n")
    producer = props(tmp_path / "p.properties", target)
    check = kmirror(
        realm,
        "check-config",
        "--json",
        "--consumer.config",
        str(consumer),
        "--producer.config",
        str(producer),
    )
    assert check.returncode == 0, check.stderr
    report = json.loads(check.stdout)
    assert report["verdict"] == "SAFE"
    assert report["client"]["librdkafka"] == "2.0.2" and "GSSAPI" in report["client"]["sasl_mechanisms"]

    assert records(realm, "produce", "orders.krb", 500, source) == {"unsent": 0}
    proc = subprocess.Popen(
        run_command(
            consumer,
            producer,
            "orders.*",
            "--num.streams",
            "1",
            "--offset.commit.interval.ms",
            "2000",
            python=realm["python"],
        ),
        env=realm["env"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        result = records(realm, "compare", "orders.krb", 500, source, target)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert result == {"source": 500, "target": 500, "identical": True}, out[-3000:]
    assert proc.returncode == 0, out[-3000:]
    # kmirror lag on the 2.0.2 binding (no list_offsets: the watermark fallback): all 500 committed, the
    # one partition's end read from the broker
    lag = kmirror(realm, "lag", "--group", "mirror", "--consumer.config", str(consumer), "--json")
    assert lag.returncode == 0, lag.stderr
    rows = [
        (r["topic"], r["partition"], r["offset"], r["log_size"], r["lag"]) for r in json.loads(lag.stdout)
    ]
    assert rows == [("orders.krb", 0, 500, 500, 0)], lag.stdout
    # The brokers knew the mirror by its Kerberos name: only User:kmirror may do anything on the SASL
    # listeners. `other` logs in with a valid keytab and is shown no topic.
    assert records(realm, "topics", "", 0, target) == ["orders.krb"]
    other = client(realm, "target", keytabs[f"other@{REALM}"], f"other@{REALM}")
    assert records(realm, "topics", "", 0, other) == []


@pytest.mark.parametrize("case", ["wrong-principal", "wrong-keytab", "stale-keytab", "unreachable-kdc"])
def test_check_config_and_run_refuse_a_login_that_cannot_work(realm, tmp_path, case):
    keytabs = realm["kdc"]["keytabs"]
    env = dict(realm["env"])
    keytab, principal = keytabs[PRINCIPAL], PRINCIPAL
    if case == "wrong-principal":
        principal, says = f"other@{REALM}", f"holds no key for other@{REALM} (it holds {PRINCIPAL})"
    elif case == "wrong-keytab":
        keytab, says = keytabs[f"other@{REALM}"], f"holds no key for {PRINCIPAL} (it holds other@{REALM})"
    elif case == "stale-keytab":
        # the KDC gives the principal a new key (kvno + 1): the keytab exported before is stale
        principal, keytab = f"stale@{REALM}", keytabs[f"stale@{REALM}"]
        kdc_dir = Path(realm["kdc"]["krb5_conf"]).parent
        kadmin_env = {**env, "KRB5_KDC_PROFILE": str(kdc_dir / "kdc.conf")}
        sh("kadmin.local", "-r", REALM, "-q", f"cpw -randkey {principal}", env=kadmin_env)
        says = "the keytab's key is not the KDC's"
    else:
        bad = tmp_path / "krb5.conf"
        bad.write_text(Path(realm["kdc"]["krb5_conf"]).read_text().replace(realm["kdc"]["kdc"], f"{HOST}:9"))
        env["KRB5_CONFIG"] = str(bad)
        says = "Cannot contact any KDC for realm 'KMIRROR.TEST'"
    consumer = props(tmp_path / "c.properties", client(realm, "east", keytab, principal), "group.id=mirror\n")
    producer = props(tmp_path / "p.properties", client(realm, "target", keytab, principal))
    for args in (
        ["check-config"],
        ["run", "--whitelist", "orders.*", "--num.streams", "1"],
    ):
        start = time.monotonic()
        proc = kmirror(
            realm, *args, "--consumer.config", str(consumer), "--producer.config", str(producer), env=env
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        # one line says it all (check-config may add a summary line after it)
        lines = [line for line in proc.stderr.splitlines() if says in line]
        assert len(lines) == 1, proc.stderr
        assert "sasl.kerberos" in lines[0], lines[0]
        assert str(consumer) in lines[0] or str(producer) in lines[0], lines[0]
        assert time.monotonic() - start < 60


def test_two_principals_in_one_process_are_refused_by_check_config_as_by_run(realm, tmp_path):
    keytabs = realm["kdc"]["keytabs"]
    consumer = props(
        tmp_path / "c.properties", client(realm, "east", keytabs[PRINCIPAL]), "group.id=mirror\n"
    )
    producer = props(
        tmp_path / "p.properties", client(realm, "target", keytabs[f"other@{REALM}"], f"other@{REALM}")
    )
    for args in (["check-config"], ["run", "--whitelist", "orders.*"]):
        proc = kmirror(realm, *args, "--consumer.config", str(consumer), "--producer.config", str(producer))
        assert proc.returncode == 2
        assert "one process has one Kerberos ticket cache" in proc.stderr


def read_from(path: Path, offset: int) -> str:
    with path.open("rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def test_the_gssapi_listener_refuses_a_client_that_does_not_authenticate(realm):
    """A client without SASL (the PyPI client) gets no metadata from the SASL_PLAINTEXT listener: Kafka
    answers ApiVersions, then closes the connection on its first other request (logged by the broker)."""
    quiet = logging.getLogger("kmirror-test-quiet")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    log = realm["broker_logs"]["east"]
    before = log.stat().st_size
    admin = AdminClient({"bootstrap.servers": realm["clusters"]["east"], "logger": quiet})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    deadline = time.monotonic() + 30
    while "Unexpected Kafka request of type METADATA during SASL handshake" not in read_from(log, before):
        assert time.monotonic() < deadline, "the broker logged no refused SASL handshake"
        time.sleep(0.2)
