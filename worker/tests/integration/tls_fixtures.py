"""Certificates for Apache Kafka test brokers with TLS listeners, and the JAAS line of a SCRAM client.

The CA, the broker (server) certificate for 127.0.0.1 and the client certificate (key encrypted, its
passphrase in ``client.pass``) are made by molecule/tls's ``make_certs`` (openssl), the same helper the
TLS deployment scenario uses; here they are also packed for the broker (PKCS12 keystore and truststore)
and for a Java client's keystore (``client.p12``).
"""

from __future__ import annotations

import importlib.util
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12

ROOT = Path(__file__).resolve().parents[3]
HOST = "127.0.0.1"


def _make_certs() -> object:
    path = ROOT / "molecule/tls/tls_clusters.py"
    spec = importlib.util.spec_from_file_location("kmirror_molecule_tls", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make_certs


@dataclass(frozen=True)
class Certs:
    dir: Path
    password: str  # of the broker's stores and of client.p12

    @property
    def ca(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def keystore(self) -> Path:
        return self.dir / "keystore.p12"

    @property
    def truststore(self) -> Path:
        return self.dir / "truststore.p12"

    @property
    def client_cert(self) -> Path:
        return self.dir / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.dir / "client.key"

    @property
    def client_key_password(self) -> str:
        return (self.dir / "client.pass").read_text()

    @property
    def client_p12(self) -> Path:
        return self.dir / "client.p12"

    @property
    def broker_tls(self) -> tuple[Path, Path, str]:
        """Security.tls of kmirror.testing.kafka."""
        return (self.keystore, self.truststore, self.password)


def make_certs(d: Path, password: str = "broker-store-pass") -> Certs:
    _make_certs()(d, HOST)  # type: ignore[operator]
    c = Certs(d, password)
    ca = x509.load_pem_x509_certificate(c.ca.read_bytes())
    c.truststore.write_bytes(
        pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(ca, b"kmirror-test-ca")], BestAvailableEncryption(password.encode())
        )
    )
    for out, cert, key, passin in (
        (c.keystore, d / "server.pem", d / "server.key", None),
        (c.client_p12, c.client_cert, c.client_key, c.client_key_password),
    ):
        subprocess.run(
            [
                "openssl", "pkcs12", "-export", "-in", str(cert), "-inkey", str(key), "-certfile", str(c.ca),
                "-name", out.stem, "-out", str(out), "-passout", f"pass:{password}",
                *(["-passin", f"pass:{passin}"] if passin else []),
            ],
            check=True,
            capture_output=True,
        )  # fmt: skip
    return c


def scram_jaas(user: str, password: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";'
    )
