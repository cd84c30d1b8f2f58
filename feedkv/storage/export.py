"""Incremental export: the committed changes in a span within a time window.

``iter_export(reader, span, lo, hi)`` yields every committed version in ``span`` with a
timestamp in ``(lo, hi]`` (``lo`` exclusive, ``hi`` inclusive), ordered by timestamp and
then key, so each key's versions come oldest first. With ``with_diff`` each version
carries the value it replaced. It walks the ``changes`` time index, so its cost is the
number of changes in the window (store-wide), not the amount of data in the span, and
reads them sequentially (each index entry carries its value; only ``with_diff`` seeks
into the versions).

Intents are not versions: :func:`export` reports the intents in the span that could
still commit inside the window (write timestamp ``<= hi``) separately; the rangefeed's
initial intent scan and a caller checking that a window is final both need them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from feedkv.errors import InvalidArgumentError
from feedkv.storage.engine import Reader
from feedkv.storage.gc import check_gc_threshold
from feedkv.storage.intent import Intent
from feedkv.storage.mvcc import scan_intents, version_at
from feedkv.storage.mvcc_key import (
    decode_change_key,
    encode_change_key,
    encode_ts,
)
from feedkv.storage.schema import CHANGES
from feedkv.util.hlc import MAX_TIMESTAMP, Timestamp
from feedkv.util.keys import Span

__all__ = ["ExportResult", "ExportedVersion", "export", "iter_export"]


@dataclass(frozen=True, slots=True)
class ExportedVersion:
    key: bytes
    ts: Timestamp
    value: bytes | None  # None: a deletion
    prev_value: bytes | None = None  # with_diff only: the value this version replaced


@dataclass(frozen=True, slots=True)
class ExportResult:
    versions: list[ExportedVersion]
    intents: list[Intent]


def iter_export(
    reader: Reader,
    span: Span,
    lo: Timestamp,
    hi: Timestamp,
    *,
    with_diff: bool = False,
    start_at: tuple[Timestamp, bytes] | None = None,
) -> Iterator[ExportedVersion]:
    """Committed versions in ``span`` with ``lo < ts <= hi``, by (timestamp, key);
    ``start_at`` (a timestamp and key) skips the versions ordered before it."""
    if hi < lo:
        raise InvalidArgumentError(f"export window ({lo}, {hi}] is inverted")
    check_gc_threshold(reader, span, lo, "export")
    start_key, end_key = span.start, span.end
    index_start = encode_ts(lo.next())
    if start_at is not None:
        if not lo < start_at[0] <= hi:
            raise InvalidArgumentError(f"export resumes at {start_at[0]}, outside ({lo}, {hi}]")
        index_start = encode_change_key(*start_at)
    index_end = None if hi == MAX_TIMESTAMP else encode_ts(hi.next())
    for raw, raw_value in reader.scan(CHANGES, index_start, index_end):
        ts, key = decode_change_key(raw)
        if key < start_key or key >= end_key:
            continue
        value = raw_value[1:] if raw_value else None
        if not with_diff:
            yield ExportedVersion(key, ts, value)
            continue
        replaced = version_at(reader, key, ts.prev())
        yield ExportedVersion(key, ts, value, replaced[1] if replaced is not None else None)


def export(
    reader: Reader, span: Span, lo: Timestamp, hi: Timestamp, *, with_diff: bool = False
) -> ExportResult:
    """:func:`iter_export` materialized, plus the intents that could still land in the window."""
    versions = list(iter_export(reader, span, lo, hi, with_diff=with_diff))
    return ExportResult(versions, scan_intents(reader, span, max_ts=hi))
