"""Admin requests to a consumer group's coordinator, made by a helper process so that librdkafka cannot
take the asking process down.

librdkafka (2.x, at least to the 2.16 of confluent-kafka 2.16.1) aborts the process when an admin request
to a group coordinator (DescribeGroups, OffsetFetch, OffsetCommit: ``describe_consumer_groups``,
``list_consumer_group_offsets``, ``alter_consumer_group_offsets``) fails to be sent because the
coordinator's connection failed: ``rd_kafka_enq_once_del_source_return: Assertion 'eonce->refcnt > 0'
failed``, SIGABRT (librdkafka issue 4605, fix proposed in pull request 5397). A link to a cluster that is
cut and comes back is enough. Such requests are made inside processes that must outlive any outage (the
``kmirror run`` supervisor's group offset sync, a stream's STUCK check) and by one-shot commands, whose
failure must be one line, never a signal.

So :class:`GroupAdmin` makes them in a child process of its own (``python -m kmirror.coordinator``: an
AdminClient, the readings of :mod:`kmirror.kafkaio`), over a pipe, one request at a time. A child that
dies (a signal, an exit) or does not answer in time is one :class:`CoordinatorCrashed` (a
``KafkaException``, so callers say it in the line they say any Kafka error in: :func:`error_line`); the
next request starts a new child. Descriptions come back as confluent-kafka's own
``ConsumerGroupDescription``, offsets as plain dicts, so callers read them as before.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Node,
    TopicPartition,
)
from confluent_kafka.admin import ConsumerGroupDescription, MemberAssignment, MemberDescription

Key = tuple[str, int]

START_S = 30.0  # a child's start (Python, confluent-kafka) on a loaded machine, beside its request's timeout
ISSUE = "librdkafka issue 4605"
_FRAME = struct.Struct(">I")

log = logging.getLogger(__name__)


class CoordinatorCrashed(KafkaException):
    """The helper process died or did not answer: the request failed, the next one starts a new helper."""


# ---------------------------------------------------------------------------------- plain encodings
# What crosses the pipe: builtins only (confluent-kafka's TopicPartition does not pickle).


def encode_description(d: ConsumerGroupDescription | None) -> dict[str, Any] | None:
    if d is None:
        return None
    coordinator = d.coordinator
    return {
        "group_id": d.group_id,
        "simple": bool(d.is_simple_consumer_group),
        "assignor": d.partition_assignor,
        "state": getattr(d.state, "name", None),
        "type": getattr(getattr(d, "type", None), "name", "UNKNOWN"),
        "coordinator": (coordinator.id, coordinator.host, coordinator.port) if coordinator else None,
        "members": [
            (
                m.member_id,
                m.client_id,
                m.host,
                [(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions or [])]
                if m.assignment
                else [],
                m.group_instance_id,
            )
            for m in d.members or []
        ],
    }


def decode_description(plain: Mapping[str, Any] | None) -> ConsumerGroupDescription | None:
    if plain is None:
        return None
    where = plain["coordinator"]
    members = [
        MemberDescription(
            member_id,
            client_id,
            host,
            MemberAssignment([TopicPartition(t, p) for t, p in owned]),
            instance,
        )
        for member_id, client_id, host, owned, instance in plain["members"]
    ]
    args = (
        plain["group_id"],
        plain["simple"],
        members,
        plain["assignor"],
        plain["state"],
        Node(*where) if where else None,
    )
    try:
        return ConsumerGroupDescription(*args, type=plain["type"])
    except TypeError:  # confluent-kafka before 2.6 (the GSSAPI build's 2.0.2) has no group type
        return ConsumerGroupDescription(*args)


def encode_error(exc: BaseException) -> tuple[Any, ...]:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err = exc.args[0]
        return ("kafka", err.code(), err.str(), err.fatal(), err.retriable())
    return ("kafka", KafkaError._FAIL, f"{type(exc).__name__}: {' '.join(str(exc).split())}", False, False)


def decode_error(plain: Sequence[Any]) -> KafkaException:
    _, code, reason, fatal, retriable = plain
    return KafkaException(KafkaError(code, reason, fatal=fatal, retriable=retriable))


def crash_line(what: str, returncode: int | None, stderr_tail: str) -> str:
    """The one line for a helper that died: what was asked, how it ended (the signal's name), librdkafka's
    assertion when it printed one."""
    if returncode is None:
        how = "did not answer in time (killed)"
    elif returncode < 0:
        try:
            how = f"died of {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"died of signal {-returncode}"
    else:
        how = f"exited with code {returncode}"
    lines = [ln.strip() for ln in stderr_tail.splitlines() if ln.strip()]
    said = next(
        (ln for ln in reversed(lines) if "Assertion" in ln or "assert" in ln), lines[-1] if lines else ""
    )
    if said:
        said = said.split(": ", 1)[1] if said.startswith("python") and ": " in said else said
        said = f" ({said[:300]})"
    hint = f"; {ISSUE}" if returncode is not None and returncode < 0 else ""
    return f"{what}: librdkafka's helper process {how}{said}{hint}"


# ------------------------------------------------------------------------------------------ framing


def write_frame(out: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj)
    out.write(_FRAME.pack(len(data)) + data)
    out.flush()


def read_frame(stream: IO[bytes]) -> Any:
    """A frame from a blocking stream (the child's side); EOFError at its end."""
    head = stream.read(_FRAME.size)
    if len(head) < _FRAME.size:
        raise EOFError
    (size,) = _FRAME.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


def _read_exact(fd: int, size: int, deadline: float) -> bytes | None:
    """`size` bytes from `fd` by `deadline`; None at its end or past the deadline."""
    chunks: list[bytes] = []
    left = size
    while left:
        wait = deadline - time.monotonic()
        if wait <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            return None
        chunk = os.read(fd, left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# ------------------------------------------------------------------------------------------- parent


class GroupAdmin:
    """The group-coordinator requests of one cluster (its admin client settings), each made by a helper
    process started on first use and kept for the next one until :meth:`close` (or its death)."""

    def __init__(self, settings: Mapping[str, str], name: str = "cluster") -> None:
        self.settings = {k: v for k, v in settings.items() if k != "logger"}
        self.name = name
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._lock = threading.Lock()

    # The requests (each as the function of kmirror.kafkaio of the same name would answer it).

    def describe_group(self, group: str, timeout: float) -> ConsumerGroupDescription | None:
        """The group's description; None when its coordinator does not know it."""
        return decode_description(self._ask("describe_group", group, timeout, budget=timeout))

    def group_state(self, group: str, timeout: float) -> tuple[str, int]:
        """(state name, number of listed members); ("DEAD", 0) for a group the coordinator does not know."""
        state, members = self._ask("group_state", group, timeout, budget=timeout)
        return str(state), int(members)

    def committed_offsets(self, group: str, timeout: float) -> dict[Key, int]:
        """{(topic, partition): committed offset} of the group; empty when the group is unknown."""
        got = self._ask("committed_offsets", group, timeout, budget=2 * timeout)
        return {(str(t), int(p)): int(o) for (t, p), o in got.items()}

    def alter_offsets(
        self, group: str, offsets: Sequence[TopicPartition], timeout: float
    ) -> list[tuple[str, int, KafkaError]]:
        """Commit `offsets` for the group (Kafka refuses while it has members); the partitions refused,
        with their errors (an error of the whole request is raised)."""
        plain = [(tp.topic, tp.partition, tp.offset) for tp in offsets]
        refused = self._ask("alter_offsets", group, timeout, plain, budget=timeout)
        return [(t, p, decode_error(e).args[0]) for t, p, e in refused]

    # The child.

    def _ask(self, op: str, group: str, timeout: float, *args: object, budget: float) -> Any:
        what = f"{op.replace('_', ' ')} of group {group!r} on {self.name}"
        with self._lock:
            proc = self._child()
            assert proc.stdin is not None and proc.stdout is not None
            deadline = time.monotonic() + budget + START_S
            try:
                write_frame(proc.stdin, (op, group, timeout, *args))
            except OSError:
                raise self._crashed(what, deadline) from None
            head = _read_exact(proc.stdout.fileno(), _FRAME.size, deadline)
            body = _read_exact(proc.stdout.fileno(), _FRAME.unpack(head)[0], deadline) if head else None
            if body is None:
                raise self._crashed(what, deadline)
            kind, value = pickle.loads(body)
        if kind == "error":
            raise decode_error(value)
        return value

    def _child(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._reap()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - kept open for the child's life
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "kmirror.coordinator"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self._proc.stdin is not None
        write_frame(self._proc.stdin, self.settings)
        return self._proc

    def _crashed(self, what: str, deadline: float) -> CoordinatorCrashed:
        proc = self._proc
        code: int | None = None
        if proc is not None:
            try:
                code = proc.wait(max(0.5, min(5.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        tail = ""
        if self._stderr is not None:
            self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, self._stderr.tell() - 4096))
            tail = self._stderr.read().decode(errors="replace")
        self._reap()
        line = crash_line(what, code, tail)
        return CoordinatorCrashed(KafkaError(KafkaError._FAIL, line))

    def _reap(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            if proc.poll() is None:
                try:
                    proc.wait(2)  # stdin closed: it exits after its request
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def close(self) -> None:
        with self._lock:
            self._reap()

    def __enter__(self) -> GroupAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -------------------------------------------------------------------------------------------- child


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """The helper: an AdminClient of the settings in the first frame; then each request answered, until
    the parent closes the pipe."""
    from confluent_kafka.admin import AdminClient

    from kmirror import kafkaio

    settings = read_frame(requests)
    admin = AdminClient({**settings, "logger": kafkaio.silent_log("kmirror.coordinator.client")})
    while True:
        try:
            op, group, timeout, *args = read_frame(requests)
        except EOFError:
            return
        try:
            value: Any
            if op == "describe_group":
                value = encode_description(kafkaio.describe_group(admin, group, timeout))
            elif op == "group_state":
                value = kafkaio.group_state(admin, group, timeout)
            elif op == "committed_offsets":
                value = kafkaio.committed_offsets(admin, group, timeout)
            elif op == "alter_offsets":
                value = _alter(admin, group, timeout, args[0])
            else:
                raise ValueError(f"unknown request {op!r}")
            answer: tuple[str, Any] = ("ok", value)
        except Exception as exc:  # every failure goes back to the parent as its error
            answer = ("error", encode_error(exc))
        write_frame(answers, answer)


def _alter(admin: Any, group: str, timeout: float, offsets: list[tuple[str, int, int]]) -> list[Any]:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for t, p, o in offsets])
    result = admin.alter_consumer_group_offsets([request], request_timeout=timeout)[group].result()
    return [
        (tp.topic, tp.partition, ("kafka", tp.error.code(), tp.error.str(), False, False))
        for tp in result.topic_partitions or []
        if tp.error is not None
    ]


def main() -> None:
    # The answers go to the real stdout; anything else written to fd 1 (a library's print) goes to stderr.
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which closes the pipe
    serve(sys.stdin.buffer, answers)


if __name__ == "__main__":
    main()
