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
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from kmirror.errors import ConfigError

__all__ = ["load_properties", "parse_properties"]

_BLANKS = " \t\f"
_EOL = "\r\n"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def parse_properties(text: str, origin: str = "<string>") -> dict[str, str]:
    """Parse ``text`` as ``java.util.Properties.load(Reader)`` would.

    ``origin`` names the input in errors (usually the file path).  Raises :class:`ConfigError` for a
    malformed ``\\uXXXX`` escape, the only input Java refuses.
    """
    result: dict[str, str] = {}
    for chars, lines in _logical_lines(text):
        key, value = _split_entry(chars, lines, origin)
        result[key] = value
    return result


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read and parse a properties file (UTF-8, or ISO-8859-1 if it is not valid UTF-8)."""
    origin = os.fspath(path)
    return parse_properties(_read_config_text(origin, "properties"), origin)


def _read_config_text(origin: str, kind: str) -> str:
    """The text of a configuration file, for the parsers in kmirror.

    UTF-8 (a leading byte-order mark is dropped); a file that is not valid UTF-8 is read as
    ISO-8859-1, the encoding Java assumes for properties files.
    """
    try:
        data = Path(origin).read_bytes()
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
    except OSError as exc:
        raise ConfigError(
            f"cannot read the file ({exc.strerror or exc})",
            origin=origin,
            fix=f"check that the path names a readable {kind} file",
        ) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


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
