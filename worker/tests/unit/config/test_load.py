"""kmirror.config: reference MirrorMaker files, ZooKeeper and JKS refusals, unknown keys, JAAS and SASL.

Files are written to tmp_path; librdkafka checks them offline (no bootstrap servers, nothing connects).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_samples import SAMPLE_CONSUMER, SAMPLE_PRODUCER, ZK_CONSUMER, ZK_PRODUCER

from kmirror.config import MASK, ClientConfig, load_client_config, translate
from kmirror.errors import ConfigError

BOOT = "bootstrap.servers=127.0.0.1:1\n"

# The JAAS file of the HDP "Running MirrorMaker on Kerberos-Enabled Clusters" procedure.
KRB5_JAAS = """\
KafkaClient {
    com.sun.security.auth.module.Krb5LoginModule required
    useKeyTab=true
    keyTab="/tmp/mirrormaker.keytab"
    storeKey=true
    useTicketCache=false
    serviceName="kafka"
    principal="mirrormaker/HOSTNAME@EXAMPLE.COM";
};
"""
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
KRB5 = "com.sun.security.auth.module.Krb5LoginModule"


def write(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def with_local_brokers(text: str) -> str:
    """The same sample with bootstrap.servers pointing at 127.0.0.1:1."""
    lines = [
        "bootstrap.servers=127.0.0.1:1" if ln.startswith("bootstrap.servers=") else ln
        for ln in text.splitlines()
    ]
    return "\n".join(lines) + "\n"


def loadable_variants(sample: str) -> pytest.MarkDecorator:
    """Parametrize "text": the sample with its broker address typo fixed, and with local brokers."""
    return pytest.mark.parametrize(
        "text",
        [sample.replace("server3-6667", "server3:6667"), with_local_brokers(sample)],
        ids=["typo-fixed", "local"],
    )


def load(tmp_path: Path, text: str, role: str, name: str | None = None, **kw: object) -> ClientConfig:
    kw.setdefault("env", {})
    path = write(tmp_path, text, name or f"{role}.properties")
    return load_client_config(path, role, **kw)  # type: ignore[arg-type]


def refusal(tmp_path: Path, text: str, role: str, name: str | None = None, **kw: object) -> str:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, text, role, name, **kw)
    msg = str(err.value)
    assert "\n" not in msg, msg
    return msg


# --- the reference samples ---


@pytest.mark.parametrize(
    ("text", "side"), [(SAMPLE_CONSUMER, "source"), (SAMPLE_PRODUCER, "target")], ids=["consumer", "producer"]
)
def test_reference_samples_verbatim_are_refused_for_their_port_typo(tmp_path, text, side):
    """The samples list `kafka-SIDE-server3-6667`, a typo for `...server3:6667`: Java's clients refuse an
    address without a port ("Invalid url in bootstrap.servers"), librdkafka would take port 9092."""
    role = "consumer" if side == "source" else "producer"
    msg = refusal(tmp_path, text, role, "sample.properties")
    assert msg.startswith(
        f"{tmp_path}/sample.properties: bootstrap.servers: broker address 'kafka-{side}-server3-6667' is not "
        f"HOST:PORT (did you mean kafka-{side}-server3:6667?)"
    ), msg


@loadable_variants(SAMPLE_CONSUMER)
def test_reference_consumer_sample_loads(tmp_path, text):
    cfg = load(tmp_path, text, "consumer", "sourceClusterConsumer.properties")
    assert cfg.settings["group.id"] == "dp-MirrorMaker-group"
    assert cfg.settings["client.id"] == "mirror_maker_consumer"
    assert cfg.include == "app_log"
    assert cfg.exclude is None
    assert cfg.safe
    assert cfg.settings["enable.auto.commit"] == "false"
    for legacy in ("groupid", "exclude.internal.topics", "mirror.topics.whitelist"):
        assert legacy not in cfg.settings
    assert any(n.startswith("exclude.internal.topics: ignored") for n in cfg.notes)


@loadable_variants(SAMPLE_PRODUCER)
def test_reference_producer_sample_is_refused_as_unsafe(tmp_path, text):
    msg = refusal(tmp_path, text, "producer", "targetClusterProducer.properties")
    assert msg.startswith(f"{tmp_path}/targetClusterProducer.properties: acks=1 is unsafe")
    assert "acks=all" in msg
    assert "--allow.unsafe" in msg


def test_reference_producer_sample_fixed_is_safe(tmp_path):
    cfg = load(tmp_path, with_local_brokers(SAMPLE_PRODUCER).replace("acks=1", "acks=all"), "producer")
    assert cfg.safe
    assert cfg.settings["batch.size"] == "100"
    assert cfg.settings["enable.idempotence"] == "true"


@pytest.mark.parametrize("text", [ZK_PRODUCER, BOOT + ZK_PRODUCER], ids=["verbatim", "with-brokers"])
def test_reference_zookeeper_producer_sample_is_refused(tmp_path, text):
    msg = refusal(tmp_path, text, "producer", "targetClusterProducer.properties")
    assert msg.startswith(f"{tmp_path}/targetClusterProducer.properties: zk.connect:")
    assert "bootstrap.servers" in msg


def test_reference_zookeeper_consumer_sample_is_refused(tmp_path):
    msg = refusal(tmp_path, ZK_CONSUMER, "consumer", "sourceClusterConsumer.properties")
    assert msg.startswith(f"{tmp_path}/sourceClusterConsumer.properties: zk.connect:")
    assert "bootstrap.servers" in msg


def test_no_data_loss_recommendation_is_safe(tmp_path):
    text = BOOT + (
        "max.in.flight.requests.per.connection=1\nretries=2147483647\nacks=-1\nblock.on.buffer.full=true\n"
    )
    cfg = load(tmp_path, text, "producer")
    assert cfg.safe
    assert cfg.settings["acks"] == "all"
    assert cfg.settings["max.in.flight.requests.per.connection"] == "1"


# --- ZooKeeper keys ---


@pytest.mark.parametrize(
    "key",
    [
        "zk.connect",
        "zookeeper.connect",
        "zk.connectiontimeout.ms",
        "zookeeper.session.timeout.ms",
        "zk.some.future.key",
        "zookeeper.anything",
    ],
)
@pytest.mark.parametrize("role", ["consumer", "producer"])
def test_zookeeper_keys_are_refused_naming_file_key_and_fix(tmp_path, key, role):
    text = BOOT + "group.id=g\n" + f"{key}=zk1:2181\n"
    msg = refusal(tmp_path, text, role, "mirror-x.properties")
    assert msg.startswith(f"{tmp_path}/mirror-x.properties: {key}: ")
    if key in ("zk.connect", "zookeeper.connect"):
        assert msg.endswith("set bootstrap.servers=HOST:PORT[,HOST:PORT] of the brokers instead"), msg
    else:  # bootstrap.servers is set: the fix is only to drop the ZooKeeper setting
        assert msg.endswith("ZooKeeper is not used by kmirror; delete the line"), msg


# --- key and trust stores ---


@pytest.mark.parametrize("store_type", [None, "JKS", "jks"])
def test_jks_truststore_is_refused(tmp_path, store_type):
    text = BOOT + "security.protocol=SSL\nssl.truststore.location=/etc/kafka/truststore.jks\n"
    text += "ssl.truststore.password=changeit\n"
    if store_type:
        text += f"ssl.truststore.type={store_type}\n"
    msg = refusal(tmp_path, text, "producer")
    assert msg.startswith(f"{tmp_path}/producer.properties: ssl.truststore.location: ")
    assert "ssl.ca.location" in msg
    assert "changeit" not in msg


def test_pem_truststore_becomes_ssl_ca_location(tmp_path):
    text = BOOT + "ssl.truststore.type=PEM\nssl.truststore.location=/etc/kafka/ca.pem\n"
    cfg = load(tmp_path, text, "producer")
    assert cfg.settings["ssl.ca.location"] == "/etc/kafka/ca.pem"
    assert "ssl.truststore.location" not in cfg.settings
    assert "ssl.truststore.type" not in cfg.settings


@pytest.mark.parametrize("store_type", [None, "JKS"])
def test_jks_keystore_is_refused_with_pkcs12_fix(tmp_path, store_type):
    text = BOOT + "ssl.keystore.location=/etc/kafka/client.jks\nssl.keystore.password=kspass\n"
    if store_type:
        text += f"ssl.keystore.type={store_type}\n"
    msg = refusal(tmp_path, text + "group.id=g\n", "consumer")
    assert msg.startswith(f"{tmp_path}/consumer.properties: ssl.keystore.location: ")
    assert "PKCS12" in msg
    assert "kspass" not in msg


def test_pkcs12_keystore_is_accepted_and_its_password_masked(tmp_path):
    text = BOOT + (
        "ssl.keystore.type=PKCS12\nssl.keystore.location=/etc/kafka/client.p12\nssl.keystore.password=kspass\n"
    )
    cfg = load(tmp_path, text, "producer")
    assert cfg.settings["ssl.keystore.location"] == "/etc/kafka/client.p12"
    assert cfg.settings["ssl.keystore.password"] == "kspass"
    assert cfg.masked()["ssl.keystore.password"] == MASK
    assert "ssl.keystore.type" not in cfg.settings


# --- unknown keys and keys of the other role ---


def test_unknown_keys_are_all_listed(tmp_path):
    text = BOOT + "group.id=g\nfoo.bar=1\ngroupId=camel\nmax.poll.intervall.ms=5\n"
    msg = refusal(tmp_path, text, "consumer", "src.properties")
    assert msg.startswith(f"{tmp_path}/src.properties: ")
    for key in ("foo.bar", "groupId", "max.poll.intervall.ms"):
        assert key in msg


def test_a_single_unknown_key_in_a_producer_file(tmp_path):
    msg = refusal(tmp_path, BOOT + "lingerr.ms=5\n", "producer")
    assert "lingerr.ms" in msg
    assert "producer.properties" in msg


def test_unknown_keys_are_not_checked_when_validation_is_off(tmp_path):
    cfg = load(tmp_path, BOOT + "foo.bar=1\n", "producer", validate=False)
    assert cfg.settings["foo.bar"] == "1"  # kept, not dropped


def test_consumer_keys_in_a_producer_file_become_notes(tmp_path):
    cfg = load(tmp_path, BOOT + "fetch.min.bytes=10\nsession.timeout.ms=10000\n", "producer")
    assert any(n.startswith("fetch.min.bytes: ignored") for n in cfg.notes)
    assert any(n.startswith("session.timeout.ms: ignored") for n in cfg.notes)


def test_producer_keys_in_a_consumer_file_become_notes(tmp_path):
    cfg = load(tmp_path, BOOT + "group.id=g\nbatch.num.messages=100\n", "consumer")
    assert any(n.startswith("batch.num.messages: ignored") for n in cfg.notes)


@pytest.mark.parametrize("key,value", [("linger.ms", "7"), ("compression.type", "gzip")])
def test_other_role_note_names_the_key_written_in_the_file(tmp_path, key, value):
    """The note must name the key the operator wrote, not librdkafka's alias of it."""
    cfg = load(tmp_path, BOOT + f"group.id=g\n{key}={value}\n", "consumer")
    assert any(n.startswith(f"{key}: ignored") for n in cfg.notes), cfg.notes


