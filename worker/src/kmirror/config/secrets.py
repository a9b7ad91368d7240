"""Which configuration keys hold secrets: the one rule, wherever a value is masked or kept out of logs.

Pure (standard library only): :mod:`kmirror.config` masks with it (JAAS options too), the Ansible filter
``roles/kmirror_config/filter_plugins/kmirror_config.py`` imports it on the controller, and the cluster
definition generator (``make cluster-definition``) writes :func:`key_regex` into the Terraform inventory
module, which cannot import Python.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

SECRET_MARKERS = ("password", "secret", "ssl.key.pem", "ssl_key", "sasl.oauthbearer.config")
MASK = "********"


def is_secret(key: str) -> bool:
    """True when a key (any case) names a secret: it contains one of :data:`SECRET_MARKERS`."""
    k = str(key).lower()
    return any(m in k for m in SECRET_MARKERS)


def key_regex() -> str:
    """:func:`is_secret` as one case-insensitive regular expression (RE2 and Python syntax)."""
    return "(?i)" + "|".join(re.escape(m) for m in SECRET_MARKERS)


def masked(settings: Mapping[str, str]) -> dict[str, str]:
    """The settings with every secret value shown as :data:`MASK`."""
    return {k: (MASK if is_secret(k) else v) for k, v in settings.items()}
