#!/usr/bin/env python3
"""Embedded clusters that clients reach only through a TLS-terminating proxy with mutual TLS.

    python tls_clusters.py certs --dir DIR [--host 10.213.0.1]
    python tls_clusters.py up --state-dir DIR --certs DIR [--host 10.213.0.1] NAME [NAME ...]
    python tls_clusters.py down --state-dir DIR

``certs`` makes a CA, a server certificate for HOST and a client certificate (key encrypted with a
passphrase in client.pass) with openssl. ``up`` starts one Tansu broker per NAME listening on 127.0.0.1
only (not reachable from the guests) but advertising HOST:TLS_PORT, and one stunnel that accepts TLS on
HOST:TLS_PORT, requires a client certificate signed by the CA, and forwards to the broker. It writes
STATE/clusters.json ({name: "HOST:TLS_PORT"}, the only addresses clients can use).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

from kmirror.testing.fronts import down, kill, save, start_broker, wait


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_certs(d: Path, host: str) -> None:
    d.mkdir(parents=True, exist_ok=True)
    if (d / "client.pem").exists():
        return
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
    openssl(
        "req",
        "-x509",
        *ec,
        "-nodes",
        "-keyout",
        str(d / "ca.key"),
        "-out",
        str(d / "ca.pem"),
        "-days",
        "2",
        "-subj",
        "/CN=kmirror molecule CA",
    )
    for name, subject, ext in (
        ("server", f"/CN={host}", f"subjectAltName=IP:{host}\nextendedKeyUsage=serverAuth"),
        ("client", "/CN=kmirror-mirror/O=kmirror", "extendedKeyUsage=clientAuth"),
    ):
        openssl(
            "req",
            *ec,
            "-nodes",
            "-keyout",
            str(d / f"{name}.plain.key"),
            "-out",
            str(d / f"{name}.csr"),
            "-subj",
            subject,
        )
        (d / f"{name}.ext").write_text(ext + "\n")
        openssl(
            "x509",
            "-req",
            "-in",
            str(d / f"{name}.csr"),
            "-CA",
            str(d / "ca.pem"),
            "-CAkey",
            str(d / "ca.key"),
            "-CAcreateserial",
            "-out",
            str(d / f"{name}.pem"),
            "-days",
            "2",
            "-extfile",
            str(d / f"{name}.ext"),
        )
    os.replace(d / "server.plain.key", d / "server.key")
    # The client key is encrypted: the inventory's tls.key_password becomes ssl.key.password.
    password = secrets.token_urlsafe(12)
    (d / "client.pass").write_text(password)
    openssl(
        "pkcs8",
        "-topk8",
        "-v2",
        "aes-256-cbc",
        "-in",
        str(d / "client.plain.key"),
        "-out",
        str(d / "client.key"),
        "-passout",
        f"pass:{password}",
    )
    (d / "client.plain.key").unlink()
    for p in d.iterdir():
        p.chmod(0o600)


def up(state: Path, certs: Path, host: str, names: list[str]) -> dict[str, str]:
    state.mkdir(parents=True, exist_ok=True)
    pids: list[int] = []
    clusters: dict[str, str] = {}
    stunnel = ["foreground = yes", "pid =", f"output = {state / 'stunnel.log'}", "debug = 5", ""]
    try:
        for name in names:
            p, plain, tls = start_broker(state, name, host)
            pids.append(p.pid)
            clusters[name] = f"{host}:{tls}"
            stunnel += [
                f"[{name}]",
                f"accept = {host}:{tls}",
                f"connect = 127.0.0.1:{plain}",
                f"cert = {certs / 'server.pem'}",
                f"key = {certs / 'server.key'}",
                f"CAfile = {certs / 'ca.pem'}",
                "requireCert = yes",
                "verifyChain = yes",
                "",
            ]
        (state / "stunnel.conf").write_text("\n".join(stunnel))
        p = subprocess.Popen(
            ["stunnel4", str(state / "stunnel.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        pids.append(p.pid)
        for name, addr in clusters.items():
            wait(host, int(addr.rsplit(":", 1)[1]), f"stunnel for {name}", p)
    except BaseException:
        kill(pids)
        raise
    save(state, pids, clusters)
    return clusters


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("certs")
    c.add_argument("--dir", type=Path, required=True)
    c.add_argument("--host", default="10.213.0.1")
    u = sub.add_parser("up")
    u.add_argument("--state-dir", type=Path, required=True)
    u.add_argument("--certs", type=Path, required=True)
    u.add_argument("--host", default="10.213.0.1")
    u.add_argument("names", nargs="+")
    d = sub.add_parser("down")
    d.add_argument("--state-dir", type=Path, required=True)
    a = ap.parse_args(argv)
    if a.cmd == "certs":
        make_certs(a.dir, a.host)
    elif a.cmd == "up":
        print(json.dumps(up(a.state_dir, a.certs, a.host, a.names)))
    else:
        down(a.state_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
