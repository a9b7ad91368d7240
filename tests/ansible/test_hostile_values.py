"""Inventory values that try to add lines: every template writes them in its format's own quoting, and
reading the file back (with the reader of that format) gives exactly the value and no other setting.

Properties files are read back by the worker's own parser (kmirror.config.properties, java.util.Properties'
rules), JAAS files by kmirror.config.jaas, systemd units by a reader of systemd's rules (specifiers, quotes,
C escapes, variable expansion) and by `systemd-analyze verify`, krb5.conf by a reader of MIT's profile
syntax. What no format can carry (a NUL; a krb5.conf name with a line break) is refused with its name.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
from ansible_harness import ROLES, UNIT_DEFAULTS
from conftest import ESCAPE
from test_templates import render_side, source, target

from kmirror.config.jaas import load_jaas_file
from kmirror.config.properties import parse_properties

HOSTILE = [
    "a\nb",
    "line\r\nbreak",
    "x=y",
    "k:v",
    "#not a comment",
    "!bang",
    "back\\slash\\",
    'q"uote',
    "it's",
    "%i %n %%",
    "$HOME ${HOME} $$",
    "ünï €",
    "para\u2028sep\x85nel",
    "tab\there",
    " lead and trail ",
    ";",
    "ctl\x01\x1b\x7f",
    "{brace}",
    "[section]",
    "ssl.endpoint.identification.algorithm=none",
]
IDS = [repr(v)[1:-1][:24] for v in HOSTILE]
INJECTED = "\nssl.endpoint.identification.algorithm=none\nenable.auto.commit=true\n"


# ------------------------------------------------------------------------------------- cluster definitions


@pytest.mark.parametrize(
    ("where", "change", "message"),
    [
        ("target", {"name": "target" + INJECTED}, "kmirror_target_cluster: name"),
        ("target", {"name": "target\n"}, "kmirror_target_cluster: name"),
        ("source", {"name": "east\n"}, "name 'east\\n' is not usable"),
        ("source", {"group_id": "g\0"}, "group_id holds a NUL character"),
        (
            "source",
            {"consumer_properties": {"client.rack": "r\0"}},
            "consumer_properties.client.rack holds a NUL",
        ),
        ("target", {"producer_properties": {"k\0": "v"}}, "holds a NUL character"),
        ("source", {"acl_topic_patterns": [{"name": "a\0"}]}, "acl_topic_patterns[0].name holds a NUL"),
    ],
)
def test_names_are_matched_whole_and_nul_is_refused(config_filters, where, change, message):
    src = source(**change) if where == "source" else source()
    tgt = target(**change) if where == "target" else target()
    with pytest.raises(config_filters.ClusterDefinitionError, match=re.escape(message)):
        config_filters.check_definitions([src], tgt)


def test_every_pattern_of_the_definition_is_a_whole_match(config_filters):
    for side in ("target", "source"):
        patterns = [e for e in config_filters.side_keys(side) if "pattern" in e]
        assert patterns, side
        for e in patterns:
            assert not e["pattern"].startswith("^") and not e["pattern"].endswith("$"), e  # fullmatch does it


# ----------------------------------------------------------------------------------------- properties


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
def test_properties_round_trip(render, config_filters, safety_table, tmp_path, value):
    props = {"client.rack": value, f"x.{value}": "v", "x.last": value}
    src = source(consumer_properties=props, group_id="g" + value)
    text, item = render_side(render, config_filters, safety_table, tmp_path, src, target(), "consumer")
    read = parse_properties(text)
    for k, v in props.items():
        assert read[k] == v
    assert read["group.id"] == "g" + value
    cluster = config_filters.kmirror_cluster_for(item, [src], target())
    expected = sys.modules["kmirror_properties_filters"].client_properties(
        cluster,
        "consumer",
        item["files"],
        "kmirror-east-w1-consumer",
        {"socket.receive.buffer.bytes": 4194304},
    )["properties"]
    assert read == expected  # nothing more, nothing less


def test_a_hostile_name_in_the_comments_adds_no_setting(render, config_filters, safety_table, tmp_path):
    """The template on its own (a name the checks would refuse): its comment lines cannot add a setting."""
    hostile = "t" + INJECTED
    props = sys.modules["kmirror_properties_filters"].kmirror_client_properties(
        target(name=hostile), "producer", {"jaas": "/j"}, "cid", {}
    )
    text = render(
        "client.properties.j2",
        kmirror_side="producer",
        kmirror_source="east" + INJECTED,
        kmirror_cluster=target(name=hostile),
        kmirror_properties=props,
    )
    assert parse_properties(text) == props["properties"]


# ----------------------------------------------------------------------------------------------- JAAS


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
def test_jaas_round_trip(render, config_filters, safety_table, tmp_path, value):
    tgt = target(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="u" + value,
        sasl_password=value + "pw",
    )
    if "${" in value:  # Java would expand it as a system property: refused, with the key
        with pytest.raises(config_filters.ClusterDefinitionError, match="sasl_username holds '\\$\\{'"):
            config_filters.check_definitions([source()], tgt)
        return
    render_side(render, config_filters, safety_table, tmp_path, source(), tgt, "producer")
    modules = load_jaas_file(tmp_path / "east/producer_jaas.conf")["KafkaClient"]
    assert len(modules) == 1
    assert modules[0].options == {"username": "u" + value, "password": value + "pw"}


# ---------------------------------------------------------------------------------------------- systemd

_C = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "s": " ",
}


def _unescape(s: str, i: int) -> tuple[str, int]:
    """systemd's cunescape of the escape at s[i] (after the backslash): (character, next index)."""
    c = s[i]
    if c in _C:
        return _C[c], i + 1
    for prefix, digits, base in (("x", 2, 16), ("u", 4, 16), ("U", 8, 16)):
        if c == prefix:
            ch = chr(int(s[i + 1 : i + 1 + digits], base))
            assert ch != "\0"
            return ch, i + 1 + digits
    if c in "01234567":
        return chr(int(s[i : i + 3], 8)), i + 3
    raise AssertionError(f"systemd refuses the escape \\{c} in {s!r}")


