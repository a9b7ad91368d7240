"""Kerberos (SASL/GSSAPI): what the installed Kafka client can do, and a real login with a file's keytab.

librdkafka logs in with ``kinit`` (``sasl.kerberos.kinit.cmd``) in the background and only logs a failure,
so a wrong keytab, a principal the keytab does not hold or an unreachable KDC would leave a mirror
retrying forever. ``check_login`` runs the same login once, with a private ticket cache and a time limit,
and turns each failure into one line naming the file, the key and the fix; ``kmirror run`` and
``kmirror check-config`` both call it (through :func:`kmirror.mirror.plan.check_process`).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from kmirror.config.capture import captured_log
from kmirror.errors import ConfigError

LOGIN_TIMEOUT_S = 20.0

# librdkafka's builtin.features names -> the SASL mechanisms they give.
_FEATURE_MECHANISMS = {
    "sasl_gssapi": ("GSSAPI",),
    "sasl_plain": ("PLAIN",),
    "sasl_scram": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    "sasl_oauthbearer": ("OAUTHBEARER",),
}
_FEATURES = re.compile(r"builtin\.features ([a-z0-9_,]+)")


def builtin_features() -> list[str]:
    """librdkafka's ``builtin.features``, read from the line it logs when a client starts (offline)."""
    from confluent_kafka import Producer

    with captured_log("features") as (logger, lines):
        Producer({"debug": "generic", "log.queue": False}, logger=logger).poll(0)
    for line in lines:
        m = _FEATURES.search(line)
        if m:
            return [f for f in m.group(1).split(",") if f]
    return []


@dataclass(frozen=True)
class ClientInfo:
    """The Kafka client kmirror runs on: binding and librdkafka versions, SASL mechanisms it has."""

    client: str
    librdkafka: str
    sasl_mechanisms: list[str]
    builtin_features: list[str]

    def describe(self) -> str:
        return f"{self.client}, librdkafka {self.librdkafka}, SASL mechanisms: " + (
            ", ".join(self.sasl_mechanisms) or "none"
        )


def binding_version() -> str:
    """confluent-kafka's own version (its version() is a tuple in 2.0 and a string in 2.16)."""
    import confluent_kafka

    return str(getattr(confluent_kafka, "__version__", "") or importlib.metadata.version("confluent-kafka"))


def client_info() -> ClientInfo:
    import confluent_kafka

    features = builtin_features()
    return ClientInfo(
        client=f"confluent-kafka {binding_version()}",
        librdkafka=confluent_kafka.libversion()[0],
        sasl_mechanisms=[m for f in features for m in _FEATURE_MECHANISMS.get(f, ())],
        builtin_features=features,
    )


def uses_gssapi(settings: Mapping[str, str]) -> bool:
    return settings.get("sasl.mechanisms", "").strip().upper() == "GSSAPI" and settings.get(
        "security.protocol", ""
    ).strip().upper().startswith("SASL_")


def _keytab_principals(keytab: str) -> list[str]:
    klist = shutil.which("klist")
    if not klist:
        return []
    proc = subprocess.run([klist, "-k", keytab], capture_output=True, text=True, check=False, timeout=10)
    names = []
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1] not in names:
            names.append(parts[1])
    return names


def check_login(settings: Mapping[str, str], origin: str, *, timeout: float = LOGIN_TIMEOUT_S) -> None:
    """Log in once as the file's principal with its keytab (``kinit -k -t``, a throw-away ticket cache).

    Does nothing for files without GSSAPI or without a keytab (a ticket cache kept by someone else).
    Raises ConfigError with one line naming the file, the key and the fix.
    """
    if not uses_gssapi(settings) or not settings.get("sasl.kerberos.keytab"):
        return
    keytab = settings["sasl.kerberos.keytab"]
    principal = settings.get("sasl.kerberos.principal", "kafkaclient")
    krb5 = os.environ.get("KRB5_CONFIG", "/etc/krb5.conf")
    if not os.access(keytab, os.R_OK):
        raise ConfigError(
            f"keytab {keytab} does not exist or is not readable by this user",
            origin=origin,
            key="sasl.kerberos.keytab",
            fix="deploy the keytab there, readable by the user kmirror runs as, or correct the path",
        )
    kinit = shutil.which("kinit")
    if not kinit:
        raise ConfigError(
            "kinit not found (librdkafka logs in to Kerberos with it)",
            origin=origin,
            key="sasl.mechanism=GSSAPI",
            fix="install MIT Kerberos' client tools (Debian: apt-get install krb5-user)",
        )
    env = {**os.environ, "KRB5CCNAME": "MEMORY:kmirror-check"}
    try:
        proc = subprocess.run(
            [kinit, "-k", "-t", keytab, principal],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"no answer from the Kerberos KDC within {timeout:.0f} s while logging in as {principal}",
            origin=origin,
            key="sasl.kerberos.principal",
            fix=f"make the KDC that {krb5} names for this realm reachable (or correct its address there)",
        ) from None
    if proc.returncode == 0:
        return
    error = " ".join(proc.stderr.split()).removeprefix("kinit: ")
    if "Cannot contact any KDC" in error or "Cannot find KDC" in error:
        fix = f"make the KDC that {krb5} names for this realm reachable (or correct its address there)"
        key = "sasl.kerberos.principal"
    elif "no suitable keys" in error:
        held = _keytab_principals(keytab)
        key = "sasl.kerberos.keytab/sasl.kerberos.principal"
        error = f"{keytab} holds no key for {principal} (it holds {', '.join(held) or 'nothing'})"
        fix = f"deploy the keytab exported for {principal}, or set the principal the keytab holds"
    elif "not found in Kerberos database" in error:
        key = "sasl.kerberos.principal"
        fix = f"use a principal the KDC knows (kadmin: getprinc {principal})"
    elif "Password incorrect" in error or "Preauthentication failed" in error or "Key version" in error:
        key = "sasl.kerberos.keytab"
        fix = "the keytab's key is not the KDC's (a stale keytab?): export it again (ktadd) and deploy it"
    else:
        key = "sasl.kerberos.keytab"
        fix = f"check the keytab, the principal and {krb5} with: kinit -k -t {keytab} {principal}"
    raise ConfigError(
        f"Kerberos login as {principal} with {keytab} failed: {error}", origin=origin, key=key, fix=fix
    )
