"""Topic filters with MirrorMaker's rules: the one place that decides which topics are mirrored.

* ``--whitelist``/``--include`` and ``--blacklist``/``--exclude`` are Java regular expressions matched
  against the whole topic name. The raw option is preprocessed as MirrorMaker's TopicFilter did: white
  space at both ends trimmed, spaces dropped, surrounding quotes dropped, and a comma means ``|``; except
  that kmirror keeps a comma inside a counted repetition ``{m,n}`` or a character class ``[...]``
  (MirrorMaker turned ``a{1,2}`` into the invalid ``a{1|2}``).
* A pattern that is empty after that preprocessing (an unset shell variable: ``--whitelist "$TOPICS"``)
  is refused: MirrorMaker mirrored no topic with it, an earlier kmirror every topic.
* Include and exclude may be combined: a topic is mirrored when it matches the include (everything
  when none is given) and does not match the exclude.
* Internal topics (``__consumer_offsets``, ``__transaction_state``, any name starting ``__``) are
  never mirrored, whatever the filters say.

The patterns are parsed here with java.util.regex's grammar and matched by a small engine of this
module, never by Python's ``re``: a backtracking engine takes exponential time on patterns such as
``(\\w+\\.?)*-internal`` against a long topic name, and anyone who can create a topic on the source could
stall every stream (the filter runs in the stream loop at each topic refresh). This engine is a
backtracking matcher with Java's priority order that never visits the same (instruction, position) state
twice, so one match costs at most (program size x name length) steps for patterns without atomic groups,
possessive quantifiers and look-arounds, and one more factor of the name length with them; a step budget
bounds even that. Constructs whose Java meaning this engine does not reproduce exactly are refused with
a one-line :class:`ConfigError` (``worker/tests/unit/config/test_filters_java.py`` compares the decisions with
java.util.regex and Apache Kafka's own TopicFilter over thousands of generated patterns).
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kmirror.errors import ConfigError, one_line

log = logging.getLogger(__name__)

INTERNAL_PREFIX = "__"

MAX_NESTING = 100  # groups and classes inside each other
MAX_REPEAT = 1000  # the largest count in {m,n}
MAX_PROGRAM = 200_000  # instructions of a compiled pattern (counted repetitions are unrolled)
STEP_BUDGET = 2_000_000  # instructions one match may execute (far above what a topic name needs)

Pred = Callable[[str], bool]
Check = Callable[[str, int], bool]


_NESTING_FIX = "write the pattern with less nesting"


def _bad(option: str, raw: str, problem: str, fix: str) -> ConfigError:
    shown = repr(raw) if len(raw) <= 200 else f"{raw[:100]!r}... ({len(raw)} characters)"
    return ConfigError(f"{one_line(problem)} in {shown}", key=option, fix=fix)


# --- MirrorMaker's preprocessing --------------------------------------------------------------------

_JAVA_TRIM = "".join(chr(c) for c in range(0x21))


def mirrormaker_pattern(raw: str) -> str:
    """MirrorMaker's preprocessing of a raw filter option, as Kafka's TopicFilter: trim (Java's
    ``String.trim``), a comma means ``|``, spaces dropped, leading and trailing quotes dropped; except
    that a comma inside ``{m,n}`` or ``[...]`` is kept (MirrorMaker replaced every comma)."""
    text = raw.strip(_JAVA_TRIM)
    out: list[str] = []
    depth_brace = depth_class = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            if text[i + 1] == "Q":  # \Q...\E: MirrorMaker's comma rule applies inside too
                end = text.find("\\E", i + 2)
                end = n if end < 0 else end + 2
                out.append(text[i:end].replace(",", "|"))
                i = end
                continue
            out.append(text[i : i + 2])
            i += 2
            continue
        if c == "[":
            depth_class += 1
        elif c == "]" and depth_class:
            depth_class -= 1
        elif c == "{" and not depth_class:
            depth_brace += 1
        elif c == "}" and depth_brace:
            depth_brace -= 1
        elif c == "," and not depth_brace and not depth_class:
            c = "|"
        out.append(c)
        i += 1
    text = "".join(out).replace(" ", "")
    return text.lstrip("\"'").rstrip("\"'")


# --- character predicates ---------------------------------------------------------------------------

_LINE_TERMINATORS = "\n\r\u0085\u2028\u2029"


def _ranges(*spans: tuple[str, str]) -> Pred:
    table = frozenset(chr(c) for lo, hi in spans for c in range(ord(lo), ord(hi) + 1))
    return table.__contains__


def _chars(text: str) -> Pred:
    return frozenset(text).__contains__


def _not(p: Pred) -> Pred:
    return lambda c: not p(c)


def _any_of(preds: list[Pred]) -> Pred:
    if len(preds) == 1:
        return preds[0]
    return lambda c: any(p(c) for p in preds)


def _all_of(preds: list[Pred]) -> Pred:
    if len(preds) == 1:
        return preds[0]
    return lambda c: all(p(c) for p in preds)


def _category(*cats: str) -> Pred:
    wanted = frozenset(cats)
    return lambda c: unicodedata.category(c) in wanted or unicodedata.category(c)[0] in wanted


def _tabled(p: Pred) -> Pred:
    """The same predicate, answering ASCII characters from a precomputed set."""
    ascii_yes = frozenset(chr(c) for c in range(128) if p(chr(c)))
    return lambda c: (c in ascii_yes) if c < "\x80" else p(c)


_DIGIT = _ranges(("0", "9"))
_WORD = _ranges(("a", "z"), ("A", "Z"), ("0", "9"), ("_", "_"))
_SPACE = _chars(" \t\n\x0b\f\r")
_HSPACE = _chars(" \t\xa0\u1680\u180e\u202f\u205f\u3000" + "".join(chr(c) for c in range(0x2000, 0x200B)))
_VSPACE = _chars("\n\x0b\f\r\x85\u2028\u2029")
_ESCAPE_CLASSES: dict[str, Pred] = {
    "d": _DIGIT,
    "D": _not(_DIGIT),
    "w": _WORD,
    "W": _not(_WORD),
    "s": _SPACE,
    "S": _not(_SPACE),
    "h": _HSPACE,
    "H": _not(_HSPACE),
    "v": _VSPACE,
    "V": _not(_VSPACE),
}

_LOWER = _ranges(("a", "z"))
_UPPER = _ranges(("A", "Z"))
_ALPHA = _ranges(("a", "z"), ("A", "Z"))
_PUNCT = _ranges(("!", "/"), (":", "@"), ("[", "`"), ("{", "~"))
_JAVA_WHITESPACE: Pred = lambda c: (  # noqa: E731 - Character.isWhitespace
    c in "\t\n\x0b\f\r\x1c\x1d\x1e\x1f"
    or (unicodedata.category(c) in ("Zs", "Zl", "Zp") and c not in "\xa0\u2007\u202f")
)
# POSIX classes (US-ASCII only, as Java without UNICODE_CHARACTER_CLASS), java.lang.Character methods
# and a few Unicode properties. The case-related ones mean different things under (?i) on different
# Java versions: they are refused there.
_PROPERTIES: dict[str, tuple[Pred, bool]] = {  # name: (predicate, case-related)
    "Lower": (_LOWER, True),
    "Upper": (_UPPER, True),
    "ASCII": (_ranges(("\x00", "\x7f")), False),
    "Alpha": (_ALPHA, False),
    "Digit": (_DIGIT, False),
    "Alnum": (_ranges(("a", "z"), ("A", "Z"), ("0", "9")), False),
    "Punct": (_PUNCT, False),
    "Graph": (_ranges(("!", "~")), False),
    "Print": (_ranges((" ", "~")), False),
    "Blank": (_chars(" \t"), False),
    "Cntrl": (_ranges(("\x00", "\x1f"), ("\x7f", "\x7f")), False),
    "XDigit": (_ranges(("0", "9"), ("a", "f"), ("A", "F")), False),
    "Space": (_SPACE, False),
    "javaLowerCase": (str.islower, True),
    "javaUpperCase": (str.isupper, True),
    "javaWhitespace": (_JAVA_WHITESPACE, False),
    "javaDigit": (_category("Nd"), False),
    "javaLetter": (_category("L"), False),
    "javaLetterOrDigit": (_category("L", "Nd"), False),
    "IsAlphabetic": (lambda c: c.isalpha() or unicodedata.category(c) == "Nl", False),
    "IsLetter": (_category("L"), False),
    "IsDigit": (_category("Nd"), False),
    "IsLowercase": (str.islower, True),
    "IsUppercase": (str.isupper, True),
    "IsWhite_Space": (lambda c: c.isspace() and c not in "\x1c\x1d\x1e\x1f", False),
    "IsPunctuation": (_category("P"), False),
    "IsControl": (_category("Cc"), False),
}
_PROPERTIES["IsWhiteSpace"] = _PROPERTIES["IsWhite_Space"]
_CATEGORIES = {"L", "M", "N", "P", "S", "Z", "C"} | set(
    "Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Co Cs Cn".split()  # noqa: SIM905
)
_CASED_CATEGORIES = {"Lu", "Ll", "Lt", "LC"}
_CASED_FIX = "write [a-zA-Z] (its meaning under (?i) differs between Java versions)"


def _property(name: str, ci: bool, fail: Callable[[str, str], ConfigError]) -> Pred:
    """``\\p{name}``: a POSIX class, a java.lang.Character method, a general category or a property."""
    for prefix in ("general_category=", "gc="):
        if name.startswith(prefix) and name[len(prefix) :] in _CATEGORIES | {"LC"}:
            name = name[len(prefix) :]
    if name.startswith("Is") and name[2:] in _CATEGORIES | {"LC"}:
        name = name[2:]
    if name in _CATEGORIES or name == "LC":
        if ci and name in _CASED_CATEGORIES:
            raise fail(f"case-related class \\p{{{name}}} with (?i)", _CASED_FIX)
        return _category("Lu", "Ll", "Lt") if name == "LC" else _category(name)
    if name in _PROPERTIES:
        pred, cased = _PROPERTIES[name]
        if ci and cased:
            raise fail(f"case-related class \\p{{{name}}} with (?i)", _CASED_FIX)
        return pred
    raise fail(f"unsupported class \\p{{{name}}}", "use an explicit character class such as [a-z]")


def _ci_char(ch: str) -> Pred:
    """One character under (?i) without (?u): ASCII letters match either case, anything else itself."""
    if ch.isascii() and ch.isalpha():
        both = frozenset((ch.lower(), ch.upper()))
        return both.__contains__
    return ch.__eq__


def _ci_range(lo: int, hi: int) -> Pred:
    def pred(c: str) -> bool:
        o = ord(c)
        if lo <= o <= hi:
            return True
        if c.isascii() and c.isalpha():
            return lo <= ord(c.upper()) <= hi or lo <= ord(c.lower()) <= hi
        return False

    return pred


def _is_word(c: str) -> bool:
    """Java's \\b word character (Java 9-18): ``_`` or Character.isLetterOrDigit."""
    return c == "_" or unicodedata.category(c)[0] == "L" or unicodedata.category(c) == "Nd"


