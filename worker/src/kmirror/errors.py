"""Errors written for operators.

Every configuration problem is a :class:`ConfigError` that renders as one line naming
the file, the key and the fix, e.g.::

    consumer.properties: zk.connect: not supported; ZooKeeper is not used by kmirror;
    set bootstrap.servers=HOST:PORT[,HOST:PORT] of the brokers instead   (one line in reality)
"""

from __future__ import annotations


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


class SendFailure(KmirrorError):
    """A record could not be delivered to the target and the mirror stopped before committing past it."""

    exit_code = 3
