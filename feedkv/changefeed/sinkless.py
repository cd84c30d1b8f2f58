"""Sinkless changefeeds: ``EXPERIMENTAL CHANGEFEED FOR t`` streams rows back to the
SQL client.

The changefeed runs in a thread of the client's process and emits into a
:class:`ChannelSink`, a bounded buffer; the statement's :class:`FeedResult` yields the
rows as they arrive: ``(table, key, value)``, with resolved markers as ``(None, None,
'{"resolved":"..."}')`` (``{"__crdb__":{"resolved":"..."}}`` outside the wrapped
envelope, as CockroachDB writes them). JSON keys and values are text, Avro ones bytes;
with ``format=csv`` (``initial_scan='only'``) the key is ``None`` and the value the row's
CSV line, as CockroachDB's CSV encoder writes them. A consumer
that stops reading stalls the feed (the buffer is bounded), it never loses rows.
Closing the result stops the changefeed; a failure of the changefeed is raised from
the iteration.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from feedkv.changefeed.changefeed import Changefeed
from feedkv.changefeed.encoder import resolved_json
from feedkv.changefeed.file_formats import csv_bytes
from feedkv.changefeed.sink import Message, SinkError
from feedkv.sql.execution import Result
from feedkv.sql.interrupt import STATEMENT_TIMEOUT, QueryCanceled
from feedkv.util.hlc import Timestamp

__all__ = ["COLUMNS", "ChannelSink", "FeedResult"]

COLUMNS = ("table", "key", "value")
_END = object()


class ChannelSink:
    """A sink whose "durable" is "handed to the reader": rows go into a bounded
    buffer, in order, and the reader takes everything buffered at once. A row costs
    the changefeed an append under a lock, not a queue's put with its waits: a queue
    per row held the sinkless initial scan to 70% of the null sink's rate."""

    def __init__(
        self,
        *,
        text: bool = True,
        capacity: int = 10_000,
        envelope: str = "wrapped",
        csv: bool = False,
    ) -> None:
        self._text = text
        self._csv = csv
        self._envelope = envelope
        self._capacity = capacity
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # rows came, room freed, closed
        self._buffer: deque[object] = deque()  # the writer's side
        self._taken: deque[object] = deque()  # the reader's side, read without the lock
        self._reader_waits = False
        self._writer_waits = False
        self._closed = False
        self._ended = False
        self._deadline: float | None = None  # see stop_at

    def stop_at(self, deadline: float) -> None:
        """The reader's next wait past ``deadline`` (``time.monotonic()``) raises 57014
        (the statement's ``statement_timeout``) instead of a row."""
        self._deadline = deadline

    def _put(self, item: object) -> None:
        with self._lock:
            while len(self._buffer) >= self._capacity and not self._closed:
                self._writer_waits = True
                self._changed.wait()
            if self._closed:
                raise SinkError("the sinkless changefeed's reader went away")
            self._buffer.append(item)
            if self._reader_waits:
                self._reader_waits = False
                self._changed.notify_all()

    def _out(self, data: bytes | None) -> str | bytes | None:
        if data is None or not self._text:
            return data
        return data.decode()

    def emit_row(self, message: Message) -> None:
        if self._csv:
            # NB: a row format's message carries the row, not an encoded value. As
            # CockroachDB's CSV encoder, the key is NULL and the value one CSV line
            # with no line end.
            line = csv_bytes([message])[:-1]
            self._put((message.topic, None, self._out(line)))
            return
        self._put((message.topic, self._out(message.key), self._out(message.value)))

    def flush(self) -> None:
        pass

    def reset(self) -> None:
        pass  # nothing is held back; a reader that went away stays gone

    def emit_resolved(self, ts: Timestamp, topics: Iterable[str]) -> None:
        self._put((None, None, self._out(resolved_json(ts, self._envelope))))

    def end(self, error: BaseException | None = None) -> None:
        """The changefeed is over; the reader gets ``error`` (if any) after the rows."""
        with contextlib.suppress(SinkError):
            self._put(error if error is not None else _END)

    def take(self) -> Iterator[tuple[Any, ...]]:
        """Every row until the feed ends (raising the changefeed's error, if it failed)."""
        while not self._ended:
            taken = self._taken
            while taken:
                item = taken.popleft()
                if type(item) is not tuple:
                    self._finish(item)
                    return
                yield item
            if not self._refill(None):
                self._ended = True  # closed by the reader: whatever is left is dropped

    def poll(self, timeout: float | None) -> tuple[Any, ...] | None:
        """The next row, waiting up to ``timeout`` seconds (``None``: for ever); ``None``
        when the feed has ended. Raises TimeoutError when no row came in time, and the
        changefeed's error if it failed."""
        if self._ended:
            return None
        if not self._taken and not self._refill(timeout):
            self._ended = True
            return None
        item = self._taken.popleft()
        if type(item) is not tuple:
            self._finish(item)
            return None
        return item

    def _finish(self, item: object) -> None:
        """The feed's last item: the end, or the error it failed with (raised)."""
        self._ended = True
        if isinstance(item, BaseException):
            raise item

    def _refill(self, timeout: float | None) -> bool:
        """Take everything buffered, waiting for the first row; ``False`` if closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        stop = self._deadline
        with self._lock:
            while True:
                now = time.monotonic()
                if stop is not None and now >= stop:  # NB: if rows still come, too
                    raise QueryCanceled(STATEMENT_TIMEOUT)
                if self._buffer:
                    break
                if self._closed:
                    return False
                left = None if deadline is None else deadline - now
                if left is not None and left <= 0:
                    raise TimeoutError(f"no changefeed row within {timeout} s")
                if stop is not None:
                    left = stop - now if left is None else min(left, stop - now)
                self._reader_waits = True
                self._changed.wait(left)
            self._taken, self._buffer = self._buffer, self._taken
            if self._writer_waits:
                self._writer_waits = False
                self._changed.notify_all()
        return True

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._changed.notify_all()


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

    def stop_at(self, deadline: float) -> None:
        self.channel.stop_at(deadline)

    def __len__(self) -> int:
        raise TypeError("a changefeed's rows stream: iterate them instead of counting")

    def close(self) -> None:
        """Stop the changefeed. Idempotent."""
        if self.changefeed is not None:
            self.changefeed.close()
        self.channel.close()