# --- syntax tree ------------------------------------------------------------------------------------


@dataclass
class _Node:
    kind: str  # chars, seq, alt, rep, atomic, look, assert (and quote while parsing)
    pred: Pred | None = None
    check: Check | None = None
    items: list[_Node] = field(default_factory=list)
    lo: int = 0
    hi: int | None = 0  # rep: at most (None: no limit)
    mode: str = "g"  # rep: g greedy, l lazy, p possessive
    behind: bool = False  # look
    negate: bool = False  # look
    literal: str = ""  # chars: the one character it matches, when it is a plain literal
    dot: bool = False  # chars: a plain '.' (any character but a line terminator)
    unbounded: bool = False  # an assertion repeated without limit: Java gives it no maximum length
    varying: bool = False  # an assertion repeated {m,n} with m < n: Java counts it as of varying length


def _width(node: _Node) -> tuple[int, int | None]:
    """The fewest and most characters ``node`` can match (None: no limit)."""
    k = node.kind
    if node.unbounded:
        return 0, None
    if k == "chars":
        return 1, 1
    if k in ("assert", "look"):
        return 0, 0
    if k in ("seq", "atomic"):
        least = 0
        total: int | None = 0
        for item in node.items:
            a, b = _width(item)
            least += a
            total = None if total is None or b is None else total + b
        return least, total
    if k == "alt":
        widths = [_width(item) for item in node.items]
        los = [w[0] for w in widths]
        his = [w[1] for w in widths]
        return min(los), (None if None in his else max(h for h in his if h is not None))
    a, b = _width(node.items[0])  # rep
    if node.hi is None or b is None:  # Java: unbounded even when repeated {0} times
        return a * node.lo, None
    return a * node.lo, node.hi * (b or 0)


