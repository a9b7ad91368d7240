"""Checks of the inventory values written as they are into systemd units, timers and tmpfiles.d lines.

Some values cannot be quoted where they go: ``User=``/``Group=``, a path in ``Environment=`` or
``ReadWritePaths=`` or a tmpfiles.d field, ``OnCalendar=``, a time span, the extra ``[Service]`` directives
of kmirror@.service. A line break in one of them would add a line of its own to the file, e.g.
``ExecStartPre=+/bin/sh -c ...``, which systemd runs as root. So each such value is checked before the
role writes anything: :func:`kmirror_unit_problems` returns one message per bad value, naming the
variable and the fix, and the roles' first tasks assert there is none (kmirror_common: the shared user,
group and configuration root; kmirror_service: the extra directives; kmirror_audit: its paths, calendar
and time spans). Values that can be quoted (command line arguments, Environment= values) are written by
the filters of kmirror_escape.py instead.

The extra directives of kmirror@.service are a list of ``Key=Value`` items whose keys are in
:data:`EXTRA_DIRECTIVES`: resource limits, scheduling and logging settings. Nothing that runs a command
(``ExecStart*``, ``ExecStop*``, ...), changes the user (``User``, ``Group``, ``DynamicUser``, ...), loosens
the sandbox, or opens a file as root (``StandardOutput=file:...``) can be set there: a change of those is a
change of the template (templates/kmirror@.service.j2).
"""

from __future__ import annotations

import re

# Any C0 control character, DEL, the C1 controls and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")

# kind -> (the rule, what it takes: the fix's wording)
RULES = {
    # Absolute, and nothing systemd or tmpfiles.d would read as a separator, a quote, an escape or a
    # specifier (white space, '"', "'", '\\', '%').
    "path": (
        re.compile(r"/[A-Za-z0-9_./@+:,=~-]*"),
        "an absolute path of letters, digits and . _ / @ + : , = ~ -",
    ),
    "user": (
        re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}"),
        "a user or group name of letters, digits, _ . - (e.g. kmirror)",
    ),
    "calendar": (
        re.compile(r"[A-Za-z0-9*,./:~_+-]+( [A-Za-z0-9*,./:~_+-]+)*"),
        "a systemd calendar expression (systemd.time(7), e.g. hourly or *-*-* 02:00:00)",
    ),
    "timespan": (
        re.compile(r"[A-Za-z0-9.]+( [A-Za-z0-9.]+)*"),
        "a systemd time span (e.g. 5min, 3h, 1h 30min)",
    ),
    "age": (re.compile(r"~?[A-Za-z0-9.]+|-"), "a tmpfiles.d age without spaces (e.g. 30d, 12h)"),
}

# The [Service] directives kmirror_service_extra_directives may set: resource control, scheduling, limits,
# timeouts of the start and of a run, logging (systemd.resource-control(5), systemd.exec(5)). None of them is
# set by templates/kmirror@.service.j2 itself.
EXTRA_DIRECTIVES = frozenset(
    {
        "AllowedCPUs",
        "AllowedMemoryNodes",
        "CPUAffinity",
        "CPUQuota",
        "CPUQuotaPeriodSec",
        "CPUSchedulingPolicy",
        "CPUSchedulingPriority",
        "CPUWeight",
        "IOReadBandwidthMax",
        "IOReadIOPSMax",
        "IOSchedulingClass",
        "IOSchedulingPriority",
        "IOWeight",
        "IOWriteBandwidthMax",
        "IOWriteIOPSMax",
        "LimitAS",
        "LimitCORE",
        "LimitDATA",
        "LimitFSIZE",
        "LimitNOFILE",
        "LimitNPROC",
        "LimitRSS",
        "LimitSTACK",
        "LogLevelMax",
        "LogRateLimitBurst",
        "LogRateLimitIntervalSec",
        "MemoryHigh",
        "MemoryLow",
        "MemoryMax",
        "MemoryMin",
        "MemorySwapMax",
        "Nice",
        "NUMAMask",
        "NUMAPolicy",
        "OOMPolicy",
        "OOMScoreAdjust",
        "RuntimeMaxSec",
        "StartupCPUWeight",
        "StartupIOWeight",
        "SyslogIdentifier",
        "TasksMax",
        "TimeoutStartSec",
    }
)
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*")
EXTRA_EXAMPLE = "[MemoryMax=2G, Nice=5]"


class UnitValueError(ValueError):
    """A kind of check this module does not know (a mistake in a role, not in the inventory)."""


def _line_break(name: str, value: object) -> str:
    return (
        f"{name} {value!r} holds a line break or another control character, which would add a line of its "
        "own to the unit, timer or tmpfiles.d file it is written into; remove it"
    )


def value_problem(name: str, kind: str, value: object) -> str | None:
    """The message for one value that is not of its kind (see :data:`RULES`), or None."""
    if kind == "directives":
        problems = directive_problems(name, value)
        return "; ".join(problems) if problems else None
    if kind not in RULES:
        raise UnitValueError(f"{name}: unknown kind {kind!r} (one of {', '.join(sorted(RULES))}, directives)")
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        return f"{name} is {value!r}: give {RULES[kind][1]}"
    text = str(value)
    if _CONTROL.search(text):
        return _line_break(name, text)
    pattern, what = RULES[kind]
    if not pattern.fullmatch(text):
        return (
            f"{name} {text!r} cannot be written into a systemd unit or tmpfiles.d line as it is: give {what}"
        )
    return None


def directive_problems(name: str, value: object) -> list[str]:
    """The messages for the extra [Service] directives: a list of Key=Value, each key in the allow-list."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [
            f"{name} is a mapping ({dict(value)!r}), a form no longer read: give a list of Key=Value items, "
            f"e.g. {EXTRA_EXAMPLE}"
        ]
    if not isinstance(value, list):
        return [f"{name} is {value!r}: give a list of Key=Value items, e.g. {EXTRA_EXAMPLE}"]
    out: list[str] = []
    for i, item in enumerate(value):
        where = f"{name}[{i}]"
        if not isinstance(item, str) or "=" not in item:
            out.append(f"{where} {item!r} is not Key=Value: write it as e.g. MemoryMax=2G")
            continue
        if _CONTROL.search(item):
            out.append(_line_break(where, item))
            continue
        key = item.split("=", 1)[0]
        if not _KEY.fullmatch(key) or key not in EXTRA_DIRECTIVES:
            out.append(
                f"{where} {item!r}: {key!r} is not one of the directives this list may set (resource limits, "
                "scheduling, limits, timeouts and logging: EXTRA_DIRECTIVES in roles/kmirror_common/"
                "filter_plugins/kmirror_unit_values.py); commands, the user and the sandbox are the "
                "template's (templates/kmirror@.service.j2)"
            )
    return out


def kmirror_unit_problems(values: dict) -> list[str]:
    """One message per bad value of ``values`` (variable name -> [kind, value]), in the order given."""
    out = []
    for name, (kind, value) in values.items():
        problem = value_problem(str(name), str(kind), value)
        if problem:
            out.append(problem)
    return out


class FilterModule:
    def filters(self) -> dict:
        return {"kmirror_unit_problems": kmirror_unit_problems}
