"""Filters of the kmirror_acls role."""

from __future__ import annotations

import os
import sys

from ansible.errors import AnsibleFilterError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils"))
from kmirror_acl_bindings import AclPatternError, principal_for, whitelist_problems


def kmirror_acl_principal(cluster: dict) -> str:
    """The principal the brokers see for a cluster definition's credentials."""
    try:
        return principal_for(cluster)
    except (AclPatternError, KeyError) as exc:
        raise AnsibleFilterError(f"cluster {cluster.get('name', '?')}: {exc}") from None


def kmirror_acl_whitelist_problems(sources: list) -> list[str]:
    """One message per source whose whitelist the worker refuses (empty, blank, unreadable): the role asserts
    there is none before it grants anything (module_utils/kmirror_acl_bindings.py, whitelist_problems)."""
    return whitelist_problems(sources)


class FilterModule:
    def filters(self) -> dict:
        return {
            "kmirror_acl_principal": kmirror_acl_principal,
            "kmirror_acl_whitelist_problems": kmirror_acl_whitelist_problems,
        }
