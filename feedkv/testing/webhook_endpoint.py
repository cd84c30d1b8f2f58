"""A webhook endpoint on loopback, for tests of webhook sinks and of what drives them.

:class:`WebhookEndpoint` is a real HTTP(S) server on ``127.0.0.1`` (the standard
library's threading server, one thread per connection) that a changefeed's
``webhook-http(s)://`` sink posts to. It behaves as a test needs:

- it *accepts* (200) and keeps every request it accepted (:attr:`accepted`);
- it *fails* its first ``failures`` requests by ``failure``: ``"status"`` answers
  ``status``, ``"close"`` drops the connection with no answer, ``"hang"`` never
  answers (until closed); :meth:`recover` makes it accept from then on, and
  :meth:`refusing` builds one that fails until then;
- it *holds* every request (the sink stops accepting) from :meth:`hold` until
  :meth:`let_go`, then answers it as above: a sink whose requests are held takes
  nothing and its backlog grows.

Waiting for what it received goes through :meth:`wait_for`, on a condition with a
deadline, never a sleep.
"""

from __future__ import annotations

import json
import ssl
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["DEADLINE_S", "Received", "WebhookEndpoint"]

DEADLINE_S = 30.0  # how long wait_for waits by default
_HELD_S = 600.0  # the longest a request is held or hangs, so a test that forgets ends
FAILURES = ("status", "close", "hang")


@dataclass
class Received:
    """One request the endpoint accepted."""

    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    client_cert: dict[str, Any] = field(default_factory=dict)

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class WebhookEndpoint:
    """See the module docstring. ``tls``: a server context (HTTPS; it asks for a client
    certificate if the context does)."""

    def __init__(
        self,
        *,
        failures: int = 0,
        failure: str = "status",
        status: int = 500,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if failure not in FAILURES:
            raise ValueError(f"failure={failure!r}: expected one of {', '.join(FAILURES)}")
        self.accepted: list[Received] = []
        self.attempts = 0  # requests that reached it, accepted or not
        self.held = 0  # requests held now
        self._failures = failures
        self._failure = failure
        self._status = status
        self._cond = threading.Condition()
        self._closed = threading.Event()  # lets hanging requests go at close
        self._going = threading.Event()  # set: requests are not held
        self._going.set()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                endpoint._answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self._scheme = "https" if tls else "http"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @classmethod
    def refusing(cls, status: int = 503) -> WebhookEndpoint:
        """An endpoint that answers ``status`` until :meth:`recover`."""
        return cls(failures=sys.maxsize, status=status)

    # Where it is.

    def uri(self, path: str = "/hook", query: str = "") -> str:
        """The sink URI of this endpoint (``webhook-http(s)://...``)."""
        return f"webhook-{self._scheme}://127.0.0.1:{self.port}{path}" + (
            f"?{query}" if query else ""
        )

    def url(self, path: str = "/hook") -> str:
        """Its plain URL, for a webhook client."""
        return f"{self._scheme}://127.0.0.1:{self.port}{path}"

    # What it received.

    def bodies(self) -> list[Any]:
        """The JSON bodies of the requests it accepted, in the order it took them."""
        with self._cond:
            return [r.json for r in self.accepted]

    def rows(self) -> Iterator[Any]:
        """Every row of the payloads it accepted (resolved markers left out)."""
        for body in self.bodies():
            yield from body.get("payload", ())

    def wait_for(
        self, done: Callable[[list[Received]], bool], what: str, deadline: float = DEADLINE_S
    ) -> list[Received]:
        """Wait until ``done(accepted)`` holds, and return what was accepted then;
        ``AssertionError`` naming ``what`` after ``deadline`` seconds."""
        with self._cond:
            if not self._cond.wait_for(lambda: done(self.accepted), deadline):
                raise AssertionError(
                    f"timed out waiting for {what}; got {len(self.accepted)} requests"
                )
            return list(self.accepted)

    # What it does.

    def recover(self) -> None:
        """Accept every request from now on (the failures end)."""
        with self._cond:
            self._failures = self.attempts

    def hold(self) -> None:
        """Hold every request from now on, until :meth:`let_go`."""
        self._going.clear()

    def let_go(self) -> None:
        """Answer the requests held, and hold no more."""
        self._going.set()

    def close(self) -> None:
        self._closed.set()
        self._going.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> WebhookEndpoint:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length", 0)))
        if not self._going.is_set():
            with self._cond:
                self.held += 1
            self._going.wait(_HELD_S)
            with self._cond:
                self.held -= 1
        with self._cond:
            self.attempts += 1
            failing = self.attempts <= self._failures
            if not failing:
                cert = getattr(handler.connection, "getpeercert", lambda: None)()
                self.accepted.append(
                    Received(
                        handler.path,
                        {k.lower(): v for k, v in handler.headers.items()},
                        body,
                        cert or {},
                    )
                )
            self._cond.notify_all()
        if failing and self._failure == "hang":
            self._closed.wait(_HELD_S)
        if failing and self._failure in ("close", "hang"):
            handler.close_connection = True
            return
        status, text = (self._status, b"the endpoint is down") if failing else (200, b"ok")
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(text)))
        handler.end_headers()
        handler.wfile.write(text)
