"""One consumer's subscription to part of one range: ``(span, start_ts, with_diff,
values)``.

A registration lives in two phases:

1. **Catching up.** It was added to its processor under the apply lock together with a
   snapshot. A catch-up scan sends the snapshot's history from ``start_ts`` on, while
   live events (from commands applied after the snapshot) wait in ``pending``.
2. **Live.** :meth:`Registration.finish_catch_up` (under the apply lock) moves the
   pending events to the stream and sends the first checkpoint; from then on events
   go straight to the stream.

The snapshot holds exactly the commands whose events the registration is not sent live,
so the seam has no gap and no double, and each key's values stay in timestamp order.
Events at or below ``start_ts`` are never sent. ``pending`` is bounded like the stream;
overflowing either ends the registration with ``SLOW_CONSUMER``.

A registration without ``values`` (checkpoints only, e.g. a follower of the resolved
timestamp) is never sent a :class:`Value`: it has no catch-up scan and goes live at once
(:class:`~feedkv.rangefeed.store_feeds.StoreFeeds` sees to that), and the processor skips
it when it fans values out, so it costs no event, queue space or budget per write.

All methods except the catch-up scan itself run under the store's apply lock.
"""

from __future__ import annotations

from collections.abc import Hashable

from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Event, Value
from feedkv.rangefeed.stream import EventStream
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["Registration", "event_size"]

_EVENT_OVERHEAD = 64


def event_size(event: Event) -> int:
    """The bytes an event is charged against the memory budget."""
    if isinstance(event, Value):
        return (
            _EVENT_OVERHEAD
            + len(event.key)
            + len(event.value or b"")
            + len(event.prev_value or b"")
        )
    return _EVENT_OVERHEAD


class Registration:
    __slots__ = (
        "catching_up",
        "done",
        "pending",
        "queued",
        "span",
        "start_ts",
        "stream",
        "tag",
        "values",
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
        self.queued = 0  # events in the stream not yet taken (the stream counts them)
        self.catching_up = True
        self.pending: list[tuple[Event, int]] | None = []
        self.done = False

    def publish(self, event: Event) -> bool:
        """Send (or, while catching up, hold) a live event; ``False`` if the registration
        ended because there was no room for it."""
        if self.done:
            return False
        if isinstance(event, Value) and (event.ts <= self.start_ts or not self.values):
            return True
        size = event_size(event)
        pending = self.pending
        if pending is not None:
            if isinstance(event, Checkpoint):
                return True  # the catch-up sends its own first checkpoint
            if len(pending) < self.stream.per_registration and self.stream.budget.try_acquire(size):
                pending.append((event, size))
                return True
        elif self.stream.push(self, event, size):
            return True
        self.end(ErrorReason.SLOW_CONSUMER, self._slow_message())
        return False

    def finish_catch_up(self, resolved: Timestamp) -> bool:
        """Send the held live events and the first checkpoint; ``False`` if the stream
        refused them (the registration has ended)."""
        pending, self.pending = self.pending or [], None
        self.catching_up = False
        if self.done:
            return False
        for i, (event, size) in enumerate(pending):
            if not self.stream.push_paid(self, event, size):
                self.stream.budget.release(sum(rest for _event, rest in pending[i:]))
                self.end(ErrorReason.SLOW_CONSUMER, self._slow_message())
                return False
        return self.publish(Checkpoint(self.span, resolved))

    def end(
        self, reason: ErrorReason, message: str = "", threshold: Timestamp | None = None
    ) -> None:
        """Send the final error and stop (idempotent)."""
        if self.done:
            return
        self.done = True
        if self.pending:
            self.stream.budget.release(sum(size for _event, size in self.pending))
        self.pending = None
        self.stream.push_final(self, Error(reason, message, threshold))

    def _slow_message(self) -> str:
        return (
            f"the consumer of {self.span} fell behind: {self.queued} events queued "
            f"(limit {self.stream.per_registration}) or the node's rangefeed budget "
            f"({self.stream.budget.limit} bytes) is spent"
        )

    def __repr__(self) -> str:
        phase = "done" if self.done else "catching up" if self.catching_up else "live"
        return f"Registration({self.tag!r}, {self.span}, after {self.start_ts}, {phase})"
