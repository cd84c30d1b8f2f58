"""Range descriptors and the meta keyspace that holds them.

A range is a contiguous span of keys ``[start, end)`` with an id and a generation. The
store keeps every descriptor in its ``meta`` sub-database, written in the same engine
transaction as the command that changed it (a split or a merge), so the set of ranges is
exactly as durable as the data:

- ``desc/<range id, 8 bytes>`` -> the descriptor;
- ``end/<end key>`` -> the range id, so the range holding ``key`` is the first entry whose
  end key sorts after ``key`` (one seek);
- ``next_range_id`` -> the id the store's next split hands out when it takes ids of its
  own (a store in no cluster; a node of a cluster takes them from the cluster's counter,
  :mod:`feedkv.kv.range_id_alloc`);
- ``replica_tombstone/<range id>`` -> the lowest replica id this store may still hold of
  a range whose replica here was removed (see below).

Every split and merge bumps the generation of the ranges it touches, and so does every
change of a replicated range's members (applied from its Raft log, in the same engine
transaction on every replica, so each replica holds the range's full, current
membership); a client whose cached descriptor carries an older generation learns so from
the node's reply.

Replica ids (as CockroachDB's): each replica of a range has an id of its own, never used
before in that range (``next_replica_id`` hands them out); its Raft peer id is that id,
not its node's. A replica removed from a node and added back later is a new replica with
a new id, so nothing the old one sent, voted or logged can pass for the new one's. A
store that drops a removed replica leaves a tombstone with the next id, and makes no
replica of an older id again.

Encoding: a version byte (2), then the fields. A descriptor written before replica ids
(no version byte: it starts with the top byte of its range id, 0 for every id a store
hands out, below node ``2**24``) still decodes: its replica ids are its node ids, which
is what its Raft group used; a learner of that time is in the group but not in the
descriptor, and its id is its node's too (:meth:`RangeDescriptor.replica_nodes`). Its
next replica id is not one above the highest of them:
before replica ids, every node that ever held a replica of the range had one whose id is
its node id, and a replica removed while its node was down may still be there, with an
id the descriptor no longer names. So the first id given after an old descriptor is
``LEGACY_NEXT_REPLICA_ID``, above every node id an old cluster handed out; and an old
replica that speaks up is below the range's next id and not a member: it is told to
collect itself.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache

from feedkv.errors import InvariantViolation, RangeKeyMismatchError
from feedkv.storage.engine import Reader, ReadWriter
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span, key_next, prefix_end

__all__ = [
    "LEGACY_NEXT_REPLICA_ID",
    "META",
    "RangeDescriptor",
    "ReplicaDescriptor",
    "all_descriptors",
    "bootstrap",
    "descriptor_by_id",
    "descriptor_for_key",
    "local_range_id_floor",
    "next_range_id",
    "seed_range_ids",
    "write_descriptor",
    "delete_descriptor",
    "replica_tombstone",
    "write_replica_tombstone",
]

META = "meta"

_DESC = b"desc/"
_END = b"end/"
_NEXT_ID = b"next_range_id"
_TOMBSTONE = b"replica_tombstone/"
_VERSION = 2
# NB: above any node id a cluster from before replica ids gave (node ids count up from 1
# as nodes join): every replica of that time had its node's id
LEGACY_NEXT_REPLICA_ID = 1 << 24
_HEADER_V1 = struct.Struct(">QQ?HB")  # range id, generation, sticky, start length, replicas
_HEADER = struct.Struct(">BQQ?HBBI")  # version, ..., replicas, learners, next replica id
_REPLICA_V1 = struct.Struct(">I")
_REPLICA = struct.Struct(">II")  # node id, replica id


@dataclass(frozen=True, slots=True)
class ReplicaDescriptor:
    """One replica of a range: the node that holds it and its id in the range (its Raft
    peer id); ``learner``: it is being added (it votes and serves nothing yet)."""

    node_id: int
    replica_id: int
    learner: bool = False


@dataclass(frozen=True, slots=True)
class RangeDescriptor:
    """A range: its id, the span ``[start, end)`` it owns, and its generation.

    ``sticky``: the range's start key was set by a manual split, so the store never
    merges it away on its own (only ``db.merge`` does). ``replicas``: the ids of the
    nodes that hold the range's voters, its leaseholder first (one node until ranges
    replicate); a store that is not part of a cluster is node 1. ``ids``: every replica
    with its replica id, learners too, in no particular order (empty: each voter's id is
    its node id, as before replica ids); ``next_replica_id``: the id the next replica
    added gets (0: one above the highest in use). Routing, leases and SHOW RANGES read
    node ids (``replicas``); Raft reads replica ids (:attr:`members`).
    """

    range_id: int
    span: Span
    generation: int
    sticky: bool = False
    replicas: tuple[int, ...] = (1,)
    ids: tuple[ReplicaDescriptor, ...] = ()
    next_replica_id: int = 0
    # NB: read from the old encoding, which lists the voters only (see replica_nodes)
    legacy: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        # NB: a set: one order, so equal descriptors compare equal
        ids = tuple(sorted(self.ids, key=lambda r: r.replica_id))
        object.__setattr__(self, "ids", ids)

    @property
    def members(self) -> tuple[ReplicaDescriptor, ...]:
        """Every replica with its id: the voters (those on ``replicas``), then learners."""
        if not self.ids:
            return tuple(ReplicaDescriptor(n, n) for n in self.replicas)
        by_node = {r.node_id: r for r in self.ids if not r.learner}
        if not by_node.keys() == set(self.replicas):
            raise InvariantViolation(f"r{self.range_id}: voters {self.replicas} but ids {self.ids}")
        voters = tuple(by_node[n] for n in self.replicas)
        return voters + tuple(r for r in self.ids if r.learner)

    @property
    def next_id(self) -> int:
        """The id the next replica added gets."""
        used = max((r.replica_id for r in self.members), default=0)
        return max(self.next_replica_id, used + 1)

    def replica_nodes(self, group: Iterable[int] = ()) -> dict[int, int]:
        """Each replica's node, by replica id. ``group``: the members of the range's
        Raft group; one this descriptor lacks, when it was read from the old encoding,
        is a learner of that time (the old encoding lists voters only), whose id is its
        node's id."""
        nodes = {r.replica_id: r.node_id for r in self.members}
        if self.legacy:
            for replica_id in group:
                nodes.setdefault(replica_id, replica_id)
        return nodes

    def replica_of(self, node_id: int) -> ReplicaDescriptor | None:
        """This range's replica on node ``node_id``, if it has one (a learner too)."""
        return next((r for r in self.members if r.node_id == node_id), None)

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
        members = self.members
        voters = {r.node_id: r for r in members if not r.learner}
        learners = [r for r in members if r.learner]
        header = _HEADER.pack(
            _VERSION,
            self.range_id,
            self.generation,
            self.sticky,
            len(start),
            len(self.replicas),
            len(learners),
            self.next_id,
        )
        # NB: the voters in lease order, so the order of ``replicas`` survives
        replicas = b"".join(_REPLICA.pack(n, voters[n].replica_id) for n in self.replicas)
        learned = b"".join(_REPLICA.pack(r.node_id, r.replica_id) for r in learners)
        return header + replicas + learned + start + self.span.end

    @classmethod
    def decode(cls, raw: bytes) -> RangeDescriptor:
        if raw[0] != _VERSION:
            return cls._decode_v1(raw)
        _, range_id, generation, sticky, start_len, count, learners, next_id = _HEADER.unpack_from(
            raw
        )
        at = _HEADER.size
        pairs = [_REPLICA.unpack_from(raw, at + _REPLICA.size * i) for i in range(count + learners)]
        at += _REPLICA.size * (count + learners)
        ids = tuple(
            ReplicaDescriptor(node, replica, i >= count) for i, (node, replica) in enumerate(pairs)
        )
        start = raw[at : at + start_len]
        end = raw[at + start_len :]
        replicas = tuple(node for node, _ in pairs[:count])
        derived = cls(range_id, Span(start, end), generation, sticky, replicas)
        if derived.members == ids and derived.next_id == next_id:
            return derived  # NB: one value for one descriptor, whichever way it was made
        return replace(derived, ids=ids, next_replica_id=next_id)

    @classmethod
    def _decode_v1(cls, raw: bytes) -> RangeDescriptor:
        range_id, generation, sticky, start_len, count = _HEADER_V1.unpack_from(raw)
        at = _HEADER_V1.size
        replicas = tuple(_REPLICA_V1.unpack_from(raw, at + 4 * i)[0] for i in range(count))
        at += 4 * count
        start = raw[at : at + start_len]
        end = raw[at + start_len :]
        ids = tuple(ReplicaDescriptor(n, n) for n in replicas)
        next_id = max(LEGACY_NEXT_REPLICA_ID, *(n + 1 for n in replicas))
        # NB: ids spelled out, as the new encoding decodes it back
        return cls(
            range_id, Span(start, end), generation, sticky, replicas, ids, next_id, legacy=True
        )

    def __str__(self) -> str:
        nodes = ",".join(
            f"n{r.node_id}/{r.replica_id}{'L' if r.learner else ''}" for r in self.members
        )
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


