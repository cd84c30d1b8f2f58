"""Failed logins are rate-limited: after ``max_failures`` failed attempts for one user
from one host, further attempts are refused without checking the password until
``window_s`` has passed since the last failure, so a password cannot be guessed at the
rate a client can connect.

A pure object: the caller gives the time (``now``, seconds, monotonic) and its own lock
discipline is internal, so one throttle serves every connection of a port.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["LoginThrottle"]


@dataclass
class _Failures:
    count: int
    last: float


class LoginThrottle:
    def __init__(
        self, *, max_failures: int = 5, window_s: float = 30.0, max_keys: int = 10_000
    ) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self._max_keys = max_keys
        self._lock = threading.Lock()
        self._failures: dict[tuple[str, str], _Failures] = {}

    def retry_after(self, user: str, host: str, now: float) -> float:
        """Seconds until ``user`` may try again from ``host`` (0: now)."""
        with self._lock:
            found = self._failures.get((user, host))
            if found is None or found.count < self.max_failures:
                return 0.0
            left = found.last + self.window_s - now
            if left <= 0:
                del self._failures[(user, host)]
                return 0.0
            return left

    def failed(self, user: str, host: str, now: float) -> None:
        with self._lock:
            if len(self._failures) >= self._max_keys:
                self._forget_expired(now)
            found = self._failures.setdefault((user, host), _Failures(0, now))
            if now - found.last > self.window_s:
                found.count = 0
            found.count += 1
            found.last = now

    def succeeded(self, user: str, host: str) -> None:
        with self._lock:
            self._failures.pop((user, host), None)

    def _forget_expired(self, now: float) -> None:
        expired = [k for k, f in self._failures.items() if now - f.last > self.window_s]
        for key in expired:
            del self._failures[key]
        if len(self._failures) >= self._max_keys:  # still full: forget the oldest
            oldest = min(self._failures, key=lambda k: self._failures[k].last)
            del self._failures[oldest]
