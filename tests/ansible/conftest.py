"""Fast tests of the deployment toolkit: templates rendered with jinja2, Ansible plugins and module logic.

Templates are rendered the way Ansible's template module renders them (trim_blocks, trailing newline kept),
then parsed by the worker's own parsers and checked by its config pipeline.
"""

from __future__ import annotations

from types import ModuleType

import jinja2
import pytest
from ansible_harness import ROLES, TEMPLATES, load_module

ESCAPE = load_module(ROLES / "kmirror_common/filter_plugins/kmirror_escape.py", "kmirror_escape_filters")


@pytest.fixture(scope="session")
def render():
    # Ansible's template module: trim_blocks=True, lstrip_blocks=False, keep_trailing_newline=True.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    # The escaping filters every role has (kmirror_common, a dependency of each).
    env.filters.update(ESCAPE.FilterModule().filters())

    def _render(name: str, **variables: object) -> str:
        return env.get_template(name).render(**variables)

    return _render


@pytest.fixture(scope="session")
def config_filters() -> ModuleType:
    return load_module(ROLES / "kmirror_config/filter_plugins/kmirror_config.py", "kmirror_config_filters")


@pytest.fixture(scope="session")
def safety_table() -> dict:
    lookup = load_module(ROLES / "kmirror_config/lookup_plugins/kmirror_safety.py", "kmirror_safety_lookup")
    return lookup.LookupModule().run([])[0]
