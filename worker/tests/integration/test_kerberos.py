"""Kerberos end to end on the controller: a real MIT KDC, the SASL/GSSAPI front before embedded brokers, and
kmirror on the GSSAPI client (confluent-kafka 2.0.2 built against Debian 12's librdkafka-dev, the client
the kmirror_worker role gives Kerberos hosts).

What it needs is installed here on first use (root, Debian 12): the KDC, krb5 tools and the build
dependencies from apt, the python ``gssapi`` package for the front, and the client wheel, built once and
cached under .state/source-builds (the same cache the role uses) with a Python 3.11 virtualenv under
.state/gssapi-client.
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

from kmirror.testing.mirrors import run_command

ROOT = Path(__file__).resolve().parents[3]
STATE = ROOT / ".state"
CLIENT = "confluent-kafka==2.0.2"
APT = [
    "krb5-kdc",
    "krb5-admin-server",
    "krb5-user",
    "libkrb5-dev",
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


def ensure_gssapi() -> None:
    try:
        import gssapi  # noqa: F401
    except ImportError:
        sh(sys.executable, "-m", "pip", "install", "--quiet", "gssapi==1.12.0")


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
    """KDC (tickets of 3 minutes), clusters east/target behind the GSSAPI front, the client's Python."""
    ensure_apt()
    ensure_gssapi()
    python = client_python()
    d = tmp_path_factory.mktemp("kerberos")
    kdc_py, front_py = ROOT / "molecule/kerberos/kdc.py", ROOT / "molecule/shared/gssapi_front.py"
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
        clusters = json.loads(
            sh(
                sys.executable,
                str(front_py),
                "up",
                "--state-dir",
                str(d / "clusters"),
                "--host",
                HOST,
                "--keytab",
                kdc["service_keytab"],
                "--krb5-config",
                kdc["krb5_conf"],
                "east",
                "target",
            )
        )
        try:
            env = {
                **os.environ,
                "KRB5_CONFIG": kdc["krb5_conf"],
                "KRB5CCNAME": f"FILE:{d / 'ccache'}",
                "PYTHONPATH": str(ROOT / "worker" / "src"),
            }
            yield {
                "kdc": kdc,
                "clusters": clusters,
                "python": python,
                "env": env,
                "dir": d,
                "front_log": d / "clusters" / "front.log",
            }
        finally:
            sh(sys.executable, str(front_py), "down", "--state-dir", str(d / "clusters"))
    finally:
        sh(sys.executable, str(kdc_py), "down", "--state-dir", str(d / "kdc"))


def props(path: Path, bootstrap: str, keytab: str, principal: str = PRINCIPAL, extra: str = "") -> Path:
    path.write_text(
        f"bootstrap.servers={bootstrap}\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
        f"sasl.kerberos.service.name=kafka\nsasl.kerberos.keytab={keytab}\n"
        f"sasl.kerberos.principal={principal}\n{extra}"
    )
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


RECORDS = r"""
import json, sys, time
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kmirror.testing.mirrors import run_command
from kmirror.testing.mirrors import run_command
from kmirror.testing.compare import compare, read_topics
mode, source, target, topic, count, keytab, principal = sys.argv[1:8]
sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
        "sasl.kerberos.keytab": keytab, "sasl.kerberos.principal": principal}
if mode == "produce":
    p = Producer({"bootstrap.servers": source, **sasl, "linger.ms": 0, "enable.idempotence": True})
    for i in range(int(count)):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("i", str(i).encode())])
    print(json.dumps({"unsent": p.flush(60)}))
else:
    # the mirror looks for new source topics every topic.refresh.interval.ms: wait for the copy
    admin, deadline = AdminClient({"bootstrap.servers": target, **sasl}), time.time() + 120
    while topic not in admin.list_topics(timeout=10).topics and time.time() < deadline:
        time.sleep(1)
    n = int(count)
    src = read_topics({"bootstrap.servers": source, **sasl}, [topic], expected=n, timeout=60)
    dst = read_topics({"bootstrap.servers": target, **sasl}, [topic], expected=n, timeout=90, settle=2)
    row = compare(src, dst)[topic]
    out = {"source": row.source_records, "target": row.target_records, "identical": row.identical}
    print(json.dumps(out))
"""


def records(realm: dict, mode: str, topic: str, count: int, keytab: str) -> dict:
    c = realm["clusters"]
    proc = subprocess.run(
        [realm["python"], "-c", RECORDS, mode, c["east"], c["target"], topic, str(count), keytab, PRINCIPAL],
        capture_output=True,
        text=True,
        env=realm["env"],
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_kmirror_mirrors_through_kerberos_on_the_gssapi_client(realm, tmp_path):
    keytab = realm["kdc"]["keytabs"][PRINCIPAL]
    c = realm["clusters"]
    consumer = props(
        tmp_path / "c.properties", c["east"], keytab, extra="group.id=mirror\nsession.timeout.ms=6000\n"
    )
    producer = props(tmp_path / "p.properties", c["target"], keytab)
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

    assert records(realm, "produce", "orders.krb", 500, keytab) == {"unsent": 0}
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
        result = records(realm, "compare", "orders.krb", 500, keytab)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert result == {"source": 500, "target": 500, "identical": True}, out[-3000:]
    assert proc.returncode == 0, out[-3000:]
    assert f"AUTHENTICATED {PRINCIPAL}" in realm["front_log"].read_text()


@pytest.mark.parametrize("case", ["wrong-principal", "wrong-keytab", "stale-keytab", "unreachable-kdc"])
def test_check_config_and_run_refuse_a_login_that_cannot_work(realm, tmp_path, case):
    keytabs = realm["kdc"]["keytabs"]
    c = realm["clusters"]
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
    consumer = props(tmp_path / "c.properties", c["east"], keytab, principal, "group.id=mirror\n")
    producer = props(tmp_path / "p.properties", c["target"], keytab, principal)
    for args in (
        ["check-config"],
        ["run", "--whitelist", "orders.*", "--num.streams", "1"],
    ):
        start = time.monotonic()
        proc = kmirror(
            realm, *args, "--consumer.config", str(consumer), "--producer.config", str(producer), env=env
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr
        line = proc.stderr.strip().splitlines()[-1]
        assert says in line and "sasl.kerberos" in line, line
        assert str(consumer) in line or str(producer) in line, line
        assert time.monotonic() - start < 60


def test_two_principals_in_one_process_are_refused_by_check_config_as_by_run(realm, tmp_path):
    keytabs = realm["kdc"]["keytabs"]
    c = realm["clusters"]
    consumer = props(tmp_path / "c.properties", c["east"], keytabs[PRINCIPAL], extra="group.id=mirror\n")
    producer = props(tmp_path / "p.properties", c["target"], keytabs[f"other@{REALM}"], f"other@{REALM}")
    for args in (["check-config"], ["run", "--whitelist", "orders.*"]):
        proc = kmirror(realm, *args, "--consumer.config", str(consumer), "--producer.config", str(producer))
        assert proc.returncode == 2
        assert "one process has one Kerberos ticket cache" in proc.stderr


def test_front_refuses_a_client_that_does_not_authenticate(realm):
    quiet = logging.getLogger("kmirror-test-quiet")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    admin = AdminClient({"bootstrap.servers": realm["clusters"]["east"], "logger": quiet})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    assert "before authentication" in realm["front_log"].read_text()
