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
Error messages never quote option values, so a password cannot leak into a log; the ``repr`` of a
:class:`LoginModule` masks the options named like a password or a secret.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kmirror.config.jaas_lexer import BARE_VALUE_FIX, Failer, Lexer, Token, describe, glued_other
from kmirror.config.properties import _read_config_text
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
    return parse_jaas_file(_read_config_text(origin, "JAAS configuration"), origin)


def parse_jaas_config_value(value: str, origin: str, key: str = "sasl.jaas.config") -> list[LoginModule]:
    """Parse the inline form Kafka accepts in ``sasl.jaas.config``: one or more ``... ;`` entries."""
    return _Parser(value, origin, key).parse_inline()


class _Parser:
    def __init__(self, text: str, origin: str, key: str | None) -> None:
        self.inline = key is not None
        self.fail = Failer(origin, key)
        self.lexer = Lexer(text, star_is_word=not self.inline, fail=self.fail)
        self.last_line = 1

    def _next(self, value_of: str | None = None, *, section_name: bool = False) -> Token:
        token = self.lexer.next(value_of)
        if token.kind != "eof":
            self.last_line = token.line
        if token.quote == "'" and not self.inline and not section_name:
            # The JDK's JAAS file parser takes only double quotes there (Kafka's inline parser takes both).
            what = f"the value of option {value_of!r}" if value_of else "a quoted string"
            raise self.fail(
                f"{what} is in single quotes, which a JAAS file does not accept",
                token.line,
                "use double quotes",
            )
        return token

    def _check_name(self, token: Token, what: str, example: str) -> str:
        if token.numeric:
            raise self.fail(
                f"{what} {token.text!r} must be quoted or start with a letter",
                token.line,
                f"write it in double quotes, e.g. {example}",
            )
        return token.text

    def _refuse_hash(self, token: Token, hide: bool) -> None:
        if token.kind == "other" and token.text == "#" and not hide:
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
            if not token.is_name:
                self._refuse_hash(token, False)
                raise self.fail(
                    f"expected a section name, found {describe(token)}",
                    token.line,
                    "start each section with its name and '{', e.g. KafkaClient {",
                )
            name = self._check_name(token, "section name", '"KafkaClient" {')
            brace = self._next()
            if not brace.is_symbol("{"):
                raise self.fail(
                    f"section name {name!r} is not followed by '{{'",
                    brace.line,
                    f"write {name} {{ followed by its login modules and '}};'",
                )
            if name in sections:
                raise self.fail(
                    f"section {name!r} is defined twice",
                    token.line,
                    f"merge the two {name} sections into one",
                )
            modules: list[LoginModule] = []
            token = self._next()
            while not token.is_symbol("}"):
                if token.kind == "eof":
                    raise self.fail(
                        f"section {name!r} is not closed", self.last_line, "end the section with '};'"
                    )
                modules.append(self._entry(token, f"section {name!r}"))
                token = self._next()
            semicolon = self._next()
            if not semicolon.is_symbol(";"):
                raise self.fail(
                    f"section {name!r} is closed with '}}' but not '}};'",
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

    def _entry(self, first: Token, section: str | None) -> LoginModule:
        place = f" in {section}" if section else ""
        if not first.is_name:
            self._refuse_hash(first, False)
            raise self.fail(
                f"expected a login module class name{place}, found {describe(first)}",
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
        module = f"login module {class_name!r}"
        flag_token = self._next()
        if self.inline and flag_token.is_symbol("{"):
            raise self.fail(
                "the inline JAAS form has no sections and no braces",
                flag_token.line,
                f"drop '{class_name} {{' and the closing '}};', leaving {_ENTRY_SHAPE}",
            )
        if not flag_token.is_name or flag_token.text.upper() not in _UPPER_FLAGS:
            found = f"{flag_token.text!r}" if flag_token.kind == "word" else describe(flag_token)
            raise self.fail(
                f"{module} has no valid control flag (found {found})",
                flag_token.line,
                f"put one of {', '.join(CONTROL_FLAGS)} right after the class name",
            )
        flag = CONTROL_FLAGS[_UPPER_FLAGS.index(flag_token.text.upper())]
        options: dict[str, str] = {}
        previous: str | None = None  # the option read last
        end_line = flag_token.line  # line of the last token of the entry so far
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
                    f"the value of option {previous!r} of {module} must be quoted",
                    token.line,
                    f'write {previous}="..."; {BARE_VALUE_FIX}',
                )
            # What follows a value can be a stray piece of it: only show it if that value is no secret.
            hide = previous is not None and is_secret(previous)
            if not token.is_name:
                self._refuse_hash(token, hide)
                after = f" after option {previous!r}" if previous else ""
                raise self.fail(
                    f"expected an option (key=value) or ';'{after} in {module}, "
                    f"found {describe(token, hide)}",
                    token.line,
                    f"write options as key=value and quote values; {BARE_VALUE_FIX}",
                )
            equals = self._next()
            if not equals.is_symbol("="):
                if token.kind == "word" and not hide:
                    problem = f"option {token.text!r} of {module} has no '=' and value"
                else:
                    problem = f"text after option {previous!r} of {module} is not a key=value option"
                raise self.fail(
                    problem,
                    token.line,
                    'write options as key=value and quote values with blanks, e.g. key="a b"',
                )
            if token.numeric:
                name = "an option name" if hide else f"option name {token.text!r}"
                raise self.fail(
                    f"{name} of {module} must be quoted or start with a letter",
                    token.line,
                    'write it in double quotes, e.g. "option"=value',
                )
            key = token.text
            value = self._next(value_of=key)
            if value.kind == "other" or value.numeric or (value.kind == "word" and glued_other(self.lexer)):
                raise self.fail(
                    f"the value of option {key!r} of {module} must be quoted",
                    value.line,
                    f'write {key}="..."; {BARE_VALUE_FIX}',
                )
            if not value.is_name:
                raise self.fail(
                    f"option {key!r} of {module} has no value",
                    value.line,
                    f'write {key}="..." (an empty value is written {key}="")',
                )
            if not self.inline and "${" in value.text:
                raise self.fail(
                    f"the value of option {key!r} of {module} uses ${{...}} (a Java system "
                    f"property), which kmirror cannot expand",
                    value.line,
                    "write the value out in full",
                )
            options[key] = value.text
            previous = key
            end_line = value.line


_UPPER_FLAGS = tuple(flag.upper() for flag in CONTROL_FLAGS)
