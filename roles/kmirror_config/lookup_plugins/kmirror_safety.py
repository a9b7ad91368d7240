"""Lookup plugin ``kmirror_safety``: the worker's data-loss-safe client settings, read on the controller.

The one source of truth is ``kmirror.config.safety`` in the worker package (the same table
``kmirror defaults``
prints). This plugin imports it on the controller, so the templates never hold a copy that could drift.
"""

# ruff: noqa: E402 (Ansible plugin layout: the DOCUMENTATION strings come before the imports)
from __future__ import annotations

DOCUMENTATION = r"""
name: kmirror_safety
short_description: kmirror's required, default and engine-owned client settings
description:
  - "Returns C(kmirror.config.safety.table()) from the kmirror package installed on the controller
    (the output of C(kmirror defaults)) as one dictionary: for each of C(consumer) and C(producer),
    C(required) (key, value, why), C(defaults) (key, value) and C(engine_owned) (key, value)."
  - The controller needs the worker package importable by the Python that runs Ansible
    (C(make ansible-install) installs it editable into the project venv).
options:
  _terms:
    description: Optional role names to return (C(consumer), C(producer)); all when none is given.
    required: false
"""

EXAMPLES = r"""
- name: Read the safe settings
  ansible.builtin.set_fact:
    kmirror_config_safety: "{{ lookup('kmirror_safety') }}"
"""

RETURN = r"""
_raw:
  description: The table, as one dictionary (a one-element list for the lookup machinery).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase


def safety_table() -> dict:
    try:
        from kmirror.config import safety
    except ImportError as exc:
        raise AnsibleLookupError(
            "the kmirror package is not importable by the Python running Ansible "
            f"({exc}); install it on the controller: make ansible-install (or pip install -e worker)"
        ) from None
    return safety.table()


class LookupModule(LookupBase):
    def run(self, terms: list, variables: dict | None = None, **kwargs: object) -> list[dict]:
        table = safety_table()
        unknown = [t for t in terms if t not in table]
        if unknown:
            raise AnsibleLookupError(f"unknown client role(s) {unknown}; use consumer or producer")
        return [{t: table[t] for t in terms} if terms else table]
