"""Per-table failure isolation: one table of a changefeed failing does not stop the others.

The CDC design states it: a table whose rows cannot be encoded (a schema registry that
refuses the schema of a change it cannot follow) or whose topic the sink refuses (a
Kafka topic it may not write) is retried and reported on its own while the other tables
go on. :class:`TableFailures` is the pure state of that, driven by
:class:`~feedkv.changefeed.changefeed.Changefeed`:

- :meth:`TableFailures.fail` sets a table aside from ``since``, the feed's last flushed
  high-water mark: every row of it at or below ``since`` is durable, the ones after it
  are owed (a row sent but not yet flushed when the table failed may come again:
  at-least-once, as any restart). The table's rows are skipped until it recovers.
- The feed's high-water mark (what a restart resumes from) stays at most the oldest
  ``since`` (:meth:`TableFailures.hold`), so a restart owes nothing; the other tables'
  rows go on being emitted and flushed, and their topics get resolved markers.
- When a table's retry is due (:meth:`TableFailures.due`, backing off from
  ``first_s`` doubling to ``max_s``, as the feed's own restarts do) the driver reads the
  table's changes in ``(since, reached]`` again and, if they go through, :meth:`recovered`
  puts it back; if they fail again it is set aside again with a longer wait.
- :meth:`TableFailures.status` is what ``SHOW CHANGEFEED JOBS`` says meanwhile: which
  table, what failed, and when the next try is.

It never sleeps, reads a clock or does I/O: the time (seconds of a monotonic clock and
the wall time in nanoseconds) comes in as arguments.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from feedkv.changefeed.retrying import backoff
from feedkv.util.hlc import Timestamp

__all__ = ["TableFailure", "TableFailures"]


@dataclass(slots=True)
class TableFailure:
    """Table ``table_id`` (``name``, as ``SHOW CHANGEFEED JOBS`` names it) failed with
    ``error`` at ``at_ns`` (wall); its rows after ``since`` (exclusive) are owed. Its
    ``attempt``-th retry is due at ``retry_at`` (monotonic seconds)."""

    table_id: int
    name: str
    error: str
    since: Timestamp
    at_ns: int
    attempt: int
    retry_at: float
    # (timestamp) of schema-change backfills due while the table was set aside
    backfills: list[Timestamp] = field(default_factory=list)


class TableFailures:
    """The tables of one changefeed that are set aside, see the module docstring."""

    def __init__(self, *, first_s: float, max_s: float) -> None:
        self._first_s = first_s
        self._max_s = max_s
        self._failed: dict[int, TableFailure] = {}

    def __bool__(self) -> bool:
        return bool(self._failed)

    def __contains__(self, table_id: object) -> bool:
        return table_id in self._failed

    def get(self, table_id: int) -> TableFailure | None:
        return self._failed.get(table_id)

    def fail(
        self, table_id: int, name: str, error: str, since: Timestamp, now: float, at_ns: int
    ) -> TableFailure:
        """Set ``table_id`` aside (again) with ``error``; its rows after ``since`` are
        owed. A table already set aside keeps the oldest ``since`` and its deferred
        backfills, and waits longer before its next try."""
        failure = self._failed.get(table_id)
        attempt = failure.attempt + 1 if failure is not None else 1
        delay = backoff(attempt, first_s=self._first_s, max_s=self._max_s)
        if failure is None:
            failure = TableFailure(table_id, name, error, since, at_ns, attempt, now + delay)
            self._failed[table_id] = failure
        else:
            failure.error, failure.at_ns, failure.attempt = error, at_ns, attempt
            failure.retry_at = now + delay
            failure.since = min(failure.since, since)
        return failure

    def defer_backfill(self, table_id: int, ts: Timestamp) -> None:
        """A schema change of a table set aside is due a scan as of ``ts``: its retry
        runs it, in timestamp order with the table's changes."""
        failure = self._failed[table_id]
        if ts > failure.since and ts not in failure.backfills:
            failure.backfills.append(ts)
            failure.backfills.sort()

    def due(self, now: float) -> list[TableFailure]:
        """The tables whose retry is due, oldest failure first."""
        ready = [f for f in self._failed.values() if f.retry_at <= now]
        return sorted(ready, key=lambda f: (f.since, f.table_id))

    def recovered(self, table_id: int) -> None:
        self._failed.pop(table_id, None)

    def clear(self) -> None:
        """Forget every failure (the whole feed restarts from :meth:`hold`)."""
        self._failed.clear()

    def hold(self) -> Timestamp | None:
        """The oldest ``since`` of a table set aside (``None``: none is): the feed's
        high-water mark may not pass it."""
        return min((f.since for f in self._failed.values()), default=None)

    def status(self, now: float) -> str | None:
        """The job's ``running_status`` while tables are set aside (``None``: none is):
        each table, its error and when it is tried again."""
        if not self._failed:
            return None
        parts = []
        for f in sorted(self._failed.values(), key=lambda f: f.name):
            when = datetime.datetime.fromtimestamp(f.at_ns / 1e9, tz=datetime.UTC)
            wait = max(0.0, f.retry_at - now)
            parts.append(
                f"table {f.name} failing since {when:%Y-%m-%d %H:%M:%S} UTC "
                f"(attempt {f.attempt}, retrying in {wait:.1f} s): {f.error}"
            )
        return "running: " + "; ".join(parts) + "; the other tables go on"