def _has_assertion(node: _Node) -> bool:
    return node.kind in ("assert", "look") or any(_has_assertion(i) for i in node.items)


def _repeated_alternation(node: _Node) -> bool:
    """Whether a group of varying length or with an alternation is repeated beyond once: Java finds no
    maximum length for it (so refuses it in a look-behind)."""
    if node.kind == "rep" and node.hi != 1 and node.items[0].kind != "chars":
        least, most = _width(node.items[0])
        if least != most or _varies(node.items[0]):
            return True
    return any(_repeated_alternation(i) for i in node.items)


def _varies(node: _Node) -> bool:
    """Whether Java's regex compiler counts ``node`` as not deterministic: an alternation, or any
    quantifier with a range, inside."""
    if node.kind == "alt" or node.varying or (node.kind == "rep" and node.lo != node.hi):
        return True
    return any(_varies(i) for i in node.items)


def _size(node: _Node) -> int:
    """Instructions the compiled node takes (at most; counted repetitions are unrolled)."""
    k = node.kind
    if k in ("chars", "assert"):
        return 1
    if k in ("seq", "alt"):
        return sum(_size(i) for i in node.items) + 2 * len(node.items)
    if k in ("atomic", "look"):
        return _size(node.items[0]) + 2
    body = _size(node.items[0]) * 2 + 2
    copies = node.lo + (1 if node.hi is None else node.hi - node.lo)
    return body * max(copies, 1) + 4


# --- parser -----------------------------------------------------------------------------------------


