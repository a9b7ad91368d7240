"""The ACL bindings a kmirror instance needs, computed without touching a cluster (pure, unit-tested).

What the MirrorMaker reference documents ask for, for the mirror's own principal (never the brokers'):

* on the **source** cluster: READ and DESCRIBE on the mirrored topics, READ on the mirror's consumer group;
  plus DESCRIBE_CONFIGS on those topics, because kmirror copies each topic's effective configs (every config
  the source describes, minus read-only, sensitive and cluster-specific ones:
  ``kmirror.mirror.topics``) when it
  creates the destination topic and keeps copying changes while it mirrors;
* on the **target** cluster: WRITE, DESCRIBE and CREATE on the mirrored topics, DESCRIBE_CONFIGS and
  ALTER_CONFIGS on them (the destination topic configs are kept equal to the source's by incremental alter
  configs), and ALTER on them (partitions a source topic gains are added by create partitions); plus
  IDEMPOTENT_WRITE on the cluster, only needed by brokers older than Kafka 2.8, when asked for.

With failover offset sync (the source's ``groups``, ``kmirror run --groups``; docs/failover.md), also: on
the source DESCRIBE on the synced groups (their committed offsets are read); on the target READ and
DESCRIBE on those groups (translated offsets are committed when no member is active), READ on the mirrored
topics (a sync point reads the target partition's end) and CREATE, DESCRIBE, READ, WRITE on kmirror's
sync topic ``__kmirror-offset-syncs``. The groups regex is turned into patterns like a whitelist.

Topics are named by MirrorMaker's whitelist (Java regex, a comma means ``|``). Kafka ACLs know only LITERAL
names, PREFIXED names and the LITERAL wildcard ``*``, so each alternative of the whitelist must be a plain
name (``payments``, ``orders.created``: an unescaped ``.`` is taken as the dot topic names use), a name
followed by ``.*`` (``orders.*`` → PREFIXED ``orders``) or ``.*`` alone (every topic). Anything else cannot be
granted exactly: the caller is told to list the patterns itself. The blacklist never widens a grant, so it is
ignored (topics it removes are simply not read).
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE_TOPIC_OPERATIONS = ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")
SOURCE_GROUP_OPERATIONS = ("READ",)
TARGET_TOPIC_OPERATIONS = ("WRITE", "DESCRIBE", "CREATE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALTER")
SYNC_SOURCE_GROUP_OPERATIONS = ("DESCRIBE",)
SYNC_TARGET_GROUP_OPERATIONS = ("READ", "DESCRIBE")
SYNC_TARGET_TOPIC_OPERATIONS = ("READ",)
# kmirror.failover.offsetsync.SYNC_TOPIC (modules cannot import the worker here)
SYNC_TOPIC = "__kmirror-offset-syncs"
SYNC_TOPIC_OPERATIONS = ("CREATE", "DESCRIBE", "READ", "WRITE")
PATTERN_TYPES = ("LITERAL", "PREFIXED")
_META = set(".[]{}()*+?^$|\\")
_ESCAPABLE = set(".-_$[]{}()*+?^|\\")


class AclPatternError(ValueError):
    pass


@dataclass(frozen=True, order=True)
class Binding:
    resource_type: str  # TOPIC, GROUP, CLUSTER
    name: str
    pattern_type: str  # LITERAL, PREFIXED
    principal: str
    host: str
    operation: str
    permission: str = "ALLOW"

    def render(self) -> str:
        return (
            f"{self.permission} {self.principal} from {self.host}: {self.operation} on "
            f"{self.resource_type} {self.pattern_type} {self.name!r}"
        )

    def as_dict(self) -> dict:
        return {
            "resource_type": self.resource_type,
            "name": self.name,
            "pattern_type": self.pattern_type,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation,
            "permission": self.permission,
        }


def _alternatives(whitelist: str) -> list[str]:
    """Top-level alternatives of a MirrorMaker whitelist (',' and '|' outside brackets and groups)."""
    out, cur, depth, i = [], [], 0, 0
    while i < len(whitelist):
        c = whitelist[i]
        if c == "\\" and i + 1 < len(whitelist):
            cur.append(whitelist[i : i + 2])
            i += 2
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}" and depth:
            depth -= 1
        if c in ",|" and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return [a.strip().strip("'\"").strip() for a in out if a.strip().strip("'\"").strip()]


def _literal(text: str) -> str | None:
    """The topic name a regex fragment stands for, or None when it is not a plain name."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 < len(text) and text[i + 1] in _ESCAPABLE:
                out.append(text[i + 1])
                i += 2
                continue
            return None
        if c == ".":
            out.append(".")  # the dot of dotted topic names, as operators write them
        elif c in _META:
            return None
        else:
            out.append(c)
        i += 1
    return "".join(out)


