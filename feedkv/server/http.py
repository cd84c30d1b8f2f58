"""The node's HTTP port (``--http-addr``, 8080 as CockroachDB's): its metrics in
Prometheus's text format at ``/_status/vars`` (CockroachDB's path) and ``/metrics``, and
the admin page (:mod:`feedkv.server.admin`):

- ``GET /``: the page, with ``/admin.js`` and ``/admin.css`` (files of this package: the
  page needs no internet access; its Content-Security-Policy allows nothing else);
- ``GET /_admin/v1/overview``: the JSON the page polls;
- ``GET /health``: 200 while the process serves (CockroachDB's liveness probe; also
  while a new node waits for ``feedkv init``), and
  ``GET /health?ready=1``: 200 ``{}`` when the node takes clients, else 503 with why
  (waiting for ``feedkv init``, decommissioned, its clock too far off): what a load
  balancer asks, as of CockroachDB's (a draining node closes the port first, which a
  balancer counts as not ready too). Open, as the metrics are: it tells nothing about the data;
- ``POST /_admin/v1/jobs/<id>/<pause|resume|cancel>``: a button. It must carry the
  header ``X-Feedkv-Admin: 1``, which a page of another origin cannot send without the
  browser asking this port first (a cross-site form cannot pause a job with the
  credentials the browser keeps for this port).

On a secure node the port serves https, and a plain http request to it (a browser given
``http://host:port``) is redirected to the same URL over https (307, as CockroachDB's DB
Console does): the first byte a client sends tells a TLS handshake (a handshake record,
0x16) from an http request (a method name), so one port serves both answers. Every
admin path asks for HTTP Basic authentication (401 until given);
the metrics stay open to scrapers, as CockroachDB's ``/_status/vars`` is. Errors are
JSON ``{"error": message}``: 400 for a bad request, 401 not authenticated, 403 not
allowed (SQLSTATE 42501), 404 no such job or page, 409 the job is not in a state for it,
503 the node cannot answer (starting, stopping).

A :class:`~http.server.ThreadingHTTPServer` of the standard library: a scrape is one
small GET a few times a minute, and each connection gets a thread of its own, so a slow
scraper holds up no one. Connections are kept between requests (HTTP/1.1), as Prometheus
keeps its connection to a target between scrapes: a scrape on a new connection cost the
node a thread and the connection's set-up and tear-down, about 0.45 ms of CPU (measured
here), as much as formatting its metrics. A connection idle for :data:`IDLE_TIMEOUT_S`
is closed, and :meth:`HTTPServer.stop` closes them all. Requests are not logged (a
scrape every second would fill the log).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import ssl
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from feedkv.errors import FeedKVError, InvalidArgumentError, PermissionDeniedError, SQLError
from feedkv.util.metrics import CONTENT_TYPE

if TYPE_CHECKING:
    from feedkv.server.admin import Admin

__all__ = ["ADMIN_HEADER", "HEALTH_PATH", "METRICS_PATHS", "OVERVIEW_PATH", "HTTPServer", "health"]

log = logging.getLogger(__name__)

METRICS_PATHS = ("/_status/vars", "/metrics")
OVERVIEW_PATH = "/_admin/v1/overview"
JOBS_PATH = "/_admin/v1/jobs/"
HEALTH_PATH = "/health"
ADMIN_HEADER = "X-Feedkv-Admin"
# NB: above Prometheus's longest common scrape interval (a minute), so its connection lasts
IDLE_TIMEOUT_S = 300.0
MAX_BODY = 1 << 16  # the longest request body read past on a kept connection
LINGER_S = 1.0  # how long a closing connection reads what its client still sends

# path -> (file of feedkv/server/static, content type)
STATIC = {
    "/": ("admin.html", "text/html; charset=utf-8"),
    "/admin.js": ("admin.js", "text/javascript; charset=utf-8"),
    "/admin.css": ("admin.css", "text/css; charset=utf-8"),
}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
_SQLSTATE_STATUS = {"42501": 403, "42704": 404, "55000": 409}


_TLS_HANDSHAKE = 0x16  # the content type of a TLS record that opens a handshake
# a Host header fit to redirect to: a name or an address, and a port
_HOST = re.compile(r"(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?")


def health(query: str, not_ready: str | None) -> tuple[int, dict[str, str]]:
    """The answer to ``GET /health?<query>``: its status and JSON body. ``not_ready``:
    why the node takes no clients now (``None``: it does). Only ``ready`` is read, a
    boolean as CockroachDB's (``1``/``true``, ``0``/``false``)."""
    params = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(params) - {"ready"})
    if unknown:
        return 400, {"error": f"unknown parameter {unknown[0]!r}; /health takes only ready=1"}
    value = params.get("ready", ["false"])[-1].lower()
    if value not in _BOOLEANS:
        return 400, {"error": f"ready={value!r} is not a boolean; use ready=1"}
    if _BOOLEANS[value] and not_ready is not None:
        return 503, {"error": f"node is not ready: {not_ready}"}
    return 200, {}


