"""Consumer and producer properties files → effective librdkafka settings.

The path is one-directional: parse (:mod:`kmirror.config.properties`) → translate Java and legacy keys
(:mod:`kmirror.config.translation`) → JAAS and key stores → safe defaults and refusals
(:mod:`kmirror.config.safety`) → librdkafka's own check of every key and value.
Everything here is pure except reading the files and librdkafka's offline check.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from kmirror.config import translation
from kmirror.config.client import ClientConfig, admin_settings
from kmirror.config.properties import load_properties
from kmirror.config.safety import Role
from kmirror.config.translate import translate
from kmirror.config.validate import check_unknown_keys, finish, validate_with_librdkafka
from kmirror.errors import Problems


def maps_to(key: str, role: Role, target: str) -> bool:
    """Whether a key of a properties file sets librdkafka's `target` (itself, or a Java key renamed to it)."""
    rule = translation.rule_for(key, role)
    return key == target or (rule is not None and rule.target == target)


def role_of(props: Mapping[str, str]) -> Role:
    """A file whose role is not given: a consumer file when it names a group, else a producer file."""
    return "consumer" if any(maps_to(k, "consumer", "group.id") for k in props) else "producer"


def load_client_config(
    path: str | os.PathLike[str],
    role: Role | None,
    *,
    allow_unsafe: bool = False,
    env: Mapping[str, str] | None = None,
    validate: bool = True,
    fallback: Mapping[str, str] | None = None,
    problems: Problems | None = None,
) -> ClientConfig:
    """Read, translate, make safe and check one consumer or producer properties file.

    `role` None: taken from the file (:func:`role_of`), for files that only carry connection settings
    (`kmirror lag --command-config`, the audit's). `fallback`: librdkafka settings used where the file
    sets neither the key nor a Java key translated to it (e.g. brokers given on the command line).
    Every problem of the file is found in one pass: raised together, or added to `problems` when given
    (then the configuration returned may be partial; a file that cannot be read at all still raises)."""
    origin = str(path)
    notes: list[str] = []  # how non-ASCII bytes were read
    props = load_properties(path, notes, kind=f"{role or 'client'} properties")
    role = role or role_of(props)
    for key, value in (fallback or {}).items():
        if not any(maps_to(k, role, key) for k in props):
            props[key] = value
    # Every problem of the file in one pass: translation, safety, then librdkafka's own check.
    found = Problems()
    cfg = finish(translate(props, role, origin, env, found), allow_unsafe=allow_unsafe, problems=found)
    cfg.notes[:0] = notes
    if validate:
        with found.check():
            # A file with problems already: only the unknown keys (its settings need not add up yet).
            (check_unknown_keys if found else validate_with_librdkafka)(cfg)
    if problems is None:
        found.raise_any()
    else:
        problems.found.extend(found.found)
    return cfg


def connection_settings(path: str | os.PathLike[str], bootstrap: str | None = None) -> dict[str, str]:
    """The connection and security settings of a properties file: a consumer or producer file of the
    mirror, or a `--command-config` file (security settings only), through the same pipeline as
    `kmirror run` (:func:`kmirror.config.load_client_config`, unsafe values allowed: nothing is mirrored
    with them); `bootstrap` (from the command line) wins over the file's."""
    fallback = {"bootstrap.servers": bootstrap} if bootstrap else None
    settings = admin_settings(load_client_config(path, None, allow_unsafe=True, fallback=fallback).settings)
    if bootstrap:
        settings["bootstrap.servers"] = bootstrap
    return settings
