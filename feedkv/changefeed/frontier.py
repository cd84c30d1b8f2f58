"""A changefeed's progress machine: how far the feed may go, when it ends, what it owes.

Both runners drive one :class:`Frontier`: the thread runner
(:class:`~feedkv.changefeed.changefeed.Changefeed`) feeds it the rangefeed's values and
checkpoints in timestamp order; the Spark job asks it for each micro-batch's window and,
as batches commit, whether a resolved marker is due. The machine is pure: it never
sleeps, reads a clock or does I/O. The time comes in as an argument (seconds of a
monotonic clock), and the schema changes of the targets through a narrow protocol
(:class:`SchemaChanges`, a :class:`~feedkv.changefeed.schema_history.SchemaHistory` in a
runner, a list in a test).

The rules, each written once here:

- **Windows.** The feed delivers the changes in ``(high water, hi]`` where ``hi`` is at
  most the targets' resolved timestamp, so every window is final and replayable.
- **end_time.** No window goes past ``end_time``; the window that reaches it is final.
  Rows after it are not emitted, nor are the backfills of changes after it.
- **Schema changes** in a window are planned by :func:`plan_schema_changes` (which
  changes count under ``schema_change_events``, what ``schema_change_policy`` does).
  A change that stops the feed (``stop``, a dropped table) ends it one tick before the
  change: that window is final, and the feed then fails with the change's error
  (unless ``end_time`` came first). Values at or after the change are not emitted;
  under ``nobackfill`` the rows a change rewrote are left out (:meth:`Frontier.rewritten`);
  under ``backfill`` a change that rewrote no rows is due a scan of its table as of it.
  A batch window ends at such a change, so in file-name order the scan follows every
  change before it and precedes every change after it.
- **Flushes** (thread runner): the sink is flushed, and the high-water mark moves, when
  the window is final, when a marker is due, or at least ``min_checkpoint_frequency``
  after the last flush. (The Spark job flushes every batch; its trigger interval is the
  cadence.)
- **Resolved markers** (``resolved``): at most every ``resolved`` seconds and never more
  often than ``min_checkpoint_frequency`` (as CockroachDB's docs state: a marker may come
  less often than the checkpoints, never more often), the first as soon as one may be
  written (or that interval after the time the driver counts from, ``marker_at``), and
  always at a final window. A marker follows the flush of
  every row it covers: the driver writes it only once the window is durable.

A driver carries out what a call returns before its next call. A driver that fails
(a sink error) starts a new machine from its high-water mark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.schema_history import SchemaChange
from feedkv.util.hlc import Timestamp

__all__ = [
    "Admission",
    "Advance",
    "Backfill",
    "Ended",
    "Frontier",
    "SchemaChanges",
    "SchemaPlan",
    "Window",
    "plan_schema_changes",
]

Backfill = tuple[int, SchemaChange]  # (table id, change): the table's rows as of the change


class SchemaChanges(Protocol):
    """A table's schema history (:class:`~feedkv.changefeed.schema_history.SchemaHistory`)."""

    def changes(self, lo: Timestamp, hi: Timestamp) -> list[SchemaChange]:
        """Every change in ``(lo, hi]``, oldest first."""
        ...


@dataclass(frozen=True)
class SchemaPlan:
    """What a feed does about the schema changes of its tables in a window."""

    stop: SchemaChange | None = None  # the feed ends one tick before this change
    skipped: frozenset[tuple[int, Timestamp]] = frozenset()  # (table, ts): rewrites left out
    backfills: tuple[Backfill, ...] = ()  # changes whose rows are scanned


