"""A cluster that refuses the mirror's credentials: one line naming the cluster and why, exit 2.

librdkafka treats a failed login like a broken connection: it logs a FAIL line and tries again every
second or so, for ever. Left at that, a stream would wait out a metadata request and stop with "Failed
to get metadata: Local: Broker transport failure" (exit 1, the cause only in the flood of librdkafka
lines before it) or, when the target refused the producer and no topic had to be created yet, never
stop at all. Credentials do not repair themselves, so the stream stops at the first
``_AUTHENTICATION`` error a client reports (``error_cb``, served by the poll the stream does anyway),
before anything was read or committed with them, and the error is a :class:`ConfigError` (exit 2, like
a wrong Kerberos keytab: a service manager does not restart it).

A request refused for lack of an ACL is the same kind of stop (:mod:`kmirror.authorization`): the
producers' fatal CLUSTER_AUTHORIZATION_FAILED (their idempotence refused) comes through ``error_cb`` too,
the consumer's, the admin requests' and the deliveries' refusals are turned into the one line where the
stream meets them (:meth:`Access.refusal`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

from kmirror.authorization import (
    AuthorizationFailed,
    Refusal,
    authorization_error,
    consumer_refusal,
    producer_refusal,
    refused,
)
from kmirror.errors import ConfigError, one_line
from kmirror.kafkaio import one_filter
from kmirror.mirror.clients import Clients
from kmirror.mirror.spec import StreamSpec


class AuthenticationFailed(ConfigError):
    pass


class AuthNoise(logging.Filter):
    """librdkafka logs the same refused login on every retry until the stream stops: keep the first. A
    fatal authorization error it logs is said by the stream's own line: dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage().lower()
        if "authorization failed" in text and record.levelno >= logging.ERROR:
            return False  # fatal (the producers' idempotence refused): the stream's own line says it
        if "authentication" not in text or record.levelno < logging.ERROR:
            return True
        first, self.seen = not self.seen, True
        return first


def quiet_repeated_logins(logger: logging.Logger) -> logging.Logger:
    """``logger`` with its one :class:`AuthNoise` filter."""
    one_filter(logger, AuthNoise)
    return logger


class _Answer:
    """One answer of a watched admin request: its result, and a refusal noted on the way."""

    def __init__(self, fut: Future[Any], note: Callable[[BaseException], None]) -> None:
        self.fut, self.note = fut, note

    def result(self, timeout: float | None = None) -> Any:
        try:
            return self.fut.result(timeout)
        except KafkaException as exc:
            self.note(exc)
            raise


class WatchedAdmin:
    """The admin client of the destination config sync (:class:`kmirror.mirror.topics.ConfigSync`), which
    logs a refused describe or alter and asks again at the next refresh: the first answer refused for lack
    of an ACL is noted here, and the stream stops on it (:meth:`Access.raise_if_config_refused`)."""

    def __init__(self, admin: AdminClient, side: str) -> None:
        self.admin, self.side = admin, side
        self.refused: tuple[str, str, KafkaError] | None = None  # (operation, topic, the broker's answer)

    def describe_configs(
        self, resources: list[ConfigResource], **kwargs: Any
    ) -> dict[ConfigResource, _Answer]:
        return self._watch(self.admin.describe_configs(resources, **kwargs), "DESCRIBE_CONFIGS")

    def incremental_alter_configs(
        self, resources: list[ConfigResource], **kwargs: Any
    ) -> dict[ConfigResource, _Answer]:
        return self._watch(self.admin.incremental_alter_configs(resources, **kwargs), "ALTER_CONFIGS")

    def _watch(
        self, futures: dict[ConfigResource, Future[Any]], operation: str
    ) -> dict[ConfigResource, _Answer]:
        def note(name: str) -> Callable[[BaseException], None]:
            def seen(exc: BaseException) -> None:
                err = authorization_error(exc)
                if err is not None and self.refused is None:
                    self.refused = (operation, name, err)

            return seen

        return {res: _Answer(fut, note(res.name)) for res, fut in futures.items()}


