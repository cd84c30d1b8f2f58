"""Logical operations: what each MVCC mutation did, in terms a change feed understands.

Every mutation returns its ops in order. The replica hands them to the range's rangefeed
processor in apply order, which turns them into events (values) and into the
unresolved-intent bookkeeping behind resolved timestamps:

- ``WriteValue``: a committed (non-transactional) write; ``value=None`` is a deletion.
  Point deletions of a delete-range arrive as one ``WriteValue`` per key, so feeds keep
  per-key history and previous values.
- ``WriteIntent``: a txn laid down its first intent on a key (refcount + 1 for the txn).
- ``UpdateIntent``: an existing intent moved to a new timestamp (refcount unchanged).
- ``CommitIntent``: an intent was committed at ``ts``; publish ``value`` (refcount - 1).
- ``AbortIntent``: an intent was removed (refcount - 1).
- ``AbortTxn``: the whole txn is known aborted; forget it (the pusher emits this).
- ``DeleteRange``: every key of ``span`` was deleted at ``ts`` by one range operation
  (``delete_range`` reports this after its per-key ``WriteValue`` ops, so a consumer that
  only needs the range shape can skip the per-key ops covered by it).

``prev_value`` is the newest committed value below ``ts`` (``None`` if absent or deleted).
"""

from __future__ import annotations

from dataclasses import dataclass

from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = [
    "AbortIntent",
    "AbortTxn",
    "CommitIntent",
    "DeleteRange",
    "LogicalOp",
    "UpdateIntent",
    "WriteIntent",
    "WriteValue",
]


@dataclass(frozen=True, slots=True)
class WriteValue:
    key: bytes
    ts: Timestamp
    value: bytes | None
    prev_value: bytes | None


@dataclass(frozen=True, slots=True)
class WriteIntent:
    txn_id: bytes
    txn_key: bytes
    key: bytes
    ts: Timestamp


@dataclass(frozen=True, slots=True)
class UpdateIntent:
    txn_id: bytes
    key: bytes
    ts: Timestamp


@dataclass(frozen=True, slots=True)
class CommitIntent:
    txn_id: bytes
    key: bytes
    ts: Timestamp
    value: bytes | None
    prev_value: bytes | None


@dataclass(frozen=True, slots=True)
class AbortIntent:
    txn_id: bytes
    key: bytes


@dataclass(frozen=True, slots=True)
class AbortTxn:
    txn_id: bytes


@dataclass(frozen=True, slots=True)
class DeleteRange:
    span: Span
    ts: Timestamp


LogicalOp = (
    WriteValue | WriteIntent | UpdateIntent | CommitIntent | AbortIntent | AbortTxn | DeleteRange
)
