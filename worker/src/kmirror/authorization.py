"""A request a cluster refused for lack of an ACL: one line naming the side, the principal, the operation,
the resource and the grant that fixes it (pure: no client, no I/O; unit-tested).

Kafka answers a request the principal may not make with TOPIC_, GROUP_, CLUSTER_ or
TRANSACTIONAL_ID_AUTHORIZATION_FAILED. The code names the resource type only: which operation was refused
and on which resource follows from the request that was made (a fetch is READ on the topic, a commit READ on
the group, describe configs DESCRIBE_CONFIGS on the topic, ...), so the caller, which made the request,
says so. librdkafka treats most of these answers as passing: the consumer reports them and tries again for
ever, which made the mirror stall with a warning that named no ACL. An ACL does not grant itself, so every
caller stops at the first refusal: a :class:`AuthorizationFailed` is a :class:`ConfigError` (exit 2, the
service manager does not restart it, like a refused login).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException

from kmirror.errors import ConfigError, one_line

# Kafka's authorization error codes and the resource type each one is about.
RESOURCE_OF_CODE: dict[int, str] = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "TOPIC",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "GROUP",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "CLUSTER",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TRANSACTIONAL_ID",
}
# kafka-acls.sh's option for a resource of each type.
_ACLS_OPTION = {
    "TOPIC": "--topic",
    "GROUP": "--group",
    "CLUSTER": "--cluster",
    "TRANSACTIONAL_ID": "--transactional-id",
}
CLUSTER_RESOURCE = "kafka-cluster"  # the one CLUSTER resource's name


class AuthorizationFailed(ConfigError):
    """A cluster refused an operation on a resource to the principal (exit 2)."""


def authorization_error(exc: BaseException | KafkaError | None) -> KafkaError | None:
    """The authorization error an exception (or a KafkaError) carries, else None. Looks through
    ``__cause__``/``__context__`` too: a caller that wrapped the KafkaException (``raise X from None``
    keeps it as the context) still tells what the broker answered."""
    seen = 0
    while exc is not None and seen < 5:
        err = exc
        if isinstance(exc, KafkaException):
            err = exc.args[0] if exc.args else None
        if isinstance(err, KafkaError) and err.code() in RESOURCE_OF_CODE:
            return err
        if not isinstance(exc, BaseException):
            return None
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def principal(conf: Mapping[str, str]) -> str | None:
    """The principal the brokers see for a client's settings, as Kafka's default mapping gives it; None
    for a TLS client certificate (its distinguished name is not in the settings)."""
    protocol = conf.get("security.protocol", "PLAINTEXT").upper()
    mechanism = conf.get("sasl.mechanisms", conf.get("sasl.mechanism", "GSSAPI")).upper()
    if protocol.startswith("SASL_"):
        if mechanism == "GSSAPI":
            kerberos = conf.get("sasl.kerberos.principal", "kafkaclient")
            return "User:" + kerberos.split("@", 1)[0].split("/", 1)[0]
        user = conf.get("sasl.username")
        return f"User:{user}" if user else None
    if protocol == "SSL":
        return None
    return "User:ANONYMOUS"


def _camel(operation: str) -> str:
    """kafka-acls.sh's spelling of an operation: DESCRIBE_CONFIGS -> DescribeConfigs."""
    return "".join(part.capitalize() for part in operation.split("_"))


@dataclass(frozen=True)
class Refusal:
    """What was refused: ``operation`` on the ``resource_type`` resource ``resource``, to the client of
    ``conf``, on ``cluster`` (e.g. "source cluster east", "target cluster"); ``reason`` is the broker's
    answer; ``note``: why this operation is needed when that is not plain from the request."""

    cluster: str
    conf: Mapping[str, str]
    operation: str
    resource_type: str
    resource: str
    reason: str
    note: str = ""

    def grant(self) -> str:
        who = principal(self.conf) or "User:<the client certificate's distinguished name>"
        where = (
            _ACLS_OPTION[self.resource_type]
            if self.resource_type == "CLUSTER"
            else f"{_ACLS_OPTION.get(self.resource_type, '--' + self.resource_type.lower())} {self.resource}"
        )
        return f"kafka-acls.sh --add --allow-principal {who} --operation {_camel(self.operation)} {where}"

    def error(self, origin: str | None = None) -> AuthorizationFailed:
        """``origin``: what made the request (the stream's label, a command)."""
        who = principal(self.conf) or "the principal of the client certificate"
        bootstrap = self.conf.get("bootstrap.servers", "?")
        note = f" ({self.note})" if self.note else ""
        return AuthorizationFailed(
            f"not authorized: {who} may not {self.operation} {self.resource_type} {self.resource!r}{note}: "
            f"{one_line(self.reason)}",
            origin=": ".join(p for p in (origin, f"{self.cluster} ({bootstrap})") if p),
            fix=f"grant it ({self.grant()}); the kmirror_acls role grants it",
        )


def refused(
    err: KafkaError,
    cluster: str,
    conf: Mapping[str, str],
    operation: str,
    resource: str | Mapping[str, str],
    *,
    note: str = "",
) -> Refusal:
    """The refusal an authorization error of a request for ``operation`` on ``resource`` means (the
    resource type is the one the error code names). A request about resources of several types (an offset
    commit is READ on the group and on the topic) gives ``resource`` as {type: name}."""
    kind = RESOURCE_OF_CODE[err.code()]
    if kind == "CLUSTER":
        name = CLUSTER_RESOURCE
    elif isinstance(resource, str):
        name = resource
    else:
        name = resource.get(kind, "?")
    return Refusal(cluster, conf, operation, kind, name, err.str(), note)


def consumer_refusal(err: KafkaError, cluster: str, conf: Mapping[str, str], topic: str | None) -> Refusal:
    """An error a consumer of a group reported (poll, commit, offsets): READ on the group (join, fetch and
    commit offsets) or READ on the topic (fetch)."""
    if err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
        return refused(err, cluster, conf, "READ", conf.get("group.id", "?"))
    return refused(err, cluster, conf, "READ", topic or "?")


def producer_refusal(err: KafkaError, cluster: str, conf: Mapping[str, str], topic: str | None) -> Refusal:
    """An error a producer reported: WRITE on the topic (delivery), or its idempotence refused
    (InitProducerId: Kafka allows it with WRITE on any topic, or IDEMPOTENT_WRITE on the cluster)."""
    if err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        return Refusal(
            cluster,
            conf,
            "WRITE",
            "TOPIC",
            topic or "?",
            err.str(),
            "the idempotent producer needs WRITE on the topics it writes, or IDEMPOTENT_WRITE on the "
            "cluster before Kafka 2.8",
        )
    return refused(err, cluster, conf, "WRITE", topic or "?")
