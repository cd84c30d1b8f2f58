"""``null://``: a sink that takes everything and keeps nothing (for benchmarks)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.sink import Message, SinkURI
from feedkv.util.hlc import Timestamp

__all__ = ["NullSink", "make"]


class NullSink:
    def __init__(self) -> None:
        self.rows = 0
        self.resolved: Timestamp | None = None

    def emit_row(self, message: Message) -> None:
        self.rows += 1

    def flush(self) -> None:
        pass

    def emit_resolved(self, ts: Timestamp, topics: Iterable[str]) -> None:
        self.resolved = ts

    def close(self) -> None:
        pass

    def reset(self) -> None:
        pass


def make(uri: SinkURI, options: ChangefeedOptions, **_: Any) -> NullSink:
    return NullSink()
