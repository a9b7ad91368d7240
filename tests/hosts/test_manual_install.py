"""docs/manual-install.md, followed literally on a bare host, no mocks, no skips:

  Kafka clusters east and target on 10.213.0.1  ->  the doc's "# build machine" blocks in a copy of the
  checkout (wheels, units rendered from the role's templates, the tarball)  ->  a fresh systemd-nspawn
  guest (Debian 12, nothing of kmirror)  ->  the tarball copied to /root/  ->  the doc's "# worker host"
  blocks over SSH  ->  the unit runs hardened as kmirror and records produced on east arrive on the target.

Only the "settings" blocks are replaced, by this test's own values (the variables each one sets are checked
to be the ones the test gives). The build machine works offline here, as an air-gapped one would: pip reads
its index settings from the environment (no index, the project's cached wheelhouse as find-links).

Needs root on Debian 12 (hosts.py installs systemd-container and debootstrap and builds the guest rootfs on
first use) and the wheelhouse the roles build (.state/wheelhouse). Run:
  pytest -s tests/hosts/test_manual_install.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.testing import embedded

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "manual-install.md"
HOSTS_PY = ROOT / "tools" / "hosts.py"
WHEELHOUSE = ROOT / ".state" / "wheelhouse"
CONTROLLER = "10.213.0.1"
STATE_DIR = "/run/kmirror-hosts-manual-install-test"
GUEST, INDEX = "kmi-w1", 231  # an index no scenario or other test uses
TOPIC, PARTITIONS = "orders.created", 3
TIMINGS: dict[str, float] = {}

BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
ASSIGNED = re.compile(r"^([A-Z_][A-Z0-9_]*)=", re.MULTILINE)


def doc_blocks() -> dict[str, list[str]]:
    """The doc's shell blocks by their first line ('# build machine', '# worker host', ...)."""
    out: dict[str, list[str]] = {}
    for body in BLOCK.findall(DOC.read_text()):
        first = body.splitlines()[0].strip()
        out.setdefault(first, []).append(body)
    return out


def settings(blocks: dict[str, list[str]], where: str, values: dict[str, str]) -> str:
    """The doc's one settings block of WHERE, replaced by VALUES (it must set exactly those variables)."""
    (block,) = blocks[f"# {where}: settings"]
    assert set(ASSIGNED.findall(block)) == set(values), (where, block)
    return "".join(f"{k}={v}\n" for k, v in values.items())


def source_version() -> str:
    m = re.search(r'^__version__ = "([^"]+)"', (ROOT / "worker/src/kmirror/__init__.py").read_text(), re.M)
    assert m
    return m.group(1)


