"""The ACL bindings a kmirror instance needs, computed without touching a cluster (pure, unit-tested).

What the MirrorMaker reference documents ask for, for the mirror's own principal (never the brokers'):

* on the **source** cluster: READ and DESCRIBE on the mirrored topics, READ on the mirror's consumer group;
  plus DESCRIBE_CONFIGS on those topics, because kmirror copies the configs set on each source topic
  (minus read-only, sensitive and cluster-specific ones: ``kmirror.mirror.topics.replicable_configs``) when
  it creates the destination topic and keeps copying changes while it mirrors;
* on the **target** cluster: WRITE, DESCRIBE and CREATE on the mirrored topics, DESCRIBE_CONFIGS and
  ALTER_CONFIGS on them (the destination topic configs are kept equal to the source's by incremental alter
  configs), ALTER on them (partitions a source topic gains are added by create partitions), and READ on
  them (``kmirror audit`` reads the copy with the mirror's producer file to prove it complete; a failover
  sync point reads a target partition's end); plus IDEMPOTENT_WRITE on the cluster, only needed by brokers
  older than Kafka 2.8, when asked for.

With failover offset sync (the source's ``groups``, ``kmirror run --groups``; docs/failover.md), also: on
the source DESCRIBE on the synced groups (their committed offsets are read); on the target READ and
DESCRIBE on those groups (translated offsets are committed when no member is active) and CREATE,
DESCRIBE, READ, WRITE on kmirror's sync topic ``__kmirror-offset-syncs``. The groups regex is turned into
patterns like a whitelist.

Topics are named by MirrorMaker's whitelist, read with the worker's own grammar (``kmirror.config.filters``:
white space and surrounding quotes dropped, a comma means ``|``, the regex must compile), so the grant
covers what the mirror reads. Kafka ACLs know only LITERAL names, PREFIXED names and the LITERAL
wildcard ``*``, so each top-level alternative of the whitelist (a group that is a whole alternative,
``(a|b)``, is opened) must be a plain name (``payments``, ``orders.created``: an unescaped ``.`` is taken
as the dot topic names use), a name followed by ``.*`` (``orders.*`` → PREFIXED ``orders``) or ``.*``
alone (every topic). Anything else cannot be granted exactly: the caller is told to list the patterns
itself. The blacklist never widens a grant, so it is ignored (topics it removes are simply not read).
No whitelist (None) is every topic (LITERAL ``*``); an empty or blank one is refused as the worker refuses
it (MirrorMaker matched no topic with it), never granted as every topic.

This file runs in the ``kmirror_acl`` module on the worker hosts with kmirror's virtualenv as interpreter, and
in the role's filter plugin on the controller (where ``make ansible-install`` installs the worker package): in
both places ``kmirror`` is importable, so the grammar is imported, never copied.
"""

from __future__ import annotations

from dataclasses import dataclass

try:
    from kmirror.config.filters import compile_filter, mirrormaker_pattern
    from kmirror.errors import ConfigError
    from kmirror.lineage.rename import rename

    KMIRROR_IMPORT_ERROR = None
except ImportError as exc:  # reported by topic_patterns, the only user
    KMIRROR_IMPORT_ERROR = str(exc)

SOURCE_TOPIC_OPERATIONS = ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")
SOURCE_GROUP_OPERATIONS = ("READ",)
TARGET_TOPIC_OPERATIONS = (
    "WRITE",
    "DESCRIBE",
    "CREATE",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "ALTER",
    "READ",
)
SYNC_SOURCE_GROUP_OPERATIONS = ("DESCRIBE",)
SYNC_TARGET_GROUP_OPERATIONS = ("READ", "DESCRIBE")
# Equal to kmirror.failover.offsetsync.SYNC_TOPIC (tests/ansible/test_acls.py checks it); kept here so the
# bindings need no more of the worker than its filter grammar.
SYNC_TOPIC = "__kmirror-offset-syncs"
SYNC_TOPIC_OPERATIONS = ("CREATE", "DESCRIBE", "READ", "WRITE")
# --heartbeats.interval.ms: the source's heartbeat topic (kmirror.mirror.heartbeats.PREFIX + its name) is
# written and made by the mirror's supervisor and mirrored by its streams; its copy is read on the target.
HEARTBEAT_PREFIX = "kmirror.heartbeats."
HEARTBEAT_SOURCE_OPERATIONS = ("WRITE", "CREATE")
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


