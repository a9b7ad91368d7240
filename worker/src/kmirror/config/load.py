"""Consumer and producer properties files → effective librdkafka settings.

The path is one-directional: parse (:mod:`kmirror.config.properties`) → translate Java and legacy keys
(:mod:`kmirror.config.translation`) → JAAS and key stores → safe defaults and refusals
(:mod:`kmirror.config.safety`) → librdkafka's own check of every key and value.
Everything here is pure except reading the files and librdkafka's offline check.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kmirror.config.client import ClientConfig
from kmirror.config.properties import load_properties
from kmirror.config.safety import Role
from kmirror.config.translate import translate
from kmirror.config.validate import finish, validate_with_librdkafka
from kmirror.errors import ConfigError


def load_client_config(
    path: str | os.PathLike[str],
    role: Role,
    *,
    allow_unsafe: bool = False,
    env: Mapping[str, str] | None = None,
    validate: bool = True,
) -> ClientConfig:
    """Read, translate, make safe and check one consumer or producer properties file."""
    origin = str(path)
    if not Path(path).is_file():
        raise ConfigError(
            "file not found", origin=origin, fix=f"give the path of an existing {role} properties file"
        )
    cfg = finish(translate(load_properties(path), role, origin, env), allow_unsafe=allow_unsafe)
    if validate:
        validate_with_librdkafka(cfg)
    return cfg
