"""The HTTP server of the metrics port (/metrics, /health): one thread, a bounded number of connections,
a deadline for every request.

A scrape is one short GET, rendered from memory in milliseconds; nothing else is served. The threading
server of http.server that this replaces started a thread per connection and waited for a request without
end: 1,200 connections that sent half a request made 1,200 threads (issue 34, item 4). Here one thread
runs an asyncio loop that serves every connection:

* at most ``max_connections`` are open at once. One more closes, at once, the connection that has waited
  longest for the rest of its request (an idle one held open); when every open connection is already being
  answered, the new one is closed instead. A flood of idle connections therefore never keeps a scrape out:
  the scrape's request arrives with its connection, and the flood's oldest makes room for it.
* a connection that has not sent its whole request head (request line and headers, at most
  ``MAX_REQUEST_BYTES``) ``timeout_s`` after it was accepted is closed; so is one that has not taken its
  answer ``timeout_s`` after it was written.
* one request per connection: the answer says ``Connection: close`` and the server closes it.

The application is a WSGI callable (:func:`kmirror.mirror.runner.metrics_app`), called in the loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import socket
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote

log = logging.getLogger(__name__)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

# Connections open at once: a few Prometheus servers and health checks scrape one port, each with one
# connection at a time.
MAX_CONNECTIONS = 32
# Seconds a connection has to send its request head, and again to take its answer. Prometheus sends the
# whole request at once; its scrape timeout (10 s by default) is longer than this.
REQUEST_TIMEOUT_S = 5.0
# The request line and headers (a scrape's are a few hundred bytes).
MAX_REQUEST_BYTES = 8192
# Connections the kernel queues before the loop accepts them.
BACKLOG = 128

_END_OF_HEAD = b"\r\n\r\n"


class BoundedHTTPServer:
    """Serves ``app`` on the listening socket ``sock`` from a thread of its own (:meth:`start`)."""

    def __init__(
        self,
        sock: socket.socket,
        app: WsgiApp,
        *,
        max_connections: int = MAX_CONNECTIONS,
        timeout_s: float = REQUEST_TIMEOUT_S,
        name: str = "metrics-http",
    ) -> None:
        self.sock = sock
        self.app = app
        self.max_connections = max_connections
        self.timeout_s = timeout_s
        self.name = name
        self.host, self.port = sock.getsockname()[:2]
        # Open connections: those still waiting for their request head (oldest first), and those answered.
        self._waiting: dict[asyncio.Task[Any], asyncio.StreamWriter] = {}
        self._answering: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failed: BaseException | None = None

    def start(self) -> None:
        """Serve from a daemon thread; returns once the loop accepts connections."""
        self._thread = threading.Thread(target=self._run, daemon=True, name=self.name)
        self._thread.start()
        self._ready.wait()
        if self._failed is not None:
            raise self._failed

    def close(self, timeout: float = 10.0) -> None:
        """Stop serving: close every connection and the listening socket."""
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # closed already: its loop has ended
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def open_connections(self) -> int:
        return len(self._waiting) + len(self._answering)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self._failed = exc
            raise
        finally:
            self._ready.set()  # also when it could not start: start() must not wait for ever
            self.sock.close()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(
            self._serve, sock=self.sock, limit=MAX_REQUEST_BYTES, backlog=BACKLOG
        )
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for _ in range(3):  # the handlers of connections accepted last start (and count themselves)
                await asyncio.sleep(0)
            tasks = [*self._waiting, *self._answering]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.sleep(0)  # the aborted connections close their sockets

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self.open_connections >= self.max_connections:
            if not self._waiting:
                writer.transport.abort()  # every open connection is being answered: no room
                return
            # Room from the connection that has waited longest for the rest of its request.
            oldest, its_writer = next(iter(self._waiting.items()))
            del self._waiting[oldest]
            its_writer.transport.abort()
            oldest.cancel()
        self._waiting[task] = writer
        try:
            try:
                async with asyncio.timeout(self.timeout_s):
                    head = await reader.readuntil(_END_OF_HEAD)
            finally:
                self._waiting.pop(task, None)
            self._answering.add(task)
            answer = self._answer(head, writer)
            async with asyncio.timeout(self.timeout_s):
                writer.write(answer)
                await writer.drain()
                writer.close()
                await writer.wait_closed()
        except (asyncio.CancelledError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # closed for room, after its deadline, by its client, or a head too large: dropped
        except OSError:
            pass  # the client went away while it was answered
        finally:
            self._answering.discard(task)
            writer.transport.abort()

    def _answer(self, head: bytes, writer: asyncio.StreamWriter) -> bytes:
        """The whole HTTP answer to one request head."""
        environ = self._environ(head, writer)
        if environ is None:
            return _response("400 Bad Request", [("Content-Type", "text/plain")], b"bad request\n", True)
        started: list[tuple[str, list[tuple[str, str]]]] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            started[:] = [(status, headers)]

        try:
            body = b"".join(self.app(environ, start_response))
        except Exception as exc:  # a page that fails is one 500 and one line, the server goes on
            log.warning(
                "%s: %s %s failed: %r", self.name, environ["REQUEST_METHOD"], environ["PATH_INFO"], exc
            )
            return _response("500 Internal Server Error", [("Content-Type", "text/plain")], b"error\n", True)
        status, headers = started[0]
        return _response(status, headers, body, environ["REQUEST_METHOD"] != "HEAD")

    def _environ(self, head: bytes, writer: asyncio.StreamWriter) -> dict[str, Any] | None:
        """The WSGI environment of a request head (PEP 3333); None when it is not HTTP."""
        lines = head.decode("iso-8859-1").split("\r\n")
        parts = lines[0].split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return None
        method, target, protocol = parts
        path, _, query = target.partition("?")
        peer = writer.get_extra_info("peername") or ("", 0)
        environ: dict[str, Any] = {
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": "",
            "PATH_INFO": unquote(path, "iso-8859-1"),
            "QUERY_STRING": query,
            "SERVER_NAME": str(self.host),
            "SERVER_PORT": str(self.port),
            "SERVER_PROTOCOL": protocol,
            "REMOTE_ADDR": str(peer[0]),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": False,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                continue
            key = name.strip().upper().replace("-", "_")
            if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                environ[key] = value.strip()
            else:
                environ[f"HTTP_{key}"] = value.strip()
        return environ


def _response(status: str, headers: list[tuple[str, str]], body: bytes, with_body: bool) -> bytes:
    kept = [(k, v) for k, v in headers if k.lower() not in ("content-length", "connection")]
    kept += [("Content-Length", str(len(body))), ("Connection", "close")]
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in kept), "", ""]
    return "\r\n".join(lines).encode("iso-8859-1") + (body if with_body else b"")


def listening_socket(sockaddr: tuple[Any, ...], family: socket.AddressFamily) -> socket.socket:
    """A socket listening on ``sockaddr`` (as getaddrinfo gives it); OSError when it cannot."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(BACKLOG)
    except BaseException:
        with contextlib.suppress(OSError):
            sock.close()
        raise
    return sock
