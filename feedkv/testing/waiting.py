"""Waiting for an event in tests, with a deadline and no fixed sleeps."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_until"]

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T], *, timeout_s: float = 10.0, poll_s: float = 0.01, what: str = ""
) -> T:
    """Call ``predicate`` until it returns something truthy and return that; raise
    ``TimeoutError`` (naming ``what``) if ``timeout_s`` passes first."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g} s waiting for {what or predicate}")
        pause.wait(poll_s)