class _Parser:
    """java.util.regex's grammar (Java 9 and later), for what a topic filter may use."""

    def __init__(self, pattern: str, raw: str, option: str) -> None:
        self.s = pattern
        self.raw = raw
        self.option = option
        self.i = 0
        self.flags: frozenset[str] = frozenset()
        self.depth = 0
        self.names: set[str] = set()

    def fail(self, problem: str, fix: str = "correct the Java regular expression") -> ConfigError:
        return _bad(self.option, self.raw, problem, fix)

    def invalid(self, what: str) -> ConfigError:
        return self.fail(f"invalid regex ({what} at position {self.i})")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.fail(f"groups or classes nested more than {MAX_NESTING} deep", _NESTING_FIX)

    # - expressions -

    def parse(self) -> _Node:
        node = self.alternation()
        if self.i < len(self.s):
            raise self.invalid("unmatched ')'")
        return node

    def alternation(self) -> _Node:
        branches = [self.sequence()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else _Node("alt", items=branches)

    def sequence(self) -> _Node:
        items: list[_Node] = []
        while self.i < len(self.s) and self.peek() not in "|)":
            atom = self.atom()
            if atom is None:
                continue
            if atom.kind == "quote":  # Java quotes \Q..\E char by char: a quantifier takes the last one
                items.extend(atom.items[:-1])
                atom = atom.items[-1]
            items.append(self.quantified(atom))
        return items[0] if len(items) == 1 else _Node("seq", items=items)

    def quantified(self, atom: _Node) -> _Node:
        c = self.peek()
        if c not in ("*", "+", "?", "{"):
            return atom
        if c == "{":
            lo, hi = self.counts()
        else:
            self.i += 1
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        mode = "g"
        if self.peek() == "?":
            mode, self.i = "l", self.i + 1
        elif self.peek() == "+":
            mode, self.i = "p", self.i + 1
        if self.peek() in ("*", "+", "?", "{"):
            raise self.fail(f"a quantifier after a quantifier at position {self.i}", "remove one of them")
        if atom.kind in ("assert", "look"):  # zero-width: once is as good as many, none always holds
            node = atom if lo > 0 else _Node("seq")
            return _Node("seq", items=[node], unbounded=hi is None, varying=hi != lo)
        return _Node("rep", items=[atom], lo=lo, hi=hi, mode=mode)

    def counts(self) -> tuple[int, int | None]:
        start = self.i
        close = self.s.find("}", start)
        body = self.s[start + 1 : close] if close > 0 else ""
        parts = body.split(",")
        well_formed = close > 0 and len(parts) <= 2 and parts[0].isdigit() and all(p.isascii() for p in parts)
        if not well_formed or (len(parts) == 2 and parts[1] != "" and not parts[1].isdigit()):
            raise self.invalid("bad repetition {m,n}")
        lo = int(parts[0])
        hi: int | None = lo if len(parts) == 1 else (None if parts[1] == "" else int(parts[1]))
        if max(lo, hi or 0) > MAX_REPEAT:
            raise self.fail(f"a repetition count above {MAX_REPEAT}", "use * or + instead")
        if hi is not None and hi < lo:
            raise self.invalid("repetition {m,n} with n < m")
        self.i = close + 1
        return lo, hi

    def atom(self) -> _Node | None:
        c = self.s[self.i]
        if c == "(":
            return self.group()
        if c == "[":
            self.i += 1
            return _Node("chars", pred=_tabled(self.char_class()))
        if c == "\\":
            return self.escape()
        if c in "*+?":
            raise self.invalid(f"dangling {c!r}")
        if c == "{":
            raise self.invalid("illegal repetition '{'")
        self.i += 1
        if c == ".":
            if "s" in self.flags:
                return _Node("chars", pred=lambda _c: True)
            if "d" in self.flags:
                return _Node("chars", pred="\n".__ne__)
            return _Node("chars", pred=_not(_chars(_LINE_TERMINATORS)), dot=True)
        if c == "^":
            return _Node("assert", check=self.caret())
        if c == "$":
            return _Node("assert", check=self.dollar(multiline="m" in self.flags))
        return self.literal(c)

    def literal(self, ch: str) -> _Node:
        if "i" in self.flags:
            return _Node("chars", pred=_ci_char(ch))
        return _Node("chars", pred=ch.__eq__, literal=ch)

    def caret(self) -> Check:
        if "m" not in self.flags:
            return lambda s, i: i == 0
        unix = "d" in self.flags

        def check(s: str, i: int) -> bool:
            if i == len(s):  # Java: never at the end of input, even after a line terminator
                return False
            if i == 0:
                return True
            before = s[i - 1]
            if unix:
                return before == "\n"
            return before in _LINE_TERMINATORS and not (before == "\r" and s[i] == "\n")

        return check

    def dollar(self, multiline: bool) -> Check:
        if "d" in self.flags:
            if multiline:
                return lambda s, i: i == len(s) or s[i] == "\n"
            return lambda s, i: i == len(s) or (i == len(s) - 1 and s[i] == "\n")

        def check(s: str, i: int) -> bool:
            n = len(s)
            if not multiline:
                if i < n - 2:
                    return False
                if i == n - 2:
                    return s[i] == "\r" and s[i + 1] == "\n"
            if i < n:
                ch = s[i]
                if ch == "\n":
                    return not (i > 0 and s[i - 1] == "\r")
                return ch in _LINE_TERMINATORS
            return True

        return check

    def group(self) -> _Node | None:
        self.i += 1
        self.enter()
        saved = self.flags
        node: _Node | None
        if self.peek() != "?":
            node = self.alternation()
        else:
            self.i += 1
            c = self.peek()
            if c == ":":
                self.i += 1
                node = self.alternation()
            elif c == ">":
                self.i += 1
                node = _Node("atomic", items=[self.alternation()])
            elif c in ("=", "!"):
                self.i += 1
                node = _Node("look", items=[self.alternation()], negate=c == "!")
            elif c == "<" and self.peek(1) in ("=", "!"):
                negate = self.peek(1) == "!"
                self.i += 2
                body = self.alternation()
                if _width(body)[1] is None or _repeated_alternation(body):
                    fix = "bound it, e.g. (?<=a{1,10}) instead of (?<=a+)"
                    raise self.fail("a look-behind without an obvious maximum length (as Java sees it)", fix)
                node = _Node("look", items=[body], behind=True, negate=negate)
            elif c == "<":
                self.i += 1
                end = self.s.find(">", self.i)
                name = self.s[self.i : end] if end > 0 else ""
                if not (name.isascii() and name.isalnum() and name[0].isalpha()) or name in self.names:
                    raise self.invalid("bad or repeated group name")
                self.names.add(name)
                self.i = end + 1
                node = self.alternation()
            else:
                node = self.flag_group()
                if node is None:  # (?flags): applies to the rest of the enclosing group
                    self.depth -= 1
                    return None
        if self.peek() != ")":
            raise self.invalid("unclosed group")
        self.i += 1
        self.flags = saved
        self.depth -= 1
        return node

    def flag_group(self) -> _Node | None:
        flags = set(self.flags)
        on = True
        while self.i < len(self.s) and self.peek() not in ":)":
            c = self.peek()
            if c == "-" and on:
                on = False
            elif c in "idms":
                (flags.add if on else flags.discard)(c)
            elif c in "uUxc":
                what = {"u": "Unicode case", "U": "Unicode classes", "x": "comments", "c": "canonical forms"}
                raise self.fail(f"unsupported flag (?{c}) ({what[c]})", f"rewrite the pattern without (?{c})")
            else:
                raise self.invalid("unknown inline flag")
            self.i += 1
        if self.i >= len(self.s):
            raise self.invalid("unclosed group")
        self.flags = frozenset(flags)
        if self.peek() == ")":
            self.i += 1
            return None
        self.i += 1  # ':'
        return self.alternation()

    # - escapes -

    def escape(self) -> _Node | None:
        self.i += 1
        c = self.peek()
        if not c:
            raise self.invalid("trailing backslash")
        if c == "Q":
            end = self.s.find("\\E", self.i + 1)
            text = self.s[self.i + 1 :] if end < 0 else self.s[self.i + 1 : end]
            self.i = len(self.s) if end < 0 else end + 2
            return _Node("quote", items=[self.literal(ch) for ch in text]) if text else None
        if c in _ESCAPE_CLASSES:
            self.i += 1
            return _Node("chars", pred=_ESCAPE_CLASSES[c])
        if c in "pP":
            return _Node("chars", pred=_tabled(self.property_class()))
        if c == "R":
            self.i += 1
            crlf = _Node("seq", items=[_Node("chars", pred="\r".__eq__), _Node("chars", pred="\n".__eq__)])
            return _Node("alt", items=[crlf, _Node("chars", pred=_chars("\n\x0b\f\r\x85\u2028\u2029"))])
        if c in "bB":
            self.i += 1
            if self.peek() == "{":
                raise self.fail("unsupported construct \\b{...}", "rewrite the pattern without it")
            want = c == "b"
            return _Node("assert", check=lambda s, i: self.boundary(s, i) == want)
        if c in "AzZG":
            self.i += 1
            if c in "AG":
                return _Node("assert", check=lambda s, i: i == 0)
            if c == "z":
                return _Node("assert", check=lambda s, i: i == len(s))
            return _Node("assert", check=self.dollar(multiline=False))
        if (c.isdigit() and c != "0") or c == "k":
            raise self.fail("a back-reference", "rewrite the pattern without back-references")
        return self.literal(self.char_escape())

    @staticmethod
    def boundary(s: str, i: int) -> bool:
        left = i > 0 and _is_word(s[i - 1])
        right = i < len(s) and _is_word(s[i])
        return left != right

    def char_escape(self) -> str:
        """One escaped character, self.i at the character after the backslash; leaves self.i after it."""
        c = self.peek()
        simple = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "a": "\x07", "e": "\x1b"}
        if c in simple:
            self.i += 1
            return simple[c]
        if c == "0":
            digits = ""
            j = self.i + 1
            while j < len(self.s) and len(digits) < 3 and self.s[j] in "01234567":
                digits += self.s[j]
                j += 1
            if len(digits) == 3 and digits[0] > "3":
                digits, j = digits[:2], j - 1
            if not digits:
                raise self.invalid("bad octal escape")
            self.i = j
            return chr(int(digits, 8))
        if c == "x":
            if self.peek(1) == "{":
                end = self.s.find("}", self.i)
                return self.code_point(self.s[self.i + 2 : end] if end > 0 else "", end + 1)
            return self.code_point(self.s[self.i + 1 : self.i + 3], self.i + 3, length=2)
        if c == "u":
            ch = self.code_point(self.s[self.i + 1 : self.i + 5], self.i + 5, length=4)
            if "\ud800" <= ch <= "\udbff" and self.s.startswith("\\u", self.i):
                low = self.s[self.i + 2 : self.i + 6]
                is_hex = len(low) == 4 and all(d in "0123456789abcdefABCDEF" for d in low)
                if is_hex and 0xDC00 <= int(low, 16) <= 0xDFFF:
                    self.i += 6
                    return chr(0x10000 + ((ord(ch) - 0xD800) << 10) + (int(low, 16) - 0xDC00))
            if "\ud800" <= ch <= "\udfff":
                raise self.fail("an unpaired surrogate escape", "write the character as \\x{...}")
            return ch
        if c == "c":
            if self.i + 1 >= len(self.s):
                raise self.invalid("bad control escape")
            self.i += 2
            return chr(ord(self.s[self.i - 1]) ^ 64)
        if c.isalpha() or c.isdigit() or not c.isascii():
            raise self.fail(f"unsupported escape \\{c}", "rewrite the pattern without it")
        self.i += 1
        return c

    def code_point(self, digits: str, after: int, length: int | None = None) -> str:
        hexdigits = "0123456789abcdefABCDEF"
        if not digits or (length and len(digits) != length) or not all(d in hexdigits for d in digits):
            raise self.invalid("bad hexadecimal escape")
        if len(digits) > 8 or int(digits, 16) > 0x10FFFF:
            raise self.invalid("hexadecimal escape out of range")
        self.i = after
        return chr(int(digits, 16))

    def property_class(self) -> Pred:
        negate = self.peek() == "P"
        self.i += 1
        if self.peek() == "{":
            end = self.s.find("}", self.i)
            if end < 0:
                raise self.invalid("unclosed \\p{")
            name = self.s[self.i + 1 : end]
            self.i = end + 1
        elif self.peek().isalpha() and self.peek().isascii():
            name = self.peek()
            self.i += 1
        else:
            raise self.invalid("bad \\p")
        pred = _property(name, "i" in self.flags, self.fail)
        return _not(pred) if negate else pred

    # - character classes -

    def char_class(self) -> Pred:
        """After '['. Java's nested classes (a union) and && (an intersection) are refused: write the
        class out in full."""
        self.enter()
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        union: list[Pred] = []
        first = True
        ci = "i" in self.flags
        while True:
            c = self.peek()
            if not c:
                raise self.invalid("unclosed character class")
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "[":
                fix = "write the union as one class, e.g. [a-dm-p]"
                raise self.fail("nested character class (Java union/intersection)", fix)
            if c == "&" and self.peek(1) == "&":
                raise self.fail("character class intersection (&&)", "write the intersection as one class")
            if c == "\\" and self.peek(1) == "Q":
                end = self.s.find("\\E", self.i + 2)
                if end < 0:
                    raise self.invalid("unclosed character class")
                text = self.s[self.i + 2 : end]
                self.i = end + 2
                if self.peek() == "-" or text.endswith("-") or text.startswith("-"):
                    raise self.fail(
                        "a range next to \\Q...\\E in a character class", "write the range outside \\Q...\\E"
                    )
                union.extend(_ci_char(ch) if ci else ch.__eq__ for ch in text)
                continue
            start = self.class_atom()
            if isinstance(start, tuple):  # a class such as \d: a following '-' is a literal
                union.append(start[0])
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                if self.peek() == "[" or self.s.startswith("\\Q", self.i) or self.s.startswith("&&", self.i):
                    raise self.fail("a range ending in a class", "write the range with two characters")
                end_ch = self.class_atom()
                if isinstance(end_ch, tuple):
                    raise self.invalid("a range ending in a class")
                if ord(end_ch) < ord(start):
                    raise self.invalid("a range out of order")
                union.append(_ci_range(ord(start), ord(end_ch)) if ci else _ranges((start, end_ch)))
                continue
            union.append(_ci_char(start) if ci else start.__eq__)
        self.depth -= 1
        pred = _any_of(union)
        return _not(pred) if negate else pred

    def class_atom(self) -> str | tuple[Pred]:
        """One character of a class, or (predicate,) for \\d, \\p{..} and the like."""
        c = self.s[self.i]
        if c != "\\":
            self.i += 1
            return c
        self.i += 1
        d = self.peek()
        if not d:
            raise self.invalid("trailing backslash")
        if d in _ESCAPE_CLASSES:
            self.i += 1
            return (_ESCAPE_CLASSES[d],)
        if d in "pP":
            return (self.property_class(),)
        if (d.isdigit() and d != "0") or d in "bBAzZGRXNkE":
            raise self.fail(f"unsupported escape \\{d} in a character class", "rewrite the class without it")
        return self.char_escape()


