"""Waiting for an event in tests, with a deadline and no fixed sleeps."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["in_thread", "release_when", "run_threads", "wait_until"]

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


def run_threads(targets: list[Callable[[], None]], *, deadline_s: float = 60.0) -> None:
    """Run each target in its own thread, wait for all of them within ``deadline_s``,
    and re-raise the first error a target raised."""
    errors: list[BaseException] = []
    lock = threading.Lock()

    def wrap(target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as exc:
                with lock:
                    errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    end = time.monotonic() + deadline_s
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    stuck = [t.name for t in threads if t.is_alive()]
    if stuck:
        raise TimeoutError(f"threads still running after {deadline_s:g} s: {stuck}")
    if errors:
        raise errors[0]


def release_when(
    blocked: Callable[[], None],
    *,
    until: Callable[[], object],
    then: Callable[[], None],
    what: str,
    deadline_s: float = 60.0,
) -> None:
    """Run ``blocked`` (which should wait, as for a lock) and, once ``until()`` is truthy,
    ``then`` (which should let it go on), each in a thread of its own; wait for both
    within ``deadline_s`` and re-raise the first error either raised."""

    def release() -> None:
        wait_until(until, timeout_s=deadline_s, what=what)
        then()

    run_threads([blocked, release], deadline_s=deadline_s)


def in_thread(call: Callable[[], object], failures: list[BaseException]) -> threading.Thread:
    """``call`` in a daemon thread of its own, started; what it raises goes into
    ``failures`` (a call the test expects to block until it stops it: a query it
    cancels, a session it ends)."""

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # NB: the test looks at it
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread
