"""The failover scenario of bench/behaviour.py: an application group moves from the source to the target.

An application consumer group reads the source topic and commits its positions `--commits` times (every
`--copy-before`/`--commits` seconds), then stops; traffic goes on `--tail` seconds; the producer stops and
the run waits until every record is on the target and `--failover-wait` seconds have passed since the
group's last commit. Then the fail over: the mirror is stopped (SIGTERM); for kmirror, `kmirror failover
--apply` for the group (the mirror ran with `--groups`); MirrorMaker 2 ran with its checkpoints and group
offset sync (it commits the group's translated offsets on the target itself while the group has no active
member there); MirrorMaker 1 has no offset translation. A consumer of the same group then starts on the
target (auto.offset.reset=earliest: where the group has no offset on the target it reads from the start)
and reads to the end of every partition. Counted by the records' unique ids: re-read = records the group
had consumed and committed on the source that it reads again on the target; skipped = records after its
committed position (on the source) that are on the target and that it never reads there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from throughput import QUIET

APP_GROUPS = "app-.*"
APP_SETTINGS = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
}


def mm2_settings(sync_s: int) -> dict[str, str]:
    """MirrorMaker 2's checkpoints and group offset sync, every ``sync_s`` seconds, for the app groups."""
    every = str(sync_s)
    return {
        "emit.checkpoints.enabled": "true",
        "emit.checkpoints.interval.seconds": every,
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": every,
        "refresh.groups.interval.seconds": every,
        "groups": APP_GROUPS,
    }


def kmirror_options(sync_s: int) -> list[str]:
    """kmirror run's group offset sync for the app groups, every ``sync_s`` seconds."""
    return ["--groups", APP_GROUPS, "--sync.group.offsets.interval.ms", str(sync_s * 1000)]


@dataclass
class FailoverRun:
    scenario: str
    contender: str
    attempt: int
    produced: int
    commits: int  # commits the group made on the source
    committed: int  # records below the group's committed position on the source (consumed and committed)
    re_read: int  # of those, records the group reads again on the target (distinct)
    skipped: int  # records after the committed position, on the target, never read there by the group
    read_on_target: int  # records the group read on the target (every copy)
    synced_partitions: int  # partitions where the group had an offset on the target when it started there
    load: float
    note: str = ""


def application(
    source: str, group: str, topic: str, commits: int, every_s: float
) -> tuple[dict[int, int], float]:
    """The application group on the source: reads, commits its positions every ``every_s`` seconds,
    ``commits`` times, then leaves. Its last committed offsets per partition, and when it committed them."""
    c = Consumer({"bootstrap.servers": source, "group.id": group, **APP_SETTINGS}, logger=QUIET)
    c.subscribe([topic])
    position: dict[int, int] = {}
    committed: dict[int, int] = {}
    last = 0.0
    try:
        for _ in range(commits):
            due = time.monotonic() + every_s
            while time.monotonic() < due:
                for m in c.consume(500, 0.2):
                    if m.error() is None:
                        position[m.partition()] = m.offset() + 1
            if position:
                c.commit(
                    offsets=[TopicPartition(topic, p, o) for p, o in position.items()], asynchronous=False
                )
                committed, last = dict(position), time.monotonic()
    finally:
        c.close()
    if not committed:
        raise SystemExit(f"application group {group} read nothing from the source")
    return committed, last


def read_to_end(
    bootstrap: str, group: str, topic: str, partitions: int, *, subscribe: bool, timeout: float = 120
) -> list[tuple[int, int, int]]:
    """(sequence number, partition, offset) of every record read until every partition is at its end: as
    group ``group`` from its committed offsets (``subscribe``; never commits), else assigned from the
    beginning."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, **APP_SETTINGS, "enable.partition.eof": True},
        logger=QUIET,
    )
    parts: set[int] = set()
    if subscribe:
        c.subscribe([topic], on_assign=lambda _c, ps: parts.update(tp.partition for tp in ps))
    else:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        parts.update(range(partitions))
    got: list[tuple[int, int, int]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while not (parts and at_end >= parts):
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"group {group}: not at the end of {sorted(parts - at_end)} in {timeout:.0f} s"
                )
            for m in c.consume(1000, 0.2):
                err = m.error()
                if err is None:
                    got.append((int((m.value() or b"")[:10]), m.partition(), m.offset()))
                    at_end.discard(m.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
    finally:
        c.close()
    return got


def offsets_on_target(target: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets on the target (read without joining the group)."""
    c = Consumer({"bootstrap.servers": target, "group.id": group}, logger=QUIET)
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}


def kmirror_failover(consumer_file: Path, producer_file: Path, group: str) -> str:
    """`kmirror failover --apply` for the group (the mirror's own files); a note from its JSON report."""
    cmd = [sys.executable, "-m", "kmirror", "failover", "--source.config", str(consumer_file),
           "--target.config", str(producer_file), "--group", group, "--apply", "--json"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise SystemExit(f"kmirror failover exited {done.returncode}: {done.stderr.strip()}")
    plan = json.loads(done.stdout)
    return (
        f"`kmirror failover --apply` (source {plan.get('source')}) moved {plan.get('committed')} of "
        f"{len(plan.get('partitions') or [])} partitions forward (the others already stood where the "
        f"mirror's group offset sync had put them), {len(plan.get('untranslated') or [])} untranslated"
    )


def count(
    on_source: list[tuple[int, int, int]], committed: dict[int, int], on_target: set[int], read: list[int]
) -> tuple[int, int, int]:
    """(records consumed and committed on the source, of them re-read on the target, skipped)."""
    consumed = {s for s, p, o in on_source if o < committed.get(p, 0)}
    seen = set(read)
    skipped = sum(1 for s in on_target if s not in consumed and s not in seen)
    return len(consumed), len(consumed & seen), skipped


def copies(read: list[int]) -> int:
    """Copies beyond the first among the records read."""
    return sum(n - 1 for n in Counter(read).values())


def table(runs: list[FailoverRun], partitions: int) -> list[str]:
    lines = [
        "| scenario | contender | run | group committed | re-read | skipped | notes |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        notes = [f"the group had offsets on the target for {r.synced_partitions} of {partitions} partitions "
                 f"when it started there; it read {r.read_on_target:,} records", r.note]  # fmt: skip
        lines.append(
            f"| {r.scenario} | {r.contender} | {r.attempt + 1} | {r.committed:,} records in {r.commits} "
            f"commits | {r.re_read:,} | {r.skipped:,} | {'; '.join(n for n in notes if n)} |"
        )
    return lines
