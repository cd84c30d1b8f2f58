"""Why a store refuses a Raft message or snapshot for its replica of a range.

A store drops what cannot be for a replica it holds or may hold (a message to an id it
dropped, a snapshot while it still deletes the range's old replica, ...). Two refusals
are told to their sender, each with a :class:`Refusal`:

- a message from a replica the range removed (CockroachDB's ``ReplicaTooOldError``): the
  receiver answers with a :class:`ReplicaTooOld` notice on the Raft stream, and the
  removed replica collects itself;
- a snapshot refused at its header, before its data is taken
  (:meth:`~feedkv.kv.replica_loop.ReplicaLoop.receive_snapshot`): its transfer fails
  with :class:`SnapshotRefusedError`, which the sender's transport raises with the
  same reason.

A notice travels among Raft messages as ``(range id, encoded)``; Raft messages encode as
msgpack arrays (:func:`~feedkv.raft.encode_message`), a notice as a msgpack map, so
:func:`decode_inbound` tells them apart by type, not by a magic prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import msgpack

from feedkv.errors import FeedKVError, InvariantViolation
from feedkv.raft import Message, decode_message

__all__ = [
    "Refusal",
    "ReplicaTooOld",
    "SnapshotRefusedError",
    "decode_inbound",
    "encode_notice",
]

_FIXMAP_FIRST, _FIXMAP_LAST = 0x80, 0x8F  # msgpack's first byte of a map of < 16 keys


class Refusal(Enum):
    """Why a message or snapshot for a replica was refused (its value travels)."""

    REPLICA_TOO_OLD = "replica-too-old"
    """The sender's replica was removed from the range: it should collect itself."""
    REPLICA_REMOVED = "replica-removed"
    """Addressed to a replica id the store dropped (its tombstone) or never held."""
    NEWER_REPLICA = "newer-replica"
    """The store holds a newer replica of the range than the one addressed."""
    COLLECTING = "collecting"
    """The store still deletes an older replica of the range (or of part of its span)."""
    OVERLAP = "overlap"
    """Another range of the store still holds part of the snapshot's span (a split that
    made the range has not applied here yet)."""
    APPLIED = "applied"
    """The replica applied the snapshot's index already."""
    MERGED = "merged"
    """The range merged into its left neighbour here."""


class SnapshotRefusedError(FeedKVError):
    """A snapshot the receiving store will not install now; ``reason`` says why. The
    sender's Raft sends one again later (the refusal may pass: an overlap, a
    collection), or learns the replica is gone from the range's next change."""

    def __init__(self, reason: Refusal, detail: str) -> None:
        super().__init__(f"snapshot refused ({reason.value}): {detail}")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ReplicaTooOld:
    """Notice to a node: its replica of the range with an id up to ``replica_id`` was
    removed from the range (:attr:`Refusal.REPLICA_TOO_OLD`)."""

    replica_id: int


def encode_notice(notice: ReplicaTooOld) -> bytes:
    packed: bytes = msgpack.packb(
        {"refusal": Refusal.REPLICA_TOO_OLD.value, "replica": notice.replica_id}
    )
    return packed


def decode_inbound(raw: bytes) -> Message | ReplicaTooOld:
    """A Raft message, or a notice (:func:`encode_notice`)."""
    if not raw or not _FIXMAP_FIRST <= raw[0] <= _FIXMAP_LAST:
        return decode_message(raw)
    fields = msgpack.unpackb(raw)
    try:
        reason = Refusal(fields["refusal"])
    except (KeyError, ValueError) as exc:
        raise InvariantViolation(f"a notice with no known refusal: {fields!r}") from exc
    if reason is not Refusal.REPLICA_TOO_OLD:
        raise InvariantViolation(f"a notice carries {reason}, which is told otherwise")
    return ReplicaTooOld(int(fields["replica"]))
