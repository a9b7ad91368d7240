"""JAAS login configuration: the JAAS file and Kafka's inline ``sasl.jaas.config`` value.

The file form (``-Djava.security.auth.login.config=...``)::

    KafkaClient {
        com.sun.security.auth.module.Krb5LoginModule required
        useKeyTab=true
        keyTab="/etc/security/keytabs/mirror.keytab";
    };

The inline form is the body of one section: ``<class> <flag> key=value ... ;``, the ``;`` included.

Both are tokenized like ``java.io.StreamTokenizer`` as the JDK and Kafka set it up:

* ``//`` comments to the end of the line and ``/* ... */`` comments;
* quoted strings with Java escapes (``\\"``, ``\\\\``, ``\\n``, ``\\t``, octal ``\\123``; a
  backslash before any other character stands for that character), in ``"`` or, in the inline
  form only, ``'`` (the JDK's file parser refuses single-quoted values);
* bare words made of letters, digits and ``. - _ $`` (and ``*`` in files) that do not start with a
  digit, ``.`` or ``-``: Java reads those as numbers and then fails, so kmirror asks for quotes.

Where Java would quietly swallow a mistake (a lone ``/`` starts a comment, a quote runs to the end of
the line, a ``/*`` comment is never closed), kmirror refuses the input and says how to fix it.  It
also refuses ``${...}`` in values of a JAAS file, which the JVM expands from its system properties.
Error messages never quote option values, and nothing at all of the input after the first secret
option's ``=`` (a piece of a password cut off by a stray ``;`` or quote would look like more entries):
from there on they name what is wrong by position (``login module #2``, ``option #3``).  The ``repr``
of a :class:`LoginModule` masks the options named like a password or a secret.

A JAAS file is read as the JDK reads it: UTF-8; a byte-order mark and invalid UTF-8 are refused
(Java would read them into the first name and U+FFFD), and so is a file over 1 MiB.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from kmirror.config.jaas_lexer import BARE_VALUE_FIX, Failer, Lexer, Token, describe, glued_other
from kmirror.config.properties import read_jaas_text
from kmirror.config.secrets import is_secret
from kmirror.errors import ConfigError

__all__ = ["LoginModule", "load_jaas_file", "parse_jaas_config_value", "parse_jaas_file"]

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
_ENTRY_SHAPE = "<LoginModuleClass> <flag> key=value ... ;"


@dataclass(frozen=True, repr=False)
class LoginModule:
    """One login module entry: its class, its control flag (lower case) and its options."""

    class_name: str
    flag: str
    options: dict[str, str]

    def __post_init__(self) -> None:
        if self.flag not in CONTROL_FLAGS:
            raise ConfigError(
                f"invalid login module control flag {self.flag!r}",
                key=self.class_name,
                fix=f"use one of {', '.join(CONTROL_FLAGS)}",
            )

    def __repr__(self) -> str:
        shown = {k: ("***" if is_secret(k) else v) for k, v in self.options.items()}
        return f"LoginModule(class_name={self.class_name!r}, flag={self.flag!r}, options={shown!r})"


def parse_jaas_file(text: str, origin: str) -> dict[str, list[LoginModule]]:
    """Parse a JAAS login configuration file: ``Name { <entries> };`` sections, by name."""
    return _Parser(text, origin, None).parse_file()


def load_jaas_file(path: str | os.PathLike[str]) -> dict[str, list[LoginModule]]:
    """Read and parse a JAAS login configuration file."""
    origin = os.fspath(path)
    return parse_jaas_file(read_jaas_text(origin), origin)


def parse_jaas_config_value(value: str, origin: str, key: str = "sasl.jaas.config") -> list[LoginModule]:
    """Parse the inline form Kafka accepts in ``sasl.jaas.config``: one or more ``... ;`` entries."""
    return _Parser(value, origin, key).parse_inline()


class _Parser:
    """Errors quote the input only before the first secret option (a key :func:`is_secret` names) has
    been read: what follows its ``=`` may be a piece of the secret (a stray ``;``, quote or blank in it
    makes the rest look like more options or entries), so from there on entries, options and sections
    are named by position (``login module #2``, ``option #3``), never by their text."""

    def __init__(self, text: str, origin: str, key: str | None) -> None:
        self.inline = key is not None
        self.fail = Failer(origin, key)
        self.lexer = Lexer(text, star_is_word=not self.inline, fail=self.fail)
        self.last_line = 1
        self.after_secret = False  # a secret option's value has been read: quote nothing any more
        self.entries = 0
        self.sections = 0

    def _next(self, value_of: str | None = None, *, section_name: bool = False) -> Token:
        token = self.lexer.next(value_of)
        if self.lexer.secret_in_comment:
            self.after_secret = True
        if token.kind != "eof":
            self.last_line = token.line
        if token.quote == "'" and not self.inline and not section_name:
            # The JDK's JAAS file parser takes only double quotes there (Kafka's inline parser takes both).
            what = f"the value of {value_of}" if value_of else "a quoted string"
            raise self.fail(
                f"{what} is in single quotes, which a JAAS file does not accept",
                token.line,
                "use double quotes",
            )
        return token

    def _named(self, what: str, text: str, number: int) -> str:
        """``what 'text'``, or ``what #number`` once a secret has been read."""
        return f"{what} #{number}" if self.after_secret else f"{what} {text!r}"

    def _check_name(self, token: Token, what: str, example: str) -> str:
        if token.numeric:
            shown = f"a {what}" if self.after_secret else f"{what} {token.text!r}"
            raise self.fail(
                f"{shown} must be quoted or start with a letter",
                token.line,
                f"write it in double quotes, e.g. {example}",
            )
        return token.text

    def _refuse_hash(self, token: Token) -> None:
        if token.kind == "other" and token.text == "#" and not self.after_secret:
            raise self.fail(
                "'#' does not start a comment in JAAS configuration",
                token.line,
                "write comments as // ... or /* ... */",
            )

    # -- the two forms -------------------------------------------------------------------------

    def parse_file(self) -> dict[str, list[LoginModule]]:
        sections: dict[str, list[LoginModule]] = {}
        token = self._next(section_name=True)
        while token.kind != "eof":
            self.sections += 1
            if not token.is_name:
                self._refuse_hash(token)
                raise self.fail(
                    f"expected a section name, found {describe(token, self.after_secret)}",
                    token.line,
                    "start each section with its name and '{', e.g. KafkaClient {",
                )
            name = self._check_name(token, "section name", '"KafkaClient" {')
            section = self._named("section", name, self.sections)
            brace = self._next()
            if not brace.is_symbol("{"):
                fix = "write NAME { followed by its login modules and '};'"
                if not self.after_secret:
                    fix = f"write {name} {{ followed by its login modules and '}};'"
                problem = (
                    f"the name of {section} is not followed by '{{'"
                    if self.after_secret
                    else f"section name {name!r} is not followed by '{{'"
                )
                raise self.fail(problem, brace.line, fix)
            if name in sections:
                raise self.fail(
                    f"{section} is defined twice",
                    token.line,
                    "merge the two sections into one"
                    if self.after_secret
                    else f"merge the two {name} sections into one",
                )
            modules: list[LoginModule] = []
            token = self._next()
            while not token.is_symbol("}"):
                if token.kind == "eof":
                    raise self.fail(f"{section} is not closed", self.last_line, "end the section with '};'")
                modules.append(self._entry(token, section))
                token = self._next()
            semicolon = self._next()
            if not semicolon.is_symbol(";"):
                raise self.fail(
                    f"{section} is closed with '}}' but not '}};'",
                    token.line,
                    "end the section with '};' (a ';' after the '}')",
                )
            sections[name] = modules
            token = self._next(section_name=True)
        return sections

    def parse_inline(self) -> list[LoginModule]:
        modules: list[LoginModule] = []
        token = self._next()
        while token.kind != "eof":
            if token.is_symbol("{") or token.is_symbol("}"):
                raise self.fail(
                    "the inline JAAS form has no sections and no braces",
                    token.line,
                    f"write only the login module entries: {_ENTRY_SHAPE}",
                )
            modules.append(self._entry(token, None))
            token = self._next()
        if not modules:
            raise self.fail(
                "no login module is given",
                self.last_line,
                f"set it to {_ENTRY_SHAPE}, e.g. "
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                'username="..." password="...";',
            )
        return modules

    # -- one entry: <class> <flag> key=value ... ; -----------------------------------------------

    def _entry(self, first: Token, section: str | None) -> LoginModule:  # noqa: PLR0912, PLR0915 - the grammar
        self.entries += 1
        place = f" in {section}" if section else ""
        if not first.is_name:
            self._refuse_hash(first)
            raise self.fail(
                f"expected a login module class name{place}, found {describe(first, self.after_secret)}",
                first.line,
                f"write each login module as {_ENTRY_SHAPE}",
            )
        class_name = self._check_name(first, "login module class name", '"com.example.LoginModule"')
        if not class_name:
            raise self.fail(
                f"empty login module class name{place}",
                first.line,
                f"write each login module as {_ENTRY_SHAPE}",
            )
        module = self._named("login module", class_name, self.entries)
        flag_token = self._next()
        if self.inline and flag_token.is_symbol("{"):
            raise self.fail(
                "the inline JAAS form has no sections and no braces",
                flag_token.line,
                "drop the section name, '{' and the closing '};', leaving " + _ENTRY_SHAPE
                if self.after_secret
                else f"drop '{class_name} {{' and the closing '}};', leaving {_ENTRY_SHAPE}",
            )
        if not flag_token.is_name or flag_token.text.upper() not in _UPPER_FLAGS:
            shown = flag_token.kind == "word" and not self.after_secret
            found = f"{flag_token.text!r}" if shown else describe(flag_token, self.after_secret)
            raise self.fail(
                f"{module} has no valid control flag (found {found})",
                flag_token.line,
                f"put one of {', '.join(CONTROL_FLAGS)} right after the class name",
            )
        flag = CONTROL_FLAGS[_UPPER_FLAGS.index(flag_token.text.upper())]
        options: dict[str, str] = {}
        previous: str | None = None  # the option read last, as errors name it
        previous_key = "key"  # ... and its key, as a fix may show it
        end_line = flag_token.line  # line of the last token of the entry so far
        count = 0  # options read in this entry
        while True:
            token = self._next()
            if token.is_symbol(";"):
                return LoginModule(class_name, flag, options)
            if token.kind == "eof" or token.is_symbol("}"):
                fix = (
                    "Kafka requires a ';' after the last option: add ';' at the end of the value"
                    if self.inline
                    else "end the entry with ';' after its last option (and the section with '};')"
                )
                raise self.fail(f"{module} does not end with ';'", end_line, fix)
            if token.glued and previous is not None:
                raise self.fail(
                    f"the value of {previous} of {module} must be quoted",
                    token.line,
                    f'write {previous_key}="..."; {BARE_VALUE_FIX}',
                )
            count += 1
            if not token.is_name:
                self._refuse_hash(token)
                after = f" after {previous}" if previous else ""
                raise self.fail(
                    f"expected an option (key=value) or ';'{after} in {module}, "
                    f"found {describe(token, self.after_secret)}",
                    token.line,
                    f"write options as key=value and quote values; {BARE_VALUE_FIX}",
                )
            equals = self._next()
            if not equals.is_symbol("="):
                if token.kind == "word" and not self.after_secret:
                    problem = f"option {token.text!r} of {module} has no '=' and value"
                elif previous is not None:
                    problem = f"text after {previous} of {module} is not a key=value option"
                else:
                    problem = f"option #{count} of {module} has no '=' and value"
                raise self.fail(
                    problem,
                    token.line,
                    'write options as key=value and quote values with blanks, e.g. key="a b"',
                )
            if token.numeric:
                name = "an option name" if self.after_secret else f"option name {token.text!r}"
                raise self.fail(
                    f"{name} of {module} must be quoted or start with a letter",
                    token.line,
                    'write it in double quotes, e.g. "option"=value',
                )
            key = token.text
            if is_secret(key) and not _PLAIN_NAME.fullmatch(key):
                # A quoted name that names a secret may hold one ("password=s3cret"=...): never quoted.
                self.after_secret = True
            option = self._named("option", key, count)
            shown_key = "key" if self.after_secret else key
            if is_secret(key):
                self.after_secret = True
            value = self._next(value_of=option)
            if value.kind == "other" or value.numeric or (value.kind == "word" and glued_other(self.lexer)):
                raise self.fail(
                    f"the value of {option} of {module} must be quoted",
                    value.line,
                    f'write {shown_key}="..."; {BARE_VALUE_FIX}',
                )
            if not value.is_name:
                raise self.fail(
                    f"{option} of {module} has no value",
                    value.line,
                    f'write {shown_key}="..." (an empty value is written {shown_key}="")',
                )
            if not self.inline and "${" in value.text:
                raise self.fail(
                    f"the value of {option} of {module} uses ${{...}} (a Java system "
                    f"property), which kmirror cannot expand",
                    value.line,
                    "write the value out in full",
                )
            options[key] = value.text
            previous, previous_key = option, shown_key
            end_line = value.line


_UPPER_FLAGS = tuple(flag.upper() for flag in CONTROL_FLAGS)
# An option name as Java's JAAS options are written: safe to quote in an error even when it names a secret.
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
