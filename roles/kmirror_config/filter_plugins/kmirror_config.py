"""Filters of the kmirror_config role: check the cluster definitions and plan the files of each instance.

Every instance (``kmirror@<source>.service``) has two client sides, each in its own directory
``<conf_dir>/<source>/``: the *consumer* reading the source cluster and the *producer* writing the target.
:func:`kmirror_client_sides` turns the inventory's cluster definitions into one plain item per side,
with the paths of that side's files and **without any secret**, so loops over them can be shown in logs.
"""

from __future__ import annotations

import re

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("GSSAPI", "SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
SECRET_MARKERS = ("password", "secret", "ssl.key.pem", "ssl_key", "sasl.oauthbearer.config")


class ClusterDefinitionError(ValueError):
    pass


def _is_secret(key: str) -> bool:
    # Same rule as kmirror.config.is_secret (kept importable without the worker package for the tests).
    k = str(key).lower()
    return any(m in k for m in SECRET_MARKERS)


def _fail(where: str, problem: str, fix: str) -> ClusterDefinitionError:
    return ClusterDefinitionError(f"{where}: {problem}; {fix}")


def check_cluster(cluster: dict, where: str, *, source: bool) -> None:
    if not isinstance(cluster, dict):
        raise _fail(where, "is not a mapping", "see inventory.example")
    if not str(cluster.get("bootstrap_servers") or "").strip():
        raise _fail(where, "no bootstrap_servers", 'set bootstrap_servers: "host1:9093,host2:9093"')
    protocol = str(cluster.get("security_protocol") or "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise _fail(where, f"security_protocol {protocol!r} is unknown", f"use one of {', '.join(PROTOCOLS)}")
    if protocol.startswith("SASL_"):
        mechanism = str(cluster.get("sasl_mechanism") or "").upper()
        if mechanism not in MECHANISMS:
            raise _fail(
                where,
                f"sasl_mechanism {mechanism or 'is missing'!s}",
                f"set sasl_mechanism to one of {', '.join(MECHANISMS)}",
            )
        if mechanism == "GSSAPI":
            for key in ("kerberos_principal", "kerberos_keytab_src"):
                if not cluster.get(key):
                    raise _fail(
                        where,
                        f"GSSAPI needs {key}",
                        "set kerberos_principal (the mirror's own principal, not the brokers') "
                        "and kerberos_keytab_src (its keytab on the controller)",
                    )
        else:
            for key in ("sasl_username", "sasl_password"):
                if not cluster.get(key):
                    raise _fail(
                        where,
                        f"{mechanism} needs {key}",
                        "set sasl_username and sasl_password (keep the password in Ansible Vault)",
                    )
    elif cluster.get("sasl_mechanism"):
        raise _fail(
            where,
            f"sasl_mechanism is set but security_protocol is {protocol}",
            "use SASL_PLAINTEXT or SASL_SSL, or drop sasl_mechanism",
        )
    tls = cluster.get("tls") or {}
    if not isinstance(tls, dict):
        raise _fail(where, "tls is not a mapping", "use tls: {ca_src: ..., cert_src: ..., key_src: ...}")
    if tls and not protocol.endswith("SSL"):
        raise _fail(where, f"tls is set but security_protocol is {protocol}", "use SSL or SASL_SSL")
    if bool(tls.get("cert_src")) != bool(tls.get("key_src")):
        raise _fail(where, "mutual TLS needs both tls.cert_src and tls.key_src", "set both or neither")
    if tls.get("key_password") and not tls.get("key_src"):
        raise _fail(where, "tls.key_password without tls.key_src", "set tls.key_src or drop the password")
    props_key = "consumer_properties" if source else "producer_properties"
    props = cluster.get(props_key) or {}
    if not isinstance(props, dict):
        raise _fail(where, f"{props_key} is not a mapping", f"use {props_key}: {{key: value}}")
    if source:
        if not str(cluster.get("group_id") or "").strip():
            raise _fail(
                where, "no group_id", "set group_id (every worker of this mirror uses the same group)"
            )
        if not (cluster.get("whitelist") or cluster.get("blacklist")):
            raise _fail(
                where,
                "no whitelist or blacklist",
                "set whitelist (Java regex, e.g. 'orders.*,payments'; '.*' for every topic) or blacklist",
            )
        streams = cluster.get("num_streams")
        if streams is not None and (not str(streams).isdigit() or int(streams) < 1):
            raise _fail(where, f"num_streams {streams!r}", "give a positive number")


def check_definitions(sources: list, target: dict) -> None:
    if not isinstance(sources, list) or not sources:
        raise _fail("kmirror_source_clusters", "is empty or not a list", "define at least one source cluster")
    check_cluster(target, "kmirror_target_cluster", source=False)
    seen = set()
    for i, s in enumerate(sources):
        name = str((s or {}).get("name") or "") if isinstance(s, dict) else ""
        where = f"kmirror_source_clusters[{i}]" + (f" ({name})" if name else "")
        if not NAME_RE.match(name):
            raise _fail(
                where,
                f"name {name!r} is not usable as a systemd instance and directory name",
                "use letters, digits, '.', '_' and '-' (e.g. east)",
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
