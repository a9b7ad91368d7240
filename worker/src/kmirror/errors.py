"""Errors written for operators.

Every configuration problem is a :class:`ConfigError` that renders as one line naming
the file, the key and the fix, e.g.::

    consumer.properties: zk.connect: not supported; ZooKeeper is not used by kmirror;
    set bootstrap.servers=HOST:PORT[,HOST:PORT] of the brokers instead   (one line in reality)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

# A command whose reader went away (`kmirror config-keys | head`) ends quietly with this code: its output
# was not all written (Python's own code for it; README "Exit codes").
EXIT_STDOUT_CLOSED = 1


class KmirrorError(Exception):
    """Base class of every error kmirror reports to an operator."""

    exit_code = 1


class ConfigError(KmirrorError):
    """Bad input: a file, a key or an option that kmirror refuses."""

    exit_code = 2

    def __init__(
        self, problem: str, *, origin: str | None = None, key: str | None = None, fix: str | None = None
    ) -> None:
        self.problem = problem
        self.origin = origin
        self.key = key
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        parts = [p for p in (self.origin, self.key) if p]
        head = ": ".join([*parts, self.problem])
        return f"{head}; {self.fix}" if self.fix else head


class ConfigProblems(ConfigError):
    """Every problem found in one pass over the input (``kmirror check-config`` lists them all). As one
    line (``kmirror run``), it is the first problem and how many more there are."""

    def __init__(self, problems: list[ConfigError]) -> None:
        self.problems = problems
        first = problems[0]
        super().__init__(first.problem, origin=first.origin, key=first.key, fix=first.fix)

    def render(self) -> str:
        more = len(self.problems) - 1
        tail = f" (and {more} more problem{'s' if more > 1 else ''}: kmirror check-config lists them all)"
        return super().render() + (tail if more else "")


class Problems:
    """Collects configuration problems instead of stopping at the first, so that an operator sees them
    all in one run::

        found = Problems()
        with found.check():
            step_that_may_raise()
        found.raise_any()
    """

    def __init__(self) -> None:
        self.found: list[ConfigError] = []

    def __bool__(self) -> bool:
        return bool(self.found)

    def add(self, exc: ConfigError) -> None:
        self.found.extend(exc.problems if isinstance(exc, ConfigProblems) else [exc])

    @contextlib.contextmanager
    def check(self) -> Iterator[None]:
        try:
            yield
        except ConfigError as exc:
            self.add(exc)

    def raise_any(self) -> None:
        if len(self.found) == 1:
            raise self.found[0]
        if self.found:
            raise ConfigProblems(list(self.found))


class SendFailure(KmirrorError):
    """A record could not be delivered to the target and the mirror stopped before committing past it."""

    exit_code = 3


def one_line(text: str) -> str:
    """A message on one line (librdkafka and OS errors may carry newlines)."""
    return " ".join(text.split())


def printable(text: str) -> str:
    """Text that stays one line and that any stream can write: control characters an option or a file
    name held (a newline, a NUL, a terminal escape) and undecodable bytes (which Python passes on as lone
    surrogates) are shown as escapes, e.g. ``\\n``, ``\\x1b``, ``\\udcff``."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(c: str) -> str:
    if c == " ":
        return c
    escaped = repr(c)[1:-1]  # '\n', '\x00', '\udcff', or the character itself (e.g. a non-breaking space)
    return escaped if escaped != c else f"\\u{ord(c):04x}"


@dataclass(frozen=True)
class Command:
    """A `kmirror` sub-command: the function that runs it, and the exit code its contract gives every
    error (None: each error's own ``exit_code``; e.g. `kmirror audit` documents 2 for any error)."""

    run: Callable[[argparse.Namespace], int]
    error_exit: int | None = None


def run_command(name: str, command: Command, args: argparse.Namespace) -> int:
    """The one place an error becomes output and an exit code, for `kmirror NAME` and
    `python -m kmirror.X`: one line ``kmirror NAME: error: ...`` on stderr, nothing on stdout.
    A closed stdout ends the command quietly (:func:`stdout_closed_quietly`)."""
    with stdout_closed_quietly():
        try:
            code = command.run(args)
        except KmirrorError as exc:
            print(f"kmirror {name}: error: {printable(one_line(str(exc)))}", file=sys.stderr)
            code = exc.exit_code if command.error_exit is None else command.error_exit
    return code


@contextlib.contextmanager
def stdout_closed_quietly() -> Iterator[None]:
    """Writing to a stdout whose reader has gone (`kmirror config-keys | head`) ends the process quietly
    with :data:`EXIT_STDOUT_CLOSED`, with no traceback and no "Exception ignored" at exit (the recipe of
    Python's signal module docs: stdout is pointed at /dev/null, so the final flush has nowhere to fail).
    Output is flushed here, so that a closed pipe shows here and not at exit; a BrokenPipeError that is
    not stdout's (a socket's) goes on as it came."""
    try:
        try:
            yield
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        if not _stdout_gone():
            raise
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(EXIT_STDOUT_CLOSED) from None


def _stdout_gone() -> bool:
    """Whether stdout is a pipe or socket with no reader left (poll reports an error or hang-up)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
