"""Differential test: kmirror reads a properties file's bytes as Java's own Properties.load(InputStream).

That call is how MirrorMaker reads --consumer.config and --producer.config (ISO-8859-1, \\uXXXX
escapes). One JVM (java/PropertiesOracle.java, compiled here) reads a few thousand generated files, and
for each one kmirror must either give exactly Java's keys and values, or refuse the file with one
ConfigError where Java's result is something librdkafka cannot take as the operator meant it: a
byte-order mark (Java reads it into the first key), a NUL character (librdkafka cuts the value there) or
a lone UTF-16 surrogate (no UTF-8 form); where Java refuses the file (a malformed \\uXXXX escape),
kmirror refuses it too.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from kmirror.config.properties import decode_properties
from kmirror.errors import ConfigError
from kmirror.testing import jars

ORACLE = Path(__file__).parents[1] / "java" / "PropertiesOracle.java"
CASES = 3000

KEY_PIECES = [
    "a", "b", "k", "bootstrap.servers", "client.id", "sasl.password", "x.y-z_1",
    "\\=", "\\:", "\\ ", "\\\\", "\\#", "\\!", "\\t", "\\n", "\\q",
    "\\u00e9", "\\u00E9", "\\u0041", "\\uD83D\\uDE00", "\\uD800", "\\uDC00", "\\u0000",
    "\xe9", "\xc3\xa9", "\xff", "\x85", "\xa0", "\x00", "#", "!",
]  # fmt: skip
VALUE_PIECES = [
    *KEY_PIECES, "=", ":", " ", "  ", "\t", "\f", "value with blanks", "h1:9092,h2:9092",
    "\\\n", "\\\n    ", "\\\r\n  ", "\\\r", "\\\\\n", "\\u12", "\\u", "\\uZZZZ", "\\uD83D", "\\uDE00",
    "\xef\xbb\xbf", "\\",
]  # fmt: skip
SEPARATORS = ["=", ":", " ", "\t", "\f", " = ", "  :  ", "==", " ", "=:", ""]
EOLS = ["\n", "\r\n", "\r"]


def _entry(rng: random.Random) -> str:
    key = "".join(rng.choice(KEY_PIECES) for _ in range(rng.randint(0, 3)))
    value = "".join(rng.choice(VALUE_PIECES) for _ in range(rng.randint(0, 5)))
    return rng.choice(["", " ", "\t  "]) + key + rng.choice(SEPARATORS) + value


def _line(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.1:
        return rng.choice(["#", "!", "  #", "\t!"]) + rng.choice(["", " comment", " \\", " \\u12 \xe9"])
    if kind < 0.15:
        return rng.choice(["", "   ", "\t\f"])
    return _entry(rng)


def _file(rng: random.Random) -> bytes:
    text = "".join(_line(rng) + rng.choice(EOLS) for _ in range(rng.randint(0, 6)))
    if rng.random() < 0.5 and text:
        text = text.rstrip("\r\n")  # no terminator on the last line
    data = text.encode("latin-1")
    if rng.random() < 0.03:
        data = b"\xef\xbb\xbf" + data
    return data


def _cases() -> list[bytes]:
    rng = random.Random(20)
    fixed = [
        b"",
        b"\xef\xbb\xbfbootstrap.servers=h:9092\n",
        b"# \xef\xbb\xbf\nk=v",
        "sasl.password=p\xe4ss\n".encode("latin-1"),
        "client.id=caf\u00e9".encode(),
        b"k=\\uD800",
        b"k=\\uD83D\\uDE00\\uD83D",
        b"k=a\\\n  \\u00",
        b"k=v\\",
        b"a=1\n\\",
        b"\\\n# c\nk=v",
        b"k=a\x00b",
    ]
    return fixed + [_file(rng) for _ in range(CASES)]


def _units(s: str) -> str:
    """A string as the hex of its UTF-16 code units, the oracle's notation (lone surrogates included)."""
    return s.encode("utf-16-be", "surrogatepass").hex()


@pytest.fixture(scope="module")
def java_answers(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    classes = tmp_path_factory.mktemp("properties-oracle")
    javac = Path(jars.java()).with_name("javac")
    subprocess.run([str(javac) if javac.exists() else "javac", "-d", str(classes), str(ORACLE)], check=True)
    stdin = "".join(case.hex() + "\n" for case in _cases())
    proc = subprocess.run(
        [jars.java(), "-cp", str(classes), "PropertiesOracle"],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    answers = proc.stdout.splitlines()
    assert len(answers) == len(_cases())
    return answers


def _java_result(answer: str) -> dict[str, str] | None:
    if answer == "ERR":
        return None
    fields = answer.split("\t")
    assert fields[0] == "OK"
    out = {}
    for field in fields[1:]:
        key, value = field.split(",")
        out[key] = value
    return out


def _unusable(s: str) -> bool:
    return "\x00" in s or any("\ud800" <= c <= "\udfff" for c in s)


def test_kmirror_reads_properties_bytes_as_java_does(java_answers: list[str]) -> None:
    same = refused_alike = 0
    for case, answer in zip(_cases(), java_answers, strict=True):
        java = _java_result(answer)
        try:
            ours = decode_properties(case, "f.properties")
        except ConfigError as exc:
            message = str(exc)
            assert "\n" not in message, message
            if case.startswith(b"\xef\xbb\xbf"):
                assert "byte-order mark" in message, (case, message)
            elif java is None:
                assert "malformed \\uXXXX escape" in message, (case, message)
            else:
                # Java's result holds something librdkafka cannot take: that is what kmirror says.
                decoded = {bytes.fromhex(k).decode("utf-16-be", "surrogatepass"): v for k, v in java.items()}
                bad = [
                    k
                    for k, v in decoded.items()
                    if _unusable(k) or _unusable(bytes.fromhex(v).decode("utf-16-be", "surrogatepass"))
                ]
                assert bad, (case, message, java)
                assert "NUL character" in message or "lone UTF-16 surrogate" in message, message
            refused_alike += 1
            continue
        assert java is not None, (case, ours)
        assert not case.startswith(b"\xef\xbb\xbf")
        assert {_units(k): _units(v) for k, v in ours.items()} == java, case
        same += 1
    # The generator exercises both sides: plenty of files read alike, plenty refused.
    assert same > CASES // 4
    assert refused_alike > CASES // 10


def test_a_utf8_password_reaches_librdkafka_as_the_java_client_sends_it(java_answers: list[str]) -> None:
    # UTF-8 "pässword" in the file: Java reads "pÃ¤ssword"; its SCRAM/PLAIN clients send that string's
    # UTF-8, and so does librdkafka with kmirror's value. Same bytes on the wire.
    case = "sasl.password=p\xe4ss\n".encode("latin-1")
    java = _java_result(java_answers[_cases().index(case)])
    assert java is not None
    ours = decode_properties(case, "f.properties")
    assert {_units(k): _units(v) for k, v in ours.items()} == java
    utf8_file = "client.id=caf\u00e9".encode()
    java = _java_result(java_answers[_cases().index(utf8_file)])
    ours = decode_properties(utf8_file, "f.properties")
    assert ours == {"client.id": "caf\u00c3\u00a9"}
    assert java == {_units("client.id"): _units("caf\u00c3\u00a9")}
    assert ours["client.id"].encode("utf-8") == b"caf\xc3\x83\xc2\xa9"  # what both send
