"""Idle threads that take a call now or not at all: what lets a transaction write its
intents to several ranges at once without a thread of its own for each.

:meth:`Helpers.try_start` hands ``fn`` to an idle helper, or returns ``None`` when none
is idle (and fewer than ``max_threads`` exist, it starts one for next time). The caller
then runs ``fn`` itself. So a call never queues behind others: a helper blocked on a
conflicting intent can delay only its own caller, which is waiting for it anyway, and a
busy process degrades to running the calls one after another on the callers' own
threads (what they did before), never to a deadlock of calls waiting for each other's
turns. A helper runs ``fn`` in a copy of its caller's context (its context variables: a
statement's give-up check, :data:`feedkv.kv.cancellation.GIVE_UP`), as the caller
running it itself would.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["Handed", "Helpers"]

T = TypeVar("T")


class Handed(Generic[T]):
    """A call a helper runs, in the context of the thread that made it: :meth:`result`
    waits for it and returns or raises what it did."""

    __slots__ = ("_context", "_done", "_error", "_fn", "_value")

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._context = contextvars.copy_context()
        self._done = threading.Lock()
        self._done.acquire()
        self._value: T | None = None
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            self._value = self._context.run(self._fn)
        except BaseException as exc:
            self._error = exc
        finally:
            self._done.release()

    def result(self) -> T:
        with self._done:
            pass
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


class Helpers:
    """Up to ``max_threads`` daemon threads, started as they are first wanted. Thread-safe."""

    def __init__(self, max_threads: int, name: str) -> None:
        self._max = max_threads
        self._name = name
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0
        self._work: queue.SimpleQueue[Handed[Any]] = queue.SimpleQueue()

    @property
    def idle(self) -> int:
        """How many helpers wait for a call now."""
        return self._idle

    def try_start(self, fn: Callable[[], T]) -> Handed[T] | None:
        """``fn`` running on an idle helper, or ``None``: run it yourself."""
        with self._lock:
            if self._idle == 0:
                if self._threads < self._max:
                    self._threads += 1
                    threading.Thread(
                        target=self._serve, name=f"{self._name}-{self._threads}", daemon=True
                    ).start()
                return None
            self._idle -= 1
        handed = Handed(fn)
        self._work.put(handed)
        return handed

    def _serve(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            self._work.get()._run()
