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
import shlex
import shutil
import signal
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
GUESTS = {"plain": ("kmi-w1", 231), "gssapi": ("kmi-w2", 232)}  # indices no scenario or other test uses
SOURCE_OF = {"plain": "east", "gssapi": "east2"}  # each its own instance (and group) reading east
# The doc's extra blocks of each variant, by their first lines.
VARIANTS: dict[str, dict[str, list[str]]] = {
    "plain": {"build": [], "host": []},
    "gssapi": {
        "build": ["# Kerberos, build machine (Debian 12, as the hosts)"],
        "host": ["# Kerberos, worker host"],
    },
}
SDISTS = ROOT / ".state" / "sdists"  # confluent-kafka's sdist (the doc's Kerberos build), fetched once
APT_PROXY = ROOT / "molecule" / "audit" / "apt_proxy.py"
APT_PROXY_PORT = 3149
APT_PROXY_CONF = f'Acquire::http::Proxy "http://{CONTROLLER}:{APT_PROXY_PORT}";'
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
        self.source = "east"


def build(checkout: Path, script: str, find_links: list[Path]) -> None:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": " ".join(map(str, find_links)),
        "PIP_NO_BUILD_ISOLATION": "0",  # pip: the controller's setuptools builds kmirror (no index)
    }
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"build machine steps failed:\n{proc.stdout}\n{proc.stderr}"


def copy_to(host: dict[str, Any], src: Path, dest: str) -> None:
    proc = subprocess.run(
        [
            "scp",
            *ssh_args(host),
            "-P",
            str(host["port"]),
            str(src),
            f"{host['user']}@{host['address']}:{dest}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def installed(
    tmp_path_factory: pytest.TempPathFactory, host_tests_lock: None
) -> Iterator[dict[str, Installed]]:
    """Two fresh guests: "plain" follows the doc (PyPI's client), "gssapi" adds the Kerberos blocks (the
    client built against Debian's librdkafka). Each mirrors east into the target as its own source."""
    assert os.geteuid() == 0, "this test boots real hosts and must run as root"
    assert (WHEELHOUSE / "SHA256SUMS").is_file(), f"{WHEELHOUSE}: build it first (make wheelhouse)"
    if not list(SDISTS.glob("confluent-kafka-2.0.2.tar.gz")):
        # the offline build machine's source of the GSSAPI client, fetched once (this machine is online)
        fetch = ["download", "--quiet", "--require-hashes", "--no-deps", "--no-binary", ":all:"]
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                *fetch,
                "--dest",
                str(SDISTS),
                "-r",
                str(ROOT / "locks/hosts-gssapi.txt"),
            ],
            check=True,
            timeout=300,
        )
    work = tmp_path_factory.mktemp("manual-install")
    blocks = doc_blocks()
    version = source_version()
    # A checkout of its own: the doc's build writes dist/ and worker/build/ into the checkout.
    checkout = work / "checkout"
    ignore = shutil.ignore_patterns("__pycache__", "build", "dist", "*.egg-info", ".pytest_cache")
    for part in ("worker", "templates", "tools", "roles", "locks"):
        shutil.copytree(ROOT / part, checkout / part, ignore=ignore)
    tarball = checkout / "dist" / f"kmirror-{version}.tar.gz"
    built: dict[str, tuple[Path, str]] = {}
    for variant, extra in VARIANTS.items():
        source = SOURCE_OF[variant]
        script = settings(blocks, "build machine", {"SOURCE": source, "WHITELIST": "'orders.*'"})
        script += "\n".join(blocks["# build machine"] + [b for k in extra["build"] for b in blocks[k]])
        t0 = time.monotonic()
        build(checkout, script, [WHEELHOUSE, SDISTS])
        TIMINGS[f"build machine ({variant})"] = round(time.monotonic() - t0, 1)
        unit = (checkout / "dist" / f"kmirror-{version}" / "systemd" / "kmirror@.service").read_text()
        built[variant] = (shutil.copyfile(tarball, work / f"{variant}.tar.gz"), unit)
    hosts_py("loopback")
    hosts_py("prereqs")
    hosts_py("rootfs")
    proxy_pid = work / "apt_proxy.pid"
    subprocess.run(
        [
            sys.executable,
            str(APT_PROXY),
            "--listen",
            CONTROLLER,
            "--port",
            str(APT_PROXY_PORT),
            "--pid-file",
            str(proxy_pid),
        ],
        check=True,
        timeout=30,
    )
    started: list[str] = []
    try:
        with embedded.clusters("east", "target", host=CONTROLLER, log_dir=work) as running:
            clusters = {n: c.bootstrap for n, c in running.items()}
            admin = AdminClient({"bootstrap.servers": clusters["east"]})
            for fut in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
                fut.result()
            out: dict[str, Installed] = {}
            for variant, extra in VARIANTS.items():
                t0 = time.monotonic()
                name, index = GUESTS[variant]
                host = hosts_py("up", "--name", name, "--index", str(index), "--state-dir", STATE_DIR)
                started.append(name)
                TIMINGS[f"guest up ({variant})"] = round(time.monotonic() - t0, 1)
                copy_to(host, built[variant][0], f"/root/kmirror-{version}.tar.gz")
                # the host's own way to its apt repository (a site's proxy): not one of the doc's steps
                steps = (
                    f"echo {shlex.quote(APT_PROXY_CONF)} > /etc/apt/apt.conf.d/01proxy\n"
                    if extra["host"]
                    else ""
                )
                steps += settings(
                    blocks,
                    "worker host",
                    {
                        "KMIRROR_VERSION": version,
                        "SOURCE": SOURCE_OF[variant],
                        "SOURCE_BOOTSTRAP": clusters["east"],
                        "TARGET_BOOTSTRAP": clusters["target"],
                    },
                )
                steps += "\n".join([b for k in extra["host"] for b in blocks[k]] + blocks["# worker host"])
                t0 = time.monotonic()
                done = on_host(host, steps, timeout=900)
                TIMINGS[f"worker host steps ({variant})"] = round(time.monotonic() - t0, 1)
                assert done.returncode == 0, (
                    f"{variant}: worker host steps failed:\n{done.stdout}\n{done.stderr}"
                )
                out[variant] = Installed(host, clusters, version, done.stdout, built[variant][1])
                out[variant].source = SOURCE_OF[variant]
            yield out
    finally:
        for name in started:
            hosts_py("down", "--name", name, "--state-dir", STATE_DIR)
        if proxy_pid.is_file():
            os.kill(int(proxy_pid.read_text()), signal.SIGTERM)
        print("\nmanual install timings (s): " + json.dumps(TIMINGS))


