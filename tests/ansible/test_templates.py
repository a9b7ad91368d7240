"""The shared templates, rendered as Ansible renders them, read back by the worker's own parsers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_harness import ROLES, ROOT, UNIT_DEFAULTS, load_module

from kmirror import config
from kmirror.config import safety
from kmirror.config.jaas import load_jaas_file
from kmirror.config.properties import parse_properties
from kmirror.errors import ConfigError

properties_filters = load_module(
    ROLES / "kmirror_config/filter_plugins/kmirror_properties.py", "kmirror_properties_filters"
)

NASTY = 'p@ss "quoted" \\back\\slash $HOME %i #hash'


def source(**over):
    s = {
        "name": "east",
        "bootstrap_servers": "e1:9093, e2:9093",
        "group_id": "kmirror-east",
        "whitelist": "orders.*,payments",
        "num_streams": 2,
        "consumer_properties": {"session.timeout.ms": 6000},
    }
    s.update(over)
    return s


def target(**over):
    t = {"name": "target", "bootstrap_servers": "t1:9093,t2:9093", "producer_properties": {}}
    t.update(over)
    return t


def render_side(render, config_filters, safety_table, conf_dir, src, tgt, side, tuning=None):
    """Render one side's files like the kmirror_config role; return the properties text and the item."""
    sides = config_filters.kmirror_client_sides([src], tgt, str(conf_dir))
    item = next(s for s in sides if s["side"] == side)
    cluster = config_filters.kmirror_cluster_for(item, [src], tgt)
    (conf_dir / src["name"]).mkdir(parents=True, exist_ok=True)
    common = {
        "kmirror_side": side,
        "kmirror_source": src["name"],
        "kmirror_cluster": cluster,
        "kmirror_files": item["files"],
    }
    if item["jaas"]:
        with open(item["files"]["jaas"], "w") as fh:
            fh.write(render("jaas.conf.j2", kmirror_kerberos_service_name="kafka", **common))
    text = render(
        "client.properties.j2",
        kmirror_properties=properties_filters.kmirror_client_properties(
            cluster,
            side,
            item["files"],
            f"kmirror-{src['name']}-w1-{side}",
            tuning if tuning is not None else {"socket.receive.buffer.bytes": 4194304},
        ),
        **{k: v for k, v in common.items() if k != "kmirror_files"},
    )
    with open(item["files"]["properties"], "w") as fh:
        fh.write(text)
    return text, item


def accepted(text: str, side: str, origin: str = "<rendered>") -> config.ClientConfig:
    """What the worker does with a file: parse, translate, make safe (refusing anything unsafe)."""
    return config.finish(
        config.translate(parse_properties(text, origin), side, origin, env={}), allow_unsafe=False
    )


def test_lookup_returns_the_workers_own_table(safety_table):
    assert safety_table == safety.table()


@pytest.mark.parametrize("side", ["consumer", "producer"])
def test_plaintext_sides_are_safe(render, config_filters, safety_table, tmp_path, side):
    text, _ = render_side(render, config_filters, safety_table, tmp_path, source(), target(), side)
    cfg = accepted(text, side)
    assert cfg.safe and not cfg.violations
    s = cfg.settings
    if side == "consumer":
        assert s["bootstrap.servers"] == "e1:9093,e2:9093"
        assert s["group.id"] == "kmirror-east"
        assert s["enable.auto.commit"] == "false"
        assert s["auto.offset.reset"] == "earliest"
        assert s["session.timeout.ms"] == "6000"
        assert s["socket.receive.buffer.bytes"] == "4194304"
    else:
        assert s["bootstrap.servers"] == "t1:9093,t2:9093"
        assert s["acks"] == "all" and s["enable.idempotence"] == "true"
        assert "group.id" not in s
    assert s["client.id"] == f"kmirror-east-w1-{side}"
    # every required setting is written out, so an operator reading the file sees it
    for req in safety.REQUIRED[side]:
        assert re.search(rf"^{re.escape(req.key)}={re.escape(req.value)}$", text, re.M)
    # the engine's own settings are left to the engine
    for key in safety.ENGINE_OWNED[side]:
        assert not re.search(rf"^{re.escape(key)}=", text, re.M)


