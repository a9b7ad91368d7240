"""kmirror failback: after a failover, what going back to the old primary must take care of.

    kmirror failback --old.config F --new.config F --topics REGEX [--quarantine] [--json]

The mirror old -> new ran with --provenance.header.enable; the old primary failed, the applications
moved to the new primary (kmirror failover) and wrote there; now the old primary is back. Per partition
of the topics on the old primary this names:

* the TAIL: the old primary's records after the last one the mirror copied (found by the origin header
  of the last copy on the new primary): written before the failure, never mirrored, never seen by the
  applications since. They are reported, never dropped silently and never copied twice; --quarantine
  also copies them to TOPIC.failback-tail on the old primary (same partition, key, value, headers,
  timestamp) for the owners to re-process, and is a no-op for records already there.
* the NEW WRITES: the new primary's records after that last copy: what the applications wrote since
  the failover, which the reverse mirror (kmirror run new -> old with --provenance.header.enable) copies
  back; the copies of the old primary's own records are never copied back (their origin is the old
  primary), so the reverse mirror may start from the earliest offset.

Without provenance headers on the new primary the tail cannot be located exactly: refused (exit 4).

Exit codes: 0 no tail; 1 a tail exists (reported; with --quarantine also copied); 2 bad options or
files; 4 no provenance header found on the new primary for a partition with records.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.commandline import Parser, add_command, add_file_option, seconds
from kmirror.config import admin_settings, load_client_config
from kmirror.config.filters import TopicFilter
from kmirror.errors import Command, KmirrorError
from kmirror.kafkaio import error_line, silent_log
from kmirror.lineage.provenance import origin_of

EXIT_TAIL = 1
EXIT_NO_PROVENANCE = 4
QUARANTINE_SUFFIX = ".failback-tail"
# Each quarantined copy names the tail record it copies (``TOPIC/PARTITION/OFFSET``): a later run skips a
# tail record only when the quarantine holds a copy naming it with the same key and value. Anyone who may
# write to the quarantine topic can add records, never make a tail record count as copied without putting
# that very record there.
QUARANTINE_HEADER = "kmirror.failback.origin"
STEP = 1000  # records read back from a partition's end per look for its last copy (doubled each time)


class FailbackError(KmirrorError):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Partition:
    """One partition's failback: offsets [first, end) are a range; a count of 0 is an empty range."""

    topic: str
    partition: int
    old_end: int  # the old primary's end offset
    copied_through: int  # the last old-primary offset copied to the new primary (-1: none)
    last_copy_at: int  # that copy's offset on the new primary (-1: none)
    new_end: int  # the new primary's end offset

    @property
    def tail(self) -> tuple[int, int]:
        return self.copied_through + 1, self.old_end

    @property
    def tail_records(self) -> int:
        return max(0, self.old_end - self.copied_through - 1)

    @property
    def new_writes(self) -> tuple[int, int]:
        return self.last_copy_at + 1, self.new_end

    @property
    def new_records(self) -> int:
        return max(0, self.new_end - self.last_copy_at - 1)


def lines(parts: list[Partition], quarantined: Mapping[tuple[str, int], int]) -> Iterator[str]:
    """The report, one line per partition and a summary."""
    for p in parts:
        a, b = p.tail
        tail = f"tail {p.tail_records} (offsets {a}..{b - 1})" if p.tail_records else "tail 0"
        n, m = p.new_writes
        new = f"new writes {p.new_records} (offsets {n}..{m - 1})" if p.new_records else "new writes 0"
        q = quarantined.get((p.topic, p.partition))
        moved = f"; {q} copied to {p.topic}{QUARANTINE_SUFFIX}" if q else ""
        yield f"{p.topic}/{p.partition}: old primary {tail}{moved}; new primary {new}"
    tails = sum(p.tail_records for p in parts)
    writes = sum(p.new_records for p in parts)
    yield (
        f"failback: {tails} records on the old primary were never mirrored (the tail"
        + (", quarantined" if quarantined else ", not copied: --quarantine copies them")
        + f"); {writes} records written on the new primary since the failover, for the reverse mirror"
    )


# ------------------------------------------------------------------------------------------ reading


def _reader(settings: Mapping[str, str]) -> Consumer:
    return Consumer(
        {
            **admin_settings(settings),
            "group.id": "kmirror-failback",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "logger": silent_log("kmirror.failback.client"),
        }
    )


# Passing refusals of a partition's metadata (a topic just created, a leader moving): asked again.
PASSING = {"NOT_LEADER_FOR_PARTITION", "UNKNOWN_TOPIC_OR_PART", "LEADER_NOT_AVAILABLE", "_UNKNOWN_PARTITION"}


