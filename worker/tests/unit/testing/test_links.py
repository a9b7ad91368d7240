"""kmirror.testing.links and the WAN listener of kmirror.testing.kafka: a real Toxiproxy in front of a local
echo server (cut: refused; black hole: held open, silent; restored: through again), and the broker
properties of a cluster with a WAN listener (no broker started)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kmirror.testing.kafka import KafkaCluster, Node, free_ports
from kmirror.testing.links import ClusterLink, LinkError, cache_dir, toxiproxy


@contextlib.contextmanager
def echo_server() -> Iterator[str]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(1024):
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        server.close()


def echoes(address: str, timeout: float = 2.0) -> bool:
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(b"ping")
        try:
            return s.recv(4) == b"ping"
        except TimeoutError:
            return False


def test_cut_black_hole_restore(tmp_path: Path) -> None:
    with echo_server() as upstream, toxiproxy(tmp_path) as proxy:
        listen = f"127.0.0.1:{_free()}"
        link = ClusterLink(listen, [proxy.proxy("echo", listen, upstream)])
        assert echoes(listen)
        link.cut()
        with pytest.raises(ConnectionRefusedError):
            echoes(listen)
        link.restore()
        assert echoes(listen)
        link.black_hole()
        assert not echoes(listen, timeout=0.5)  # accepted, nothing back
        link.restore()
        assert echoes(listen)
        link.latency(100)
        assert echoes(listen)
        link.restore()
        with pytest.raises(LinkError, match=r"already exists|address already in use"):
            proxy.proxy("echo", listen, upstream)


def _free() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_cache_is_per_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KMIRROR_TOXIPROXY_CACHE", str(tmp_path))
    assert cache_dir().parent == tmp_path and cache_dir().name.startswith("v")


def test_a_wan_listener_is_plaintext_advertised_on_the_proxys_port(tmp_path: Path) -> None:
    cluster = KafkaCluster("east", wan=True)
    node = Node(
        1,
        "127.0.0.1",
        {"PLAINTEXT": 1001, "CONTROLLER": 1002, "WAN": 1003},
        tmp_path,
        advertised={"WAN": 2003},
    )
    cluster.nodes = [node]
    cfg = cluster._config(node)
    assert cfg["listeners"] == "PLAINTEXT://127.0.0.1:1001,CONTROLLER://127.0.0.1:1002,WAN://127.0.0.1:1003"
    assert cfg["advertised.listeners"] == "PLAINTEXT://127.0.0.1:1001,WAN://127.0.0.1:2003"
    assert cfg["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,WAN:PLAINTEXT"
    assert cluster.wan_bootstrap == "127.0.0.1:2003"
    assert cluster.wan_routes == [(1, "127.0.0.1:2003", "127.0.0.1:1003")]


def test_without_wan_the_properties_are_as_before(tmp_path: Path) -> None:
    cluster = KafkaCluster("east")
    node = Node(1, "127.0.0.1", {"PLAINTEXT": 1001, "CONTROLLER": 1002}, tmp_path)
    cluster.nodes = [node]
    cfg = cluster._config(node)
    assert cfg["advertised.listeners"] == "PLAINTEXT://127.0.0.1:1001"
    assert cfg["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"


def test_a_nodes_ports_are_distinct() -> None:
    assert len(set(free_ports(60))) == 60
