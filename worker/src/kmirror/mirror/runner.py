"""Runs a plan's streams: in this process when there is one, else one process per stream.

Processes, not threads, so that the per-record Python work of each stream has a core of its own.
The supervisor forwards SIGTERM/SIGINT (each stream flushes, commits and exits 0), and when one
stream fails it stops the others (they commit what the target acknowledged) and exits with the
failed stream's code, so a service manager restarts the whole mirror.

On SIGTERM/SIGINT the streams leave their group one at a time: the next one is stopped once the
others of its source went through the rebalance that the previous one's leaving started (or after
session.timeout.ms). Members that leave a group together while it rebalances are what the test broker
mishandles (docs/testing.md), and one at a time the partitions of a stopping stream keep being
mirrored by its siblings until the last one leaves. A second signal stops every stream at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from multiprocessing.sharedctypes import Synchronized
from types import FrameType
from typing import Any

from confluent_kafka import KafkaException
from prometheus_client import CollectorRegistry, make_wsgi_app

from kmirror.errors import ConfigError, KmirrorError, SendFailure, one_line
from kmirror.failover.groupsync import GroupSync, metric_families
from kmirror.mirror.engine import Stream, StreamSpec
from kmirror.mirror.gaps import SourceGap
from kmirror.mirror.heartbeats import Heartbeat
from kmirror.mirror.heartbeats import metric_families as heartbeat_families
from kmirror.mirror.httpserver import BoundedHTTPServer, listening_socket
from kmirror.mirror.logformat import setup_logging
from kmirror.mirror.metrics import DEFAULT_ADDRESS, Collector, Snapshot

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
EXIT_OK = 0
EXIT_ERROR = 1
# Exit codes of a stream that has logged its cause itself: configuration or authorization (2), a record
# that could not be delivered (3), a gap with --gap.policy stop (4). (1 may be a crash whose cause only the
# supervisor's line reports.)
REPORTED_EXITS = (ConfigError.exit_code, SendFailure.exit_code, SourceGap.exit_code)


class FirstError:
    """Said once: a run whose streams (threads or processes) and group syncs stop on an error logs one
    ERROR line, the first one's (`shared`: a flag the stream processes share with the supervisor)."""

    def __init__(self, shared: Synchronized[int] | None = None) -> None:
        self._lock = threading.Lock()
        self._said = False
        self._shared = shared

    def claim(self) -> bool:
        with self._lock:
            first, self._said = not self._said, True
        if first and self._shared is not None:
            with self._shared.get_lock():
                first, self._shared.value = self._shared.value == 0, 1
        return first


def run_stream(
    spec: StreamSpec,
    report: Callable[[Snapshot], None] | None = None,
    rebalances: Callable[[], None] | None = None,
    *,
    interrupt: bool = True,
    said: FirstError | None = None,
) -> int:
    """Run one stream until it is stopped by a signal; return the process exit code. `rebalances` is
    called after each rebalance that gave the stream its (incremental) assignment. `interrupt`: SIGINT
    stops it too (False in a stream process: Ctrl-C reaches the supervisor, which stops them in turn)."""
    stream = Stream(spec, report=report)
    stream.membership.on_rebalanced = rebalances

    def stop(signum: int, frame: FrameType | None) -> None:
        log.info(
            "%s: %s received: finishing the batch, flushing and committing",
            spec.label,
            signal.Signals(signum).name,
        )
        stream.request_stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop if interrupt else signal.SIG_IGN)
    said = said or FirstError()
    try:
        stream.run()
    except KmirrorError as exc:
        if said.claim():
            log.error("%s", exc)
        return exc.exit_code
    except KafkaException as exc:
        if said.claim():
            log.error("%s: Kafka error: %s", spec.label, exc.args[0].str() if exc.args else exc)
        return EXIT_ERROR
    if stream.clean:
        log.info(
            "%s: stopped cleanly (%d records mirrored, offsets committed)",
            spec.label,
            stream.snap.records_out,
        )
    else:
        log.info(
            "%s: stopped during a target outage (%d records mirrored, offsets committed up to what the "
            "target acknowledged)",
            spec.label,
            stream.snap.records_out,
        )
    return EXIT_OK


