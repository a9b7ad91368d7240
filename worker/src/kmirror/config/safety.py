"""The data-loss-safe client settings: the one place that says what a mirror must run with.

Three kinds of setting live here:

* ``REQUIRED``: the mirror refuses to run with any other value (unless the operator passes
  ``--allow.unsafe``), because another value can lose or reorder records.
* ``DEFAULTS``: what kmirror uses when the operator's file says nothing; the file may change them.
* ``ENGINE_OWNED``: settings the engine itself depends on; a file that sets them is refused
  whatever the flag, because the engine would not work as documented.

The worker enforces these and ``kmirror check-config`` reports against them. ``kmirror defaults``
prints them (JSON; with ``--markdown`` the table docs/safe-defaults.md is generated from). Role
kmirror_config's filter ``kmirror_client_properties`` imports this module on the controller, so the
client files it renders take their values from ``completed``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

Role = Literal["consumer", "producer"]
ROLES: tuple[Role, ...] = ("consumer", "producer")


@dataclass(frozen=True)
class Requirement:
    key: str
    value: str  # what kmirror sets when the file says nothing
    why: str
    accepts: Callable[[str], bool]
    allowed: str = ""  # what the file may say, when more than `value`


def _is(*values: str) -> Callable[[str], bool]:
    allowed = {v.lower() for v in values}
    return lambda v: v.strip().lower() in allowed


def _int_between(low: int, high: int) -> Callable[[str], bool]:
    def check(v: str) -> bool:
        try:
            return low <= int(v.strip()) <= high
        except ValueError:
            return False

    return check


REQUIRED: dict[Role, tuple[Requirement, ...]] = {
    "consumer": (
        Requirement(
            "enable.auto.commit",
            "false",
            "offsets are committed only for records the target acknowledged; auto-commit would commit "
            "offsets of records it has not",
            _is("false"),
        ),
    ),
    "producer": (
        Requirement(
            "acks",
            "all",
            "a record is acknowledged only once every in-sync replica of the target has it",
            _is("all", "-1"),
            "all or -1",
        ),
        Requirement(
            "enable.idempotence",
            "true",
            "retries neither duplicate nor reorder records within a partition",
            _is("true"),
        ),
        Requirement(
            "max.in.flight.requests.per.connection",
            "5",
            "the idempotent producer keeps order only with at most 5 requests in flight",
            _int_between(1, 5),
            "1 to 5",
        ),
        Requirement(
            "retries",
            "2147483647",
            "transient target errors are retried, never dropped",
            _int_between(1, 2147483647),
            "at least 1",
        ),
        Requirement(
            "message.timeout.ms",
            "0",
            "0 means no limit: a record waits for the target as long as an outage lasts (reading pauses "
            "when the queue is full) instead of failing after the timeout and stopping the mirror",
            _is("0"),
        ),
    ),
}

DEFAULTS: dict[Role, dict[str, str]] = {
    # A new mirror group copies what already exists: a mirror is a replica. Incremental rebalances: a
    # member that joins or leaves moves only the partitions that must move, the others keep mirroring.
    "consumer": {"auto.offset.reset": "earliest", "partition.assignment.strategy": "cooperative-sticky"},
    "producer": {"linger.ms": "5"},
}

ENGINE_OWNED: dict[Role, dict[str, str]] = {
    # The engine commits explicit positions after the target acknowledged every record before them.
    "consumer": {"enable.auto.offset.store": "false", "enable.partition.eof": "false"},
    # Java's partitioner for keyed records (murmur2), so keyed records land where Java clients put them;
    # success reports are skipped (only failures are reported) to keep the per-record path cheap.
    "producer": {"partitioner": "murmur2_random", "delivery.report.only.error": "true"},
}

IDEMPOTENCE = "enable.idempotence"
# The settings librdkafka's idempotent producer cannot run with (it refuses to start).
_AGAINST_IDEMPOTENCE = {"acks", "retries", "max.in.flight.requests.per.connection"}

# The mirror's own options that decide whether records can be lost.
ABORT_ON_SEND_FAILURE_WHY = (
    "without it a record that cannot be delivered is logged and skipped, and the mirror commits past it"
)


@dataclass(frozen=True)
class Violation:
    origin: str
    key: str
    value: str
    required: str
    why: str

    def render(self) -> str:
        return (
            f"{self.origin}: {self.key}={self.value} is unsafe; set {self.key}={self.required} "
            f"({self.why}) or pass --allow.unsafe to run anyway"
        )


def violations(settings: Mapping[str, str], role: Role, origin: str) -> list[Violation]:
    """Settings of an effective client config that break a :data:`REQUIRED` rule."""
    found = []
    for req in REQUIRED[role]:
        value = settings.get(req.key)
        if value is not None and not req.accepts(value):
            found.append(Violation(origin, req.key, value, req.value, req.why))
    return found


def completed(settings: Mapping[str, str], role: Role) -> dict[str, str]:
    """The precedence of a client file: kmirror's defaults under the file's own settings, each required
    value where the file leaves it unset (an operator's value stays, to be judged by :func:`violations`).
    :func:`apply` builds on it; the Ansible roles write their properties files with it."""
    out = {**DEFAULTS[role], **settings}
    for req in REQUIRED[role]:
        out.setdefault(req.key, req.value)
    return out


def apply(settings: Mapping[str, str], role: Role) -> dict[str, str]:
    """The effective settings: :func:`completed`, then engine-owned values over everything. Unsafe values
    the operator set stay: the caller refuses them unless ``--allow.unsafe`` was given (see
    :func:`violations`)."""
    given = dict(settings)
    unsafe_kept = [v for v in violations(settings, role, "") if v.key in _AGAINST_IDEMPOTENCE]
    if unsafe_kept and IDEMPOTENCE not in settings:
        # librdkafka refuses idempotence with acks!=all, retries=0 or >5 in flight: an operator who
        # allowed those gets the plain producer they asked for (the verdict says UNSAFE).
        given[IDEMPOTENCE] = "false"
    out = completed(given, role)
    out.update(ENGINE_OWNED[role])
    return out


def table() -> dict[str, dict[str, list[dict[str, str]]]]:
    """All of the above as plain data (``kmirror defaults``, lookup plugin ``kmirror_safety``)."""
    return {
        role: {
            "required": [
                {"key": r.key, "value": r.value, "allowed": r.allowed or r.value, "why": r.why}
                for r in REQUIRED[role]
            ],
            "defaults": [{"key": k, "value": v} for k, v in DEFAULTS[role].items()],
            "engine_owned": [{"key": k, "value": v} for k, v in ENGINE_OWNED[role].items()],
        }
        for role in ROLES
    }


def markdown() -> str:
    """The table as published in docs/safe-defaults.md."""
    lines = [
        "# Data-loss-safe client settings",
        "",
        "Generated from `worker/src/kmirror/config/safety.py` by `kmirror defaults --markdown`; "
        "do not edit by hand."
        " The worker enforces these, `kmirror check-config` reports against them, and the Ansible role"
        " `kmirror_config` renders them (filter `kmirror_client_properties`, which imports this module).",
        "",
        "| role | key | kmirror's value | a file may set | why |",
        "|---|---|---|---|---|",
    ]
    for role in ROLES:
        for r in REQUIRED[role]:
            lines.append(
                f"| {role} | `{r.key}` | `{r.value}` | {r.allowed or r.value} (else refused) | {r.why} |"
            )
        for k, v in DEFAULTS[role].items():
            lines.append(f"| {role} | `{k}` | `{v}` | anything (a default) | |")
        for k, v in ENGINE_OWNED[role].items():
            lines.append(f"| {role} | `{k}` | `{v}` | nothing else (the engine relies on it) | |")
    lines += [
        "",
        f"`--abort.on.send.failure` is true by default; false is refused unless `--allow.unsafe`: "
        f"{ABORT_ON_SEND_FAILURE_WHY}.",
        "",
    ]
    return "\n".join(lines)
