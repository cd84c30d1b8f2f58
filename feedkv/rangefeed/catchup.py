"""The catch-up scan: a registration's history from its snapshot.

Sends every committed version in the registration's span above ``start_ts`` that the
snapshot holds, oldest first per key, with the replaced value when the registration asked
for diffs: by timestamp from the store's committed-change time index, or by key from the
span's versions when the window holds more than twice as many changes (see
:mod:`feedkv.storage.export`), unless the consumer asked for timestamp order. Intents are
not history: those committed later reach the registration live, as their resolution is
applied.

The scan is the one place a feed makes an event per stored version at full speed, so its
pages keep the export's columns (:class:`~feedkv.rangefeed.event.ValueColumns`): the
service of remote feeds sends them as they are, and an in-process consumer's values are made from
them in C (see :func:`export_pages` for when Python code still runs per version).
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter

from feedkv.rangefeed.event import Value, ValueColumns
from feedkv.rangefeed.registration import columns_size, event_size
from feedkv.rangefeed.stream import ValueBatch
from feedkv.storage.engine import Reader
from feedkv.storage.export import cheaper_by_key, export_pages, span_pages
from feedkv.util.hlc import MAX_TIMESTAMP, Timestamp
from feedkv.util.keys import Span

__all__ = ["PAGE_BYTES", "PAGE_VALUES", "catch_up"]

PAGE_VALUES = 1024
PAGE_BYTES = 1 << 20


def catch_up(
    reader: Reader,
    span: Span,
    start_ts: Timestamp,  # exclusive
    with_diff: bool,
    *,
    page_values: int = PAGE_VALUES,
    page_bytes: int = PAGE_BYTES,
    by_key: bool = True,
) -> Iterator[tuple[ValueBatch, int]]:
    """The values in ``span`` with ``ts > start_ts``, in pages of at most ``page_values``
    values and ``page_bytes`` (a single bigger value is a page of its own), each
    with its size as the memory budget counts it (raises
    :class:`~feedkv.errors.BatchTimestampBeforeGCError` if that history was collected).

    Read from the time index, in timestamp order, unless ``by_key`` allows reading the
    span's own versions and the window holds more than twice as many changes (see
    :func:`~feedkv.storage.export.cheaper_by_key`): then by key. A range's scan so costs
    about what the range holds at most, not what the whole store changed since
    ``start_ts``. A consumer that needs timestamp order across keys (a changefeed whose
    schema changes cut its history, an etcd-style watch replaying revisions) says so."""
    by_key = by_key and cheaper_by_key(reader, span, start_ts)
    pages = (span_pages if by_key else export_pages)(
        reader,
        span,
        start_ts,
        MAX_TIMESTAMP,
        with_diff=with_diff,
        page_size=page_values,
        page_bytes=page_bytes,
    )
    for page in pages:
        size = columns_size(page.keys, page.value_bytes, page.prev_values)
        values = ValueColumns(page.keys, page.values, page.timestamps, page.prev_values, size=size)
        if size <= page_bytes:
            # NB: in timestamp order a page's last value is its newest
            newest = max(page.timestamps) if by_key else page.timestamps[-1]
            yield ValueBatch(values, newest), size
        else:
            yield from _cut(values.made(), page_bytes)


def _cut(values: list[Value], page_bytes: int) -> Iterator[tuple[ValueBatch, int]]:
    """``values`` in pages of at most ``page_bytes``, or of one bigger value (in any
    order: a page read by key has its newest value anywhere)."""
    page: list[Value] = []
    size = 0
    for value in values:
        value_size = event_size(value)
        if page and size + value_size > page_bytes:
            yield ValueBatch(page, max(map(_TS, page))), size
            page, size = [], 0
        page.append(value)
        size += value_size
    yield ValueBatch(page, max(map(_TS, page))), size


_TS = attrgetter("ts")