def _watermarks(c: Consumer, topic: str, partition: int, timeout: float) -> tuple[int, int]:
    """(low, high) of a partition, asked of its leader; passing refusals are asked again until timeout."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            tp = TopicPartition(topic, partition)
            low, high = c.get_watermark_offsets(tp, timeout=timeout, cached=False)
            return int(low), int(high)
        except KafkaException as exc:
            if exc.args[0].name() not in PASSING or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _read(c: Consumer, topic: str, partition: int, lo: int, hi: int, *, timeout: float) -> Iterator[object]:
    """The records of [lo, hi) of one partition."""
    from confluent_kafka import KafkaError

    c.assign([TopicPartition(topic, partition, lo)])
    pos = lo
    idle = 0.0
    while pos < hi:
        msgs = c.consume(500, 0.5)
        if not msgs:
            idle += 0.5
            if idle > timeout:
                where = f"{topic}/{partition}"
                raise FailbackError(f"{where}: nothing read after offset {pos} in {timeout:.0f} s", 1)
            continue
        idle = 0.0
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return
                raise KafkaException(err)
            if m.offset() >= hi:
                return
            pos = m.offset() + 1
            yield m


# Is the old primary's record at this offset the one a copy (key, value) claims to be a copy of?
Same = Callable[[int, object, object], bool]


def last_copy(
    c: Consumer,
    topic: str,
    partition: int,
    lo: int,
    hi: int,
    *,
    old_id: str,
    old_end: int,
    same: Same,
    timeout: float,
) -> tuple[int, int] | None:
    """(offset on the new primary, origin offset) of the last record of [lo, hi) copied from the old
    primary's same partition (None: none). A header is a claim anyone who writes to the new primary can
    make (after a failover, the applications do): only one naming the old primary, this topic and
    partition, an offset the old primary holds (below ``old_end``), on a record whose key and value are
    the old primary's record at that offset (``same``), is taken; the others are passed over, so a
    planted header cannot hide the tail (docs/security.md)."""
    end, step = hi, STEP
    while end > lo:
        start = max(lo, end - step)
        found = []
        for m in _read(c, topic, partition, start, end, timeout=timeout):
            origin = origin_of(m.headers())  # type: ignore[attr-defined]
            if (
                origin is not None
                and origin == (old_id, topic, partition, origin.offset)
                and origin.offset < old_end
            ):
                found.append((m.offset(), origin.offset, m.key(), m.value()))  # type: ignore[attr-defined]
        for at, offset, key, value in reversed(found):
            if same(offset, key, value):
                return at, offset
        end, step = start, step * 2
    return None


def _same_as_old(c: Consumer, topic: str, partition: int, timeout: float) -> Same:
    """``same`` for last_copy: reads the old primary's record at the offset."""

    def same(offset: int, key: object, value: object) -> bool:
        for m in _read(c, topic, partition, offset, offset + 1, timeout=timeout):
            return bool(m.offset() == offset and m.key() == key and m.value() == value)  # type: ignore[attr-defined]
        return False

    return same


def plan(
    old: Mapping[str, str], new: Mapping[str, str], topics: TopicFilter, timeout: float
) -> list[Partition]:
    old_admin = AdminClient({**admin_settings(old), "logger": silent_log("kmirror.failback.client")})
    new_admin = AdminClient({**admin_settings(new), "logger": silent_log("kmirror.failback.client")})
    old_md = old_admin.list_topics(timeout=timeout)
    new_md = new_admin.list_topics(timeout=timeout)
    old_id = str(old_md.cluster_id or "")
    if not old_id:
        raise FailbackError("the old primary reports no cluster id", 2)
    names = sorted(
        t
        for t, meta in old_md.topics.items()
        if meta.error is None and topics.matches(t) and not t.endswith(QUARANTINE_SUFFIX)
    )
    if not names:
        raise FailbackError(f"no topic matches {topics.describe()} on the old primary", 2)
    old_c, new_c = _reader(old), _reader(new)
    out: list[Partition] = []
    try:
        for t in names:
            for p in sorted(old_md.topics[t].partitions):
                _, old_end = _watermarks(old_c, t, p, timeout)
                if t in new_md.topics and p in new_md.topics[t].partitions:
                    new_lo, new_end = _watermarks(new_c, t, p, timeout)
                else:
                    new_lo = new_end = 0
                found = (
                    last_copy(
                        new_c,
                        t,
                        p,
                        new_lo,
                        new_end,
                        old_id=old_id,
                        old_end=old_end,
                        same=_same_as_old(old_c, t, p, timeout),
                        timeout=timeout,
                    )
                    if new_end > new_lo
                    else None
                )
                if found is None and new_end > new_lo:
                    raise FailbackError(
                        f"{t}/{p}: the new primary holds {new_end - new_lo} records and none has a "
                        "provenance header from the old primary that matches its record there: was the "
                        "mirror run with "
                        "--provenance.header.enable? "
                        "(docs/runbooks/failback.md, without provenance)",
                        EXIT_NO_PROVENANCE,
                    )
                at, through = found if found is not None else (-1, -1)
                out.append(Partition(t, p, old_end, through, at, new_end))
    finally:
        old_c.close()
        new_c.close()
    return out


