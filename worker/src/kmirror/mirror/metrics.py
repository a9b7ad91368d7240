"""What a running mirror reports: Prometheus metrics (optional port) and a stats line per interval.

Each stream keeps cheap counters (per batch, never per record) and librdkafka's own statistics
(bytes, queue depth, per-partition lag), and hands a :class:`Snapshot` to the :class:`Collector`:
directly when the stream runs in the supervisor's process, through a queue when it runs in its own.
The collector keeps the latest snapshot of every stream and renders them on each scrape, and judges
each stream's state for ``/health`` (:meth:`Collector.health`, served with the metrics by
:func:`kmirror.mirror.runner.serve_metrics`).
"""

from __future__ import annotations

import bisect
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector as _Collector

# The address the metrics server listens on unless --metrics.address says otherwise: this host only (the
# Ansible role kmirror_service sets it explicitly, kmirror_service_metrics_address).
DEFAULT_ADDRESS = "127.0.0.1"

# Replication latency (now - record timestamp) buckets, in seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


@dataclass
class Latency:
    """A cumulative histogram, observed once per batch with the batch's newest record."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    total: float = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.total += seconds


@dataclass
class Snapshot:
    source: str
    stream: int
    records_in: int = 0  # read from the source
    records_out: int = 0  # acknowledged by the target (counted at each flush)
    bytes_in: int = 0
    bytes_out: int = 0
    send_errors: int = 0
    commits: int = 0
    queue_depth: int = 0
    blocked_seconds: float = 0.0  # how long the target has acknowledged nothing while the stream waits
    partition_lag: dict[tuple[str, int], int] = field(default_factory=dict)
    partition_mismatch: dict[str, int] = field(default_factory=dict)  # topic -> source minus target count
    latency: Latency = field(default_factory=Latency)
    assigned_partitions: int = 0  # partitions the group gave this stream
    unassigned_seconds: float = 0.0  # how long it has had none (0 while it has some)
    gaps: int = 0  # offset ranges the source no longer had when the stream needed them (kmirror.mirror.gaps)
    gap_records: dict[str, int] = field(default_factory=dict)  # topic -> records lost in those gaps
    skipped_origin: int = 0  # records not copied: their provenance header names the target (provenance)
    distrusted_origin: int = 0  # copied with their provenance header replaced: it was not honoured
    taken: float = field(default_factory=time.time)


def consumer_statistics(raw: str, snap: Snapshot) -> dict[str, Any]:
    """Fold librdkafka consumer statistics JSON into a snapshot (bytes read, lag per partition); the
    parsed document."""
    stats: dict[str, Any] = json.loads(raw)
    snap.bytes_in = int(stats.get("rxmsg_bytes", snap.bytes_in))
    lag = {}
    for topic, t in stats.get("topics", {}).items():
        for pid, p in t.get("partitions", {}).items():
            if (
                int(pid) >= 0
                and p.get("fetch_state") not in (None, "none", "stopped")
                and p.get("consumer_lag", -1) >= 0
            ):
                lag[(topic, int(pid))] = int(p["consumer_lag"])
    snap.partition_lag = lag
    return stats


def producer_statistics(raw: str, snap: Snapshot) -> None:
    """Fold librdkafka producer statistics JSON into a snapshot (bytes written, queue depth)."""
    stats = json.loads(raw)
    snap.bytes_out = int(stats.get("txmsg_bytes", snap.bytes_out))
    snap.queue_depth = int(stats.get("msg_cnt", snap.queue_depth))


# /health: a stream that has handed in no snapshot for this long is "silent" (streams report every 2 s,
# also while blocked on the target: spec.REPORT_INTERVAL_S), i.e. stuck somewhere no report is made.
SILENT_AFTER_S = 30.0
# The states of a stream on /health; only RUNNING is healthy (HTTP 200 when every stream is RUNNING).
STARTING = "starting"  # started, no snapshot yet
RUNNING = "running"  # reading and writing (or joining its group, for less than its unassigned limit)
BLOCKED = "blocked"  # the target acknowledges nothing: reading paused (kmirror_target_blocked_seconds > 0)
UNASSIGNED = "unassigned"  # no partitions for longer than twice session.timeout.ms (a stuck group, or idle)
SILENT = "silent"  # no snapshot for SILENT_AFTER_S
STOPPED = "stopped"  # exited 0 (a stop was asked for)
FAILED = "failed"  # exited with an error code


@dataclass
class _Expected:
    label: str
    unassigned_after_s: float
    exit_code: int | None = None


class Collector(_Collector):
    """Renders the latest snapshot of every stream, and judges their states for /health."""

    def __init__(self) -> None:
        self.latest: dict[tuple[str, int], Snapshot] = {}
        self.extra: list[Callable[[], Iterable[Metric]]] = []  # more metric families (e.g. group offset sync)
        self._expected: dict[tuple[str, int], _Expected] = {}
        self._received: dict[tuple[str, int], float] = {}  # monotonic time each stream's last snapshot came
        self._lock = threading.Lock()

    def update(self, snap: Snapshot) -> None:
        key = (snap.source, snap.stream)
        with self._lock:
            self.latest[key] = snap
            self._received[key] = time.monotonic()

    def expect(self, source: str, stream: int, label: str, unassigned_after_s: float) -> None:
        """A stream the run starts (the runner, before starting it): /health reports it from now on."""
        with self._lock:
            self._expected[(source, stream)] = _Expected(label, unassigned_after_s)

    def ended(self, source: str, stream: int, exit_code: int) -> None:
        """The stream's process (or thread) ended with this exit code."""
        with self._lock:
            known = self._expected.setdefault((source, stream), _Expected(f"{source}#{stream}", 0.0))
            known.exit_code = exit_code

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(every stream running, the /health document: each stream's state and why)."""
        now = time.monotonic()
        with self._lock:
            keys = sorted(set(self._expected) | set(self.latest))
            streams = [
                self._stream_health(key, self._expected.get(key), self.latest.get(key), now) for key in keys
            ]
        healthy = bool(streams) and all(s["state"] == RUNNING for s in streams)
        return healthy, {"status": "ok" if healthy else "unhealthy", "streams": streams}

    def _stream_health(
        self, key: tuple[str, int], expected: _Expected | None, snap: Snapshot | None, now: float
    ) -> dict[str, Any]:
        source, stream = key
        out: dict[str, Any] = {
            "stream": expected.label if expected else f"{source}#{stream}",
            "source": source,
            "index": stream,
        }
        if snap is not None:
            out["assigned_partitions"] = snap.assigned_partitions
            out["blocked_seconds"] = round(snap.blocked_seconds, 1)
            out["unassigned_seconds"] = round(snap.unassigned_seconds, 1)
            out["records_out"] = snap.records_out
            out["last_report_seconds"] = round(now - self._received[key], 1)
        if expected is not None and expected.exit_code is not None:
            code = expected.exit_code
            out["exit_code"] = code
            if code == 0:
                return {**out, "state": STOPPED, "reason": "stopped (exit 0)"}
            return {**out, "state": FAILED, "reason": f"exited with code {code} (the log says why)"}
        if snap is None:
            return {**out, "state": STARTING, "reason": "started, no report yet"}
        silent = now - self._received[key]
        if silent >= SILENT_AFTER_S:
            return {**out, "state": SILENT, "reason": f"no report for {silent:.0f} s"}
        if snap.blocked_seconds > 0:
            return {
                **out,
                "state": BLOCKED,
                "reason": f"the target has acknowledged nothing for {snap.blocked_seconds:.0f} s: reading "
                "paused",
            }
        limit = expected.unassigned_after_s if expected else 0.0
        if snap.assigned_partitions == 0 and limit > 0 and snap.unassigned_seconds >= limit:
            return {
                **out,
                "state": UNASSIGNED,
                "reason": f"no partitions for {snap.unassigned_seconds:.0f} s (limit {limit:.0f} s: twice "
                "session.timeout.ms): a stuck group, or more streams than partitions",
            }
        return {**out, "state": RUNNING, "reason": "running"}

    def collect(self) -> Iterator[Metric]:
        labels = ["source", "stream"]
        counters = {
            "records_in": "Records read from the source cluster",
            "records_out": "Records acknowledged by the target cluster",
            "bytes_in": "Bytes of records read from the source cluster",
            "bytes_out": "Bytes of records sent to the target cluster",
            "send_errors": "Records the target refused",
            "commits": "Offset commits (each after the target acknowledged everything before it)",
            "gaps": "Offset ranges the source no longer had when the stream had to continue from them "
            "(purged before they were mirrored, or truncated or recreated below its position)",
            "skipped_origin": "Records not copied because their provenance header names the target cluster "
            "as their origin (--provenance.header.enable: they would go back where they were written)",
            "distrusted_origin": "Records copied with their provenance header replaced by kmirror's own: "
            "the header found on the source was not honoured (malformed, naming the source, another topic or "
            "a cluster that is not a --provenance.peers peer; a forged header or a misconfigured mirror)",
        }
        with self._lock:
            snaps = list(self.latest.values())
        for name, doc in counters.items():
            fam = CounterMetricFamily(f"kmirror_{name}", doc, labels=labels)
            for s in snaps:
                fam.add_metric([s.source, str(s.stream)], getattr(s, name))
            yield fam
        queue = GaugeMetricFamily(
            "kmirror_queue_depth", "Records waiting for the target's acknowledgement", labels=labels
        )
        lag = GaugeMetricFamily(
            "kmirror_partition_lag",
            "Records in the source partition not yet read",
            labels=["source", "topic", "partition"],
        )
        latency = HistogramMetricFamily(
            "kmirror_replication_latency_seconds",
            "Now minus the timestamp of the newest record of each batch",
            labels=labels,
        )
        blocked = GaugeMetricFamily(
            "kmirror_target_blocked_seconds",
            "Seconds the stream has been blocked (reading paused) because the target acknowledges nothing; "
            "0 while the target acknowledges",
            labels=labels,
        )
        assigned = GaugeMetricFamily(
            "kmirror_assigned_partitions", "Source partitions the group gave this stream", labels=labels
        )
        unassigned = GaugeMetricFamily(
            "kmirror_unassigned_seconds",
            "Seconds this stream has had no partitions (0 while it has some)",
            labels=labels,
        )
        for s in snaps:
            assigned.add_metric([s.source, str(s.stream)], s.assigned_partitions)
            unassigned.add_metric([s.source, str(s.stream)], round(s.unassigned_seconds, 1))
        yield assigned
        yield unassigned
        for s in snaps:
            queue.add_metric([s.source, str(s.stream)], s.queue_depth)
            blocked.add_metric([s.source, str(s.stream)], s.blocked_seconds)
            for (topic, partition), value in sorted(s.partition_lag.items()):
                lag.add_metric([s.source, topic, str(partition)], value)
            cumulative, buckets = 0, []
            for bound, count in zip([*map(str, LATENCY_BUCKETS), "+Inf"], s.latency.counts, strict=True):
                cumulative += count
                buckets.append((bound, cumulative))
            latency.add_metric([s.source, str(s.stream)], buckets, s.latency.total)
        yield queue
        yield blocked
        yield lag
        mismatch = GaugeMetricFamily(
            "kmirror_topic_partition_mismatch",
            "Partitions the source topic has and its destination topic lacks (adding them failed): the "
            "topic's records are placed by key hash; absent when the counts match",
            labels=["source", "topic"],
        )
        worst: dict[tuple[str, str], int] = {}  # every stream of a source reports its topics: one series each
        for s in snaps:
            for topic, missing in s.partition_mismatch.items():
                worst[(s.source, topic)] = max(missing, worst.get((s.source, topic), 0))
        for (source, topic), missing in sorted(worst.items()):
            mismatch.add_metric([source, topic], missing)
        yield mismatch
        gap_records = CounterMetricFamily(
            "kmirror_gap_records",
            "Records purged on the source before the stream mirrored them (retention, delete_records): lost",
            labels=["source", "stream", "topic"],
        )
        for s in snaps:
            for topic, count in sorted(s.gap_records.items()):
                gap_records.add_metric([s.source, str(s.stream), topic], count)
        yield gap_records
        yield latency
        for more in self.extra:
            yield from more()


def stats_line(label: str, snap: Snapshot, previous: Snapshot | None) -> str:
    span = snap.taken - previous.taken if previous else 0.0
    rate = (snap.records_in - previous.records_in) / span if previous and span > 0 else 0.0
    return (
        f"{label}: stats in={snap.records_in} out={snap.records_out} rate={rate:.0f}/s "
        f"lag={sum(snap.partition_lag.values())} queue={snap.queue_depth} commits={snap.commits} "
        f"send_errors={snap.send_errors} skipped_origin={snap.skipped_origin} "
        f"distrusted_origin={snap.distrusted_origin}"
    )