@pytest.mark.parametrize("side", ["consumer", "producer"])
def test_one_precedence_the_workers(render, config_filters, safety_table, tmp_path, side):
    """The file holds the filter's merge, and the worker's own merge of that file adds only what the engine
    owns: the precedence lives in kmirror.config.safety, not in the template."""
    src = source(consumer_properties={"auto.offset.reset": "latest", "socket.receive.buffer.bytes": 8388608})
    tgt = target(producer_properties={"linger.ms": 20, "compression.type": "lz4"})
    text, item = render_side(render, config_filters, safety_table, tmp_path, src, tgt, side)
    cluster = config_filters.kmirror_cluster_for(item, [src], tgt)
    merged = properties_filters.client_properties(
        cluster, side, item["files"], f"kmirror-east-w1-{side}", {"socket.receive.buffer.bytes": 4194304}
    )
    written = parse_properties(text)
    assert written == merged["properties"]
    assert safety.apply(written, side) == {**merged["properties"], **safety.ENGINE_OWNED[side]}
    assert list(merged["properties"]) == sorted(merged["properties"])
    if side == "consumer":  # the operator's value wins over the default and over the role's tuning
        assert (written["auto.offset.reset"], written["socket.receive.buffer.bytes"]) == ("latest", "8388608")
    else:
        assert (written["linger.ms"], written["acks"]) == ("20", "all")


def test_rendered_files_pass_librdkafkas_own_check(render, config_filters, safety_table, tmp_path):
    for side in ("consumer", "producer"):
        _, item = render_side(render, config_filters, safety_table, tmp_path, source(), target(), side)
        cfg = config.load_client_config(item["files"]["properties"], side)
        assert cfg.safe


def test_scram_credentials_per_side_through_jaas_files(render, config_filters, safety_table, tmp_path):
    src = source(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="mirror-east",
        sasl_password=NASTY,
        tls={"ca_src": "files/ca.pem"},
    )
    tgt = target(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="mirror-target",
        sasl_password="other-secret",
    )
    ctext, citem = render_side(render, config_filters, safety_table, tmp_path, src, tgt, "consumer")
    ptext, pitem = render_side(render, config_filters, safety_table, tmp_path, src, tgt, "producer")
    assert NASTY not in ctext and "other-secret" not in ptext  # passwords live in the JAAS files only
    c = accepted(ctext, "consumer").settings
    p = accepted(ptext, "producer").settings
    assert (c["sasl.mechanisms"], c["sasl.username"], c["sasl.password"]) == (
        "SCRAM-SHA-512",
        "mirror-east",
        NASTY,
    )
    assert (p["sasl.mechanisms"], p["sasl.username"], p["sasl.password"]) == (
        "SCRAM-SHA-256",
        "mirror-target",
        "other-secret",
    )
    assert c["security.protocol"] == "SASL_SSL" and c["ssl.ca.location"] == citem["files"]["ca"]
    assert "ssl.ca.location" not in p
    assert citem["files"]["jaas"] != pitem["files"]["jaas"]


def test_plain_mechanism(render, config_filters, safety_table, tmp_path):
    tgt = target(security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="u", sasl_password="pw")
    text, _ = render_side(render, config_filters, safety_table, tmp_path, source(), tgt, "producer")
    s = accepted(text, "producer").settings
    assert (s["sasl.mechanisms"], s["sasl.username"], s["sasl.password"]) == ("PLAIN", "u", "pw")


def test_kerberos_keytab_and_principal(render, config_filters, safety_table, tmp_path):
    src = source(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="GSSAPI",
        kerberos_principal="kmirror/w1.example.com@EXAMPLE.COM",
        kerberos_keytab_src="files/k.keytab",
    )
    text, item = render_side(render, config_filters, safety_table, tmp_path, src, target(), "consumer")
    s = accepted(text, "consumer").settings
    assert s["sasl.mechanisms"] == "GSSAPI"
    assert s["sasl.kerberos.keytab"] == item["files"]["keytab"]
    assert s["sasl.kerberos.principal"] == "kmirror/w1.example.com@EXAMPLE.COM"
    assert s["sasl.kerberos.service.name"] == "kafka"
    module = load_jaas_file(item["files"]["jaas"])["KafkaClient"][0]
    assert module.options["useKeyTab"] == "true" and module.options["useTicketCache"] == "false"


def test_mutual_tls_files(render, config_filters, safety_table, tmp_path):
    tgt = target(
        security_protocol="SSL", tls={"ca_src": "a", "cert_src": "b", "key_src": "c", "key_password": "k p"}
    )
    text, item = render_side(render, config_filters, safety_table, tmp_path, source(), tgt, "producer")
    s = accepted(text, "producer").settings
    assert s["ssl.ca.location"] == item["files"]["ca"]
    assert s["ssl.certificate.location"] == item["files"]["cert"]
    assert s["ssl.key.location"] == item["files"]["key"]
    assert s["ssl.key.password"] == "k p"
    assert item["secret_properties"]  # the role hides this file from logs


