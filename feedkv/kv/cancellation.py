"""A caller giving up on a batch that waits for another transaction: a SQL statement
cancelled by its client (PostgreSQL's CancelRequest) or run past its
``statement_timeout`` while it waits for a lock or an intent's writer.

The caller's give-up check travels with the batch: :data:`GIVE_UP` holds a function
that raises once the caller gave up (a session's :meth:`Interrupt.check
<feedkv.sql.interrupt.Interrupt.check>`). A store's waits call it each time they wake
(every ``push_poll_s``), so a waiting batch ends within one poll, having applied
nothing. Embedded, the store runs on the caller's thread and sees the caller's check.
Over gRPC, the client sends a token with the batch and, while it waits for the answer,
calls ``CancelCall(token)`` once its check raises; the node's :class:`CallCancels` then
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

__all__ = ["GIVE_UP", "CallCancels", "check_given_up"]

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
