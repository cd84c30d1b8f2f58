"""Transaction records: the one place a transaction's fate is decided.

A record lives on the range of the transaction's anchor key (its first written key), in
the ``txn_records`` sub-database, keyed by anchor key and txn id. A transaction that
writes intents creates its record (``PENDING``) before the first intent, so an intent
whose record is missing belongs to a transaction that can never commit: pushers treat
it as aborted. The record moves to ``COMMITTED`` or ``ABORTED`` exactly once; that write
is the commit point. ``last_active_ns`` is refreshed by heartbeats; a pending record not
heartbeated within the liveness window is expired and any pusher may abort it.

One-phase commits write committed values directly and never create a record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

from feedkv.storage.engine import Reader, ReadWriter
from feedkv.storage.intent import TxnMeta, TxnStatus
from feedkv.util.hlc import Timestamp

__all__ = ["TXN_RECORDS", "TxnRecord", "read_record", "write_record"]

TXN_RECORDS = "txn_records"

# id, epoch, wall, logical, status, priority, last active
_HEADER = struct.Struct(">16sIQIBIQ")
_STATUS_CODES = {TxnStatus.PENDING: 0, TxnStatus.COMMITTED: 1, TxnStatus.ABORTED: 2}
_STATUSES = {code: status for status, code in _STATUS_CODES.items()}


@dataclass(frozen=True, slots=True)
class TxnRecord:
    meta: TxnMeta  # id, anchor key, epoch and the timestamp it commits at (pushes raise it)
    status: TxnStatus
    priority: int
    last_active_ns: int

    def with_status(self, status: TxnStatus) -> TxnRecord:
        return replace(self, status=status)

    def pushed_to(self, ts: Timestamp) -> TxnRecord:
        return replace(self, meta=self.meta.with_ts(max(ts, self.meta.write_ts)))

    def expired(self, now_ns: int, liveness_ns: int) -> bool:
        return self.status is TxnStatus.PENDING and now_ns - self.last_active_ns > liveness_ns

    def encode(self) -> bytes:
        m = self.meta
        header = _HEADER.pack(
            m.id,
            m.epoch,
            m.write_ts.wall,
            m.write_ts.logical,
            _STATUS_CODES[self.status],
            self.priority,
            self.last_active_ns,
        )
        return header + m.key

    @classmethod
    def decode(cls, raw: bytes) -> TxnRecord:
        txn_id, epoch, wall, logical, status, priority, active = _HEADER.unpack_from(raw)
        meta = TxnMeta(txn_id, raw[_HEADER.size :], epoch, Timestamp(wall, logical))
        return cls(meta, _STATUSES[status], priority, active)


def _record_key(anchor: bytes, txn_id: bytes) -> bytes:
    return anchor + txn_id


def read_record(reader: Reader, anchor: bytes, txn_id: bytes) -> TxnRecord | None:
    raw = reader.get(TXN_RECORDS, _record_key(anchor, txn_id))
    return TxnRecord.decode(raw) if raw is not None else None


def write_record(rw: ReadWriter, record: TxnRecord) -> None:
    rw.put(TXN_RECORDS, _record_key(record.meta.key, record.meta.id), record.encode())
