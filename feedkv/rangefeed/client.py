"""The multi-range rangefeed client: one feed over any spans, whatever the ranges do.

:class:`RangeFeed` divides its spans on range boundaries (from the client's range cache)
and registers one *piece* per range, all delivering into one stream. It yields:

- every :class:`Value` of every piece, eagerly, as it arrives (none with
  ``values=False``: a checkpoint-only feed, registered as such, so the nodes neither scan
  history for it nor send it values);
- a :class:`Checkpoint` per feed span whenever the lowest checkpoint over all pieces
  (a :class:`~feedkv.rangefeed.frontier.SpanFrontier`) moves.

When a piece ends with a retryable error (its range split or merged, the node is
restarting, the consumer fell behind), the piece is divided again on fresh range
boundaries and registered from its own last checkpoint. What the new registration sends
again is filtered out: a piece keeps the batches of values it passed on that may be above
its last checkpoint (each batch knows its newest timestamp, so keeping one costs nothing
per value), a restarted piece turns them into the newest timestamp yielded per key, and
each key's values arrive in timestamp order, so anything at or below that was already
yielded. A piece that has kept more than ``recent_values`` values folds its batches: it
keeps their keys and timestamps, not the values, and once the folds hold more than
``folded_values`` keys, merges them into the newest timestamp yielded per key (a key
updated many times is held once). A batch of columns (a catch-up page, a run off the
wire, a slice of a node's log) is folded as it is yielded: its fold is its own key list
and its timestamps (as the runs of one timestamp they make, when a few transactions
wrote them: a list kept per page cost a catch-up 3-4% more CPU a value), so it costs
nothing per value, and its values are let go as the consumer reads them (a long catch-up
scan, which checkpoints only at its end, kept 16,384 values, and the fresh memory each
new page took instead of the last one's cost its consumer 5-8% more CPU a value). A
fold, or the merged ones, go whole once a checkpoint passes them. Consumers therefore
see each value once and per key in order, as long as this client lives; across
processes the contract is at-least-once from the last checkpoint. A terminal error
(history below the GC threshold, a broken invariant) is raised from the iterator.

Iterate from one thread (or ``async for`` in one task, which waits in the event loop, not
on a thread); :meth:`RangeFeed.close` may be called from any thread and ends the
iteration.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter, sub
from typing import Protocol, Self

from feedkv.errors import (
    BatchTimestampBeforeGCError,
    ExternalError,
    InvalidArgumentError,
    InvariantViolation,
    PermissionDeniedError,
    RetryableError,
)
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.kv.router import Router
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Event, Value, ValueColumns
from feedkv.rangefeed.event_log import LoggedValues, Stamp
from feedkv.rangefeed.frontier import SpanFrontier
from feedkv.rangefeed.stream import EventStream, StreamItem, ValueBatch
from feedkv.util.hlc import ZERO_TIMESTAMP, Timestamp, run_ends
from feedkv.util.keys import Span, merge_spans

__all__ = ["FeedRange", "FeedTransport", "RangeFeed"]

MAX_BACKOFF_S = 1.0
STUCK_AFTER_S = 60.0  # a piece silent this long is registered again (CockroachDB: 1 min)
RECENT_VALUES = 16_384  # values a piece keeps in batches before folding them (see above)
FOLDED_VALUES = 1 << 18  # keys a piece's folds hold before it merges them (see above)
_KEY = attrgetter("key")
_TS = attrgetter("ts")


class FeedTransport(Protocol):
    """How a client registers with nodes: in-process or over the wire."""

    def new_stream(self) -> EventStream:
        """A stream for one feed's events."""
        ...

    def local_node(self) -> int:
        """The node registrations with ``node_id=0`` go to (0: not known)."""
        ...

    def register(
        self,
        tag: Hashable,
        span: Span,
        start_ts: Timestamp,
        with_diff: bool,
        stream: EventStream,
        *,
        values: bool = True,
        timestamp_order: bool = False,
        node_id: int = 0,
    ) -> object:
        """Subscribe ``stream`` to ``span`` after ``start_ts`` (exclusive); returns a handle
        for :meth:`unregister`. Without ``values`` only checkpoints are sent; with
        ``timestamp_order`` the catch-up scan keeps timestamp order across keys;
        ``node_id``: the node holding the span's range (0: the one connected to). Failures
        to register arrive as an :class:`Error` event, or raise when the node cannot be
        reached."""
        ...

    def unregister(self, handle: object) -> None: ...

    def close(self) -> None:
        """Release the transport's connections (idempotent)."""
        ...


