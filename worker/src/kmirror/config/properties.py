"""Java ``.properties`` files, read exactly as ``java.util.Properties.load`` reads them.

MirrorMaker's consumer and producer configs are properties files, so kmirror must see the same
keys and values the JVM would: the same continuation lines, comments, separators and escapes.
The rules (those of the modern JDK) are:

* A *natural* line ends at ``\\n``, ``\\r`` or ``\\r\\n``.  Leading blanks (space, tab, form feed)
  are skipped; blank lines are ignored.
* A natural line whose first non-blank character is ``#`` or ``!`` is a comment, but only where a
  logical line starts: a ``#`` on a continuation line is ordinary text.  A comment never continues.
* A natural line ending in an odd number of backslashes continues on the next one: the backslash
  and the line terminator are dropped, and so are the leading blanks of the next line.
* The key ends at the first unescaped ``=``, ``:`` or blank.  Then blanks, at most one ``=`` or
  ``:``, and blanks again are skipped; the rest of the logical line (trailing blanks included) is
  the value.  A key alone has the value ``""``.
* Escapes in keys and values: ``\\t \\n \\r \\f``, ``\\uXXXX`` (exactly four hex digits) and a
  backslash before any other character stands for that character (``\\=``, ``\\:``, ``\\ ``,
  ``\\#``, ``\\\\``).
* A repeated key: the last value wins.

Files are read as MirrorMaker reads them (``Properties.load(InputStream)``): ISO-8859-1, one character
per byte, non-ASCII characters written as ``\\uXXXX`` escapes.  librdkafka then gets each value as
UTF-8, and the Java clients encode a SCRAM or PLAIN password's characters as UTF-8 too, so the same
bytes reach the broker either way.  kmirror refuses what Java would read into something else than
the operator meant, or librdkafka could not take: a UTF-8 or UTF-16 byte-order mark (Java reads it as
part of the first key), a NUL character (librdkafka would cut the value there), a lone UTF-16
surrogate such as ``\\uD800`` (no UTF-8 form), a file over :data:`MAX_FILE_BYTES` and a value over
:data:`MAX_VALUE_CHARS`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator

from kmirror.config.secrets import is_secret
from kmirror.errors import ConfigError

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_VALUE_CHARS",
    "decode_properties",
    "load_properties",
    "parse_properties",
]

# Generous bounds (real files are a few KiB; a PEM bundle given inline is a few hundred KiB), so that a
# wrong file (a log, a binary) is refused at once instead of being parsed for seconds.
MAX_FILE_BYTES = 1024 * 1024  # a properties or JAAS file
MAX_VALUE_CHARS = 512 * 1024  # one value, after its escapes are decoded
_UNUSABLE = re.compile("[\x00\ud800-\udfff]")  # NUL (librdkafka cuts there), lone surrogates (no UTF-8)

_BLANKS = " \t\f"
_EOL = "\r\n"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def parse_properties(text: str, origin: str = "<string>", notes: list[str] | None = None) -> dict[str, str]:
    """Parse ``text`` as ``java.util.Properties.load(Reader)`` would.

    ``origin`` names the input in errors (usually the file path).  Raises :class:`ConfigError` for a
    malformed ``\\uXXXX`` escape (the only input Java refuses), and for what librdkafka cannot take: a
    NUL character or a lone UTF-16 surrogate in a key or value, a value over :data:`MAX_VALUE_CHARS`.
    ``notes``: when given, one notice is added per key whose line holds non-ASCII characters (read from
    a file, they are ISO-8859-1 bytes: :func:`decode_properties`).
    """
    result: dict[str, str] = {}
    source: dict[str, tuple[int, bool]] = {}  # key -> (line, non-ASCII text on it) of the entry that won
    for chars, lines in _logical_lines(text):
        key, value = _split_entry(chars, lines, origin)
        result[key] = value
        source[key] = (lines[0] if lines else 1, any(c >= "\x80" for c in chars))
    for key, value in result.items():
        line, non_ascii = source[key]
        _check_entry(key, value, line, origin)
        if notes is not None and non_ascii:
            notes.append(_non_ascii_note(key, value, line))
    return result


def decode_properties(data: bytes, origin: str, notes: list[str] | None = None) -> dict[str, str]:
    """Parse the bytes of a properties file as ``java.util.Properties.load(InputStream)`` does:
    ISO-8859-1, one character per byte (MirrorMaker's way).  A byte-order mark is refused."""
    if len(data) > MAX_FILE_BYTES:
        raise _too_large(origin, "properties")
    for mark, name in ((b"\xef\xbb\xbf", "UTF-8"), (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16")):
        if data.startswith(mark):
            raise ConfigError(
                f"starts with a {name} byte-order mark, which MirrorMaker reads (ISO-8859-1, as "
                "java.util.Properties does) as characters of the first key",
                origin=origin,
                key="line 1",
                fix="save the file without the byte-order mark, as ASCII or ISO-8859-1, other "
                "characters written as \\uXXXX escapes",
            )
    return parse_properties(data.decode("latin-1"), origin, notes)


def load_properties(
    path: str | os.PathLike[str], notes: list[str] | None = None, kind: str = "properties"
) -> dict[str, str]:
    """Read and parse a properties file as MirrorMaker does (:func:`decode_properties`); ``kind`` names
    the file in errors (e.g. ``consumer properties``)."""
    origin = os.fspath(path)
    return decode_properties(read_config_bytes(origin, kind), origin, notes)


def _too_large(origin: str, kind: str) -> ConfigError:
    return ConfigError(
        f"larger than {MAX_FILE_BYTES // 1024 // 1024} MiB, the limit for a {kind} file",
        origin=origin,
        fix=f"check that the path names the {kind} file (they hold a few KiB)",
    )


def _check_entry(key: str, value: str, line: int, origin: str) -> None:
    for text, what in ((key, "the key"), (value, f"the value of {key!r}")):
        bad = _UNUSABLE.search(text)
        if bad is None:
            continue
        if bad.group() == "\x00":
            raise ConfigError(
                f"{what} holds a NUL character (\\u0000 or a zero byte), where librdkafka would cut it",
                origin=origin,
                key=f"line {line}",
                fix="remove the NUL character",
            )
        raise ConfigError(
            f"{what} holds a lone UTF-16 surrogate (a \\uD800-\\uDFFF escape without its pair), "
            "which has no UTF-8 form for librdkafka",
            origin=origin,
            key=f"line {line}",
            fix="write the character itself as \\uXXXX, or both halves of a surrogate pair "
            "(e.g. \\uD83D\\uDE00)",
        )
    if len(value) > MAX_VALUE_CHARS:
        raise ConfigError(
            f"the value of {key!r} is longer than {MAX_VALUE_CHARS:,} characters, the limit for a value",
            origin=origin,
            key=f"line {line}",
            fix="check the value (a continuation line may have swallowed the following lines)",
        )


def _non_ascii_note(key: str, value: str, line: int) -> str:
    """How a non-ASCII value was read; never shows a secret."""
    how = (
        f"line {line} has non-ASCII bytes, read as ISO-8859-1 (one character per byte), as "
        "MirrorMaker reads properties files"
    )
    try:
        as_utf8 = value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        as_utf8 = None
    if is_secret(key):
        hint = " (they look like UTF-8 text)" if as_utf8 is not None and as_utf8 != value else ""
        return (
            f"{key}: {how}{hint}; if another reading was meant, write its non-ASCII characters as "
            "\\uXXXX escapes"
        )
    shown = f"{key}={value!r}"
    if as_utf8 is not None and as_utf8 != value:
        escaped = "".join(c if c < "\x80" else _java_escape(c) for c in as_utf8)
        return f"{key}: {how}: {shown}; if the file is UTF-8 and {as_utf8!r} was meant, write {escaped}"
    return f"{key}: {how}: {shown}"


def _java_escape(c: str) -> str:
    """One character as Java escapes it in a properties file (two UTF-16 units beyond U+FFFF)."""
    units = c.encode("utf-16-be")
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


def read_config_bytes(origin: str, kind: str) -> bytes:
    """The bytes of a configuration file (at most :data:`MAX_FILE_BYTES`), or a one-line ConfigError."""
    try:
        with open(origin, "rb") as f:
            if stat.S_ISDIR(os.fstat(f.fileno()).st_mode):
                raise IsADirectoryError
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(
            "file not found",
            origin=origin,
            fix=f"check the path of the {kind} file (relative paths start in the "
            f"directory kmirror is run from)",
        ) from None
    except IsADirectoryError:
        raise ConfigError(
            "is a directory, not a file", origin=origin, fix=f"give the path of the {kind} file itself"
        ) from None
    except PermissionError:
        raise ConfigError(
            "permission denied", origin=origin, fix="make the file readable by the user that runs kmirror"
        ) from None
    except ValueError:  # a NUL character in the path
        raise ConfigError(
            "the path holds a NUL character",
            origin=repr(origin),
            fix=f"give the path of the {kind} file",
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read the file ({exc.strerror or exc})",
            origin=origin,
            fix=f"check that the path names a readable {kind} file",
        ) from None
    if len(data) > MAX_FILE_BYTES:
        raise _too_large(origin, kind)
    return data


def read_jaas_text(origin: str) -> str:
    """The text of a JAAS file, decoded as the JDK reads it: UTF-8 (a byte-order mark is refused: Java
    reads it as part of the first name, and invalid UTF-8 too: Java reads it as U+FFFD)."""
    kind = "JAAS configuration"
    data = read_config_bytes(origin, kind)
    if data.startswith(b"\xef\xbb\xbf"):
        raise ConfigError(
            "starts with a UTF-8 byte-order mark, which Java reads as part of the first section name",
            origin=origin,
            key="line 1",
            fix="save the file without the byte-order mark",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            "not valid UTF-8 (Java reads JAAS files as UTF-8 and would replace these bytes by U+FFFD)",
            origin=origin,
            key=f"line {line}",
            fix="save the file as UTF-8",
        ) from None


def _logical_lines(text: str) -> Iterator[tuple[list[str], list[int]]]:
    """Yield each logical line as (characters, natural line number of each character).

    A transcription of the JDK's ``Properties.LineReader.readLine`` state machine, quirks
    included (e.g. a last line made of a single ``\\`` yields an empty logical line).
    """
    n = len(text)
    i = 0
    line = 1
    buf: list[str] = []
    where: list[int] = []
    skip_blanks = True  # skipping leading blanks of a natural line
    continuation = False  # the natural line being started continues a logical line
    backslash = False  # buf ends in an odd number of backslashes
    in_comment = False
    while i < n:
        c = text[i]
        i += 1
        here = line
        if c == "\n" or (c == "\r" and (i >= n or text[i] != "\n")):
            line += 1
        if in_comment:
            if c in _EOL:
                in_comment = False
                skip_blanks = True
            continue
        if skip_blanks:
            if c in _BLANKS:
                continue
            if not continuation and c in _EOL:
                continue
            skip_blanks = False
            continuation = False
        if not buf and c in "#!":
            in_comment = True
            continue
        if c not in _EOL:
            buf.append(c)
            where.append(here)
            backslash = not backslash if c == "\\" else False
            continue
        # End of a natural line.
        if not buf:
            skip_blanks = True
            continue
        if i >= n:
            break
        if backslash:
            buf.pop()
            where.pop()
            skip_blanks = True
            continuation = True
            backslash = False
            if c == "\r" and text[i] == "\n":
                i += 1
                line += 1
            continue
        yield buf, where
        buf, where = [], []
        skip_blanks = True
    if buf:
        if backslash:
            buf.pop()
            where.pop()
        yield buf, where


def _split_entry(chars: list[str], lines: list[int], origin: str) -> tuple[str, str]:
    limit = len(chars)
    key_end = 0
    value_start = limit
    has_separator = False
    backslash = False
    while key_end < limit:
        c = chars[key_end]
        if not backslash and c in "=:":
            value_start = key_end + 1
            has_separator = True
            break
        if not backslash and c in _BLANKS:
            value_start = key_end + 1
            break
        backslash = not backslash if c == "\\" else False
        key_end += 1
    while value_start < limit:
        c = chars[value_start]
        if c not in _BLANKS:
            if has_separator or c not in "=:":
                break
            has_separator = True
        value_start += 1
    key = _unescape(chars, 0, key_end, lines, origin=origin, key=None)
    value = _unescape(chars, value_start, limit, lines, origin=origin, key=key)
    return key, value


def _unescape(
    chars: list[str], start: int, end: int, lines: list[int], *, origin: str, key: str | None
) -> str:
    """Decode the escapes of ``chars[start:end]``; ``key`` is None when decoding the key itself."""
    out: list[str] = []
    i = start
    while i < end:
        c = chars[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        # A logical line never ends in an unescaped backslash, so chars[i] exists.
        c = chars[i]
        i += 1
        if c != "u":
            out.append(_SIMPLE_ESCAPES.get(c, c))
            continue
        digits = chars[i : i + 4]
        if i + 4 > end or not all(d in _HEX_DIGITS for d in digits):
            place = "in a key" if key is None else f"in the value of {key!r}"
            raise ConfigError(
                f"malformed \\uXXXX escape {place}",
                origin=origin,
                key=f"line {lines[i - 2]}",
                fix="write \\u followed by exactly four hex digits (e.g. \\u00e9), "
                "or \\\\ for a literal backslash",
            )
        i += 4
        code = int("".join(digits), 16)
        if 0xDC00 <= code <= 0xDFFF and out and "\ud800" <= out[-1] <= "\udbff":
            # Java strings are UTF-16: \uD83D\uDE00 is one character.
            code = 0x10000 + ((ord(out[-1]) - 0xD800) << 10) + (code - 0xDC00)
            out.pop()
        out.append(chr(code))
    return "".join(out)
