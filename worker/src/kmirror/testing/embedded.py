"""The clusters of the demo, the molecule scenarios and the deployment tests: one place starts and stops them.

Each cluster is an Apache Kafka cluster (KRaft, from Kafka's own pinned jars: :mod:`kmirror.testing.kafka`),
started on free ports, waited for, and killed on exit even when the caller fails. ``clusters(...)`` takes
:class:`~kmirror.testing.kafka.KafkaCluster`'s options (``size=3``, ``line="3.9"``, ``security=...``).

Command line (for shell scripts, molecule and the demo)::

    python -m kmirror.testing.embedded up --state-dir DIR [--host 127.0.0.1] [--line 4.3] NAME [NAME ...]
        [--listener SSL|SASL_PLAINTEXT|SASL_SSL] [--tls KEYSTORE TRUSTSTORE PASSWORD_FILE] [--client-auth]
        [--kerberos KEYTAB PRINCIPAL KRB5_CONF] [--super-user User:NAME ...] [--set KEY=VALUE ...]
    python -m kmirror.testing.embedded down --state-dir DIR

``up`` writes ``DIR/clusters.json`` ({name: "host:port"} of the ``--listener`` clients use: PLAINTEXT
unless given) and leaves the brokers running (their logs and data under DIR); ``down`` stops them.
Security (every cluster of one ``up`` alike; :class:`~kmirror.testing.kafka.Security`): ``--tls`` gives
the SSL and SASL_SSL listeners their PKCS12 stores, ``--client-auth`` requires a client certificate,
``--kerberos`` makes the SASL listeners accept GSSAPI logins with the brokers' service keytab,
``--super-user`` turns the standard authorizer on; ``--set`` adds broker configs. The PLAINTEXT listener
(the brokers' own traffic) is always there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from kmirror.errors import KmirrorError
from kmirror.testing import jars
from kmirror.testing.kafka import KafkaCluster, Security, free_port, kafka_clusters, start_together

Cluster = KafkaCluster

__all__ = ["Cluster", "clusters", "free_port", "main"]


@contextlib.contextmanager
def clusters(
    *names: str, host: str = "127.0.0.1", log_dir: Path | None = None, **options: object
) -> Iterator[dict[str, Cluster]]:
    """Start one cluster per name (side by side); stop them all on exit, whatever happened."""
    with kafka_clusters(*names, host=host, log_dir=log_dir, **options) as started:
        yield started


# ---------------------------------------------------------------------------------------------- CLI


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)


LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _security(a: argparse.Namespace) -> Security:
    """The Security of the ``up`` options; an option that cannot work is a KmirrorError naming it."""
    tls = None
    if a.tls:
        keystore, truststore, password_file = (Path(x) for x in a.tls)
        for path in (keystore, truststore, password_file):
            if not path.is_file():
                raise KmirrorError(f"--tls: {path} is not a file; give the PKCS12 stores and a password file")
        tls = (keystore, truststore, password_file.read_text().strip())
    kerberos = None
    if a.kerberos:
        keytab, principal, krb5 = a.kerberos
        for path in (Path(keytab), Path(krb5)):
            if not path.is_file():
                raise KmirrorError(f"--kerberos: {path} is not a file; give the service keytab and krb5.conf")
        kerberos = (Path(keytab), principal, Path(krb5))
    if a.listener in ("SSL", "SASL_SSL") and tls is None:
        raise KmirrorError(f"--listener {a.listener} needs --tls KEYSTORE TRUSTSTORE PASSWORD_FILE")
    if a.listener.startswith("SASL_") and kerberos is None:
        raise KmirrorError(f"--listener {a.listener} needs --kerberos KEYTAB PRINCIPAL KRB5_CONF")
    return Security(
        ssl=a.listener == "SSL",
        sasl_plaintext=a.listener == "SASL_PLAINTEXT",
        sasl_ssl=a.listener == "SASL_SSL",
        tls=tls,
        client_auth=a.client_auth,
        kerberos=kerberos,
        super_users=tuple(a.super_user),
    )


def _up(
    state: Path,
    names: list[str],
    host: str,
    line: str,
    *,
    security: Security | None = None,
    listener: str = "PLAINTEXT",
    broker_config: dict[str, str] | None = None,
) -> dict[str, str]:
    state.mkdir(parents=True, exist_ok=True)
    started = {
        n: KafkaCluster(
            n, host, line=line, security=security or Security(), broker_config=dict(broker_config or {})
        )
        for n in names
    }
    start_together(list(started.values()), state)  # stops them all if one fails
    info = {n: {"bootstrap": c.bootstrap, "pids": c.pids} for n, c in started.items()}
    (state / "brokers.json").write_text(json.dumps(info, indent=2))
    bootstraps = {n: c.listener(listener) for n, c in started.items()}
    (state / "clusters.json").write_text(json.dumps(bootstraps, indent=2))
    return bootstraps


def _down(state: Path) -> None:
    path = state / "brokers.json"
    if not path.exists():
        return
    for v in json.loads(path.read_text()).values():
        _kill([int(p) for p in v.get("pids", [])])
    path.unlink()
    (state / "clusters.json").unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m kmirror.testing.embedded",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start clusters and leave them running")
    up.add_argument("--state-dir", required=True, type=Path)
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--line", default=jars.MAIN_LINE, choices=jars.LINES, help="the Apache Kafka line")
    up.add_argument("names", nargs="+")
    up.add_argument("--listener", default="PLAINTEXT", choices=LISTENERS, help="what clusters.json lists")
    up.add_argument("--tls", nargs=3, metavar=("KEYSTORE", "TRUSTSTORE", "PASSWORD_FILE"))
    up.add_argument("--client-auth", action="store_true", help="TLS clients must show a certificate")
    up.add_argument("--kerberos", nargs=3, metavar=("KEYTAB", "PRINCIPAL", "KRB5_CONF"))
    up.add_argument("--super-user", action="append", default=[], help="User:NAME; turns the authorizer on")
    up.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a broker config")
    down = sub.add_parser("down", help="stop the clusters started by up")
    down.add_argument("--state-dir", required=True, type=Path)
    a = p.parse_args(argv)
    try:
        if a.cmd == "up":
            bad = [kv for kv in a.set if "=" not in kv]
            if bad:
                raise KmirrorError(f"--set {bad[0]}: give KEY=VALUE")
            config = dict(kv.split("=", 1) for kv in a.set)
            print(
                json.dumps(
                    _up(
                        a.state_dir,
                        a.names,
                        a.host,
                        a.line,
                        security=_security(a),
                        listener=a.listener,
                        broker_config=config,
                    )
                )
            )
        else:
            _down(a.state_dir)
    except KmirrorError as exc:
        print(f"kmirror.testing.embedded: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