def test_ignored_legacy_keys_are_reported_as_notes(tmp_path):
    text = BOOT + "group.id=g\nconsumer.timeout.ms=-1\nshallow.iterator.enable=true\n"
    cfg = load(tmp_path, text, "consumer")
    assert any(n.startswith("consumer.timeout.ms: ignored") for n in cfg.notes)
    assert any(n.startswith("shallow.iterator.enable: ignored") for n in cfg.notes)


@pytest.mark.parametrize("key", ["batch.num.messages", "linger.ms"])
def test_bad_librdkafka_value_is_a_one_line_error_naming_the_file_key(tmp_path, key):
    msg = refusal(tmp_path, BOOT + f"{key}=soon\n", "producer")
    assert msg.startswith(f"{tmp_path}/producer.properties: ")
    assert key in msg  # the key as written in the file, not librdkafka's alias of it


# --- required keys and files ---


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_client_config(tmp_path / "nope.properties", "consumer", env={})
    msg = str(err.value)
    assert "nope.properties" in msg
    assert "not found" in msg


def test_consumer_without_group(tmp_path):
    msg = refusal(tmp_path, BOOT, "consumer")
    assert "group.id" in msg
    assert "consumer.properties" in msg


def test_without_brokers(tmp_path):
    msg = refusal(tmp_path, "acks=all\n", "producer")
    assert "bootstrap.servers" in msg
    assert "producer.properties" in msg