def _die_with_parent(parent: int) -> None:
    """Linux: get SIGTERM when the supervisor dies (even by kill -9), so no stream outlives it."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def _child(
    spec: StreamSpec,
    logs: tuple[str, str],
    parent: int,
    reports: Queue[Snapshot] | None,
    shared: tuple[Synchronized[int], Synchronized[int]],
) -> None:
    """A stream process. `shared`: its rebalance counter, and the run's flag "an ERROR line was said"."""
    rebalances, said = shared
    setup_logging(*logs)
    _die_with_parent(parent)

    def count() -> None:
        with rebalances.get_lock():
            rebalances.value += 1

    sys.exit(
        run_stream(
            spec, reports.put if reports is not None else None, count, interrupt=False, said=FirstError(said)
        )
    )


HEALTH_PATH = "/health"


def metrics_app(registry: CollectorRegistry, collector: Collector) -> Callable[..., Iterable[bytes]]:
    """The WSGI application of the metrics port: /health is each stream's state as JSON (200 when every
    stream runs, 503 otherwise: :meth:`Collector.health`); any other path is the Prometheus text page."""
    prometheus = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "").rstrip("/") == HEALTH_PATH:
            healthy, document = collector.health()
            body = (json.dumps(document, indent=2) + "\n").encode()
            start_response(
                "200 OK" if healthy else "503 Service Unavailable",
                [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
            )
            return [body]
        result: Iterable[bytes] = prometheus(environ, start_response)
        return result

    return app


def serve_metrics(port: int, address: str = DEFAULT_ADDRESS) -> Collector:
    """Expose the collector's metrics on http://ADDRESS:PORT/metrics (Prometheus text format) and the
    streams' states on http://ADDRESS:PORT/health (JSON; 200 when every stream runs, else 503), from one
    thread that a flood of connections cannot exhaust (:mod:`kmirror.mirror.httpserver`).

    Called before any client connects: an address or port it cannot listen on is a ConfigError (one
    line, exit 2) and nothing has started."""
    where = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    collector = Collector()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(
            address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = listening_socket(sockaddr, family)
    except (OSError, ValueError, OverflowError) as exc:
        raise metrics_bind_error(exc, address, port, where) from None
    BoundedHTTPServer(sock, metrics_app(registry, collector)).start()
    log.info("metrics on http://%s/metrics, stream states on http://%s%s", where, where, HEALTH_PATH)
    return collector


def metrics_bind_error(exc: BaseException, address: str, port: int, where: str) -> ConfigError:
    """Why the metrics server cannot listen on ADDRESS:PORT, with the option to change."""
    code = exc.errno if isinstance(exc, OSError) and not isinstance(exc, socket.gaierror) else None
    reason = one_line(exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc))
    if code == errno.EADDRINUSE:
        return ConfigError(
            f"cannot listen on {where}: the port is in use",
            key="--metrics.port",
            fix=f"give another --metrics.port, or stop what listens there (ss -ltnp 'sport = :{port}')",
        )
    if code == errno.EACCES:
        return ConfigError(
            f"cannot listen on {where}: {reason}",
            key="--metrics.port",
            fix="give a --metrics.port of 1024 or more (lower ports need privileges)",
        )
    if isinstance(exc, OverflowError):
        return ConfigError(
            f"cannot listen on {where}: {reason}", key="--metrics.port", fix="give a port 1-65535"
        )
    return ConfigError(
        f"cannot listen on {where}: {reason}",
        key="--metrics.address",
        fix="give an address of this host (127.0.0.1: this host only; 0.0.0.0 or ::: every address)",
    )


def _pump(reports: Queue[Snapshot], collector: Collector) -> None:
    while True:
        collector.update(reports.get())


# How long run() waits for the group sync threads to finish their step and close their clients.
SYNC_JOIN_S = 15.0


def run(
    specs: list[StreamSpec],
    level: str = "INFO",
    collector: Collector | None = None,
    group_syncs: list[GroupSync] | None = None,
    log_format: str = "text",
    *,
    preflight: Callable[[], None] | None = None,
    heartbeats: list[Heartbeat] | None = None,
) -> int:
    """Run the streams until they stop; `collector`: the metrics server's (:func:`serve_metrics`, called
    first, so that a port it cannot take stops the run before anything starts), None without one.
    `preflight`: called before anything starts (kmirror.mirror.cutover: the group check, --initial.offsets);
    what it raises stops the run. The group sync threads are stopped and joined before it returns: a
    thread still inside a librdkafka call while the interpreter exits can crash the process (SIGSEGV)."""
    threads: list[threading.Thread] = []
    stop_syncs = threading.Event()
    try:
        return _run(
            specs,
            level,
            collector,
            group_syncs,
            log_format,
            preflight=preflight,
            syncs=(threads, stop_syncs),
            heartbeats=heartbeats or [],
        )
    finally:
        stop_syncs.set()
        deadline = time.monotonic() + SYNC_JOIN_S
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))


