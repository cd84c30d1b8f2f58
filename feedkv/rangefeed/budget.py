"""A node's rangefeed memory budget: bytes of events queued for consumers, node-wide.

Every event a processor queues for a consumer takes its size from the budget; the
consumer gives it back when it takes the event. The processor runs on the commit thread
and must never block, so it only uses :meth:`Budget.try_acquire`; a registration that
cannot get memory is ended with ``SLOW_CONSUMER`` instead of events being dropped.
Threads that may wait (catch-up scans) use :meth:`Budget.acquire` with a timeout, or
:meth:`Budget.reserve` as a context manager. :meth:`Budget.close` wakes every waiter.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from feedkv.errors import InvalidArgumentError, NodeUnavailableError

__all__ = ["Budget"]


class Budget:
    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise InvalidArgumentError(f"a memory budget needs a positive limit, not {limit}")
        self.limit = limit
        self.used = 0
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._waiters = 0
        self._closed = False

    def try_acquire(self, n: int) -> bool:
        """Take ``n`` bytes if they are free now; never blocks."""
        with self._mutex:
            if self._closed or self.used + n > self.limit:
                return False
            self.used += n
            return True

    def acquire(self, n: int, timeout: float | None = None) -> bool:
        """Take ``n`` bytes, waiting up to ``timeout`` seconds for them; returns whether
        it got them. Raises :class:`NodeUnavailableError` if the budget closes."""
        n = min(n, self.limit)  # one huge event may use the whole budget, not more
        with self._cond:
            self._waiters += 1
            try:
                got = self._cond.wait_for(
                    lambda: self._closed or self.used + n <= self.limit, timeout=timeout
                )
            finally:
                self._waiters -= 1
            if self._closed:
                raise NodeUnavailableError("the rangefeed budget closed: the node is stopping")
            if not got:
                return False
            self.used += n
            return True

    def release(self, n: int) -> None:
        with self._mutex:
            self.used = max(0, self.used - n)
            if self._waiters:
                self._cond.notify_all()

    @contextmanager
    def reserve(self, n: int, timeout: float | None = None) -> Iterator[bool]:
        """``with budget.reserve(n) as got:`` holds ``n`` bytes for the block."""
        got = self.acquire(n, timeout)
        try:
            yield got
        finally:
            if got:
                self.release(min(n, self.limit))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