def plan_schema_changes(
    options: ChangefeedOptions,
    histories: Mapping[int, SchemaChanges],
    lo: Timestamp,
    hi: Timestamp,
) -> SchemaPlan:
    """The plan for the changes in ``(lo, hi]``, oldest first, up to the first that
    stops the feed (see :mod:`feedkv.changefeed.changefeed` on which changes count and
    what each policy does). A change that rewrites rows needs no scan under
    ``backfill``: its rows come through the feed at its timestamp."""
    changes: list[tuple[Timestamp, int, SchemaChange]] = []
    for table_id, history in histories.items():
        changes.extend((c.ts, table_id, c) for c in history.changes(lo, hi))
    skipped: set[tuple[int, Timestamp]] = set()
    backfills: list[Backfill] = []
    for _ts, table_id, change in sorted(changes, key=lambda c: (c[0], c[1])):
        stop = change if change.ends_feed else None
        counts = (
            change.changes_columns
            if options.schema_change_events == "column_changes"
            else change.rewrites_rows
        )
        if stop is None and counts:
            if options.schema_change_policy == "stop":
                stop = change
            elif options.schema_change_policy == "nobackfill":
                if change.rewrites_rows:
                    skipped.add((table_id, change.ts))
            elif not change.rewrites_rows:
                backfills.append((table_id, change))
        if stop is not None:
            return SchemaPlan(stop, frozenset(skipped), tuple(backfills))
    return SchemaPlan(None, frozenset(skipped), tuple(backfills))


class Admission(NamedTuple):
    """What becomes of a value: the backfills due before it (emit them first), and
    whether it may be emitted (before ``end_time`` and before a change that stops)."""

    backfills: tuple[Backfill, ...]
    emit: bool


@dataclass(frozen=True, slots=True)
class Advance:
    """Flush the sink, then move the high-water mark to ``to``; then, if ``marker``,
    write a resolved marker at ``to``. If ``final`` the feed ends there: with the
    error of ``error`` (a schema change that stopped it) when there is one."""

    to: Timestamp
    marker: bool = False
    final: bool = False
    error: SchemaChange | None = None


@dataclass(frozen=True, slots=True)
class Window:
    """The next batch: the changes in ``(lo, hi]``; ``final``: the feed ends once it is
    durable."""

    lo: Timestamp  # exclusive
    hi: Timestamp  # inclusive
    final: bool = False


@dataclass(frozen=True, slots=True)
class Ended:
    """The feed delivered its final window: no batch follows. It fails with the error of
    ``error`` when a schema change stopped it (``None``: it reached ``end_time``)."""

    error: SchemaChange | None = None


def _due(last: float | None, interval: float, now: float) -> bool:
    return last is None or now - last >= interval


