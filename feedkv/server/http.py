"""The node's HTTP port (``--http-addr``, 8080 as CockroachDB's): its metrics in
Prometheus's text format at ``/_status/vars`` (CockroachDB's path) and ``/metrics``.

A :class:`~http.server.ThreadingHTTPServer` of the standard library: a scrape is one
small GET a few times a minute, and each request gets a thread of its own, so a slow
scraper holds up no one. Requests are not logged (a scrape every second would fill the
log).
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from feedkv.util.metrics import CONTENT_TYPE

__all__ = ["METRICS_PATHS", "HTTPServer"]

METRICS_PATHS = ("/_status/vars", "/metrics")


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
    ) -> None:
        """``tls``: serve https (``None``: http)."""

        class Handler(BaseHTTPRequestHandler):
            server_version = "feedkv"

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path in METRICS_PATHS:
                    self._answer(200, CONTENT_TYPE, exposition())
                else:
                    body = f"no page at {path}; metrics are at /_status/vars\n".encode()
                    self._answer(404, "text/plain; charset=utf-8", body)

            def _answer(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        if tls is not None:
            # NB: the handshake happens in the request's own thread (on its first read),
            # so a client that never finishes one holds up no one
            self._server.socket = tls.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
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
        self._server.server_close()
