"""A secret in a properties file (sasl.jaas.config, ...) is not shown by `ansible-playbook --diff`.

The kmirror_config role runs for real on this machine (connection local, files under pytest's tmp dir,
owned by the current user, `kmirror check-config` off: no host, no broker), with --diff: the file without
a secret is shown as a diff, the one with a secret in sasl.jaas.config is written but not shown."""

from __future__ import annotations

import grp
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

from ansible_harness import ROOT

SECRET = "HUNTER2-jaas-pw"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{SECRET}";'


def test_the_diff_shows_no_secret(tmp_path: Path) -> None:
    conf = tmp_path / "etc"
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "kmirror_common_config_dir": str(conf),
                "kmirror_common_user": pwd.getpwuid(os.getuid()).pw_name,
                "kmirror_common_group": grp.getgrgid(os.getgid()).gr_name,
                "kmirror_config_check": False,
                "kmirror_target_cluster": {
                    "name": "target",
                    "bootstrap_servers": "t1:9093",
                    "producer_properties": {"linger.ms": 7},
                },
                "kmirror_source_clusters": [
                    {
                        "name": "east",
                        "bootstrap_servers": "e1:9093",
                        "group_id": "g",
                        "whitelist": ".*",
                        "consumer_properties": {"sasl.jaas.config": JAAS},
                    }
                ],
            },
            "roles": ["kmirror_config"],
            "handlers": [
                {"name": "kmirror restart changed instances", "ansible.builtin.debug": {"msg": "restart"}}
            ],
        }
    ]
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps(play))  # JSON is YAML
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "--diff",
            "-v",
            str(playbook),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANSIBLE_ROLES_PATH": str(ROOT / "roles"), "ANSIBLE_NOCOLOR": "1"},
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "+linger.ms=7" in out  # a file without a secret is shown
    assert SECRET not in out
    # ... and the file with it was written all the same
    assert SECRET in (conf / "east/consumer.properties").read_text().replace("\\", "")


SECRET_KEYS = [
    "sasl.jaas.config",
    "SASL.JAAS.CONFIG",
    "sasl.password",
    "ssl.key.password",
    "ssl_key_password",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.key.pem",
    "ssl_key",
    "ssl.keystore.key",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.config",
    "listener.name.x.scram-sha-256.sasl.jaas.config",
    "my.api.key",
]
PLAIN_KEYS = [
    "bootstrap.servers",
    "sasl.username",
    "group.id",
    "ssl.ca.location",
    "ssl.key.location",
    "ssl.keystore.location",
    "sasl.kerberos.keytab",
    "key.serializer",
    "sasl.oauthbearer.assertion.private.key.file",
    "client.id",
]


def test_the_secret_rule_names_every_secret_key() -> None:
    from kmirror.config.secrets import is_secret

    assert [k for k in SECRET_KEYS if not is_secret(k)] == []
    assert [k for k in PLAIN_KEYS if is_secret(k)] == []


def test_a_side_with_a_jaas_config_is_a_secret_side(config_filters) -> None:
    src = {"name": "east", "bootstrap_servers": "e1:9093", "group_id": "g", "whitelist": ".*"}
    tgt = {
        "name": "target",
        "bootstrap_servers": "t1:9093",
        "producer_properties": {"sasl.jaas.config": JAAS},
    }
    sides = config_filters.kmirror_client_sides([src], tgt, "/etc/kmirror")
    assert {s["side"]: s["secret_properties"] for s in sides} == {"consumer": False, "producer": True}
    assert SECRET not in json.dumps(sides)
