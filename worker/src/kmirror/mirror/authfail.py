"""A cluster that refuses the mirror's credentials: one line naming the cluster and why, exit 2.

librdkafka treats a failed login like a broken connection: it logs a FAIL line and tries again every
second or so, for ever. Without this the stream either waited out a metadata request and stopped with
"Failed to get metadata: Local: Broker transport failure" (exit 1, the cause only in the flood of
librdkafka lines before it) or, when the target refused the producer and no topic had to be created
yet, never stopped at all. Credentials do not repair themselves, so the stream stops at the first
``_AUTHENTICATION`` error a client reports (``error_cb``, served by the poll the stream does anyway),
before anything was read or committed with them, and the error is a :class:`ConfigError` (exit 2, like
a wrong Kerberos keytab: a service manager does not restart it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka import KafkaError

from kmirror.errors import ConfigError, one_line
from kmirror.mirror.state import StreamState


class AuthenticationFailed(ConfigError):
    pass


class AuthNoise(logging.Filter):
    """librdkafka logs the same refused login on every retry until the stream stops: keep the first."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        if "authentication" not in record.getMessage().lower() or record.levelno < logging.ERROR:
            return True
        first, self.seen = not self.seen, True
        return first


def quiet_repeated_logins(logger: logging.Logger) -> logging.Logger:
    """``logger`` with one :class:`AuthNoise` filter (a process runs one stream: one filter is enough)."""
    if not any(isinstance(f, AuthNoise) for f in logger.filters):
        logger.addFilter(AuthNoise())
    return logger


class Authentication(StreamState):
    """Mixin of :class:`kmirror.mirror.engine.Stream`: remembers the first refused login of its consumer
    (source) or producers (target) and turns it into :class:`AuthenticationFailed`."""

    _auth_failure: tuple[str, str] | None = None

    def _auth_error_cb(self, side: str) -> Callable[[KafkaError], None]:
        def seen(err: KafkaError) -> None:
            if err.code() == KafkaError._AUTHENTICATION and self._auth_failure is None:
                self._auth_failure = (side, one_line(err.str()))

        return seen

    def _raise_if_unauthenticated(self, serve: bool = False) -> None:
        """``serve``: first serve the clients' pending events (after a request failed, the error that
        explains it may still be queued). Nothing the consumer returns here is stored or committed: the
        stream is stopping."""
        if serve and self._auth_failure is None:
            for p in self.producers:
                p.poll(0)
            if self.consumer is not None:
                self.consumer.poll(0)
        if self._auth_failure is None:
            return
        side, reason = self._auth_failure
        spec = self.spec
        conf, file = (spec.consumer, "consumer") if side == "source" else (spec.producer, "producer")
        cluster = f"source cluster {spec.source}" if side == "source" else "target cluster"
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
            origin=f"{spec.label}: {cluster} ({conf.get('bootstrap.servers', '?')})",
            fix=fix,
        )
