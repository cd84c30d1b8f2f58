"""Offsets and partitions of the feedkv stream: pure logic, no Spark.

An offset is how far a stream has read (:class:`FeedOffset`): every change of the
watched spans at or below ``resolved``. While the initial scan is under way it also has
a ``scan_key``: the rows as of ``resolved`` with keys below it have been read (the scan
is cut into batches in key order when admission control asks for it). A changefeed job
whose tables were added ``WITH initial_scan`` (``ALTER CHANGEFEED ... ADD``) also has
``added_scans``: the added tables whose scan as of ``resolved`` has been read (the
batch that scans them goes from an offset without them to the same ``resolved`` with
them). A job whose high-water mark was moved (``ALTER CHANGEFEED ... SET cursor``) has
``cursor``, the cursor its offsets were written under: the batch from an offset of
another cursor (the query's checkpoint, from before the move) reads from the new cursor
instead (:meth:`FeedOffset.window_start`). Spark keeps offsets as JSON;
:meth:`FeedOffset.to_json` builds the dict in a fixed key order (``added_scans`` and
``cursor`` only when there are some), so the same offset is always the same text. The
end offset of a stream's first batch also has ``origin``, the stream's first offset's
timestamp: the query's first offset is made anew at each start, and a restart before
its first batch committed replays that batch from ``origin``
(:meth:`FeedOffset.replayed_from`).

A micro-batch goes from one offset to the next, and :func:`plan_pieces` cuts it into
:class:`Piece` objects, one per range it touches:

- a scan piece reads the rows of ``[start, end)`` as of ``ts``;
- a changes piece reads the committed changes with timestamps in ``(lo, hi]`` (an
  incremental export), so the batch is final, replayable and holds whole transactions
  as long as ``hi`` is at most the feed's resolved timestamp.

A batch is either part of the initial scan or a window of changes, never both.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from feedkv.errors import InvalidArgumentError
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["FeedOffset", "Piece", "plan_pieces"]


@dataclass(frozen=True, slots=True)
class FeedOffset:
    resolved: Timestamp
    scan_key: bytes | None = None  # None: no scan, or the scan is finished
    added_scans: tuple[int, ...] = ()  # added tables scanned as of resolved, ascending
    cursor: Timestamp | None = None  # the job's cursor when it was written (SET cursor)
    # the stream's first offset's timestamp, in the end offset of its first batch: a
    # query restarted before that batch committed replays it from there
    origin: Timestamp | None = None

    @property
    def scanning(self) -> bool:
        return self.scan_key is not None

    def window_start(self, end: FeedOffset) -> FeedOffset:
        """Where the batch from this offset to ``end`` reads from: here, or from
        ``end``'s cursor when the job's cursor moved between them (the batch reads every
        change after the new cursor, back or forward from here)."""
        if end.cursor is None or end.cursor == self.cursor:
            return self
        return FeedOffset(end.cursor, None, self.added_scans, end.cursor)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "resolved": str(self.resolved),
            "scan_key": self.scan_key.hex() if self.scan_key is not None else None,
        }
        if self.added_scans:
            data["added_scans"] = list(self.added_scans)
        if self.cursor is not None:
            data["cursor"] = str(self.cursor)
        if self.origin is not None:
            data["origin"] = str(self.origin)
        return data

    @classmethod
    def from_json(cls, data: Any) -> FeedOffset:
        if not isinstance(data, dict) or not isinstance(data.get("resolved"), str):
            raise InvalidArgumentError(f"not a feedkv offset: {data!r}")
        scan_key = data.get("scan_key")
        try:
            key = bytes.fromhex(scan_key) if scan_key is not None else None
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"not a feedkv offset (bad scan_key): {data!r}") from exc
        added = data.get("added_scans", [])
        if not isinstance(added, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) and t > 0 for t in added
        ):
            raise InvalidArgumentError(f"not a feedkv offset (bad added_scans): {data!r}")
        cursor, origin = data.get("cursor"), data.get("origin")
        for name, value in (("cursor", cursor), ("origin", origin)):
            if value is not None and not isinstance(value, str):
                raise InvalidArgumentError(f"not a feedkv offset (bad {name}): {data!r}")
        return cls(
            Timestamp.parse(data["resolved"]),
            key,
            tuple(sorted(set(added))),
            Timestamp.parse(cursor) if cursor is not None else None,
            Timestamp.parse(origin) if origin is not None else None,
        )

    def replayed_from(self, end: FeedOffset) -> FeedOffset:
        """Where the first batch of a stream, ending at ``end``, reads from, this being
        the stream's first offset as the query made it on this start: ``end`` may have
        been logged by an earlier start of the query whose first batch never committed
        (Spark then replays it from a first offset it asks for anew, made later). The
        batch then reads from that start's first offset (``end.origin``; a scan batch's
        end holds the scan's timestamp), as it did then."""
        origin = end.origin
        if origin is None and self.scanning:
            origin = end.resolved  # NB: an offset logged before origin was written
        if origin is None or origin == self.resolved:
            return self
        return FeedOffset(origin, self.scan_key, self.added_scans, self.cursor)


@dataclass(frozen=True, slots=True)
class Piece:
    """One partition of a micro-batch: a scan of ``span`` as of ``hi`` (``lo`` is
    ``None``), or the changes in ``span`` with timestamps in ``(lo, hi]``."""

    span: Span
    hi: Timestamp
    lo: Timestamp | None = None

    @property
    def is_scan(self) -> bool:
        return self.lo is None

    @property
    def first_ts(self) -> Timestamp:
        """The least timestamp a row of the piece can have: ``hi`` for a scan, else just
        above ``lo`` (a file sink names the piece's files after it, so that a file
        written after the ``.RESOLVED`` marker at ``lo`` sorts after it)."""
        return self.hi if self.lo is None else self.lo.next()


def plan_pieces(
    start: FeedOffset, end: FeedOffset, span: Span, boundaries: Sequence[bytes]
) -> list[Piece]:
    """The pieces of the batch ``(start, end]`` over ``span``, cut at the range
    ``boundaries`` (range start keys, any order). Empty when there is nothing to read."""
    if start.scan_key is not None:
        if end.resolved != start.resolved:
            raise InvalidArgumentError(
                f"a scan batch ends at the scan's timestamp {start.resolved}, not {end.resolved}"
            )
        stop = end.scan_key if end.scan_key is not None else span.end
        if not start.scan_key < stop:
            return []
        scanned = Span(start.scan_key, stop)
        return [Piece(part, start.resolved) for part in _cut(scanned, boundaries)]
    if end.scanning:
        raise InvalidArgumentError(f"a batch cannot go from a finished scan back to {end}")
    if end.resolved < start.resolved:
        raise InvalidArgumentError(f"offsets go backwards: {start.resolved} to {end.resolved}")
    if end.resolved == start.resolved:
        return []
    return [Piece(part, end.resolved, start.resolved) for part in _cut(span, boundaries)]


def _cut(span: Span, boundaries: Sequence[bytes]) -> list[Span]:
    inside = sorted(b for b in set(boundaries) if span.start < b < span.end)
    edges = [span.start, *inside, span.end]
    return [Span(a, b) for a, b in itertools.pairwise(edges)]
