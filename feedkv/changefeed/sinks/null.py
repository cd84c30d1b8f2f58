"""``null://``: a sink that takes everything and keeps nothing (for benchmarks)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.sink import Message, SinkError, SinkURI
from feedkv.util.hlc import Timestamp

__all__ = ["NullSink", "make"]


class NullSink:
    def __init__(self) -> None:
        self.rows = 0
        self.resolved: Timestamp | None = None
        self._closed = False

    def emit_row(self, message: Message) -> None:
        if self._closed:
            raise SinkError("the null sink is closed")
        self.rows += 1

    def flush(self) -> None:
        pass

    def emit_resolved(self, ts: Timestamp, topics: Iterable[str]) -> None:
        self.resolved = ts

    def close(self) -> None:
        self._closed = True

    def reset(self) -> None:
        pass


def make(uri: SinkURI, options: ChangefeedOptions, **_: Any) -> NullSink:
    return NullSink()
