"""kmirror over Apache Kafka's secured listeners, with the properties files an operator would write.

One pair of clusters for the module (source, target; Kafka 4.3, one node each), each with an SSL listener
that requires a client certificate (mutual TLS) and a SASL_SSL listener with SCRAM-SHA-512. The source
knows only the user ``mirror-src``, the target only ``mirror-tgt``: a mirror works only if each side
logs in with its own user. The tests' own producers and readers use the PLAINTEXT listener.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from mirror_harness import (
    KMIRROR,
    TEST_CONSUMER_EXTRA,
    Worker,
    assert_mirrored,
    create_topic,
    make_records,
    produce,
    read_all,
    run_args,
    topic_partitions,
    write,
)
from tls_fixtures import Certs, make_certs, scram_jaas

from kmirror.testing.kafka import KafkaCluster, ScramUser, Security, running

SRC_USER, SRC_PASS = "mirror-src", "src-secret-1"
TGT_USER, TGT_PASS = "mirror-tgt", "tgt-secret-2"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[dict[str, KafkaCluster]]:
    def security(user: str, password: str) -> Security:
        return Security(
            ssl=True,
            sasl_ssl=True,
            tls=certs.broker_tls,
            client_auth=True,
            scram=(ScramUser(user, password, "SCRAM-SHA-512"),),
        )

    clusters = {
        "source": KafkaCluster("source", security=security(SRC_USER, SRC_PASS)),
        "target": KafkaCluster("target", security=security(TGT_USER, TGT_PASS)),
    }
    with running(clusters, tmp_path_factory.mktemp("brokers")):
        yield clusters


def scram_file(
    path: Path, cluster: KafkaCluster, certs: Certs, user: str, password: str, group: str | None = None
) -> Path:
    """Java client keys only: SASL_SSL, a ScramLoginModule JAAS line, a PEM truststore."""
    consumer = f"group.id={group}\n{TEST_CONSUMER_EXTRA}" if group else ""
    return write(
        path,
        f"bootstrap.servers={cluster.listener('SASL_SSL')}\n{consumer}"
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.jaas.config={scram_jaas(user, password)}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={certs.ca}\n",
    )


def mirror_and_compare(tmp_path: Path, secured: dict[str, KafkaCluster], topic: str, consumer: Path,
                       producer: Path, workers: list[Worker]) -> float:  # fmt: skip
    """Mirror `topic` (3 partitions, 600 records) and compare it record by record; seconds until the
    target held every record."""
    source, target = secured["source"], secured["target"]
    create_topic(source, topic, 3, {"cleanup.policy": "delete", "max.message.bytes": "200000"})
    records = make_records(topic, 3, 200)
    produce(source, records)
    check = subprocess.run(
        [*KMIRROR, "check-config", "--consumer.config", str(consumer), "--producer.config", str(producer)],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    t0 = time.monotonic()
    w = Worker(tmp_path, run_args(consumer, producer, "--whitelist", re.escape(topic), "--num.streams", "1"))
    workers.append(w)
    got = read_all(target, [topic], len(records), timeout=90)
    took = time.monotonic() - t0
    assert_mirrored(records, got, exact=True)
    assert topic_partitions(target)[topic] == 3
    assert w.stop() == 0, w.log()
    return took


def test_sasl_ssl_scram_mirror_with_a_user_per_cluster(
    tmp_path: Path, secured: dict[str, KafkaCluster], certs: Certs, workers: list[Worker]
) -> None:
    source, target = secured["source"], secured["target"]
    consumer = scram_file(tmp_path / "source.properties", source, certs, SRC_USER, SRC_PASS, "mirror-scram")
    # The producer file mixes in librdkafka's own key for the CA (kmirror passes it through).
    producer = write(
        tmp_path / "target.properties",
        f"bootstrap.servers={target.listener('SASL_SSL')}\nsecurity.protocol=SASL_SSL\n"
        f"sasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={scram_jaas(TGT_USER, TGT_PASS)}\n"
        f"ssl.ca.location={certs.ca}\n",
    )
    took = mirror_and_compare(tmp_path, secured, "scram.orders", consumer, producer, workers)
    print(f"SASL_SSL/SCRAM-SHA-512 mirror: 600 records identical on the target {took:.1f} s after start")


def test_mutual_tls_mirror(
    tmp_path: Path, secured: dict[str, KafkaCluster], certs: Certs, workers: list[Worker]
) -> None:
    source, target = secured["source"], secured["target"]
    # The SSL listener really requires a certificate: without one, no metadata.
    with pytest.raises(KafkaException):
        AdminClient(
            {
                "bootstrap.servers": source.listener("SSL"),
                "security.protocol": "SSL",
                "ssl.ca.location": str(certs.ca),
                "log_level": 0,
            }
        ).list_topics(timeout=3)
    # Source: a Java client's keystore (PKCS12) and PEM truststore; target: librdkafka's PEM keys, the
    # key encrypted with a passphrase.
    consumer = write(
        tmp_path / "source.properties",
        f"bootstrap.servers={source.listener('SSL')}\ngroup.id=mirror-mtls\n{TEST_CONSUMER_EXTRA}"
        f"security.protocol=SSL\nssl.keystore.type=PKCS12\nssl.keystore.location={certs.client_p12}\n"
        f"ssl.keystore.password={certs.password}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={certs.ca}\n",
    )
    producer = write(
        tmp_path / "target.properties",
        f"bootstrap.servers={target.listener('SSL')}\nsecurity.protocol=SSL\n"
        f"ssl.ca.location={certs.ca}\nssl.certificate.location={certs.client_cert}\n"
        f"ssl.key.location={certs.client_key}\nssl.key.password={certs.client_key_password}\n",
    )
    took = mirror_and_compare(tmp_path, secured, "mtls.orders", consumer, producer, workers)
    print(f"mutual TLS mirror: 600 records identical on the target {took:.1f} s after start")


AUTH_LINE = re.compile(r"ERROR .*kmirror\.mirror\.runner: (.*authentication failed.*)")


@pytest.mark.parametrize(
    ("wrong", "topics"),
    [
        ("source", True),
        ("target", True),
        # No source topic yet, so no destination topic to create: before the fix the stream never asked
        # the target anything but its producers' logins, and ran for ever logging FAIL lines.
        ("target", False),
    ],
)
def test_wrong_scram_password_is_one_line_and_exit_2(
    tmp_path: Path, secured: dict[str, KafkaCluster], certs: Certs, wrong: str, topics: bool
) -> None:
    source, target = secured["source"], secured["target"]
    topic = f"badpass.{wrong}.{topics}"
    if topics:
        create_topic(source, topic, 2)
        produce(source, make_records(topic, 2, 5))
    consumer = scram_file(
        tmp_path / "source.properties", source, certs, SRC_USER,
        "not-the-password" if wrong == "source" else SRC_PASS, f"mirror-badpass-{wrong}",
    )  # fmt: skip
    producer = scram_file(
        tmp_path / "target.properties", target, certs, TGT_USER,
        "not-the-password" if wrong == "target" else TGT_PASS,
    )  # fmt: skip
    # check-config reads and translates the files without connecting (README): a wrong password is
    # not something it can see.
    check = subprocess.run(
        [*KMIRROR, "check-config", "--consumer.config", str(consumer), "--producer.config", str(producer)],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0 and "not-the-password" not in check.stdout, check.stdout
    t0 = time.monotonic()
    args = run_args(consumer, producer, "--whitelist", re.escape(topic), "--num.streams", "1")
    run = subprocess.run(
        [*KMIRROR, "run", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    took = time.monotonic() - t0
    out = run.stdout + run.stderr
    assert run.returncode == 2, out
    assert "Traceback" not in out
    lines = AUTH_LINE.findall(out)
    assert len(lines) == 1, out
    cluster = f"source cluster source ({source.listener('SASL_SSL')})" if wrong == "source" else (
        f"target cluster ({target.listener('SASL_SSL')})"
    )  # fmt: skip
    assert cluster in lines[0] and "invalid credentials" in lines[0], lines[0]
    assert "not-the-password" not in out
    # librdkafka's own line for the refused login is kept once, not once per retry.
    assert out.count("SASL authentication error") == 2, out
    # Nothing was created on the target with credentials that do not work.
    assert topic not in topic_partitions(target)
    case = f"wrong {wrong} password ({'a' if topics else 'no'} topic)"
    print(f"{case}: exit {run.returncode} after {took:.1f} s: {lines[0]}")


def _set_scram(cluster: KafkaCluster, user: str, password: str | None) -> None:
    """kafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[password=...]' (or --delete-config) for one user,
    through the Admin API on the PLAINTEXT listener (the clusters have no authorizer)."""
    change: UserScramCredentialUpsertion | UserScramCredentialDeletion
    if password is None:
        change = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)
    else:
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
        change = UserScramCredentialUpsertion(user, info, password.encode())
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.alter_user_scram_credentials([change]).values():
        future.result(timeout=30)


def test_password_rotation_runbook_loses_no_record(
    tmp_path: Path, secured: dict[str, KafkaCluster], certs: Certs, workers: list[Worker]
) -> None:
    """docs/runbooks/password-rotation.md on a real mirror: B (the same user, a new password) and A (a new
    user, the old one deleted), with records written at every step; every record arrives, in order."""
    source, target = secured["source"], secured["target"]
    topic, group = "rotate.orders", "mirror-rotate"
    create_topic(source, topic, 2)
    producer = scram_file(tmp_path / "target.properties", target, certs, TGT_USER, TGT_PASS)

    def start(user: str, password: str, name: str, file: str = "consumer.properties") -> Worker:
        """A worker on the consumer file as the role deploys it: one path, rewritten with new credentials
        (so the streams keep their static member ids across the restart, as on a host)."""
        consumer = scram_file(tmp_path / file, source, certs, user, password, group)
        args = run_args(consumer, producer, "--whitelist", re.escape(topic))
        w = Worker(tmp_path, args, name)
        workers.append(w)
        return w

    sent: list = []

    def write_and_wait(batch: int) -> None:
        records = make_records(topic, 2, 50, start=batch * 50)
        produce(source, records)
        sent.extend(records)
        assert_mirrored(sent, read_all(target, [topic], len(sent), timeout=90))

    _set_scram(source, "rotate-1", "first-password")
    first = start("rotate-1", "first-password", "first")
    write_and_wait(0)

    # B.2: the password changes on the source cluster; the running instance keeps its login.
    _set_scram(source, "rotate-1", "second-password")
    write_and_wait(1)
    # An instance (re)started with the old password now stops: exit 2, one line, nothing read.
    stale = start("rotate-1", "first-password", "stale", "stale.properties")
    assert stale.proc.wait(timeout=90) == 2, stale.log()
    assert "authentication failed" in stale.log() and "first-password" not in stale.log()
    # B.3: the play's restart with the new file (JAAS) on this "host"; records written while it is down.
    assert first.stop() == 0, first.log()
    produce(source, more := make_records(topic, 2, 50, start=100))
    sent.extend(more)
    second = start("rotate-1", "second-password", "second")
    assert_mirrored(sent, read_all(target, [topic], len(sent), timeout=90))

    # A: a new user; restart onto it, then delete the old one while the mirror runs.
    _set_scram(source, "rotate-2", "third-password")
    assert second.stop() == 0, second.log()
    third = start("rotate-2", "third-password", "third")
    _set_scram(source, "rotate-1", None)
    write_and_wait(3)
    assert third.stop() == 0, third.log()
    # Every record arrived in its partition and order; clean stops commit everything: no duplicates.
    assert_mirrored(sent, read_all(target, [topic], len(sent), timeout=90), exact=True)