class Frontier:
    """The progress of one changefeed from ``high_water`` (exclusive: everything at or
    below it is durable). ``histories`` maps each target table's id to its schema
    history. ``marker_at`` and ``flushed_at``: when the driver last wrote a marker and
    flushed (``None``: never; the first marker is due at once).

    Not thread-safe: one driver thread calls it."""

    def __init__(
        self,
        options: ChangefeedOptions,
        histories: Mapping[int, SchemaChanges],
        high_water: Timestamp,
        *,
        marker_at: float | None = None,
        flushed_at: float | None = None,
    ) -> None:
        self.options = options
        self.high_water = high_water
        self._histories = histories
        self._marker_at = marker_at
        self._flushed_at = flushed_at
        self._checked = high_water  # schema changes are known through here
        self._stop: SchemaChange | None = None
        self._skipped: set[tuple[int, Timestamp]] = set()
        self._reached: Timestamp | None = None  # a checkpoint not yet advanced to

    # A stream: values and checkpoints in timestamp order (the thread runner).

    def admit(self, ts: Timestamp) -> Admission:
        """A value at ``ts`` arrives."""
        end = self.options.end_time
        if end is not None and ts > end:
            return Admission((), False)
        backfills = self._learn(ts)
        return Admission(backfills, self._stop is None or ts < self._stop.ts)

    def emits(self, ts: Timestamp) -> bool:
        """Whether a value at ``ts`` already admitted once (read again for a table that
        was set aside) may be emitted: before ``end_time`` and before a change that
        stops. Learns nothing."""
        end = self.options.end_time
        if end is not None and ts > end:
            return False
        return self._stop is None or ts < self._stop.ts

    def rewritten(self, table_id: int, ts: Timestamp) -> bool:
        """Whether the row change of ``table_id`` at ``ts`` is a rewrite that
        ``nobackfill`` leaves out."""
        return (table_id, ts) in self._skipped

    def reach(self, ts: Timestamp) -> tuple[Backfill, ...]:
        """A checkpoint: every value at or below ``ts`` has arrived. Returns the
        backfills due before the feed may pass it; emit them, then call :meth:`advance`."""
        if ts <= self.high_water:
            self._reached = None
            return ()
        self._reached = ts
        end = self.options.end_time
        return self._learn(ts if end is None else min(ts, end))

    def advance(self, now: float) -> Advance | None:
        """Whether the last checkpoint :meth:`reach` saw moves the high-water mark at
        ``now`` (``None``: hold it until a later checkpoint)."""
        ts, self._reached = self._reached, None
        if ts is None:
            return None
        hi, final = self._bound(ts, self._stop)
        marker = self._marker_due(now, final)
        flush_due = _due(self._flushed_at, self.options.min_checkpoint_frequency, now)
        if not (final or marker or flush_due):
            return None
        self._flushed_at = now
        if marker:
            self._marker_at = now
        self.high_water = hi
        return Advance(hi, marker, final, self._error(self._stop) if final else None)

    # Batches (the Spark job).

    def next_window(self, resolved: Timestamp) -> Window | Ended | None:
        """The batch after the high-water mark when the targets are resolved up to
        ``resolved`` (``None``: nothing new to read yet)."""
        lo = self.high_water
        end = self.options.end_time
        if end is not None and lo >= end:
            return Ended()
        hi = max(resolved, lo) if end is None else min(max(resolved, lo), end)
        if hi == lo:
            return None
        plan = plan_schema_changes(self.options, self._histories, lo, hi)
        if plan.stop is not None and lo >= plan.stop.ts.prev():
            return Ended(self._error(plan.stop))
        hi, final = self._bound(hi, plan.stop)
        first_backfill = min((change.ts for _table_id, change in plan.backfills), default=hi)
        if first_backfill < hi:
            hi, final = first_backfill, False
        return Window(lo, hi, final)

    def committed(self, hi: Timestamp, now: float) -> bool:
        """A batch up to ``hi`` is durable at ``now``: whether its resolved marker is
        due (the caller writes it). Reads the schema history only to learn whether a
        marker the cadence holds back is the final one."""
        interval = self._marker_interval()
        if interval is None:
            return False
        self.high_water = max(self.high_water, hi)
        end = self.options.end_time
        final = end is not None and hi >= end
        if not final and not _due(self._marker_at, interval, now):
            final = self._stops_after(hi)
        if not self._marker_due(now, final):
            return False
        self._marker_at = now
        return True

    # The rules.

    def _learn(self, upto: Timestamp) -> tuple[Backfill, ...]:
        """Plans the schema changes through ``upto`` (none past a change that stops)."""
        if upto <= self._checked or self._stop is not None:
            return ()
        plan = plan_schema_changes(self.options, self._histories, self._checked, upto)
        self._checked = upto
        self._stop = plan.stop
        self._skipped |= plan.skipped
        return plan.backfills

    def _bound(self, hi: Timestamp, stop: SchemaChange | None) -> tuple[Timestamp, bool]:
        """``hi`` held one tick before ``stop`` and at ``end_time``; whether it is final."""
        final = False
        if stop is not None and hi >= stop.ts.prev():
            hi, final = stop.ts.prev(), True
        end = self.options.end_time
        if end is not None and hi >= end:
            hi, final = end, True
        return hi, final

    def _error(self, stop: SchemaChange | None) -> SchemaChange | None:
        """The change the feed fails with once its final window is durable."""
        end = self.options.end_time
        if stop is not None and (end is None or stop.ts <= end):
            return stop
        return None

    def _stops_after(self, hi: Timestamp) -> bool:
        """Whether a change that stops the feed comes one tick after ``hi``."""
        return plan_schema_changes(self.options, self._histories, hi, hi.next()).stop is not None

    def _marker_due(self, now: float, final: bool) -> bool:
        interval = self._marker_interval()
        return interval is not None and (final or _due(self._marker_at, interval, now))

    def _marker_interval(self) -> float | None:
        """The least time between two markers (``None``: no markers)."""
        resolved = self.options.resolved
        if resolved is None:
            return None
        return max(resolved, self.options.min_checkpoint_frequency)