class Access:
    """A stream's refused logins and missing ACLs: remembers the first refused login of its consumer
    (source) or producers (target), and the first request refused for lack of an ACL, and turns them into
    the one-line stop (:class:`AuthenticationFailed`, :class:`kmirror.authorization.AuthorizationFailed`).

    ``a_topic`` names a mirrored topic for a grant the producers need (they write them all)."""

    def __init__(self, spec: StreamSpec, clients: Clients, a_topic: Callable[[], str]) -> None:
        self.spec = spec
        self.clients = clients
        self.a_topic = a_topic
        self.auth_failure: tuple[str, str] | None = None
        self.refused: Refusal | None = None  # the first request a cluster refused for lack of an ACL

    def failed(self) -> bool:
        """A refused login or request was seen (the loop then stops with its line)."""
        return self.auth_failure is not None or self.refused is not None

    def error_cb(self, side: str) -> Callable[[KafkaError], None]:
        def seen(err: KafkaError) -> None:
            if err.code() == KafkaError._AUTHENTICATION and self.auth_failure is None:
                self.auth_failure = (side, one_line(err.str()))
            elif authorization_error(err) is not None and self.refused is None:
                if side == "source":
                    self.refused = consumer_refusal(err, self.cluster(side), self.spec.consumer, None)
                else:
                    self.refused = producer_refusal(
                        err, self.cluster(side), self.spec.producer, self.a_topic()
                    )

        return seen

    def cluster(self, side: str) -> str:
        return f"source cluster {self.spec.source}" if side == "source" else "target cluster"

    def refusal(
        self, exc: BaseException | KafkaError | None, side: str, operation: str, resource: str, note: str = ""
    ) -> AuthorizationFailed | None:
        """The stop for ``exc`` when it is an authorization error of a request for ``operation`` on
        ``resource`` on ``side`` (source or target), else None."""
        err = authorization_error(exc)
        if err is None:
            return None
        conf = self.spec.consumer if side == "source" else self.spec.producer
        return refused(err, self.cluster(side), conf, operation, resource, note=note).error(self.spec.label)

    def raise_if_config_refused(self, *admins: WatchedAdmin) -> None:
        """The config sync's first request refused for lack of an ACL: the stop."""
        for admin in admins:
            if admin.refused is not None:
                operation, topic, err = admin.refused
                note = "the destination topic's configs follow the source's"
                raise self.refusal(err, admin.side, operation, topic, note) or KafkaException(err)

    def raise_if_refused(self, exc: BaseException) -> None:
        """A fatal authorization error a client raised: the producers' (their idempotence refused by
        InitProducerId, raised by their poll; a consumer's fatal errors are fencing, never authorization)."""
        err = authorization_error(exc)
        if err is not None and err.fatal():
            target = producer_refusal(err, self.cluster("target"), self.spec.producer, self.a_topic())
            raise target.error(self.spec.label) from None

    def consumer_refusal(self, err: KafkaError, topic: str | None) -> AuthorizationFailed | None:
        """The stop for an error the consumer reported (poll, commit), when it is an authorization error."""
        if authorization_error(err) is None:
            return None
        return consumer_refusal(err, self.cluster("source"), self.spec.consumer, topic).error(self.spec.label)

    def raise_if_unauthenticated(self, serve: bool = False) -> None:
        """``serve``: first serve the clients' pending events (after a request failed, the error that
        explains it may still be queued). Nothing the consumer returns here is stored or committed: the
        stream is stopping."""
        if serve and not self.failed():
            self.clients.serve()
        if self.auth_failure is None:
            if self.refused is not None:
                raise self.refused.error(self.spec.label)
            return
        side, reason = self.auth_failure
        spec = self.spec
        conf, file = (spec.consumer, "consumer") if side == "source" else (spec.producer, "producer")
        if conf.get("security.protocol", "").upper().startswith("SASL"):
            fix = (
                f"check the user and password (sasl.jaas.config) of the {file} file: user "
                f"{conf.get('sasl.username', '?')!r} must exist on that cluster for "
                f"{conf.get('sasl.mechanisms', '?')} with this password"
            )
        else:
            fix = f"check the client certificate and key of the {file} file"
        raise AuthenticationFailed(
            f"authentication failed: {reason}",
            origin=f"{spec.label}: {self.cluster(side)} ({conf.get('bootstrap.servers', '?')})",
            fix=fix,
        )
