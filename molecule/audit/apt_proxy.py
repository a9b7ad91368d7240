#!/usr/bin/env python3
"""A minimal HTTP forward proxy for the audit scenario's guest: the guests have no route to a package
mirror, and a data centre's hosts usually reach theirs through a proxy. Plain HTTP GET/HEAD only (Debian's
mirror is http; apt checks the signatures itself). Stdlib only.

    apt_proxy.py --listen 10.213.0.1 --port 3142 --pid-file FILE     (runs in the background: create.yml)
"""

from __future__ import annotations

import argparse
import os
import shutil
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailers", "upgrade"}


class Proxy(BaseHTTPRequestHandler):
    def _forward(self, method: str) -> None:
        if not self.path.startswith("http://"):
            self.send_error(400, "absolute http:// URLs only")
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP | {"host"}}
        req = urllib.request.Request(self.path, headers=headers, method=method)
        try:
            resp = urllib.request.urlopen(req, timeout=60)
        except urllib.error.HTTPError as exc:
            resp = exc
        except OSError as exc:
            self.send_error(502, str(exc))
            return
        with resp:
            self.send_response(resp.status if hasattr(resp, "status") else resp.code)
            for k, v in resp.headers.items():
                if k.lower() not in HOP:
                    self.send_header(k, v)
            self.send_header("Connection", "close")
            self.end_headers()
            if method != "HEAD":
                shutil.copyfileobj(resp, self.wfile, 1 << 16)

    def do_GET(self) -> None:
        self._forward("GET")

    def do_HEAD(self) -> None:
        self._forward("HEAD")

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="10.213.0.1")
    ap.add_argument("--port", type=int, default=3142)
    ap.add_argument("--pid-file", required=True)
    a = ap.parse_args()
    server = ThreadingHTTPServer((a.listen, a.port), Proxy)
    if os.fork():
        os._exit(0)
    os.setsid()
    with open(a.pid_file, "w") as fh:
        fh.write(f"{os.getpid()}\n")
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    server.serve_forever()


if __name__ == "__main__":
    main()