def test_operator_may_extend_and_change_defaults(render, config_filters, safety_table, tmp_path):
    src = source(
        consumer_properties={
            "auto.offset.reset": "latest",
            "fetch.max.bytes": 104857600,
            "check.crcs": True,
            "socket.receive.buffer.bytes": 8388608,
        }
    )
    text, _ = render_side(render, config_filters, safety_table, tmp_path, src, target(), "consumer")
    s = accepted(text, "consumer").settings
    assert s["auto.offset.reset"] == "latest"
    assert s["fetch.max.bytes"] == "104857600"
    assert s["check.crcs"] == "true"  # YAML booleans are written the Java way
    assert s["socket.receive.buffer.bytes"] == "8388608"
    assert text.count("socket.receive.buffer.bytes=") == 1


@pytest.mark.parametrize(
    ("side", "props"),
    [
        ("producer", {"acks": 1}),
        ("producer", {"enable.idempotence": False}),
        ("producer", {"retries": 0}),
        ("producer", {"max.in.flight.requests.per.connection": 10}),
        ("consumer", {"enable.auto.commit": True}),
    ],
)
def test_operator_cannot_silently_weaken(render, config_filters, safety_table, tmp_path, side, props):
    src = source(consumer_properties=props if side == "consumer" else {})
    tgt = target(producer_properties=props if side == "producer" else {})
    text, _ = render_side(render, config_filters, safety_table, tmp_path, src, tgt, side)
    with pytest.raises(ConfigError, match="unsafe"):
        accepted(text, side)
    cfg = config.finish(config.translate(parse_properties(text), side, "<r>", env={}), allow_unsafe=True)
    assert cfg.violations  # what `kmirror check-config` reports as UNSAFE


def test_engine_owned_keys_are_refused(render, config_filters, safety_table, tmp_path):
    src = source(consumer_properties={"enable.auto.offset.store": True})
    text, _ = render_side(render, config_filters, safety_table, tmp_path, src, target(), "consumer")
    with pytest.raises(ConfigError, match=r"sets enable\.auto\.offset\.store"):
        accepted(text, "consumer")


def test_properties_escaping_round_trips(render, config_filters, safety_table, tmp_path):
    odd = {
        "client.rack": "  lead and trail  ",
        "x.path": "C:\\dir\\file",
        "x.multi": "a\nb",
        "x.uni": "ünï #!",
        "x key=:#!": "v",
    }
    src = source(consumer_properties=odd)
    text, _ = render_side(render, config_filters, safety_table, tmp_path, src, target(), "consumer")
    props = parse_properties(text)
    for k, v in odd.items():
        assert props[k] == v


def test_no_secret_in_the_side_items(config_filters):
    src = source(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="u",
        sasl_password="s3cret-pw",
        tls={"ca_src": "a", "cert_src": "b", "key_src": "c", "key_password": "kpw"},
        acl_admin_properties={"sasl.password": "admin-pw"},
    )
    sides = config_filters.kmirror_client_sides([src], target(), "/etc/kmirror")
    dumped = json.dumps(sides)
    for secret in ("s3cret-pw", "kpw", "admin-pw"):
        assert secret not in dumped
    assert [s["side"] for s in sides] == ["consumer", "producer"]
    assert sides[0]["files"]["properties"] == "/etc/kmirror/east/consumer.properties"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"group_id": ""}, "no group_id"),
        ({"security_protocol": "TLS"}, "security_protocol 'TLS' is unknown"),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "u"},
            "needs sasl_password",
        ),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"}, "GSSAPI needs kerberos_principal"),
        ({"security_protocol": "SSL", "tls": {"cert_src": "c"}}, "needs both tls.cert_src and tls.key_src"),
        ({"tls": {"ca_src": "a"}}, "tls is set but security_protocol is PLAINTEXT"),
        ({"name": "east west"}, "not usable as a systemd instance"),
        ({"whitelist": "", "blacklist": ""}, "no whitelist or blacklist"),
        ({"num_streams": 0}, "num_streams"),
    ],
)
def test_bad_definitions_are_refused(config_filters, change, message):
    with pytest.raises(config_filters.ClusterDefinitionError, match=re.escape(message)):
        config_filters.check_definitions([source(**change)], target())


