"""kmirror.mirror.httpserver, the metrics port's server, on real sockets: what it answers, the deadline of a
request head (a whole one, not per read), the cap on open connections and which connection makes room.
The flood of a real `kmirror run`'s port: tests/unit/test_cli_process_edges.py."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from kmirror.mirror.httpserver import MAX_REQUEST_BYTES, BoundedHTTPServer, listening_socket
from kmirror.mirror.metrics import Collector
from kmirror.mirror.runner import metrics_app

BOUND_S = 60.0  # a hang's bound; the conditions below are waited for, never timed


def app(environ, start_response):
    body = f"{environ['REQUEST_METHOD']} {environ['PATH_INFO']} {environ['QUERY_STRING']}\n".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("X-Seen-Host", environ.get("HTTP_HOST", ""))])
    return [body]


@pytest.fixture
def serve() -> Iterator:
    started: list[BoundedHTTPServer] = []

    def start(application=app, **kwargs) -> BoundedHTTPServer:
        server = BoundedHTTPServer(listening_socket(("127.0.0.1", 0), socket.AF_INET), application, **kwargs)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def connect(server: BoundedHTTPServer, first: bytes = b"") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=BOUND_S)
    if first:
        s.sendall(first)
    return s


def exchange(server: BoundedHTTPServer, request: bytes) -> bytes:
    """Everything the server sends back to one request, until it closes the connection."""
    with connect(server, request) as s:
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def closed_by_server(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    finally:
        s.setblocking(True)


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_request_is_answered_once_and_closed(serve):
    server = serve()
    got = exchange(server, b"GET /metrics?name%5B%5D=x HTTP/1.1\r\nHost: prom:9570\r\n\r\n")
    head, body = got.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 200 OK"
    assert {"Content-Type: text/plain", "X-Seen-Host: prom:9570", "Connection: close"} <= set(lines)
    assert f"Content-Length: {len(body)}" in lines
    assert body == b"GET /metrics name%5B%5D=x\n"  # the query string as sent, for the WSGI app to parse
    head_only = exchange(server, b"HEAD /metrics HTTP/1.1\r\n\r\n")
    assert head_only.startswith(b"HTTP/1.1 200 OK\r\n") and head_only.endswith(b"\r\n\r\n")
    assert exchange(server, b"nonsense\r\n\r\n").startswith(b"HTTP/1.1 400 Bad Request\r\n")


def test_the_metrics_pages_through_it(serve):
    registry = CollectorRegistry(auto_describe=False)
    collector = Collector()
    registry.register(collector)
    Counter("kmirror_test_pages", "a test counter", registry=registry).inc()
    server = serve(metrics_app(registry, collector))
    metrics = exchange(server, b"GET /metrics HTTP/1.1\r\n\r\n")
    assert metrics.startswith(b"HTTP/1.1 200 OK\r\n") and b"kmirror_test_pages_total 1.0" in metrics
    health = exchange(server, b"GET /health HTTP/1.1\r\n\r\n")
    assert health.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")  # no stream yet
    assert b"Content-Type: application/json" in health and b'"streams": []' in health


def test_a_page_that_fails_is_a_500_and_the_server_goes_on(serve):
    def broken(environ, start_response):
        raise RuntimeError("boom")

    server = serve(broken)
    assert exchange(server, b"GET / HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert exchange(server, b"GET / HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 500 Internal Server Error\r\n")


def test_a_request_head_sent_a_byte_at_a_time_is_cut_at_its_deadline(serve):
    # The deadline is for the whole head, not for each read: a client that keeps sending, slowly, is
    # closed all the same, long before its head would be complete (about 400 s at this pace).
    server = serve(timeout_s=1.0)
    head = b"GET /metrics HTTP/1.1\r\n" + b"X-Slow: " + b"a" * 2000 + b"\r\n\r\n"
    s = connect(server)
    sent = 0
    try:
        while sent < len(head):
            if closed_by_server(s):
                break
            s.sendall(head[sent : sent + 1])
            sent += 1
            time.sleep(0.2)
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        s.close()
    assert sent < len(head)


def test_a_request_head_larger_than_the_limit_is_dropped_unanswered(serve):
    server = serve()
    with connect(server, b"GET / HTTP/1.1\r\nX-Big: " + b"a" * (MAX_REQUEST_BYTES + 10)) as s:
        wait_until(lambda: closed_by_server(s), "the server to close the connection")


def test_a_full_server_closes_the_oldest_idle_connection_for_a_new_one(serve):
    server = serve(max_connections=4, timeout_s=BOUND_S)
    idle = [connect(server, b"GET /metrics HTTP/1.1\r\n") for _ in range(4)]
    try:
        wait_until(lambda: server.open_connections == 4, "the four idle connections to be open")
        # A scrape gets in although four idle connections hold every place: the oldest makes room.
        assert exchange(server, b"GET /metrics HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 200 OK\r\n")
        wait_until(lambda: closed_by_server(idle[0]), "the oldest idle connection to be closed")
        assert not any(closed_by_server(s) for s in idle[1:])  # the others wait for their deadline
        more = [connect(server, b"GET /") for _ in range(20)]
        wait_until(lambda: all(closed_by_server(s) for s in more[:-4]), "all but the last 4 to be closed")
        assert server.open_connections <= 4
        for s in more:
            s.close()
    finally:
        for s in idle:
            s.close()


def test_one_thread_serves_and_close_ends_it(serve):
    before = threading.active_count()
    server = serve()
    assert threading.active_count() == before + 1
    idle = [connect(server, b"GET / HTTP/1.1\r\n") for _ in range(20)]
    wait_until(lambda: server.open_connections == 20, "the idle connections to be open")
    assert threading.active_count() == before + 1
    server.close()
    assert threading.active_count() == before
    for s in idle:
        wait_until(lambda s=s: closed_by_server(s), "every connection to be closed")
        s.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=BOUND_S)
