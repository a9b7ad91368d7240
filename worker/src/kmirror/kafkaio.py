"""Every reading kmirror makes of Kafka's admin and group APIs, once: a group's description and committed
offsets, partitions' end offsets (with the watermark fallback and the probe past the high watermark),
the group states with live members, a Kafka error as one line, and the loggers handed to clients. Used
by mirror, failover, health and audit.

librdkafka's own lines reach kmirror's log through :func:`client_log`, whose logger holds them to one line
of a kind per minute (:class:`Repeats`): while a link is cut each client retries its connections many
times a second, and every retry is an ERROR line.

librdkafka (2.4 to at least 2.16) dereferences a missing consumer-group handle when an admin client's
OffsetFetch is answered NOT_COORDINATOR: the process dies with SIGSEGV (librdkafka issue 5040,
confluent-kafka-python 1982). Apache Kafka answers that way while a group's coordinator is still being
found or loaded, for example on the first group request a cluster ever gets or after the coordinator
moved. So the group is described first: describing finds the coordinator and waits for it to have
loaded, and a group the coordinator does not know has no committed offsets, so its offsets are never
asked for.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription

try:  # confluent-kafka >= 2.3; the GSSAPI build for Kerberos hosts (2.0.2) has no list_offsets
    from confluent_kafka.admin import OffsetSpec
except ImportError:  # pragma: no cover - depends on the installed client
    OffsetSpec = None

Key = tuple[str, int]

# ------------------------------------------------------------------------------------------ loggers

F = TypeVar("F", bound=logging.Filter)


def one_filter(logger: logging.Logger, kind: type[F]) -> F:
    """``logger``'s one filter of ``kind``, added when it has none (a process runs one stream: one filter
    of each kind is enough, whichever client's logger it is)."""
    for f in logger.filters:
        if isinstance(f, kind):
            return f
    new = kind()
    logger.addFilter(new)
    return new


REPEAT_WINDOW_S = 60.0
"""At most one librdkafka line of a kind per window (the window of a kind opens at its first line)."""

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
    """librdkafka's repeated lines, rate-limited, and the last connection failure it reported; every
    :func:`client_log` logger has one (the first of its filters).

    While a cluster is unreachable librdkafka logs one FAIL line per broker address and retry, and it
    retries many times a second: a source whose host names do not resolve wrote about 240 ERROR lines in
    14 s, a cut link about 1,500 per stream in 20 s, the lines a client queued during a blocking request
    all in the same millisecond. This filter lets the first line of a kind through, counts the ones like it
    for ``window_s``, and lets the next one through with the count. Two lines are "alike" when they say
    the same thing about the same broker once librdkafka's own counters, timings, thread and client names
    are cut from them (so a logger's clients share their kinds).

    ``last_failure`` is the last connection failure, which the stream names in its own line ("source
    cluster ... unreachable since ...: Failed to resolve ...") instead of librdkafka's generic "Local:
    Broker transport failure"."""

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
        passes, held = self._admit(f"{fac} {_VARYING.sub('', text)}")
        if passes and held:
            record.args = (fac, _name, f"{text} {held}")
        return passes

    def _admit(self, kind: str) -> tuple[bool, str]:
        """Whether a line of ``kind`` passes now, and the note of the lines of its kind held back before it
        ("(N more like it in the last S s)"; empty: none)."""
        now = self._clock()
        seen = self._kinds.get(kind)
        if seen is not None and now - seen[0] < self.window_s:
            self._kinds[kind] = (seen[0], seen[1] + 1)
            return False, ""
        self._kinds[kind] = (now, 0)
        if len(self._kinds) > 1000:  # many brokers over a long outage: forget the stale kinds
            self._kinds = {k: v for k, v in self._kinds.items() if now - v[0] < self.window_s}
        if seen is not None and seen[1]:
            return True, f"({seen[1]} more like it in the last {now - seen[0]:.0f} s)"
        return True, ""


_NUMBERS = re.compile(r"\d+")


