"""Transactions as storage sees them, and the intent record.

An intent is a transaction's provisional write of one key. Its record holds the
writer's :class:`TxnMeta` (id, anchor key of the txn record, epoch, write timestamp,
sequence), the provisional value, and the values it replaced at lower sequence numbers
of the same epoch (so a read at an older sequence sees what the txn had written then).
"""

from __future__ import annotations

import enum
import operator
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat

from feedkv.errors import InvariantViolation
from feedkv.util.hlc import Timestamp

__all__ = ["Intent", "IntentRecord", "TxnMeta", "TxnStatus", "encode_intents", "uniform_intents"]


class TxnStatus(enum.Enum):
    PENDING = "PENDING"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"


@dataclass(frozen=True, slots=True)
class TxnMeta:
    """What every intent of a transaction records about it.

    ``id`` is 16 bytes (a UUID); ``key`` anchors the transaction record.
    """

    id: bytes
    key: bytes
    epoch: int
    write_ts: Timestamp
    seq: int = 0

    def with_ts(self, ts: Timestamp) -> TxnMeta:
        return TxnMeta(self.id, self.key, self.epoch, ts, self.seq)


@dataclass(frozen=True, slots=True)
class Intent:
    """An intent found on ``key`` (what a conflicting reader or writer is told)."""

    key: bytes
    txn: TxnMeta


# id, epoch, wall, logical, seq, key length, has value, value length, history length
_HEADER = struct.Struct(">16sIQIIHBII")
_HISTORY_ENTRY = struct.Struct(">IBI")


@dataclass(frozen=True, slots=True)
class IntentRecord:
    """The stored form of an intent: meta, provisional value, and earlier-sequence values."""

    txn: TxnMeta
    value: bytes | None
    history: tuple[tuple[int, bytes | None], ...] = ()

    def value_at_seq(self, seq: int) -> tuple[bool, bytes | None]:
        """What the txn had written by sequence ``seq``: ``(found, value)``."""
        if self.txn.seq <= seq:
            return True, self.value
        for entry_seq, value in reversed(self.history):
            if entry_seq <= seq:
                return True, value
        return False, None

    def encode(self) -> bytes:
        txn = self.txn
        value = self.value or b""
        parts = [
            _HEADER.pack(
                txn.id,
                txn.epoch,
                txn.write_ts[0],
                txn.write_ts[1],
                txn.seq,
                len(txn.key),
                self.value is not None,
                len(value),
                len(self.history),
            ),
            txn.key,
            value,
        ]
        for seq, old in self.history:
            parts.append(_HISTORY_ENTRY.pack(seq, old is not None, len(old or b"")))
            parts.append(old or b"")
        return b"".join(parts)

    @classmethod
    def decode(cls, raw: bytes) -> IntentRecord:
        try:
            (txn_id, epoch, wall, logical, seq, key_len, has_value, value_len, n_history) = (
                _HEADER.unpack_from(raw)
            )
            pos = _HEADER.size
            key = raw[pos : pos + key_len]
            pos += key_len
            value = raw[pos : pos + value_len] if has_value else None
            pos += value_len
            history: list[tuple[int, bytes | None]] = []
            for _ in range(n_history):
                entry_seq, entry_has, entry_len = _HISTORY_ENTRY.unpack_from(raw, pos)
                pos += _HISTORY_ENTRY.size
                history.append((entry_seq, raw[pos : pos + entry_len] if entry_has else None))
                pos += entry_len
        except struct.error as exc:
            raise InvariantViolation(f"corrupt intent record ({len(raw)} bytes)") from exc
        if pos != len(raw):
            raise InvariantViolation(f"corrupt intent record: {len(raw) - pos} trailing bytes")
        meta = TxnMeta(txn_id, key, epoch, Timestamp(wall, logical), seq)
        return cls(meta, value, tuple(history))


# A record's header up to its value length (id .. has value): one batch's records share it
_SHARED = struct.Struct(">16sIQIIHB")
_LENGTH = struct.Struct(">I")
_NO_HISTORY = _LENGTH.pack(0)
_VALUE_AT = _HEADER.size  # NB: the txn key, then the value, follow the header
_HISTORY_AT = slice(_SHARED.size + _LENGTH.size, _HEADER.size)


def encode_intents(txn: TxnMeta, values: Sequence[bytes]) -> Iterator[bytes]:
    """``IntentRecord(txn, value).encode()`` of each of ``values`` (none ``None``), in
    C-level maps with no Python code run per value: a bulk load's intents."""
    ts = txn.write_ts
    shared = _SHARED.pack(txn.id, txn.epoch, ts[0], ts[1], txn.seq, len(txn.key), True)
    heads = map(shared.__add__, map(_LENGTH.pack, map(len, values)))
    return map(bytes.__add__, map(bytes.__add__, heads, repeat(_NO_HISTORY + txn.key)), values)


def uniform_intents(raws: Sequence[bytes]) -> tuple[TxnMeta, list[bytes]] | None:
    """When every record of ``raws`` holds a value and no history under one and the same
    meta (the intents of one bulk write, :func:`encode_intents`): that meta and the
    values, read with no Python code run per record; else ``None``."""
    if not raws:
        return None
    first = IntentRecord.decode(raws[0])
    if first.value is None or first.history:
        return None
    shared = raws[0][: _SHARED.size]
    if not all(map(bytes.startswith, raws, repeat(shared))):
        return None
    if set(map(operator.getitem, raws, repeat(_HISTORY_AT))) != {_NO_HISTORY}:
        return None
    at = slice(_VALUE_AT + len(first.txn.key), None)
    values: list[bytes] = list(map(operator.getitem, raws, repeat(at)))  # type: ignore[arg-type]
    told = sum(map(operator.itemgetter(0), map(_LENGTH.unpack_from, raws, repeat(_SHARED.size))))
    if told != sum(map(len, values)):
        raise InvariantViolation("corrupt intent records: value lengths disagree")
    return first.txn, values
