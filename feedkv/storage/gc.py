"""Garbage collection of old versions, and the thresholds that make it safe.

``gc(rw, span, threshold)`` keeps, for every key in ``span``, all versions above
``threshold`` and the newest version at or below it (dropped too if it is a tombstone):
exactly what reads at or above the threshold can see. It records the threshold for the
span in the same transaction, and from then on reads below it, and exports starting
below it, raise :class:`BatchTimestampBeforeGCError` instead of returning partial
history. Thresholds are kept per span (sorted, non-overlapping records keyed by start)
and only move forward.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from feedkv.errors import BatchTimestampBeforeGCError
from feedkv.storage.engine import Reader, ReadWriter
from feedkv.storage.mvcc_key import (
    SUFFIX_LEN,
    decode_version_key,
    encode_change_key,
    key_versions_start,
)
from feedkv.storage.schema import CHANGES, GC_THRESHOLDS, VERSIONS
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = [
    "DEFAULT_GC_TTL_NS",
    "GCResult",
    "check_gc_threshold",
    "forward_threshold",
    "gc",
    "gc_threshold",
]

DEFAULT_GC_TTL_NS = 4 * 3600 * 1_000_000_000  # history a store keeps, unless configured

_RECORD = struct.Struct(">QI")
_TAG = b"t"  # NB: record keys are tagged: LMDB refuses the empty key a span from KEY_MIN has


def _record_key(start: bytes) -> bytes:
    return _TAG + start


@dataclass(frozen=True, slots=True)
class GCResult:
    keys_seen: int
    versions_removed: int


def _records(reader: Reader, span: Span) -> list[tuple[bytes, bytes, Timestamp]]:
    """Threshold records ``(start, end, ts)`` overlapping ``span``, in key order."""
    records = []
    first = _record_key(span.start + b"\x00")
    before = reader.seek_before(GC_THRESHOLDS, first)
    if before is not None:
        key, raw = before
        end = raw[_RECORD.size :]
        if end > span.start:
            records.append((key[len(_TAG) :], end, Timestamp(*_RECORD.unpack_from(raw))))
    for key, raw in reader.scan(GC_THRESHOLDS, first, _record_key(span.end)):
        ts = Timestamp(*_RECORD.unpack_from(raw))
        records.append((key[len(_TAG) :], raw[_RECORD.size :], ts))
    return records


def gc_threshold(reader: Reader, span: Span) -> Timestamp:
    """The highest garbage-collection threshold anywhere in ``span``."""
    records = _records(reader, span)
    return max((ts for _, _, ts in records), default=Timestamp(0, 0))


def check_gc_threshold(reader: Reader, span: Span, ts: Timestamp, what: str = "read") -> None:
    """Raise :class:`BatchTimestampBeforeGCError` if history at ``ts`` in ``span`` is gone."""
    item = reader.seek_before(GC_THRESHOLDS, _record_key(span.end))
    if item is None:
        return  # no thresholds at or before this span: the common, fast case
    threshold = gc_threshold(reader, span)
    if ts < threshold:
        raise BatchTimestampBeforeGCError(ts, threshold, what)


def forward_threshold(rw: ReadWriter, span: Span, threshold: Timestamp) -> None:
    """Raise ``span``'s threshold to ``threshold`` where it is lower (a range moved here
    brings its own)."""
    pieces: list[tuple[bytes, bytes, Timestamp]] = []
    cursor = span.start
    old = _records(rw, span)
    for start, end, ts in old:
        if start < span.start:
            pieces.append((start, span.start, ts))
        if start > cursor:
            pieces.append((cursor, start, threshold))
        inner_start, inner_end = max(start, span.start), min(end, span.end)
        pieces.append((inner_start, inner_end, max(ts, threshold)))
        cursor = inner_end
        if end > span.end:
            pieces.append((span.end, end, ts))
    if cursor < span.end:
        pieces.append((cursor, span.end, threshold))
    for start, _, _ in old:
        rw.delete(GC_THRESHOLDS, _record_key(start))
    for start, end, ts in pieces:
        rw.put(GC_THRESHOLDS, _record_key(start), _RECORD.pack(ts[0], ts[1]) + end)


def gc(rw: ReadWriter, span: Span, threshold: Timestamp) -> GCResult:
    """Remove versions in ``span`` no read at or above ``threshold`` can see."""
    forward_threshold(rw, span, threshold)
    low = key_versions_start(span.start)
    high = key_versions_start(span.end)
    doomed: list[tuple[bytes, Timestamp, bytes]] = []
    keys_seen = 0
    current: bytes | None = None
    kept = False
    for raw_key, raw_value in rw.scan(VERSIONS, low, high):
        escaped = raw_key[:-SUFFIX_LEN]
        if escaped != current:
            current, kept = escaped, False
            keys_seen += 1
        key, ts = decode_version_key(raw_key)
        if ts > threshold:
            continue
        if not kept:
            kept = True
            if raw_value:  # the newest version at or below the threshold stays, if live
                continue
        doomed.append((raw_key, ts, key))
    for raw_key, ts, key in doomed:
        rw.delete(VERSIONS, raw_key)
        rw.delete(CHANGES, encode_change_key(ts, key))
    return GCResult(keys_seen, len(doomed))
