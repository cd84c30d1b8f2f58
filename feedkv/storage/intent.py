"""Transactions as storage sees them, and the intent record.

An intent is a transaction's provisional write of one key. Its record holds the
writer's :class:`TxnMeta` (id, anchor key of the txn record, epoch, write timestamp,
sequence), the provisional value, and the values it replaced at lower sequence numbers
of the same epoch (so a read at an older sequence sees what the txn had written then).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from feedkv.errors import InvariantViolation
from feedkv.util.hlc import Timestamp

__all__ = ["Intent", "IntentRecord", "TxnMeta", "TxnStatus"]


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