def local_range_id_floor(reader: Reader) -> int:
    """The first id the cluster's counter may give as far as this store knows
    (:mod:`feedkv.kv.range_id_alloc`): above every small id it handed out itself (a
    store that bootstrapped counts from 2; its own ids from ``node_id << 32`` on are
    apart from the counter's, which stays below ``2**32``)."""
    raw = reader.get(META, _NEXT_ID)
    local = int.from_bytes(raw, "big") if raw is not None else 2
    return local if local < 1 << 32 else 2


def seed_range_ids(rw: ReadWriter, node_id: int) -> None:
    """Start the range ids this store hands out at ``node_id << 32``: a node that joined
    a cluster split its ranges with ids no other node handed out (the bootstrap node
    counted from 2), before nodes took them from the cluster's counter
    (:mod:`feedkv.kv.range_id_alloc`), which a node of a cluster does now."""
    if rw.get(META, _NEXT_ID) is None:
        rw.put(META, _NEXT_ID, (node_id << 32).to_bytes(8, "big"))


def replica_tombstone(reader: Reader, range_id: int) -> int:
    """The lowest replica id of ``range_id`` this store may hold (0: no tombstone)."""
    raw = reader.get(META, _TOMBSTONE + range_id.to_bytes(8, "big"))
    return int.from_bytes(raw, "big") if raw is not None else 0


def write_replica_tombstone(rw: ReadWriter, range_id: int, next_replica_id: int) -> None:
    """This store dropped its replica of ``range_id``: it never makes one with an id
    below ``next_replica_id`` again (a late message to the removed one is dropped)."""
    if next_replica_id > replica_tombstone(rw, range_id):
        rw.put(META, _TOMBSTONE + range_id.to_bytes(8, "big"), next_replica_id.to_bytes(8, "big"))


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
