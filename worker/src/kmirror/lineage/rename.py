"""Destination topic names: ``--topic.rename.format`` (``${topic}`` and ``${source}``, e.g.
``${source}.${topic}``, MirrorMaker 2's layout, or ``${topic}.replica``); without it a destination topic
has its source's name.

A format holds ``${topic}`` exactly once, so two source topics of one source never get one destination
name; ``${source}`` is the source's name (``--source.name``, the inventory's name). With a format that
holds ``${source}``, a topic that is itself a renamed copy from the target (the format with the target's
name, ``--target.name``) is never mirrored back: two data centres mirroring each other with
``${source}.${topic}`` hold ``events`` and ``east.events``, never ``west.east.events``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kmirror.errors import ConfigError

KEY = "--topic.rename.format"
FIELDS = ("topic", "source")
_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
# The characters Kafka allows in topic names.
_LEGAL = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Rename:
    """The destination name of each source topic of one source (identity without a format)."""

    prefix: str = ""
    suffix: str = ""
    # The names a topic copied from the target under this format has (prefix, suffix); None: not known.
    back: tuple[str, str] | None = None

    @property
    def identity(self) -> bool:
        return not self.prefix and not self.suffix

    def __call__(self, topic: str) -> str:
        return f"{self.prefix}{topic}{self.suffix}"

    def source_topic(self, destination: str) -> str | None:
        """The source topic whose destination this is (None: no source topic maps to it)."""
        n = len(destination) - len(self.prefix) - len(self.suffix)
        if n <= 0 or not destination.startswith(self.prefix) or not destination.endswith(self.suffix):
            return None
        return destination[len(self.prefix) : len(destination) - len(self.suffix)]

    def came_from_target(self, topic: str) -> bool:
        """The source topic is a renamed copy of a target topic (mirroring it would copy it back)."""
        if self.back is None:
            return False
        prefix, suffix = self.back
        return len(topic) > len(prefix) + len(suffix) and topic.startswith(prefix) and topic.endswith(suffix)


SAME_NAME = Rename()


def _parts(fmt: str, source: str, what: str) -> tuple[str, str]:
    names = _PLACEHOLDER.findall(fmt)
    unknown = sorted({n for n in names if n not in FIELDS})
    if unknown:
        raise ConfigError(
            f"unknown placeholder ${{{unknown[0]}}} in {fmt!r}",
            key=KEY,
            fix="use ${topic} and ${source} only, e.g. ${source}.${topic}",
        )
    count = names.count("topic")
    if count != 1:
        why = "every source topic would get the same destination" if count == 0 else "the names are ambiguous"
        raise ConfigError(
            f"{fmt!r} holds ${{topic}} {count} times: {why}",
            key=KEY,
            fix="put ${topic} in the format exactly once, e.g. ${source}.${topic} or ${topic}.replica",
        )
    rendered = fmt.replace("${source}", source)
    prefix, suffix = rendered.split("${topic}")
    for part in (prefix, suffix):
        if part and not _LEGAL.fullmatch(part):
            raise ConfigError(
                f"{fmt!r} with {what} {source!r} gives destination names with characters Kafka refuses "
                f"({prefix}<topic>{suffix})",
                key=KEY,
                fix="use letters, digits, '.', '_' and '-' only (and source names made of them)",
            )
    return prefix, suffix


def rename(fmt: str | None, source: str, target: str | None = None) -> Rename:
    """The destination names of ``source``'s topics; refused (ConfigError, exit 2) when the format could
    map two topics to one name or give names Kafka refuses."""
    if not fmt:
        return Rename()
    prefix, suffix = _parts(fmt, source, "source")
    back = _parts(fmt, target, "target") if target and "${source}" in fmt else None
    return Rename(prefix, suffix, back)
