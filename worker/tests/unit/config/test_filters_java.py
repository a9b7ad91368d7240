"""kmirror's topic filters against java.util.regex and Apache Kafka's own TopicFilter (3.9).

Thousands of generated patterns (Java-only constructs included: possessive quantifiers, atomic groups,
look-arounds, \\p{..} classes, \\Q..\\E, inline flags on and off, class intersections, \\h, \\R, octal and
hex escapes, {m,n}) go through one JVM with names built from the same characters. For every pattern,
kmirror either refuses it with a ConfigError or decides every name as MirrorMaker does. MirrorMaker's
preprocessing (trim, comma, spaces, quotes) is Kafka's own: the raw option goes to
``TopicFilter.IncludeList``; only where kmirror deliberately keeps a comma (inside ``{m,n}`` or
``[..]``) the pattern goes to ``Pattern.compile`` after kmirror's preprocessing.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from kmirror.config.filters import compile_filter, mirrormaker_pattern
from kmirror.errors import ConfigError
from kmirror.testing import jars

ORACLE = Path(__file__).parents[1] / "java" / "FilterOracle.java"
SEED = 20
PATTERNS = 4000
NAME_CHARS = "aabbAB.-_19é\n,|"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The compiled oracle's class path (Kafka 3.9's jars plus the class)."""
    classes = tmp_path_factory.mktemp("oracle")
    kafka = jars.classpath("3.9")
    javac = Path(jars.java()).with_name("javac")
    command = [str(javac) if javac.exists() else "javac", "-d", str(classes), "-cp", kafka, str(ORACLE)]
    subprocess.run(command, check=True, capture_output=True)
    return f"{classes}:{kafka}"


