"""Which client settings are secrets, and how they are shown: the one rule (worker, roles, Terraform).

A key is secret when its lower-cased name contains one of SECRET_MARKERS; its value is then shown as MASK.
"""

from __future__ import annotations

from collections.abc import Mapping

SECRET_MARKERS = ("password", "secret", "ssl.key.pem", "ssl_key", "sasl.oauthbearer.config")
MASK = "********"


def is_secret(key: str) -> bool:
    k = key.lower()
    return any(m in k for m in SECRET_MARKERS)


def masked(settings: Mapping[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret(k) else v) for k, v in settings.items()}
