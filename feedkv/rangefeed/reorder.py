"""Values of a multi-range feed put in timestamp order across the whole feed.

A feed keeps each key's values in timestamp order, and (with ``timestamp_order``) each
range's catch-up in timestamp order across its keys; ranges still interleave as their
streams deliver. :class:`TimestampOrderer` holds values back until the feed's frontier
(the lowest checkpoint over all its spans, :class:`~feedkv.rangefeed.frontier.SpanFrontier`)
passes them, then releases them sorted by (timestamp, key): every value at or below the
frontier has arrived, so none can come after that sorts before them. Checkpoints pass at
once; an error (a feed's last event) releases what is held first. The cost is latency: a
value waits for the slowest range to checkpoint past it.

Pure: events in, events out; no clock, no threads.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from feedkv.rangefeed.event import Checkpoint, Event, Value
from feedkv.rangefeed.frontier import SpanFrontier
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["TimestampOrderer"]


class TimestampOrderer:
    """Reorders one feed's events (see the module docstring). ``since`` is the feed's
    base timestamp (exclusive), where the frontier starts."""

    def __init__(self, spans: Iterable[Span], since: Timestamp) -> None:
        self._frontier = SpanFrontier(spans, since)
        self._held: list[tuple[Timestamp, bytes, int, Value]] = []
        self._arrived = 0  # ties of one key and timestamp keep their arrival order

    def push(self, event: Event) -> list[Event]:
        """What may be passed on once ``event`` arrived: nothing (a value held back), the
        event itself, or the values a checkpoint released, in order, then the
        checkpoint."""
        if isinstance(event, Value):
            self._arrived += 1
            heapq.heappush(self._held, (event.ts, event.key, self._arrived, event))
            return []
        if not isinstance(event, Checkpoint):
            return [*self._release(None), event]  # the feed ended: nothing more comes
        if not self._frontier.forward(event.span, event.ts):
            return [event]
        return [*self._release(self._frontier.frontier), event]

    def _release(self, up_to: Timestamp | None) -> list[Event]:
        """The held values at or below ``up_to`` (``None``: all), in order."""
        out: list[Event] = []
        held = self._held
        while held and (up_to is None or held[0][0] <= up_to):
            out.append(heapq.heappop(held)[3])
        return out

    @property
    def held(self) -> int:
        """How many values wait for the frontier."""
        return len(self._held)