def systemd_words(line: str) -> list[str]:
    """Split a value as systemd does (extract_first_word with unquoting and C unescaping)."""
    words: list[str] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in " \t\n":
            i += 1
        if i >= n:
            return words
        cur: list[str] = []
        quote = None
        while i < n:
            c = line[i]
            if quote is None and c in " \t\n":
                break
            if c == "\\":
                ch, i = _unescape(line, i + 1)
                cur.append(ch)
                continue
            if quote is None and c in "\"'":
                quote = c
            elif quote == c:
                quote = None
            else:
                cur.append(c)
            i += 1
        assert quote is None, f"unbalanced quoting in {line!r}"
        words.append("".join(cur))


def specifiers(s: str) -> str:
    assert "%" not in s.replace("%%", ""), f"an unescaped specifier in {s!r}"
    return s.replace("%%", "%")


def variables(word: str) -> str:
    assert "$" not in word.replace("$$", ""), f"a variable systemd would expand in {word!r}"
    return word.replace("$$", "$")


def exec_start_argv(text: str) -> list[str]:
    """The argv of the last ExecStart= of a unit file (specifiers, words, then variables: systemd's order)."""
    lines = [ln for ln in text.split("\n") if ln.startswith("ExecStart=")]
    return [variables(w) for w in systemd_words(specifiers(lines[-1][len("ExecStart=") :]))]


def environment(text: str) -> dict[str, str]:
    """Every Environment= assignment of a unit file (words unquoted and unescaped, then specifiers)."""
    out = {}
    for ln in text.split("\n"):
        if ln.startswith("Environment="):
            for word in systemd_words(ln[len("Environment=") :]):
                k, _, v = specifiers(word).partition("=")
                out[k] = v
    return out


def directives(text: str) -> list[str]:
    return [ln.split("=", 1)[0] for ln in text.split("\n") if ln and ln[0].isalpha()]


