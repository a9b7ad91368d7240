"""librdkafka's repeated lines, rate-limited, and the last connection failure it reported.

While a cluster is unreachable librdkafka logs one FAIL line per broker address and retry: a source
whose host names do not resolve wrote about 240 ERROR lines in 14 s (177 in one second, all queued while
a metadata request waited). :class:`Repeats` lets the first line of a kind through, counts the ones like
it for ``window_s``, and lets the next one through with the count. Two lines are "alike" when they say the
same thing about the same broker once librdkafka's own counters and timings are cut from them.

It also keeps the last connection failure (``last_failure``), which the stream names in its own line
("source cluster ... unreachable since ...: Failed to resolve ...") instead of librdkafka's generic
"Local: Broker transport failure".
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from kmirror.kafkaio import one_filter

REPEAT_WINDOW_S = 60.0
"""At most one line of a kind per window (the window of a kind opens at its first line)."""

# The parts of a librdkafka line that differ between repeats of the same failure.
_VARYING = re.compile(
    r"\(after \d+ms in state [A-Z_]+(?:, \d+ identical error\(s\) suppressed)?\)"
    r"|\d+ identical error\(s\) suppressed"
    r"|\[thrd:[^\]]*\]"
    r"|rdkafka#[a-z]+-\d+"
)
_FAILURE = re.compile(r"^(FAIL|ERROR)$")
_THREAD = re.compile(r"^\[thrd:[^\]]*\]:\s*")
_AFTER = re.compile(r"\s*\(after \d+ms in state [A-Z_]+(?:, \d+ identical error\(s\) suppressed)?\)")


class Repeats(logging.Filter):
    """A filter for one librdkafka logger (a process runs one stream: one filter per logger)."""

    def __init__(
        self, window_s: float = REPEAT_WINDOW_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.window_s = window_s
        self._clock = clock
        self._kinds: dict[str, tuple[float, int]] = {}  # kind -> (window start, lines held back)
        self.last_failure: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not (isinstance(args, tuple) and len(args) == 3):
            return True  # not a librdkafka line
        fac, _name, text = (str(a) for a in args)
        if _FAILURE.match(fac):
            self.last_failure = _AFTER.sub("", _THREAD.sub("", text))
        if record.levelno < logging.WARNING:
            return True
        kind = f"{fac} {_VARYING.sub('', text)}"
        now = self._clock()
        seen = self._kinds.get(kind)
        if seen is not None and now - seen[0] < self.window_s:
            self._kinds[kind] = (seen[0], seen[1] + 1)
            return False
        self._kinds[kind] = (now, 0)
        if len(self._kinds) > 1000:  # many brokers over a long outage: forget the stale kinds
            self._kinds = {k: v for k, v in self._kinds.items() if now - v[0] < self.window_s}
        if seen is not None and seen[1]:
            record.args = (fac, _name, f"{text} ({seen[1]} more like it in the last {now - seen[0]:.0f} s)")
        return True


def repeats(logger: logging.Logger) -> Repeats:
    """``logger``'s one :class:`Repeats` filter."""
    return one_filter(logger, Repeats)