# --- program and matcher ----------------------------------------------------------------------------

_CHAR, _SPLIT, _JMP, _ASSERT, _END, _ATOMIC, _LOOK, _DISPATCH = range(8)


def _first_literal(node: _Node) -> str:
    """The character every match of ``node`` starts with, when that is a plain literal; else ''."""
    while node.kind == "seq" and node.items:
        node = node.items[0]
    if node.kind == "rep" and node.lo > 0:
        return _first_literal(node.items[0])
    return node.literal if node.kind == "chars" else ""


class MatchBudgetExceeded(Exception):
    """A match ran out of its step budget (:data:`STEP_BUDGET`)."""


class _Compiler:
    def __init__(self) -> None:
        self.prog: list[list[object]] = []
        self.pending: list[tuple[int, _Node]] = []

    def emit(self, *ins: object) -> int:
        self.prog.append(list(ins))
        return len(self.prog) - 1

    def body(self, node: _Node) -> int:
        """A sub-program (the whole pattern, an atomic group, a look-around) ending with END."""
        start = len(self.prog)
        self.node(node)
        self.emit(_END)
        while self.pending:
            at, sub = self.pending.pop()
            self.prog[at][1] = len(self.prog)
            self.node(sub)
            self.emit(_END)
        return start

    def node(self, node: _Node) -> None:
        k = node.kind
        if k == "chars":
            self.emit(_CHAR, node.pred)
        elif k == "assert":
            self.emit(_ASSERT, node.check)
        elif k == "seq":
            for item in node.items:
                self.node(item)
        elif k == "alt" and len(node.items) >= 4:
            self.dispatch(node.items)
        elif k == "alt":
            jumps = []
            for item in node.items[:-1]:
                split = self.emit(_SPLIT, 0, 0)
                self.prog[split][1] = len(self.prog)
                self.node(item)
                jumps.append(self.emit(_JMP, 0))
                self.prog[split][2] = len(self.prog)
            self.node(node.items[-1])
            for j in jumps:
                self.prog[j][1] = len(self.prog)
        elif k == "atomic":
            at = self.emit(_ATOMIC, 0)
            self.pending.append((at, node.items[0]))
        elif k == "look":
            lo, hi = _width(node.items[0])
            at = self.emit(_LOOK, 0, node.behind, node.negate, lo, hi)
            self.pending.append((at, node.items[0]))
        elif node.mode == "p":
            body = node.items[0]
            each = body if body.kind == "chars" else _Node("atomic", items=[body])
            greedy = _Node("rep", items=[each], lo=node.lo, hi=node.hi, mode="g")
            self.node(_Node("atomic", items=[greedy]))
        else:
            self.repeat(node)

    def dispatch(self, branches: list[_Node]) -> None:
        """A long alternation (a list of topic names) jumps by the next character straight to the
        branches that can start with it, in their order."""
        at = self.emit(_DISPATCH, None, None)
        firsts = [_first_literal(b) for b in branches]
        starts, jumps = [], []
        for branch in branches:
            starts.append(len(self.prog))
            self.node(branch)
            jumps.append(self.emit(_JMP, 0))
        for j in jumps:
            self.prog[j][1] = len(self.prog)
        table = {
            c: tuple(pc for pc, first in zip(starts, firsts, strict=True) if first in ("", c))
            for c in set(firsts) - {""}
        }
        self.prog[at][1] = table
        self.prog[at][2] = tuple(pc for pc, first in zip(starts, firsts, strict=True) if not first)

    def repeat(self, node: _Node) -> None:
        body, lazy = node.items[0], node.mode == "l"
        for _ in range(node.lo):
            self.node(body)
        if node.hi is None:
            loop = self.emit(_SPLIT, 0, 0)
            self.prog[loop][2 if lazy else 1] = len(self.prog)
            self.node(body)
            self.emit(_JMP, loop)
            self.prog[loop][1 if lazy else 2] = len(self.prog)
            return
        exits = []
        for _ in range(node.hi - node.lo):
            split = self.emit(_SPLIT, 0, 0)
            self.prog[split][2 if lazy else 1] = len(self.prog)
            exits.append(split)
            self.node(body)
        for split in exits:
            self.prog[split][1 if lazy else 2] = len(self.prog)


