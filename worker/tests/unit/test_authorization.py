"""A request refused for lack of an ACL: which error is one, the principal, and the one line that names the
side, the operation, the resource and the grant (kmirror.authorization; the stream's use of it runs on
Apache Kafka with the authorizer in tests/integration/test_acls_enforced.py)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from kmirror.authorization import (
    AuthorizationFailed,
    authorization_error,
    consumer_refusal,
    principal,
    producer_refusal,
    refused,
)
from kmirror.errors import ConfigError, one_line

SCRAM = {
    "bootstrap.servers": "src:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": "SCRAM-SHA-512",
    "sasl.username": "mirror",
    "group.id": "mm",
}


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ],
)
def test_authorization_errors_are_found_in_errors_exceptions_and_their_causes(code: int) -> None:
    err = KafkaError(code)
    assert authorization_error(err) is err
    assert authorization_error(KafkaException(err)) is err
    try:
        try:
            raise KafkaException(err)
        except KafkaException:
            raise ConfigError("wrapped") from None  # the context is kept
    except ConfigError as wrapped:
        assert authorization_error(wrapped) is err


@pytest.mark.parametrize(
    "error",
    [
        KafkaError(KafkaError._AUTHENTICATION),
        KafkaError(KafkaError._TRANSPORT),
        KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS)),
        ValueError("x"),
        None,
    ],
)
def test_other_errors_are_not_authorization_errors(error: object) -> None:
    assert authorization_error(error) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        (SCRAM, "User:mirror"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u"}, "User:u"),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanisms": "GSSAPI",
                "sasl.kerberos.principal": "km/h@R",
            },
            "User:km",
        ),
        ({"security.protocol": "SSL"}, None),
        ({}, "User:ANONYMOUS"),
    ],
)
def test_principal_is_kafkas_default_mapping_of_the_settings(
    conf: dict[str, str], expected: str | None
) -> None:
    assert principal(conf) == expected


def test_a_refused_fetch_names_side_principal_operation_resource_and_grant() -> None:
    err = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    exc = consumer_refusal(err, "source cluster east", SCRAM, "orders").error("east#0")
    assert isinstance(exc, AuthorizationFailed) and isinstance(exc, ConfigError) and exc.exit_code == 2
    text = str(exc)
    assert text == one_line(text)
    assert text.startswith(
        "east#0: source cluster east (src:9093): not authorized: User:mirror may not READ TOPIC"
    )
    assert "READ TOPIC 'orders'" in text and "Topic authorization failed" in text
    assert "kafka-acls.sh --add --allow-principal User:mirror --operation Read --topic orders" in text
    assert text.endswith("the kmirror_acls role grants it")


def test_a_refused_group_is_read_on_the_consumers_group() -> None:
    err = KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)
    text = str(consumer_refusal(err, "source cluster east", SCRAM, "orders").error())
    assert "User:mirror may not READ GROUP 'mm'" in text and "--operation Read --group mm" in text


def test_a_refused_idempotent_producer_asks_for_write_on_the_topics() -> None:
    err = KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    target = {"bootstrap.servers": "tgt:9093", "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
              "sasl.username": "w"}  # fmt: skip
    text = str(producer_refusal(err, "target cluster", target, "orders").error("east#0"))
    assert "target cluster (tgt:9093)" in text and "User:w may not WRITE TOPIC 'orders'" in text
    assert "IDEMPOTENT_WRITE on the cluster" in text and "--operation Write --topic orders" in text


def test_the_resource_type_comes_from_the_error_code() -> None:
    cluster = refused(
        KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED), "target cluster", {}, "CREATE", "t"
    )
    assert (cluster.resource_type, cluster.resource) == ("CLUSTER", "kafka-cluster")
    assert cluster.grant().endswith("--operation Create --cluster")
    topic = refused(
        KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), "target cluster", {}, "DESCRIBE_CONFIGS", "t"
    )
    assert topic.grant().endswith("--operation DescribeConfigs --topic t")


def test_a_certificate_principal_is_described_not_invented() -> None:
    err = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    text = str(consumer_refusal(err, "source cluster east", {"security.protocol": "SSL"}, "t").error())
    assert "the principal of the client certificate may not READ TOPIC 't'" in text
    assert "--allow-principal User:<the client certificate's distinguished name>" in text