class OwnRepeats(Repeats):
    """kmirror's own warnings that a failing request repeats at every try (the group offset sync each
    second, the sync points at each commit point): the first of a kind, then at most one per ``window_s``
    with the count of those held back (:class:`Repeats`' window). Two lines are alike when they differ only
    in their numbers. Lines below WARNING pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        text = record.getMessage()
        passes, held = self._admit(_NUMBERS.sub("#", text))
        if passes and held:
            record.msg, record.args = f"{text} {held}", None
        return passes


def own_repeats(logger: logging.Logger) -> OwnRepeats:
    """``logger``'s one :class:`OwnRepeats` filter (for a module whose warnings a retried request repeats)."""
    return one_filter(logger, OwnRepeats)


def repeats(logger: logging.Logger) -> Repeats:
    """``logger``'s one :class:`Repeats` filter."""
    return one_filter(logger, Repeats)


def client_log(name: str) -> logging.Logger:
    """The logger handed to a client (``logger=``) for librdkafka's own lines: ``kmirror.librdkafka.NAME``,
    WARNING and up once the mirror's logging is set up (:mod:`kmirror.mirror.logformat`), each kind of
    line at most once a minute (its :class:`Repeats`, the logger's first filter: it notes the failures the
    filters after it drop)."""
    logger = logging.getLogger(f"kmirror.librdkafka.{name}")
    repeats(logger)
    return logger


def silent_log(name: str) -> logging.Logger:
    """A logger that drops every line handed to it: for clients whose failures the caller says itself."""
    logger = logging.getLogger(name)
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


@contextlib.contextmanager
def silenced(name: str) -> Iterator[None]:
    """While it lasts, the lines handed to logger ``name`` and its children are dropped (a command that
    says what failed in its own line); then the logger is as it was."""
    logger = logging.getLogger(name)
    drop = logging.NullHandler()
    propagate = logger.propagate
    logger.addHandler(drop)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(drop)
        logger.propagate = propagate


# ------------------------------------------------------------------------------------------- errors


def error_line(exc: BaseException) -> str:
    """A Kafka error as one line: the KafkaError's own text, or the exception's text on one line."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].str()
    return " ".join(str(exc).split())


# ------------------------------------------------------------------------------------------- groups

# Group states in which members are connected (confluent_kafka.ConsumerGroupState names).
LIVE_STATES = frozenset({"STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE"})

# Answers that mean "the coordinator is not ready yet": described again until the timeout.
_NOT_READY = {
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError._TIMED_OUT,
}
_UNKNOWN = {KafkaError.GROUP_ID_NOT_FOUND}


def _code(exc: KafkaException) -> int | None:
    err = exc.args[0] if exc.args else None
    return err.code() if isinstance(err, KafkaError) else None


def describe_group(admin: AdminClient, group: str, timeout: float) -> ConsumerGroupDescription | None:
    """The group's description, None when its coordinator does not know it (GROUP_ID_NOT_FOUND). While
    the coordinator is not ready the group is described again (every 0.2 s) until `timeout` has passed;
    each request waits at most what is left of it (at least 0.5 s)."""
    deadline = time.monotonic() + timeout
    while True:
        left = max(0.5, deadline - time.monotonic())
        try:
            return admin.describe_consumer_groups([group], request_timeout=left)[group].result()
        except KafkaException as exc:
            if _code(exc) in _UNKNOWN:
                return None
            if _code(exc) in _NOT_READY and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            raise


def group_state(admin: AdminClient, group: str, timeout: float) -> tuple[str, int]:
    """(state name, number of listed members) of the group; ("DEAD", 0) when its coordinator does not
    know it, as Kafka describes a group it has no record of."""
    described = describe_group(admin, group, timeout)
    if described is None:
        return "DEAD", 0
    return described.state.name, len(described.members or [])


def is_active(state: str, members: int) -> bool:
    """Whether a group has connected members: listed members, or a state in :data:`LIVE_STATES` (brokers
    that list no members)."""
    return members > 0 or state in LIVE_STATES


def group_known(admin: AdminClient, group: str, timeout: float) -> bool:
    """Whether the group's coordinator knows the group (it has members or committed offsets)."""
    described = describe_group(admin, group, timeout)
    return described is not None and described.state.name not in ("DEAD", "UNKNOWN")