def _split(pattern: str) -> list[str]:
    """Top-level alternatives of a regex ('|' outside groups and classes, escapes kept)."""
    out: list[str] = []
    cur: list[str] = []
    depth, in_class, i = 0, False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            cur.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")" and depth:
            depth -= 1
        elif c == "|" and depth == 0:
            out.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def _whole_group(alt: str) -> str | None:
    """The inside of ``(...)`` or ``(?:...)`` when that group is the whole alternative, else None."""
    if not (alt.startswith("(") and alt.endswith(")")):
        return None
    if alt.startswith("(?") and not alt.startswith("(?:"):
        return None  # lookarounds, named groups, flags: not a plain group
    depth, i = 0, 0
    while i < len(alt):
        c = alt[i]
        if c == "\\":
            i += 2
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0 and i != len(alt) - 1:
                return None  # (a)(b): the first group closes before the end
        i += 1
    return alt[3:-1] if alt.startswith("(?:") else alt[1:-1]


def _alternatives(pattern: str) -> list[str]:
    """The alternatives of a preprocessed whitelist, groups that are a whole alternative opened."""
    out: list[str] = []
    for alt in _split(pattern):
        inner = _whole_group(alt)
        out.extend(_alternatives(inner) if inner is not None else [alt])
    return [a for a in out if a]


def _literal(text: str, topic: bool = True) -> str | None:
    """The name a regex fragment stands for, or None when it is not a plain name (or, for a topic, not a
    name Kafka allows)."""
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
    name = "".join(out)
    # Kafka topic names hold only these characters: another one (a quote inside the whitelist) names no topic.
    return name if not topic or all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in name) else None


def check_filter(whitelist: str, option: str = "whitelist") -> None:
    """The worker's own check of a filter option (``kmirror.config.filters.compile_filter``): a pattern the
    worker refuses, an empty or blank one among them (``''``, ``'   '``, ``','``: MirrorMaker matched no
    topic with it), raises AclPatternError with the worker's one-line message."""
    if KMIRROR_IMPORT_ERROR is not None:
        raise AclPatternError(
            f"the kmirror package is not importable ({KMIRROR_IMPORT_ERROR}): run the module with kmirror's "
            "virtualenv as interpreter (role kmirror_worker installs it)"
        )
    try:
        compile_filter(whitelist, option)
    except ConfigError as exc:
        raise AclPatternError(str(exc)) from None


def whitelist_problems(sources: list) -> list[str]:
    """One message per source cluster definition whose whitelist the worker refuses (:func:`check_filter`).
    A source without a whitelist (key absent or null) mirrors every topic: no problem."""
    out = []
    for i, s in enumerate(sources or []):
        if not isinstance(s, dict) or s.get("whitelist") is None:
            continue
        try:
            check_filter(str(s["whitelist"]))
        except AclPatternError as exc:
            out.append(f"kmirror_source_clusters[{i}] ({s.get('name', '?')}): {exc}")
    return out


