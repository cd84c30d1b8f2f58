"""Incremental export: the committed changes in a span within a time window.

``iter_export(reader, span, lo, hi)`` yields every committed version in ``span`` with a
timestamp in ``(lo, hi]`` (``lo`` exclusive, ``hi`` inclusive), ordered by timestamp and
then key, so each key's versions come oldest first. With ``with_diff`` each version
carries the value it replaced. It walks the ``changes`` time index, so its cost is the
number of changes in the window (store-wide), not the amount of data in the span, and
reads them sequentially (each index entry carries its value; only ``with_diff`` seeks
into the versions).

The index is store-wide, so a narrow span over a long window pays for every change the
store took: :func:`span_pages` reads the same versions from the span's own versions
instead (by key, each key's versions oldest first), and :func:`cheaper_by_key` says when
that reads fewer entries (the window holding more than twice the span's versions),
counting them. A rangefeed's catch-up scan uses both, so that each range of a feed over
many pays for what it holds, not for the whole store.

Intents are not versions: :func:`export` reports the intents in the span that could
still commit inside the window (write timestamp ``<= hi``) separately; the rangefeed's
initial intent scan and a caller checking that a window is final both need them.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import compress, islice, repeat
from operator import and_, itemgetter
from typing import NamedTuple

from feedkv.errors import InvalidArgumentError
from feedkv.storage.engine import Reader
from feedkv.storage.gc import check_gc_threshold
from feedkv.storage.intent import Intent
from feedkv.storage.mvcc import scan_intents, version_at
from feedkv.storage.mvcc_key import (
    TOMBSTONE,
    change_user_key,
    decode_change_timestamps,
    decode_version_keys,
    decode_version_value,
    encode_change_key,
    encode_ts,
    encode_version_value,
    escaped_keys,
    key_versions_start,
    version_suffix,
    version_suffixes,
)
from feedkv.storage.schema import CHANGES, VERSIONS
from feedkv.util.hlc import MAX_TIMESTAMP, Timestamp
from feedkv.util.keys import Span

__all__ = [
    "PAGE_BYTES",
    "PAGE_ENTRIES",
    "ExportPage",
    "ExportResult",
    "ExportedVersion",
    "cheaper_by_key",
    "export",
    "export_pages",
    "iter_export",
    "span_pages",
]


class ExportedVersion(NamedTuple):
    """A committed version (a named tuple: an export makes one per version)."""

    key: bytes
    ts: Timestamp
    value: bytes | None  # None: a deletion
    prev_value: bytes | None = None  # with_diff only: the value this version replaced


@dataclass(frozen=True, slots=True)
class ExportResult:
    versions: list[ExportedVersion]
    intents: list[Intent]


PAGE_ENTRIES = 1024  # index entries read for a page of export_pages, at most
PAGE_BYTES = 1 << 20  # about this many bytes of them
# Entries read at once while a page fills: each chunk costs Python steps. A chunk is
# read as LMDB's pairs and split into columns by two passes of an itemgetter, in C: a
# pair costs py-lmdb one cursor step, which lets go of the GIL twice (the step and the
# value's preload), where reading keys and values with two cursors (no pair made) let
# go of it three times, and zip(*chunk) made an iterator per pair. A chunk of a whole
# page sets off the cyclic GC once (its pairs pass 700 new objects); half-page chunks
# measured no faster, the Python steps per chunk paid twice.
_CHUNK = 1024


@dataclass(frozen=True, slots=True)
class ExportPage:
    """Consecutive exported versions as columns, row ``i`` being ``(keys[i],
    timestamps[i], values[i], prev_values[i])``; ``prev_values`` is ``None`` without
    ``with_diff``. Versions written together share one ``Timestamp`` object.
    ``value_bytes`` is the length of the values together (what a memory budget charges
    for them, known from the read without a pass over them)."""

    keys: list[bytes]
    timestamps: list[Timestamp]
    values: list[bytes | None]  # None: a deletion
    value_bytes: int
    prev_values: list[bytes | None] | None = None


def iter_export(
    reader: Reader,
    span: Span,
    lo: Timestamp,
    hi: Timestamp,
    *,
    with_diff: bool = False,
    start_at: tuple[Timestamp, bytes] | None = None,
    page_size: int = PAGE_ENTRIES,
) -> Iterator[ExportedVersion]:
    """Committed versions in ``span`` with ``lo < ts <= hi``, by (timestamp, key);
    ``start_at`` (a timestamp and key) skips the versions ordered before it. The index is
    read ``page_size`` entries ahead (see :func:`export_pages`): a caller that wants only
    a few versions says so."""
    pages = export_pages(
        reader, span, lo, hi, with_diff=with_diff, start_at=start_at, page_size=page_size
    )
    for page in pages:
        prev_values = repeat(None) if page.prev_values is None else page.prev_values
        columns = zip(page.keys, page.timestamps, page.values, prev_values, strict=False)
        yield from map(_new_version, columns)


def export_pages(
    reader: Reader,
    span: Span,
    lo: Timestamp,
    hi: Timestamp,
    *,
    with_diff: bool = False,
    start_at: tuple[Timestamp, bytes] | None = None,
    page_size: int = PAGE_ENTRIES,
    page_bytes: int = PAGE_BYTES,
) -> Iterator[ExportPage]:
    """:func:`iter_export`'s versions as pages of columns, never empty.

    A page is made from at most ``page_size`` entries of the (store-wide) index, and from
    about ``page_bytes`` of them: entries are read in chunks sized by the values seen
    (see :class:`_Chunks`), so big values are read a few at a time, and each chunk is
    decoded column by column in C as it is read; Python code runs per version only for a
    chunk holding a deletion or a key outside ``span``, and with ``with_diff`` (a seek
    per version for the value it replaced)."""
    _check_export(reader, span, lo, hi, page_size, page_bytes)
    index_start = encode_ts(lo.next())
    if start_at is not None:
        if not lo < start_at[0] <= hi:
            raise InvalidArgumentError(f"export resumes at {start_at[0]}, outside ({lo}, {hi}]")
        index_start = encode_change_key(*start_at)
    index_end = None if hi == MAX_TIMESTAMP else encode_ts(hi.next())
    chunks = _Chunks(reader.scan(CHANGES, index_start, index_end), page_size, page_bytes)
    while True:
        page = _change_page(chunks, span)
        if page is None:
            return
        keys, timestamps, values, value_bytes = page
        if not keys:
            continue  # NB: every entry read was outside the span
        prev_values = None
        if with_diff:
            prev_values = [
                _value_of(version_at(reader, key, ts.prev()))
                for key, ts in zip(keys, timestamps, strict=True)
            ]
        yield ExportPage(keys, timestamps, values, value_bytes, prev_values)


def _change_page(
    chunks: _Chunks, span: Span
) -> tuple[list[bytes], list[Timestamp], list[bytes | None], int] | None:
    """A page of time index entries decoded into columns of the keys in ``span``, their
    timestamps and values, and the values' length together; ``None`` once the index is
    read. Each chunk is decoded as it is read, while its entries are in the processor's
    cache, and let go: a page never holds its entries undecoded."""
    keys: list[bytes] = []
    timestamps: list[Timestamp] = []
    values: list[bytes | None] = []
    value_bytes = 0
    read = False
    for raws, raw_values, raw_bytes in chunks.page():
        read = True
        chunk_keys = list(map(change_user_key, raws))
        chunk_timestamps = decode_change_timestamps(raws, timestamps[-1] if timestamps else None)
        lowest, highest = _key_bounds(chunk_keys, chunk_timestamps)
        if lowest < span.start or highest >= span.end:
            inside = list(
                map(and_, map(span.start.__le__, chunk_keys), map(span.end.__gt__, chunk_keys))
            )
            chunk_keys = list(compress(chunk_keys, inside))
            chunk_timestamps = list(compress(chunk_timestamps, inside))
            raw_values = list(compress(raw_values, inside))
            raw_bytes = sum(map(len, raw_values))
        if all(raw_values):  # NB: no deletion (a stored deletion is empty)
            chunk_values: list[bytes | None] = list(_untagged(raw_values))
            chunk_bytes = raw_bytes - _TAG_BYTES * len(raw_values)
        else:
            chunk_values, chunk_bytes = _decode_values(raw_values, raw_bytes)
        value_bytes += chunk_bytes
        if keys:
            keys += chunk_keys
            timestamps += chunk_timestamps
            values += chunk_values
        else:  # NB: a page's first chunk (often all of it) is its columns, not copied
            keys, timestamps, values = chunk_keys, chunk_timestamps, chunk_values
    return (keys, timestamps, values, value_bytes) if read else None


def _key_bounds(keys: list[bytes], timestamps: list[Timestamp]) -> tuple[bytes, bytes]:
    """The lowest and highest of a chunk of the time index's keys, with their timestamps,
    in the index's order: each run of one timestamp holds its keys in order, so its first
    and last bound it. A chunk of up to ``_BOUNDED_RUNS`` runs (a few transactions') is
    bounded by bisection, with no pass over its keys; one of more, by a pass."""
    lowest, highest = keys[0], keys[-1]
    if timestamps[0] == timestamps[-1]:
        return lowest, highest
    start = 0
    for _ in range(_BOUNDED_RUNS):
        end = bisect_right(timestamps, timestamps[start], start + 1)
        lowest, highest = min(lowest, keys[start]), max(highest, keys[end - 1])
        if end == len(keys):
            return lowest, highest
        start = end
    return min(keys), max(keys)


_BOUNDED_RUNS = 4


def span_pages(
    reader: Reader,
    span: Span,
    lo: Timestamp,
    hi: Timestamp,
    *,
    with_diff: bool = False,
    page_size: int = PAGE_ENTRIES,
    page_bytes: int = PAGE_BYTES,
) -> Iterator[ExportPage]:
    """:func:`export_pages`' versions read from the span's own versions instead of the
    store-wide time index: the cost is every version stored in ``span``, whatever its
    timestamp (and up to a page of the keys before it, read to find where it starts),
    instead of every change the store took in the window.

    The versions are read backward, so keys come in descending order, each key's versions
    oldest first (the order a rangefeed needs), and a page's newest version can be anywhere
    in it. With ``with_diff`` a version's previous value is the version read just before
    it, with no seek."""
    _check_export(reader, span, lo, hi, page_size, page_bytes)
    first = key_versions_start(span.start)
    entries = reader.scan(VERSIONS, b"", key_versions_start(span.end), reverse=True)
    chunks = _Chunks(entries, page_size, page_bytes)
    after_lo = version_suffix(lo)  # a version whose suffix sorts below this is above lo
    up_to_hi = None if hi == MAX_TIMESTAMP else version_suffix(hi)
    before: tuple[bytes, bytes] | None = None  # with_diff: the last entry of the last page
    while True:
        raws, raw_values, raw_bytes = _read_page(chunks)
        ended = not raws or raws[-1] < first
        if ended:  # NB: descending, so the entries below the span are a tail
            inside = bisect_left(raws, True, key=first.__gt__)
            if inside < len(raws):
                raws, raw_values = raws[:inside], raw_values[:inside]
                raw_bytes = sum(map(len, raw_values))
        if not raws:
            return
        prev_values = None
        if with_diff:
            prev_values, before = _previous_values(raws, raw_values, before)
        suffixes = version_suffixes(raws)
        if max(suffixes) >= after_lo or (up_to_hi is not None and min(suffixes) < up_to_hi):
            keep = list(map(after_lo.__gt__, suffixes))
            if up_to_hi is not None:
                keep = list(map(and_, keep, map(up_to_hi.__le__, suffixes)))
            raws = list(compress(raws, keep))
            raw_values = list(compress(raw_values, keep))
            raw_bytes = sum(map(len, raw_values))
            suffixes = list(compress(suffixes, keep))
            if prev_values is not None:
                prev_values = list(compress(prev_values, keep))
        if raws:
            keys, timestamps = decode_version_keys(raws, suffixes)
            values, value_bytes = _decode_values(raw_values, raw_bytes)
            yield ExportPage(keys, timestamps, values, value_bytes, prev_values)
        if ended:
            return


def _previous_values(
    raws: list[bytes], raw_values: list[bytes], before: tuple[bytes, bytes] | None
) -> tuple[list[bytes | None], tuple[bytes, bytes]]:
    """For entries read backward (``before`` the one read just ahead of them), each one's
    previous value: the entry read before it, if of the same key; and the last entry, for
    the next page."""
    keys = escaped_keys(raws)
    # NB: with nothing before, a stand-in whose value decodes as none (a deletion's)
    earlier = [before] if before is not None else [(b"", TOMBSTONE)]
    earlier += zip(keys[:-1], raw_values[:-1], strict=True)
    previous = [
        decode_version_value(value) if earlier_key == key else None
        for key, (earlier_key, value) in zip(keys, earlier, strict=True)
    ]
    return previous, (keys[-1], raw_values[-1])


def cheaper_by_key(reader: Reader, span: Span, lo: Timestamp) -> bool:
    """Whether :func:`span_pages` reads fewer entries than :func:`export_pages` for
    ``span`` after ``lo``: the span's versions against the store's changes after ``lo``.

    The index, and so timestamp order, is kept unless the window holds more than twice
    the span's versions. Both are counted rather than read (keys only, about a third of
    the cost of reading an entry), and no further than the choice needs: a window of up
    to ``_SMALL_WINDOW`` changes (a feed resuming from a recent checkpoint) is counted
    whole, then the span's versions up to half of it; past that, the span's versions are
    counted up to half the index, then the window up to twice them. A span holding every
    version is found with two seeks, not counted."""
    start, end = key_versions_start(span.start), key_versions_start(span.end)
    window_start = encode_ts(lo.next())
    if _holds_every_version(reader, start, end):
        versions = reader.entries(VERSIONS)
        if 2 * versions >= reader.entries(CHANGES):
            return False  # the whole index is at most twice the span
    else:
        window = reader.count(CHANGES, window_start, None, _SMALL_WINDOW + 1)
        if window <= _SMALL_WINDOW:
            return window > 2 * reader.count(VERSIONS, start, end, window // 2 + 1)
        changes = reader.entries(CHANGES)
        versions = reader.count(VERSIONS, start, end, (changes + 1) // 2)
        if 2 * versions >= changes:
            return False  # the whole index is at most twice the span
    oldest = reader.seek(CHANGES, b"")
    if oldest is not None and oldest[0] >= window_start:
        return True  # the window holds the whole index: no need to count it
    limit = 2 * versions
    return reader.count(CHANGES, window_start, None, limit + 1) > limit


_SMALL_WINDOW = 8192  # changes counted whole before weighing a span against the index


def _holds_every_version(reader: Reader, start: bytes, end: bytes) -> bool:
    """Whether there are versions and ``[start, end)`` holds them all (a range that is
    the whole store, say): a seek at each end."""
    first = reader.seek(VERSIONS, b"")
    last = next(reader.scan(VERSIONS, b"", None, reverse=True), None)
    return first is not None and last is not None and start <= first[0] and last[0] < end


def _check_export(
    reader: Reader, span: Span, lo: Timestamp, hi: Timestamp, page_size: int, page_bytes: int
) -> None:
    if hi < lo:
        raise InvalidArgumentError(f"export window ({lo}, {hi}] is inverted")
    if page_size < 1 or page_bytes < 1:
        raise InvalidArgumentError(
            f"export pages need room for a version: page_size={page_size}, page_bytes={page_bytes}"
        )
    check_gc_threshold(reader, span, lo, "export")


def _read_page(chunks: _Chunks) -> tuple[list[bytes], list[bytes], int]:
    """A page of entries as a column of keys, one of values and the values' length
    together."""
    keys: list[bytes] = []
    values: list[bytes] = []
    size = 0
    for chunk_keys, chunk_values, chunk_bytes in chunks.page():
        keys += chunk_keys
        values += chunk_values
        size += chunk_bytes
    return keys, values, size


class _Chunks:
    """A scan's entries read a page at a time, each page up to ``page_size`` entries and
    about ``page_bytes`` of values, in chunks of up to ``_CHUNK``: as many entries of the
    mean value length seen so far as still fit in the page (one, at the scan's start), so
    a run of big values is read a few at a time, and a run of small ones in full chunks."""

    __slots__ = ("entries", "mean", "page_bytes", "page_size")

    def __init__(
        self, entries: Iterator[tuple[bytes, bytes]], page_size: int, page_bytes: int
    ) -> None:
        self.entries = entries
        self.page_size = page_size
        self.page_bytes = page_bytes
        self.mean = 0  # the last chunk's mean value length (at least 1; 0: none read)

    def page(self) -> Iterator[tuple[list[bytes], list[bytes], int]]:
        """The next page's chunks: each a column of keys, one of values, and the values'
        length together (none: the entries ran out)."""
        read = size = 0
        largest = self.mean  # NB: the largest mean of a chunk of this page
        while read < self.page_size and size < self.page_bytes:
            room = self.page_size - read
            room = min(room, _CHUNK, max(1, (self.page_bytes - size) // largest)) if largest else 1
            chunk = tuple(islice(self.entries, room))
            if not chunk:
                return
            keys = list(map(_KEY, chunk))
            values = list(map(_VALUE, chunk))
            del chunk  # NB: its pairs go before the next chunk's are read
            chunk_bytes = sum(map(len, values))
            self.mean = max(1, chunk_bytes // len(keys))  # NB: at least 1, for deletions
            largest = max(largest, self.mean)
            size += chunk_bytes
            read += len(keys)
            yield keys, values, chunk_bytes


def _decode_values(raw_values: Sequence[bytes], raw_bytes: int) -> tuple[list[bytes | None], int]:
    """Version values as stored (``raw_bytes`` long together) decoded, and their length
    together: a value less its tag, a deletion none."""
    values: list[bytes | None] = list(_untagged(raw_values))
    deletions = 0
    if TOMBSTONE in raw_values:
        values = [v if raw else None for v, raw in zip(values, raw_values, strict=True)]
        deletions = raw_values.count(TOMBSTONE)
    return values, raw_bytes - _TAG_BYTES * (len(raw_values) - deletions)


_KEY, _VALUE = itemgetter(0), itemgetter(1)  # of a scan's pair
_new_version = partial(tuple.__new__, ExportedVersion)


def _untagged(raw_values: Iterable[bytes]) -> Iterator[bytes]:
    """Stored values less their tag (a deletion stays empty), sliced in C."""
    # NB: bytes.removeprefix, not an itemgetter of a slice: a catch-up of 100k values took
    # 2% less CPU a value (Python 3.11); a stored value always starts with the tag
    return map(bytes.removeprefix, raw_values, repeat(_TAG))


_TAG = encode_version_value(b"")  # what a stored value has before the value
_TAG_BYTES = len(_TAG)  # what a stored value adds to the value


def _value_of(version: tuple[Timestamp, bytes | None] | None) -> bytes | None:
    return None if version is None else version[1]


def export(
    reader: Reader, span: Span, lo: Timestamp, hi: Timestamp, *, with_diff: bool = False
) -> ExportResult:
    """:func:`iter_export` materialized, plus the intents that could still land in the window."""
    versions = list(iter_export(reader, span, lo, hi, with_diff=with_diff))
    return ExportResult(versions, scan_intents(reader, span, max_ts=hi))
