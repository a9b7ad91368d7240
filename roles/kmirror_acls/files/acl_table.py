"""Generate docs/deployment.md's ACL table from the bindings the kmirror_acl module grants.

    python roles/kmirror_acls/files/acl_table.py           # rewrite the table (make docs)
    python roles/kmirror_acls/files/acl_table.py --check   # exit 1 when it is stale (make lint)

The table is computed by calling ``bindings()`` of ``module_utils/kmirror_acl_bindings.py`` (the one place
that defines the ACLs) for a source and the target, with and without the options that add bindings
(failover offset sync, IDEMPOTENT_WRITE), and grouping the result by cluster, resource and condition. Each
operation's reason is written here; an operation the module grants without a reason stops the generator,
so a new grant cannot reach the docs unexplained. Written between the ``<!-- BEGIN generated: acl table``
and ``<!-- END generated: acl table -->`` lines of docs/deployment.md.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]
BINDINGS = ROOT / "roles/kmirror_acls/module_utils/kmirror_acl_bindings.py"
DOC = ROOT / "docs/deployment.md"
BEGIN = "<!-- BEGIN generated: acl table (roles/kmirror_acls/files/acl_table.py, make docs) -->"
END = "<!-- END generated: acl table -->"
COMMAND = "make docs"

# Why each (cluster, resource, operation) is granted. The generator refuses a granted operation without one.
REASONS: dict[tuple[str, str, str], str] = {
    ("source", "topics", "READ"): "read the records",
    ("source", "topics", "DESCRIBE"): "list the topics and their partitions, fetch offsets",
    ("source", "topics", "DESCRIBE_CONFIGS"): "copy each topic's configs to its destination topic",
    ("source", "group", "READ"): "join the mirror's consumer group, commit its offsets",
    ("target", "topics", "WRITE"): "write the records",
    ("target", "topics", "DESCRIBE"): "see which destination topics exist and their partitions",
    ("target", "topics", "CREATE"): "create the destination topics",
    ("target", "topics", "DESCRIBE_CONFIGS"): "compare the destination topic's configs with the source's",
    ("target", "topics", "ALTER_CONFIGS"): "keep them equal to the source's (incremental alter configs)",
    ("target", "topics", "ALTER"): "add the partitions a source topic gains (create partitions)",
    ("target", "topics", "READ"): "`kmirror audit` reads the copy; a sync point reads a partition's end",
    ("target", "cluster", "IDEMPOTENT_WRITE"): "idempotent producer on brokers older than Kafka 2.8",
    ("source", "synced groups", "DESCRIBE"): "read the committed offsets of the groups to sync",
    ("target", "synced groups", "READ"): "commit their translated offsets",
    ("target", "synced groups", "DESCRIBE"): "see whether the group has active members",
    ("target", "sync topic", "CREATE"): "create `__kmirror-offset-syncs`",
    ("target", "sync topic", "DESCRIBE"): "find its partitions",
    ("target", "sync topic", "READ"): "read the sync points back (after a restart, `kmirror failover`)",
    ("target", "sync topic", "WRITE"): "write a sync point at every commit point",
    ("source", "heartbeat topic", "READ"): "mirror the heartbeats",
    ("source", "heartbeat topic", "DESCRIBE"): "find its partition",
    ("source", "heartbeat topic", "DESCRIBE_CONFIGS"): "copy its configs to its copy",
    ("source", "heartbeat topic", "WRITE"): "write a heartbeat every interval",
    ("source", "heartbeat topic", "CREATE"): "create it when missing",
    ("target", "heartbeat topic", "WRITE"): "write the heartbeats' copies",
    ("target", "heartbeat topic", "DESCRIBE"): "see whether the copy exists",
    ("target", "heartbeat topic", "CREATE"): "create the copy",
    ("target", "heartbeat topic", "DESCRIBE_CONFIGS"): "compare its configs",
    ("target", "heartbeat topic", "ALTER_CONFIGS"): "keep them equal to the source's",
    ("target", "heartbeat topic", "ALTER"): "(as for every destination topic)",
    ("target", "heartbeat topic", "READ"): "read the copies back: the link's latency",
}
RESOURCES = {
    "topics": "TOPIC: the whitelisted topics (LITERAL or PREFIXED: whitelist or `acl_topic_patterns`)",
    "group": "GROUP LITERAL: the mirror's `group_id`",
    "cluster": "CLUSTER `kafka-cluster`",
    "synced groups": "GROUP: the groups of the source's `groups` regex (LITERAL or PREFIXED)",
    "sync topic": "TOPIC LITERAL `__kmirror-offset-syncs`",
    "heartbeat topic": "TOPIC LITERAL `kmirror.heartbeats.<source>` (on the target: its renamed name)",
}
WHEN = {
    "": "always",
    "idempotent_write": "`kmirror_acls_idempotent_write: true`",
    "sync_groups": "the source has `groups` (failover offset sync, `kmirror run --groups`)",
    "heartbeats": "the source has `heartbeats_interval_ms` (`kmirror run --heartbeats.interval.ms`)",
}
PRINCIPAL, WHITELIST, GROUP, SYNCED = "User:kmirror", "orders.*|payments", "kmirror-east", "app.*"
NAME = "east"  # the source's name


def load_bindings(path: Path = BINDINGS) -> ModuleType:
    spec = importlib.util.spec_from_file_location("kmirror_acl_bindings", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _resource(mod: ModuleType, b: object) -> str:
    kind, name = b.resource_type, b.name  # type: ignore[attr-defined]
    if kind == "CLUSTER":
        return "cluster"
    if kind == "GROUP":
        return "group" if name == GROUP else "synced groups"
    if name.startswith(mod.HEARTBEAT_PREFIX):
        return "heartbeat topic"
    return "sync topic" if name == mod.SYNC_TOPIC else "topics"


def rows(mod: ModuleType | None = None) -> list[tuple[str, str, str, list[str]]]:
    """(cluster, resource, condition, operations) for every binding the module grants."""
    mod = mod or load_bindings()
    out: list[tuple[str, str, str, list[str]]] = []
    for side in ("source", "target"):
        base = {"whitelist": WHITELIST, "group": GROUP}
        plain = set(mod.bindings(side, PRINCIPAL, **base))
        extra = {
            "": plain,
            "idempotent_write": set(mod.bindings(side, PRINCIPAL, **base, idempotent_write=True)) - plain,
            "sync_groups": set(mod.bindings(side, PRINCIPAL, **base, sync_groups=SYNCED)) - plain,
            "heartbeats": set(mod.bindings(side, PRINCIPAL, **base, source_name=NAME, heartbeats=True))
            - plain,
        }
        for condition, found in extra.items():
            grouped: dict[str, list[str]] = {}
            for b in sorted(found, key=lambda b: (b.resource_type, b.name, b.pattern_type)):
                ops = grouped.setdefault(_resource(mod, b), [])
                if b.operation not in ops:
                    ops.append(b.operation)
            for resource, ops in sorted(grouped.items(), key=lambda item: list(RESOURCES).index(item[0])):
                missing = [op for op in ops if (side, resource, op) not in REASONS]
                if missing:
                    raise SystemExit(
                        f"{BINDINGS.relative_to(ROOT)} grants {', '.join(missing)} on the {side}'s "
                        f"{resource}: add the reason to REASONS in {Path(__file__).relative_to(ROOT)}"
                    )
                order = [op for (s, r, op) in REASONS if (s, r) == (side, resource) and op in ops]
                out.append((side, resource, condition, order))
    return out


def table(mod: ModuleType | None = None) -> str:
    lines = [
        BEGIN,
        "| cluster | resource | when | operations: why |",
        "| --- | --- | --- | --- |",
    ]
    for side, resource, condition, ops in rows(mod):
        why = "; ".join(f"{op}: {REASONS[(side, resource, op)]}" for op in ops)
        lines.append(f"| {side} | {RESOURCES[resource]} | {WHEN[condition]} | {why} |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def rewrite(text: str, generated: str) -> str:
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC.relative_to(ROOT)} lacks the lines {BEGIN} and {END}")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + generated.rstrip("\n") + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the table is stale")
    args = parser.parse_args(argv)
    current = DOC.read_text(encoding="utf-8")
    wanted = rewrite(current, table())
    if args.check:
        if wanted != current:
            sys.stdout.writelines(
                difflib.unified_diff(current.splitlines(True), wanted.splitlines(True), str(DOC), "generated")
            )
            print(f"{DOC.relative_to(ROOT)}: the ACL table is stale: run {COMMAND}")
            return 1
        return 0
    DOC.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
