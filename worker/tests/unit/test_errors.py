"""kmirror.errors: the problems collector gives one error or all of them."""

from __future__ import annotations

import pytest

from kmirror.errors import ConfigError, ConfigProblems, Problems


def test_problems_collector_flattens_and_raises_one_or_all():
    found = Problems()
    found.raise_any()  # nothing found: nothing raised
    with found.check():
        raise ConfigError("a", origin="f", key="k1")
    with pytest.raises(ConfigError) as one:
        found.raise_any()
    assert not isinstance(one.value, ConfigProblems) and one.value.key == "k1"
    with found.check():
        raise ConfigProblems([ConfigError("b", key="k2"), ConfigError("c", key="k3")])
    with pytest.raises(ConfigProblems) as many:
        found.raise_any()
    assert [p.key for p in many.value.problems] == ["k1", "k2", "k3"]
