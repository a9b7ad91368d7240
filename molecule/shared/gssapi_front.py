#!/usr/bin/env python3
"""Test infrastructure: embedded clusters that clients reach only through Kafka's SASL/GSSAPI (Kerberos).

    python gssapi_front.py up --state-dir DIR --keytab FILE [--host 10.213.0.1] [--max-session-s N] NAME ...
    python gssapi_front.py down --state-dir DIR
    python gssapi_front.py serve --keytab FILE --route HOST:PORT=BROKER_HOST:BROKER_PORT ...  (used by up)

The test broker (Tansu) has no GSSAPI. ``up`` starts one broker per NAME on 127.0.0.1 only (not reachable
from the guests), advertising HOST:FRONT_PORT, and one front process that listens on HOST:FRONT_PORT for
every cluster. The front speaks the server side of Kafka's SASL on each connection, then passes the bytes
through to its broker:

- ApiVersions (api key 18) is answered by the front itself: the broker's own list (asked once, v0), with
  SaslHandshake (17) and SaslAuthenticate (36) set to the versions the front implements. (Tansu lists
  17/36 too, but its v3 response carries top-level tagged fields that librdkafka 2.0.2 cannot parse:
  "Read underflow"; the front's answer has none.)
- SaslHandshake v0/v1 accepts GSSAPI only (else UNSUPPORTED_SASL_MECHANISM and the connection is closed).
- SaslAuthenticate v0-v2 (or raw tokens after a v0 handshake) carries the GSSAPI tokens: the front accepts
  the client's Kerberos context with the brokers' service principal from FILE (python ``gssapi`` over MIT
  krb5, credential store ``keytab``), then runs RFC 4752's security-layer negotiation (a wrapped offer of
  "no security layer", the client's wrapped choice), and reports the authenticated principal.
- Any other request before authentication, a failed token, or a client that closes early: the connection
  is closed and the refusal logged (``REFUSED ...``); nothing reaches the broker.
- ``--max-session-s N``: an authenticated connection is closed after N seconds, so clients reconnect and
  authenticate again with fresh tickets (a stand-in for Kafka's connections.max.reauth.ms, which
  librdkafka 2.0.2 does not implement).

The log (STATE/front.log) has one line per login: ``AUTHENTICATED <principal> <route>``. ``up`` writes
STATE/clusters.json ({name: "HOST:FRONT_PORT"}, the only addresses clients can use).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

from kmirror.testing.fronts import down, kill, save, start_broker, wait

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
UNSUPPORTED_SASL_MECHANISM, UNSUPPORTED_VERSION, SASL_AUTHENTICATION_FAILED = 33, 35, 58
SASL_VERSIONS = {SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)}
API_VERSIONS_MAX = 3

log = logging.getLogger("gssapi_front")


# --- Kafka wire primitives ------------------------------------------------------------------------------


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def skip_tags(buf: bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    return pos


class Request:
    """A request's header; ``body`` is the position where its body starts in ``raw``."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.api_key, self.version, self.correlation_id = struct.unpack_from(">hhi", raw, 0)
        (n,) = struct.unpack_from(">h", raw, 8)
        pos = 10 + max(n, 0)
        if self.flexible:
            pos = skip_tags(raw, pos)
        self.body = pos

    @property
    def flexible(self) -> bool:
        return (self.api_key == API_VERSIONS and self.version >= 3) or (
            self.api_key == SASL_AUTHENTICATE and self.version >= 2
        )


