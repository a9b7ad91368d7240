"""Filters every kmirror role shares (role kmirror_common, a dependency of each)."""

from __future__ import annotations


def kmirror_selected_sources(clusters: list, only: list | None) -> list:
    """The source cluster definitions a run of a role handles: those named in ``only`` (a role's
    ``*_only`` variable, e.g. set by playbooks/add_source_cluster.yml), every one when it is empty."""
    names = list(only or [])
    return [c for c in clusters if c.get("name") in names] if names else list(clusters)


class FilterModule:
    def filters(self) -> dict:
        return {"kmirror_selected_sources": kmirror_selected_sources}
