"""Read what librdkafka logs while a client is created offline (its feature list, its config warnings)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def captured_log(name: str) -> Iterator[tuple[logging.Logger, list[str]]]:
    """A private logger to hand to a client (``logger=``) and the lines it logged, at every level."""
    handler = _Lines()
    logger = logging.getLogger(f"kmirror.{name}.{id(handler)}")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        yield logger, handler.lines
    finally:
        logger.removeHandler(handler)