# --- sasl.jaas.config inline ---


def test_inline_plain(tmp_path):
    text = BOOT + (
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        f'sasl.jaas.config={PLAIN} required username="mirror" password="pl4in-secret";\n'
    )
    cfg = load(tmp_path, text, "producer")
    s = cfg.settings
    assert s["sasl.mechanisms"] == "PLAIN"
    assert s["sasl.username"] == "mirror"
    assert s["sasl.password"] == "pl4in-secret"
    assert "sasl.jaas.config" not in s
    assert cfg.masked()["sasl.password"] == MASK
    assert "pl4in-secret" not in repr(cfg.masked())
    assert all("pl4in-secret" not in n for n in cfg.notes)


def test_inline_plain_without_mechanism_defaults_to_plain(tmp_path):
    text = BOOT + "security.protocol=SASL_PLAINTEXT\n"
    text += f'sasl.jaas.config={PLAIN} required username="u" password="p";\n'
    cfg = load(tmp_path, text, "producer")
    assert cfg.settings["sasl.mechanisms"] == "PLAIN"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_inline_scram(tmp_path, mechanism):
    text = (
        BOOT
        + "group.id=g\n"
        + (
            f"security.protocol=SASL_SSL\nsasl.mechanism={mechanism}\n"
            f'sasl.jaas.config={SCRAM} required username="alice" password="alice-secret";\n'
        )
    )
    cfg = load(tmp_path, text, "consumer")
    s = cfg.settings
    assert s["sasl.mechanisms"] == mechanism
    assert s["sasl.username"] == "alice"
    assert s["sasl.password"] == "alice-secret"
    assert cfg.masked()["sasl.password"] == MASK