def test_duplicate_source_names_are_refused(config_filters):
    with pytest.raises(config_filters.ClusterDefinitionError, match="used twice"):
        config_filters.check_definitions([source(), source()], target())


# ------------------------------------------------------------------------------------------------ systemd


def systemd_split(line: str) -> list[str]:
    """Split an ExecStart= value as systemd does (double quotes, C escapes, %% and $$)."""
    out, cur, i, quoted, started = [], [], 0, False, False
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            cur.append(line[i + 1])
            i += 2
            started = True
            continue
        if c == '"':
            quoted = not quoted
            started = True
        elif c == " " and not quoted:
            if started:
                out.append("".join(cur))
            cur, started = [], False
        else:
            cur.append(c)
            started = True
        i += 1
    if started:
        out.append("".join(cur))
    return [a.replace("%%", "%").replace("$$", "$") for a in out]


def exec_start(render, src, **extra):
    text = render(
        "kmirror-instance.conf.j2",
        kmirror_source=src,
        kmirror_bin="/opt/kmirror/venv/bin/kmirror",
        kmirror_conf_dir="/etc/kmirror",
        kmirror_log_level="INFO",
        **extra,
    )
    lines = [ln for ln in text.splitlines() if ln.startswith("ExecStart=")]
    assert lines[0] == "ExecStart="
    assert text.endswith("\n") and not text.endswith("\n\n")
    return systemd_split(lines[1][len("ExecStart=") :])


def test_command_line_of_an_instance(render):
    argv = exec_start(render, source(offset_commit_interval_ms=5000))
    assert argv == [
        "/opt/kmirror/venv/bin/kmirror",
        "run",
        "--consumer.config",
        "/etc/kmirror/east/consumer.properties",
        "--producer.config",
        "/etc/kmirror/east/producer.properties",
        "--source.name",
        "east",
        "--whitelist",
        "orders.*,payments",
        "--num.streams",
        "2",
        "--offset.commit.interval.ms",
        "5000",
        "--log.level",
        "INFO",
    ]


def test_command_line_names_the_source_as_the_inventory_does(render, tmp_path):
    """The worker's metrics, /health and log lines name the inventory's source, not the file ("consumer")."""
    argv = exec_start(render, source(name="east-dc1"))
    from kmirror.cli import _options
    from kmirror.mirror.plan import build_plan
    from kmirror.options import build_parser

    parsed = build_parser().parse_args(argv[1:])
    assert parsed.source_names == ["east-dc1"]
    # the plan the worker builds from it (the files at the paths the template names, here under tmp_path)
    files = {
        "--consumer.config": "bootstrap.servers=127.0.0.1:1\ngroup.id=mirror\n",
        "--producer.config": "bootstrap.servers=127.0.0.1:1\nacks=all\n",
    }
    for option, text in files.items():
        path = tmp_path / argv[argv.index(option) + 1].lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        argv[argv.index(option) + 1] = str(path)
    specs = build_plan(_options(build_parser().parse_args(argv[1:]))).stream_specs()
    assert {s.source for s in specs} == {"east-dc1"}


def test_command_line_with_json_logs_is_accepted_by_the_worker(render):
    argv = exec_start(render, source(), kmirror_log_format="json")
    assert argv[-2:] == ["--log.format", "json"]
    from kmirror.options import build_parser

    assert build_parser().parse_args(argv[1:]).log_format == "json"


@pytest.mark.parametrize(("value", "expected"), [(None, None), (True, None), (False, "false")])
def test_command_line_static_membership_opt_out(render, value, expected):
    src = source() if value is None else source(static_membership=value)
    argv = exec_start(render, src)
    got = argv[argv.index("--static.membership") + 1] if "--static.membership" in argv else None
    assert got == expected
    from kmirror.options import build_parser

    parsed = build_parser().parse_args(argv[1:]).static_membership
    assert parsed is (expected != "false")  # static is the worker's default


def test_command_line_with_group_offset_sync(render):
    argv = exec_start(render, source(groups="pay.*,billing", sync_group_offsets_interval_ms=30000))
    assert argv[argv.index("--groups") + 1] == "pay.*,billing"
    assert argv[argv.index("--sync.group.offsets.interval.ms") + 1] == "30000"


