"""Headless Chromium driven over the Chrome DevTools Protocol, for tests of the admin
page: open a page, evaluate JavaScript in it, click with the mouse, take screenshots,
and collect what the page logged as errors.

The protocol runs over ``--remote-debugging-pipe`` (the transport Puppeteer and
Playwright use by default): the browser reads commands from its file descriptor 3 and
writes answers and events to 4, each message JSON ended by a NUL byte. It is the same
protocol as over ``--remote-debugging-port``'s websocket, without a websocket client
(feedkv has no dependency that speaks websockets) and without a port that another
process on the machine could reach.

A reader thread takes every message: an answer wakes the command waiting for it, an
event of the page is kept. :attr:`Chromium.errors` holds the page's console errors,
uncaught exceptions and failed loads (``Runtime.consoleAPICalled`` of type ``error``,
``Runtime.exceptionThrown``, ``Log.entryAdded`` of level ``error``).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from feedkv.errors import ExternalError, InvalidArgumentError

__all__ = ["Chromium", "ChromiumError", "chromium_binary"]

T = TypeVar("T")

COMMAND_TIMEOUT_S = 30.0


class ChromiumError(ExternalError):
    """The browser failed a command, answered none in time, or went away."""


def chromium_binary() -> str | None:
    """Debian's ``chromium`` (or ``chromium-browser``) on PATH, else ``None``."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    """A headless browser with one page (a new profile in ``profile_dir``).
    :meth:`close` ends it (a context manager does)."""

    def __init__(
        self, profile_dir: Path, *, binary: str | None = None, size: tuple[int, int] = (1280, 1200)
    ) -> None:
        found = binary or chromium_binary()
        if found is None:
            raise InvalidArgumentError("no chromium on PATH: install Debian's chromium package")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def child_fds() -> None:
            # NB: moved above 4 first, so that neither lands on the other's target
            read_end = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            write_end = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        args = [
            found,
            "--headless",
            "--remote-debugging-pipe",
            "--no-sandbox",  # NB: tests may run as root, which the sandbox refuses
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
            f"--user-data-dir={profile_dir}",
            f"--window-size={size[0]},{size[1]}",
            "about:blank",
        ]
        self._process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=child_fds,  # only dup2 calls, before exec
            start_new_session=True,  # its helpers (renderer, zygote) end with it: close()
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.errors: list[str] = []
        self._lock = threading.Condition()
        self._answers: dict[int, dict[str, Any]] = {}
        self._next_id = 0
        self._gone = False
        self._reader = threading.Thread(target=self._read, name="chromium-cdp", daemon=True)
        self._reader.start()
        self._session: str | None = None
        try:
            self._attach()
        except BaseException:
            self.close()
            raise

    # The page.

    def navigate(self, url: str) -> None:
        """Load ``url`` and wait until the document is complete; ChromiumError if it
        cannot be loaded at all (a refused connection, a bad URL)."""
        answer = self.send("Page.navigate", url=url)
        if answer.get("errorText"):
            raise ChromiumError(f"cannot load {url}: {answer['errorText']}")
        self.wait_for("document.readyState === 'complete'", what=f"{url} to load")

    def evaluate(self, expression: str) -> Any:
        """The value of JavaScript ``expression`` in the page (awaited if a promise);
        ChromiumError if it throws."""
        answer = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in answer:
            details = answer["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise ChromiumError(f"{expression!r} threw: {text}")
        return answer["result"].get("value")

    def wait_for(self, expression: str, *, timeout_s: float = 30.0, what: str = "") -> Any:
        """Evaluate ``expression`` until it is truthy and return it; TimeoutError
        (naming ``what``) after ``timeout_s``."""
        return self.poll(lambda: self.evaluate(expression), timeout_s=timeout_s, what=what)

    def poll(self, read: Callable[[], T], *, timeout_s: float = 30.0, what: str = "") -> T:
        deadline = time.monotonic() + timeout_s
        pause = threading.Event()
        while True:
            value = read()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout_s:g} s waiting for {what}")
            pause.wait(0.05)

    def click(self, selector: str) -> None:
        """Press and release the left mouse button on the middle of the element
        ``selector`` finds (as a person would: the page sees real mouse events)."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " if (!e) return null; e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        if box is None:
            raise ChromiumError(f"no element matches {selector!r}")
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: Path) -> Path:
        """Save a PNG of the whole page at ``path``."""
        answer = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(answer["data"]))
        return path

    # The protocol.

    def send(self, method: str, *, browser: bool = False, **params: Any) -> dict[str, Any]:
        """Run ``method`` on the page (``browser``: on the browser) and return its result."""
        with self._lock:
            self._next_id += 1
            message_id = self._next_id
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params}
        if not browser and self._session is not None:
            message["sessionId"] = self._session
        try:
            os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        except OSError as exc:
            raise ChromiumError(f"the browser is gone ({exc}); {method} was not sent") from exc
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        with self._lock:
            while message_id not in self._answers:
                left = deadline - time.monotonic()
                if self._gone or left <= 0:
                    why = "the browser exited" if self._gone else "no answer in time"
                    raise ChromiumError(f"{method}: {why}")
                self._lock.wait(left)
            answer = self._answers.pop(message_id)
        if "error" in answer:
            raise ChromiumError(f"{method} failed: {answer['error'].get('message')}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    def _attach(self) -> None:
        targets = self.send("Target.getTargets", browser=True)["targetInfos"]
        pages = [t for t in targets if t["type"] == "page"]
        if pages:
            target = pages[0]["targetId"]
        else:
            target = self.send("Target.createTarget", browser=True, url="about:blank")["targetId"]
        attached = self.send("Target.attachToTarget", browser=True, targetId=target, flatten=True)
        self._session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")

    def _read(self) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(self._from_browser, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._lock:
                    self._gone = True
                    self._lock.notify_all()
                return
            pending += chunk
            *messages, pending = pending.split(b"\0")
            for raw in messages:
                self._take(json.loads(raw))

    def _take(self, message: dict[str, Any]) -> None:
        if "id" in message:
            with self._lock:
                self._answers[message["id"]] = message
                self._lock.notify_all()
            return
        method, params = message.get("method"), message.get("params", {})
        error = None
        if method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            error = " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            error = details.get("exception", {}).get("description") or details.get("text")
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            entry = params["entry"]
            error = f"{entry.get('text')} ({entry.get('url', '')})"
        if error is not None:
            with self._lock:
                self.errors.append(error)

    def close(self) -> None:
        """End the browser and its helper processes (idempotent)."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait()
        # NB: the reader sees the end of its pipe once the browser is gone; its fd is
        # closed after it stopped reading, never under it
        self._reader.join(timeout=10)
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