def test_scram_without_mechanism_is_refused(tmp_path):
    text = BOOT + "security.protocol=SASL_SSL\n"
    text += f'sasl.jaas.config={SCRAM} required username="a" password="s";\n'
    msg = refusal(tmp_path, text, "producer")
    assert "sasl.mechanism" in msg
    assert "SCRAM-SHA-512" in msg


@pytest.mark.parametrize(
    ("module", "mechanism"),
    [(PLAIN, "SCRAM-SHA-256"), (SCRAM, "PLAIN"), (KRB5, "PLAIN"), (PLAIN, "GSSAPI")],
)
def test_mismatched_mechanism_is_refused(tmp_path, module, mechanism):
    if module == KRB5:
        opts = 'useKeyTab=true keyTab="/k.keytab" principal="p@R"'
    else:
        opts = 'username="u" password="s"'
    text = BOOT + f"security.protocol=SASL_SSL\nsasl.mechanism={mechanism}\n"
    text += f"sasl.jaas.config={module} required {opts};\n"
    msg = refusal(tmp_path, text, "producer")
    assert "sasl.mechanism" in msg
    assert "producer.properties" in msg


@pytest.mark.parametrize(
    "module",
    [
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
        "com.example.CustomLoginModule",
    ],
)
def test_unsupported_login_module_is_refused(tmp_path, module):
    text = BOOT + f"security.protocol=SASL_SSL\nsasl.jaas.config={module} required;\n"
    msg = refusal(tmp_path, text, "producer")
    assert "sasl.jaas.config" in msg
    assert module in msg


def test_plain_without_password_is_refused(tmp_path):
    text = BOOT + f'security.protocol=SASL_SSL\nsasl.jaas.config={PLAIN} required username="u";\n'
    msg = refusal(tmp_path, text, "producer")
    assert "password" in msg


def test_sasl_without_credentials_is_refused(tmp_path):
    msg = refusal(tmp_path, BOOT + "security.protocol=SASL_SSL\n", "producer")
    assert "sasl.jaas.config" in msg


def test_native_sasl_keys_are_enough(tmp_path):
    text = BOOT + "security.protocol=SASL_SSL\nsasl.mechanisms=PLAIN\nsasl.username=u\nsasl.password=p\n"
    cfg = load(tmp_path, text, "producer")
    assert cfg.settings["sasl.username"] == "u"
    assert cfg.masked()["sasl.password"] == MASK


# --- Kerberos (translate(): the librdkafka build in the venv may lack GSSAPI, the mapping does not) ---


def kerberos_settings(props: dict[str, str], env: dict[str, str] | None = None) -> dict[str, str]:
    base = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "security.protocol": "SASL_PLAINTEXT"}
    return translate({**base, **props}, "consumer", "consumer.properties", env=env or {}).settings


def assert_keytab_login(s: dict[str, str], keytab: str, principal: str) -> None:
    """Settings for a GSSAPI login from this keytab as this principal, to the service "kafka"."""
    assert s["sasl.mechanisms"] == "GSSAPI"
    assert s["sasl.kerberos.keytab"] == keytab
    assert s["sasl.kerberos.principal"] == principal
    assert s["sasl.kerberos.service.name"] == "kafka"


def test_krb5_inline_keytab(tmp_path):
    s = kerberos_settings(
        {
            "sasl.jaas.config": f'{KRB5} required useKeyTab=true storeKey=true keyTab="/etc/mm.keytab" '
            'principal="mirrormaker/host@EXAMPLE.COM" serviceName="kafka";'
        }
    )
    assert_keytab_login(s, "/etc/mm.keytab", "mirrormaker/host@EXAMPLE.COM")
    assert "sasl.jaas.config" not in s