def quarantine(old: Mapping[str, str], parts: list[Partition], timeout: float) -> dict[tuple[str, int], int]:
    """Copy each tail to TOPIC.failback-tail on the old primary (created with the topic's partition count);
    a tail record an earlier run copied is not copied again (:data:`QUARANTINE_HEADER`). Returns the
    records each partition's quarantine holds of its tail."""
    todo = [p for p in parts if p.tail_records]
    if not todo:
        return {}
    admin = AdminClient({**admin_settings(old), "logger": silent_log("kmirror.failback.client")})
    counts: dict[str, int] = {}
    for p in todo:
        counts[p.topic] = max(counts.get(p.topic, 0), p.partition + 1)
    md = admin.list_topics(timeout=timeout)
    new = [
        NewTopic(t + QUARANTINE_SUFFIX, len(md.topics[t].partitions))
        for t in counts
        if t + QUARANTINE_SUFFIX not in md.topics
    ]
    if new:
        for fut in admin.create_topics(new, request_timeout=timeout).values():
            fut.result()
    reader = _reader(old)
    producer = Producer(
        {
            **admin_settings(old),
            "acks": "all",
            "enable.idempotence": True,
            "logger": silent_log("kmirror.failback.client"),
        }
    )
    done: dict[tuple[str, int], int] = {}
    try:
        for p in todo:
            q = p.topic + QUARANTINE_SUFFIX
            held = _quarantined(reader, q, p, timeout)
            a, b = p.tail
            for m in _read(reader, p.topic, p.partition, a, b, timeout=timeout):
                origin = f"{p.topic}/{p.partition}/{m.offset()}".encode()  # type: ignore[attr-defined]
                if held.get(origin) == (m.key(), m.value()):  # type: ignore[attr-defined]
                    continue
                producer.produce(
                    q,
                    m.value(),  # type: ignore[attr-defined]
                    m.key(),  # type: ignore[attr-defined]
                    p.partition,
                    timestamp=max(m.timestamp()[1], 0),  # type: ignore[attr-defined]
                    headers=[*(m.headers() or []), (QUARANTINE_HEADER, origin)],  # type: ignore[attr-defined]
                )
                producer.poll(0)
            if producer.flush(timeout) != 0:
                raise FailbackError(f"{q}/{p.partition}: the old primary did not acknowledge the copy", 1)
            done[(p.topic, p.partition)] = p.tail_records
    finally:
        reader.close()
    return done


def _quarantined(
    reader: Consumer, q: str, p: Partition, timeout: float
) -> dict[bytes, tuple[bytes | None, bytes | None]]:
    """What the quarantine partition holds of ``p``'s records: origin -> (key, value) of each copy whose
    :data:`QUARANTINE_HEADER` names a record of that partition (the last such header of a copy counts)."""
    lo, hi = _watermarks(reader, q, p.partition, timeout)
    prefix = f"{p.topic}/{p.partition}/".encode()
    held: dict[bytes, tuple[bytes | None, bytes | None]] = {}
    for m in _read(reader, q, p.partition, lo, hi, timeout=timeout):
        names = [v for k, v in (m.headers() or []) if k == QUARANTINE_HEADER and v]  # type: ignore[attr-defined]
        if names and names[-1].startswith(prefix):
            held[names[-1]] = (m.key(), m.value())  # type: ignore[attr-defined]
    return held


# ---------------------------------------------------------------------------------------------- CLI


def register(subparsers: argparse._SubParsersAction[Parser]) -> argparse.ArgumentParser:
    p = add_command(
        subparsers,
        "failback",
        help="after a failover: the old primary's unmirrored tail and the new primary's writes since",
        description=__doc__,
    )
    add_file_option(p, "--old.config", "the old primary's properties (the old mirror's consumer file)")
    add_file_option(p, "--new.config", "the new primary's properties (the old mirror's producer file)")
    p.add_argument("--topics", required=True, metavar="REGEX", help="Java regex of the mirrored topics")
    p.add_argument(
        "--quarantine",
        action="store_true",
        help=f"copy each tail to TOPIC{QUARANTINE_SUFFIX} on the old primary (idempotent)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--timeout", type=seconds(), default=30.0, metavar="S", help="request timeout (default 30)"
    )
    return p


def cmd_failback(a: argparse.Namespace) -> int:
    old = load_client_config(a.old_config, "consumer", allow_unsafe=True).settings
    new = load_client_config(a.new_config, "producer", allow_unsafe=True).settings
    topics = TopicFilter(a.topics)
    try:
        parts = plan(old, new, topics, a.timeout)
        moved = quarantine(old, parts, a.timeout) if a.quarantine else {}
    except KafkaException as exc:
        raise FailbackError(f"failback: {error_line(exc)}", 1) from None
    if a.json:
        print(
            json.dumps(
                {
                    "partitions": [
                        {**asdict(p), "tail_records": p.tail_records, "new_records": p.new_records}
                        for p in parts
                    ],
                    "quarantined": {f"{t}/{p}": n for (t, p), n in moved.items()},
                },
                indent=1,
            )
        )
    else:
        for line in lines(parts, moved):
            print(line)
    return EXIT_TAIL if any(p.tail_records for p in parts) else 0


COMMANDS = {"failback": Command(cmd_failback)}