def verify(units: dict[str, str], tmp_path: Path, unit: str) -> None:
    """systemd-analyze verify on the unit: nothing said about any of these files (a line systemd could not
    read is reported and ignored, which would change the unit)."""
    d = tmp_path / "units"
    for name, text in units.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text)
    proc = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(d / unit)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"SYSTEMD_UNIT_PATH": f"{d}:", "PATH": "/usr/bin:/bin"},
    )
    said = [ln for ln in (proc.stdout + proc.stderr).splitlines() if str(d) in ln and "User" not in ln]
    assert proc.returncode == 0 and not said, proc.stdout + proc.stderr


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
def test_instance_command_line_round_trips(render, tmp_path, value):
    src = source(whitelist=value, blacklist="b" + value, groups=value + "g")
    kmirror_bin = str(Path(sys.executable).with_name("kmirror"))
    dropin = render(
        "kmirror-instance.conf.j2",
        kmirror_source=src,
        kmirror_bin=kmirror_bin,
        kmirror_conf_dir="/etc/kmirror",
        kmirror_log_level="INFO",
    )
    argv = exec_start_argv(dropin)
    assert argv[0] == kmirror_bin and argv[1] == "run"
    options = dict(zip(argv[2::2], argv[3::2], strict=True))
    assert (options["--whitelist"], options["--blacklist"], options["--groups"]) == (
        value,
        "b" + value,
        value + "g",
    )
    assert directives(dropin) == ["Description", "ExecStart", "ExecStart"]
    unit = render("kmirror@.service.j2", **{**UNIT_DEFAULTS, "kmirror_user": "root", "kmirror_group": "root"})
    verify(
        {"kmirror@.service": unit, "kmirror@east.service.d/10-kmirror.conf": dropin},
        tmp_path,
        "kmirror@east.service",
    )


AUDIT_DEFAULTS = {
    "kmirror_common_config_dir": "/etc/kmirror",
    "kmirror_common_user": "root",
    "kmirror_common_group": "root",
    "kmirror_common_venv": str(Path(sys.executable).parents[1]),
    "kmirror_audit_master": "local[*]",
    "kmirror_audit_java_home": "",
    "kmirror_audit_from": "-2h",
    "kmirror_audit_to": "",
    "kmirror_audit_bucket": "10m",
    "kmirror_audit_grace": "5m",
    "kmirror_audit_spark_conf": {},
    "kmirror_audit_executor_python": "",
    "kmirror_audit_driver_host": "",
    "kmirror_audit_timeout": "3h",
    "kmirror_audit_nice": 10,
    "kmirror_audit_report_dir": "/var/lib/kmirror/audit",
}


@pytest.fixture(scope="module")
def render_audit():
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(ROLES / "kmirror_audit/templates")),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(ESCAPE.FilterModule().filters())
    env.tests["match"] = lambda value, pattern: re.match(pattern, str(value)) is not None  # Ansible's test

    def _render(**over: object) -> str:
        return env.get_template("kmirror-audit.service.j2").render(**{**AUDIT_DEFAULTS, **over})

    return _render


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
def test_audit_unit_round_trips(render_audit, tmp_path, value):
    text = render_audit(
        item={"name": "east", "topics": value, "exclude": "x" + value},
        kmirror_audit_java_home="/usr/lib/jvm/" + value,
        kmirror_audit_spark_conf={"spark.k": value},
    )
    argv = exec_start_argv(text)
    assert argv[argv.index("--topics") + 1] == value
    assert argv[argv.index("--exclude") + 1] == "x" + value
    assert argv[argv.index("--conf") + 1] == "spark.k=" + value
    env = environment(text)
    assert env["JAVA_HOME"] == "/usr/lib/jvm/" + value and env["KRB5_CONFIG"] == "/etc/kmirror/krb5.conf"
    assert len(env) == 6
    verify({"kmirror-audit-east.service": text}, tmp_path, "kmirror-audit-east.service")


