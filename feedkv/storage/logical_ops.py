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
- ``IngestValues``: a bulk load's batch (an ``Ingest``): ``values[i]`` at ``keys[i]``,
  each a new key, all at ``ts``: what a ``WriteValue`` per key with no previous value
  would say, in one op, as CockroachDB's ``MVCCAddSSTableOp``. A consumer that needs
  the values one by one (a rangefeed with registrations) expands it
  (:meth:`IngestValues.each`); the others (resolved timestamps, size estimates) pay per
  batch, not per key.
- ``WriteIntents``, ``CommitIntents``, ``AbortIntents``: the same three for a bulk
  load's batch inside a transaction (an ``Ingest`` sent with a transaction's intents,
  a COPY across ranges): ``count`` intents laid down in ``span`` at ``ts`` in one op
  (refcount + count), committed at ``ts`` as new keys with no previous value (refcount
  - count; published per key, as ``IngestValues``), or removed (refcount - count). An
  ``UpdateIntent`` of one of its keys moves the transaction, so a push of the batch
  is one op too.
- ``DeleteRange``: every key of ``span`` was deleted at ``ts`` by one range operation
  (``delete_range`` reports this after its per-key ``WriteValue`` ops, so a consumer that
  only needs the range shape can skip the per-key ops covered by it).

``prev_value`` is the newest committed value below ``ts`` (``None`` if absent or deleted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import NamedTuple

from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = [
    "AbortIntent",
    "AbortTxn",
    "AbortIntents",
    "CommitIntent",
    "CommitIntents",
    "DeleteRange",
    "IngestValues",
    "LogicalOp",
    "UpdateIntent",
    "WriteIntent",
    "WriteIntents",
    "WriteValue",
    "write_values",
]


class WriteValue(NamedTuple):
    """NB: a named tuple, not a frozen dataclass as the other ops: an
    :class:`IngestValues` read by a rangefeed makes one per key, and ``tuple.__new__``
    over columns (:func:`write_values`) makes them about four times as fast as a frozen
    dataclass's ``__init__`` of four ``setattr`` calls."""

    key: bytes
    ts: Timestamp
    value: bytes | None
    prev_value: bytes | None


def write_values(
    keys: Sequence[bytes], ts: Timestamp, values: Sequence[bytes | None]
) -> list[WriteValue]:
    """A ``WriteValue`` per key at ``ts`` with no previous value, in bulk."""
    count = len(keys)
    rows = zip(keys, repeat(ts, count), values, repeat(None, count), strict=True)
    return list(map(tuple.__new__, repeat(WriteValue, count), rows))


@dataclass(frozen=True, slots=True)
class IngestValues:
    """``values[i]`` written at ``keys[i]`` at ``ts`` as committed values, none with a
    previous value; ``keys`` ascend strictly inside ``span``. The op holds the batch's
    columns as the command had them (it owns them: nobody changes them)."""

    span: Span
    ts: Timestamp
    keys: Sequence[bytes]
    values: Sequence[bytes]

    def each(self) -> list[WriteValue]:
        """The ``WriteValue`` of each key, in key order."""
        return write_values(self.keys, self.ts, self.values)


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
class WriteIntents:
    """``count`` intents of a transaction laid down in ``span`` at ``ts``, one per key
    of a bulk load's batch (each key new)."""

    txn_id: bytes
    txn_key: bytes
    span: Span
    ts: Timestamp
    count: int


@dataclass(frozen=True, slots=True)
class CommitIntents:
    """A transaction's intents on ``keys`` committed at ``ts`` as ``values``, none with a
    previous value; ``keys`` ascend strictly inside ``span`` (as :class:`IngestValues`,
    whose columns it holds the same way)."""

    txn_id: bytes
    span: Span
    ts: Timestamp
    keys: Sequence[bytes]
    values: Sequence[bytes]

    def each(self) -> list[WriteValue]:
        """The ``WriteValue`` of each key, in key order."""
        return write_values(self.keys, self.ts, self.values)


@dataclass(frozen=True, slots=True)
class AbortIntents:
    """``count`` intents of a transaction in ``span`` removed at once."""

    txn_id: bytes
    span: Span
    count: int


@dataclass(frozen=True, slots=True)
class AbortTxn:
    txn_id: bytes


@dataclass(frozen=True, slots=True)
class DeleteRange:
    span: Span
    ts: Timestamp


LogicalOp = (
    WriteValue
    | IngestValues
    | WriteIntent
    | UpdateIntent
    | CommitIntent
    | AbortIntent
    | AbortTxn
    | DeleteRange
    | WriteIntents
    | CommitIntents
    | AbortIntents
)
