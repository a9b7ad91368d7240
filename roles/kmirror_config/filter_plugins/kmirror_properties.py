"""Filter ``kmirror_client_properties``: the settings one client properties file holds, merged in Python.

The precedence is the worker's own (``kmirror.config.safety.completed``, also behind
``kmirror.config.safety.apply``): kmirror's safe defaults under the file's settings, each required setting
where the file leaves it unset.
The file's settings are, later winning: the role's tuning (socket buffers), connection and security (from
the cluster definition and this side's file paths), the inventory's ``consumer_properties`` /
``producer_properties``. An operator value that weakens a required setting is written as given and then
refused by ``kmirror check-config``: it can be extended, never silently weakened. Engine-owned settings are
not written (a file that sets them is refused).

The result is plain data for ``templates/client.properties.j2``, which writes each section's dict sorted:
``properties`` (every key, its value as the file spells it), ``sections`` (title, properties, notes: the
``why`` of required keys) and ``engine_owned``.
"""

from __future__ import annotations

from collections.abc import Mapping

SECTIONS = ("connection", "required", "defaults", "tuning", "operator")


class ClientPropertiesError(ValueError):
    pass


def _safety():  # noqa: ANN202 (the module, imported late so the error names the fix)
    try:
        from kmirror.config import safety
    except ImportError as exc:
        raise ClientPropertiesError(
            "the kmirror package is not importable by the Python running Ansible "
            f"({exc}); install it on the controller: make ansible-install (or pip install -e worker)"
        ) from None
    return safety


def _text(value: object) -> str:
    """A value as the properties file spells it (YAML booleans the Java way)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def connection(cluster: Mapping, side: str, files: Mapping, client_id: str) -> dict[str, str]:
    """Connection and security settings of one side, from its cluster definition and file paths."""
    protocol = str(cluster.get("security_protocol") or "PLAINTEXT").upper()
    tls = cluster.get("tls") or {}
    out = {
        "bootstrap.servers": str(cluster["bootstrap_servers"]).replace(" ", ""),
        "client.id": client_id,
        "security.protocol": protocol,
    }
    if side == "consumer":
        out["group.id"] = cluster["group_id"]
    if protocol.startswith("SASL_"):
        out["sasl.mechanism"] = str(cluster.get("sasl_mechanism") or "").upper()
        out["java.security.auth.login.config"] = files["jaas"]
    if tls.get("ca_src"):
        out["ssl.ca.location"] = files["ca"]
    if tls.get("cert_src"):
        out["ssl.certificate.location"] = files["cert"]
        out["ssl.key.location"] = files["key"]
    if tls.get("key_password"):
        out["ssl.key.password"] = tls["key_password"]
    if protocol.endswith("SSL") and "verify_hostname" in tls and not tls["verify_hostname"]:
        out["ssl.endpoint.identification.algorithm"] = "none"
    return {k: _text(v) for k, v in out.items()}


def client_properties(
    cluster: Mapping, side: str, files: Mapping, client_id: str, tuning: Mapping | None = None
) -> dict:
    """Every setting of one side's properties file, with the section each comes from."""
    safety = _safety()
    if side not in safety.ROLES:
        raise ClientPropertiesError(f"side {side!r}: use consumer or producer")
    layers = {
        "tuning": {str(k): _text(v) for k, v in (tuning or {}).items()},
        "connection": connection(cluster, side, files, client_id),
        "operator": {str(k): _text(v) for k, v in (cluster.get(f"{side}_properties") or {}).items()},
    }
    given: dict[str, str] = {}
    origin: dict[str, str] = {}
    for name in ("tuning", "connection", "operator"):  # later wins
        given.update(layers[name])
        origin.update(dict.fromkeys(layers[name], name))
    final = safety.completed(given, side)
    why = {r.key: r.why for r in safety.REQUIRED[side]}
    for key in final:
        origin.setdefault(key, "required" if key in why else "defaults")
    titles = {
        "connection": "Connection and security",
        "required": "Required by kmirror for no data loss (`kmirror defaults`); weakening one fails "
        "`kmirror check-config`",
        "defaults": f"kmirror's safe defaults (`kmirror defaults`); {side}_properties may change them",
        "tuning": "Tuning from the kmirror_config role (cross-data-centre socket buffers, ...)",
        "operator": f"From the inventory: {side}_properties",
    }
    sections = []
    for name in SECTIONS:
        props = {k: v for k, v in final.items() if origin[k] == name}
        if props:
            notes = {k: why[k] for k in props} if name == "required" else {}
            sections.append({"title": titles[name], "properties": props, "notes": notes})
    return {
        "properties": dict(sorted(final.items())),
        "sections": sections,
        "engine_owned": dict(safety.ENGINE_OWNED[side]),
    }


def kmirror_client_properties(
    cluster: Mapping, side: str, files: Mapping, client_id: str, tuning: Mapping | None = None
) -> dict:
    try:
        return client_properties(cluster, side, files, client_id, tuning)
    except (ClientPropertiesError, KeyError) as exc:
        from ansible.errors import AnsibleFilterError

        raise AnsibleFilterError(f"{side} properties of {cluster.get('name', '?')}: {exc}") from None


class FilterModule:
    def filters(self) -> dict:
        return {"kmirror_client_properties": kmirror_client_properties}
