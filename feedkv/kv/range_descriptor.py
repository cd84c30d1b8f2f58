"""Range descriptors and the meta keyspace that holds them.

A range is a contiguous span of keys ``[start, end)`` with an id and a generation. The
store keeps every descriptor in its ``meta`` sub-database, written in the same engine
transaction as the command that changed it (a split or a merge), so the set of ranges is
exactly as durable as the data:

- ``desc/<range id, 8 bytes>`` -> the descriptor;
- ``end/<end key>`` -> the range id, so the range holding ``key`` is the first entry whose
  end key sorts after ``key`` (one seek);
- ``next_range_id`` -> the id the next split hands out.

Every split and merge bumps the generation of the ranges it touches; a client whose cached
descriptor carries an older generation learns so from the node's reply.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

from feedkv.errors import InvariantViolation, RangeKeyMismatchError
from feedkv.storage.engine import Reader, ReadWriter
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span, key_next, prefix_end

__all__ = [
    "META",
    "RangeDescriptor",
    "all_descriptors",
    "bootstrap",
    "descriptor_by_id",
    "descriptor_for_key",
    "next_range_id",
    "seed_range_ids",
    "write_descriptor",
    "delete_descriptor",
]

META = "meta"

_DESC = b"desc/"
_END = b"end/"
_NEXT_ID = b"next_range_id"
_HEADER = struct.Struct(">QQ?HB")  # range id, generation, sticky, start length, replicas
_REPLICA = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class RangeDescriptor:
    """A range: its id, the span ``[start, end)`` it owns, and its generation.

    ``sticky``: the range's start key was set by a manual split, so the store never
    merges it away on its own (only ``db.merge`` does). ``replicas``: the ids of the
    nodes that hold the range, its leaseholder first (one node until ranges replicate);
    a store that is not part of a cluster is node 1.
    """

    range_id: int
    span: Span
    generation: int
    sticky: bool = False
    replicas: tuple[int, ...] = (1,)

    @property
    def lease_holder(self) -> int:
        """The node that serves the range's requests."""
        return self.replicas[0]

    @property
    def start(self) -> bytes:
        return self.span.start

    @property
    def end(self) -> bytes:
        return self.span.end

    def contains_key(self, key: bytes) -> bool:
        return self.span.start <= key < self.span.end

    def encode(self) -> bytes:
        start = self.span.start
        replicas = b"".join(_REPLICA.pack(n) for n in self.replicas)
        header = _HEADER.pack(
            self.range_id, self.generation, self.sticky, len(start), len(self.replicas)
        )
        return header + replicas + start + self.span.end

    @classmethod
    def decode(cls, raw: bytes) -> RangeDescriptor:
        range_id, generation, sticky, start_len, count = _HEADER.unpack_from(raw)
        at = _HEADER.size
        replicas = tuple(_REPLICA.unpack_from(raw, at + 4 * i)[0] for i in range(count))
        at += 4 * count
        start = raw[at : at + start_len]
        end = raw[at + start_len :]
        return cls(range_id, Span(start, end), generation, sticky, replicas)

    def __str__(self) -> str:
        nodes = ",".join(f"n{n}" for n in self.replicas)
        return f"r{self.range_id}:{self.span} (gen {self.generation}, on {nodes})"


def _desc_key(range_id: int) -> bytes:
    return _DESC + range_id.to_bytes(8, "big")


def descriptor_by_id(reader: Reader, range_id: int) -> RangeDescriptor | None:
    raw = reader.get(META, _desc_key(range_id))
    return _decoded(raw) if raw is not None else None


@lru_cache(maxsize=4096)
def _decoded(raw: bytes) -> RangeDescriptor:
    """A stored descriptor, decoded once: every command reads its range's (descriptors
    are immutable, and a changed one is other bytes)."""
    return RangeDescriptor.decode(raw)


def descriptor_for_key(reader: Reader, key: bytes) -> RangeDescriptor:
    """The range of this store holding ``key`` (``KEY_MIN <= key < KEY_MAX``); raises
    :class:`RangeKeyMismatchError` when another node holds it (a store of a cluster holds
    some of the ranges)."""
    found = reader.seek(META, _END + key_next(key))
    desc = None
    if found is not None and found[0].startswith(_END):
        desc = descriptor_by_id(reader, int.from_bytes(found[1], "big"))
        if desc is None:
            raise InvariantViolation(f"the meta index points {key!r} at a missing range")
    if desc is None or not desc.contains_key(key):
        raise RangeKeyMismatchError(f"no range of this node holds {key!r}", [])
    return desc


def all_descriptors(reader: Reader) -> list[RangeDescriptor]:
    """Every range, in key order."""
    descs = []
    for _key, raw_id in reader.scan(META, _END, prefix_end(_END)):
        desc = descriptor_by_id(reader, int.from_bytes(raw_id, "big"))
        if desc is None:
            raise InvariantViolation(f"the meta index names range r{int.from_bytes(raw_id)}")
        descs.append(desc)
    return descs


def write_descriptor(rw: ReadWriter, desc: RangeDescriptor) -> None:
    """Store ``desc`` and index its end key (the caller removes a stale end entry)."""
    rw.put(META, _desc_key(desc.range_id), desc.encode())
    rw.put(META, _END + desc.end, desc.range_id.to_bytes(8, "big"))


def delete_descriptor(rw: ReadWriter, desc: RangeDescriptor) -> None:
    rw.delete(META, _desc_key(desc.range_id))
    rw.delete(META, _END + desc.end)


def next_range_id(rw: ReadWriter) -> int:
    """Hand out a new range id (persisted with the caller's write)."""
    raw = rw.get(META, _NEXT_ID)
    range_id = int.from_bytes(raw, "big") if raw is not None else 2
    rw.put(META, _NEXT_ID, (range_id + 1).to_bytes(8, "big"))
    return range_id


def seed_range_ids(rw: ReadWriter, node_id: int) -> None:
    """Start the range ids this store hands out at ``node_id << 32``: a node that joined
    a cluster splits its ranges with ids no other node hands out (the bootstrap node
    counts from 2)."""
    if rw.get(META, _NEXT_ID) is None:
        rw.put(META, _NEXT_ID, (node_id << 32).to_bytes(8, "big"))


def bootstrap(rw: ReadWriter, node_id: int = 1, replicas: tuple[int, ...] = ()) -> bool:
    """Create range r1 over the whole keyspace, on node ``node_id`` (or on ``replicas``),
    if the store has no ranges yet; returns whether it did."""
    found = rw.seek(META, _END)
    if found is not None and found[0].startswith(_END):
        return False
    write_descriptor(
        rw, RangeDescriptor(1, Span(KEY_MIN, KEY_MAX), 0, replicas=replicas or (node_id,))
    )
    return True
