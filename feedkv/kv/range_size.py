"""How big each range is, so the store can split large ranges and merge small ones.

A range's size is the bytes of its committed versions (every version, not only the live
ones: history is what a catch-up scan and an export read). Exact sizes would cost a write
per command, so the store keeps *estimates*:

- every command adds the bytes its logical ops wrote (:func:`op_bytes`) to its range;
- a split hands each side half of its parent (a size-driven split cuts at the byte
  midpoint, so that is nearly exact); a merge adds the two;
- estimates are persisted in the ``meta`` keyspace (``size/<range id>``) by the store's
  side loop, so a restart loses at most an interval's worth of counting;
- before acting on an estimate the store measures the range from a snapshot
  (:func:`measure`) and corrects it.

Only the engine's commit thread changes estimates; any thread may read them.
"""

from __future__ import annotations

from dataclasses import dataclass

from feedkv.kv.range_descriptor import META, RangeDescriptor
from feedkv.storage.engine import Reader, ReadWriter
from feedkv.storage.logical_ops import (
    CommitIntent,
    CommitIntents,
    IngestValues,
    LogicalOp,
    WriteValue,
)
from feedkv.storage.mvcc_key import SUFFIX_LEN, key_versions_start, unescape_key
from feedkv.storage.schema import VERSIONS
from feedkv.util.keys import Span

__all__ = ["Measurement", "RangeSizes", "measure", "op_bytes"]

_SIZE = b"size/"
_VERSION_OVERHEAD = SUFFIX_LEN + 1  # the timestamp suffix and the value tag


def op_bytes(op: LogicalOp) -> int:
    """The version bytes a logical op added (intents count once committed)."""
    if isinstance(op, WriteValue | CommitIntent):
        return len(op.key) + len(op.value or b"") + _VERSION_OVERHEAD
    if isinstance(op, IngestValues | CommitIntents):
        keys = op.keys
        return sum(map(len, keys)) + sum(map(len, op.values)) + _VERSION_OVERHEAD * len(keys)
    return 0


@dataclass(frozen=True, slots=True)
class Measurement:
    """A range's exact size in one snapshot, and the user key nearest its byte midpoint
    (``None`` when the range holds fewer than two keys and cannot be cut)."""

    total: int
    midpoint: bytes | None


def measure(reader: Reader, span: Span) -> Measurement:
    """Sum the version bytes of ``span`` and find the key that halves them (two passes)."""
    start, end = key_versions_start(span.start), key_versions_start(span.end)
    total = sum(len(k) + len(v) for k, v in reader.scan(VERSIONS, start, end))
    seen = 0
    previous: bytes | None = None
    for raw, value in reader.scan(VERSIONS, start, end):
        escaped = raw[:-SUFFIX_LEN]
        if previous is not None and escaped != previous and seen * 2 >= total:
            return Measurement(total, unescape_key(escaped))
        previous = escaped
        seen += len(raw) + len(value)
    return Measurement(total, None)


def _size_key(range_id: int) -> bytes:
    return _SIZE + range_id.to_bytes(8, "big")


class RangeSizes:
    def __init__(self) -> None:
        self._bytes: dict[int, int] = {}
        self._dirty: set[int] = set()

    def load(self, reader: Reader, descs: list[RangeDescriptor]) -> list[RangeDescriptor]:
        """Read persisted estimates; returns the ranges that have none (measure them)."""
        missing = []
        for desc in descs:
            raw = reader.get(META, _size_key(desc.range_id))
            if raw is None:
                missing.append(desc)
            else:
                self._bytes[desc.range_id] = int.from_bytes(raw, "big")
        return missing

    def get(self, range_id: int) -> int:
        return self._bytes.get(range_id, 0)

    def add(self, range_id: int, n: int) -> int:
        """Count ``n`` more bytes in ``range_id``; returns the new estimate."""
        size = self._bytes.get(range_id, 0) + n
        self._bytes[range_id] = size
        self._dirty.add(range_id)
        return size

    def set(self, range_id: int, n: int) -> None:
        self._bytes[range_id] = n
        self._dirty.add(range_id)

    def split(self, left: int, right: int) -> None:
        half = self.get(left) // 2
        self.set(left, half)
        self.set(right, half)

    def merge(self, left: int, right: int) -> None:
        self.set(left, self.get(left) + self._bytes.pop(right, 0))
        self._dirty.add(right)

    def persist(self, rw: ReadWriter) -> dict[int, int | None]:
        """Write the estimates that changed (deleting merged ranges'); returns what was
        written, for :meth:`persisted` once it is durable. Safe to re-run."""
        written = {range_id: self._bytes.get(range_id) for range_id in self._dirty}
        for range_id, size in written.items():
            if size is None:
                rw.delete(META, _size_key(range_id))
            else:
                rw.put(META, _size_key(range_id), size.to_bytes(8, "big"))
        return written

    def persisted(self, written: dict[int, int | None]) -> None:
        for range_id, size in written.items():
            if self._bytes.get(range_id) == size:
                self._dirty.discard(range_id)
