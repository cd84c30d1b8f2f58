"""What a Raft entry of a range carries: an evaluated command's writes and effects.

The leaseholder evaluates a command once; every replica applies its result. So an entry
holds the command's raw engine writes (a :class:`~feedkv.storage.engine.WriteBatch`) and
its :class:`Effects`, which every replica takes up as it applies the entry:

- ``ops``: the logical ops evaluation produced; each replica hands them to its own
  rangefeed observers (a follower's feed sees the same events, in the same order, as the
  leaseholder's);
- ``reads``: the timestamp-cache entries evaluation made ``(span, ts, txn id)``; a
  replica that takes the lease later has applied them, so it never lets a write land
  below a read an earlier leaseholder served;
- ``closed``: the range's closed timestamp when the command was evaluated; every
  replica's observers get it as a checkpoint after the ops, and a later leaseholder
  writes above it (closed timestamps travel in the log, as the RangeFeed design has it);
- ``splits``: ``(left, right)`` range ids of a split the command made; every replica
  starts the new range's Raft group, with the same members, as it applies it;
- ``freeze``: the id of the range this one is about to merge into (0: none); every
  replica refuses the range's commands from then on, under any leader;
- ``merges``: ``(left, right)`` range ids of a merge the command made; every replica
  ends the right-hand range's Raft group, whose data the left one now holds.

The encoding is msgpack: a version, the writes as ``[db, key, value | nil]``, each op as
a tag and its fields, the reads, and the closed timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from feedkv.errors import InvariantViolation
from feedkv.storage.engine import WriteBatch
from feedkv.storage.logical_ops import (
    AbortIntent,
    AbortIntents,
    AbortTxn,
    CommitIntent,
    CommitIntents,
    DeleteRange,
    IngestValues,
    LogicalOp,
    UpdateIntent,
    WriteIntent,
    WriteIntents,
    WriteValue,
)
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["Effects", "ReplicatedCommand", "decode_command", "encode_command"]

_VERSION = 1

Read = tuple[Span, Timestamp, bytes | None]


@dataclass(frozen=True, slots=True)
class Effects:
    """What applying a command does besides its writes (see the module docstring)."""

    ops: tuple[LogicalOp, ...] = ()
    reads: tuple[Read, ...] = ()
    closed: Timestamp | None = None
    splits: tuple[tuple[int, int], ...] = ()
    freeze: int = 0
    merges: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ReplicatedCommand:
    writes: WriteBatch
    effects: Effects


def _ts(ts: Timestamp) -> list[int]:
    return [ts.wall, ts.logical]


def _encode_op(op: LogicalOp) -> list[Any]:
    match op:
        case WriteValue(key, ts, value, prev):
            return ["wv", key, _ts(ts), value, prev]
        case IngestValues(span, ts, keys, values):
            return ["iv", span.start, span.end, _ts(ts), list(keys), list(values)]
        case WriteIntent(txn_id, txn_key, key, ts):
            return ["wi", txn_id, txn_key, key, _ts(ts)]
        case UpdateIntent(txn_id, key, ts):
            return ["ui", txn_id, key, _ts(ts)]
        case CommitIntent(txn_id, key, ts, value, prev):
            return ["ci", txn_id, key, _ts(ts), value, prev]
        case AbortIntent(txn_id, key):
            return ["ai", txn_id, key]
        case AbortTxn(txn_id):
            return ["at", txn_id]
        case DeleteRange(span, ts):
            return ["dr", span.start, span.end, _ts(ts)]
        case WriteIntents(txn_id, txn_key, span, ts, count):
            return ["wis", txn_id, txn_key, span.start, span.end, _ts(ts), count]
        case CommitIntents(txn_id, span, ts, keys, values):
            return ["cis", txn_id, span.start, span.end, _ts(ts), list(keys), list(values)]
        case AbortIntents(txn_id, span, count):
            return ["ais", txn_id, span.start, span.end, count]
    raise InvariantViolation(f"no encoding for the logical op {op!r}")


def _decode_op(row: list[Any]) -> LogicalOp:
    match row:
        case ["wv", key, ts, value, prev]:
            return WriteValue(key, Timestamp(*ts), value, prev)
        case ["iv", start, end, ts, keys, values]:
            return IngestValues(Span(start, end), Timestamp(*ts), keys, values)
        case ["wi", txn_id, txn_key, key, ts]:
            return WriteIntent(txn_id, txn_key, key, Timestamp(*ts))
        case ["ui", txn_id, key, ts]:
            return UpdateIntent(txn_id, key, Timestamp(*ts))
        case ["ci", txn_id, key, ts, value, prev]:
            return CommitIntent(txn_id, key, Timestamp(*ts), value, prev)
        case ["ai", txn_id, key]:
            return AbortIntent(txn_id, key)
        case ["at", txn_id]:
            return AbortTxn(txn_id)
        case ["dr", start, end, ts]:
            return DeleteRange(Span(start, end), Timestamp(*ts))
        case ["wis", txn_id, txn_key, start, end, ts, count]:
            return WriteIntents(txn_id, txn_key, Span(start, end), Timestamp(*ts), count)
        case ["cis", txn_id, start, end, ts, keys, values]:
            return CommitIntents(txn_id, Span(start, end), Timestamp(*ts), keys, values)
        case ["ais", txn_id, start, end, count]:
            return AbortIntents(txn_id, Span(start, end), count)
    raise InvariantViolation(f"a replicated command holds an unknown logical op {row!r}")


def encode_command(writes: WriteBatch, effects: Effects) -> bytes:
    packed: bytes = msgpack.packb(
        [
            _VERSION,
            [list(write) for write in writes],
            [_encode_op(op) for op in effects.ops],
            [[span.start, span.end, _ts(ts), txn_id] for span, ts, txn_id in effects.reads],
            None if effects.closed is None else _ts(effects.closed),
            [list(split) for split in effects.splits],
            effects.freeze,
            [list(merge) for merge in effects.merges],
        ],
        use_bin_type=True,
    )
    return packed


def decode_command(data: bytes) -> ReplicatedCommand:
    version, writes, ops, reads, closed, splits, *rest = msgpack.unpackb(data, raw=False)
    freeze, merges = rest or (0, [])  # NB: entries written before merges existed
    if version != _VERSION:
        raise InvariantViolation(f"a replicated command of version {version} (this is {_VERSION})")
    batch = WriteBatch()
    for db, key, value in writes:
        if value is None:
            batch.delete(db, key)
        else:
            batch.put(db, key, value)
    effects = Effects(
        tuple(_decode_op(row) for row in ops),
        tuple((Span(start, end), Timestamp(*ts), txn_id) for start, end, ts, txn_id in reads),
        None if closed is None else Timestamp(*closed),
        tuple((left, right) for left, right in splits),
        freeze,
        tuple((left, right) for left, right in merges),
    )
    return ReplicatedCommand(batch, effects)
