"""Cancelling a running statement: PostgreSQL's CancelRequest, which arrives on another
connection (so another thread) while the statement runs.

The statement is cooperative: it looks at its session's :class:`Interrupt` at points
where stopping loses nothing, and raises 57014 there. It looks between the pages of a
scan (so a scan of a large table stops within one page), every :data:`CHECK_EVERY` rows
of a loop over rows that are no scan's (``generate_series``, aggregation, a join's
WHERE: :func:`chunked`), while it waits (``pg_sleep``),
while a batch of it waits for another transaction's lock or intent (in the store, here
or on another node: :mod:`feedkv.kv.cancellation`), and between statements and COPY
batches; a sinkless changefeed is closed at once by the server, and its rows, which
stream after the statement returned, end at its timeout (:meth:`Result.stop_at`).
What the statement wrote is then rolled back with its transaction (implicit), or its
transaction fails (explicit), as after any error.

NB: not an asynchronous exception: the statement runs the KV layer in its own thread
(and, embedded, the node's storage code), which must never stop half-way.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

from feedkv.errors import SQLError

__all__ = ["CHECK_EVERY", "STATEMENT_TIMEOUT", "Interrupt", "QueryCanceled", "chunked"]

T = TypeVar("T")

# The rows a loop runs between two looks at its statement's interrupt: a look costs a
# call, so once a row would cost a loop of cheap rows a measurable share; a chunk of
# this many cheap rows (a count(*)'s) takes about a millisecond
CHECK_EVERY = 4096

_CANCELED = "query execution canceled"
STATEMENT_TIMEOUT = "query execution canceled due to statement timeout"  # CockroachDB's


class QueryCanceled(SQLError):
    """SQLSTATE 57014: the statement was cancelled by the client's request, or ran
    past the session's ``statement_timeout``."""

    def __init__(self, message: str = _CANCELED) -> None:
        super().__init__("57014", message)


class Interrupt:
    """Whether the running statement was asked to stop. :meth:`cancel` may be called
    from any thread; the rest by the thread running the statement."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason = _CANCELED
        self._timer: threading.Timer | None = None
        self._statement = 0  # counts arm() calls: a timer fires for its own statement only

    def cancel(self, reason: str = _CANCELED) -> None:
        self._reason = reason
        self._event.set()

    def reset(self) -> None:
        """A new statement (or query) starts: an earlier request is spent."""
        if self._event.is_set():  # NB: clear() takes a lock; most queries were not cancelled
            self._event.clear()
            self._reason = _CANCELED

    def arm(self, seconds: float) -> None:
        """Cancel the statement that starts now once ``seconds`` have passed (the
        session's ``statement_timeout``), unless :meth:`disarm` comes first."""
        self.disarm()
        self._statement += 1
        timer = threading.Timer(seconds, self._expire, args=(self._statement,))
        timer.daemon = True
        timer.start()
        self._timer = timer

    def disarm(self) -> None:
        """The statement ended: its timeout, if armed, will not fire, and one that fired
        is spent (a client's cancel stays for whoever runs the statements to reset)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._statement += 1  # NB: a timer already firing now cancels nothing
        if self._event.is_set() and self._reason == STATEMENT_TIMEOUT:
            self._event.clear()
            self._reason = _CANCELED

    def _expire(self, statement: int) -> None:
        if statement == self._statement:
            self.cancel(STATEMENT_TIMEOUT)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise :class:`QueryCanceled` if the statement was cancelled."""
        if self._event.is_set():
            raise QueryCanceled(self._reason)

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, or raise :class:`QueryCanceled` as soon as the statement is
        cancelled."""
        if self._event.wait(max(seconds, 0.0)):
            raise QueryCanceled(self._reason)


def chunked(rows: Iterable[T], check: Callable[[], None]) -> Iterator[Sequence[T]]:
    """``rows`` in runs of :data:`CHECK_EVERY`, ``check`` (an :meth:`Interrupt.check`)
    called before each: a loop over the runs' rows looks at the interrupt once a run,
    not once a row. NB: a sequence's runs are its slices (a range's cost nothing)."""
    if isinstance(rows, Sequence):
        for at in range(0, len(rows), CHECK_EVERY):
            check()
            yield rows[at : at + CHECK_EVERY]
        return
    it = iter(rows)
    while chunk := list(itertools.islice(it, CHECK_EVERY)):
        check()
        yield chunk
