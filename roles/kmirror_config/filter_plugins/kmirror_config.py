"""Filters of the kmirror_config role: check the cluster definitions and plan the files of each instance.

Every instance (``kmirror@<source>.service``) has two client sides, each in its own directory
``<conf_dir>/<source>/``: the *consumer* reading the source cluster and the *producer* writing the target.
:func:`kmirror_client_sides` turns the inventory's cluster definitions into one plain item per side,
with the paths of that side's files and **without any secret**, so loops over them can be shown in logs.

The checks of a cluster definition are not written here: :func:`check_cluster` runs the ``checks`` of
``files/cluster_definition.yml``, the one description the argument spec is generated from. Which property
keys are secrets is ``kmirror.config.secrets`` (the worker package, installed on the controller).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

# The one description of a cluster definition (keys, choices, checks); the argument spec is generated from it.
DEFINITION = Path(__file__).resolve().parents[1] / "files" / "cluster_definition.yml"


# Keys written into a side's JAAS file (templates/jaas.conf.j2), where Java expands ${...}.
JAAS_KEYS = ("sasl_username", "sasl_password", "kerberos_principal", "kerberos_service_name")


class ClusterDefinitionError(ValueError):
    pass


@lru_cache(maxsize=1)
def definition() -> dict:
    return yaml.safe_load(DEFINITION.read_text(encoding="utf-8"))


def key_spec(key: str, side: str) -> dict:
    """The description of one key on one side ("target" or "source"), per-side overrides applied."""
    for entry in definition()["keys"]:
        if entry["key"] == key and side in entry.get("sides", ("target", "source")):
            return {**entry, **entry.get("per_side", {}).get(side, {})}
    raise KeyError(f"{key} is not a {side} cluster key of {DEFINITION.name}")


def side_keys(side: str) -> list[dict]:
    """The descriptions of the keys of one side, per-side overrides applied."""
    return [
        {**e, **e.get("per_side", {}).get(side, {})}
        for e in definition()["keys"]
        if side in e.get("sides", ("target", "source"))
    ]


def _is_secret(key: str) -> bool:
    try:
        from kmirror.config.secrets import is_secret
    except ImportError as exc:
        from ansible.errors import AnsibleFilterError

        raise AnsibleFilterError(
            "the kmirror package is not importable by the Python running Ansible "
            f"({exc}); install it on the controller: make ansible-install (or pip install -e worker)"
        ) from None
    return is_secret(key)


def _fail(where: str, problem: str, fix: str) -> ClusterDefinitionError:
    return ClusterDefinitionError(f"{where}: {problem}; {fix}")


def _get(cluster: dict, dotted: str) -> Any:
    value: Any = cluster
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _normalized(cluster: dict, key: str, side: str) -> Any:
    """A key with choices as its upper-case name (default applied); any other key as given."""
    spec = key_spec(key, side) if "." not in key else {}
    value = _get(cluster, key)
    if "choices" in spec:
        return str(value or spec.get("default") or "").upper()
    return value


def _holds(cluster: dict, condition: dict, side: str) -> bool:
    for key, test in condition.items():
        value = str(_normalized(cluster, key, side))
        if "startswith" in test and not value.startswith(test["startswith"]):
            return False
        if "endswith" in test and not value.endswith(test["endswith"]):
            return False
        if "in" in test and value not in test["in"]:
            return False
    return True


def _problem(check: dict, cluster: dict, side: str) -> dict | None:
    """The message fields of a failing check, or None when the cluster passes it."""
    rule = check["rule"]
    key = check.get("key", "")
    value = _normalized(cluster, key, side) if key else None
    if rule == "nonempty":
        ok = bool(str(value or "").strip())
    elif rule == "choice":
        ok = value in key_spec(key, side)["choices"]
    elif rule == "mapping":
        ok = isinstance(value or {}, dict)
    elif rule == "forbidden":
        ok = not value
    elif rule == "required_all":
        missing = [k for k in check["keys"] if not _get(cluster, k)]
        return {"key": missing[0]} if missing else None
    elif rule == "together":
        ok = len({bool(_get(cluster, k)) for k in check["keys"]}) == 1
    elif rule == "requires":
        ok = not value or bool(_get(cluster, check["needs"]))
    elif rule == "any_of":
        ok = any(_get(cluster, k) for k in check["keys"])
    elif rule == "positive_int":
        ok = value is None or (str(value).isdigit() and int(value) >= 1)
    else:
        raise ValueError(f"{DEFINITION.name}: unknown check rule {rule!r}")
    return None if ok else {}


def _nul_in(value: Any, path: str) -> str | None:
    """Where the first string (key or value) in ``value`` holding a NUL character is, or None."""
    if isinstance(value, str):
        return path if "\0" in value else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        here = f"{path}[{k!r}]" if isinstance(value, list) or "\0" in str(k) else f"{path}.{k}".lstrip(".")
        if "\0" in str(k):
            return here
        hit = _nul_in(v, here)
        if hit:
            return hit
    return None


def check_patterns(cluster: dict, where: str, side: str) -> None:
    """Every key with a ``pattern`` matches it as a whole (re.fullmatch), and no string holds a NUL."""
    nul = _nul_in(cluster, "")
    if nul:
        raise _fail(where, f"{nul} holds a NUL character", "remove it (no file or command line can carry it)")
    for key in JAAS_KEYS:
        if "${" in str(cluster.get(key) or ""):
            raise _fail(
                where,
                f"{key} holds '${{': the JAAS file it is written to would read it as a Java system property",
                "choose a value without '${' (JAAS files have no way to write it)",
            )
    for entry in side_keys(side):
        value = cluster.get(entry["key"])
        if "pattern" in entry and value not in (None, "") and not re.fullmatch(entry["pattern"], str(value)):
            raise _fail(
                where,
                f"{entry['key']} {str(value)!r} is not usable as a name in unit, file and directory names",
                "use 1-63 letters, digits, '.', '_' and '-', starting with a letter or digit (e.g. east)",
            )


def check_cluster(cluster: dict, where: str, *, source: bool) -> None:
    """Run the checks of cluster_definition.yml; the first failing one raises its one-line message."""
    if not isinstance(cluster, dict):
        raise _fail(where, "is not a mapping", "see inventory.example")
    side = "source" if source else "target"
    check_patterns(cluster, where, side)
    for check in definition()["checks"]:
        if side not in check.get("sides", ("target", "source")):
            continue
        if "when" in check and not _holds(cluster, check["when"], side):
            continue
        if "unless" in check and _holds(cluster, check["unless"], side):
            continue
        fields = _problem(check, cluster, side)
        if fields is None:
            continue
        key = check.get("key", "")
        value = _normalized(cluster, key, side) if key else None
        fields = {
            "key": key,
            "value": value,
            "shown": value or "is missing",
            "choices": ", ".join(key_spec(key, side).get("choices", ())) if key and "." not in key else "",
            **{
                e["key"]: _normalized(cluster, e["key"], side)
                for e in definition()["keys"]
                if "choices" in e and side in e.get("sides", ("target", "source"))
            },
            **fields,
        }
        raise _fail(where, check["problem"].format(**fields), check["fix"].format(**fields))


def check_definitions(sources: list, target: dict) -> None:
    if not isinstance(sources, list) or not sources:
        raise _fail("kmirror_source_clusters", "is empty or not a list", "define at least one source cluster")
    check_cluster(target, "kmirror_target_cluster", source=False)
    seen = set()
    for i, s in enumerate(sources):
        name = str((s or {}).get("name") or "") if isinstance(s, dict) else ""
        where = f"kmirror_source_clusters[{i}]" + (f" ({name})" if name else "")
        if not re.fullmatch(key_spec("name", "source")["pattern"], name):
            raise _fail(
                where,
                f"name {name!r} is not usable as a systemd instance and directory name",
                "use 1-63 letters, digits, '.', '_' and '-', starting with a letter or digit (e.g. east)",
            )
        if name in seen:
            raise _fail(where, f"name {name!r} is used twice", "give every source cluster its own name")
        seen.add(name)
        check_cluster(s, where, source=True)


def side_files(conf_dir: str, source: str, side: str) -> dict:
    d = f"{conf_dir.rstrip('/')}/{source}"
    return {
        "dir": d,
        "properties": f"{d}/{side}.properties",
        "jaas": f"{d}/{side}_jaas.conf",
        "keytab": f"{d}/{side}.keytab",
        "ca": f"{d}/{side}-ca.pem",
        "cert": f"{d}/{side}-cert.pem",
        "key": f"{d}/{side}-key.pem",
    }


def describe_side(cluster: dict, source: str, side: str, conf_dir: str) -> dict:
    """One side of one instance, as plain data without secrets (safe to show as a loop item)."""
    protocol = str(cluster.get("security_protocol") or "PLAINTEXT").upper()
    mechanism = str(cluster.get("sasl_mechanism") or "").upper() if protocol.startswith("SASL_") else ""
    tls = cluster.get("tls") or {}
    props = cluster.get("consumer_properties" if side == "consumer" else "producer_properties") or {}
    return {
        "source": source,
        "side": side,
        "cluster": str(cluster.get("name") or ("target" if side == "producer" else source)),
        "protocol": protocol,
        "mechanism": mechanism,
        "jaas": bool(mechanism),
        "kerberos": mechanism == "GSSAPI",
        "kerberos_principal": str(cluster.get("kerberos_principal") or "") if mechanism == "GSSAPI" else "",
        "kerberos_keytab_src": str(cluster.get("kerberos_keytab_src") or "") if mechanism == "GSSAPI" else "",
        "tls_ca_src": str(tls.get("ca_src") or ""),
        "tls_cert_src": str(tls.get("cert_src") or ""),
        "tls_key_src": str(tls.get("key_src") or ""),
        # The properties file holds a secret (key password or an operator's secret key): log nothing of it.
        "secret_properties": bool(tls.get("key_password")) or any(_is_secret(k) for k in props),
        "files": side_files(conf_dir, source, side),
    }


def kmirror_client_sides(sources: list, target: dict, conf_dir: str) -> list:
    try:
        check_definitions(sources, target)
    except ClusterDefinitionError as exc:
        from ansible.errors import AnsibleFilterError

        raise AnsibleFilterError(str(exc)) from None
    out = []
    for s in sources:
        out.append(describe_side(s, s["name"], "consumer", conf_dir))
        out.append(describe_side(target, s["name"], "producer", conf_dir))
    return out


def kmirror_cluster_for(side: dict, sources: list, target: dict) -> dict:
    """The full cluster definition (with its secrets) behind one side item."""
    if side["side"] == "producer":
        return target
    return next(s for s in sources if s.get("name") == side["source"])


class FilterModule:
    def filters(self) -> dict:
        return {"kmirror_client_sides": kmirror_client_sides, "kmirror_cluster_for": kmirror_cluster_for}
