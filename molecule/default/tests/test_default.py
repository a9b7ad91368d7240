"""Scenario default: what a deployed worker host looks like, and that the mirror really mirrors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import kafka_fixture as kf

SOURCES = ["east", "west"]
VENV = "/opt/kmirror/venv"
CONF = "/etc/kmirror"


def _owner(f, user, group, mode):
    assert f.exists, f.path
    assert (f.user, f.group, f.mode) == (user, group, mode), f.path


def test_service_user(host):
    u = host.user("kmirror")
    assert u.exists
    assert u.shell == "/usr/sbin/nologin"
    assert u.uid < 1000  # a system user


def test_installed_from_shipped_wheels(host):
    """Each version has its own virtualenv and wheels; /opt/kmirror/venv links to the current one."""
    link = host.file(VENV)
    assert link.is_symlink
    version = host.check_output(f"{VENV}/bin/kmirror --version").removeprefix("kmirror ")
    assert link.linked_to == f"/opt/kmirror/versions/{version}/venv"
    _owner(host.file(f"/opt/kmirror/versions/{version}/venv"), "root", "root", 0o755)
    wheels = f"/opt/kmirror/versions/{version}/wheels"
    assert host.check_output(f"cd {wheels} && sha256sum --quiet -c SHA256SUMS && echo ok") == "ok"
    assert not host.file("/opt/kmirror/wheels").exists  # the layout before versions


def test_upgrade_then_rollback_kept_both_versions(host):
    """The side effect upgraded to <version>+next with site.yml, then pinned kmirror_version back to
    <version> while the controller shipped only +next: both versions stay side by side, the link points
    at the first again and every instance was restarted onto it."""
    version = host.check_output(f"{VENV}/bin/kmirror --version").removeprefix("kmirror ")
    assert "+" not in version
    nxt = host.check_output(f"/opt/kmirror/versions/{version}+next/venv/bin/kmirror --version")
    assert nxt == f"kmirror {version}+next"
    for source in SOURCES:
        main = host.check_output(f"systemctl show -p MainPID --value kmirror@{source}")
        # the script's interpreter is its version's own python (pip wrote that path when installing it)
        args = host.check_output(f"ps -o args= -p {main}")
        assert args.startswith(f"/opt/kmirror/versions/{version}/venv/bin/python "), args


@pytest.mark.parametrize("source", SOURCES)
def test_unit_active_and_enabled(host, source):
    svc = host.service(f"kmirror@{source}")
    assert svc.is_running
    assert svc.is_enabled
    show = dict(
        line.split("=", 1)
        for line in host.check_output(
            f"systemctl show kmirror@{source} -p User -p NoNewPrivileges -p ProtectSystem -p PrivateTmp "
            "-p ProtectHome -p Restart -p NRestarts"
        ).splitlines()
    )
    assert show == {
        "User": "kmirror",
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "PrivateTmp": "yes",
        "ProtectHome": "yes",
        "Restart": "on-failure",
        "NRestarts": "0",
    }
    # every process of the instance runs as the service user
    main = host.check_output(f"systemctl show -p MainPID --value kmirror@{source}")
    users = host.check_output(f"ps -o user= -p {main} --ppid {main}").split()
    assert users and set(users) == {"kmirror"}  # the supervisor and its stream processes


@pytest.mark.parametrize("source", SOURCES)
def test_file_modes(host, source):
    _owner(host.file(CONF), "root", "kmirror", 0o750)
    _owner(host.file(f"{CONF}/{source}"), "root", "kmirror", 0o750)
    for side in ("consumer", "producer"):
        _owner(host.file(f"{CONF}/{source}/{side}.properties"), "root", "kmirror", 0o640)
    _owner(
        host.file(f"/etc/systemd/system/kmirror@{source}.service.d/10-kmirror.conf"), "root", "root", 0o644
    )
    _owner(host.file("/etc/systemd/system/kmirror@.service"), "root", "root", 0o644)


@pytest.mark.parametrize("source", SOURCES)
def test_check_config_safe_as_service_user(host, source):
    cmd = host.run(
        f"runuser -u kmirror -- {VENV}/bin/kmirror check-config --json "
        f"--consumer.config {CONF}/{source}/consumer.properties "
        f"--producer.config {CONF}/{source}/producer.properties"
    )
    assert cmd.rc == 0, cmd.stderr
    report = json.loads(cmd.stdout)
    assert report["verdict"] == "SAFE"
    consumer, producer = report["files"]
    assert consumer["settings"]["enable.auto.commit"] == "false"
    assert consumer["settings"]["group.id"] == f"kmirror-{source}"
    assert consumer["settings"]["session.timeout.ms"] == "6000"
    assert consumer["settings"]["socket.receive.buffer.bytes"] == "4194304"
    assert producer["settings"]["acks"] in ("all", "-1")
    assert producer["settings"]["enable.idempotence"] == "true"
    assert producer["settings"]["linger.ms"] == "10"  # the inventory's producer_properties


def test_command_lines(host):
    west = host.file("/etc/systemd/system/kmirror@west.service.d/10-kmirror.conf").content_string
    assert '--whitelist "clicks.*" --blacklist "clicks\\\\.private" --num.streams 1' in west
    east = host.file("/etc/systemd/system/kmirror@east.service.d/10-kmirror.conf").content_string
    assert '--whitelist "orders.*,payments" --num.streams 2 --offset.commit.interval.ms 5000' in east
    # systemd parses the quoting back to the regexes the inventory gave
    argv = host.check_output("systemctl show -p ExecStart --value kmirror@west")
    assert "--blacklist clicks\\.private" in argv


def test_socket_buffer_limits(host):
    f = host.file("/etc/sysctl.d/60-kmirror.conf")
    assert f.contains("^net.core.rmem_max = ")
    limit = int(host.check_output("sysctl -n net.core.rmem_max"))
    persisted = int(f.content_string.split("net.core.rmem_max = ")[1].split()[0])
    assert persisted >= 4194304 and persisted >= limit


# ------------------------------------------------------------------ the mirror, end to end (run once)


def assert_created_like_the_source(topics_of: dict[str, list[str]]) -> None:
    """The target has each source's topics with the source topic's partitions and configs."""
    info = kf.clusters()
    on_target = kf.topic_partitions(info["target"])
    for source, topics in topics_of.items():
        for topic in topics:
            partitions, configs = kf.SOURCE_TOPICS[source][topic]
            assert on_target.get(topic) == partitions, (topic, on_target.get(topic))
            got = kf.topic_configs(info["target"], topic)
            for k, v in configs.items():
                assert got.get(k) == v, (topic, k, got)


def test_destination_topics_created_like_the_source():
    assert_created_like_the_source(kf.MIRRORED)


def test_records_of_every_source_arrive_on_the_target():
    info = kf.clusters()
    sent = {
        (source, topic): kf.produce(info[source], topic, 25)
        for source, topics in kf.MIRRORED.items()
        for topic in topics
    }
    for (source, topic), keys in sent.items():
        seen = kf.collect(info["target"], topic, keys, timeout=60)
        assert seen == keys, (
            f"{source}/{topic}: {len(keys - seen)} of {len(keys)} records missing on the target"
        )


def test_filtered_topics_are_not_mirrored():
    info = kf.clusters()
    on_target = kf.topic_partitions(info["target"])
    for source, topics in kf.SOURCE_TOPICS.items():
        for topic in set(topics) - set(kf.MIRRORED.get(source, []) + kf.ADDED.get(source, [])):
            assert topic not in on_target, f"{source}/{topic} should not be mirrored"


# ------------------------------------------------------------------ what the side effect's runbooks left


def test_added_source_got_its_topics_created_like_the_source():
    """add_source_cluster.yml created south's destination topics (partitions, configs) first."""
    assert_created_like_the_source(kf.ADDED)


def test_removed_source_left_nothing_behind(host):
    """remove_source_cluster.yml stopped and disabled kmirror@south and removed its files; site.yml then
    brought it back with the inventory (the upgrade), and site.yml without south in the inventory (the
    rollback) stopped, disabled and removed it again (kmirror_service_remove_dropped)."""
    svc = host.service("kmirror@south")
    assert not svc.is_running and not svc.is_enabled
    assert not host.file(f"{CONF}/south").exists
    assert not host.file("/etc/systemd/system/kmirror@south.service.d").exists
    # the other instances kept running through it all
    for source in SOURCES:
        assert host.service(f"kmirror@{source}").is_running