def test_command_line_quoting_keeps_regexes_exact(render):
    nasty = 'a\\.b$|"q" %i x y'
    argv = exec_start(render, source(whitelist=nasty, blacklist="c\\.private"))
    assert argv[argv.index("--whitelist") + 1] == nasty
    assert argv[argv.index("--blacklist") + 1] == "c\\.private"
    # and the worker's own filter accepts what systemd hands it
    from kmirror.config.filters import TopicFilter

    assert TopicFilter(None, argv[argv.index("--blacklist") + 1]).matches("cXprivate")


def test_template_unit_hardening(render):
    text = render("kmirror@.service.j2", **{**UNIT_DEFAULTS, "kmirror_extra_directives": ["MemoryMax=2G"]})
    for line in (
        "User=kmirror",
        "Restart=on-failure",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "PrivateTmp=yes",
        "ProtectHome=yes",
        "RestartPreventExitStatus=2 4",
        "MemoryMax=2G",
        "Environment=KRB5_CONFIG=/etc/kmirror/krb5.conf",
        "WantedBy=multi-user.target",
    ):
        assert line in text.splitlines(), line
    assert "ExecStart=" not in text  # each instance's own, in its drop-in


def test_krb5_conf(render):
    text = render(
        "krb5.conf.j2",
        kmirror_krb5={
            "default_realm": "EXAMPLE.COM",
            "realms": {"EXAMPLE.COM": {"kdc": ["kdc1:88", "kdc2:88"], "admin_server": "kdc1"}},
            "libdefaults": {"rdns": True, "ticket_lifetime": "10h"},
            "domain_realm": {".example.com": "EXAMPLE.COM"},
        },
    )
    lines = [ln.strip() for ln in text.splitlines()]
    assert "default_realm = EXAMPLE.COM" in lines
    assert "rdns = true" in lines and "ticket_lifetime = 10h" in lines and "dns_lookup_kdc = false" in lines
    assert lines.count("kdc = kdc1:88") == 1 and "kdc = kdc2:88" in lines and "admin_server = kdc1" in lines
    assert ".example.com = EXAMPLE.COM" in lines


def test_sysctl_file(render):
    text = render("sysctl-kmirror.conf.j2", kmirror_rmem_max=4194304, kmirror_wmem_max=8388608)
    assert "net.core.rmem_max = 4194304\n" in text and "net.core.wmem_max = 8388608\n" in text


KMIRROR = Path(sys.executable).with_name("kmirror")


def check_config(consumer: str, producer: str) -> subprocess.CompletedProcess:
    """The real CLI, as the kmirror_config role runs it on the hosts."""
    return subprocess.run(
        [
            str(KMIRROR),
            "check-config",
            "--json",
            "--consumer.config",
            consumer,
            "--producer.config",
            producer,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("src_over", "tgt_over"),
    [
        ({}, {}),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512"}
            | {"sasl_username": "mirror-east", "sasl_password": NASTY},
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"}
            | {"sasl_username": "mirror-target", "sasl_password": "other-secret"},
        ),
        ({"consumer_properties": {"fetch.max.bytes": 1048576, "session.timeout.ms": 10000}}, {}),
    ],
    ids=["plaintext", "scram-and-plain", "operator-extended"],
)
def test_rendered_pair_is_safe_for_kmirror_check_config(
    render, config_filters, safety_table, tmp_path, src_over, tgt_over
):
    src, tgt = source(**src_over), target(**tgt_over)
    _, citem = render_side(render, config_filters, safety_table, tmp_path, src, tgt, "consumer")
    _, pitem = render_side(render, config_filters, safety_table, tmp_path, src, tgt, "producer")
    proc = check_config(citem["files"]["properties"], pitem["files"]["properties"])
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["verdict"] == "SAFE"
    assert NASTY not in proc.stdout and "other-secret" not in proc.stdout  # secrets masked in the report


def test_weakened_file_is_refused_by_kmirror_check_config(render, config_filters, safety_table, tmp_path):
    src = source()
    tgt = target(producer_properties={"acks": 1})
    _, citem = render_side(render, config_filters, safety_table, tmp_path, src, tgt, "consumer")
    _, pitem = render_side(render, config_filters, safety_table, tmp_path, src, tgt, "producer")
    proc = check_config(citem["files"]["properties"], pitem["files"]["properties"])
    assert proc.returncode != 0
    assert "acks" in proc.stdout + proc.stderr