class _Runs(tuple[tuple[Timestamp, int], ...]):
    """A fold's timestamps as the runs of one timestamp they make, ``(timestamp, how
    many)`` each (see :func:`_runs_of`)."""

    __slots__ = ()


class _Stamps:
    """A fold's timestamps as plain ``(wall, logical)`` tuples (a log slice's, see
    :class:`~feedkv.rangefeed.event_log.LoggedValues`), which the collector does not
    track while the fold waits for a checkpoint."""

    __slots__ = ("stamps",)

    def __init__(self, stamps: list[Stamp]) -> None:
        self.stamps = stamps


_Fold = tuple[Timestamp, Sequence[bytes], Sequence[Timestamp] | _Runs | _Stamps]
_new_timestamp = partial(tuple.__new__, Timestamp)


@dataclass(frozen=True, slots=True)
class FeedRange:
    """One registered piece of a feed: the range it is on (``None``: not known yet),
    its span, and its resolved timestamp (its last checkpoint, or the feed's start)."""

    range_id: int | None
    span: Span
    resolved: Timestamp
    node_id: int | None  # the node serving it


@dataclass(slots=True)
class _Piece:
    span: Span
    resume: Timestamp  # the piece's last checkpoint (or the feed's start): exclusive
    seen: dict[bytes, Timestamp] = field(default_factory=dict)  # since a restart
    recent: list[ValueBatch] = field(default_factory=list)  # yielded, maybe above resume
    recent_values: int = 0  # the values in ``recent``
    # Folds of ``recent``, one per batch: (its newest timestamp, keys, timestamps
    # yielded), oldest first, each key's last timestamp its newest; and older folds
    # merged, the newest timestamp yielded per key. A fold (or the merged ones) goes
    # whole once a checkpoint passes it; until then it may hold keys at or below the
    # checkpoint, which filter nothing (a restart sends only above it).
    folded: list[_Fold] = field(default_factory=list)
    folded_values: int = 0  # the keys in ``folded``
    merged: dict[bytes, Timestamp] = field(default_factory=dict)
    merged_newest: Timestamp = ZERO_TIMESTAMP
    desc: RangeDescriptor | None = None
    node_id: int | None = None  # the node it is registered with
    handle: object | None = None
    attempts: int = 0
    heard_at: float = field(default_factory=time.monotonic)  # its last event (or start)


