"""One consumer's subscription to part of one range: ``(span, start_ts, with_diff,
values)``.

A registration lives in two phases:

1. **Catching up.** It was added to its processor under the apply lock, with its
   *cursor* at the end of the processor's log. When its catch-up scan starts, it takes a
   snapshot under the apply lock and moves the cursor to the log's end at that moment;
   the scan sends the snapshot's history from ``start_ts`` on through the stream, while
   live values collect in the log behind the cursor.
2. **Live.** :meth:`Registration.go_live` (under the apply lock, when the scan is done)
   lets the consumer read the log from the cursor: the values logged meanwhile, then a
   first checkpoint, then whatever follows.

The snapshot holds exactly the commands whose values are not in the log past the cursor,
so the seam has no gap and no double, and each key's values stay in timestamp order.
Values at or below ``start_ts`` are never sent; nor are values outside the span (the log
holds the whole range's).

The consumer's thread does the reading (:meth:`Registration.read`, called by
:meth:`~feedkv.rangefeed.stream.EventStream.take_batches`), a slice of the log at a time:
the commit thread only appends. A registration that ends (:meth:`Registration.end`) sends
its :class:`Error` last: after the values logged before a split or a shutdown, or at once
when it is cut off or unregistered.

A registration without ``values`` (checkpoints only, e.g. a follower of the resolved
timestamp) reads only the log's checkpoint marks: it has no catch-up scan and goes live
at once (:class:`~feedkv.rangefeed.store_feeds.StoreFeeds` sees to that).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from operator import itemgetter
from typing import Protocol

from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Event, Value, ValueColumns
from feedkv.rangefeed.event_log import EventLog, LogSlice
from feedkv.rangefeed.stream import EventStream, StreamItem, ValueBatch
from feedkv.util.hlc import MAX_TIMESTAMP, Timestamp
from feedkv.util.keys import Span

__all__ = [
    "EVENT_OVERHEAD",
    "LogOwner",
    "Registration",
    "columns_size",
    "event_size",
    "value_size",
    "values_size",
]

EVENT_OVERHEAD = 64  # bytes charged per event beyond its keys and values
_KEY, _VALUE, _PREV_VALUE = itemgetter(0), itemgetter(1), itemgetter(3)


def event_size(event: Event) -> int:
    """The bytes an event is charged against the memory budget."""
    if isinstance(event, Value):
        return value_size(event.key, event.value, event.prev_value)
    return EVENT_OVERHEAD


def value_size(key: bytes, value: bytes | None, prev_value: bytes | None = None) -> int:
    """The bytes a value is charged against the memory budget."""
    return EVENT_OVERHEAD + len(key) + len(value or b"") + len(prev_value or b"")


def values_size(values: Sequence[Value]) -> int:
    """The sum of :func:`event_size` over ``values``, without running Python code per
    value (batches are sized on every hop), nor making the values of columns (whose size
    is worked out once: a catch-up page is sized for the budget, then for the wire)."""
    if isinstance(values, ValueColumns):
        if values.size is None:
            value_bytes = _bytes_of(values.values)
            values.size = columns_size(values.keys, value_bytes, values.prev_values)
        return values.size
    keys, value_bytes = map(_KEY, values), _bytes_of(map(_VALUE, values))
    return _size(len(values), keys, value_bytes, _bytes_of(map(_PREV_VALUE, values)))


def columns_size(
    keys: list[bytes], value_bytes: int, prev_values: list[bytes | None] | None
) -> int:
    """:func:`values_size` of columns whose values are ``value_bytes`` long together
    (which a scan knows from its read, with no pass over them)."""
    prev_bytes = 0 if prev_values is None else _bytes_of(prev_values)
    return _size(len(keys), keys, value_bytes, prev_bytes)


def _size(count: int, keys: Iterable[bytes], value_bytes: int, prev_bytes: int) -> int:
    # NB: the keys' length joined, not summed: a copy of short keys costs half the
    # calls of len
    return EVENT_OVERHEAD * count + len(b"".join(keys)) + value_bytes + prev_bytes


def _bytes_of(values: Iterable[bytes | None]) -> int:
    return sum(map(len, filter(None, values)))


class LogOwner(Protocol):
    """The processor, as its registrations see it: the log they read (the attributes
    are read under the stream's lock, racing the commit thread as
    :meth:`~feedkv.rangefeed.processor.Processor.read_slice` explains) and the owner
    that drops a registration (under the apply lock)."""

    @property
    def span(self) -> Span: ...

    @property
    def log(self) -> EventLog: ...

    @property
    def end_pos(self) -> int: ...

    @property
    def max_ts(self) -> Timestamp: ...

    @property
    def key_bounds(self) -> tuple[bytes, bytes]: ...

    @property
    def resolved(self) -> Timestamp: ...

    def read_slice(self, entries: EventLog, start: int, stop: int, with_diff: bool) -> LogSlice: ...

    def unregister(self, reg: Registration) -> None: ...


class Registration:
    __slots__ = (
        "catching_up",
        "cursor",
        "done",
        "filtering",
        "final",
        "final_mark",
        "final_pos",
        "processor",
        "queued",
        "sent",
        "span",
        "start_ts",
        "stream",
        "tag",
        "values",
        "whole",
        "with_diff",
    )

    def __init__(
        self,
        tag: Hashable,
        span: Span,
        start_ts: Timestamp,  # exclusive
        with_diff: bool,
        stream: EventStream,
        *,
        values: bool = True,  # False: checkpoints only
    ) -> None:
        self.tag = tag
        self.span = span
        self.start_ts = start_ts
        self.with_diff = with_diff
        self.values = values
        self.stream = stream
        self.queued = 0  # catch-up values in the stream not yet taken (the stream counts)
        self.processor: LogOwner | None = None
        self.cursor = 0  # the log position read up to
        self.whole = False  # the span holds the whole range: no key filter needed
        self.filtering = True  # values at or below start_ts may still be in the log
        self.sent: Timestamp | None = None  # the last checkpoint read
        self.catching_up = True
        self.done = False
        self.final: Error | None = None
        self.final_pos = 0  # with ``final``: the log position read up to before it
        self.final_mark = MAX_TIMESTAMP  # with ``final``: the newest checkpoint it may send

    # Under the apply lock.

    def attach(self, processor: LogOwner, cursor: int) -> None:
        """Read ``processor``'s log from ``cursor`` once live."""
        self.processor = processor
        self.cursor = cursor
        self.whole = self.span.contains(processor.span)
        with self.stream.lock:
            self.stream.attach(self)

    def go_live(self) -> None:
        with self.stream.lock:
            self.catching_up = False
        self.stream.wake()

    def end(
        self,
        reason: ErrorReason,
        message: str = "",
        threshold: Timestamp | None = None,
        *,
        after_log: bool = False,
    ) -> None:
        """Stop with a final error (idempotent): read after what the log holds now when
        ``after_log`` (the range ended), else at once."""
        error = Error(reason, message, threshold)
        if self.processor is None:
            if not self.done:
                self.done = True
                self.stream.push_final(self, error)
            return
        with self.stream.lock:
            if self.done:
                return
            self.done = True
            self.final = error
            live = after_log and not self.catching_up
            self.final_pos = self.processor.end_pos if live else self.cursor
            # NB: a mark placed from now on may sit at final_pos yet cover values this
            # registration will not read (one cut off for the budget is ended because the
            # value it needed was not logged): it must not be sent.
            self.final_mark = self.processor.resolved
        self.stream.wake()

    def slow_message(self, behind: int) -> str:
        return (
            f"the consumer of {self.span} fell behind: {behind} of the range's values unread "
            f"(limit {self.stream.per_registration}) or the node's rangefeed budget "
            f"({self.stream.budget.limit} bytes) is spent"
        )

    # The consumer's thread, under the stream's lock.

    def has_news(self) -> bool:
        if self.final is not None:
            return True
        processor = self.processor
        if self.catching_up or processor is None:
            return False
        if self.values and processor.end_pos > self.cursor:
            return True
        return self.sent is None or processor.resolved > self.sent

    def read(self, out: list[tuple[Hashable, StreamItem]]) -> bool:
        """Append what the consumer has not read yet to ``out``; ``True`` once the final
        error is in it (the registration is finished)."""
        processor = self.processor
        if processor is not None and not self.catching_up:
            self._read_log(processor, out)
        if self.final is not None:
            out.append((self.tag, self.final))
            return True
        return False

    def _read_log(self, processor: LogOwner, out: list[tuple[Hashable, StreamItem]]) -> None:
        entries = processor.log
        source = entries.diffs if self.with_diff else entries.values
        stop = entries.base + len(source)
        # read after the length: they bound every value before it
        bound, keys = processor.max_ts, processor.key_bounds
        if self.final is not None:
            stop = min(stop, self.final_pos)
        start = max(self.cursor, entries.base)
        if self.values and stop > start:
            piece = processor.read_slice(entries, start, stop, self.with_diff)
            self._emit(piece, bound, keys, out)
            self.cursor = stop
        # NB: the newest mark read goes after all the values read, even those logged after
        # it: a value logged after a mark is above its timestamp, so the promise holds, and
        # every reader of the same slice emits the same batch (sent once over the wire).
        for pos, ts in reversed(entries.marks):
            if pos <= stop and ts <= self.final_mark:
                if self.sent is None or ts > self.sent:
                    out.append((self.tag, Checkpoint(self.span, ts)))
                    self.sent = ts
                    if ts >= self.start_ts:
                        self.filtering = False
                break

    def _emit(
        self,
        piece: LogSlice,
        bound: Timestamp,
        keys: tuple[bytes, bytes],
        out: list[tuple[Hashable, StreamItem]],
    ) -> None:
        """Append ``piece``'s values after ``start_ts`` in the span; ``bound`` is above
        none of them, ``keys`` holds every one's key (both are the processor's, for its
        whole log)."""
        values: Sequence[Value] = piece.values
        if not values:
            return
        # NB: the slice's bounds stand for the values left after a filter too: a bound
        # that passes for all of them passes for any of them.
        if self.filtering and piece.min_ts() <= self.start_ts:
            after = self.start_ts
            values = [v for v in values if v.ts > after]
        if values and not self.whole:
            start, end = self.span.start, self.span.end
            low, high = keys
            # NB: the log's bounds first: a feed's span usually holds every key its range's
            # log does (the log holds only keys some registration reads), and they cost
            # nothing per value, where a slice's cost each of its readers a pass over it
            # (about as much as the consumer's own loop over the values)
            if low < start or high >= end:
                low, high = piece.key_bounds()
            if low < start or high >= end:
                values = [v for v in values if start <= v.key < end]
        if values:
            out.append((self.tag, ValueBatch(values, bound)))

    def __repr__(self) -> str:
        phase = "done" if self.done else "catching up" if self.catching_up else "live"
        return f"Registration({self.tag!r}, {self.span}, after {self.start_ts}, {phase})"
