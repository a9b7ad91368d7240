"""One translated client configuration, and the settings confluent-kafka's clients take from it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kmirror.config.safety import Role, Violation
from kmirror.config.secrets import masked

# Keys that confluent-kafka's Python layer reads itself and wants as Python values, not strings.
_PYTHON_BOOL_KEYS = frozenset({"delivery.report.only.error"})


def client_conf(settings: Mapping[str, str]) -> dict[str, object]:
    """Settings as confluent-kafka's constructors take them."""
    return {k: (v.strip().lower() == "true" if k in _PYTHON_BOOL_KEYS else v) for k, v in settings.items()}


@dataclass
class ClientConfig:
    """One properties file, translated: what librdkafka gets, and what was done to get there."""

    origin: str
    role: Role
    settings: dict[str, str]
    notes: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    include: str | None = None  # legacy mirror.topics.whitelist
    exclude: str | None = None  # legacy mirror.topics.blacklist

    @property
    def safe(self) -> bool:
        return not self.violations

    def masked(self) -> dict[str, str]:
        return masked(self.settings)


# Keys an AdminClient can take from a consumer or producer config (connection and security only).
_ADMIN_PREFIXES = (
    "bootstrap.servers",
    "security.",
    "ssl.",
    "sasl.",
    "client.id",
    "socket.",
    "broker.address.",
    "client.dns.lookup",
    "reconnect.backoff",
    "retry.backoff",
    "request.timeout.ms",
    "metadata.max.age.ms",
    "connections.max.idle.ms",
    "api.version",
)


def admin_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """The connection and security part of a client config, for an AdminClient on the same cluster."""
    return {k: v for k, v in settings.items() if k.startswith(_ADMIN_PREFIXES)}
