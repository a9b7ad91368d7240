"""kmirror.config.kerberos: what the installed client reports, and the checks that need no KDC.

The logins against a real KDC (wrong keytab, wrong principal, unreachable KDC) are in
worker/tests/integration/test_kerberos.py and the molecule scenario kerberos.
"""

from __future__ import annotations

import json
from pathlib import Path

import confluent_kafka
import pytest

from kmirror.cli import main
from kmirror.config import kerberos
from kmirror.errors import ConfigError

GSSAPI = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanisms": "GSSAPI",
    "sasl.kerberos.principal": "mirror@EX.TEST",
}


def test_client_info_is_the_installed_librdkafka() -> None:
    info = kerberos.client_info()
    assert info.librdkafka == confluent_kafka.libversion()[0]
    assert info.client.startswith("confluent-kafka ")
    assert "sasl" in info.builtin_features
    # every mechanism comes from a builtin feature, and a feature's mechanisms are all listed
    assert ("sasl_plain" in info.builtin_features) == ("PLAIN" in info.sasl_mechanisms)
    assert ("sasl_scram" in info.builtin_features) == ("SCRAM-SHA-512" in info.sasl_mechanisms)
    assert ("sasl_gssapi" in info.builtin_features) == ("GSSAPI" in info.sasl_mechanisms)
    assert info.describe().startswith(f"{info.client}, librdkafka {info.librdkafka}, SASL mechanisms: ")


def test_the_pypi_wheel_has_no_gssapi_and_check_config_says_so(tmp_path: Path, capsys) -> None:
    """The test environment runs the PyPI wheel (built without GSSAPI): a Kerberos file is refused in one
    line that names the client and how Kerberos hosts get the other one."""
    info = kerberos.client_info()
    assert "GSSAPI" not in info.sasl_mechanisms
    keytab = tmp_path / "mirror.keytab"
    keytab.write_bytes(b"\x05\x02")
    f = tmp_path / "producer.properties"
    f.write_text(
        "bootstrap.servers=127.0.0.1:1\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
        f"sasl.kerberos.keytab={keytab}\nsasl.kerberos.principal=mirror@EX.TEST\n"
    )
    assert main(["check-config", "--producer.config", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert f"{f}: sasl.mechanism=GSSAPI: this kmirror's Kafka client (confluent-kafka " in err
    assert f"librdkafka {info.librdkafka}) is built without GSSAPI" in err
    assert "kmirror_worker role" in err


def test_check_config_reports_the_client(tmp_path: Path, capsys) -> None:
    f = tmp_path / "producer.properties"
    f.write_text("bootstrap.servers=127.0.0.1:1\n")
    main(["check-config", "--json", "--producer.config", str(f)])
    report = json.loads(capsys.readouterr().out)
    info = kerberos.client_info()
    assert report["client"] == {
        "client": info.client,
        "librdkafka": info.librdkafka,
        "sasl_mechanisms": info.sasl_mechanisms,
        "builtin_features": info.builtin_features,
    }
    main(["check-config", "--producer.config", str(f)])
    assert capsys.readouterr().out.splitlines()[0] == f"client: {info.describe()}"


@pytest.mark.parametrize(
    "settings",
    [
        {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512"},
        {**GSSAPI, "security.protocol": "PLAINTEXT", "sasl.kerberos.keytab": "/nonexistent"},
        # a ticket cache kept fresh by someone else: nothing to log in with
        GSSAPI,
    ],
)
def test_no_login_without_gssapi_and_a_keytab(settings: dict, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no kinit: proves it is not run
    kerberos.check_login(settings, "p.properties")


def test_a_missing_keytab_is_named(tmp_path: Path) -> None:
    settings = {**GSSAPI, "sasl.kerberos.keytab": str(tmp_path / "gone.keytab")}
    with pytest.raises(ConfigError) as err:
        kerberos.check_login(settings, "p.properties")
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(f"p.properties: sasl.kerberos.keytab: keytab {tmp_path / 'gone.keytab'} does not")
    assert "readable by the user kmirror runs as" in text


def test_kinit_missing_is_named(tmp_path: Path, monkeypatch) -> None:
    keytab = tmp_path / "mirror.keytab"
    keytab.write_bytes(b"\x05\x02")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ConfigError) as err:
        kerberos.check_login({**GSSAPI, "sasl.kerberos.keytab": str(keytab)}, "c.properties")
    assert str(err.value) == (
        "c.properties: sasl.mechanism=GSSAPI: kinit not found (librdkafka logs in to Kerberos with it); "
        "install MIT Kerberos' client tools (Debian: apt-get install krb5-user)"
    )