def hosts_py(*args: str) -> Any:
    proc = subprocess.run(
        [sys.executable, str(HOSTS_PY), *args],
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"hosts.py {' '.join(args)}: {proc.stderr.strip()}"
    return json.loads(proc.stdout) if proc.stdout.strip() else None


def ssh_args(host: dict[str, Any]) -> list[str]:
    return [
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "ConnectTimeout=5",
        "-i",
        host["identity_file"],
    ]


def on_host(host: dict[str, Any], script: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """bash -e on the guest with SCRIPT on its standard input (as root, like the doc's steps)."""
    return subprocess.run(
        [
            "ssh",
            *ssh_args(host),
            "-p",
            str(host["port"]),
            f"{host['user']}@{host['address']}",
            "bash -euo pipefail -s",
        ],
        input=script,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def produce(bootstrap: str, count: int) -> set[bytes]:
    run = uuid.uuid4().hex[:8]
    keys = {f"{run}-{i}".encode() for i in range(count)}
    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for k in sorted(keys):
        p.produce(
            TOPIC, key=k, value=b"v-" + k, on_delivery=lambda e, _m: errors.append(str(e)) if e else None
        )
    assert p.flush(30) == 0 and not errors, errors[:3]
    return keys


def collect(bootstrap: str, keys: set[bytes], timeout: float) -> dict[bytes, bytes]:
    """Read TOPIC from the beginning on the target (assigned, no group) until every key was seen."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "manual-install-test", "enable.auto.commit": False}
    )
    seen: dict[bytes, bytes] = {}
    deadline = time.monotonic() + timeout
    try:
        assigned = False
        while time.monotonic() < deadline and not keys <= set(seen):
            if not assigned:
                md = c.list_topics(TOPIC, timeout=5).topics.get(TOPIC)
                if md is None or md.error is not None or not md.partitions:
                    time.sleep(0.5)
                    continue
                c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in md.partitions])
                assigned = True
            m = c.poll(0.5)
            if m is not None and m.error() is None and m.key() in keys:
                seen[m.key()] = m.value()
    finally:
        c.close()
    return seen


class Installed:
    def __init__(
        self, host: dict[str, Any], clusters: dict[str, str], version: str, steps: str, unit: str
    ) -> None:
        self.host, self.clusters, self.version, self.steps = host, clusters, version, steps
        self.unit = unit  # the template unit as the build machine rendered it


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, host_tests_lock: None) -> Iterator[Installed]:
    assert os.geteuid() == 0, "this test boots a real host and must run as root"
    assert (WHEELHOUSE / "SHA256SUMS").is_file(), f"{WHEELHOUSE}: build it first (make molecule or site.yml)"
    work = tmp_path_factory.mktemp("manual-install")
    blocks = doc_blocks()
    version = source_version()
    # A checkout of its own: the doc's build writes dist/ and worker/build/ into the checkout.
    checkout = work / "checkout"
    ignore = shutil.ignore_patterns("__pycache__", "build", "dist", "*.egg-info", ".pytest_cache")
    for part in ("worker", "templates", "tools", "roles"):
        shutil.copytree(ROOT / part, checkout / part, ignore=ignore)
    hosts_py("loopback")
    with embedded.clusters("east", "target", host=CONTROLLER, log_dir=work) as running:
        clusters = {n: c.bootstrap for n, c in running.items()}
        admin = AdminClient({"bootstrap.servers": clusters["east"]})
        for fut in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
            fut.result()
        build = settings(blocks, "build machine", {"SOURCE": "east", "WHITELIST": "'orders.*'"}) + "\n".join(
            blocks["# build machine"]
        )
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(WHEELHOUSE),
            "PIP_NO_BUILD_ISOLATION": "0",  # pip: the controller's setuptools builds kmirror (no index)
        }
        t0 = time.monotonic()
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", build],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        TIMINGS["build machine"] = round(time.monotonic() - t0, 1)
        assert proc.returncode == 0, f"build machine steps failed:\n{proc.stdout}\n{proc.stderr}"
        tarball = checkout / "dist" / f"kmirror-{version}.tar.gz"
        assert tarball.is_file(), sorted(p.name for p in (checkout / "dist").iterdir())
        t0 = time.monotonic()
        hosts_py("prereqs")
        hosts_py("rootfs")
        host = hosts_py("up", "--name", GUEST, "--index", str(INDEX), "--state-dir", STATE_DIR)
        TIMINGS["guest up"] = round(time.monotonic() - t0, 1)
        try:
            copy = subprocess.run(
                [
                    "scp",
                    *ssh_args(host),
                    "-P",
                    str(host["port"]),
                    str(tarball),
                    f"{host['user']}@{host['address']}:/root/",
                ],
                capture_output=True,
                text=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
            )
            assert copy.returncode == 0, copy.stderr
            steps = settings(
                blocks,
                "worker host",
                {
                    "KMIRROR_VERSION": version,
                    "SOURCE": "east",
                    "SOURCE_BOOTSTRAP": clusters["east"],
                    "TARGET_BOOTSTRAP": clusters["target"],
                },
            ) + "\n".join(blocks["# worker host"])
            t0 = time.monotonic()
            done = on_host(host, steps)
            TIMINGS["worker host steps"] = round(time.monotonic() - t0, 1)
            assert done.returncode == 0, f"worker host steps failed:\n{done.stdout}\n{done.stderr}"
            unit = (checkout / "dist" / f"kmirror-{version}" / "systemd" / "kmirror@.service").read_text()
            yield Installed(host, clusters, version, done.stdout, unit)
        finally:
            hosts_py("down", "--name", GUEST, "--state-dir", STATE_DIR)
            print("\nmanual install timings (s): " + json.dumps(TIMINGS))


def test_the_doc_has_every_step(installed: Installed) -> None:
    blocks = doc_blocks()
    assert len(blocks["# build machine"]) == 1 and len(blocks["# worker host"]) == 3
    # the steps the test does not run are marked so in their first line
    assert set(blocks) <= {
        "# build machine",
        "# build machine: settings",
        "# worker host",
        "# worker host: settings",
        "# worker host, not run by the test",
        "# Kerberos, build machine (Debian 12, as the hosts)",
        "# Kerberos, worker host",
    }


def test_installed_version_in_its_own_virtualenv(installed: Installed) -> None:
    assert f"kmirror {installed.version}" in installed.steps.splitlines()
    out = on_host(
        installed.host,
        "readlink /opt/kmirror/venv; stat -c '%U:%G %a' /etc/kmirror/east "
        "/etc/kmirror/east/consumer.properties /etc/kmirror/east/producer.properties",
    )
    assert out.stdout.splitlines() == [
        f"/opt/kmirror/versions/{installed.version}/venv",
        "root:kmirror 750",
        "root:kmirror 640",
        "root:kmirror 640",
    ], out


def test_check_config_said_safe(installed: Installed) -> None:
    assert "verdict: SAFE" in installed.steps.splitlines()


def test_unit_runs_hardened_as_the_service_user(installed: Installed) -> None:
    assert installed.steps.splitlines()[-1] == "active"
    out = on_host(
        installed.host,
        "systemctl is-enabled kmirror@east; systemctl show kmirror@east -p User "
        "-p ProtectSystem -p NoNewPrivileges -p Restart -p RestartPreventExitStatus -p NRestarts",
    )
    lines = out.stdout.splitlines()
    assert lines[0] == "enabled", out
    assert dict(line.split("=", 1) for line in lines[1:]) == {
        "User": "kmirror",
        "ProtectSystem": "strict",
        "NoNewPrivileges": "yes",
        "Restart": "on-failure",
        # the exits the template says a restart cannot help (2: the configuration, ...)
        "RestartPreventExitStatus": re.findall(r"^RestartPreventExitStatus=(.+)$", installed.unit, re.M)[0],
        "NRestarts": "0",
    }, out
    users = on_host(
        installed.host, "m=$(systemctl show -p MainPID --value kmirror@east); ps -o user= -p $m --ppid $m"
    )
    assert users.stdout.split() and set(users.stdout.split()) == {"kmirror"}, users  # supervisor and streams


def test_records_produced_on_the_source_arrive_on_the_target(installed: Installed) -> None:
    keys = produce(installed.clusters["east"], 200)
    t0 = time.monotonic()
    seen = collect(installed.clusters["target"], keys, timeout=120)
    TIMINGS["200 records mirrored"] = round(time.monotonic() - t0, 1)
    assert set(seen) == keys, f"{len(keys - set(seen))} of {len(keys)} records missing on the target"
    assert all(v == b"v-" + k for k, v in seen.items())
