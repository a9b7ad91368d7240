#!/usr/bin/env python3
"""A real MIT Kerberos KDC (Debian krb5-kdc) on the controller, for the molecule scenario kerberos.

    python kdc.py up --state-dir DIR [--host 10.213.0.1] [--realm KMIRROR.TEST] [--max-life 10h] PRINCIPAL ...
    python kdc.py down --state-dir DIR

``up`` creates a realm database in DIR (kdb5_util), adds the brokers' service principal
``kafka/HOST`` and every PRINCIPAL given (random keys, kadmin.local), exports one keytab per principal
into DIR/keytabs/<primary>.keytab (mode 0600, as an operator keeps them on the controller; the service
principal's is the brokers' own, for their GSSAPI listener), and starts ``krb5kdc`` listening
on HOST:PORT (TCP and UDP, a free port) only. Tickets live at most MAX_LIFE (kdc.conf ``max_life``; a
few minutes proves that clients renew them). It prints and writes DIR/kdc.json: {realm, kdc:
"HOST:PORT", service_principal, service_keytab, krb5_conf, keytabs: {principal: path}}.
``down`` stops the KDC (its pid from DIR/kdc.pid); the database stays in DIR (the scenario's ephemeral
directory) and is deleted with it.

Needs root for nothing but reading the system's krb5 binaries; runs with KRB5_CONFIG and KRB5_KDC_PROFILE
pointing into DIR, so the controller's own /etc/krb5.conf and /etc/krb5kdc are never touched.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

READY_S = 15.0
SERVICE_NAME = "kafka"


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def answers(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


def env_for(state: Path) -> dict[str, str]:
    return {
        **os.environ,
        "KRB5_CONFIG": str(state / "krb5.conf"),
        "KRB5_KDC_PROFILE": str(state / "kdc.conf"),
    }


def run(state: Path, *argv: str) -> str:
    proc = subprocess.run(list(argv), env=env_for(state), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(
            f"kdc.py: {' '.join(argv[:3])} ... failed (exit {proc.returncode}): {proc.stderr.strip()}"
        )
    return proc.stdout


def write_profiles(state: Path, realm: str, host: str, port: int, max_life: str) -> None:
    (state / "krb5.conf").write_text(
        "[libdefaults]\n"
        f"    default_realm = {realm}\n"
        "    dns_lookup_kdc = false\n    dns_lookup_realm = false\n    rdns = false\n"
        "    udp_preference_limit = 1\n"
        # A small clock skew: an expired ticket is refused at once (the default 300 s would hide expiry).
        "    clockskew = 10\n\n"
        "[realms]\n"
        f"    {realm} = {{\n        kdc = {host}:{port}\n    }}\n"
    )
    (state / "kdc.conf").write_text(
        "[kdcdefaults]\n"
        f"    kdc_listen = {host}:{port}\n"
        f"    kdc_tcp_listen = {host}:{port}\n\n"
        "[realms]\n"
        f"    {realm} = {{\n"
        f"        database_name = {state / 'principal'}\n"
        f"        key_stash_file = {state / 'stash'}\n"
        f"        acl_file = {state / 'kadm5.acl'}\n"
        f"        max_life = {max_life}\n"
        "    }\n\n"
        "[logging]\n"
        f"    kdc = FILE:{state / 'kdc.log'}\n"
    )
    (state / "kadm5.acl").write_text("")


def up(state: Path, host: str, realm: str, principals: list[str], max_life: str = "10h") -> dict:
    state.mkdir(parents=True, exist_ok=True)
    down(state)
    port = free_port(host)
    write_profiles(state, realm, host, port, max_life)
    for old in state.glob("principal*"):
        old.unlink()
    run(state, "kdb5_util", "create", "-s", "-r", realm, "-P", secrets.token_urlsafe(24))
    service = f"{SERVICE_NAME}/{host}@{realm}"
    keytabs: dict[str, str] = {}
    (state / "keytabs").mkdir(exist_ok=True)
    for name in [service, *principals]:
        full = name if "@" in name else f"{name}@{realm}"
        run(state, "kadmin.local", "-r", realm, "-q", f"addprinc -randkey -maxlife {max_life} {full}")
        path = state / "keytabs" / (full.split("@", 1)[0].replace("/", "_") + ".keytab")
        path.unlink(missing_ok=True)
        run(state, "kadmin.local", "-r", realm, "-q", f"ktadd -k {path} {full}")
        path.chmod(0o600)
        if full != service:
            keytabs[full] = str(path)
    log = (state / "krb5kdc.out").open("ab")
    proc = subprocess.Popen(
        ["krb5kdc", "-n", "-r", realm],
        env=env_for(state),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    (state / "kdc.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + READY_S
    while not answers(host, port):
        if proc.poll() is not None or time.monotonic() > deadline:
            down(state)
            raise SystemExit(f"kdc.py: krb5kdc did not start on {host}:{port} (see {state / 'kdc.log'})")
        time.sleep(0.05)
    info = {
        "realm": realm,
        "kdc": f"{host}:{port}",
        "service_principal": service,
        "service_keytab": str(state / "keytabs" / (service.split("@", 1)[0].replace("/", "_") + ".keytab")),
        "krb5_conf": str(state / "krb5.conf"),
        "max_life": max_life,
        "keytabs": keytabs,
    }
    (state / "kdc.json").write_text(json.dumps(info, indent=2))
    return info


def down(state: Path) -> None:
    pid_file = state / "kdc.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
    pid_file.unlink()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up")
    u.add_argument("--state-dir", type=Path, required=True)
    u.add_argument("--host", default="10.213.0.1")
    u.add_argument("--realm", default="KMIRROR.TEST")
    u.add_argument("--max-life", default="10h", help="the longest ticket the KDC issues (kdc.conf max_life)")
    u.add_argument("principals", nargs="+")
    d = sub.add_parser("down")
    d.add_argument("--state-dir", type=Path, required=True)
    a = ap.parse_args(argv)
    if a.cmd == "up":
        print(json.dumps(up(a.state_dir, a.host, a.realm, a.principals, a.max_life)))
    else:
        down(a.state_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
