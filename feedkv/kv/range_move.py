"""A range's whole state as a snapshot, and the records of a move between nodes.

A move of range X from node A to node B (driven by :mod:`feedkv.server.relocation`)
leaves these records in each store's ``meta`` sub-database, written in the same engine
transaction as the state they describe, so a crash at any point leaves one owner:

- ``moving/<X>`` on A: X is frozen (it serves nothing) while it streams to B;
- ``pending/<X>`` on B: B holds X's data, not yet its descriptor (so it serves nothing);
- ``moved/<X>`` on A: the commit point: A dropped X's data and descriptor; the record
  keeps X's new descriptor, so a request that still comes to A learns where X went.

Each record names the move by a random id. B activates X (writes its descriptor) only
once A says the move with that id committed; A, restarted with a ``moving/`` record,
aborts the move (B's pending copy is then discarded when B asks).

The snapshot holds every MVCC version, intent and transaction record of X's span, and
X's garbage-collection threshold; the time index is rebuilt from the versions on the
receiving node. Chunks are lists of ``(database, key, value)`` entries.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from feedkv.kv.range_descriptor import META, RangeDescriptor
from feedkv.kv.txn_record import TXN_RECORDS, anchored_in, record_bounds
from feedkv.storage.engine import Reader, ReadWriter
from feedkv.storage.mvcc_key import decode_version_key, encode_change_key, key_versions_start
from feedkv.storage.schema import CHANGES, INTENTS, VERSIONS
from feedkv.util.hlc import ZERO_TIMESTAMP, Timestamp
from feedkv.util.keys import Span

__all__ = [
    "CHUNK_ENTRIES",
    "MoveRecord",
    "SNAPSHOT_DATABASES",
    "clear_range",
    "delete_record",
    "read_record",
    "read_snapshot",
    "records",
    "write_entries",
    "write_record",
]

CHUNK_ENTRIES = 4096
SNAPSHOT_DATABASES = (VERSIONS, INTENTS, TXN_RECORDS)
_FIXED = struct.Struct(">16sIQIQI")  # move id, peer, closed, gc threshold


@dataclass(frozen=True, slots=True)
class MoveRecord:
    """A move's record in a store: ``kind`` is ``moving``, ``pending`` or ``moved``;
    ``desc`` is the range's descriptor after the move (on node ``desc.lease_holder``);
    ``peer`` the other node of the move."""

    kind: str
    move_id: bytes
    desc: RangeDescriptor
    peer: int
    closed: Timestamp = ZERO_TIMESTAMP  # where the old node closed it (above its reads)
    gc: Timestamp = ZERO_TIMESTAMP  # its GC threshold

    def encode(self) -> bytes:
        fixed = _FIXED.pack(self.move_id, self.peer, *self.closed, *self.gc)
        return fixed + self.desc.encode()

    @classmethod
    def decode(cls, kind: str, raw: bytes) -> MoveRecord:
        move_id, peer, c_wall, c_logical, g_wall, g_logical = _FIXED.unpack_from(raw)
        desc = RangeDescriptor.decode(raw[_FIXED.size :])
        return cls(
            kind, move_id, desc, peer, Timestamp(c_wall, c_logical), Timestamp(g_wall, g_logical)
        )


def _record_key(kind: str, range_id: int) -> bytes:
    return f"{kind}/".encode() + range_id.to_bytes(8, "big")


def write_record(rw: ReadWriter, record: MoveRecord) -> None:
    rw.put(META, _record_key(record.kind, record.desc.range_id), record.encode())


def read_record(reader: Reader, kind: str, range_id: int) -> MoveRecord | None:
    raw = reader.get(META, _record_key(kind, range_id))
    return MoveRecord.decode(kind, raw) if raw is not None else None


def delete_record(rw: ReadWriter, kind: str, range_id: int) -> None:
    rw.delete(META, _record_key(kind, range_id))


def records(reader: Reader, kind: str) -> list[MoveRecord]:
    prefix = f"{kind}/".encode()
    return [
        MoveRecord.decode(kind, raw)
        for _key, raw in reader.scan(META, prefix, prefix[:-1] + b"0")  # "/" + 1 is "0"
    ]


def _bounds(db: str, span: Span) -> tuple[bytes, bytes]:
    if db == VERSIONS:
        return key_versions_start(span.start), key_versions_start(span.end)
    if db == TXN_RECORDS:
        return record_bounds(span)
    return span.start, span.end


def _in_span(db: str, key: bytes, span: Span) -> bool:
    return db != TXN_RECORDS or anchored_in(key, span)


def read_snapshot(
    reader: Reader,
    span: Span,
    chunk_entries: int = CHUNK_ENTRIES,
    chunk_bytes: int | None = None,
) -> Iterator[list[tuple[str, bytes, bytes]]]:
    """The range state in ``span``, at most ``chunk_entries`` entries (and, given
    ``chunk_bytes``, about that many bytes of keys and values: one entry more at most)
    at a time, read as the chunks are taken."""
    chunk: list[tuple[str, bytes, bytes]] = []
    size = 0
    for db in SNAPSHOT_DATABASES:
        start, end = _bounds(db, span)
        for key, value in reader.scan(db, start, end):
            if _in_span(db, key, span):
                chunk.append((db, key, value))
                size += len(key) + len(value)
                if len(chunk) >= chunk_entries or (chunk_bytes and size >= chunk_bytes):
                    yield chunk
                    chunk, size = [], 0
    if chunk:
        yield chunk


def write_entries(rw: ReadWriter, chunk: list[tuple[str, bytes, bytes]]) -> None:
    """Write a snapshot chunk, with the time-index entry of each version."""
    for db, key, value in chunk:
        if db not in SNAPSHOT_DATABASES:
            raise ValueError(f"a snapshot chunk names the database {db!r}")
        rw.put(db, key, value)
        if db == VERSIONS:
            user_key, ts = decode_version_key(key)
            rw.put(CHANGES, encode_change_key(ts, user_key), value)


def clear_range(rw: ReadWriter, span: Span, limit: int | None = None) -> int:
    """Delete the range state in ``span`` (and the versions' time-index entries); returns
    the entries deleted. The garbage-collection thresholds stay: they only ever move up,
    and the range's new node got them in the snapshot. A chunk at a time: a large range
    is never held in memory. ``limit``: delete at most that many entries (the first in
    the span; 0 returned: none were left)."""
    deleted = 0
    while limit is None or deleted < limit:
        # NB: read again from the start each time: what the last chunk held is gone
        chunk = CHUNK_ENTRIES if limit is None else min(CHUNK_ENTRIES, limit - deleted)
        doomed = next(read_snapshot(rw, span, chunk_entries=chunk), [])
        if not doomed:
            return deleted
        for db, key, _value in doomed:
            rw.delete(db, key)
            if db == VERSIONS:
                user_key, ts = decode_version_key(key)
                rw.delete(CHANGES, encode_change_key(ts, user_key))
        deleted += len(doomed)
    return deleted