def frame(correlation_id: int, body: bytes, header_tags: bool = False) -> bytes:
    header = struct.pack(">i", correlation_id) + (b"\x00" if header_tags else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    if not 0 <= size <= 100 * 1024 * 1024:
        raise ValueError(f"bad frame size {size}")
    return await reader.readexactly(size)


def broker_api_versions(host: str, port: int) -> dict[int, tuple[int, int]]:
    """The broker's (min, max) per api key, asked with ApiVersions v0 (a format every broker answers)."""
    client_id = b"gssapi-front"
    req = struct.pack(">hhih", API_VERSIONS, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(req)) + req)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("broker closed the connection during ApiVersions")
            data += chunk
    _, error, count = struct.unpack_from(">ihi", data, 4)
    if error:
        raise ConnectionError(f"broker ApiVersions error {error}")
    out = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", data, 14 + 6 * i)
        out[key] = (lo, hi)
    return out


def api_versions_response(req: Request, apis: dict[int, tuple[int, int]]) -> bytes:
    error = 0
    version = req.version
    if version > API_VERSIONS_MAX:
        # KIP-511: answer in v0 with UNSUPPORTED_VERSION; the client retries with the versions listed.
        error, version = UNSUPPORTED_VERSION, 0
    items = sorted(apis.items())
    if version >= 3:
        body = struct.pack(">h", error) + uvarint(len(items) + 1)
        for key, (lo, hi) in items:
            body += struct.pack(">hhh", key, lo, hi) + b"\x00"
        body += struct.pack(">i", 0) + b"\x00"
    else:
        body = struct.pack(">hi", error, len(items))
        for key, (lo, hi) in items:
            body += struct.pack(">hhh", key, lo, hi)
        if version >= 1:
            body += struct.pack(">i", 0)
    return frame(req.correlation_id, body)  # ApiVersions responses always use header v0


def string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def authenticate_response(req: Request, error: int, message: str | None, token: bytes) -> bytes:
    if req.version >= 2:
        msg = b"\x00" if message is None else uvarint(len(message.encode()) + 1) + message.encode()
        body = struct.pack(">h", error) + msg + uvarint(len(token) + 1) + token
        body += struct.pack(">q", 0) + b"\x00"
        return frame(req.correlation_id, body, header_tags=True)
    body = struct.pack(">h", error) + string(message) + struct.pack(">i", len(token)) + token
    if req.version >= 1:
        body += struct.pack(">q", 0)  # session_lifetime_ms 0: no re-authentication asked
    return frame(req.correlation_id, body)


def authenticate_token(req: Request) -> bytes:
    if req.version >= 2:
        n, pos = read_uvarint(req.raw, req.body)
        return req.raw[pos : pos + n - 1]
    (n,) = struct.unpack_from(">i", req.raw, req.body)
    return req.raw[req.body + 4 : req.body + 4 + max(n, 0)]


# --- GSSAPI (RFC 4752) server ---------------------------------------------------------------------------


class GssapiServer:
    """One connection's server side of the SASL GSSAPI mechanism."""

    NO_SECURITY_LAYER = 1

    def __init__(self, creds: object) -> None:
        import gssapi

        self.ctx = gssapi.SecurityContext(creds=creds, usage="accept")
        self.state = "context"
        self.principal: str | None = None

    def step(self, token: bytes) -> tuple[bytes, bool]:
        """The reply to the client's TOKEN and whether the client is now authenticated."""
        if self.state == "context":
            out = self.ctx.step(token) or b""
            if not self.ctx.complete:
                return out, False
            self.principal = str(self.ctx.initiator_name)
            if out:
                self.state = "await-empty"  # the client answers our last context token with an empty one
                return out, False
            return self._offer(), False
        if self.state == "await-empty":
            return self._offer(), False
        if self.state == "await-choice":
            msg = self.ctx.unwrap(token).message
            if len(msg) < 4 or not msg[0] & self.NO_SECURITY_LAYER:
                raise PermissionError(f"client chose an unsupported security layer {msg[:1].hex()}")
            self.state = "done"
            return b"", True
        raise PermissionError(f"token in state {self.state}")

    def _offer(self) -> bytes:
        # Only "no security layer" (bit 0), maximum message size 0 (RFC 4752 section 3.3).
        self.state = "await-choice"
        return self.ctx.wrap(bytes([self.NO_SECURITY_LAYER, 0, 0, 0]), False).message


