"""Which configuration keys hold secrets: the one rule, wherever a value is masked or kept out of logs.

Pure (standard library only): :mod:`kmirror.config` masks with it (JAAS options too), the Ansible filter
``roles/kmirror_config/filter_plugins/kmirror_config.py`` imports it on the controller (a properties file
with a secret key is hidden from Ansible's output and diffs), and the cluster definition generator
(``make cluster-definition``) writes :func:`key_regex` into the Terraform inventory module, which cannot
import Python.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# A key is secret when one of these (case-insensitive, RE2 and Python syntax) is found in it. The one list:
# the worker masks with it, the Ansible filter hides files with it, Terraform refuses literals with it
# (docs/security.md, "Secrets in Terraform's input and plan").
SECRET_MARKERS = (
    "password",  # sasl.password, ssl.key.password, ssl.keystore.password, ssl_key_password, ...
    "passwd",
    r"(^|[._-])pwd?($|[._-])",  # a part named pw or pwd: db_pw, admin.pwd, pw_admin (not "pwm", "cpw")
    "passphrase",  # sasl.oauthbearer.assertion.private.key.passphrase
    "secret",  # sasl.oauthbearer.client.secret, ...
    "jaas",  # sasl.jaas.config (Java clients: the login module's options, a password among them)
    "credential",  # sasl.oauthbearer.client.credentials.*, listener credentials
    r"sasl\.oauthbearer\.config",  # librdkafka's unsecured token settings
    r"ssl\.key\.pem",  # a private key given inline
    # A key whose last part is "key" (ssl_key, ssl.keystore.key, *.private.key, api.key): the key itself;
    # paths to one (ssl.key.location, *.key.file) are not secret.
    r"(^|[._-])key$",
    r"api[._-]?key",
    # Any token: sasl.oauthbearer.token, auth.token, api_token, access_token, ... Also (on the safe side)
    # sasl.oauthbearer.token.endpoint.url, a URL: masked in logs, and given to Terraform as a Vault reference.
    "token",
)
MASK = "********"
_SECRET_RE = re.compile("|".join(SECRET_MARKERS), re.IGNORECASE)


def is_secret(key: str) -> bool:
    """True when a key (any case) names a secret: one of :data:`SECRET_MARKERS` is found in it."""
    return _SECRET_RE.search(str(key)) is not None


def key_regex() -> str:
    """:func:`is_secret` as one case-insensitive regular expression (RE2 and Python syntax)."""
    return "(?i)" + "|".join(SECRET_MARKERS)


def masked(settings: Mapping[str, str]) -> dict[str, str]:
    """The settings with every secret value shown as :data:`MASK`."""
    return {k: (MASK if is_secret(k) else v) for k, v in settings.items()}
