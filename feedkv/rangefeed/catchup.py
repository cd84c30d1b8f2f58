"""The catch-up scan: a registration's history from its snapshot.

Sends every committed version in the registration's span above ``start_ts`` that the
snapshot holds, by timestamp and so oldest first per key (an incremental export over the
committed-change time index, see :mod:`feedkv.storage.export`), with the replaced value
when the registration asked for diffs. Intents are not history: those committed later
reach the registration live, as their resolution is applied.
"""

from __future__ import annotations

from collections.abc import Iterator

from feedkv.rangefeed.event import Value
from feedkv.storage.engine import Reader
from feedkv.storage.export import iter_export
from feedkv.util.hlc import MAX_TIMESTAMP, Timestamp
from feedkv.util.keys import Span

__all__ = ["catch_up"]


def catch_up(reader: Reader, span: Span, start_ts: Timestamp, with_diff: bool) -> Iterator[Value]:
    """Values in ``span`` with ``ts > start_ts`` (raises
    :class:`~feedkv.errors.BatchTimestampBeforeGCError` if that history was collected)."""
    for version in iter_export(reader, span, start_ts, MAX_TIMESTAMP, with_diff=with_diff):
        yield Value(version.key, version.value, version.ts, version.prev_value)
