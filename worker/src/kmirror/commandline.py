"""What every ``kmirror`` sub-command's command line shares: the parser (its one error format), how a
sub-command is added, and how `python -m kmirror.X` runs one sub-command alone."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NoReturn

from kmirror.errors import Command, printable, run_command, stdout_closed_quietly

if TYPE_CHECKING:
    from _typeshed import SupportsWrite


class Parser(argparse.ArgumentParser):
    """Usage errors: one line naming the problem and where help is, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {printable(message)} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """As argparse's, but an option given ``--`` as its value (``--exclude=--``) is refused: this
        Python's argparse drops that ``--`` and leaves the option an empty list, which no command
        expects (newer Pythons keep ``--`` as the value; a release apart, the line means two things)."""
        ns, extras = super().parse_known_args(args, namespace)
        for action in self._actions:
            single = type(action) is argparse._StoreAction and action.nargs is None and action.default != []
            if single and action.option_strings and getattr(ns, action.dest, None) == []:
                self.error(f"argument {'/'.join(action.option_strings)}: expected one argument, not --")
        return ns, extras

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        """As argparse's, but a closed stdout is not ignored: a help text longer than the output buffer
        would otherwise end with exit 0 half written (:func:`kmirror.errors.stdout_closed_quietly`)."""
        if message:
            (file or sys.stderr).write(message)


# The longest wait a seconds option takes (a day): a timeout or an interval beyond it is a mistake, and
# Python's sleep and librdkafka's timeouts refuse much larger values with an error of their own.
MAX_SECONDS = 86_400.0


def seconds(*, zero: bool = False) -> Callable[[str], float]:
    """An argparse type for a duration in seconds: a finite number up to MAX_SECONDS, more than 0 (or 0
    too, with `zero`); anything else is a usage error (one line, exit 2)."""
    expected = f"seconds {'from 0' if zero else 'above 0'} up to {MAX_SECONDS:.0f}"

    def parse(value: str) -> float:
        try:
            s = float(value)
        except ValueError:
            s = math.nan
        if not (0 <= s <= MAX_SECONDS) or (s == 0 and not zero):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {value!r}")
        return s

    return parse


Register = Callable[["argparse._SubParsersAction[Parser]"], argparse.ArgumentParser]


def top_parser(description: str | None = None) -> tuple[Parser, argparse._SubParsersAction[Parser]]:
    """The `kmirror` parser and its sub-commands."""
    top = Parser(prog="kmirror", description=description, allow_abbrev=False)
    return top, top.add_subparsers(dest="command", required=True, parser_class=Parser)


def add_command(
    subparsers: argparse._SubParsersAction[Parser], name: str, help: str, description: str | None
) -> argparse.ArgumentParser:
    """A sub-command whose --help shows its description as written (the module's docstring)."""
    return subparsers.add_parser(
        name,
        help=help,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )


def add_file_option(p: argparse.ArgumentParser, flag: str, help: str) -> None:
    """A required properties-file option (``--source.config FILE``; dest ``source_config``)."""
    p.add_argument(flag, dest=flag.lstrip("-").replace(".", "_"), required=True, metavar="FILE", help=help)


def run_alone(
    name: str, register: Register, commands: Mapping[str, Command], argv: Sequence[str] | None
) -> int:
    """`python -m kmirror.X ARGS`: the same as `kmirror NAME ARGS` (parser, errors, exit codes)."""
    _, sub = top_parser()
    register(sub)
    with stdout_closed_quietly():  # --help writes to stdout
        args = sub._name_parser_map[name].parse_args(sys.argv[1:] if argv is None else argv)
    args.command = name
    return run_command(name, commands[name], args)
