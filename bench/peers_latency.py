"""End-to-end latency of a mirror at a steady rate below saturation, for bench/peers.py.

A producer (a thread of the bench process: acks=all, idempotent, linger.ms=5, the run's compression)
writes keyed records of 100 B to the source at a fixed rate, each with its timestamp set to its send time
(CreateTime, milliseconds) and the same send time written in its value. A reader on the target (the bench's
main thread, a `Consumer` assigned every partition from the start, fetch.wait.max.ms=10) records, per
record, its wall clock at arrival minus the record's timestamp. It also checks that the mirror kept the
timestamp: CreateTime and equal to the send time in the value ("timestamps kept").

Warm-up: until the target has a record of every source partition, only probe records go out (one every
50 ms, partitions in turn), so no backlog builds while the mirror starts; then the steady rate runs for
`warmup` seconds, not counted (group joins and task starts settle), then for `seconds` seconds, counted.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, Consumer, Producer, TopicPartition
from throughput import QUIET, TOPIC

SIZE = 100
FETCH_WAIT_MS = 10
PROBE_S = 0.05


@dataclass
class Latency:
    p50: float  # ms
    p99: float  # ms
    records: int  # records counted (sent in the measured window and read on the target)
    kept: int  # of those, records whose timestamp on the target is the source's (CreateTime, send time)


class Sender:
    """Records of SIZE bytes: `<kind> <partition> <send ms> ` then padding; timestamp = send ms."""

    def __init__(self, source: str, partitions: int, compression: str) -> None:
        self.partitions = partitions
        self.failed: list[str] = []
        self.producer = Producer(
            {"bootstrap.servers": source, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
             "compression.type": compression},
            logger=QUIET,
        )  # fmt: skip

    def send(self, kind: bytes, i: int) -> None:
        part = i % self.partitions
        now_ms = int(time.time() * 1000)
        value = (b"%s %d %d " % (kind, part, now_ms)).ljust(SIZE, b"x")
        self.producer.produce(
            TOPIC, value, b"key-%d" % (i % 10_000), part, timestamp=now_ms, on_delivery=self.delivered
        )
        self.producer.poll(0)

    def delivered(self, err: object, msg: object) -> None:
        if err is not None:
            self.failed.append(str(err))

    def steady(self, rate: int, warm: int, measured: int) -> None:
        t0 = time.monotonic()
        for i in range(warm + measured):
            delay = t0 + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.send(b"w" if i < warm else b"m", i)
        if self.producer.flush(60) or self.failed:
            self.failed.append("not every record was delivered")


def steady_latency(
    start: Callable[[], int],
    stop: Callable[[], None],
    *,
    source: str,
    target: str,
    partitions: int,
    rate: int,
    seconds: float,
    warmup: float,
    compression: str,
    start_timeout: float = 300,
) -> Latency:
    """Start the mirror (`start`), measure as the module says, stop it (`stop`)."""
    reader = Consumer(
        {"bootstrap.servers": target, "group.id": "bench-latency-reader", "enable.auto.commit": False,
         "fetch.wait.max.ms": FETCH_WAIT_MS},
        logger=QUIET,
    )  # fmt: skip
    reader.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
    sender = Sender(source, partitions, compression)
    latencies: list[float] = []
    kept = 0
    start()
    try:
        seen: set[bytes] = set()
        deadline, i = time.monotonic() + start_timeout, 0
        while len(seen) < partitions:
            sender.send(b"p", i)
            i += 1
            for m in reader.consume(100, PROBE_S):
                if m.error() is None and m.value():
                    seen.add(m.value().split(b" ", 2)[1])
            if time.monotonic() > deadline:
                raise SystemExit(f"the mirror copied no record of {partitions - len(seen)} partitions")
        warm, measured = int(rate * warmup), int(rate * seconds)
        thread = threading.Thread(target=sender.steady, args=(rate, warm, measured), daemon=True)
        thread.start()
        deadline = time.monotonic() + warmup + seconds + 120
        while len(latencies) < measured and time.monotonic() < deadline:
            m = reader.poll(0.1)  # one record: its arrival is when poll returns it, not when a batch fills
            now_ms = time.time() * 1000
            if m is None or m.error() is not None or not m.value() or not m.value().startswith(b"m"):
                continue
            kind, ts = m.timestamp()
            latencies.append(now_ms - ts)
            sent_ms = int(m.value().split(b" ", 3)[2])
            kept += kind == TIMESTAMP_CREATE_TIME and ts == sent_ms
        thread.join(60)
        if sender.failed:
            raise SystemExit(f"the latency producer failed: {sender.failed[0]}")
        if len(latencies) < measured:
            raise SystemExit(f"only {len(latencies)} of {measured} records reached the target in time")
    finally:
        stop()
        reader.close()
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    return Latency(q[49], q[98], len(latencies), kept)
