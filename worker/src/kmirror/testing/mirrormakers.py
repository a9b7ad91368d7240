"""Apache Kafka's own MirrorMakers as real processes, for the cutover tests and the benchmarks.

* :class:`MirrorMaker1`: ``kafka.tools.MirrorMaker`` from the 3.9 jars (the last line that has it), with
  the ``--consumer.config``/``--producer.config``/``--whitelist``/``--num.streams`` command line and the
  reference documents' data-loss-safe settings (no auto-commit; ``acks=all``, retries without end, one
  request in flight, a producer that blocks when its buffer is full; ``--abort.on.send.failure true``).
* :class:`MirrorMaker2`: ``org.apache.kafka.connect.mirror.MirrorMaker`` (connect-mirror 4.3) in
  dedicated mode with one ``mm2.properties``; ``IdentityReplicationPolicy`` keeps topic names (and
  MirrorSourceTask keeps partitions, keys, values, headers and timestamps).

Each runs from the jars ``make kafka-install`` caches (:mod:`kmirror.testing.jars`), in its own session,
with its files and its log (``<name>.log``, the JVM's stdout and stderr ``<name>.out``) in the work
directory given, which the caller keeps (a test's ``tmp_path``). :meth:`JavaTool.stop` sends SIGTERM
(both tools flush and commit in their shutdown hook) and waits; :meth:`JavaTool.kill` is kill -9. Use them
as context managers (or :func:`running_tools`): they are stopped on the way out, whatever happened.

MirrorMaker 1's 3.9 clients work against the 4.3 test brokers (the classic group protocol; Kafka 4 refuses
only clients older than 2.1): test_cutover runs it so, no 3.9 cluster needed.

Start times measured on the 2-core test machine (shared, load average 2 to 12): MirrorMaker 1 had 300
records of a 3-partition backlog on the target 3.8-11.6 s after its JVM started; MirrorMaker 2 had 100
records in each of 3 partitions 19.9 s (load ~3) and 30.5 s (load ~12) after, of which about 15-20 s
is the Connect worker (its internal topics, the herder, the connector's first task). Without
``plugin.discovery=service_load`` Connect scans the class path for plugins twice: 63.6 s.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO

from kmirror.errors import KmirrorError
from kmirror.testing import jars
from kmirror.testing.kafka import _log_flags, _write_log_config

MM1_LINE = "3.9"
MM2_LINE = "4.3"
TOOL_JVM = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData")

# The reference documents' "no data loss" settings, in today's key names (block.on.buffer.full=true is
# max.block.ms without end; auto.commit.enable is enable.auto.commit).
MM1_SAFE_CONSUMER = {"enable.auto.commit": "false", "auto.offset.reset": "earliest"}
MM1_SAFE_PRODUCER = {
    "acks": "all",
    "retries": "2147483647",
    "max.in.flight.requests.per.connection": "1",
    "max.block.ms": "9223372036854775807",
}
MM2_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
MM1_CLASS = "kafka.tools.MirrorMaker"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


class ToolError(KmirrorError):
    pass


def properties(path: Path, settings: Mapping[str, object]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def tree_usage(pid: int) -> tuple[float, int]:
    """(CPU seconds, peak RSS bytes) of ``pid`` and all its descendants alive now: user + system time of
    each (with its reaped children's) from /proc/PID/stat, and the sum of each process' VmHWM."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in tree:
                tree.add(child)
                frontier.append(child)
    ticks, peak = 0, 0
    for p in tree:
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = Path(f"/proc/{p}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            ticks += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak += int(line.split()[1]) * 1024
    return ticks / os.sysconf("SC_CLK_TCK"), peak


class JavaTool:
    """One JVM running a Kafka tool's main class; its log and output kept in ``workdir``."""

    def __init__(
        self,
        name: str,
        workdir: Path,
        line: str,
        main: str,
        args: list[str],
        *,
        jvm: tuple[str, ...] = TOOL_JVM,
    ) -> None:
        self.name, self.workdir, self.line, self.main, self.args, self.jvm = (
            name,
            workdir,
            line,
            main,
            args,
            jvm,
        )
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"{name}.log"
        self.out_path = workdir / f"{name}.out"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0

    def command(self) -> list[str]:
        return [
            jars.java(),
            *self.jvm,
            "-Djava.awt.headless=true",
            *_log_flags(self.line, self.workdir),
            "-cp",
            jars.classpath(self.line),
            self.main,
            *self.args,
        ]

    def start(self) -> JavaTool:
        if self.alive():
            raise ToolError(f"{self.name} is already running (pid {self.pid})")
        _write_log_config(self.line, self.workdir, self.log_path)
        out: IO[bytes] = self.out_path.open("ab")
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            self.command(), stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir, start_new_session=True
        )
        out.close()
        return self

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise ToolError(f"{self.name} was not started")
        return self.proc.pid

    def seconds_since_start(self) -> float:
        return time.monotonic() - self.started_at

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        """The tool's log and its stdout/stderr (an exception at start goes there)."""
        text = ""
        for p in (self.log_path, self.out_path):
            with contextlib.suppress(FileNotFoundError):
                text += p.read_text(errors="replace")
        return text

    def wait_for(self, text: str, timeout: float = 60.0) -> float:
        """Until ``text`` is in the log; the seconds since start. Fails if the tool exits first."""
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if not self.alive():
                code = self.proc.returncode if self.proc else None
                raise ToolError(f"{self.name} exited ({code}) before logging {text!r}; see {self.workdir}")
            if time.monotonic() > deadline:
                raise ToolError(
                    f"{self.name} did not log {text!r} within {timeout:.0f} s; see {self.log_path}"
                )
            time.sleep(0.2)
        return time.monotonic() - self.started_at

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (the tool's shutdown hook flushes and commits), then kill -9 after ``timeout``; the exit
        code (None if it was never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        """kill -9 (a crash: nothing flushed or committed)."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def __enter__(self) -> JavaTool:
        if self.proc is None:
            self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop(timeout=30)


class MirrorMaker1(JavaTool):
    """``kafka.tools.MirrorMaker`` (Kafka 3.9): one source, ``num_streams`` consumers in group ``group``.

    Its consumers take the client ids ``GROUP-0`` ... ``GROUP-(N-1)`` (MirrorMaker sets them) and Java's
    default assignors (range first). It commits every ``commit_interval_ms`` and on a clean stop, after
    flushing its producer. Records go to the target by the producer's partitioner (keyed records by the
    key's hash, as any Java producer would): partitions are not kept."""

    def __init__(
        self,
        workdir: Path,
        source: str,
        target: str,
        topics: str,
        group: str,
        *,
        num_streams: int = 1,
        commit_interval_ms: int = 60_000,
        consumer: Mapping[str, object] | None = None,
        producer: Mapping[str, object] | None = None,
        name: str = "mirrormaker1",
        jvm: tuple[str, ...] = TOOL_JVM,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.group = group
        self.consumer_config = properties(
            workdir / f"{name}-consumer.properties",
            {"bootstrap.servers": source, "group.id": group, **MM1_SAFE_CONSUMER, **(consumer or {})},
        )
        self.producer_config = properties(
            workdir / f"{name}-producer.properties",
            {"bootstrap.servers": target, **MM1_SAFE_PRODUCER, **(producer or {})},
        )
        args = [
            "--consumer.config",
            str(self.consumer_config),
            "--producer.config",
            str(self.producer_config),
            "--whitelist",
            topics,
            "--num.streams",
            str(num_streams),
            "--offset.commit.interval.ms",
            str(commit_interval_ms),
            "--abort.on.send.failure",
            "true",
        ]
        super().__init__(name, workdir, MM1_LINE, MM1_CLASS, args, jvm=jvm)

    def client_ids(self, num_streams: int) -> list[str]:
        return [f"{self.group}-{i}" for i in range(num_streams)]


class MirrorMaker2(JavaTool):
    """``org.apache.kafka.connect.mirror.MirrorMaker`` (Kafka 4.3) in dedicated mode: clusters ``source``
    and ``target``, the flow source->target only, topics ``topics`` (a regex), names kept
    (IdentityReplicationPolicy). Heartbeats, checkpoints, group offset sync and ACL sync are off (the
    flow alone); its progress is in the Connect offsets topic on the target, not in a consumer group.
    ``extra`` adds or overrides mm2.properties lines."""

    def __init__(
        self,
        workdir: Path,
        source: str,
        target: str,
        topics: str,
        *,
        tasks_max: int = 1,
        replication_factor: int = 1,
        extra: Mapping[str, object] | None = None,
        name: str = "mirrormaker2",
        jvm: tuple[str, ...] = TOOL_JVM,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        rf = str(replication_factor)
        settings: dict[str, object] = {
            "clusters": "source, target",
            "source.bootstrap.servers": source,
            "target.bootstrap.servers": target,
            "source->target.enabled": "true",
            "target->source.enabled": "false",
            "source->target.topics": topics,
            "replication.policy.class": IDENTITY_POLICY,
            "tasks.max": str(tasks_max),
            "replication.factor": rf,
            "offset-syncs.topic.replication.factor": rf,
            "checkpoints.topic.replication.factor": rf,
            "heartbeats.topic.replication.factor": rf,
            "config.storage.replication.factor": rf,
            "offset.storage.replication.factor": rf,
            "status.storage.replication.factor": rf,
            "emit.heartbeats.enabled": "false",
            "emit.checkpoints.enabled": "false",
            "sync.group.offsets.enabled": "false",
            "sync.topic.acls.enabled": "false",
            "refresh.topics.interval.seconds": "5",
            "refresh.groups.interval.seconds": "600",
            # Plugins from their ServiceLoader manifests, not a class path scan (15-20 s less at start).
            "plugin.discovery": "service_load",
            # The data-loss-safe producer (Connect's own defaults, stated).
            "target.producer.acks": "all",
            "target.producer.max.in.flight.requests.per.connection": "1",
            **(extra or {}),
        }
        self.config = properties(workdir / f"{name}.properties", settings)
        super().__init__(name, workdir, MM2_LINE, MM2_CLASS, [str(self.config)], jvm=jvm)


@contextlib.contextmanager
def running_tools(*tools: JavaTool) -> Iterator[tuple[JavaTool, ...]]:
    """Start the tools; stop every one on the way out (SIGTERM, then kill -9), whatever happened."""
    try:
        for t in tools:
            t.start()
        yield tools
    finally:
        for t in tools:
            t.stop(timeout=30)