def topic_patterns(whitelist: str | None) -> list[tuple[str, str]]:
    """(pattern_type, name) pairs that cover the whitelist exactly; raise AclPatternError otherwise."""
    if not whitelist or not whitelist.strip():
        return [("LITERAL", "*")]
    patterns: list[tuple[str, str]] = []
    for alt in _alternatives(whitelist):
        if alt in (".*", ".+"):
            return [("LITERAL", "*")]
        if alt.endswith(".*") and not alt.endswith("\\.*"):
            prefix = _literal(alt[:-2])
            kind = "PREFIXED"
        else:
            prefix = _literal(alt)
            kind = "LITERAL"
        if prefix is None or (kind == "PREFIXED" and not prefix):
            raise AclPatternError(
                f"whitelist alternative {alt!r} cannot be granted as a Kafka ACL "
                "(only names, NAME.* prefixes "
                "and .* are); list the ACL patterns yourself with acl_topic_patterns: "
                "[{name: ..., pattern_type: LITERAL|PREFIXED}]"
            )
        if (kind, prefix) not in patterns:
            patterns.append((kind, prefix))
    return patterns


def normalize_patterns(patterns: list[dict]) -> list[tuple[str, str]]:
    out = []
    for p in patterns:
        kind = str(p.get("pattern_type", "LITERAL")).upper()
        if kind not in PATTERN_TYPES or not p.get("name"):
            raise AclPatternError(
                f"bad ACL topic pattern {p!r}: give name and pattern_type LITERAL or PREFIXED"
            )
        out.append((kind, str(p["name"])))
    return out


def bindings(
    side: str,
    principal: str,
    *,
    whitelist: str | None = None,
    group: str | None = None,
    patterns: list[dict] | None = None,
    host: str = "*",
    idempotent_write: bool = False,
    sync_groups: str | None = None,
) -> list[Binding]:
    """Every ALLOW binding the mirror principal needs on one cluster (``side``: source or target);
    ``sync_groups``: the ``--groups`` regex of failover offset sync, if any."""
    if ":" not in principal:
        raise AclPatternError(f"principal {principal!r} has no type; write it as User:NAME")
    topics = normalize_patterns(patterns) if patterns else topic_patterns(whitelist)
    out: list[Binding] = []
    if sync_groups:
        synced = topic_patterns(sync_groups)
        ops = SYNC_SOURCE_GROUP_OPERATIONS if side == "source" else SYNC_TARGET_GROUP_OPERATIONS
        out += [Binding("GROUP", name, kind, principal, host, op) for kind, name in synced for op in ops]
        if side == "target":
            for kind, name in topics:
                out += [
                    Binding("TOPIC", name, kind, principal, host, op) for op in SYNC_TARGET_TOPIC_OPERATIONS
                ]
            out += [
                Binding("TOPIC", SYNC_TOPIC, "LITERAL", principal, host, op) for op in SYNC_TOPIC_OPERATIONS
            ]
    if side == "source":
        if not group:
            raise AclPatternError("the source side needs the mirror's consumer group (group_id)")
        for kind, name in topics:
            out += [Binding("TOPIC", name, kind, principal, host, op) for op in SOURCE_TOPIC_OPERATIONS]
        out += [Binding("GROUP", group, "LITERAL", principal, host, op) for op in SOURCE_GROUP_OPERATIONS]
    elif side == "target":
        for kind, name in topics:
            out += [Binding("TOPIC", name, kind, principal, host, op) for op in TARGET_TOPIC_OPERATIONS]
        if idempotent_write:
            out.append(Binding("CLUSTER", "kafka-cluster", "LITERAL", principal, host, "IDEMPOTENT_WRITE"))
    else:
        raise AclPatternError(f"side {side!r}: use source or target")
    return sorted(set(out))


def principal_for(cluster: dict) -> str:
    """The principal the brokers see for a cluster definition's credentials (overridable: acl_principal)."""
    if cluster.get("acl_principal"):
        return str(cluster["acl_principal"])
    protocol = str(cluster.get("security_protocol") or "PLAINTEXT").upper()
    mechanism = str(cluster.get("sasl_mechanism") or "").upper()
    if protocol.startswith("SASL_") and mechanism == "GSSAPI":
        # Kafka's DEFAULT principal.to.local rule: the primary of primary/instance@REALM.
        return "User:" + str(cluster["kerberos_principal"]).split("@", 1)[0].split("/", 1)[0]
    if protocol.startswith("SASL_"):
        return "User:" + str(cluster["sasl_username"])
    if protocol == "SSL":
        raise AclPatternError(
            "with SSL the principal is the client certificate's distinguished name: set acl_principal "
            "(e.g. 'User:CN=kmirror,O=Example')"
        )
    return "User:ANONYMOUS"