def _run(  # noqa: PLR0912, PLR0915 - the supervisor: start, watch, stop, in one sequence
    specs: list[StreamSpec],
    level: str,
    collector: Collector | None,
    group_syncs: list[GroupSync] | None,
    log_format: str,
    *,
    preflight: Callable[[], None] | None,
    syncs: tuple[list[threading.Thread], threading.Event],
    heartbeats: list[Heartbeat],
) -> int:
    if preflight is not None:
        preflight()
    refusals: list[KmirrorError] = []
    ctx = multiprocessing.get_context("spawn")
    said_flag: Synchronized[int] = ctx.Value("i", 0)  # an ERROR line was logged (by any stream process)
    said = FirstError(said_flag)
    threads, stop_syncs = syncs
    if group_syncs:  # threads of this (supervisor) process, stopped and joined by run()

        def refused(exc: KmirrorError) -> None:
            # A group sync refused for lack of an ACL (its one ERROR line is logged): the streams stop as
            # on SIGTERM (they commit what the target acknowledged) and the run exits with its code.
            if not refusals:
                refusals.append(exc)
                if said.claim():
                    log.error("%s", exc)
                deadline = time.monotonic() + 10  # the stop handlers are installed as the streams start
                while signal.getsignal(signal.SIGTERM) == signal.SIG_DFL and time.monotonic() < deadline:
                    time.sleep(0.05)
                os.kill(os.getpid(), signal.SIGTERM)

        for g in group_syncs:
            g.on_refused = refused
            t = threading.Thread(target=g.run, args=(stop_syncs,), daemon=True, name=f"groupsync-{g.source}")
            t.start()
            threads.append(t)
        if collector is not None:
            collector.extra.append(lambda: metric_families(group_syncs))
    for b in heartbeats:  # threads of this process too, stopped and joined by run()
        t = threading.Thread(target=b.run, args=(stop_syncs,), daemon=True, name=f"heartbeats-{b.source}")
        t.start()
        threads.append(t)
    if heartbeats and collector is not None:
        collector.extra.append(lambda: heartbeat_families(heartbeats))
    if collector is not None:
        for s in specs:
            collector.expect(s.source, s.index, s.label, s.unassigned_warn_s)
    if len(specs) == 1:
        code = run_stream(specs[0], collector.update if collector else None, said=said)
        if collector is not None:
            collector.ended(specs[0].source, specs[0].index, code)
        return refusals[0].exit_code if refusals and code == EXIT_OK else code
    reports: Queue[Snapshot] | None = ctx.Queue() if collector else None
    if reports is not None and collector is not None:
        threading.Thread(target=_pump, args=(reports, collector), daemon=True, name="metrics").start()
    counters: list[Synchronized[int]] = [ctx.Value("i", 0) for _ in specs]
    procs = [
        ctx.Process(
            target=_child,
            args=(s, (level, log_format), os.getpid(), reports, (c, said_flag)),
            name=f"stream-{s.label}",
        )
        for s, c in zip(specs, counters, strict=True)
    ]
    stopping = False
    in_turn: _OneAtATime | None = None

    def stop_all() -> None:
        for p in procs:
            if p.pid is not None and p.exitcode is None:
                os.kill(p.pid, signal.SIGTERM)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping, in_turn
        name = signal.Signals(signum).name
        if not stopping and all("group.instance.id" in s.consumer for s in specs):
            # Static members send no LeaveGroup: no rebalance to wait for between them, so all stop at once.
            log.info(
                "%s received: stopping the %d streams (static members: the group keeps their partitions "
                "for session.timeout.ms)",
                name,
                len(procs),
            )
            stopping = True
            stop_all()
        elif in_turn is None and not stopping:
            log.info("%s received: the %d streams leave the group one at a time", name, len(procs))
            stopping = True
            in_turn = _OneAtATime(specs, procs, counters)
            in_turn.step()
        else:
            log.info("%s received again: stopping every stream now", name)
            stopping = True
            stop_all()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for p in procs:
        p.start()
    rc = EXIT_OK
    live = list(procs)
    while live:
        if in_turn is not None:
            in_turn.step()
        for sentinel in multiprocessing.connection.wait([p.sentinel for p in live], timeout=0.2):
            p = next(p for p in live if p.sentinel == sentinel)
            p.join()
            live.remove(p)
            code = p.exitcode if p.exitcode is not None else EXIT_ERROR
            if stopping and code == -signal.SIGTERM:
                # Stopped before it installed its handler, i.e. before it read anything: nothing to commit.
                code = EXIT_OK
            if collector is not None:
                spec = specs[procs.index(p)]
                collector.ended(spec.source, spec.index, code)
            if code != EXIT_OK or not stopping:
                # A stream that exits with an error code has logged why (the run's one ERROR line, or
                # the same cause already said by another): the supervisor only says what it does.
                log.log(
                    logging.INFO if code in REPORTED_EXITS else logging.ERROR,
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
    return refusals[0].exit_code if refusals and rc == EXIT_OK else rc


class _OneAtATime:
    """Stops the streams in turn: the next once the running streams of the stopped one's source counted
    a rebalance since it was told to stop (they took over its partitions), or session.timeout.ms after
    it exited."""

    def __init__(
        self, specs: list[StreamSpec], procs: Sequence[BaseProcess], counters: list[Synchronized[int]]
    ) -> None:
        self.specs, self.procs, self.counters = specs, procs, counters
        self.todo = list(range(len(procs)))
        self.current: int | None = None
        self.baseline: dict[int, int] = {}
        self.deadline: float | None = None

    def step(self) -> None:
        if self.current is not None:
            if self.procs[self.current].exitcode is None:
                return  # still flushing and committing
            if self.deadline is None:
                # unassigned_warn_s is twice session.timeout.ms: a rebalance that waits longer is not coming.
                self.deadline = time.monotonic() + self.specs[self.current].unassigned_warn_s / 2
            waiting = [
                i for i, seen in self.baseline.items() if self._alive(i) and self.counters[i].value <= seen
            ]
            if waiting and time.monotonic() < self.deadline:
                return
            self.current = None
        while self.todo:
            i = self.todo.pop(0)
            if self._alive(i) and self.procs[i].pid is not None:
                # The siblings' counts before the stream leaves: the rebalance its leaving starts may end
                # before its process has exited.
                source = self.specs[i].source
                self.baseline = {
                    j: self.counters[j].value
                    for j in self.todo
                    if self.specs[j].source == source and self._alive(j)
                }
                self.current, self.deadline = i, None
                os.kill(self.procs[i].pid, signal.SIGTERM)  # type: ignore[arg-type]
                return

    def _alive(self, i: int) -> bool:
        return 0 <= i < len(self.procs) and self.procs[i].exitcode is None
