"""envs/local end to end, on real hosts and real brokers, no mocks:

  embedded source and target clusters on 10.213.0.1  ->  terraform apply (systemd-nspawn guests through
  tools/hosts.py, inventory written)  ->  ansible-playbook -i <generated inventory>
  playbooks/site.yml  ->  records produced on the sources arrive on the target  ->  terraform destroy
  (guests, pinned host keys and inventory gone).

Needs root on Debian 12 (hosts.py installs systemd-container and debootstrap and builds the guest rootfs on
first use) and the project venv with ansible (make ansible-install). Run:  pytest -s tests/terraform -k local
(-s shows the timings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tfcli import ROOT, TERRAFORM_DIR, ok, terraform

from kmirror.testing import embedded

ENV_DIR = TERRAFORM_DIR / "envs" / "local"
HOSTS_PY = ROOT / "tools" / "hosts.py"
CONTROLLER = "10.213.0.1"
# Guests of this test: indices 111-112 of envs/local's range 101-119 (the demo uses the defaults, 101-...),
# in a hosts.py state dir of their own.
STATE_DIR = "/run/kmirror-hosts-terraform-test"
FIRST_INDEX = 111
WORKERS = {"kmt-w1": "10.213.111.2", "kmt-w2": "10.213.112.2"}
# Per source cluster: topic -> partitions; and what the mirror's whitelist/blacklist must copy.
SOURCE_TOPICS = {
    "east": {"orders.created": 3, "internal-east": 1},
    "west": {"clicks": 2, "clicks.private": 1},
}
MIRRORED = {"east": ["orders.created"], "west": ["clicks"]}
SOURCES = {
    "east": {"whitelist": "orders.*", "offset_commit_interval_ms": 5000},
    "west": {"whitelist": "clicks.*", "blacklist": "clicks\\.private", "offset_commit_interval_ms": 5000},
}
TIMINGS: dict[str, float] = {}


def timed(label: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    t0 = time.monotonic()
    try:
        return fn(*args, **kwargs)
    finally:
        TIMINGS[label] = round(time.monotonic() - t0, 1)


def hosts_py(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HOSTS_PY), *args],
        capture_output=True,
        text=True,
        timeout=1800,
        stdin=subprocess.DEVNULL,
    )


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        fut.result()


def topics_of(bootstrap: str) -> set[str]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {t for t, m in md.topics.items() if m.error is None}


def produce(bootstrap: str, topic: str, count: int) -> set[bytes]:
    run = uuid.uuid4().hex[:8]
    keys = {f"{topic}-{run}-{i}".encode() for i in range(count)}
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    errors: list[str] = []
    for k in sorted(keys):
        p.produce(
            topic, key=k, value=b"v-" + k, on_delivery=lambda e, _m: errors.append(str(e)) if e else None
        )
    assert p.flush(30) == 0 and not errors, errors[:3]
    return keys


def collect(bootstrap: str, topic: str, keys: set[bytes], timeout: float) -> dict[bytes, bytes]:
    """Read TOPIC from the beginning (assigned, no group) until every key in KEYS was seen."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "kmirror-terraform-test", "enable.auto.commit": False}
    )
    seen: dict[bytes, bytes] = {}
    deadline = time.monotonic() + timeout
    try:
        assigned = False
        while time.monotonic() < deadline and not keys <= set(seen):
            if not assigned:
                md = c.list_topics(topic, timeout=5).topics.get(topic)
                if md is None or md.error is not None or not md.partitions:
                    time.sleep(0.5)
                    continue
                c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in md.partitions])
                assigned = True
            m = c.poll(0.5)
            if m is not None and m.error() is None and m.key() in keys:
                seen[m.key()] = m.value()
    finally:
        c.close()
    return seen


