"""Values written as they are into systemd units, timers and tmpfiles.d lines (issue 34, item 8).

The shared user, group and configuration root, kmirror_service's extra directives and the audit's paths,
calendar and time spans cannot be quoted where they go, so a line break in one would add a line of its own
(``ExecStartPre=+...``, run as root). The filter kmirror_unit_problems (roles/kmirror_common/filter_plugins/
kmirror_unit_values.py) refuses them; the roles assert there is no problem before writing anything.
Here: the filter on its own, the roles run for real by ansible-playbook on this machine (unit directory in
pytest's tmp dir; no systemd runs here, and the refused runs stop before any systemd call), and the units
rendered from good values read by `systemd-analyze verify`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_harness import ROLES, UNIT_DEFAULTS, first_failure, load_module, run_role
from test_hostile_values import verify

UNIT_VALUES = load_module(
    ROLES / "kmirror_common/filter_plugins/kmirror_unit_values.py", "kmirror_unit_values"
)
problems = UNIT_VALUES.kmirror_unit_problems

ROOT_SHELL = "ExecStartPre=+/bin/sh -c 'id > /tmp/pwned'"
LINE_BREAKS = ["\n", "\r\n", "\r", "\x85", "\u2028", "\x0b", "\x1b", "\x00"]


@pytest.mark.parametrize(
    ("kind", "good"),
    [
        ("path", "/etc/kmirror"),
        ("user", "kmirror"),
        ("calendar", "Mon..Fri *-*-* 02:00:00 Europe/Berlin"),
        ("timespan", "1h 30min"),
        ("age", "30d"),
    ],
)
@pytest.mark.parametrize("brk", LINE_BREAKS, ids=[repr(b) for b in LINE_BREAKS])
def test_a_line_break_is_refused_naming_the_variable(kind, good, brk):
    assert problems({"kmirror_x": [kind, good]}) == []
    (message,) = problems({"kmirror_x": [kind, good + brk + ROOT_SHELL]})
    assert message.startswith("kmirror_x ") and "holds a line break or another control character" in message
    assert message.endswith("; remove it")


@pytest.mark.parametrize(
    ("kind", "bad"),
    [
        ("path", "relative/dir"),
        ("path", "/var/lib/with space"),  # ReadWritePaths= and tmpfiles.d split on it
        ("path", "/var/%h"),  # a specifier
        ("path", '/var/"q"'),
        ("user", "kmirror x"),
        ("user", "0day"),
        ("calendar", "hourly;reboot"),
        ("calendar", "%H"),
        ("timespan", "5min%"),
        ("age", "30 d"),  # tmpfiles.d would read a seventh field
        ("user", ["kmirror"]),
    ],
)
def test_what_systemd_or_tmpfiles_would_read_otherwise_is_refused(kind, bad):
    (message,) = problems({"kmirror_x": [kind, bad]})
    assert message.startswith(f"kmirror_x {bad!r}") or message.startswith("kmirror_x is")
    assert "give " in message


def test_extra_directives_are_key_value_items_from_the_allow_list():
    good = ["MemoryMax=2G", "Nice=5", "CPUQuota=150%", "LimitNOFILE=65536", "IOWeight=50", "MemoryHigh="]
    assert problems({"d": ["directives", good]}) == []
    assert problems({"d": ["directives", []]}) == []
    for bad in (
        "ExecStartPre=+/bin/sh -c id",
        "ExecStart=/bin/sh",
        "ExecStopPost=/bin/sh",
        "User=root",
        "Group=root",
        "DynamicUser=no",
        "NoNewPrivileges=no",
        "ReadWritePaths=/",
        "CapabilityBoundingSet=~",
        "StandardOutput=file:/etc/shadow",
        "Environment=LD_PRELOAD=/tmp/x.so",
        "memorymax=2G",  # systemd keys are case-sensitive: it would ignore this one
        " MemoryMax=2G",
    ):
        (message,) = problems({"kmirror_service_extra_directives": ["directives", ["Nice=5", bad]]})
        assert message.startswith(f"kmirror_service_extra_directives[1] {bad!r}: "), message
        assert "is not one of the directives this list may set" in message
    (message,) = problems(
        {"kmirror_service_extra_directives": ["directives", ["MemoryMax=2G\n" + ROOT_SHELL]]}
    )
    assert message.startswith("kmirror_service_extra_directives[0] ") and "line break" in message
    (message,) = problems({"kmirror_service_extra_directives": ["directives", ["MemoryMax"]]})
    assert "is not Key=Value" in message


def test_the_old_mapping_form_is_refused_with_the_fix():
    (message,) = problems({"kmirror_service_extra_directives": ["directives", {"MemoryMax": "2G"}]})
    assert message == (
        "kmirror_service_extra_directives is a mapping ({'MemoryMax': '2G'}), a form no longer read: give a "
        "list of Key=Value items, e.g. [MemoryMax=2G, Nice=5]"
    )


def test_the_allow_list_sets_nothing_the_template_sets(render):
    unit = render("kmirror@.service.j2", **UNIT_DEFAULTS)
    own = {ln.split("=", 1)[0] for ln in unit.splitlines() if ln[:1].isalpha() and "=" in ln}
    assert own & UNIT_VALUES.EXTRA_DIRECTIVES == set()
    assert not any(
        k.startswith(("Exec", "User", "Group", "Protect", "Private")) for k in UNIT_VALUES.EXTRA_DIRECTIVES
    )


def test_good_extra_directives_render_a_unit_systemd_accepts(render, tmp_path):
    directives = ["MemoryMax=2G", "Nice=5", "CPUQuota=150%", "LimitNOFILE=65536", "TasksMax=512"]
    assert problems({"kmirror_service_extra_directives": ["directives", directives]}) == []
    unit = render(
        "kmirror@.service.j2",
        **{
            **UNIT_DEFAULTS,
            "kmirror_user": "root",
            "kmirror_group": "root",
            "kmirror_extra_directives": directives,
        },
    )
    assert [ln for ln in unit.splitlines() if ln in directives] == directives
    dropin = "[Service]\nExecStart=\nExecStart=/bin/true\n"
    verify(
        {"kmirror@.service": unit, "kmirror@east.service.d/10-kmirror.conf": dropin},
        tmp_path,
        "kmirror@east.service",
    )


# ---------------------------------------------------------------------------------- the roles, for real

SOURCES = [{"name": "east", "bootstrap_servers": "e1:9092", "group_id": "g", "whitelist": ".*"}]
TARGET = {"name": "target", "bootstrap_servers": "t1:9092"}


def service_vars(tmp_path: Path, **over: object) -> dict:
    (tmp_path / "units").mkdir(exist_ok=True)  # as /etc/systemd/system is there on a host
    return {
        "kmirror_target_cluster": TARGET,
        "kmirror_source_clusters": SOURCES,
        "kmirror_service_unit_dir": str(tmp_path / "units"),
        **over,
    }


BREAK = (
    " holds a line break or another control character, which would add a line of its own to the unit, "
    "timer or tmpfiles.d file it is written into; remove it"
)
NOT_ALLOWED = (
    ": 'ExecStartPre' is not one of the directives this list may set (resource limits, scheduling, limits, "
    "timeouts and logging: EXTRA_DIRECTIVES in roles/kmirror_common/filter_plugins/kmirror_unit_values.py); "
    "commands, the user and the sandbox are the template's (templates/kmirror@.service.j2)"
)
INJECTED_DIR = "/etc/kmirror\n" + ROOT_SHELL
INJECTED_USER = "kmirror\n" + ROOT_SHELL
INJECTED_DIRECTIVE = "MemoryMax=2G\n" + ROOT_SHELL
OLD_FORM = {"MemoryMax": "2G\n" + ROOT_SHELL}  # the review's case: the mapping the role used to take


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("kmirror_common_config_dir", INJECTED_DIR, f"kmirror_common_config_dir {INJECTED_DIR!r}{BREAK}"),
        ("kmirror_common_user", INJECTED_USER, f"kmirror_common_user {INJECTED_USER!r}{BREAK}"),
        (
            "kmirror_service_extra_directives",
            [INJECTED_DIRECTIVE],
            f"kmirror_service_extra_directives[0] {INJECTED_DIRECTIVE!r}{BREAK}",
        ),
        (
            "kmirror_service_extra_directives",
            [ROOT_SHELL],
            f"kmirror_service_extra_directives[0] {ROOT_SHELL!r}{NOT_ALLOWED}",
        ),
        (
            "kmirror_service_extra_directives",
            OLD_FORM,
            f"kmirror_service_extra_directives is a mapping ({OLD_FORM!r}), a form no longer read: give a "
            "list of Key=Value items, e.g. [MemoryMax=2G, Nice=5]",
        ),
    ],
    ids=["config-dir", "user", "directive-line-break", "directive-exec", "old-mapping-form"],
)
def test_the_service_role_refuses_before_writing_anything(tmp_path, variable, value, message):
    proc = run_role(tmp_path, "kmirror_service", service_vars(tmp_path, **{variable: value}))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert first_failure(out) == ("kmirror_common : Check the values written into unit files", message), out
    assert list((tmp_path / "units").iterdir()) == []  # nothing written


def test_the_service_role_takes_good_extra_directives(tmp_path):
    # Check mode: the role runs to its end here (no systemd call for a new instance), writing nothing.
    directives = ["MemoryMax=2G", "Nice=5"]
    proc = run_role(
        tmp_path,
        "kmirror_service",
        service_vars(tmp_path, kmirror_service_extra_directives=directives),
        "--check",
        "--diff",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "+MemoryMax=2G\n+Nice=5\n" in out  # the unit's diff


AUDIT_GOOD = {
    "kmirror_audit_on_calendar": "*-*-* 02:00:00",
    "kmirror_audit_randomized_delay": "5min",
    "kmirror_audit_timeout": "3h",
    "kmirror_audit_keep": "30d",
}


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("kmirror_audit_report_dir", "/var/lib/kmirror/audit\n" + ROOT_SHELL),
        ("kmirror_audit_report_dir", "/var/lib/kmirror/audit /"),  # ReadWritePaths=... / (the whole tree)
        ("kmirror_audit_on_calendar", "hourly\n" + ROOT_SHELL),
        ("kmirror_audit_keep", "30d\nr /etc/shadow"),  # a tmpfiles.d line of its own
    ],
)
def test_the_audit_role_refuses_before_writing_anything(tmp_path, variable, value):
    report_dir = tmp_path / "reports"
    variables = {
        "kmirror_source_clusters": SOURCES,
        "kmirror_audit_install_java": False,
        # Were the check missing, the play would stop at the Java check: nothing under /etc is written here.
        "kmirror_audit_java_home": str(tmp_path / "no-jvm"),
        "kmirror_audit_report_dir": str(report_dir),
        **AUDIT_GOOD,
        variable: value,
    }
    proc = run_role(tmp_path, "kmirror_audit", variables)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    task, message = first_failure(out)
    assert (
        task == "kmirror_audit : Check the values written into the audit's units, timers and tmpfiles.d line"
    )
    assert message.startswith(f"{variable} {value!r} "), message
    assert not report_dir.exists()


def test_good_audit_values_render_units_systemd_accepts(tmp_path):
    import jinja2
    from conftest import ESCAPE
    from test_hostile_values import AUDIT_DEFAULTS

    values = {**AUDIT_GOOD, "kmirror_audit_report_dir": "/var/lib/kmirror/audit"}
    assert (
        problems(
            {
                "kmirror_audit_report_dir": ["path", values["kmirror_audit_report_dir"]],
                "kmirror_audit_on_calendar": ["calendar", values["kmirror_audit_on_calendar"]],
                "kmirror_audit_randomized_delay": ["timespan", values["kmirror_audit_randomized_delay"]],
                "kmirror_audit_timeout": ["timespan", values["kmirror_audit_timeout"]],
                "kmirror_audit_keep": ["age", values["kmirror_audit_keep"]],
            }
        )
        == []
    )
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(ROLES / "kmirror_audit/templates")),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(ESCAPE.FilterModule().filters())
    env.tests["match"] = lambda value, pattern: value.startswith(pattern)
    variables = {**AUDIT_DEFAULTS, **values, "item": {"name": "east", "topics": ".*", "exclude": ""}}
    service = env.get_template("kmirror-audit.service.j2").render(**variables)
    timer = env.get_template("kmirror-audit.timer.j2").render(**variables)
    tmpfiles = env.get_template("kmirror-audit.tmpfiles.j2").render(**variables)
    verify(
        {"kmirror-audit-east.service": service, "kmirror-audit-east.timer": timer},
        tmp_path,
        "kmirror-audit-east.timer",
    )
    (line,) = [ln for ln in tmpfiles.splitlines() if ln and not ln.startswith("#")]
    assert line.split() == ["d", "/var/lib/kmirror/audit", "0750", "root", "root", "30d"]