def test_the_doc_has_every_step(installed: dict[str, Installed]) -> None:
    blocks = doc_blocks()
    assert len(blocks["# build machine"]) == 1 and len(blocks["# worker host"]) == 3
    # the one step the test does not run is marked so in its first line
    assert set(blocks) == {
        "# build machine",
        "# build machine: settings",
        "# worker host",
        "# worker host: settings",
        "# worker host, not run by the test",
        *VARIANTS["gssapi"]["build"],
        *VARIANTS["gssapi"]["host"],
    }


@pytest.mark.parametrize("variant", VARIANTS)
def test_installed_version_in_its_own_virtualenv(installed: dict[str, Installed], variant: str) -> None:
    i = installed[variant]
    assert f"kmirror {i.version}" in i.steps.splitlines()
    d = f"/etc/kmirror/{i.source}"
    out = on_host(
        i.host,
        f"readlink /opt/kmirror/venv; stat -c '%U:%G %a' {d} {d}/consumer.properties {d}/producer.properties",
    )
    assert out.stdout.splitlines() == [
        f"/opt/kmirror/versions/{i.version}/venv",
        "root:kmirror 750",
        "root:kmirror 640",
        "root:kmirror 640",
    ], out


@pytest.mark.parametrize("variant", VARIANTS)
def test_check_config_said_safe(installed: dict[str, Installed], variant: str) -> None:
    assert "verdict: SAFE" in installed[variant].steps.splitlines()


def test_gssapi_client_from_the_kerberos_steps(installed: dict[str, Installed]) -> None:
    """check-config's first line names the client: PyPI's wheel without GSSAPI on the plain host, the
    2.0.2 binding built against Debian's librdkafka with GSSAPI on the other."""
    client = {
        v: next(ln for ln in i.steps.splitlines() if ln.startswith("client: ")) for v, i in installed.items()
    }
    assert "GSSAPI" not in client["plain"], client
    assert client["gssapi"].startswith("client: confluent-kafka 2.0.2, librdkafka 2.0.2, SASL mechanisms: ")
    assert "GSSAPI" in client["gssapi"].split("SASL mechanisms: ")[1].split(", "), client


@pytest.mark.parametrize("variant", VARIANTS)
def test_unit_runs_hardened_as_the_service_user(installed: dict[str, Installed], variant: str) -> None:
    i = installed[variant]
    assert i.steps.splitlines()[-1] == "active"
    unit = f"kmirror@{i.source}"
    out = on_host(
        i.host,
        f"systemctl is-enabled {unit}; systemctl show {unit} -p User "
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
        "RestartPreventExitStatus": re.findall(r"^RestartPreventExitStatus=(.+)$", i.unit, re.M)[0],
        "NRestarts": "0",
    }, out
    users = on_host(i.host, f"m=$(systemctl show -p MainPID --value {unit}); ps -o user= -p $m --ppid $m")
    assert users.stdout.split() and set(users.stdout.split()) == {"kmirror"}, users  # supervisor and streams


def committed_everything(bootstrap: str, group: str, ends: dict[int, int], timeout: float) -> dict[int, int]:
    """The group's committed offsets on the source, waited for until each partition's reaches its end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    got: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            tps = c.committed([TopicPartition(TOPIC, p) for p in ends], timeout=10)
            got = {tp.partition: tp.offset for tp in tps}
            if all(got[p] >= end for p, end in ends.items()):
                break
            time.sleep(0.5)
    finally:
        c.close()
    return got


def test_records_produced_on_the_source_arrive_on_the_target(installed: dict[str, Installed]) -> None:
    i = installed["plain"]
    keys = produce(i.clusters["east"], 200)
    t0 = time.monotonic()
    seen = collect(i.clusters["target"], keys, timeout=120)
    TIMINGS["200 records mirrored"] = round(time.monotonic() - t0, 1)
    assert set(seen) == keys, f"{len(keys - set(seen))} of {len(keys)} records missing on the target"
    assert all(v == b"v-" + k for k, v in seen.items())
    # Both instances copied them: each commits only what the target acknowledged, and each group's
    # commits reach the end of every partition.
    c = Consumer({"bootstrap.servers": i.clusters["east"], "group.id": "manual-install-ends"})
    try:
        ends = {
            p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)
        }
    finally:
        c.close()
    assert sum(ends.values()) >= 200
    for variant, inst in installed.items():
        got = committed_everything(i.clusters["east"], f"kmirror-{inst.source}", ends, timeout=120)
        assert all(got[p] >= end for p, end in ends.items()), (variant, got, ends)
