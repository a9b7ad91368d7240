"""Shaped network links to a Kafka cluster for the tests: Toxiproxy in front of each node's WAN listener.

A client reconnects to the addresses the brokers advertise, so a proxy must sit on an advertised listener:
:class:`kmirror.testing.kafka.KafkaCluster` with ``wan=True`` gives each node a second PLAINTEXT listener
``WAN`` advertised on a port of its own, and :meth:`Toxiproxy.link` puts a proxy there for every node. A
client bootstrapped on :attr:`ClusterLink.bootstrap` then only ever talks to the cluster through the
proxies, while the tests seed and read the cluster through its direct PLAINTEXT listener.

What a link can do (Toxiproxy's HTTP API):

* :meth:`ClusterLink.cut`: the proxies are disabled; every connection is closed and new ones are refused;
* :meth:`ClusterLink.black_hole`: connections are accepted and held open, and no byte passes either way
  (a ``timeout`` toxic with timeout 0);
* :meth:`ClusterLink.latency` and :meth:`ClusterLink.bandwidth`: each direction delayed or limited;
* :meth:`ClusterLink.restore`: enabled again, every toxic removed.

Toxiproxy (a Go program) is built from the Go module proxy once per machine, by the install step
(``make toxiproxy-install``: ``python -m kmirror.testing.links install``), into
``$KMIRROR_TOXIPROXY_CACHE`` (default ``~/.cache/kmirror/toxiproxy``)/<version>/; a test that finds it
missing builds it there first (``go install``, about a minute on the 2-core machine).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kmirror.errors import KmirrorError
from kmirror.testing.kafka import KafkaCluster, free_port

VERSION = "v2.5.0"
MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"
GO_CANDIDATES = ("go", "/usr/local/go/bin/go", "/usr/lib/go/bin/go")
START_TIMEOUT_S = 30.0


class LinkError(KmirrorError):
    pass


# ------------------------------------------------------------------------------------------- binary


def cache_dir() -> Path:
    root = Path(os.environ.get("KMIRROR_TOXIPROXY_CACHE", Path.home() / ".cache" / "kmirror" / "toxiproxy"))
    return root / VERSION


def binary() -> Path:
    """Where the Toxiproxy server of :data:`VERSION` is (or will be) cached."""
    return cache_dir() / "toxiproxy-server"


def _go() -> str:
    for candidate in GO_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    raise LinkError(
        "Toxiproxy is not built and no Go toolchain was found (looked for "
        f"{', '.join(GO_CANDIDATES)}): install Go, then run make toxiproxy-install"
    )


def install() -> Path:
    """The Toxiproxy server binary, built once with ``go install MODULE@VERSION`` (concurrent callers wait
    for the first build)."""
    target = binary()
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target
        with tempfile.TemporaryDirectory(prefix="toxiproxy-", dir=target.parent) as tmp:
            env = {**os.environ, "GOBIN": tmp}
            done = subprocess.run(
                [_go(), "install", f"{MODULE}@{VERSION}"],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            built = Path(tmp) / "server"
            if done.returncode != 0 or not built.exists():
                last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
                raise LinkError(f"building Toxiproxy {VERSION} failed (go install {MODULE}): {last[0]}")
            built.replace(target)
    return target


# ---------------------------------------------------------------------------------------- the server


@dataclass
class Toxiproxy:
    """One Toxiproxy server on a free loopback port; its proxies are :class:`Link` objects."""

    log_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> Toxiproxy:
        exe = install()
        self.port = free_port(self.host)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        out: IO[bytes] = (self.log_dir / "toxiproxy.log").open("ab")
        self.process = subprocess.Popen(
            [str(exe), "-host", self.host, "-port", str(self.port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            with contextlib.suppress(OSError, LinkError):
                self.request("GET", "/version")
                return self
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise LinkError(
                    f"Toxiproxy did not answer on {self.host}:{self.port}; "
                    f"see {self.log_dir / 'toxiproxy.log'}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def request(self, method: str, path: str, body: object = None) -> Any:
        """One call of the HTTP API; its JSON answer (its text when not JSON, None when empty)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"http://{self.host}:{self.port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            raise LinkError(f"Toxiproxy {method} {path}: {exc.code} {exc.read().decode().strip()}") from None
        if not text.strip():
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError:  # /version is text
            return text.strip()

    def proxy(self, name: str, listen: str, upstream: str) -> Link:
        """A proxy from ``listen`` to ``upstream``."""
        self.request(
            "POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True}
        )
        return Link(self, name)

    def link(self, cluster: KafkaCluster, name: str | None = None) -> ClusterLink:
        """A proxy for every node of ``cluster`` (started with ``wan=True``) on its WAN listener's advertised
        address."""
        if not cluster.wan:
            raise LinkError(f"cluster {cluster.name} has no WAN listener: start it with wan=True")
        name = name or cluster.name
        links = [
            self.proxy(f"{name}-{node}", listen, upstream) for node, listen, upstream in cluster.wan_routes
        ]
        return ClusterLink(cluster.wan_bootstrap, links)


@dataclass
class Link:
    """One proxy of a :class:`Toxiproxy` server."""

    server: Toxiproxy
    name: str

    def enabled(self, on: bool) -> None:
        self.server.request("POST", f"/proxies/{self.name}", {"enabled": on})

    def toxic(self, kind: str, stream: str, **attributes: int) -> None:
        self.server.request(
            "POST",
            f"/proxies/{self.name}/toxics",
            {
                "name": f"{kind}-{stream}",
                "type": kind,
                "stream": stream,
                "toxicity": 1.0,
                "attributes": attributes,
            },
        )

    def clear(self) -> None:
        """Every toxic removed."""
        for t in self.server.request("GET", f"/proxies/{self.name}/toxics") or []:
            self.server.request("DELETE", f"/proxies/{self.name}/toxics/{t['name']}")


@dataclass
class ClusterLink:
    """The link to one cluster: a proxy per node, changed together."""

    bootstrap: str  # the proxies' addresses: what a client behind the link bootstraps on
    links: list[Link]

    def cut(self) -> None:
        """Every connection closed, new ones refused."""
        for link in self.links:
            link.enabled(False)

    def black_hole(self) -> None:
        """Connections accepted and held open, no byte through either way."""
        for link in self.links:
            for stream in ("upstream", "downstream"):
                link.toxic("timeout", stream, timeout=0)

    def latency(self, ms: int, jitter_ms: int = 0) -> None:
        """Each direction delayed by ``ms`` (a round trip by twice that)."""
        for link in self.links:
            for stream in ("upstream", "downstream"):
                link.toxic("latency", stream, latency=ms, jitter=jitter_ms)

    def bandwidth(self, kb_per_s: int) -> None:
        """Each direction limited to ``kb_per_s`` KB/s."""
        for link in self.links:
            for stream in ("upstream", "downstream"):
                link.toxic("bandwidth", stream, rate=kb_per_s)

    def restore(self) -> None:
        """Enabled again, every toxic removed."""
        for link in self.links:
            link.clear()
            link.enabled(True)


@contextlib.contextmanager
def toxiproxy(log_dir: Path) -> Iterator[Toxiproxy]:
    """A running Toxiproxy server, killed on exit whatever happened."""
    server = Toxiproxy(log_dir)
    try:
        yield server.start()
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kmirror.testing.links")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help=f"build Toxiproxy {VERSION} once into {cache_dir()}")
    sub.add_parser("path", help="print where the Toxiproxy server is cached")
    args = parser.parse_args(argv)
    try:
        print(install() if args.command == "install" else binary())
    except KmirrorError as exc:
        print(f"kmirror.testing.links: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