# --- the front ------------------------------------------------------------------------------------------


class Front:
    def __init__(self, keytab: str, max_session_s: float | None) -> None:
        import gssapi

        # Accept with any principal in the keytab (the brokers' service principal kafka/HOST@REALM).
        self.creds = gssapi.Credentials(usage="accept", store={"keytab": keytab})
        self.max_session_s = max_session_s

    async def handle(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        broker: tuple[str, int],
        apis: dict[int, tuple[int, int]],
    ) -> None:
        peer = "{}:{}".format(*writer.get_extra_info("peername")[:2])
        route = f"{peer}->{broker[0]}:{broker[1]}"
        try:
            principal = await self.authenticate(reader, writer, apis, route)
        except (asyncio.IncompleteReadError, ConnectionError):
            log.info("REFUSED %s: closed before authenticating", route)
            writer.close()
            return
        except Exception as exc:  # a refusal of any kind closes the connection
            log.warning("REFUSED %s: %s", route, exc)
            writer.close()
            return
        if principal is None:
            writer.close()
            return
        log.info("AUTHENTICATED %s %s", principal, route)
        try:
            b_reader, b_writer = await asyncio.open_connection(*broker)
        except OSError as exc:
            log.warning("broker %s:%s unreachable: %s", *broker, exc)
            writer.close()
            return
        pipes = [
            asyncio.ensure_future(self.pipe(reader, b_writer)),
            asyncio.ensure_future(self.pipe(b_reader, writer)),
        ]
        done, pending = await asyncio.wait(
            pipes, timeout=self.max_session_s, return_when=asyncio.FIRST_COMPLETED
        )
        if not done:
            log.info("SESSION-END %s %s: %ss elapsed, closing", principal, route, self.max_session_s)
        for t in pending:
            t.cancel()
        for w in (writer, b_writer):
            w.close()

    @staticmethod
    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await src.read(1 << 16):
                dst.write(data)
                await dst.drain()

    async def authenticate(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        apis: dict[int, tuple[int, int]],
        route: str,
    ) -> str | None:
        server: GssapiServer | None = None
        raw_tokens = False
        while True:
            if raw_tokens:  # after SaslHandshake v0: bare length-prefixed tokens
                assert server is not None
                reply, done = server.step(await read_frame(reader))
                writer.write(struct.pack(">i", len(reply)) + reply)
                await writer.drain()
                if done:
                    return server.principal
                continue
            req = Request(await read_frame(reader))
            if req.api_key == API_VERSIONS:
                writer.write(api_versions_response(req, apis))
            elif req.api_key == SASL_HANDSHAKE and server is None:
                (n,) = struct.unpack_from(">h", req.raw, req.body)
                mechanism = req.raw[req.body + 2 : req.body + 2 + n].decode()
                ok = mechanism == "GSSAPI"
                body = struct.pack(">h", 0 if ok else UNSUPPORTED_SASL_MECHANISM) + struct.pack(">i", 1)
                writer.write(frame(req.correlation_id, body + string("GSSAPI")))
                await writer.drain()
                if not ok:
                    raise PermissionError(f"SASL mechanism {mechanism!r} (only GSSAPI is enabled)")
                server = GssapiServer(self.creds)
                raw_tokens = req.version == 0
            elif req.api_key == SASL_AUTHENTICATE and server is not None:
                try:
                    reply, done = server.step(authenticate_token(req))
                except Exception as exc:
                    failed = authenticate_response(req, SASL_AUTHENTICATION_FAILED, f"GSSAPI: {exc}", b"")
                    writer.write(failed)
                    await writer.drain()
                    raise PermissionError(f"GSSAPI: {exc}") from exc
                writer.write(authenticate_response(req, 0, None, reply))
                await writer.drain()
                if done:
                    return server.principal
            else:
                raise PermissionError(f"api key {req.api_key} before authentication")
            await writer.drain()


