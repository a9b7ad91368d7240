#!/usr/bin/env python3
"""Certificates of the tls scenario's clusters (Apache Kafka with an SSL listener that requires a client
certificate, started by ``python -m kmirror.testing.embedded up --listener SSL --client-auth``).

    python tls_clusters.py certs --dir DIR [--host 10.213.0.1]

``certs`` makes a CA, a server certificate for HOST and a client certificate (key encrypted with a
passphrase in client.pass) with openssl (``make_certs``, also used by the integration tests'
tls_fixtures), and packs the brokers' PKCS12 keystore and truststore (password in store.pass).
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12


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


def make_stores(d: Path) -> None:
    """The broker's PKCS12 keystore (server key and certificate) and truststore (the CA, which signed the
    client certificate: mutual TLS), their password in store.pass."""
    if (d / "truststore.p12").exists():
        return
    password = secrets.token_urlsafe(12)
    openssl(
        "pkcs12",
        "-export",
        "-in",
        str(d / "server.pem"),
        "-inkey",
        str(d / "server.key"),
        "-certfile",
        str(d / "ca.pem"),
        "-name",
        "broker",
        "-out",
        str(d / "keystore.p12"),
        "-passout",
        f"pass:{password}",
    )
    # A Java truststore entry needs the trusted-certificate attribute, which openssl does not write.
    ca = x509.load_pem_x509_certificate((d / "ca.pem").read_bytes())
    (d / "truststore.p12").write_bytes(
        pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(ca, b"kmirror-molecule-ca")], BestAvailableEncryption(password.encode())
        )
    )
    (d / "store.pass").write_text(password)
    for name in ("keystore.p12", "truststore.p12", "store.pass"):
        (d / name).chmod(0o600)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("certs")
    c.add_argument("--dir", type=Path, required=True)
    c.add_argument("--host", default="10.213.0.1")
    a = ap.parse_args(argv)
    make_certs(a.dir, a.host)
    make_stores(a.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
