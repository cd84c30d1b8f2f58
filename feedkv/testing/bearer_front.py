"""What Google's emulators leave out: the service's check of the caller's OAuth token.

:class:`BearerFront` is an HTTP server on loopback in front of an emulator (Pub/Sub's,
gcp-storage-emulator): a request whose ``Authorization: Bearer`` token ``check``
refuses (``check`` returns why, or ``None``) gets 401 ``UNAUTHENTICATED``, as Google's
APIs answer; the others are relayed to the emulator whole (method, path and query,
headers, body) and its answer relayed back.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

__all__ = ["BearerFront"]

_TIMEOUT = 60.0  # seconds for one request to the emulator
# NB: httpx hands back the body decoded and whole: these would describe another one
_NOT_RELAYED = frozenset(
    {"host", "authorization", "content-length", "connection", "accept-encoding"}
)
_NOT_ANSWERED = frozenset({"content-length", "content-encoding", "transfer-encoding", "connection"})


class BearerFront:
    """See the module docstring. ``upstream``: the emulator's base URL
    (``http://host:port``); :attr:`url` is the front's; :attr:`refused` lists the
    reasons given for the requests it refused."""

    def __init__(self, upstream: str, check: Callable[[str], str | None]) -> None:
        self.refused: list[str] = []
        front = self
        upstream = upstream.rstrip("/")

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
                why = "no bearer token" if scheme != "Bearer" else check(token)
                if why is not None:
                    front.refused.append(why)
                    error = {"error": {"code": 401, "message": why, "status": "UNAUTHENTICATED"}}
                    self._answer(401, {"Content-Type": "application/json"}, json.dumps(error))
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _NOT_RELAYED}
                answer = httpx.request(
                    self.command,
                    upstream + self.path,
                    content=body,
                    headers=headers,
                    timeout=_TIMEOUT,
                )
                kept = {k: v for k, v in answer.headers.items() if k.lower() not in _NOT_ANSWERED}
                self._answer(answer.status_code, kept, answer.content)

            def _answer(self, status: int, headers: dict[str, str], body: bytes | str) -> None:
                data = body.encode() if isinstance(body, str) else body
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _relay

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
