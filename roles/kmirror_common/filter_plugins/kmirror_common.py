"""Filters every kmirror role shares (role kmirror_common, a dependency of each).

Selecting sources: every playbook and role reads one variable, ``kmirror_sources_selected`` (names of
source clusters, a list or a comma-separated string; empty means every source). The deprecated names
it replaced (CHANGELOG.md) are still read, with a warning naming the new variable
(``kmirror_sources_from_renamed``).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

# The deprecated variables kmirror_sources_selected replaced (CHANGELOG.md): read, with a warning.
SELECTION_RENAMED = (
    "kmirror_new_source",
    "kmirror_remove_source",
    "kmirror_restart_only",
    "kmirror_failover_source",
    "kmirror_audit_only",
    "kmirror_config_only",
    "kmirror_acls_only",
    "kmirror_topics_only",
    "kmirror_service_only",
)


def kmirror_source_names(value: object, variable: str = "kmirror_sources_selected") -> list[str]:
    """Names of source clusters from a list or a comma-separated string (``-e VAR=east,west``)."""
    if value is None:
        return []
    if isinstance(value, str):
        items: list = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise AnsibleFilterError(f"{variable} is {value!r}: give source names as a list or as NAME[,NAME...]")
    names: list[str] = []
    for item in items:
        if not isinstance(item, (str, int)) or isinstance(item, bool):
            raise AnsibleFilterError(f"{variable} holds {item!r}: give source names (strings)")
        name = str(item).strip()
        if name and name not in names:
            names.append(name)
    return names


def kmirror_sources_from_renamed(renamed: dict) -> list[str]:
    """The selection given with the names kmirror_sources_selected replaced (``renamed``: each such variable
    that is set -> its value); warns once per name. Two of them naming different sources is an error."""
    found: dict[str, list[str]] = {}
    for name in SELECTION_RENAMED:
        if name not in renamed:
            continue
        names = kmirror_source_names(renamed[name], name)
        shown = ",".join(names) if names else "NAME[,NAME...]"
        Display().warning(
            f"{name} is deprecated and will be removed in the next release: "
            f"use -e kmirror_sources_selected={shown} (docs/deployment.md, Selecting sources)"
        )
        if names:
            found[name] = names
    if len({tuple(v) for v in found.values()}) > 1:
        given = "; ".join(f"{k}={','.join(v)}" for k, v in found.items())
        raise AnsibleFilterError(
            f"{given} name different sources: set only kmirror_sources_selected (one list for every role)"
        )
    return next(iter(found.values()), [])


def kmirror_selected_sources(clusters: list, selected: object) -> list:
    """The source cluster definitions a run of a role handles: those named in ``selected``
    (kmirror_sources_selected), every one when it is empty. A name that is not a source fails."""
    names = kmirror_source_names(selected)
    if not names:
        return list(clusters)
    defined = [c.get("name") for c in clusters]
    unknown = [n for n in names if n not in defined]
    if unknown:
        raise AnsibleFilterError(
            f"kmirror_sources_selected names {', '.join(unknown)}, not in kmirror_source_clusters "
            f"(defined: {', '.join(map(str, defined))}): fix the name or add the source to the inventory"
        )
    return [c for c in clusters if c.get("name") in names]


class FilterModule:
    def filters(self) -> dict:
        return {
            "kmirror_selected_sources": kmirror_selected_sources,
            "kmirror_source_names": kmirror_source_names,
            "kmirror_sources_from_renamed": kmirror_sources_from_renamed,
        }