def ssh(host: dict[str, Any], command: str) -> subprocess.CompletedProcess[str]:
    """OpenSSH with exactly the connection settings of the generated inventory (pinned host key)."""
    return subprocess.run(
        [
            "ssh",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=5",
            "-i",
            host["ansible_ssh_private_key_file"],
            *host["ansible_ssh_common_args"].split(),
            f"{host['ansible_user']}@{host['ansible_host']}",
            command,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


class LocalEnv:
    def __init__(self, work: Path, clusters: dict[str, str]) -> None:
        self.work = work
        self.clusters = clusters
        self.data_dir = work / "tfdata"
        self.inventory = work / "inventory" / "inventory.yml"
        self.var_file = work / "test.tfvars.json"
        self.var_file.write_text(
            json.dumps(
                {
                    "bootstrap_servers": clusters,
                    "sources": SOURCES,
                    "name_prefix": "kmt",
                    "first_index": FIRST_INDEX,
                    "state_dir": STATE_DIR,
                    "python": sys.executable,
                    "inventory_path": str(self.inventory),
                    "all_vars": {
                        # A wheelhouse of its own: molecule may build the default one at the same time.
                        "kmirror_worker_wheelhouse": str(ROOT / ".state" / "wheelhouse-terraform-test"),
                        "kmirror_service_settle_seconds": 3,
                    },
                }
            )
        )
        self.destroyed = False

    def tf(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return terraform(*args, "-no-color", cwd=ENV_DIR, data_dir=self.data_dir, timeout=timeout)

    def destroy(self) -> subprocess.CompletedProcess[str]:
        proc = self.tf("destroy", "-auto-approve", f"-var-file={self.var_file}")
        self.destroyed = proc.returncode == 0
        return proc


@pytest.fixture(scope="module")
def local_env(tmp_path_factory: pytest.TempPathFactory, host_tests_lock: None) -> Iterator[LocalEnv]:
    assert os.geteuid() == 0, "this test starts real hosts and must run as root"
    work = tmp_path_factory.mktemp("envs-local")
    # The brokers listen where the guests reach the controller; the address stays (others may use it).
    ok_proc = hosts_py("loopback")
    assert ok_proc.returncode == 0, ok_proc.stderr
    with embedded.clusters("east", "west", "target", host=CONTROLLER, log_dir=work) as running:
        for name, topics in SOURCE_TOPICS.items():
            create_topics(running[name].bootstrap, topics)
        env = LocalEnv(work, {n: c.bootstrap for n, c in running.items()})
        try:
            ok(env.tf("init", "-input=false", f"-backend-config=path={work / 'terraform.tfstate'}"))
            timed(
                "terraform apply", lambda: ok(env.tf("apply", "-auto-approve", f"-var-file={env.var_file}"))
            )
            yield env
        finally:
            if not env.destroyed:
                proc = env.destroy()
                if proc.returncode != 0:  # never leave guests behind
                    for name in WORKERS:
                        hosts_py("down", "--name", name, "--state-dir", STATE_DIR)
                    print(f"terraform destroy failed:\n{proc.stdout}\n{proc.stderr}", file=sys.stderr)
            print("\nenvs/local timings (s): " + json.dumps(TIMINGS))


def inventory_of(env: LocalEnv) -> dict[str, Any]:
    return yaml.safe_load(env.inventory.read_text())


def test_apply_starts_the_guests_and_writes_their_inventory(local_env: LocalEnv) -> None:
    listed = json.loads(hosts_py("list", "--state-dir", STATE_DIR).stdout)
    assert {h["name"]: h["address"] for h in listed if h["running"]} == WORKERS
    inv = inventory_of(local_env)
    assert set(inv) == {"all"} and set(inv["all"]["children"]) == {"kmirror_workers", "kmirror_audit"}
    workers = inv["all"]["children"]["kmirror_workers"]["hosts"]
    assert {name: h["ansible_host"] for name, h in workers.items()} == WORKERS
    assert inv["all"]["children"]["kmirror_audit"]["hosts"] == {}
    target = inv["all"]["vars"]["kmirror_target_cluster"]
    assert target == {
        "name": "target",
        "bootstrap_servers": local_env.clusters["target"],
        "security_protocol": "PLAINTEXT",
    }
    sources = {s["name"]: s for s in inv["all"]["vars"]["kmirror_source_clusters"]}
    assert sorted(sources) == ["east", "west"]
    for name, s in sources.items():
        assert s["bootstrap_servers"] == local_env.clusters[name]
        assert s["group_id"] == f"kmirror-{name}"
        assert s["whitelist"] == SOURCES[name]["whitelist"]
    assert sources["west"]["blacklist"] == "clicks\\.private"
    # Every guest answers over SSH with the pinned host key the inventory names.
    for name, h in workers.items():
        proc = ssh(h, "hostname; systemctl is-system-running || true")
        assert proc.returncode == 0, proc.stderr
        hostname, state = proc.stdout.split()
        # hosts.py accepts a degraded system too (it warns with the failed units); on a loaded machine a
        # guest unit may time out.
        assert hostname == name and state in ("running", "degraded"), proc.stdout


def test_a_second_plan_changes_nothing(local_env: LocalEnv) -> None:
    # Re-running apply must not replace running guests nor rewrite the inventory.
    proc = local_env.tf("plan", "-detailed-exitcode", "-input=false", f"-var-file={local_env.var_file}")
    assert proc.returncode == 0, f"plan wants changes (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"


def test_site_yml_deploys_and_starts_the_mirror(local_env: LocalEnv) -> None:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_FORCE_COLOR": "0",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    proc = timed(
        "ansible-playbook site.yml",
        subprocess.run,
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(local_env.inventory),
            "playbooks/site.yml",
            "--extra-vars",
            "kmirror_serial=2",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        stdin=subprocess.DEVNULL,
    )
    (local_env.work / "site.yml.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"site.yml failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    assert "failed=0" in proc.stdout and "unreachable=0" in proc.stdout
    for name, h in inventory_of(local_env)["all"]["children"]["kmirror_workers"]["hosts"].items():
        proc = ssh(
            h, "systemctl is-active kmirror@east kmirror@west; systemctl is-enabled kmirror@east kmirror@west"
        )
        assert proc.stdout.split() == ["active", "active", "enabled", "enabled"], f"{name}: {proc.stdout}"


def test_records_flow_from_the_sources_to_the_target(local_env: LocalEnv) -> None:
    target = local_env.clusters["target"]
    t0 = time.monotonic()
    for source, topics in MIRRORED.items():
        for topic in topics:
            keys = produce(local_env.clusters[source], topic, 200)
            seen = collect(target, topic, keys, timeout=120)
            assert set(seen) == keys, (
                f"{source}/{topic}: {len(keys - set(seen))} of {len(keys)} records missing"
            )
            assert all(v == b"v-" + k for k, v in seen.items())
    TIMINGS["records mirrored"] = round(time.monotonic() - t0, 1)
    # The whitelist and blacklist left the other topics alone.
    assert not {"internal-east", "clicks.private"} & topics_of(target)


def test_destroy_removes_guests_host_keys_and_inventory(local_env: LocalEnv) -> None:
    proc = timed("terraform destroy", local_env.destroy)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert json.loads(hosts_py("list", "--state-dir", STATE_DIR).stdout) == []
    assert not local_env.inventory.exists()
    assert not list((local_env.inventory.parent / "known_hosts.d").glob("*"))
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert not {f"kmh-{FIRST_INDEX}", f"kmh-{FIRST_INDEX + 1}"} & {
        ln.split()[0] for ln in netns.splitlines() if ln
    }
    state = json.loads((local_env.work / "terraform.tfstate").read_text())
    assert state["resources"] == []