class RangeFeed:
    def __init__(
        self,
        transport: FeedTransport,
        router: Router,
        spans: Iterable[Span],
        since: Timestamp,
        *,
        with_diff: bool = False,
        values: bool = True,
        timestamp_order: bool = False,
        values_only: bool = False,
        initial: Iterable[Event] = (),
        recent_values: int = RECENT_VALUES,
        folded_values: int = FOLDED_VALUES,
        stuck_after_s: float = STUCK_AFTER_S,
    ) -> None:
        if with_diff and not values:
            raise InvalidArgumentError(
                "a rangefeed with with_diff=True needs values: values=False sends only "
                "checkpoints, so there is nothing to diff; drop one of the two"
            )
        if values_only and not values:
            raise InvalidArgumentError(
                "a rangefeed with values_only=True and values=False would send nothing"
            )
        self.spans = merge_spans(spans)
        if not self.spans:
            raise InvalidArgumentError("a rangefeed needs at least one non-empty span")
        self.since = since
        self.with_diff = with_diff
        self.values = values
        self.timestamp_order = timestamp_order
        self.frontier = SpanFrontier(self.spans, since)
        self._transport = transport
        self._router = router
        self._values_only = values_only
        self._recent_values = recent_values
        self._folded_values = folded_values
        self._stuck_after_s = stuck_after_s
        self._stuck_check_at = time.monotonic() + stuck_after_s
        self._stream = transport.new_stream()
        self._tags = itertools.count(1)
        self._pieces: dict[int, _Piece] = {}
        self._retry: list[tuple[float, _Piece]] = []
        # Batches of events to yield, in order: value batches as they came, not copied.
        self._ready: deque[Sequence[Event]] = deque()
        if initial := list(initial):
            self._ready.append(initial)
        self._current: Iterator[Event] = iter(())  # the batch being read
        self._lock = threading.Lock()
        self._closed = False
        for span in self.spans:
            self._start(_Piece(span, since))

    # Iteration.

    def __iter__(self) -> Iterator[Event]:
        # NB: the events come from C iterators over the batches, so no Python code runs
        # per event here: with many consumers in one process that code was a large part
        # of what each write cost them. A chain that an exception ended (a terminal error,
        # a KeyboardInterrupt) is not reused: the next iter() makes another, and the
        # batch being read is kept on the feed, so nothing is lost or repeated.
        # NB: one chain over the batches, the one being read first: a chain of the current
        # batch and a chain of the rest cost each value a step of both
        batches = itertools.chain((self._current,), iter(self._next_batch, None))
        return itertools.chain.from_iterable(batches)

    def __next__(self) -> Event:
        return next(iter(self))

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Event:
        while True:
            event = next(self._current, None)
            if event is not None:
                return event
            while not self._ready:
                if self._closed:
                    raise StopAsyncIteration
                await self._stream.wait_async(self._due_in())
                self._pump(block=False)
            self._take()

    def batches(self) -> Iterator[Sequence[Event]]:
        """The feed's events as they come, a batch at a time instead of one by one: a
        run of one range's values, or the checkpoints of one move of the frontier. A
        catch-up page comes as the :class:`~feedkv.rangefeed.event.ValueColumns` it was
        read into, so a consumer that takes columns (an Arrow writer, an encoder) reads
        its ``keys``, ``values`` and ``timestamps`` with no :class:`Value` made per change.
        The order and guarantees are iteration's; read the feed one way or the other."""
        while True:
            while not self._ready:
                if self._closed:
                    return
                self._pump()
            yield self._ready.popleft()

    def _next_batch(self) -> Iterator[Event] | None:
        """The next batch's events, waiting for them; ``None`` once the feed is closed."""
        while not self._ready:
            if self._closed:
                return None
            self._pump()
        return self._take()

    def _take(self) -> Iterator[Event]:
        """Start reading the first ready batch (it stays queued if that fails)."""
        self._current = iter(self._ready[0])
        self._ready.popleft()
        return self._current

    def close(self) -> None:
        """End the feed: unregister every piece; iteration stops. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            handles = [p.handle for p in self._pieces.values() if p.handle is not None]
            self._pieces.clear()
            self._retry.clear()
        for handle in handles:
            with contextlib.suppress(ExternalError):  # a node that is gone has nothing left
                self._transport.unregister(handle)
        self._stream.close()

    def ranges(self) -> list[FeedRange]:
        """The pieces registered now, in key order (any thread may ask; a piece waiting
        to be registered again is not among them)."""
        with self._lock:
            pieces = list(self._pieces.values())
        return sorted(
            (
                FeedRange(
                    p.desc.range_id if p.desc else None,
                    p.span,
                    p.resume,
                    p.node_id,
                )
                for p in pieces
            ),
            key=lambda r: r.span.start,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Events.

    def _due_in(self) -> float:
        """How long to wait for events before a piece is due to be registered again."""
        if not self._retry:
            return 0.5
        return max(0.0, min(due for due, _p in self._retry) - time.monotonic())

    def _pump(self, *, block: bool = True) -> None:
        timeout = self._due_in() if block else 0.0
        if self._retry:
            self._retry_due()
        for tag, item in self._stream.take_batches(timeout):
            piece = self._pieces.get(tag)  # type: ignore[call-overload]
            if piece is not None:
                piece.heard_at = time.monotonic()
                self._handle(tag, piece, item)
        if time.monotonic() >= self._stuck_check_at:
            self._restart_stuck()

    def _restart_stuck(self) -> None:
        """Register again, from its last checkpoint and with the next replica, each
        piece its node has sent nothing for ``stuck_after_s`` (as CockroachDB's
        ``kv.rangefeed.range_stuck_threshold``): a replica cut off from its range's
        leader learns no closed timestamp, and a node may stop sending without the
        stream breaking. A range whose resolved timestamp is held back by a long
        transaction is registered again too, which costs a catch-up scan and loses
        nothing."""
        now = time.monotonic()
        self._stuck_check_at = now + min(1.0, self._stuck_after_s)
        with self._lock:
            stuck = [
                (tag, piece)
                for tag, piece in self._pieces.items()
                if now - piece.heard_at > self._stuck_after_s
            ]
            for tag, _piece in stuck:
                del self._pieces[tag]
        for _tag, piece in stuck:
            if piece.handle is not None:
                with contextlib.suppress(ExternalError):  # the node may be gone
                    self._transport.unregister(piece.handle)
            self._later(piece)

    def _handle(self, tag: Hashable, piece: _Piece, item: StreamItem) -> None:
        if isinstance(item, ValueBatch | Value):
            if self.values:  # else from a node that predates values=False
                self._yield(piece, item if isinstance(item, ValueBatch) else _batch(item))
        elif isinstance(item, Checkpoint):
            piece.attempts = 0
            if item.ts > piece.resume:
                piece.resume = item.ts
                piece.recent = [b for b in piece.recent if b.max_ts > item.ts]
                piece.recent_values = sum(len(b.values) for b in piece.recent)
                if piece.seen:
                    piece.seen = {k: ts for k, ts in piece.seen.items() if ts > item.ts}
                if piece.folded:
                    piece.folded = [f for f in piece.folded if f[0] > item.ts]
                    piece.folded_values = sum(len(keys) for _ts, keys, _t in piece.folded)
                if piece.merged and piece.merged_newest <= item.ts:
                    piece.merged = {}
            if self.frontier.forward(item.span, item.ts) and not self._values_only:
                ts = self.frontier.frontier
                self._ready.append([Checkpoint(span, ts) for span in self.spans])
        else:
            with self._lock:
                self._pieces.pop(tag, None)  # type: ignore[call-overload]
            self._ended(piece, item)

    def _yield(self, piece: _Piece, batch: ValueBatch) -> None:
        values = batch.values
        if piece.seen:  # restarted: drop what the piece's predecessor yielded
            seen, resume = piece.seen, piece.resume
            values = [v for v in values if v.ts > seen.get(v.key, resume)]
            for value in values:
                seen[value.key] = value.ts
            batch = ValueBatch(values, batch.max_ts)
        if batch.max_ts > piece.resume:
            piece.recent.append(batch)
            piece.recent_values += len(values)
            if piece.recent_values > self._recent_values or isinstance(
                values, ValueColumns | LoggedValues
            ):
                _fold(piece, self._folded_values)
        if values:
            self._ready.append(values)

    def _ended(self, piece: _Piece, error: Error) -> None:
        if error.reason is ErrorReason.UNREGISTERED:
            return
        if not error.reason.retryable:
            self.close()
            if error.reason is ErrorReason.GC_THRESHOLD and error.threshold is not None:
                raise BatchTimestampBeforeGCError(piece.resume, error.threshold, "rangefeed")
            if error.reason is ErrorReason.INVALID_REQUEST:
                raise InvalidArgumentError(f"the rangefeed of {piece.span}: {error.message}")
            if error.reason is ErrorReason.PERMISSION_DENIED:
                raise PermissionDeniedError(error.message)
            raise InvariantViolation(f"the rangefeed of {piece.span} failed: {error.message}")
        if piece.desc is not None:
            self._router.ranges.evict(piece.desc)
        piece.attempts += 1
        if error.reason in (ErrorReason.RANGE_SPLIT, ErrorReason.RANGE_MERGED) and (
            piece.attempts == 1
        ):
            self._start(piece)  # the new ranges are ready: go again at once
        else:
            self._later(piece)

    # Registering pieces.

    def _start(self, piece: _Piece) -> None:
        """Register ``piece``, divided on the ranges it now spans."""
        try:
            parts = self._router.divide(piece.span)
        except (RetryableError, ExternalError):
            self._later(piece)
            return
        seen = dict(piece.seen)
        # NB: overwriting is safe: a restarted piece yields a key only above what its
        # predecessor yielded (seen), and it folds batches oldest first, before recent,
        # and merges folds oldest first, before the folds left.
        seen.update(piece.merged)
        for _newest, keys, timestamps in piece.folded:
            seen.update(zip(keys, _each_of(timestamps), strict=True))
        for batch in piece.recent:
            seen.update((k, ts) for k, ts in _keys_and_timestamps(batch) if ts > piece.resume)
        for desc, span in parts:
            part = _Piece(
                span,
                piece.resume,
                {k: ts for k, ts in seen.items() if span.contains_key(k)},
                desc=desc,
                attempts=piece.attempts,
            )
            tag = next(self._tags)
            with self._lock:
                if self._closed:
                    return
                self._pieces[tag] = part
            part.node_id = self._replica_for(desc, part.attempts)
            try:
                part.handle = self._transport.register(
                    tag,
                    span,
                    part.resume,
                    self.with_diff,
                    self._stream,
                    values=self.values,
                    timestamp_order=self.timestamp_order,
                    node_id=part.node_id,
                )
            except (RetryableError, ExternalError):
                with self._lock:
                    self._pieces.pop(tag, None)
                self._later(part)

    def _replica_for(self, desc: RangeDescriptor, attempts: int) -> int:
        """The replica to serve a piece from: any replica can (it applies the range's
        log, closed timestamps included). This client's own node's if it holds one (no
        hop, and a lease that moves does not end the feed), else the lease holder's;
        each attempt after a failure tries the next replica, so a feed fails over from
        its last checkpoint."""
        replicas = desc.replicas
        local = self._transport.local_node()
        first = replicas.index(local) if local in replicas else 0
        return replicas[(first + attempts) % len(replicas)]

    def _later(self, piece: _Piece) -> None:
        delay = min(MAX_BACKOFF_S, 0.01 * 2 ** min(piece.attempts, 10))
        piece.attempts += 1
        self._retry.append((time.monotonic() + delay, piece))

    def _retry_due(self) -> None:
        now = time.monotonic()
        due = [p for at, p in self._retry if at <= now]
        self._retry = [(at, p) for at, p in self._retry if at > now]
        for piece in due:
            self._start(piece)


def _fold(piece: _Piece, folded_values: int) -> None:
    """Replace the piece's kept batches with their keys and timestamps, a fold per batch
    (a column's own lists, not copied; a list of values' read out); merge the folds into
    the newest timestamp per key once they hold more than ``folded_values`` keys (each
    key's values come in timestamp order, so the last one of a key is its newest)."""
    piece.folded += map(_fold_of, piece.recent)
    piece.folded_values += piece.recent_values
    piece.recent = []
    piece.recent_values = 0
    if piece.folded_values > folded_values:
        for newest, fold_keys, fold_timestamps in piece.folded:
            piece.merged.update(zip(fold_keys, _each_of(fold_timestamps), strict=True))
            piece.merged_newest = max(piece.merged_newest, newest)
        piece.folded = []
        piece.folded_values = 0


def _fold_of(batch: ValueBatch) -> _Fold:
    values = batch.values
    if isinstance(values, ValueColumns):
        return batch.max_ts, values.keys, _runs_of(values.timestamps)
    if isinstance(values, LoggedValues):
        return batch.max_ts, values.keys, _Stamps(values.stamps)
    return batch.max_ts, list(map(_KEY, values)), list(map(_TS, values))


def _runs_of(timestamps: Sequence[Timestamp]) -> Sequence[Timestamp] | _Runs:
    """``timestamps`` as the runs of one timestamp they make, if they are all long ones
    (see :func:`~feedkv.util.hlc.run_ends`), else as they are."""
    ends = run_ends(timestamps)
    if not ends or ends[-1] < len(timestamps):
        return timestamps
    starts = [0, *ends[:-1]]
    return _Runs(zip(map(timestamps.__getitem__, starts), map(sub, ends, starts), strict=True))


def _each_of(timestamps: Sequence[Timestamp] | _Runs | _Stamps) -> Iterable[Timestamp]:
    """A fold's timestamps, one per key (see :func:`_runs_of` and :class:`_Stamps`)."""
    if isinstance(timestamps, _Runs):
        return itertools.chain.from_iterable(itertools.starmap(itertools.repeat, timestamps))
    if isinstance(timestamps, _Stamps):
        return map(_new_timestamp, timestamps.stamps)
    return timestamps


def _keys_of(batch: ValueBatch) -> Iterable[bytes]:
    values = batch.values
    return values.keys if isinstance(values, ValueColumns) else map(_KEY, values)


def _timestamps_of(batch: ValueBatch) -> Iterable[Timestamp]:
    values = batch.values
    return values.timestamps if isinstance(values, ValueColumns) else map(_TS, values)


def _keys_and_timestamps(batch: ValueBatch) -> Iterator[tuple[bytes, Timestamp]]:
    """``(key, ts)`` of each value in ``batch``, from its columns if it has them (making
    no values)."""
    return zip(_keys_of(batch), _timestamps_of(batch), strict=True)


def _batch(value: Value) -> ValueBatch:
    return ValueBatch([value], value.ts)