_BOOLEANS = {"1": True, "true": True, "t": True, "0": False, "false": False, "f": False}


class _Server(ThreadingHTTPServer):
    """With ``tls``, serves https, and redirects a plain http request to https. Keeps
    the open connections, so that :meth:`close_connections` ends those kept alive."""

    tls: ssl.SSLContext | None = None

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._connections: set[socket.socket] = set()  # open, each with its thread
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """In the request's own thread (so a client that never finishes a handshake
        holds up no one): a connection that opens with a TLS handshake gets the
        handler over TLS; one that opens otherwise, a redirect to https."""
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        first = request.recv(1, socket.MSG_PEEK)
        if not first:
            return  # closed before a word
        if first[0] != _TLS_HANDSHAKE:
            _ToHttps(request, client_address, self)
            return
        secure = self.tls.wrap_socket(request, server_side=True)
        # NB: the wrapped socket owns the connection now (``request`` is detached), so it
        # is the one to shut down, and to end in close_connections
        with self._connections_lock:
            self._connections.discard(request)
            self._connections.add(secure)
        try:
            super().finish_request(secure, client_address)
        finally:
            self.shutdown_request(secure)

    def shutdown_request(self, request: Any) -> None:
        """Close the connection, lingering: a request body left unread (chunked, or too
        large) would have the kernel answer the close with a reset, which may discard
        the answer before the client reads it; so the port stops writing, then reads
        what the client still sends (for ``LINGER_S`` and ``MAX_BODY`` bytes at most)."""
        with self._connections_lock:
            self._connections.discard(request)
        with contextlib.suppress(OSError):
            request.shutdown(socket.SHUT_WR)
            request.settimeout(LINGER_S)
            drained = 0
            while drained < MAX_BODY and (chunk := request.recv(MAX_BODY)):
                drained += len(chunk)
        self.close_request(request)

    def close_connections(self) -> None:
        """End every open connection (each thread's wait for a next request ends)."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client's fault on the connection (a failed handshake, a reset) is logged
        as a line, not a traceback on the node's stderr."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):  # ssl.SSLError and ConnectionError among them
            super().handle_error(request, client_address)
            return
        log.info("HTTP client %s failed on its connection: %s", client_address[0], exc)


class _ToHttps(BaseHTTPRequestHandler):
    """Answers a plain http request to the https port: 307 to the same path over
    https, with a line of text saying so for a client that does not follow it."""

    server_version = "feedkv"

    def do_GET(self) -> None:
        self._redirect(body=True)

    def do_HEAD(self) -> None:
        self._redirect(body=False)

    def do_POST(self) -> None:
        self._redirect(body=True)

    def _redirect(self, *, body: bool) -> None:
        host = self.headers.get("Host", "")
        if _HOST.fullmatch(host) is None:
            address, port = self.connection.getsockname()[:2]
            host = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
        path = self.path if self.path.startswith("/") else "/"
        location = f"https://{host}{path}"
        text = f"This port serves https only (the node is secure): {location}\n".encode()
        log.info(
            "HTTP client %s spoke plain http to this https port: sent to %s",
            self.client_address[0],
            location,
        )
        self.send_response(307)
        self.send_header("Location", location)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(text)))
        self.send_header("Connection", "close")
        self.end_headers()
        if body:
            self.wfile.write(text)
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass


class HTTPServer:
    """Serves ``exposition()`` on ``host:port`` (port 0: one the system picks; see
    :attr:`port`) from :meth:`start` until :meth:`stop`."""

    def __init__(
        self,
        exposition: Callable[[], bytes],
        host: str,
        port: int,
        *,
        tls: ssl.SSLContext | None = None,
        admin: Callable[[], Admin | None] = lambda: None,
        not_ready: Callable[[], str | None] = lambda: None,
    ) -> None:
        """``tls``: serve https (``None``: http). ``admin()``: the admin page's source
        (``None``: not ready yet, or none; its paths answer 503). ``not_ready()``: why
        the node takes no clients now, ``None`` when it does (``/health?ready=1``)."""

        class Handler(BaseHTTPRequestHandler):
            server_version = "feedkv"
            protocol_version = "HTTP/1.1"  # connections kept (see the module docstring)
            timeout = IDLE_TIMEOUT_S
            # NB: the headers and the body go in two writes; with Nagle's algorithm the
            # body would wait for the client's delayed ACK of the headers (40 ms)
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                self._skip_body()
                path, _, query = self.path.partition("?")
                if path in METRICS_PATHS:
                    try:
                        body = exposition()
                    except FeedKVError as exc:  # none yet: the node waits for its cluster
                        self._error(503, f"the node cannot answer now: {exc}")
                    else:
                        self._answer(200, CONTENT_TYPE, body)
                elif path == HEALTH_PATH:
                    self._json(*health(query, not_ready()))
                elif path in STATIC or path == OVERVIEW_PATH:
                    self._admin(lambda a, user: self._get(a, user, path))
                else:
                    self._error(
                        404,
                        f"no page at {path}; the admin page is at /, metrics at /_status/vars, "
                        f"health at {HEALTH_PATH}[?ready=1]",
                    )

            def do_POST(self) -> None:
                self._skip_body()
                path = self.path.split("?", 1)[0]
                parts = path.removeprefix(JOBS_PATH).split("/")
                if not path.startswith(JOBS_PATH) or len(parts) != 2:
                    self._error(404, f"no action at {path}; POST {JOBS_PATH}<id>/<action>")
                elif self.headers.get(ADMIN_HEADER) != "1":
                    self._error(400, f"an action needs the header {ADMIN_HEADER}: 1")
                else:
                    self._admin(lambda a, user: self._post(a, user, *parts))

            def _skip_body(self) -> None:
                """Read past the request's body, which no path takes: the connection's
                next request starts after it (one whose end cannot be told, a chunked
                or a too large one, closes the connection after the answer)."""
                length = self.headers.get("Content-Length", "0")
                if "Transfer-Encoding" in self.headers or not length.isdigit():
                    self.close_connection = True
                elif 0 < int(length) <= MAX_BODY:
                    self.rfile.read(int(length))
                elif int(length) > MAX_BODY:
                    self.close_connection = True

            def _get(self, source: Admin, user: str, path: str) -> None:
                if path == OVERVIEW_PATH:
                    self._json(200, source.overview(user))
                    return
                name, content_type = STATIC[path]
                body = resources.files("feedkv.server").joinpath("static", name).read_bytes()
                self._answer(200, content_type, body)

            def _post(self, source: Admin, user: str, job_id: str, action: str) -> None:
                source.control(user, job_id, action)
                self._json(200, {"job_id": job_id, "action": action})

            def _admin(self, respond: Callable[[Admin, str], None]) -> None:
                source = admin()
                if source is None:
                    self._error(503, "the admin page is not ready: the node is starting")
                    return
                try:
                    user = source.user(self.headers.get("Authorization"), self.client_address[0])
                    respond(source, user)
                except PermissionDeniedError as exc:
                    self._error(401, str(exc), {"WWW-Authenticate": 'Basic realm="feedkv"'})
                except InvalidArgumentError as exc:
                    self._error(400, str(exc))
                except SQLError as exc:
                    self._error(_SQLSTATE_STATUS.get(exc.code, 400), exc.message)
                except FeedKVError as exc:  # a fault of the node (stopping, a range away)
                    self._error(503, f"the node cannot answer now: {exc}")

            def _json(self, status: int, value: Any) -> None:
                self._answer(status, "application/json", json.dumps(value).encode())

            def _error(
                self, status: int, message: str, headers: dict[str, str] | None = None
            ) -> None:
                body = json.dumps({"error": message}).encode()
                self._answer(status, "application/json", body, headers)

            def _answer(
                self,
                status: int,
                content_type: str,
                body: bytes,
                headers: dict[str, str] | None = None,
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in {**SECURITY_HEADERS, **(headers or {})}.items():
                    self.send_header(name, value)
                if self.close_connection:  # the client's wish, or a body not read past
                    self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = _Server((host, port), Handler)
        self._server.daemon_threads = True
        self._server.tls = tls
        self.host = host
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="feedkv-http", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the port. Idempotent."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.close_connections()
        self._server.server_close()