def test_krb5_with_gssapi_mechanism_set(tmp_path):
    s = kerberos_settings(
        {
            "sasl.mechanism": "GSSAPI",
            "sasl.jaas.config": f'{KRB5} required useKeyTab=true keyTab="/k" principal="p@R";',
        }
    )
    assert s["sasl.mechanisms"] == "GSSAPI"


def test_krb5_ticket_cache_without_keytab():
    s = kerberos_settings({"sasl.jaas.config": f"{KRB5} required useTicketCache=true;"})
    assert s["sasl.mechanisms"] == "GSSAPI"
    assert s["sasl.kerberos.min.time.before.relogin"] == "0"
    assert "sasl.kerberos.keytab" not in s


def test_krb5_keytab_without_principal_is_refused():
    with pytest.raises(ConfigError) as err:
        kerberos_settings({"sasl.jaas.config": f'{KRB5} required useKeyTab=true keyTab="/k";'})
    assert "principal" in str(err.value)


def test_krb5_from_the_jaas_file_named_in_the_properties(tmp_path):
    jaas = write(tmp_path, KRB5_JAAS, "kafka_mirrormaker_jaas.conf")
    s = kerberos_settings({"java.security.auth.login.config": str(jaas)})
    assert_keytab_login(s, "/tmp/mirrormaker.keytab", "mirrormaker/HOSTNAME@EXAMPLE.COM")
    assert "java.security.auth.login.config" not in s


def test_krb5_from_the_jaas_file_in_kafka_opts(tmp_path):
    jaas = write(tmp_path, KRB5_JAAS, "kafka_mirrormaker_jaas.conf")
    env = {"KAFKA_OPTS": f"-Xmx1G -Djava.security.auth.login.config={jaas} -Dsun.security.krb5.debug=false"}
    s = kerberos_settings({}, env)
    assert_keytab_login(s, "/tmp/mirrormaker.keytab", "mirrormaker/HOSTNAME@EXAMPLE.COM")


def test_jaas_file_in_kafka_opts_with_plain_loads(tmp_path):
    jaas = write(
        tmp_path,
        f'KafkaClient {{\n  {PLAIN} required\n  username="mirror"\n  password="file-secret";\n}};\n',
        "jaas.conf",
    )
    text = BOOT + "security.protocol=SASL_SSL\n"
    cfg = load(tmp_path, text, "producer", env={"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"})
    assert cfg.settings["sasl.mechanisms"] == "PLAIN"
    assert cfg.settings["sasl.username"] == "mirror"
    assert cfg.settings["sasl.password"] == "file-secret"
    assert cfg.masked()["sasl.password"] == MASK


def test_scram_from_the_jaas_file_named_in_the_properties(tmp_path):
    jaas = write(
        tmp_path,
        f'KafkaClient {{\n  {SCRAM} required\n  username="mirror"\n  password="scram-secret";\n}};\n',
        "jaas.conf",
    )
    text = BOOT + "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
    text += f"java.security.auth.login.config={jaas}\n"
    cfg = load(tmp_path, text, "producer")
    assert cfg.settings["sasl.mechanisms"] == "SCRAM-SHA-256"
    assert cfg.settings["sasl.username"] == "mirror"
    assert cfg.settings["sasl.password"] == "scram-secret"
    assert "java.security.auth.login.config" not in cfg.settings


def test_jaas_file_without_kafka_client_section(tmp_path):
    jaas = write(tmp_path, f'Client {{\n  {PLAIN} required username="u" password="p";\n}};\n', "jaas.conf")
    msg = refusal(
        tmp_path, BOOT + f"security.protocol=SASL_SSL\njava.security.auth.login.config={jaas}\n", "producer"
    )
    assert "KafkaClient" in msg


def test_jaas_file_with_an_unsupported_module(tmp_path):
    jaas = write(tmp_path, "KafkaClient {\n  com.example.Custom required;\n};\n", "jaas.conf")
    msg = refusal(
        tmp_path, BOOT + f"security.protocol=SASL_SSL\njava.security.auth.login.config={jaas}\n", "producer"
    )
    assert "com.example.Custom" in msg


def test_missing_jaas_file(tmp_path):
    text = BOOT + f"security.protocol=SASL_SSL\njava.security.auth.login.config={tmp_path / 'none.conf'}\n"
    msg = refusal(tmp_path, text, "producer")
    assert "none.conf" in msg