def topic_patterns(whitelist: str | None, option: str = "whitelist") -> list[tuple[str, str]]:
    """(pattern_type, name) pairs that cover the whitelist exactly; raise AclPatternError otherwise. No
    whitelist (None) is every topic; an empty or blank one is refused, as the worker refuses it."""
    if whitelist is None:
        return [("LITERAL", "*")]
    check_filter(whitelist, option)  # the worker's own check: it refuses what it cannot read
    patterns: list[tuple[str, str]] = []
    for alt in _alternatives(mirrormaker_pattern(whitelist)):
        if alt in (".*", ".+"):
            return [("LITERAL", "*")]
        if alt.endswith(".*") and not alt.endswith("\\.*"):
            prefix = _literal(alt[:-2], option != "groups")
            kind = "PREFIXED"
        else:
            prefix = _literal(alt, option != "groups")
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
    source_name: str | None = None,
    rename_format: str | None = None,
    heartbeats: bool = False,
) -> list[Binding]:
    """Every ALLOW binding the mirror principal needs on one cluster (``side``: source or target);
    ``sync_groups``: the ``--groups`` regex of failover offset sync, if any; ``rename_format`` (with
    ``source_name``): the destination topics' names on the target (``--topic.rename.format``);
    ``heartbeats`` (with ``source_name``): the source's heartbeat topic and its copy."""
    if ":" not in principal:
        raise AclPatternError(f"principal {principal!r} has no type; write it as User:NAME")
    topics = normalize_patterns(patterns) if patterns else topic_patterns(whitelist)
    if (rename_format or heartbeats) and not source_name:
        raise AclPatternError("a rename format and heartbeats need the source's name")
    if heartbeats:
        topics = [*topics, ("LITERAL", HEARTBEAT_PREFIX + str(source_name))]
    if side == "target" and rename_format:
        topics = _copies(topics, rename_format, str(source_name))
    out: list[Binding] = []
    if sync_groups:
        synced = topic_patterns(sync_groups, "groups")
        ops = SYNC_SOURCE_GROUP_OPERATIONS if side == "source" else SYNC_TARGET_GROUP_OPERATIONS
        out += [Binding("GROUP", name, kind, principal, host, op) for kind, name in synced for op in ops]
        if side == "target":
            out += [
                Binding("TOPIC", SYNC_TOPIC, "LITERAL", principal, host, op) for op in SYNC_TOPIC_OPERATIONS
            ]
    if side == "source":
        if not group:
            raise AclPatternError("the source side needs the mirror's consumer group (group_id)")
        for kind, name in topics:
            out += [Binding("TOPIC", name, kind, principal, host, op) for op in SOURCE_TOPIC_OPERATIONS]
        if heartbeats:
            beats = HEARTBEAT_PREFIX + str(source_name)
            ops = HEARTBEAT_SOURCE_OPERATIONS
            out += [Binding("TOPIC", beats, "LITERAL", principal, host, op) for op in ops]
        out += [Binding("GROUP", group, "LITERAL", principal, host, op) for op in SOURCE_GROUP_OPERATIONS]
    elif side == "target":
        for kind, name in topics:
            out += [Binding("TOPIC", name, kind, principal, host, op) for op in TARGET_TOPIC_OPERATIONS]
        if idempotent_write:
            out.append(Binding("CLUSTER", "kafka-cluster", "LITERAL", principal, host, "IDEMPOTENT_WRITE"))
    else:
        raise AclPatternError(f"side {side!r}: use source or target")
    return sorted(set(out))


def _copies(topics: list[tuple[str, str]], rename_format: str, source_name: str) -> list[tuple[str, str]]:
    """The patterns of the renamed copies (``--topic.rename.format``): a LITERAL name renamed; a PREFIXED
    name with the format's prefix in front (it still reaches whatever follows, the format's suffix too);
    every topic (``*``) stays every topic."""
    if KMIRROR_IMPORT_ERROR is not None:
        raise AclPatternError(f"the kmirror package is not importable ({KMIRROR_IMPORT_ERROR})")
    try:
        named = rename(rename_format, source_name)
    except ConfigError as exc:
        raise AclPatternError(str(exc)) from None
    out = []
    for kind, name in topics:
        if name == "*":
            out.append((kind, name))
        else:
            out.append((kind, named(name) if kind == "LITERAL" else named.prefix + name))
    return out


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
