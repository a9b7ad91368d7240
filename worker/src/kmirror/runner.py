"""Runs a plan's streams: in this process when there is one, else one process per stream.

Processes, not threads, so that the per-record Python work of each stream has a core of its own.
The supervisor forwards SIGTERM/SIGINT (each stream flushes, commits and exits 0), and when one
stream fails it stops the others (they commit what the target acknowledged) and exits with the
failed stream's code, so a service manager restarts the whole mirror.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
from collections.abc import Callable
from multiprocessing.queues import Queue
from types import FrameType

from confluent_kafka import KafkaException
from prometheus_client import CollectorRegistry, start_http_server

from kmirror.engine import Stream, StreamSpec
from kmirror.errors import KmirrorError
from kmirror.groupsync import GroupSync, metric_families
from kmirror.metrics import Collector, Snapshot

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
EXIT_OK = 0
EXIT_ERROR = 1

LOG_FORMAT = "%(asctime)s %(levelname)s %(processName)s %(name)s: %(message)s"


def setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT, stream=sys.stderr, force=True)
    logging.getLogger("kmirror.librdkafka").setLevel(logging.WARNING)


def run_stream(spec: StreamSpec, report: Callable[[Snapshot], None] | None = None) -> int:
    """Run one stream until it is stopped by a signal; return the process exit code."""
    stream = Stream(spec, report=report)

    def stop(signum: int, frame: FrameType | None) -> None:
        log.info(
            "%s: %s received: finishing the batch, flushing and committing",
            spec.label,
            signal.Signals(signum).name,
        )
        stream.request_stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        stream.run()
    except KmirrorError as exc:
        log.error("%s", exc)
        return exc.exit_code
    except KafkaException as exc:
        log.error("%s: Kafka error: %s", spec.label, exc.args[0].str() if exc.args else exc)
        return EXIT_ERROR
    log.info(
        "%s: stopped cleanly (%d records mirrored, offsets committed)", spec.label, stream.snap.records_out
    )
    return EXIT_OK


def _die_with_parent(parent: int) -> None:
    """Linux: get SIGTERM when the supervisor dies (even by kill -9), so no stream outlives it."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def _child(spec: StreamSpec, level: str, parent: int, reports: Queue[Snapshot] | None) -> None:
    setup_logging(level)
    _die_with_parent(parent)
    sys.exit(run_stream(spec, reports.put if reports is not None else None))


def serve_metrics(port: int, address: str = "0.0.0.0") -> Collector:
    """Expose the collector's metrics on http://ADDRESS:PORT/metrics (Prometheus text format)."""
    collector = Collector()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    start_http_server(port, addr=address, registry=registry)
    log.info("metrics on http://%s:%d/metrics", address, port)
    return collector


def _pump(reports: Queue[Snapshot], collector: Collector) -> None:
    while True:
        collector.update(reports.get())


def run(
    specs: list[StreamSpec],
    level: str = "INFO",
    metrics_port: int | None = None,
    group_syncs: list[GroupSync] | None = None,
) -> int:
    collector = serve_metrics(metrics_port) if metrics_port else None
    if group_syncs:  # threads of this (supervisor) process; daemons, they end with it
        stop_syncs = threading.Event()
        for g in group_syncs:
            threading.Thread(
                target=g.run, args=(stop_syncs,), daemon=True, name=f"groupsync-{g.source}"
            ).start()
        if collector is not None:
            collector.extra.append(lambda: metric_families(group_syncs))
    if len(specs) == 1:
        return run_stream(specs[0], collector.update if collector else None)
    ctx = multiprocessing.get_context("spawn")
    reports: Queue[Snapshot] | None = ctx.Queue() if collector else None
    if reports is not None and collector is not None:
        threading.Thread(target=_pump, args=(reports, collector), daemon=True, name="metrics").start()
    procs = [
        ctx.Process(target=_child, args=(s, level, os.getpid(), reports), name=f"stream-{s.label}")
        for s in specs
    ]
    stopping = False

    def stop_all() -> None:
        for p in procs:
            if p.pid is not None and p.exitcode is None:
                os.kill(p.pid, signal.SIGTERM)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if not stopping:
            log.info("%s received: stopping %d streams", signal.Signals(signum).name, len(procs))
        stopping = True
        stop_all()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for p in procs:
        p.start()
    rc = EXIT_OK
    live = list(procs)
    while live:
        for sentinel in multiprocessing.connection.wait([p.sentinel for p in live], timeout=1.0):
            p = next(p for p in live if p.sentinel == sentinel)
            p.join()
            live.remove(p)
            code = p.exitcode if p.exitcode is not None else EXIT_ERROR
            if code != EXIT_OK or not stopping:
                log.error(
                    "%s exited with code %s%s",
                    p.name,
                    code,
                    "" if stopping else ": stopping the other streams",
                )
                if rc == EXIT_OK:
                    rc = code if code > 0 else EXIT_ERROR
                if not stopping:
                    stopping = True
                    stop_all()
    return rc
