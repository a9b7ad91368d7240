"""Which names are kmirror instance names: the one rule, for names the roles find on a host.

An instance is named after its source cluster: kmirror@<name>.service, <config dir>/<name>/, the audit's
kmirror-audit-<name>.timer. The rule is the cluster definition's (the ``pattern`` of key ``name`` in
roles/kmirror_config/files/cluster_definition.yml, matched whole: 1-63 letters, digits, '.', '_' and '-',
starting with a letter or digit), so '.', '..', anything with a '/' or a line break is no instance name.
kmirror_service keeps to these names when it removes the instances it finds on a host (a unit file
kmirror@...service would otherwise name '..', and <config dir>/.. be removed); kmirror_audit checks its
instances' names with it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

CLUSTER_DEFINITION = (
    Path(__file__).resolve().parents[2] / "kmirror_config" / "files" / "cluster_definition.yml"
)


@lru_cache(maxsize=1)
def instance_name_pattern() -> re.Pattern[str]:
    """The cluster definition's name rule (read once)."""
    import yaml

    definition = yaml.safe_load(CLUSTER_DEFINITION.read_text(encoding="utf-8"))
    return re.compile(next(e["pattern"] for e in definition["keys"] if e["key"] == "name"))


def kmirror_instance_names(names: list) -> list[str]:
    """The names of ``names`` that are instance names, in their order (anything else is left out)."""
    pattern = instance_name_pattern()
    return [n for n in names if isinstance(n, str) and pattern.fullmatch(n)]


class FilterModule:
    def filters(self) -> dict:
        return {"kmirror_instance_names": kmirror_instance_names}