def _check_loops(node: _Node, atomic: bool, fail: Callable[[str, str], ConfigError]) -> None:
    """Refuse the repetitions whose Java meaning hangs on its rule for iterations that match nothing
    (Java leaves the loop after one; this engine explores on): loops over something that can match
    nothing and holds an assertion, and such loops in an atomic group or a possessive quantifier."""
    if node.kind == "rep":
        body = node.items[0]
        repeats = node.hi is None or node.hi > 1
        if repeats and _width(body)[0] == 0 and (atomic or node.mode == "p" or _has_assertion(body)):
            raise fail(
                "a repeated part that can match nothing inside an atomic group, possessive quantifier or "
                "with an assertion",
                "make the repeated part match at least one character",
            )
        atomic = atomic or node.mode == "p"
    if node.kind == "atomic":
        atomic = True
    for item in node.items:
        _check_loops(item, atomic, fail)


def _plain(branch: _Node) -> str | None:
    """A branch of plain literals and dots as a string with ``\0`` for each dot, else None."""
    items = branch.items if branch.kind == "seq" else [branch]
    if not all(i.kind == "chars" and (i.literal or i.dot) and i.literal != "\0" for i in items):
        return None
    return "".join(i.literal or "\0" for i in items)


class JavaRegex:
    """A compiled Java regular expression, matched against whole names in bounded time.

    The alternatives made of plain characters and dots only (a list of topic names, ``orders.eu``
    included) are looked up by their shape (length and dot positions) in a set; the rest runs on the
    program."""

    def __init__(self, pattern: str, raw: str, option: str) -> None:
        self.pattern = pattern
        parser = _Parser(pattern, raw, option)
        tree = parser.parse()
        _check_loops(tree, False, parser.fail)
        if _size(tree) > MAX_PROGRAM:
            fix = "use * or + instead of large counts"
            raise parser.fail("a pattern too large once its repetitions are expanded", fix)
        branches = tree.items if tree.kind == "alt" else [tree]
        self.shapes: dict[tuple[int, tuple[int, ...]], set[str]] = {}
        rest = []
        for branch in branches:
            plain = _plain(branch)
            if plain is None:
                rest.append(branch)
                continue
            dots = tuple(i for i, c in enumerate(plain) if c == "\0")
            self.shapes.setdefault((len(plain), dots), set()).add(plain.replace("\0", ""))
        self.start = -1
        self.prog: list[tuple[object, ...]] = []
        if rest:
            compiler = _Compiler()
            self.start = compiler.body(rest[0] if len(rest) == 1 else _Node("alt", items=rest))
            self.prog = [tuple(ins) for ins in compiler.prog]

    def fullmatch(self, name: str) -> bool:
        """Whether the whole of ``name`` matches (Java's ``Matcher.matches()``)."""
        n = len(name)
        for (length, dots), keys in self.shapes.items():
            if length != n:
                continue
            if not dots:
                if name in keys:
                    return True
                continue
            if any(name[d] in _LINE_TERMINATORS for d in dots):
                continue
            key = "".join(c for i, c in enumerate(name) if i not in dots) if len(dots) < n else ""
            if key in keys:
                return True
        return self.start >= 0 and _Run(self.prog, name).search(self.start, 0, n) >= 0


