"""kmirror.config.properties reads .properties files exactly as java.util.Properties.load does.

The expected values below were checked against ``Properties.load(Reader)`` of OpenJDK 17.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cpu_budget import cpu_time_under
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_samples import ZK_PRODUCER

from kmirror.config.properties import (
    MAX_FILE_BYTES,
    MAX_VALUE_CHARS,
    decode_properties,
    load_properties,
    parse_properties,
)
from kmirror.errors import ConfigError

LEGACY_CONSUMER = """\
bootstrap.servers=kafka-source-server1:6667,kafka-source-server2:6667
groupid=dp-MirrorMaker-group
exclude.internal.topics=true
mirror.topics.whitelist=app_log
client.id=mirror_maker_consumer
"""

LEGACY_PRODUCER = ZK_PRODUCER


def test_legacy_mirrormaker_consumer_config() -> None:
    assert parse_properties(LEGACY_CONSUMER) == {
        "bootstrap.servers": "kafka-source-server1:6667,kafka-source-server2:6667",
        "groupid": "dp-MirrorMaker-group",
        "exclude.internal.topics": "true",
        "mirror.topics.whitelist": "app_log",
        "client.id": "mirror_maker_consumer",
    }


def test_legacy_mirrormaker_producer_config() -> None:
    assert parse_properties(LEGACY_PRODUCER) == {
        "zk.connect": "hdp1:2181/kafka-test",
        "producer.type": "async",
        "compression.codec": "0",
        "serializer.class": "kafka.serializer.DefaultEncoder",
        "max.message.size": "10000000",
        "queue.time": "1000",
        "queue.enqueueTimeout.ms": "-1",
    }


def test_keys_keep_file_order() -> None:
    assert list(parse_properties(LEGACY_PRODUCER)) == [
        "zk.connect",
        "producer.type",
        "compression.codec",
        "serializer.class",
        "max.message.size",
        "queue.time",
        "queue.enqueueTimeout.ms",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Separators: '=', ':' or blanks, with blanks around them skipped.
        ("a=b", {"a": "b"}),
        ("a:b", {"a": "b"}),
        ("a b", {"a": "b"}),
        ("a\tb", {"a": "b"}),
        ("a\fb", {"a": "b"}),
        ("a = b", {"a": "b"}),
        ("a   :   b", {"a": "b"}),
        ("a b c", {"a": "b c"}),
        # At most one '=' or ':' is skipped; the next one is part of the value.
        ("a==b", {"a": "=b"}),
        ("a = = b", {"a": "= b"}),
        ("a :=b", {"a": "=b"}),
        ("a=b=c", {"a": "b=c"}),
        ("a = b:c", {"a": "b:c"}),
        ("url=http://host:8080/x", {"url": "http://host:8080/x"}),
        # A blank ends the key even before a separator further on.
        ("a b=c", {"a": "b=c"}),
        # Leading blanks are skipped, trailing blanks are kept (in the value, as Java does).
        ("   \t\fkey=value", {"key": "value"}),
        ("key=value   ", {"key": "value   "}),
        ("key=value\t", {"key": "value\t"}),
        ("key   ", {"key": ""}),
        # A key alone, or with a separator and nothing else, has the empty value.
        ("key", {"key": ""}),
        ("key=", {"key": ""}),
        ("key:", {"key": ""}),
        ("key = ", {"key": ""}),
        # An empty key.
        ("=value", {"": "value"}),
        (":value", {"": "value"}),
    ],
)
def test_key_value_separation(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"key\:with\:colons = value", {"key:with:colons": "value"}),
        (r"key\=with\=equals=value", {"key=with=equals": "value"}),
        (r"key\ with\ spaces = value", {"key with spaces": "value"}),
        (r"\#not\!comment=x", {"#not!comment": "x"}),
        (r"k=\ leading space kept", {"k": " leading space kept"}),
        (r"k=tab\there", {"k": "tab\there"}),
        (r"k=\n\r\f", {"k": "\n\r\f"}),
        (r"k=back\\slash", {"k": "back\\slash"}),
        (r"k=C:\\kafka\\config", {"k": "C:\\kafka\\config"}),
        # Backslash before any other character stands for that character.
        (r"k=\a\b\z\=\:\"", {"k": 'abz=:"'}),
        (r"k=C:\kafka\config", {"k": "C:kafkaconfig"}),
        # Unicode escapes, upper and lower case hex digits.
        (r"name=caf\u00e9", {"name": "café"}),
        (r"name=caf\u00E9", {"name": "café"}),
        (r"k\u00e9y=v", {"kéy": "v"}),
        (r"k=\u0041\u0042", {"k": "AB"}),
        # A UTF-16 surrogate pair is one character, as in a Java string.
        (r"smile=\ud83d\ude00", {"smile": "\U0001f600"}),
        # Literal non-ASCII text needs no escape.
        ("name=café ☕", {"name": "café ☕"}),
        # An escaped backslash before the separator does not escape the separator.
        ("a\\\\=b", {"a\\": "b"}),
        ("a\\\\\\=b=c", {"a\\=b": "c"}),
    ],
)
def test_escapes(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# comment\nk=v", {"k": "v"}),
        ("! comment\nk=v", {"k": "v"}),
        ("   # indented comment\nk=v", {"k": "v"}),
        ("\t! indented comment\nk=v", {"k": "v"}),
        # Only at the start of a line: elsewhere '#' and '!' are ordinary characters.
        ("k=v # not a comment", {"k": "v # not a comment"}),
        ("k=v!", {"k": "v!"}),
        ("k#=v", {"k#": "v"}),
        # A comment ending in a backslash does not continue.
        ("# comment \\\nk=v", {"k": "v"}),
        ("! comment \\\nk=v", {"k": "v"}),
        # On a continuation line '#' is text, not a comment.
        ("k=a,\\\n    # b", {"k": "a,# b"}),
        # Blank lines and blank-only lines are ignored.
        ("\n\n   \n\t\f\nk=v\n\n", {"k": "v"}),
        ("", {}),
        ("# only a comment", {}),
    ],
)
def test_comments_and_blank_lines(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("topics=a,\\\n       b,\\\n       c\nnext=1", {"topics": "a,b,c", "next": "1"}),
        # Leading blanks of the continuation line go, trailing blanks before the backslash stay.
        ("k=one \\\n    two", {"k": "one two"}),
        # The key can be continued too.
        ("ke\\\n  y=v", {"key": "v"}),
        # An even number of backslashes does not continue the line.
        ("k=v\\\\\nk2=v2", {"k": "v\\", "k2": "v2"}),
        ("k=v\\\\\\\n  w", {"k": "v\\w"}),
        # A continuation into a blank line ends the logical line there.
        ("k=v\\\n\nk2=v2", {"k": "v", "k2": "v2"}),
        ("k=v\\\n   \nk2=v2", {"k": "v", "k2": "v2"}),
        # A backslash on the last line is dropped.
        ("k=v\\", {"k": "v"}),
        ("k=v\\\n", {"k": "v"}),
        # Every line terminator continues a line: CRLF, CR and LF.
        ("k=a\\\r\n  b", {"k": "ab"}),
        ("k=a\\\r  b", {"k": "ab"}),
        ("k=a\\\r\n\r\nk2=c", {"k": "a", "k2": "c"}),
    ],
)
def test_continuation_lines(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_line_terminators(eol: str) -> None:
    text = eol.join(["# comment", "a=1", "", "b = 2 ", "c"]) + eol
    assert parse_properties(text) == {"a": "1", "b": "2 ", "c": ""}


def test_crlf_file_has_no_carriage_returns_in_values() -> None:
    text = LEGACY_CONSUMER.replace("\n", "\r\n")
    assert parse_properties(text) == parse_properties(LEGACY_CONSUMER)


def test_duplicate_keys_last_value_wins_first_position_kept() -> None:
    result = parse_properties("a=1\nb=2\na=3\n")
    assert result == {"a": "3", "b": "2"}
    assert list(result) == ["a", "b"]


def test_java_quirk_last_line_of_a_single_backslash_is_an_empty_entry() -> None:
    # Properties.load returns an empty logical line here and stores "" = "".
    assert parse_properties("a=1\n\\") == {"a": "1", "": ""}
    # A lone backslash followed by a line continues into it.
    assert parse_properties("\\\nb=2") == {"b": "2"}


def test_a_comment_can_start_after_an_emptied_continuation() -> None:
    # Modern JDKs see a comment when the logical line is still empty.
    assert parse_properties("\\\n# comment\nk=v") == {"k": "v"}


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (r"k=\u00g9", 1),
        (r"k=\u12", 1),
        ("k=\\u", 1),
        ("a=1\n\n# c\nbad=x\\uZZZZ", 4),
        # The line of the escape itself, inside a continued logical line.
        ("k=a,\\\n  b,\\\n  \\u12x4", 3),
    ],
)
def test_malformed_unicode_escape_in_value(text: str, line: int) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_properties(text, origin="consumer.properties")
    err = caught.value
    assert err.origin == "consumer.properties"
    assert err.key == f"line {line}"
    assert str(err).startswith(f"consumer.properties: line {line}: malformed \\uXXXX escape in the value of ")
    assert "four hex digits" in str(err)


def test_malformed_unicode_escape_in_key() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_properties("ok=1\nk\\u12=v", origin="p.properties")
    assert str(caught.value) == (
        "p.properties: line 2: malformed \\uXXXX escape in a key; write \\u followed by exactly four hex "
        "digits (e.g. \\u00e9), or \\\\ for a literal backslash"
    )


def test_malformed_escape_message_does_not_show_the_value() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_properties("ssl.key.password=Hunter2\\uXYZW")
    assert "ssl.key.password" in str(caught.value)
    assert "Hunter2" not in str(caught.value)


def test_malformed_escape_in_a_comment_is_ignored() -> None:
    assert parse_properties("# \\u12\nk=v") == {"k": "v"}


def test_default_origin() -> None:
    with pytest.raises(ConfigError, match=r"^<string>: line 1: "):
        parse_properties("k=\\u")


def test_load_properties_reads_iso_8859_1_as_mirrormaker_does(tmp_path: Path) -> None:
    # Properties.load(InputStream): one character per byte, so UTF-8 "é" (C3 A9) is the two characters
    # "Ã©", and both Java and librdkafka then send those characters' UTF-8 (C3 83 C2 A9) to the broker.
    path = tmp_path / "consumer.properties"
    path.write_bytes("client.id=caf\u00e9\r\ngroup.id=g\r\n".encode())
    assert load_properties(path) == {"client.id": "caf\u00c3\u00a9", "group.id": "g"}
    assert load_properties(str(path)) == {"client.id": "caf\u00c3\u00a9", "group.id": "g"}
    latin1 = tmp_path / "latin1.properties"
    latin1.write_bytes("name=caf\u00e9\n".encode("latin-1"))
    assert load_properties(latin1) == {"name": "café"}
    escaped = tmp_path / "escaped.properties"
    escaped.write_bytes(b"name=caf\\u00e9\n")
    assert load_properties(escaped) == {"name": "café"}


@pytest.mark.parametrize(
    ("mark", "name"), [(b"\xef\xbb\xbf", "UTF-8"), (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16")]
)
def test_a_byte_order_mark_is_refused(tmp_path: Path, mark: bytes, name: str) -> None:
    # Java would read it as characters of the first key (and so not see bootstrap.servers).
    path = tmp_path / "bom.properties"
    path.write_bytes(mark + b"bootstrap.servers=h:9092\n")
    with pytest.raises(ConfigError) as caught:
        load_properties(path)
    assert str(caught.value).startswith(f"{path}: line 1: starts with a {name} byte-order mark")
    assert "without the byte-order mark" in str(caught.value)


def test_non_ascii_notes_name_the_key_and_how_the_bytes_were_read(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_bytes(
        b"a=plain\n"
        b"client.id=caf\xc3\xa9\n"  # UTF-8
        b"sasl.password=p\xc3\xa4ss\n"
        b"latin=\xe9\n"  # ISO-8859-1
        b"escaped=\\u00e9\n"  # ASCII: no note
    )
    notes: list[str] = []
    props = load_properties(path, notes)
    assert props["latin"] == "é"
    assert props["escaped"] == "é"
    assert notes == [
        "client.id: line 2 has non-ASCII bytes, read as ISO-8859-1 (one character per byte), as MirrorMaker "
        "reads properties files: client.id='cafÃ©'; if the file is UTF-8 and 'café' was meant, write "
        "caf\\u00e9",
        # A secret is never shown, not even the bytes that were read.
        "sasl.password: line 3 has non-ASCII bytes, read as ISO-8859-1 (one character per byte), as "
        "MirrorMaker reads properties files (they look like UTF-8 text); if another reading was meant, "
        "write its non-ASCII characters as \\uXXXX escapes",
        "latin: line 4 has non-ASCII bytes, read as ISO-8859-1 (one character per byte), as MirrorMaker "
        "reads properties files: latin='é'",
    ]
    assert not any("äss" in n or "Ã¤" in n for n in notes)


def test_non_ascii_note_escapes_beyond_the_basic_plane_as_java_does(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_bytes("client.id=\U0001f600\n".encode())
    notes: list[str] = []
    load_properties(path, notes)
    assert notes[0].endswith("write \\ud83d\\ude00")


def test_load_properties_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.properties"
    path.write_text("a=1\nb=\\u00\n")
    with pytest.raises(ConfigError) as caught:
        load_properties(path)
    assert caught.value.origin == str(path)
    assert str(caught.value).startswith(f"{path}: line 2: malformed \\uXXXX escape in the value of 'b'")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.properties"
    with pytest.raises(ConfigError) as caught:
        load_properties(path)
    err = caught.value
    assert err.origin == str(path)
    assert err.problem == "file not found"
    assert err.fix is not None and "check the path" in err.fix
    assert str(err).startswith(f"{path}: file not found; check the path of the properties file")


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_properties(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path}: is a directory, not a file; give the path of the properties file itself"
    )


# --- what librdkafka cannot take, and bounds: one ConfigError naming the file, the line and the key ---


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("client.id=x\\uD800y", "line 1: the value of 'client.id' holds a lone UTF-16 surrogate"),
        ("a=1\nclient.id=x\\uDC00", "line 2: the value of 'client.id' holds a lone UTF-16 surrogate"),
        # A high surrogate followed by something else than its low half.
        ("k=\\uD83D\\u0041", "line 1: the value of 'k' holds a lone UTF-16 surrogate"),
        ("x\\uD800y=1", "line 1: the key holds a lone UTF-16 surrogate"),
        ("client.id=a\\u0000b", "line 1: the value of 'client.id' holds a NUL character"),
        ("client.id=a\x00b", "line 1: the value of 'client.id' holds a NUL character"),
        ("k\\u0000=v", "line 1: the key holds a NUL character"),
    ],
)
def test_values_librdkafka_cannot_take_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_properties(text, "c.properties")
    message = str(caught.value)
    assert message.startswith(f"c.properties: {problem}"), message
    assert "\n" not in message
    assert "\x00" not in message and message.encode("utf-8")  # printable, encodable


def test_a_surrogate_pair_is_one_character_and_accepted() -> None:
    assert parse_properties("k=\\uD83D\\uDE00") == {"k": "\U0001f600"}


def test_only_the_value_that_wins_is_checked() -> None:
    # Java keeps the last value of a repeated key; the one it replaced never reaches librdkafka.
    assert parse_properties("client.id=a\\u0000\nclient.id=b") == {"client.id": "b"}


def test_a_file_over_the_size_limit_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    path = tmp_path / "huge.properties"
    with path.open("wb") as f:
        f.write(b"k=")
        f.truncate(50 * 1024 * 1024)  # 50 MB, sparse
    # Parsing the 50 MB would take far longer than the bound: the size is checked before any parsing. CPU
    # time of this thread (its reads included), not wall, so a busy machine cannot fail it (cpu_budget.py).
    with cpu_time_under(1, "refusing a 50 MB file"), pytest.raises(ConfigError) as caught:
        load_properties(path)
    assert str(caught.value) == (
        f"{path}: larger than 1 MiB, the limit for a properties file; check that the path names the "
        "properties file (they hold a few KiB)"
    )


def test_a_file_just_under_the_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.properties"
    path.write_bytes(
        b"k=" + b"a" * (MAX_VALUE_CHARS - 1) + b"\n" + b"#" * (MAX_FILE_BYTES - MAX_VALUE_CHARS - 2)
    )
    assert path.stat().st_size == MAX_FILE_BYTES
    assert len(load_properties(path)["k"]) == MAX_VALUE_CHARS - 1


def test_a_value_over_the_limit_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_properties("a=1\nssl.ca.pem=" + "x" * (MAX_VALUE_CHARS + 1), "c.properties")
    assert str(caught.value).startswith(
        f"c.properties: line 2: the value of 'ssl.ca.pem' is longer than {MAX_VALUE_CHARS:,} characters"
    )


def test_a_nul_in_the_path_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        load_properties("/etc/a\x00b.properties")
    assert str(caught.value) == (
        "'/etc/a\\x00b.properties': the path holds a NUL character; give the path of the properties file"
    )


# --- property-based: whatever the bytes, a result or the one documented error, quickly ---

_PIECES = [
    "k",
    "bootstrap.servers",
    "=",
    ":",
    " ",
    "\t",
    "\f",
    "\n",
    "\r",
    "\r\n",
    "#",
    "!",
    "\\",
    "\\\\",
    "\\\n  ",
    "\\\r\n",
    "\\u",
    "\\u00e9",
    "\\uD800",
    "\\uDC00",
    "\\uD83D\\uDE00",
    "\\u12",
    "\\uZZZZ",
    "\x00",
    "\xe9",
    "\xc3\xa9",
    "\xef\xbb\xbf",
    "\xff",
    "value",
    "a,b",
]


# The bounds below guard against parsing that grows faster than the input (a hostile file stalling
# check-config and run). They are CPU time of this thread (cpu_budget.py): load on other processes cannot
# fail them, more work still does. deadline=None: the per-example bound is the one inside, in CPU time (it
# was the same number in wall time inside, and a wall-clock deadline around it).
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(_PIECES), st.binary(max_size=8).map(lambda b: b.decode("latin-1"))))
)
def test_any_bytes_give_a_result_or_one_config_error(pieces: list[str]) -> None:
    data = "".join(pieces).encode("latin-1")
    with cpu_time_under(1, f"decoding {len(data)} bytes"):
        try:
            props = decode_properties(data, "f.properties")
        except ConfigError as exc:
            message = str(exc)
            assert message.startswith("f.properties: line "), message
            assert "\n" not in message and "\r" not in message
            message.encode("utf-8")  # no lone surrogate in the message itself
        else:
            for key, value in props.items():
                (key + value).encode("utf-8")  # librdkafka can take every key and value
                assert "\x00" not in key + value


@settings(max_examples=50, deadline=None)
@given(
    st.integers(min_value=0, max_value=MAX_FILE_BYTES - 10),
    st.sampled_from(["a", "\\\n", "\\u0041", "=", "#"]),
)
def test_large_inputs_stay_fast(size: int, unit: str) -> None:
    text = "k=" + unit * (size // len(unit) // 64)
    with cpu_time_under(2, f"parsing {len(text)} characters"):
        try:
            parse_properties(text, "f.properties")
        except ConfigError as exc:
            assert "\n" not in str(exc)
