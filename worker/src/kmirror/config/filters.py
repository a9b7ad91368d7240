"""Topic filters with MirrorMaker's rules: the one place that decides which topics are mirrored.

* ``--whitelist``/``--include`` and ``--blacklist``/``--exclude`` are Java regular expressions matched
  against the whole topic name; a comma means ``|``; white space and surrounding quotes are dropped
  (topic names cannot hold them), as MirrorMaker did.
* Include and exclude may be combined: a topic is mirrored when it matches the include (everything
  when none is given) and does not match the exclude.
* Internal topics (``__consumer_offsets``, ``__transaction_state``, any name starting ``__``) are
  never mirrored, whatever the filters say.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from kmirror.errors import ConfigError

INTERNAL_PREFIX = "__"

# Java's POSIX and java.lang.Character classes, as Python character-class bodies.
_PROPERTY_CLASSES = {
    "Lower": "a-z",
    "Upper": "A-Z",
    "ASCII": "\\x00-\\x7f",
    "Alpha": "a-zA-Z",
    "Digit": "0-9",
    "Alnum": "a-zA-Z0-9",
    "Punct": "!-/:-@\\[-`{-~",
    "Graph": "!-~",
    "Print": " -~",
    "Blank": " \\t",
    "Cntrl": "\\x00-\\x1f\\x7f",
    "XDigit": "0-9a-fA-F",
    "Space": " \\t\\n\\x0b\\f\\r",
    "javaLowerCase": "a-z",
    "javaUpperCase": "A-Z",
    "javaWhitespace": " \\t\\n\\x0b\\f\\r",
    "L": "a-zA-Z",
    "IsAlphabetic": "a-zA-Z",
    "IsDigit": "0-9",
    "N": "0-9",
}


_INLINE_FLAGS = re.compile(r"\(\?([idmsuxU-]+)\)")


def _bad(option: str, pattern: str, problem: str, fix: str) -> ConfigError:
    return ConfigError(f"{problem} in {pattern!r}", key=option, fix=fix)


def java_regex_to_python(pattern: str, option: str = "--whitelist") -> str:
    """Translate the Java regex constructs that Python spells differently; refuse those it lacks."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = 0
    # Java's (?flags) applies from where it stands to the end of its group, across later alternatives;
    # Python allows flags only at the start, so each affected stretch becomes a scoped (?flags:...).
    scoped: list[list[str]] = [[]]  # per open group: scoped flag groups currently open
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            d = pattern[i + 1]
            if d == "Q":  # \Q...\E quotes literally
                end = pattern.find("\\E", i + 2)
                literal = pattern[i + 2 :] if end < 0 else pattern[i + 2 : end]
                out.append(re.escape(literal))
                i = n if end < 0 else end + 2
                continue
            if d in "pP" and i + 2 < n and pattern[i + 2] == "{":
                close = pattern.find("}", i + 3)
                name = pattern[i + 3 : close] if close > 0 else ""
                name = name.removeprefix("Is") if name.removeprefix("Is") in _PROPERTY_CLASSES else name
                if name not in _PROPERTY_CLASSES:
                    raise _bad(
                        option,
                        pattern,
                        f"unsupported class \\{d}{{{name}}}",
                        "use an explicit character class such as [a-z]",
                    )
                body = _PROPERTY_CLASSES[name]
                if in_class:
                    if d == "P":
                        raise _bad(
                            option,
                            pattern,
                            "negated property inside [...]",
                            "use an explicit character class",
                        )
                    out.append(body)
                else:
                    out.append(("[^" if d == "P" else "[") + body + "]")
                i = close + 1
                continue
            if d == "z":
                out.append("\\Z")
            elif d == "Z":
                out.append("(?=\\n?\\Z)")
            elif d == "h":
                out.append("[ \\t\\xa0\\u1680\\u180e\\u2000-\\u200a\\u202f\\u205f\\u3000]")
            elif d in "GRXk":
                raise _bad(option, pattern, f"unsupported construct \\{d}", "rewrite the pattern without it")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":
            if in_class and pattern.startswith("[", i):
                raise _bad(
                    option,
                    pattern,
                    "nested character class (Java union/intersection)",
                    "write the union as one class, e.g. [a-dm-p]",
                )
            in_class += 1
            out.append(c)
            if pattern.startswith("^", i + 1):
                out.append("^")
                i += 1
            if pattern.startswith("]", i + 1):  # a leading ] is literal
                out.append("\\]")
                i += 1
            i += 1
            continue
        if not in_class:
            flags = _INLINE_FLAGS.match(pattern, i)
            if flags:
                kept = "".join(f for f in flags.group(1) if f in "imsx-").strip("-")
                if kept and (out or i > 0):
                    out.append(f"(?{kept}:")
                    scoped[-1].append(kept)
                elif kept:
                    out.append(f"(?{kept})")
                i = flags.end()
                continue
            if c == "(":
                scoped.append([])
            elif c == ")" and len(scoped) > 1:
                out.append(")" * len(scoped.pop()))
            elif c == "|" and scoped[-1]:
                out.append(")" * len(scoped[-1]) + "|" + "".join(f"(?{f}:" for f in scoped[-1]))
                i += 1
                continue
        if c == "]" and in_class:
            in_class -= 1
        elif c == "&" and in_class and pattern.startswith("&&", i):
            raise _bad(
                option, pattern, "character class intersection (&&)", "write the intersection as one class"
            )
        elif c == "(" and pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    out.append(")" * len(scoped[0]))
    return "".join(out)