class _Run:
    """One match of a program against one name: the results of atomic groups and look-arounds by
    (instruction, position), and the steps left."""

    def __init__(self, prog: list[tuple[object, ...]], s: str) -> None:
        self.prog = prog
        self.s = s
        self.memo: dict[tuple[int, int], int] = {}
        self.budget = STEP_BUDGET

    def search(self, pc: int, pos: int, target: int) -> int:  # noqa: PLR0912, PLR0915 - one VM, a case per op
        """The end of the first path (Java's priority order) from (pc, pos) to END, -1 when none; with
        target >= 0 the path must end there. Each (instruction, position) state is visited once."""
        prog, s, memo = self.prog, self.s, self.memo
        n = len(s)
        width = n + 1
        seen: set[int] = set()
        stack = [(pc, pos)]
        steps = 0
        try:
            while stack:
                pc, pos = stack.pop()
                while True:
                    key = pc * width + pos
                    if key in seen:
                        break
                    seen.add(key)
                    steps += 1
                    ins = prog[pc]
                    op = ins[0]
                    if op == _CHAR:
                        if pos < n and ins[1](s[pos]):  # type: ignore[operator]
                            pc += 1
                            pos += 1
                            continue
                        break
                    if op == _SPLIT:
                        stack.append((ins[2], pos))  # type: ignore[arg-type]
                        pc = ins[1]  # type: ignore[assignment]
                        continue
                    if op == _JMP:
                        pc = ins[1]  # type: ignore[assignment]
                        continue
                    if op == _ASSERT:
                        if ins[1](s, pos):  # type: ignore[operator]
                            pc += 1
                            continue
                        break
                    if op == _END:
                        if target < 0 or pos == target:
                            return pos
                        break
                    if op == _DISPATCH:
                        table: dict[str, tuple[int, ...]] = ins[1]  # type: ignore[assignment]
                        targets: tuple[int, ...] = ins[2]  # type: ignore[assignment]
                        if pos < n:
                            targets = table.get(s[pos], targets)
                        if not targets:
                            break
                        stack.extend((t, pos) for t in reversed(targets[1:]))
                        pc = targets[0]
                        continue
                    self.spend(steps)
                    steps = 0
                    end = memo.get((pc, pos))
                    if end is None:
                        end = self.atomic(ins, pos) if op == _ATOMIC else self.look(ins, pos)
                        memo[(pc, pos)] = end
                    if end < 0:
                        break
                    pc, pos = pc + 1, end
            return -1
        finally:
            self.spend(steps)

    def spend(self, steps: int) -> None:
        self.budget -= steps
        if self.budget < 0:
            raise MatchBudgetExceeded

    def atomic(self, ins: tuple[object, ...], pos: int) -> int:
        """Where an atomic group starting at pos ends: its body's first match, never another."""
        body = ins[1]
        assert isinstance(body, int)
        return self.search(body, pos, -1)

    def look(self, ins: tuple[object, ...], pos: int) -> int:
        """pos when the look-around holds at pos, else -1."""
        _, body, behind, negate, least, most = ins
        assert isinstance(body, int)
        if not behind:
            found = self.search(body, pos, -1) >= 0
        else:
            assert isinstance(least, int) and isinstance(most, int)
            starts = range(pos - least, max(pos - most, 0) - 1, -1)
            found = any(self.search(body, start, pos) >= 0 for start in starts)
        return pos if found != negate else -1