def ask_java(classpath: str, requests: list[tuple[str, str, list[str]]]) -> list[str]:
    """One JVM for every request: (mode, pattern, names) -> "E" or one 0/1 per name."""
    lines = "".join(
        "\t".join([mode, pattern.encode().hex(), *(n.encode().hex() for n in names)]) + "\n"
        for mode, pattern, names in requests
    )
    out = subprocess.run(
        [jars.java(), "-Xss16m", "-cp", classpath, "FilterOracle"],
        input=lines,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    answers = out.stdout.split("\n")[: len(requests)]
    assert len(answers) == len(requests), out.stderr[-2000:]
    return answers


def kafka_preprocessing(raw: str) -> str:
    """What Kafka's TopicFilter does to a raw option (to know when kmirror's deliberately differs)."""
    text = raw.strip("".join(chr(c) for c in range(0x21))).replace(",", "|").replace(" ", "")
    return text.lstrip("\"'").rstrip("\"'")


# --- the generator ----------------------------------------------------------------------------------

# Each list has the pieces kmirror accepts, then after None those it refuses (picked less often, as one
# refused piece refuses the whole pattern).
LITERALS = ["a", "b", "A", "B", "1", "9", "_", "-", "\\.", "\\-", "é", ",", "\\,", "\\|", "}", "]", "\\\\"]
ESCAPES = [
    "\\d", "\\D", "\\w", "\\W", "\\s", "\\S", "\\h", "\\H", "\\v", "\\V", "\\R", "\\b", "\\B", "\\A",
    "\\z", "\\Z", "\\G", "^", "$", ".", "\\x61", "\\x{41}", "\\x{e9}", "\\u0062", "\\0141", "\\0101",
    "\\t", "\\n", "\\cA", "\\e", "\\Qa.b\\E", "\\Q-\\E", "\\Qa,b\\E", "\\p{Lower}", "\\p{Upper}",
    "\\p{Alpha}", "\\P{Digit}", "\\p{Alnum}", "\\p{Punct}", "\\p{L}", "\\pL", "\\p{Lu}", "\\p{IsL}",
    "\\p{IsAlphabetic}", "\\p{javaLowerCase}", "\\p{javaUpperCase}", "\\p{Space}", "\\p{XDigit}",
    "\\p{Nd}", "\\p{ASCII}", "\\0400", "\\uD83D\\uDE00",
    None,
    "\\p{InGreek}", "\\p{IsLatin}", "\\1", "\\k<g>", "\\N{LATIN SMALL LETTER A}", "\\X", "\\y", "\\08",
    "\\x{110000}", "\\uD800", "\\Q\\E", "\\E", "\\b{g}",
]  # fmt: skip
CLASSES = [
    "[ab]", "[^a]", "[a-c]", "[A-Z0-9]", "[\\w.]", "[]a]", "[^]a]", "[a-]", "[-a]", "[\\d-a]", "[.-_]",
    "[--a]", "[\\Qa-b\\E]", "[\\p{Lower}_]", "[^\\p{Alpha}]", "[\\x41-\\x43]", "[a,b]", "[\\h]", "[é-ë]",
    "[a&b]", "[\\s\\S]", "[^\\n]", "[\\]]", "[a^]", "[\\-x]", "[\\x{e9}-\\x{ff}]", "[\\0141-c]",
    None,
    "[a-z&&[^e]]", "[a[b]]", "[a-\\d]", "[b-a]", "[[", "[a-z&&]", "[a&&b]", "[\\R]", "[\\b]", "[\\Qa\\E-z]",
]  # fmt: skip
# fmt: off
FLAGS = ["i", "-i", "s", "m", "d", "is", "i-s", "-im", "im-d", "", "-", None, "x", "u", "U", "c", "i-x", "q"]
QUANTIFIERS = ["*", "+", "?", "{2}", "{0,2}", "{1,}", "{1,3}", "{0}", None, "{2,1}", "{,2}", "{", "{a}",
               "{1001}"]
# fmt: on


def pick(rnd: random.Random, pieces: list[str | None]) -> str:
    """A piece kmirror accepts, or one it refuses one time in 40."""
    cut = pieces.index(None)
    good, bad = pieces[:cut], pieces[cut + 1 :]
    piece = rnd.choice(bad if rnd.random() < 0.025 else good)
    assert piece is not None
    return piece


def gen_pattern(rnd: random.Random, depth: int = 0) -> str:
    """A regex from the grammar's pieces, valid or not (the invalid ones test the refusals)."""
    counts = [1, 1, 1, 2, 3] + ([5, 9] if depth == 0 else [])
    branches = [gen_sequence(rnd, depth) for _ in range(rnd.choice(counts))]
    return rnd.choice(["|", "|", ","]).join(branches)


def gen_sequence(rnd: random.Random, depth: int) -> str:
    return "".join(gen_quantified(rnd, depth) for _ in range(rnd.randint(0 if depth else 1, 4)))


def gen_quantified(rnd: random.Random, depth: int) -> str:
    atom = gen_atom(rnd, depth)
    roll = rnd.random()
    if roll < 0.35:
        atom += pick(rnd, QUANTIFIERS) + rnd.choice(["", "", "", "?", "+"])
    return atom


def gen_atom(rnd: random.Random, depth: int) -> str:
    roll = rnd.random()
    if roll < 0.35:
        return rnd.choice(LITERALS)
    if roll < 0.55:
        return pick(rnd, ESCAPES)
    if roll < 0.68:
        return pick(rnd, CLASSES)
    if roll < 0.73:
        return f"(?{pick(rnd, FLAGS)})"
    if depth >= 3:
        return rnd.choice(LITERALS)
    body = gen_pattern(rnd, depth + 1)
    opener = rnd.choice(
        ["(", "(", "(?:", "(?>", "(?=", "(?!", "(?<=", "(?<!", "(?<g>", f"(?{pick(rnd, FLAGS)}:"]
    )
    return f"{opener}{body})"


def gen_raw(rnd: random.Random) -> str:
    """A raw --whitelist as an operator may type it: sometimes spaced out, quoted or empty."""
    pattern = gen_pattern(rnd)
    roll = rnd.random()
    if roll < 0.02:
        return rnd.choice(["", "  ", "''", '" "', ",", "|"])
    if roll < 0.15:
        pattern = pattern.replace("|", " , ")
    if roll > 0.9:
        pattern = f'"{pattern}"'
    return pattern


def gen_names(rnd: random.Random, pattern: str) -> list[str]:
    """Names from the pattern's own letters and a few others: matches are common, near misses too."""
    letters = [c for c in pattern if c.isalnum() or c in ".-_"] or ["a"]
    names = {"", "a", "A", "ab", "a.b", "aaa", "é", "a\n", "a,b", "a|b", "-", "_"}
    while len(names) < 24:
        chars = letters if rnd.random() < 0.6 else NAME_CHARS
        names.add("".join(rnd.choice(chars) for _ in range(rnd.randint(1, 7))))
    return sorted(names)


def kmirror_decisions(raw: str, names: list[str]) -> str | None:
    """kmirror's answer for the names, or None when it refuses the pattern."""
    try:
        regex = compile_filter(raw, "--whitelist")
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return None
    return "".join("1" if regex.fullmatch(name) else "0" for name in names)


@pytest.mark.timeout(240)
def test_kmirror_refuses_or_decides_as_mirrormaker_on_generated_patterns(oracle: str) -> None:
    rnd = random.Random(SEED)
    cases = []
    for _ in range(PATTERNS):
        raw = gen_raw(rnd)
        names = gen_names(rnd, raw)
        ours = mirrormaker_pattern(raw)
        theirs = kafka_preprocessing(raw)
        if ours == theirs:
            cases.append(("T", raw, names))
        else:  # kmirror kept a comma inside {m,n} or [..]: the rest must be MirrorMaker's
            assert len(ours) == len(theirs)
            assert all(a == b or (a, b) == (",", "|") for a, b in zip(ours, theirs, strict=True))
            cases.append(("P", ours, names))
    answers = ask_java(oracle, cases)

    accepted = refused = 0
    divergences = []
    for (mode, pattern, names), java in zip(cases, answers, strict=True):
        decide = kmirror_decisions if mode == "T" else kmirror_decisions_preprocessed
        ours = decide(pattern, names)
        if ours is None:
            refused += 1
            continue
        accepted += 1
        if ours != java:
            wrong = [n for n, a, b in zip(names, ours, java, strict=False) if a != b] if java != "E" else []
            divergences.append(f"{pattern!r}: kmirror {ours} java {java} {wrong[:3]!r}")
    assert not divergences, f"{len(divergences)} divergences:\n" + "\n".join(divergences[:30])
    # Not a vacuous comparison: most patterns are accepted and compared.
    assert accepted > PATTERNS * 0.35, (accepted, refused)


def kmirror_decisions_preprocessed(pattern: str, names: list[str]) -> str | None:
    """As kmirror_decisions, for a pattern already through kmirror's preprocessing (commas kept)."""
    assert mirrormaker_pattern(pattern) == pattern.strip("".join(chr(c) for c in range(0x21)))
    return kmirror_decisions(pattern, names)


# Java-only constructs, each accepted by kmirror and compared with Java name by name.
JAVA_ONLY = [
    ("a++b", ["aab", "b", "aa"]),
    ("a*+a", ["aaa", "a", ""]),
    ("(?>ab|a)b", ["ab", "abb", "b"]),
    ("(?:ab|a)++b", ["abab", "ab", "aab", "abb"]),
    ("[a-z]{2,3}+c", ["abc", "abcc", "abcdc"]),
    ("\\p{Lower}+\\p{Digit}", ["abc1", "Abc1", "abc"]),
    ("\\p{IsAlphabetic}+", ["abc", "ab1", "é"]),
    ("\\QA.B\\E.*", ["A.B", "A.Bc", "AxB"]),
    ("(?i)orders(?-i)X", ["ORDERSX", "ordersx", "OrdersX"]),
    ("(?i:a)(?-i:a)", ["Aa", "aA", "aa"]),
    ("(?i)a|b", ["A", "B", "b"]),
    ("a(?i)b|c", ["aB", "C", "AB"]),
    ("\\h\\d", [" 1", "\t2", "a1"]),
    ("a\\Rb", ["a\nb", "a\r\nb", "ab"]),
    ("\\0141\\x62\\x{63}\\u0064", ["abcd", "abc"]),
    ("a{2,4}", ["a", "aa", "aaaa", "aaaaa"]),
    ("orders\\..*(?<!\\.tmp)", ["orders.eu", "orders.tmp", "orders."]),
    ("(?<env>prod|dev)\\.x", ["prod.x", "qa.x"]),
    ("(?=.*b)a.*", ["ab", "a", "ba"]),
]


def test_java_only_constructs_match_java(oracle: str) -> None:
    answers = ask_java(oracle, [("P", p, names) for p, names in JAVA_ONLY])
    for (pattern, names), java in zip(JAVA_ONLY, answers, strict=True):
        assert kmirror_decisions(pattern, names) == java, pattern


def test_mirrormaker_matches_nothing_with_an_empty_whitelist_and_kmirror_refuses_it(oracle: str) -> None:
    """Why `--whitelist ''` is refused: MirrorMaker mirrored no topic (an unset shell variable)."""
    names = ["orders", "a", "x"]
    for raw in ["", "  ", "''", '" "']:
        assert ask_java(oracle, [("T", raw, names)]) == ["000"]
        with pytest.raises(ConfigError) as err:
            compile_filter(raw, "--whitelist")
        assert "'.*'" in str(err.value)
