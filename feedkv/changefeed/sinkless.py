"""Sinkless changefeeds: ``EXPERIMENTAL CHANGEFEED FOR t`` streams rows back to the
SQL client.

The changefeed runs in a thread of the client's process and emits into a
:class:`ChannelSink`, a bounded queue; the statement's :class:`FeedResult` yields the
rows as they arrive: ``(table, key, value)``, with resolved markers as ``(None, None,
'{"resolved": "..."}')``. JSON keys and values are text, Avro ones bytes. A consumer
that stops reading stalls the feed (the queue is bounded), it never loses rows.
Closing the result stops the changefeed; a failure of the changefeed is raised from
the iteration.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from feedkv.changefeed.changefeed import Changefeed
from feedkv.changefeed.sink import Message, SinkError
from feedkv.sql.executor import Result
from feedkv.util.hlc import Timestamp

__all__ = ["COLUMNS", "ChannelSink", "FeedResult"]

COLUMNS = ("table", "key", "value")
_END = object()


class ChannelSink:
    """A sink whose "durable" is "handed to the reader": rows go straight into a
    bounded queue, in order."""

    def __init__(self, *, text: bool = True, capacity: int = 10_000) -> None:
        self._queue: queue.Queue[object] = queue.Queue(maxsize=capacity)
        self._text = text
        self._closed = threading.Event()
        self._ended = False

    def _put(self, item: object) -> None:
        while True:
            if self._closed.is_set():
                raise SinkError("the sinkless changefeed's reader went away")
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _out(self, data: bytes | None) -> str | bytes | None:
        if data is None or not self._text:
            return data
        return data.decode()

    def emit_row(self, message: Message) -> None:
        self._put((message.topic, self._out(message.key), self._out(message.value)))

    def flush(self) -> None:
        pass

    def reset(self) -> None:
        pass  # nothing is held back; a reader that went away stays gone

    def emit_resolved(self, ts: Timestamp, topics: Iterable[str]) -> None:
        self._put((None, None, self._out(f'{{"resolved": "{ts}"}}'.encode())))

    def end(self, error: BaseException | None = None) -> None:
        """The changefeed is over; the reader gets ``error`` (if any) after the rows."""
        with contextlib.suppress(SinkError):
            self._put(error if error is not None else _END)

    def take(self) -> Iterator[tuple[Any, ...]]:
        while True:
            row = self.poll(None)
            if row is None:
                return
            yield row

    def poll(self, timeout: float | None) -> tuple[Any, ...] | None:
        """The next row, waiting up to ``timeout`` seconds (``None``: for ever); ``None``
        when the feed has ended. Raises TimeoutError when no row came in time, and the
        changefeed's error if it failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._ended:
                return None
            wait = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            try:
                item = self._queue.get(timeout=max(0.0, wait))
                break
            except queue.Empty:
                if self._closed.is_set():
                    self._ended = True  # closed by the reader: whatever is left is dropped
                    return None
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"no changefeed row within {timeout} s") from None
        if item is _END:
            self._ended = True
            return None
        if isinstance(item, BaseException):
            self._ended = True
            raise item
        return item  # type: ignore[return-value]

    def close(self) -> None:
        self._closed.set()


@dataclass(frozen=True)
class FeedResult(Result):
    """The result of a sinkless changefeed: iterating it blocks for each next row until
    the changefeed ends (``initial_scan='only'``, ``end_time``) or :meth:`close` is
    called from another thread. ``len()`` is not known; ``rows`` stays empty."""

    changefeed: Changefeed | None = None
    channel: ChannelSink = field(default_factory=ChannelSink)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        try:
            yield from self.channel.take()
        finally:
            self.close()

    def poll(self, timeout: float | None = None) -> tuple[Any, ...] | None:
        """The next row within ``timeout`` seconds (TimeoutError if none came), or
        ``None`` once the changefeed has ended."""
        return self.channel.poll(timeout)

    def __len__(self) -> int:
        raise TypeError("a changefeed's rows stream: iterate them instead of counting")

    def close(self) -> None:
        """Stop the changefeed. Idempotent."""
        if self.changefeed is not None:
            self.changefeed.close()
        self.channel.close()