async def serve(keytab: str, routes: list[tuple[str, int, str, int]], max_session_s: float | None) -> None:
    front = Front(keytab, max_session_s)
    servers = []
    for host, port, b_host, b_port in routes:
        apis = broker_api_versions(b_host, b_port)
        for key, versions in SASL_VERSIONS.items():
            apis[key] = versions
        lo, hi = apis.get(API_VERSIONS, (0, API_VERSIONS_MAX))
        apis[API_VERSIONS] = (lo, min(hi, API_VERSIONS_MAX))

        def handler(
            r: asyncio.StreamReader,
            w: asyncio.StreamWriter,
            b: tuple[str, int] = (b_host, b_port),
            a: dict[int, tuple[int, int]] = apis,
        ) -> object:
            return front.handle(r, w, b, a)

        servers.append(await asyncio.start_server(handler, host, port, reuse_address=True))
        log.info("LISTENING %s:%s -> %s:%s", host, port, b_host, b_port)
    await asyncio.gather(*(s.serve_forever() for s in servers))


# --- up / down ------------------------------------------------------------------------------------------


def up(
    state: Path,
    keytab: Path,
    host: str,
    names: list[str],
    *,
    max_session_s: float | None = None,
    krb5_config: str | None = None,
) -> dict[str, str]:
    state.mkdir(parents=True, exist_ok=True)
    down(state)
    pids: list[int] = []
    clusters: dict[str, str] = {}
    routes: list[str] = []
    try:
        for name in names:
            p, plain, front = start_broker(state, name, host)
            pids.append(p.pid)
            clusters[name] = f"{host}:{front}"
            routes += ["--route", f"{host}:{front}=127.0.0.1:{plain}"]
        argv = [sys.executable, os.path.abspath(__file__), "serve", "--keytab", str(keytab), *routes]
        if max_session_s:
            argv += ["--max-session-s", str(max_session_s)]
        env = dict(os.environ)
        if krb5_config:
            env["KRB5_CONFIG"] = krb5_config
        p = subprocess.Popen(
            argv,
            stdout=(state / "front.log").open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        pids.append(p.pid)
        for name, addr in clusters.items():
            wait(host, int(addr.rsplit(":", 1)[1]), f"the GSSAPI front of {name}", p)
    except BaseException:
        kill(pids)
        raise
    save(state, pids, clusters)
    return clusters


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up")
    u.add_argument("--state-dir", type=Path, required=True)
    u.add_argument("--keytab", type=Path, required=True, help="the brokers' service principal's keytab")
    u.add_argument("--krb5-config", help="KRB5_CONFIG for the front (the realm's krb5.conf)")
    u.add_argument("--host", default="10.213.0.1")
    u.add_argument("--max-session-s", type=float)
    u.add_argument("names", nargs="+")
    d = sub.add_parser("down")
    d.add_argument("--state-dir", type=Path, required=True)
    s = sub.add_parser("serve")
    s.add_argument("--keytab", required=True)
    s.add_argument("--route", action="append", required=True, help="HOST:PORT=BROKER_HOST:BROKER_PORT")
    s.add_argument("--max-session-s", type=float)
    a = ap.parse_args(argv)
    if a.cmd == "up":
        print(
            json.dumps(
                up(
                    a.state_dir,
                    a.keytab,
                    a.host,
                    a.names,
                    max_session_s=a.max_session_s,
                    krb5_config=a.krb5_config,
                )
            )
        )
    elif a.cmd == "down":
        down(a.state_dir)
    else:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
        routes = []
        for r in a.route:
            listen, broker = r.split("=", 1)
            lh, lp = listen.rsplit(":", 1)
            bh, bp = broker.rsplit(":", 1)
            routes.append((lh, int(lp), bh, int(bp)))
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(a.keytab, routes, a.max_session_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