def mirrormaker_pattern(raw: str) -> str:
    """MirrorMaker's preprocessing: drop white space and quotes, a comma outside {..} and [..] means |."""
    text = re.sub(r"\s+", "", raw).strip("\"'")
    out, depth_brace, depth_class, escaped = [], 0, 0, False
    for c in text:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == "[":
            depth_class += 1
        elif c == "]" and depth_class:
            depth_class -= 1
        elif c == "{" and not depth_class:
            depth_brace += 1
        elif c == "}" and depth_brace:
            depth_brace -= 1
        elif c == "," and not depth_brace and not depth_class:
            out.append("|")
            continue
        out.append(c)
    return "".join(out)


def compile_filter(raw: str, option: str) -> re.Pattern[str]:
    pattern = mirrormaker_pattern(raw)
    if not pattern:
        raise ConfigError("empty topic pattern", key=option, fix=f"give a regex, e.g. {option} 'orders.*'")
    try:
        return re.compile(java_regex_to_python(pattern, option))
    except re.error as exc:
        raise _bad(option, raw, f"invalid regex ({exc})", "correct the Java regular expression") from None


@dataclass(frozen=True)
class TopicFilter:
    """Which topics to mirror. Picklable (holds only the raw patterns), compiled once on first use."""

    include: str | None = None
    exclude: str | None = None
    _compiled: list[re.Pattern[str] | None] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.compile()

    def compile(self) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
        if not self._compiled:
            self._compiled.append(compile_filter(self.include, "--whitelist") if self.include else None)
            self._compiled.append(compile_filter(self.exclude, "--blacklist") if self.exclude else None)
        return self._compiled[0], self._compiled[1]

    def __getstate__(self) -> dict[str, str | None]:
        return {"include": self.include, "exclude": self.exclude}

    def __setstate__(self, state: dict[str, str | None]) -> None:
        object.__setattr__(self, "include", state["include"])
        object.__setattr__(self, "exclude", state["exclude"])
        object.__setattr__(self, "_compiled", [])

    def matches(self, topic: str) -> bool:
        if topic.startswith(INTERNAL_PREFIX):
            return False
        inc, exc = self.compile()
        if inc is not None and inc.fullmatch(topic) is None:
            return False
        return exc is None or exc.fullmatch(topic) is None

    def select(self, topics: Iterable[str]) -> list[str]:
        return sorted(t for t in topics if self.matches(t))

    def describe(self) -> str:
        parts = [
            f"include {self.include!r}" if self.include else "include all",
            *([f"exclude {self.exclude!r}"] if self.exclude else []),
            "never internal (__*)",
        ]
        return ", ".join(parts)
