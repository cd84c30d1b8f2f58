"""A caller giving up on a batch that waits for another transaction: a SQL statement
cancelled by its client (PostgreSQL's CancelRequest) or run past its
``statement_timeout`` while it waits for a lock or an intent's writer.

The caller's give-up check travels with the batch: :data:`GIVE_UP` holds a function
that raises once the caller gave up (a session's :meth:`Interrupt.check
<feedkv.sql.interrupt.Interrupt.check>`). A store's waits call it each time they wake
(every ``push_poll_s``), so a waiting batch ends within one poll, having applied
nothing. Embedded, the store runs on the caller's thread and sees the caller's check.
Over gRPC, the client sends a token with the batch and, while it waits for the answer,
its transport's :class:`GiveUpWatch` calls ``CancelCall(token)`` once the check raises
(so the check must be callable from any thread); the node's :class:`CallCancels` then
gives the batch a check that raises :class:`~feedkv.errors.RequestCanceledError`, and
the node still answers (so a batch is never left ambiguous by a cancel: it applied or
it did not, and the node says which).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import TypeVar

from feedkv.errors import RequestCanceledError

__all__ = ["GIVE_UP", "CallCancels", "GiveUpWatch", "check_given_up"]

R = TypeVar("R")

# Raises if the caller of the batches sent from this context gave up on them.
GIVE_UP: ContextVar[Callable[[], None] | None] = ContextVar("feedkv_give_up", default=None)


def check_given_up() -> None:
    """Raise the caller's error if the caller of the running batch gave up on it."""
    check = GIVE_UP.get()
    if check is not None:
        check()


class CallCancels:
    """A node's calls that their clients may give up on, by token. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._given_up: dict[bytes, bool] = {}

    def run(self, token: bytes, fn: Callable[[], R]) -> R:
        """``fn()``, with a give-up check that raises once :meth:`cancel` (``token``)."""
        with self._lock:
            self._given_up[token] = False
        given_up = self._given_up

        def check() -> None:
            if given_up.get(token):
                raise RequestCanceledError(
                    "the client gave up on the batch while it waited for another "
                    "transaction; nothing was applied"
                )

        context = GIVE_UP.set(check)
        try:
            return fn()
        finally:
            GIVE_UP.reset(context)
            with self._lock:
                self._given_up.pop(token, None)

    def cancel(self, token: bytes) -> bool:
        """The client gave up on the call of ``token``; whether that call is running."""
        with self._lock:
            if token not in self._given_up:
                return False
            self._given_up[token] = True
            return True


class GiveUpWatch:
    """A client's calls in flight whose callers may give up: one thread asks each
    caller's check every ``interval_s`` while any call is watched, and calls
    ``cancel(token)`` for each whose check raised (again at every interval until the
    call ends: a cancel may reach the node before the call does). The callers block on
    their calls undisturbed, so watching costs a call two dict operations, not a thread
    hop. ``cancel`` must not block. Thread-safe."""

    def __init__(self, cancel: Callable[[bytes], None], interval_s: float) -> None:
        self._cancel = cancel
        self._interval_s = interval_s
        self._cond = threading.Condition()
        self._calls: dict[bytes, Callable[[], None]] = {}
        self._thread: threading.Thread | None = None
        self._idle = False  # the thread waits for a call to watch
        self._closed = False

    def watch(self, token: bytes, give_up: Callable[[], None]) -> None:
        """Watch the call of ``token`` until :meth:`unwatch`; ``give_up()`` raises once its
        caller gave up."""
        with self._cond:
            self._calls[token] = give_up
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="feedkv-give-up-watch", daemon=True
                )
                self._thread.start()
            elif self._idle:
                self._cond.notify()

    def unwatch(self, token: bytes) -> None:
        """The call of ``token`` ended. Idempotent."""
        with self._cond:
            self._calls.pop(token, None)

    def close(self) -> None:
        """Stop the thread. Idempotent."""
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._calls and not self._closed:
                    self._idle = True
                    self._cond.wait()
                self._idle = False
                if self._closed:
                    return
                self._cond.wait(self._interval_s)  # NB: a call is asked after an interval
                calls = list(self._calls.items())
            for token, give_up in calls:
                try:
                    give_up()
                except Exception:  # NB: whatever it raises, it gave up (and the thread lives)
                    self._cancel(token)