def compile_filter(raw: str, option: str) -> JavaRegex:
    """A filter option as kmirror matches it; ConfigError (one line: the option, the problem and the
    fix) for every pattern it refuses, whatever the input."""
    pattern = mirrormaker_pattern(raw)
    if not pattern.strip("|"):
        noun = "group" if option == "--groups" else "topic"
        raise ConfigError(
            f"empty {noun} pattern {raw!r} (MirrorMaker matched no {noun} with it)",
            key=option,
            fix=f"give {option} '.*' for every {noun}, or the names you mean, e.g. {option} 'orders.*'",
        )
    try:
        return JavaRegex(pattern, raw, option)
    except RecursionError:
        raise _bad(option, raw, "a pattern nested too deeply", _NESTING_FIX) from None


@dataclass(frozen=True)
class TopicFilter:
    """Which topics to mirror. Picklable (holds only the raw patterns), compiled once on first use."""

    include: str | None = None
    exclude: str | None = None
    _compiled: list[JavaRegex | None] = field(default_factory=list, compare=False, repr=False)
    _decided: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.compile()

    def compile(self) -> tuple[JavaRegex | None, JavaRegex | None]:
        if not self._compiled:
            include = compile_filter(self.include, "--whitelist") if self.include is not None else None
            exclude = compile_filter(self.exclude, "--blacklist") if self.exclude is not None else None
            self._compiled.extend((include, exclude))
        return self._compiled[0], self._compiled[1]

    def __getstate__(self) -> dict[str, str | None]:
        return {"include": self.include, "exclude": self.exclude}

    def __setstate__(self, state: dict[str, str | None]) -> None:
        object.__setattr__(self, "include", state["include"])
        object.__setattr__(self, "exclude", state["exclude"])
        object.__setattr__(self, "_compiled", [])
        object.__setattr__(self, "_decided", {})

    def matches(self, topic: str) -> bool:
        if topic.startswith(INTERNAL_PREFIX):
            return False
        decided = self._decided.get(topic)
        if decided is None:
            decided = self._decide(topic)
            if len(self._decided) >= 100_000:
                self._decided.clear()
            self._decided[topic] = decided
        return decided

    def _decide(self, topic: str) -> bool:
        inc, exc = self.compile()
        try:
            if inc is not None and not inc.fullmatch(topic):
                return False
            return exc is None or not exc.fullmatch(topic)
        except MatchBudgetExceeded:
            log.warning("%r: the filter took too long on this name; it is treated as not matching", topic)
            return False

    def select(self, topics: Iterable[str]) -> list[str]:
        return sorted(t for t in topics if self.matches(t))

    def describe(self) -> str:
        parts = [
            f"include {self.include!r}" if self.include is not None else "include all",
            *([f"exclude {self.exclude!r}"] if self.exclude is not None else []),
            "never internal (__*)",
        ]
        return ", ".join(parts)