def committed_offsets(admin: AdminClient, group: str, timeout: float) -> dict[tuple[str, int], int]:
    """{(topic, partition): committed offset} of the group; empty when the group is unknown."""
    if not group_known(admin, group, timeout):
        return {}
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=timeout)
    listed = fut[group].result().topic_partitions or []
    return {(tp.topic, tp.partition): tp.offset for tp in listed if tp.offset >= 0}


# -------------------------------------------------------------------------------------- end offsets


def has_list_offsets(admin: AdminClient) -> bool:
    """Whether the client can ask ListOffsets (confluent-kafka >= 2.3)."""
    return OffsetSpec is not None and hasattr(admin, "list_offsets")


def listed_offsets(
    admin: AdminClient, parts: Sequence[Key], timeout: float, *, earliest: bool = False
) -> dict[Key, int]:
    """The partitions' end offsets (high watermarks), or their log start offsets with `earliest`, by
    ListOffsets (only when :func:`has_list_offsets`)."""
    spec = OffsetSpec.earliest() if earliest else OffsetSpec.latest()
    futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in parts}, request_timeout=timeout)
    return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}


def watermarks(consumer: Consumer, parts: Sequence[Key], timeout: float) -> dict[Key, tuple[int, int]]:
    """{(topic, partition): (low, high) watermark} asked of the brokers (never the cached values)."""
    return {
        (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=timeout, cached=False)
        for t, p in parts
    }


def end_offsets(
    admin: AdminClient, consumer: Consumer, parts: Sequence[Key], timeout: float
) -> dict[Key, int]:
    """The partitions' high watermarks: by ListOffsets, or from `consumer`'s watermarks on clients
    without it (the watermark fallback)."""
    if has_list_offsets(admin):
        return listed_offsets(admin, parts, timeout)
    return {k: high for k, (_, high) in watermarks(consumer, parts, timeout).items()}


def true_ends(
    admin: AdminClient, probe: Consumer, parts: Sequence[Key], timeout: float = 10.0
) -> dict[Key, int]:
    """End offsets of partitions: the high watermark, or past the last record found by reading from high
    watermark - 1 to the end of the partition when that is further (brokers that report the high
    watermark as the last batch's base offset + 1). On Kafka this reads one record per partition.
    `probe` is a consumer with enable.partition.eof that is assigned only while it probes."""
    if not parts:
        return {}
    ends = end_offsets(admin, probe, parts, timeout)
    todo = {k for k, hw in ends.items() if hw > 0}
    if not todo:
        return ends
    probe.assign([TopicPartition(t, p, ends[(t, p)] - 1) for t, p in sorted(todo)])
    deadline = time.monotonic() + timeout
    try:
        while todo and time.monotonic() < deadline:
            for m in probe.consume(1000, 0.005):  # returns at the timeout when fewer records came
                key = (m.topic(), m.partition())
                err = m.error()
                if err is None:
                    ends[key] = max(ends[key], m.offset() + 1)
                elif err.code() == KafkaError._PARTITION_EOF:
                    todo.discard(key)
                elif err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    raise KafkaException(err)  # asked again for ever otherwise: the caller names it
    finally:
        probe.unassign()
    return ends


# ---------------------------------------------------------------------------------------- ownership
# Whether a group has partitions to give a member that has none: the mirror's STUCK warning
# (kmirror.mirror.membership) asks it.

STABLE = "STABLE"


def partitions_to_give(state: str, owned: Sequence[Sequence[Key]], total: int) -> str | None:
    """Why a group that leaves a member without partitions has some to give it, or None when it has not
    (or the broker does not say). `state` is the group state's name, `owned` every listed member's
    partitions, `total` the partitions of the subscribed topics.

    A group that is not STABLE is still rebalancing (or has no live member at all): whoever waits for
    partitions waits for that rebalance. A STABLE group that lists its members has partitions to give
    when some have no owner, or when a member owns two or more (a balanced assignor gives an idle member
    one of them). A STABLE group whose broker lists no members cannot tell: None."""
    if state != STABLE:
        return f"group state {state}, not STABLE: a rebalance has not finished"
    if not owned:
        return None
    taken = {tp for member in owned for tp in member}
    if len(taken) < total:
        return f"{total - len(taken)} of {total} partitions have no owner"
    most = max(len(member) for member in owned)
    if most >= 2:
        return f"a member owns {most} partitions"
    return None