def test_a_nul_is_refused_by_the_systemd_filters():
    with pytest.raises(Exception, match="NUL"):
        ESCAPE.kmirror_systemd_arg("a\0b", "--whitelist")
    with pytest.raises(Exception, match="NUL"):
        ESCAPE.kmirror_systemd_env("a\0b", "JAVA_HOME")


def test_systemd_analyze_is_here():
    # verify() above relies on it (systemd on Debian 12); a missing one must fail, not pass unseen.
    assert shutil.which("systemd-analyze")


# ------------------------------------------------------------------------------------------- krb5.conf


def krb5_value(raw: str) -> str:
    """A relation value as MIT's profile parser reads it (quoted: \\n \\t \\b, other escapes literal)."""
    raw = raw.strip()
    if not raw.startswith('"'):
        return raw
    out, i = [], 1
    while i < len(raw) and raw[i] != '"':
        if raw[i] == "\\" and i + 1 < len(raw):
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(raw[i + 1], raw[i + 1]))
            i += 2
            continue
        out.append(raw[i])
        i += 1
    assert raw[i:] == '"', f"text after the closing quote: {raw!r}"
    return "".join(out)


def read_krb5(text: str) -> dict[str, dict]:
    """Sections -> relations (a subsection is a dict; repeated tags are lists)."""
    top: dict[str, dict] = {}
    stack: list[dict] = []
    for line in text.split("\n"):
        s = line.strip()
        if not s or s[0] in "#;":
            continue
        if s.startswith("["):
            assert s.endswith("]"), line
            stack = [top.setdefault(s[1:-1], {})]
            continue
        if s == "}":
            stack.pop()
            continue
        tag, eq, value = s.partition("=")
        assert eq and stack, line
        tag = tag.strip()
        if value.strip() == "{":
            sub: dict = {}
            stack[-1][tag] = sub
            stack.append(sub)
        else:
            stack[-1].setdefault(tag, []).append(krb5_value(value))
    assert len(stack) <= 1, "unclosed subsection"
    return top


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
def test_krb5_round_trips(render, value):
    krb5 = {
        "default_realm": "EXAMPLE.COM",
        "realms": {"EXAMPLE.COM": {"kdc": ["kdc1:88", value], "admin_server": value}},
        "libdefaults": {"ticket_lifetime": value, "rdns": True},
        "domain_realm": {".example.com": value},
    }
    got = read_krb5(render("krb5.conf.j2", kmirror_krb5=krb5))
    assert got["realms"] == {"EXAMPLE.COM": {"kdc": ["kdc1:88", value], "admin_server": [value]}}
    assert got["libdefaults"] == {
        "default_realm": ["EXAMPLE.COM"],
        "ticket_lifetime": [value],
        "rdns": ["true"],
        "dns_lookup_kdc": ["false"],
        "dns_lookup_realm": ["false"],
        "udp_preference_limit": ["1"],
    }
    assert got["domain_realm"] == {".example.com": [value]}
    assert set(got) == {"libdefaults", "realms", "domain_realm"}


@pytest.mark.parametrize(
    "krb5",
    [
        {"default_realm": "R", "realms": {"R\n[libdefaults]\nrdns": {"kdc": "k"}}},
        {"default_realm": "R", "realms": {"R": {"kdc": "k"}}, "libdefaults": {"a b": "x"}},
        {"default_realm": "R", "realms": {"R": {"kdc": "k"}}, "domain_realm": {".e.com=X\n": "R"}},
        {"default_realm": "R", "realms": {"R*": {"kdc": "k"}}},
        {"default_realm": "R\0", "realms": {"R": {"kdc": "k"}}},
    ],
    ids=["realm", "libdefaults-key", "domain", "final-marker", "nul"],
)
def test_krb5_names_it_cannot_hold_are_refused(render, krb5):
    with pytest.raises(Exception, match=r"kmirror_config_krb5|NUL"):
        render("krb5.conf.j2", kmirror_krb5=krb5)
