"""What a changefeed job shows while it retries: the last retryable error, when it
happened, and how long until the next attempt.

A job that cannot deliver (a sink down, refusing, unreachable) keeps running and tries
again with a backoff. As in CockroachDB (cockroachdb/cockroach#61906, "record retryable
error in job status"), its ``running_status`` says so with the error and its time, so
that ``SHOW CHANGEFEED JOBS`` shows a failing sink, not a healthy-looking
``running: initial scan``; the status clears once the job makes progress again.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

__all__ = ["Retrying", "backoff"]


@dataclass(frozen=True, slots=True)
class Retrying:
    """``error`` happened at ``at_ns`` (wall nanoseconds); the next attempt starts
    ``delay_s`` seconds after it."""

    error: str
    at_ns: int
    delay_s: float

    def status(self) -> str:
        """The job's ``running_status`` while it retries."""
        when = datetime.datetime.fromtimestamp(self.at_ns / 1e9, tz=datetime.UTC)
        return (
            f"running: retryable error at {when:%Y-%m-%d %H:%M:%S} UTC "
            f"(retrying in {self.delay_s:g} s): {self.error}"
        )


def backoff(attempt: int, *, first_s: float, max_s: float) -> float:
    """The wait before retry ``attempt`` (1, 2, ...): ``first_s``, doubling, at most
    ``max_s``."""
    return float(min(max_s, first_s * 2 ** min(attempt - 1, 30)))
