"""A range's rangefeed processor: turns the range's logical ops into events for its
registrations, and its closed timestamps and intents into checkpoints.

The store calls a processor as a :class:`~feedkv.kv.observer.RangeObserver`: on the
commit thread, under the apply lock, in apply order. Every other method is called under
the same lock by :class:`~feedkv.rangefeed.store_feeds.StoreFeeds`, which owns the
threads (catch-up scans, the txn pusher). So a processor never blocks.

**One log, many readers.** The processor does not copy each value to each registration:
it appends every ``WriteValue`` and ``CommitIntent`` (and each value of an
``IngestValues`` or ``CommitIntents``) some registration covers to one
:class:`~feedkv.rangefeed.event_log.EventLog`, once, and each registration reads the log
from its own cursor when its consumer takes events (see :meth:`Registration.read`).
Fanning a write out to a hundred feeds therefore costs the commit thread one append and
a glance at each consumer (those asleep are woken once per commit group, paced, by a
:class:`Waker`), and the consumers do the rest on their own threads, in batches. This is
how etcd's watchers share one event history.

- A value is logged without ``prev_value``, and also with it while a registration wants
  diffs; intents themselves are never logged, so aborted and intermediate writes never
  reach a registration.
- A store's processors take a commit group's ops together (``group``: the list of the
  processors given ops in the group, which the store's feeds have take them once the
  group is applied, before its consumers are woken). Each command's ops wait in the
  processor until then, and any other call takes them first, so a closed timestamp
  never passes a value held. A group of plain writes is logged with no Python code per
  value (:meth:`Processor._take_writes`); readers see it when its consumers are woken,
  as before.
- Every op feeds the :class:`ResolvedTimestamp`; when it moves, a *mark* (log position,
  resolved timestamp) is appended: a reader that has read the log up to the mark sends a
  :class:`Checkpoint` of its own span.
- Memory: each logged value is charged to the node's budget once and released when every
  registration has read past it (:meth:`Processor._trim`, every few hundred values while
  the readers keep up, so that a value read at once dies young: the cyclic collector
  tracks each :class:`Value` as long as it lives, and one kept for a second is promoted
  into the oldest generation, whose growth sets off full collections of the heap). A
  registration more than its stream's ``per_registration`` values behind, or holding the
  log when the budget is spent, is ended with ``SLOW_CONSUMER``: never silently skipped.
- When the range splits, merges or the node stops, every registration gets an
  :class:`Error` with the reason after the values logged before it, and the processor is
  finished.

An invariant violation (an intent below the resolved timestamp) ends every registration
with ``INVARIANT_VIOLATION`` and is logged as an error; the write that revealed it is
already durable and is not failed.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain, repeat
from operator import itemgetter
from typing import cast

from feedkv.errors import InvariantViolation
from feedkv.kv.observer import RangeEndReason
from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.event import ErrorReason, new_value
from feedkv.rangefeed.event_log import EventLog, LoggedValues, LogSlice
from feedkv.rangefeed.registration import Registration, value_size
from feedkv.rangefeed.registry import Registry
from feedkv.rangefeed.resolved_timestamp import ResolvedTimestamp, UnresolvedTxn
from feedkv.rangefeed.stream import EventStream
from feedkv.rangefeed.waker import Waker
from feedkv.storage.logical_ops import (
    AbortTxn,
    CommitIntent,
    CommitIntents,
    IngestValues,
    LogicalOp,
    WriteValue,
)
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

_VALUE_OPS = (WriteValue, CommitIntent)  # the ops that log a value (a tuple: no union per op)
_WRITES = {WriteValue}
_OP_KEY, _OP_TS, _OP_VALUE = itemgetter(0), itemgetter(1), itemgetter(2)  # a WriteValue's

__all__ = ["Processor"]

log = logging.getLogger(__name__)

_MAX_MARKS = 64  # marks kept before a trim drops the ones every reader has passed
# values logged between trims while the readers keep up: a value read by every reader is
# let go within this many appends, not when the log is ``per_registration`` long (about a
# second at full speed), so it seldom outlives the collector's young generations
_TRIM_EVERY = 256
_ZERO = Timestamp(0, 0)


class Processor:
    def __init__(
        self,
        range_id: int,
        span: Span,
        budget: Budget | None = None,
        waker: Waker | None = None,  # None: wake consumers at once
        group: list[Processor] | None = None,  # None: take each command's ops at once
    ) -> None:
        self.range_id = range_id
        self.span = span
        self.registry: Registry[Registration] = Registry()
        self.rts = ResolvedTimestamp()
        self.ended: ErrorReason | None = None
        self.budget = budget or Budget(1 << 62)
        self.log = EventLog(0, [], [], [], [], [], [])
        self.end_pos = 0  # the position after the newest logged value
        self.max_ts = _ZERO  # no logged value is above it
        # the lowest and highest key ever logged: none yet (an empty interval, high < low).
        # NB: not narrowed when a trim lets values go: that costs a pass over the values
        # kept, at every trim, and trims come every few values while a reader lags near
        # its bound
        self.key_bounds = (span.end, span.start)
        self.resolved = _ZERO  # the newest mark's timestamp
        self._waker = waker
        self._group = group
        self._pending: list[Sequence[LogicalOp]] = []  # the group's commands' ops, held
        self._deferred = -1  # the Waker's token while this processor's streams are pending
        self._streams: dict[EventStream, int] = {}  # registrations per consumer
        self._value_regs = 0  # registrations that read values (not only checkpoints)
        self._whole_regs = 0  # value registrations of the whole range: every key is read
        self._diff_regs = 0
        self._held = 0  # budget bytes of the logged values
        self._low = 0  # the lowest cursor at the last trim
        self._trim_due = _TRIM_EVERY  # the log's end at which a trim is due anyway
        self._limits: Counter[int] = Counter()  # the value readers' per_registration
        self._limit = 0  # the lowest of them: a trim is due when the log holds more
        # the last read: (its log, (start, stop, with_diff), its values)
        self._slice: tuple[EventLog, tuple[int, int, bool], LogSlice] | None = None

    # Set-up (under the apply lock).

    def init(self, intents: Iterable[tuple[bytes, bytes, Timestamp]], closed: Timestamp) -> None:
        """Start resolving: the range's intents from a snapshot taken under the apply
        lock, and its closed timestamp at that moment."""
        self.rts.forward_closed(closed)
        self.rts.init(intents)
        self.resolved = self.rts.resolved

    def register(self, reg: Registration) -> None:
        """Add ``reg``, reading the log from now on (its catch-up covers what is older)."""
        self.take_group()
        reg.attach(self, self.end_pos)
        self.registry.add(reg)
        self._streams[reg.stream] = self._streams.get(reg.stream, 0) + 1
        self._deferred = -1  # a new stream: defer the streams again
        if reg.values:
            self._value_regs += 1
            self._whole_regs += reg.whole
            self._diff_regs += reg.with_diff
            self._limits[reg.stream.per_registration] += 1
            self._limit = min(self._limits)

    def unregister(self, reg: Registration) -> None:
        self.take_group()
        if reg not in self.registry:
            return
        self.registry.remove(reg)
        left = self._streams.pop(reg.stream) - 1
        if left:
            self._streams[reg.stream] = left
        if reg.values:
            self._value_regs -= 1
            self._whole_regs -= reg.whole
            self._diff_regs -= reg.with_diff
            self._limits[reg.stream.per_registration] -= 1
            if not self._limits[reg.stream.per_registration]:
                del self._limits[reg.stream.per_registration]
            self._limit = min(self._limits, default=0)
            if not self._value_regs and self.ended is None:
                self._trim()  # nobody reads the log: give its memory back

    def skip_log(self, reg: Registration) -> None:
        """``reg``'s catch-up snapshot is taken now: it holds every value logged so far."""
        self.take_group()
        reg.cursor = self.end_pos

    def finish_catch_up(self, reg: Registration) -> None:
        """``reg``'s history is sent: it reads the values logged since its snapshot,
        then a first checkpoint at the current resolved timestamp."""
        self.take_group()
        if reg.done:
            self.unregister(reg)
            return
        self._mark(force=True)
        reg.go_live()

    # Readers (consumer threads, under their stream's lock).

    def read_slice(self, entries: EventLog, start: int, stop: int, with_diff: bool) -> LogSlice:
        """The values of ``entries`` from position ``start`` to ``stop``, with their
        previous values if ``with_diff``. Readers of the same slice get the same
        :class:`LogSlice` (and so the same list of values), so a stream that carries many
        of them can send it once (the service of remote feeds does).

        NB: readers on other streams' threads race each other and the commit thread here,
        without a lock: the cache is one tuple swapped whole, positions below ``stop``
        never change, and a trim replaces the log rather than editing it."""
        last, where = self._slice, (start, stop, with_diff)
        if last is not None and last[0] is entries and last[1] == where:
            return last[2]
        source = entries.diffs if with_diff else entries.values
        low, high = start - entries.base, stop - entries.base
        values = LoggedValues(
            source[low:high],  # type: ignore[arg-type]  # no None past a diff reader's start
            entries.keys[low:high],
            entries.stamps[low:high],
        )
        piece = LogSlice(values)
        if entries is self.log:  # NB: a reader of a log trimmed meanwhile must not pin it
            self._slice = (entries, where, piece)
        return piece

    # RangeObserver (the commit thread, under the apply lock).

    def on_ops(self, ops: Sequence[LogicalOp]) -> None:
        if self.ended is not None:
            return
        if self._group is None:
            self._take(ops)
            return
        if not self._pending:
            self._group.append(self)
        self._pending.append(ops)

    def take_group(self) -> None:
        """Take the ops the commit group gave so far (the owner calls this once the
        group is applied; every other call here does it first): all at once if they are
        plain writes, else command by command, as each came."""
        if not self._pending:
            return
        commands, self._pending = self._pending, []
        ops = commands[0] if len(commands) == 1 else list(chain.from_iterable(commands))
        if len(ops) > 1 and self._take_writes(ops):
            return
        for command in commands:
            if self.ended is not None:
                return
            self._take(command)

    def _take(self, ops: Sequence[LogicalOp]) -> None:
        rts = self.rts
        logged = moved = False
        try:
            for op in ops:
                if type(op) is IngestValues or type(op) is CommitIntents:
                    if self._value_regs and (
                        self._whole_regs
                        or any(r.values for r in self.registry.overlapping(op.span))
                    ):
                        logged = self._append_each(op) or logged
                elif (
                    self._value_regs
                    and isinstance(op, _VALUE_OPS)
                    and (self._whole_regs or self.registry.covering(op.key))
                ):
                    logged = self._append(op) or logged
                if rts.consume(op):
                    moved = True
        except InvariantViolation as exc:
            self._violated(exc)
            return
        if moved:
            self._mark()
        if logged or moved:
            self._news()

    def on_closed(self, closed_ts: Timestamp) -> None:
        self.take_group()
        if self.ended is not None:
            return
        try:
            moved = self.rts.forward_closed(closed_ts)
        except InvariantViolation as exc:
            self._violated(exc)
            return
        if moved:
            self._mark()
            self._news()

    def on_range_ended(self, reason: RangeEndReason) -> None:
        self.end(ErrorReason(reason.value), f"r{self.range_id} ended: {reason.value}")

    # The pusher's view (under the apply lock).

    def txns_to_push(self, older_than: Timestamp) -> list[UnresolvedTxn]:
        """Unresolved transactions below ``older_than``, oldest first."""
        self.take_group()
        return self.rts.intents.older_than(older_than) if self.ended is None else []

    def forward_txn(self, txn_id: bytes, ts: Timestamp) -> None:
        """A push moved the transaction's earliest commit to ``ts``."""
        self.take_group()
        if self.ended is None and self.rts.forward_txn(txn_id, ts):
            self._mark()
            self._wake()  # NB: at once: on the pusher's thread, no commit group flushes

    def forget_txn(self, txn_id: bytes) -> None:
        """The transaction is aborted: none of its intents can commit."""
        self.take_group()
        if self.ended is None and self.rts.consume(AbortTxn(txn_id)):
            self._mark()
            self._wake()  # NB: at once, as forward_txn

    # Ending.

    def end(self, reason: ErrorReason, message: str) -> None:
        """End every registration with ``reason`` after what was logged; the processor
        stops (and keeps its log for the readers still reading it)."""
        self.take_group()
        if self.ended is not None:
            return
        self.ended = reason
        for reg in self.registry:
            reg.end(reason, message, after_log=True)
            self.unregister(reg)
        self._release()

    def _violated(self, exc: InvariantViolation) -> None:
        log.error("rangefeed processor of r%d stopped: %s", self.range_id, exc)
        self.end(ErrorReason.INVARIANT_VIOLATION, f"r{self.range_id}: {exc}")

    # The log.

    def _append(self, op: WriteValue | CommitIntent) -> bool:
        diff = None
        if self._diff_regs:
            diff = new_value((op.key, op.value, op.ts, op.prev_value))
            size = value_size(op.key, op.value, op.prev_value)
        else:
            size = value_size(op.key, op.value)
        if not self.budget.try_acquire(size) and not self._make_room(size):
            return False
        if not self._value_regs:  # making room cut every reader off
            self.budget.release(size)
            return False
        self._held += size
        # before the value is visible: readers take these as bounds
        if op.ts > self.max_ts:
            self.max_ts = op.ts
        key, (low, high) = op.key, self.key_bounds
        # NB: no min() or max() calls: keys written in ascending order widen the bounds at
        # every append
        if key > high:
            self.key_bounds = (low if low <= key else key, key)
        elif key < low:
            self.key_bounds = (key, high)
        entries = self.log
        entries.values.append(new_value((op.key, op.value, op.ts, None)))
        entries.diffs.append(diff)
        entries.sizes.append(size)
        entries.keys.append(key)
        entries.stamps.append(tuple(op.ts))
        self.end_pos += 1
        if self.end_pos - self._low > self._limit or self.end_pos >= self._trim_due:
            self._trim()
        return True

    def _append_each(self, op: IngestValues | CommitIntents) -> bool:
        """Log each value of a bulk load's batch that a registration covers (the values
        are made only here, when some registration reads them)."""
        logged = False
        covering = self.registry.covering
        for value in op.each():
            if (self._whole_regs or covering(value.key)) and self._append(value):
                logged = True
            if not self._value_regs:
                break  # making room cut every reader off
        return logged

    def _take_writes(self, ops: Sequence[LogicalOp]) -> bool:
        """Log a group's ops at once when they are all ``WriteValue``s that the same
        registrations cover, none wants diffs, the budget has room for them all, no
        reader can fall more than its bound behind in them and none is at or below the
        resolved timestamp (what a group of plain writes to a watched span is); ``False``,
        having done nothing, otherwise. What the per-op path does, with no Python code
        per value: beside one embedded feed, kv0's puts cost the commit thread 2.2 µs a
        command handed over one by one, and 0.3 µs more to wake the consumer; held and
        taken by group (16 commands to a group), 0.3 µs and 1.6 µs with the wake."""
        if self._diff_regs or set(map(type, ops)) != _WRITES:
            return False
        writes = cast("Sequence[WriteValue]", ops)
        keys = list(map(_OP_KEY, writes))
        stamps = list(map(_OP_TS, writes))
        low, high = min(keys), max(keys)
        lowest, newest = min(stamps), max(stamps)
        rts = self.rts
        if rts.initialized and lowest <= rts.resolved:
            return False  # NB: the per-op path logs what comes before it, then ends
        if not self._value_regs:
            return True  # NB: nothing to log, and a WriteValue never moves the rts
        if not (self._whole_regs or self.registry.covers_all(low, high)):
            return False
        if self.end_pos + len(keys) - self._low > self._limit:
            return False  # NB: a reader may fall too far behind in it: cut at its value
        values = list(map(_OP_VALUE, writes))
        sizes = list(map(value_size, keys, values))
        size = sum(sizes)
        if not self.budget.try_acquire(size):
            return False
        self._held += size
        # before the values are visible: readers take these as bounds
        if newest > self.max_ts:
            self.max_ts = newest
        bounds_low, bounds_high = self.key_bounds
        if low < bounds_low or high > bounds_high:
            self.key_bounds = (min(low, bounds_low), max(high, bounds_high))
        entries = self.log
        entries.values.extend(map(new_value, zip(keys, values, stamps, repeat(None))))
        entries.diffs.extend(repeat(None, len(keys)))
        entries.sizes.extend(sizes)
        entries.keys.extend(keys)
        entries.stamps.extend(map(tuple, stamps))
        self.end_pos += len(keys)
        if self.end_pos - self._low > self._limit or self.end_pos >= self._trim_due:
            self._trim()
        self._news()
        return True

    def _mark(self, *, force: bool = False) -> None:
        """Note a checkpoint at the resolved timestamp after everything logged so far
        (``force``: even if it has not moved, for a registration's first checkpoint)."""
        resolved = self.rts.resolved
        marks = self.log.marks
        if marks and (
            marks[-1] == (self.end_pos, resolved) or (not force and marks[-1][1] >= resolved)
        ):
            return
        marks.append((self.end_pos, resolved))
        self.resolved = resolved
        if len(marks) > _MAX_MARKS:
            self._trim()

    def _news(self) -> None:
        """The commit thread logged values or moved the resolved timestamp: the consumers
        are woken with the commit group, paced, or at once without a :class:`Waker`."""
        if self._waker is not None:
            self._deferred = self._waker.defer(self._streams, self._deferred)
        else:
            self._wake()

    def _wake(self) -> None:
        for stream in self._streams:
            if stream.waiting:
                stream.wake()

    def _trim(self) -> None:
        """End the readers too far behind, then drop what every reader has read."""
        low = self.end_pos
        for reg in self.registry:
            if not reg.values:
                continue
            if self.end_pos - reg.cursor > reg.stream.per_registration:
                reg.end(ErrorReason.SLOW_CONSUMER, reg.slow_message(self.end_pos - reg.cursor))
                self.unregister(reg)
            else:
                low = min(low, reg.cursor)
        entries = self.log
        cut = low - entries.base
        marks = entries.marks
        keep = next((i for i, (pos, _ts) in enumerate(marks) if pos >= low), len(marks))
        freed = sum(entries.sizes[:cut])
        self.log = EventLog(
            low,
            entries.values[cut:],
            entries.diffs[cut:],
            entries.sizes[cut:],
            marks[max(0, keep - 1) :],
            entries.keys[cut:],
            entries.stamps[cut:],
        )
        self._low = low
        self._trim_due = self.end_pos + _TRIM_EVERY
        self._slice = None  # let the old log go
        self._held -= freed
        self.budget.release(freed)

    def _make_room(self, size: int) -> bool:
        """The budget is spent: trim, then end the readers holding the log back until the
        value fits; ``False`` if it cannot (other processors hold the budget)."""
        self._trim()
        while not self.budget.try_acquire(size):
            behind = [r for r in self.registry if r.values and r.cursor < self.end_pos]
            if not behind:
                for reg in self.registry:
                    if reg.values:
                        reg.end(ErrorReason.SLOW_CONSUMER, reg.slow_message(0))
                        self.unregister(reg)
                return False
            slowest = min(behind, key=lambda r: r.cursor)
            slowest.end(
                ErrorReason.SLOW_CONSUMER, slowest.slow_message(self.end_pos - slowest.cursor)
            )
            self.unregister(slowest)
            self._trim()
        return True

    def _release(self) -> None:
        self.budget.release(self._held)
        self._held = 0
