"""Filters that write a value into a file format so that it reads back as exactly that value and nothing more.

An inventory value (a whitelist, a path, a realm's KDC) must never add a line, a directive or a setting
to the file it is written into. Each filter writes one value in one format's own quoting:

- ``kmirror_systemd_arg``: one argument of a systemd command line (``ExecStart=``; systemd.service,
  "Command lines"): ``%`` as ``%%`` (specifiers), ``$`` as ``$$`` (variable expansion); anything but
  plain characters in double quotes with C escapes (``\\\\``, ``\\"``, ``\\n``, ``\\xNN``, ...).
- ``kmirror_systemd_env``: one ``Environment=`` assignment ``NAME=value``, quoted the same way (no ``$``
  expansion there); NAME must be a variable name.
- ``kmirror_krb5_value``: a relation value of krb5.conf (MIT profile syntax): plain, or in double quotes
  with the escapes MIT's parser knows (``\\\\``, ``\\"``, ``\\n``, ``\\t``, ``\\b``).
- ``kmirror_krb5_tag``: a realm, relation or domain name of krb5.conf: these cannot be quoted, so
  anything but letters, digits and ``. _ - : / @ +`` is refused (a trailing ``*`` would mark it final).

A NUL character cannot be carried by any of these formats (nor by a command line): it is refused with
the value's name. Used by templates/ (kmirror_config, kmirror_service) and the kmirror_audit role's
templates; every role depends on kmirror_common, so these filters are always loaded.
"""

from __future__ import annotations

import re

# Characters a systemd argument may hold without quotes.
_SYSTEMD_PLAIN = re.compile(r"[A-Za-z0-9_./:=@+,-]+")
_C_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\a": "\\a", "\b": "\\b",
              "\f": "\\f", "\v": "\\v"}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KRB5_PLAIN = re.compile(r"[A-Za-z0-9_.:/@+*-]+")
_KRB5_TAG = re.compile(r"[A-Za-z0-9_.:/@+-]+")
_KRB5_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\b": "\\b"}


class EscapeError(ValueError):
    """A value no quoting of its format can carry (Ansible shows the message as the task's error)."""


def _error(message: str) -> Exception:
    try:
        from ansible.errors import AnsibleFilterError
    except ImportError:  # rendered outside Ansible (tests with plain jinja2)
        return EscapeError(message)
    return AnsibleFilterError(message)


def _text(value: object, what: str) -> str:
    s = "" if value is None else str(value)
    if "\0" in s:
        raise _error(f"{what} {s!r} holds a NUL character; remove it (no file or command line can carry it)")
    return s


def _c_quoted(s: str) -> str:
    out = []
    for c in s:
        if c in _C_ESCAPES:
            out.append(_C_ESCAPES[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def kmirror_systemd_arg(value: object, what: str = "a command line argument") -> str:
    """One argument of ExecStart=, exactly as given (systemd's specifier, variable and C-escape rules)."""
    s = _text(value, what).replace("%", "%%").replace("$", "$$")
    return s if _SYSTEMD_PLAIN.fullmatch(s) else _c_quoted(s)


def kmirror_systemd_env(value: object, name: str) -> str:
    """The quoted assignment of Environment= (``"NAME=value"``): specifiers doubled, C escapes."""
    if not _ENV_NAME.fullmatch(str(name)):
        raise _error(f"environment variable name {str(name)!r}: use letters, digits and '_'")
    return _c_quoted(f"{name}={_text(value, name)}".replace("%", "%%"))


def kmirror_krb5_value(value: object, what: str = "a krb5.conf value") -> str:
    """A relation value of krb5.conf: plain when it is, else quoted with MIT's escapes."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    s = _text(value, what)
    if _KRB5_PLAIN.fullmatch(s):
        return s
    return '"' + "".join(_KRB5_ESCAPES.get(c, c) for c in s) + '"'


def kmirror_krb5_tag(value: object, what: str = "a krb5.conf name") -> str:
    """A realm, relation or domain name of krb5.conf (these cannot be quoted): checked, written as is."""
    s = _text(value, what)
    if not _KRB5_TAG.fullmatch(s):
        raise _error(
            f"kmirror_config_krb5: {what} {s!r} cannot be written into krb5.conf; "
            "use letters, digits and '.', '_', '-', ':', '/', '@', '+' only"
        )
    return s


class FilterModule:
    def filters(self) -> dict:
        return {
            "kmirror_systemd_arg": kmirror_systemd_arg,
            "kmirror_systemd_env": kmirror_systemd_env,
            "kmirror_krb5_value": kmirror_krb5_value,
            "kmirror_krb5_tag": kmirror_krb5_tag,
        }
