"""The JAAS tokenizer: java.io.StreamTokenizer as the JDK and Kafka set it up (kmirror.config.jaas parses).

Tokens, comments, quoted strings with Java escapes and bare words; where Java would quietly swallow a
mistake the lexer refuses it. Error messages never quote input text (option names come from the parser,
which knows which are safe to show).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from kmirror.config.secrets import is_secret
from kmirror.errors import ConfigError

_OPTION_IN_COMMENT = re.compile(r"([^\s=;{}\"'/*]+)\s*=")

_QUOTE_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_OCTAL = "01234567"
SYMBOLS = "{};="
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
BARE_VALUE_FIX = "bare values may only hold letters, digits and . - _ $ and must start with a letter"


@dataclass(frozen=True)
class Token:
    kind: str  # "word", "quoted", "symbol", "other" (any other single character), "eof"
    text: str
    line: int
    glued: bool  # directly after the previous token, with no blank or comment in between
    quote: str = ""  # the quote character of a quoted string

    def is_symbol(self, symbol: str) -> bool:
        return self.kind == "symbol" and self.text == symbol

    @property
    def is_name(self) -> bool:
        return self.kind in ("word", "quoted")

    @property
    def numeric(self) -> bool:
        """A bare word that Java's tokenizer would read as a number (or a lone ``-``)."""
        return self.kind == "word" and self.text[0] in "0123456789.-"


class Lexer:
    def __init__(self, text: str, star_is_word: bool, fail: Failer) -> None:
        self.text = text
        self.pos = 0
        self.previous_end = -1
        self.star_is_word = star_is_word
        self.fail = fail
        self.line_starts = [0, *(m.end() for m in _LINE_BREAK.finditer(text))]
        self.secret_in_comment = False  # see _note_secret

    def line_at(self, pos: int) -> int:
        return bisect.bisect_right(self.line_starts, pos)

    def _is_word_char(self, c: str) -> bool:
        if c.isascii():
            return c.isalnum() or c in "._-$" or (self.star_is_word and c == "*")
        return ord(c) >= 0xA0

    def _note_secret(self, comment: str) -> None:
        """A commented-out secret option (``//password=...``): its value may go on past the comment's end
        (a newline in it), so the parser must quote nothing from here on, as after a secret option."""
        if any(is_secret(m.group(1)) for m in _OPTION_IN_COMMENT.finditer(comment)):
            self.secret_in_comment = True

    def _skip_blanks_and_comments(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            c = text[self.pos]
            if ord(c) <= 0x20:
                self.pos += 1
            elif text.startswith("//", self.pos):
                start = self.pos
                while self.pos < n and text[self.pos] not in "\r\n":
                    self.pos += 1
                self._note_secret(text[start : self.pos])
            elif text.startswith("/*", self.pos):
                close = text.find("*/", self.pos + 2)
                if close < 0:
                    raise self.fail(
                        "comment opened with '/*' is not closed", self.line_at(self.pos), "close it with '*/'"
                    )
                self._note_secret(text[self.pos : close])
                self.pos = close + 2
            else:
                return

    def next(self, value_of: str | None) -> Token:
        """The next token; ``value_of`` names the option whose value it would be, as errors name it
        (``option 'keyTab'``, or ``option #3`` where the option's own text must not be shown)."""
        self._skip_blanks_and_comments()
        start = self.pos
        glued = start == self.previous_end
        line = self.line_at(start)
        text = self.text
        if start >= len(text):
            return Token("eof", "", line, glued)
        c = text[start]
        quote = ""
        if c in "\"'":
            kind, value, quote = "quoted", self._quoted(c, line, value_of), c
        elif self._is_word_char(c):
            end = start + 1
            while end < len(text) and self._is_word_char(text[end]):
                end += 1
            kind, value = "word", text[start:end]
            self.pos = end
        else:
            kind, value = ("symbol" if c in SYMBOLS else "other"), c
            self.pos = start + 1
        self.previous_end = self.pos
        return Token(kind, value, line, glued, quote)

    def _quoted(self, quote: str, line: int, value_of: str | None) -> str:
        text, n = self.text, len(self.text)
        out: list[str] = []
        i = self.pos + 1
        while True:
            if i >= n or text[i] in "\r\n":
                what = f"the quoted value of {value_of}" if value_of else "a quoted string"
                raise self.fail(
                    f"{what} is not closed",
                    line,
                    f"end it with {quote} on the same line (a backslash before a quote "
                    f"makes it part of the text)",
                )
            c = text[i]
            i += 1
            if c == quote:
                break
            if c != "\\" or i >= n:
                out.append(c)
                continue
            c = text[i]
            i += 1
            if c not in _OCTAL:
                out.append(_QUOTE_ESCAPES.get(c, c))
                continue
            code = int(c)
            for _ in range(2 if c <= "3" else 1):
                if i < n and text[i] in _OCTAL:
                    code = code * 8 + int(text[i])
                    i += 1
                else:
                    break
            out.append(chr(code))
        self.pos = i
        return "".join(out)


class Failer:
    """Builds the ConfigError of one input: the file form says "line N", the inline form the key."""

    def __init__(self, origin: str, key: str | None) -> None:
        self.origin = origin
        self.key = key

    def __call__(self, problem: str, line: int, fix: str) -> ConfigError:
        where = self.key if self.key is not None else f"line {line}"
        return ConfigError(problem, origin=self.origin, key=where, fix=fix)


def glued_other(lexer: Lexer) -> bool:
    """Whether the character right after the last token continues it but is not a word character."""
    pos = lexer.pos
    text = lexer.text
    if pos >= len(text):
        return False
    c = text[pos]
    return ord(c) > 0x20 and c not in ";}" and not text.startswith(("//", "/*"), pos)


def describe(token: Token, hide: bool = False) -> str:
    """A token for an error message, without ever echoing a quoted string or a stray word."""
    if hide and token.kind == "other":
        return "a stray character"
    if token.kind == "eof":
        return "the end of the input"
    if token.kind == "quoted":
        return "a quoted string"
    if token.kind == "word":
        return "a bare word"
    return f"'{token.text}'"
