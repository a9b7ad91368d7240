"""Apache Kafka's own command-line tools, run from the pinned jars, and their output parsed: the reference
that `kmirror lag`, `kmirror failover` and `kmirror audit` are compared with (issue 19: "true watermarks").

- :func:`describe_group`: ``kafka-consumer-groups.sh --describe`` (ConsumerGroupCommand);
- :func:`offsets`: ``kafka-get-offsets.sh`` (GetOffsetShell), earliest or latest offset per partition;
- :func:`read_values`: ``kafka-console-consumer.sh --partition P --offset O --max-messages N``;
- :func:`log_records`: ``kafka-dump-log.sh --print-data-log`` (DumpLogSegments) on a broker's log files:
  every record and transaction marker a partition holds, so a test can count what a read_committed
  reader gets (a transaction's records once its COMMIT marker is written; control records never).

A uniquely named module (one pytest run collects every test tree), imported as ``from kafka_tools import``.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from kmirror.testing import jars
from kmirror.testing.kafka import KafkaCluster

CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
GET_OFFSET_SHELL = "org.apache.kafka.tools.GetOffsetShell"
DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
LATEST, EARLIEST = -1, -2  # GetOffsetShell --time


def run_tool(main_class: str, *args: str, timeout: float = 120.0) -> str:
    """Run one of Kafka's tools (the class behind its shell script) and return its standard output."""
    out = subprocess.run(
        [jars.java(), "-cp", jars.classpath(), main_class, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, (
        f"{main_class} {' '.join(args)}: exit {out.returncode}\n{out.stdout}{out.stderr}"
    )
    return out.stdout


def describe_group(cluster: KafkaCluster, group: str) -> dict[tuple[str, int], tuple[int, int, int]]:
    """kafka-consumer-groups.sh --describe: {(topic, partition): (current offset, log end offset, lag)};
    an offset the group never committed ("-") is -1, as in kmirror's JSON."""
    out = run_tool(
        CONSUMER_GROUP_COMMAND, "--bootstrap-server", cluster.bootstrap, "--describe", "--group", group
    )
    rows = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[0] == group and cols[2].isdigit():
            num = [-1 if c == "-" else int(c) for c in cols[3:6]]
            rows[(cols[1], int(cols[2]))] = (num[0], num[1], num[2])
    return rows


def offsets(cluster: KafkaCluster, topic: str, time: int = LATEST) -> dict[int, int]:
    """kafka-get-offsets.sh --topic T --time {-1 latest | -2 earliest}: {partition: offset}."""
    out = run_tool(
        GET_OFFSET_SHELL, "--bootstrap-server", cluster.bootstrap, "--topic", topic, "--time", str(time)
    )
    found = {}
    for line in out.splitlines():
        cols = line.strip().rsplit(":", 2)  # topic:partition:offset (a topic name has no ':')
        if len(cols) == 3 and cols[0] == topic and cols[1].isdigit():
            found[int(cols[1])] = int(cols[2])
    return found


def read_values(cluster: KafkaCluster, topic: str, partition: int, offset: int, count: int) -> list[str]:
    """kafka-console-consumer.sh: the values of `count` records of one partition from `offset` on (it
    exits once it has read them; a bounded wait, the records being there)."""
    out = run_tool(
        CONSOLE_CONSUMER,
        "--bootstrap-server", cluster.bootstrap, "--topic", topic, "--partition", str(partition),
        "--offset", str(offset), "--max-messages", str(count),
    )  # fmt: skip
    return out.splitlines()


@dataclass(frozen=True)
class LogRecord:
    """One record of a partition's log as DumpLogSegments prints it."""

    offset: int
    producer_id: int
    transactional: bool
    marker: str | None  # a control record: "COMMIT" or "ABORT"; None for a data record


_BATCH = re.compile(r"^baseOffset: (\d+) .*producerId: (-?\d+) .*isTransactional: (\w+) isControl: (\w+)")
_RECORD = re.compile(r"^\| offset: (\d+) ")
_MARKER = re.compile(r"endTxnMarker: (\w+)")


def log_records(cluster: KafkaCluster, topic: str, partition: int) -> list[LogRecord]:
    """Every record in the log segments of one partition (on the first node holding a replica), read
    by kafka-dump-log.sh --print-data-log."""
    dirs = [n.directory / "data" / f"{topic}-{partition}" for n in cluster.nodes]
    held = [d for d in dirs if d.is_dir()]
    assert held, f"no node of {cluster.name} holds {topic}-{partition}"
    segments = sorted(str(p) for p in held[0].glob("*.log"))
    out = run_tool(DUMP_LOG_SEGMENTS, "--print-data-log", "--files", ",".join(segments))
    records: list[LogRecord] = []
    batch: tuple[int, bool, bool] | None = None
    for line in out.splitlines():
        b = _BATCH.match(line)
        if b:
            batch = (int(b.group(2)), b.group(3) == "true", b.group(4) == "true")
            continue
        r = _RECORD.match(line)
        if r:
            assert batch is not None, line
            pid, transactional, control = batch
            marker = _MARKER.search(line) if control else None
            assert not control or marker, f"a control record without a transaction marker: {line}"
            records.append(
                LogRecord(int(r.group(1)), pid, transactional, marker.group(1) if marker else None)
            )
    return records


def committed_data_offsets(records: Iterable[LogRecord], start: int, end: int) -> list[int]:
    """The offsets in [start, end) a read_committed consumer gets: data records that are not
    transactional, or whose transaction's next marker (of the same producer) is COMMIT."""
    pending: dict[int, list[int]] = {}
    kept: list[int] = []
    for r in sorted(records, key=lambda r: r.offset):
        if r.marker is not None:
            done = pending.pop(r.producer_id, [])
            if r.marker == "COMMIT":
                kept.extend(done)
        elif r.transactional:
            pending.setdefault(r.producer_id, []).append(r.offset)
        else:
            kept.append(r.offset)
    return sorted(o for o in kept if start <= o < end)
