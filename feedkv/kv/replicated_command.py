"""What a Raft entry of a range carries: an evaluated command's writes and logical ops.

The leaseholder evaluates a command once; every replica applies its result. So an entry
holds the command's raw engine writes (a :class:`~feedkv.storage.engine.WriteBatch`) and
the logical ops that evaluation produced, which every replica hands to its own rangefeed
observers as it applies the entry (a follower's feed then sees the same events, in the
same order, as the leaseholder's). The encoding is msgpack: a version, the writes as
``[db, key, value | nil]`` and each op as a tag and its fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from feedkv.errors import InvariantViolation
from feedkv.storage.engine import WriteBatch
from feedkv.storage.logical_ops import (
    AbortIntent,
    AbortTxn,
    CommitIntent,
    DeleteRange,
    LogicalOp,
    UpdateIntent,
    WriteIntent,
    WriteValue,
)
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["ReplicatedCommand", "decode_command", "encode_command"]

_VERSION = 1


@dataclass(frozen=True, slots=True)
class ReplicatedCommand:
    writes: WriteBatch
    ops: tuple[LogicalOp, ...]


def _ts(ts: Timestamp) -> list[int]:
    return [ts.wall, ts.logical]


def _encode_op(op: LogicalOp) -> list[Any]:
    match op:
        case WriteValue(key, ts, value, prev):
            return ["wv", key, _ts(ts), value, prev]
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
    raise InvariantViolation(f"no encoding for the logical op {op!r}")


def _decode_op(row: list[Any]) -> LogicalOp:
    match row:
        case ["wv", key, ts, value, prev]:
            return WriteValue(key, Timestamp(*ts), value, prev)
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
    raise InvariantViolation(f"a replicated command holds an unknown logical op {row!r}")


def encode_command(writes: WriteBatch, ops: Sequence[LogicalOp]) -> bytes:
    packed: bytes = msgpack.packb(
        [_VERSION, [list(write) for write in writes], [_encode_op(op) for op in ops]],
        use_bin_type=True,
    )
    return packed


def decode_command(data: bytes) -> ReplicatedCommand:
    version, writes, ops = msgpack.unpackb(data, raw=False)
    if version != _VERSION:
        raise InvariantViolation(f"a replicated command of version {version} (this is {_VERSION})")
    batch = WriteBatch()
    for db, key, value in writes:
        if value is None:
            batch.delete(db, key)
        else:
            batch.put(db, key, value)
    return ReplicatedCommand(batch, tuple(_decode_op(row) for row in ops))
