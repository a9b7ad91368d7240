"""Which source topic configs a destination topic takes once it exists: the disaster-recovery copy's guard.

A destination topic is created with the configs set on its source topic (:mod:`kmirror.mirror.topics`), and
a source config changed later reaches it at the next topic refresh. Whoever may alter a source topic's
configs could then delete the copy's records: ``retention.ms=1`` on the source purged the target's copy
within one retention check of its brokers (issue 34, item 5). The keys ``--config.properties.protect``
names (Java regexes matched against the whole key, comma-separated as MirrorMaker 2's
``config.properties.exclude``) are therefore taken from the source only when the destination topic is
created (it holds nothing yet) and, afterwards, only by a change that makes the copy keep at least as much:

* ``retention.ms``, ``retention.bytes``: a higher value, or -1 (unlimited);
* ``delete.retention.ms``, ``min.compaction.lag.ms``, ``max.compaction.lag.ms``: a higher value (tombstones
  and older values kept longer);
* ``segment.ms``, ``segment.bytes``: a higher value (a tiny one makes the target's brokers roll a segment
  per write: files and memory maps without end);
* ``max.message.bytes``: a higher value (a lower one makes the target refuse records the source holds, and
  the mirror stop);
* ``cleanup.policy``: a policy that drops one of the copy's (``compact,delete`` to ``compact`` or to
  ``delete``), never one that adds ``compact`` or ``delete``;
* any other protected key: never.

A protected key the source no longer sets is never removed from the destination (the target's default may
keep less), and one set on the destination by hand is kept. docs/security.md has the reasoning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kmirror.config.filters import JavaRegex, MatchBudgetExceeded, compile_filter
from kmirror.errors import ConfigError

OPTION = "--config.properties.protect"
NOTHING = "none"  # the option's value for: nothing protected (every change is copied, as before)
DEFAULT_PROTECTED = ",".join(
    key.replace(".", r"\.")
    for key in (
        "retention.ms",
        "retention.bytes",
        "cleanup.policy",
        "delete.retention.ms",
        "min.compaction.lag.ms",
        "max.compaction.lag.ms",
        "segment.ms",
        "segment.bytes",
        "max.message.bytes",
    )
)


def _number(value: str) -> int | None:
    try:
        return int(value.strip())
    except ValueError:
        return None


def _limit(new: str, old: str) -> bool:
    """A size or age limit where a negative value is unlimited: ``new`` keeps at least what ``old`` does."""
    n, o = _number(new), _number(old)
    if n is None or o is None:
        return False
    return n < 0 or (o >= 0 and n >= o)


def _at_least(new: str, old: str) -> bool:
    n, o = _number(new), _number(old)
    return n is not None and o is not None and n >= o


def _policies(value: str) -> frozenset[str]:
    return frozenset(p.strip().lower() for p in value.split(",") if p.strip())


def _fewer_policies(new: str, old: str) -> bool:
    """``cleanup.policy``: ``new`` removes records in no way that ``old`` does not."""
    return _policies(new) <= _policies(old)


# How to tell that a value keeps at least as much as another, per key; a protected key not listed here never
# changes once the destination topic exists.
KEEPS_AS_MUCH: dict[str, Callable[[str, str], bool]] = {
    "retention.ms": _limit,
    "retention.bytes": _limit,
    "delete.retention.ms": _at_least,
    "min.compaction.lag.ms": _at_least,
    "max.compaction.lag.ms": _at_least,
    "segment.ms": _at_least,
    "segment.bytes": _at_least,
    "max.message.bytes": _at_least,
    "cleanup.policy": _fewer_policies,
}

RULES: dict[Callable[[str, str], bool], str] = {
    _limit: "a higher value or -1 (unlimited)",
    _at_least: "a higher value",
    _fewer_policies: "a policy that removes one of the copy's",
}


@dataclass(frozen=True)
class ConfigGuard:
    """The protected keys (``--config.properties.protect``). Picklable: holds the raw option only, compiled
    on first use. Bad input is a ConfigError (:meth:`check`)."""

    raw: str = DEFAULT_PROTECTED
    _compiled: list[JavaRegex | None] = field(default_factory=list, compare=False, repr=False)

    def __getstate__(self) -> dict[str, str]:
        return {"raw": self.raw}

    def __setstate__(self, state: dict[str, str]) -> None:
        object.__setattr__(self, "raw", state["raw"])
        object.__setattr__(self, "_compiled", [])

    def check(self) -> ConfigGuard:
        """The guard, its patterns compiled; ConfigError (one line: the option, the problem, the fix)."""
        self._pattern()
        return self

    def _pattern(self) -> JavaRegex | None:
        if not self._compiled:
            text = self.raw.strip()
            if not text.strip(",| "):
                raise ConfigError(
                    f"empty list of protected topic configs {self.raw!r}",
                    key=OPTION,
                    fix=f"give '{NOTHING}' to protect none (a source topic's config changes then reach the "
                    f"destination whatever they delete), or leave it out for the default {DEFAULT_PROTECTED}",
                )
            self._compiled.append(None if text.lower() == NOTHING else compile_filter(text, OPTION))
        return self._compiled[0]

    def protects(self, key: str) -> bool:
        pattern = self._pattern()
        if pattern is None:
            return False
        try:
            return pattern.fullmatch(key)
        except MatchBudgetExceeded:
            return True  # a pattern too costly for this key: the safe side

    def takes(self, key: str, new: str | None, old: str | None) -> bool:
        """Whether an existing destination topic takes the source's value ``new`` of ``key`` (None: the
        source no longer sets it) in place of its own effective value ``old`` (None: it has none)."""
        if not self.protects(key):
            return True
        keeps = KEEPS_AS_MUCH.get(key)
        return keeps is not None and new is not None and old is not None and keeps(new, old)

    def rule(self, key: str) -> str:
        """When a protected key is taken from the source, in words."""
        keeps = KEEPS_AS_MUCH.get(key)
        later = f"later only {RULES[keeps]}" if keeps is not None else "never later"
        return f"taken from the source when the destination topic is created, {later}"


DEFAULT_GUARD = ConfigGuard()
