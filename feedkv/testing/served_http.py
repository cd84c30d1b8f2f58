"""The life cycle the test suite's HTTP services share: bound to a free port on
``127.0.0.1``, served from a daemon thread, used as a context manager or started and
closed by hand (the schema registry, the Iceberg REST catalog)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

__all__ = ["MethodHandler", "ServedHTTP", "StateServer"]


class StateServer(ThreadingHTTPServer):
    """A server whose handlers reach the service's ``state`` (``self.server.state``)."""

    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], state: Any
    ) -> None:
        super().__init__(address, handler)
        self.state = state


class MethodHandler(BaseHTTPRequestHandler):
    """A handler whose every method goes to :meth:`_handle` (given its name), logging
    nothing (tests read what the service recorded instead)."""

    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self, method: str) -> None:
        raise NotImplementedError


class ServedHTTP:
    """A service's server and thread; subclasses make the server (:meth:`_serve`) and
    release what else they hold once it stopped (:meth:`_stopped`)."""

    name = "the HTTP service"

    def __init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _serve(self) -> ThreadingHTTPServer:
        """A server bound to ``("127.0.0.1", 0)``, not serving yet."""
        raise NotImplementedError

    def _stopped(self) -> None:
        """The server stopped and released its port."""

    def start(self) -> Self:
        """Bind a free port and serve; returns ``self``. Raises if already started."""
        if self._server is not None:
            raise RuntimeError(f"{self.name} is already started")
        self._server = self._serve()
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{type(self).__name__}-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"{self.name} is not started: call start()")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, with no trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        """Stop serving and release the port; later requests are refused. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._stopped()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