def test_command_line_of_an_active_active_instance_builds_the_workers_plan(render, tmp_path):
    """provenance_header, topic_rename_format (with the target's name) and heartbeats_interval_ms reach the
    worker as its options, ${...} kept through systemd's quoting, and the worker's plan takes them."""
    src = source(
        provenance_header=True, topic_rename_format="${source}.${topic}", heartbeats_interval_ms=5000
    )
    argv = exec_start(render, src, kmirror_target_cluster={"name": "west"})
    from kmirror.cli import _options
    from kmirror.mirror.plan import build_plan
    from kmirror.options import build_parser

    parsed = build_parser().parse_args(argv[1:])
    assert (
        parsed.provenance_header,
        parsed.topic_rename_format,
        parsed.target_name,
        parsed.heartbeats_interval_ms,
    ) == (
        True,
        "${source}.${topic}",
        "west",
        5000,
    )
    for option in ("--consumer.config", "--producer.config"):
        path = tmp_path / argv[argv.index(option) + 1].lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("bootstrap.servers=127.0.0.1:1\ngroup.id=mirror\nacks=all\n")
        argv[argv.index(option) + 1] = str(path)
    plan = build_plan(_options(build_parser().parse_args(argv[1:])))
    (spec, *_) = plan.stream_specs()
    assert spec.provenance and spec.heartbeats
    assert spec.rename("events") == "east.events" and spec.rename.came_from_target("west.events")
    assert [b.topic for b in plan.heartbeats()] == ["kmirror.heartbeats.east"]
    # Without them: none of the options, copies byte-identical.
    plain = exec_start(render, source())
    assert not {"--provenance.header.enable", "--topic.rename.format", "--target.name"} & set(plain)


# A source key whose option the role passes through a variable of its own (kmirror_service's
# kmirror_service_metrics_ports: the key, else the port base + the source's position).
THROUGH_ROLE_VARIABLE = {"metrics_port": "kmirror_metrics_port"}


def _sample(entry, option):
    """A value of a cluster definition key other than the option's default, and the worker's value of it."""
    if entry["type"] == "bool":
        value = not option.default
    elif entry["type"] == "int":
        value = 9571 if entry["key"] == "metrics_port" else 7
    elif entry.get("choices"):
        value = next(c for c in entry["choices"] if c != option.default)
    else:
        value = {"name": "east-dc1", "topic_rename_format": "${source}.${topic}"}.get(entry["key"], "a.*,b")
    return value, [value] if option.action == "append" else value


def _instance(render, **over):
    src = {"name": "east", **{k: v for k, v in over.items() if k not in THROUGH_ROLE_VARIABLE}}
    roles = {THROUGH_ROLE_VARIABLE[k]: v for k, v in over.items() if k in THROUGH_ROLE_VARIABLE}
    return exec_start(render, src, kmirror_target_cluster={"name": "west"}, **roles)


def test_every_run_option_of_the_inventory_reaches_the_worker(render):
    """Each source key of cluster_definition.yml that is a `run` option (kmirror.mirror.runoptions: its
    `inventory`) renders to that option, and the worker's parser reads the key's value from it; a source
    key that changes the command line is one of them; every option the template writes is the worker's."""
    from kmirror.mirror.runoptions import RUN_OPTIONS
    from kmirror.options import build_parser

    generator = load_module(ROLES / "kmirror_config/files/cluster_definition.py", "kmirror_cluster_def")
    keys = {e["key"]: e for e in generator.side_keys(generator.load(), "source")}
    by_key = {o.inventory: o for o in RUN_OPTIONS if o.inventory}
    assert set(by_key) <= set(keys)
    plain = _instance(render)
    for key, entry in keys.items():
        option = by_key.get(key)
        if option is None:
            if entry["type"] in ("bool", "int", "str"):
                changed = _instance(render, **{key: True if entry["type"] == "bool" else 7})
                assert changed == plain, f"{key} changes the command line but is no run option's inventory"
            continue
        value, expected = _sample(entry, option)
        argv = _instance(render, **{key: value})
        assert option.flags[0] in argv, key
        rendered = str(value).lower() if entry["type"] == "bool" else str(value)
        assert argv[argv.index(option.flags[0]) + 1] == rendered, key
        assert getattr(build_parser().parse_args(argv[1:]), option.dest) == expected, key
    template = (ROOT / "templates/kmirror-instance.conf.j2").read_text()
    listed = re.findall(r"^  \('(--[\w.]+)',", template, re.MULTILINE)
    flags = {f for o in RUN_OPTIONS for f in o.flags}
    assert listed and set(listed) <= flags
    assert {o.flags[0] for o in by_key.values()} <= set(listed)
