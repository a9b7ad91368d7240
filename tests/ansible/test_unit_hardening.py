"""The audit's unit is hardened as the mirror's: the same sandboxing directives with the same values,
except the two the audit cannot take (it writes group-readable reports: UMask; its JVM compiles code:
no MemoryDenyWriteExecute), and `systemd-analyze security` rates both alike."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
from ansible_harness import ROLES, TEMPLATES, UNIT_DEFAULTS
from conftest import ESCAPE
from test_hostile_values import AUDIT_DEFAULTS

HARDENING = re.compile(
    r"(NoNewPrivileges|Protect\w+|Private\w+|Restrict\w+|LockPersonality|RemoveIPC|CapabilityBoundingSet|"
    r"AmbientCapabilities|SystemCall\w+|MemoryDenyWriteExecute|UMask|ProcSubset|DynamicUser|KeyringMode|"
    r"IPAddressDeny|DevicePolicy|DeviceAllow|NotifyAccess|SecureBits)"
)
# The audit's own: its reports are readable by the service group; the JVM's JIT needs writable, executable
# memory (under the kernel's memory-deny-write-execute `java -version` fails to start).
AUDIT_DIFFERS = {"UMask": ["0027"]}
AUDIT_CANNOT = {"MemoryDenyWriteExecute"}


@pytest.fixture(scope="module")
def units() -> dict[str, str]:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(TEMPLATES), str(ROLES / "kmirror_audit/templates")]),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(ESCAPE.FilterModule().filters())
    env.tests["match"] = lambda value, pattern: re.match(pattern, str(value)) is not None
    mirror = env.get_template("kmirror@.service.j2").render(**UNIT_DEFAULTS)
    audit = env.get_template("kmirror-audit.service.j2").render(
        item={"name": "east", "topics": ".*", "exclude": ""},
        **{**AUDIT_DEFAULTS, "kmirror_common_user": "kmirror", "kmirror_common_group": "kmirror"},
    )
    return {"mirror": mirror, "audit": audit}


def hardening(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.split("\n"):
        key, eq, value = line.partition("=")
        if eq and HARDENING.fullmatch(key):
            out.setdefault(key, []).append(value)
    return out


def test_the_audit_takes_every_hardening_directive_of_the_mirror(units):
    mirror, audit = hardening(units["mirror"]), hardening(units["audit"])
    assert len(mirror) >= 20
    assert not AUDIT_CANNOT & set(audit)
    expected = {k: v for k, v in mirror.items() if k not in AUDIT_CANNOT} | AUDIT_DIFFERS
    assert audit == expected


def exposure(text: str, name: str, tmp_path: Path) -> float:
    unit = tmp_path / name
    unit.write_text(text)
    proc = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", proc.stdout)
    assert m, proc.stdout + proc.stderr
    return float(m.group(1))


def test_systemd_rates_the_audit_as_the_mirror(units, tmp_path):
    # The template unit's ExecStart is in each instance's drop-in; the rating does not depend on it.
    mirror = exposure(
        units["mirror"].replace("[Service]\n", "[Service]\nExecStart=/bin/true\n", 1),
        "kmirror@.service",
        tmp_path,
    )
    audit = exposure(units["audit"], "kmirror-audit-east.service", tmp_path)
    assert mirror <= 2.0
    assert audit - mirror <= 0.5, (mirror, audit)


def test_the_jvm_does_not_start_without_writable_executable_memory():
    """Why the audit has no MemoryDenyWriteExecute: the kernel's PR_SET_MDWE (what the directive sets on
    kernels that have it) stops `java -version` before it prints its version."""
    code = (
        "import ctypes, os, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "if libc.prctl(65, 1, 0, 0, 0) != 0:  # PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN\n"
        "    sys.exit('PR_SET_MDWE: ' + os.strerror(ctypes.get_errno()))\n"
        "os.execvp(sys.argv[1], sys.argv[1:])\n"
    )
    from kmirror.testing import jars

    plain = subprocess.run([jars.java(), "-version"], capture_output=True, text=True, timeout=60)
    assert plain.returncode == 0, plain.stderr
    proc = subprocess.run(
        [sys.executable, "-c", code, jars.java(), "-version"], capture_output=True, text=True, timeout=60
    )
    assert "PR_SET_MDWE" not in proc.stderr, proc.stderr  # the kernel has it (Linux 6.3 or later)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Failed to mark memory page as executable" in out, out
