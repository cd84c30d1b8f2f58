"""Transaction records: the one place a transaction's fate is decided.

A record lives on the range of the transaction's anchor key (its first written key), in
the ``txn_records`` sub-database, keyed by anchor key and txn id. A transaction that
writes intents creates its record (``PENDING``) before the first intent, so an intent
whose record is missing belongs to a transaction that can never commit: pushers treat
it as aborted. The record moves to ``COMMITTED`` or ``ABORTED`` exactly once; that write
is the commit point. ``last_active_ns`` is refreshed by heartbeats; a pending record not
heartbeated within the liveness window is expired and any pusher may abort it.

One-phase commits write committed values directly and never create a record.

Records are removed once nothing needs them (CockroachDB's transaction record GC):

- an ``EndTxn`` whose lock spans all lie in the record's range resolves them in the
  same command and removes the record there, never writing it finished;
- otherwise the record is written finished with the spans left to resolve elsewhere
  (``lock_spans``); the node resolves them in the background and then removes it;
- a record left behind (its node died before that cleanup, or a pusher aborted it, or
  its coordinator vanished) is removed by the range's GC pass once it has been idle
  longer than the cleanup threshold, after its ``lock_spans`` are resolved.

A missing record therefore means "finished, or never able to commit": a pusher takes
an intent without one for aborted, a two-phase commit without one is refused, and a
removed record is never written again (:mod:`feedkv.kv.txn_tombstones`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

from feedkv.storage.engine import Reader, ReadWriter
from feedkv.storage.intent import TxnMeta, TxnStatus
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = [
    "TXN_ID_BYTES",
    "TXN_RECORDS",
    "TxnRecord",
    "anchored_in",
    "delete_record",
    "read_record",
    "record_bounds",
    "records_in",
    "write_record",
]

TXN_RECORDS = "txn_records"
TXN_ID_BYTES = 16

# id, epoch, wall, logical, status, priority, last active
_HEADER = struct.Struct(">16sIQIBIQ")
_STATUS_CODES = {TxnStatus.PENDING: 0, TxnStatus.COMMITTED: 1, TxnStatus.ABORTED: 2}
_STATUSES = {code: status for status, code in _STATUS_CODES.items()}
# NB: a status byte with this bit set is followed by the lock spans (a count, then each
# bound length-prefixed), then the anchor key; without it (records written before lock
# spans were kept, and every pending one) by the anchor key alone
_HAS_SPANS = 0x80
_COUNT = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class TxnRecord:
    meta: TxnMeta  # id, anchor key, epoch and the timestamp it commits at (pushes raise it)
    status: TxnStatus
    priority: int
    last_active_ns: int  # a heartbeat's, or when the record was finished
    lock_spans: tuple[Span, ...] = ()  # a finished record's intents left to resolve

    def finished(self) -> bool:
        return self.status is not TxnStatus.PENDING

    def idle(self, now_ns: int, threshold_ns: int) -> bool:
        """Whether nothing touched the record for longer than ``threshold_ns``: the GC
        pass removes such a record (a pending one is long expired by then)."""
        return now_ns - self.last_active_ns > threshold_ns

    def with_status(self, status: TxnStatus) -> TxnRecord:
        return replace(self, status=status)

    def pushed_to(self, ts: Timestamp) -> TxnRecord:
        return replace(self, meta=self.meta.with_ts(max(ts, self.meta.write_ts)))

    def expired(self, now_ns: int, liveness_ns: int) -> bool:
        return self.status is TxnStatus.PENDING and now_ns - self.last_active_ns > liveness_ns

    def encode(self) -> bytes:
        m = self.meta
        code = _STATUS_CODES[self.status] | (_HAS_SPANS if self.lock_spans else 0)
        header = _HEADER.pack(
            m.id,
            m.epoch,
            m.write_ts.wall,
            m.write_ts.logical,
            code,
            self.priority,
            self.last_active_ns,
        )
        if not self.lock_spans:
            return header + m.key
        parts = [header, _COUNT.pack(len(self.lock_spans))]
        for span in self.lock_spans:
            for bound in (span.start, span.end):
                parts += (_COUNT.pack(len(bound)), bound)
        parts.append(m.key)
        return b"".join(parts)

    @classmethod
    def decode(cls, raw: bytes) -> TxnRecord:
        txn_id, epoch, wall, logical, code, priority, active = _HEADER.unpack_from(raw)
        at = _HEADER.size
        spans: list[Span] = []
        if code & _HAS_SPANS:
            (count,) = _COUNT.unpack_from(raw, at)
            at += _COUNT.size
            for _ in range(count):
                bounds = []
                for _bound in range(2):
                    (length,) = _COUNT.unpack_from(raw, at)
                    at += _COUNT.size
                    bounds.append(raw[at : at + length])
                    at += length
                spans.append(Span(bounds[0], bounds[1]))
        meta = TxnMeta(txn_id, raw[at:], epoch, Timestamp(wall, logical))
        return cls(meta, _STATUSES[code & ~_HAS_SPANS], priority, active, tuple(spans))


def _record_key(anchor: bytes, txn_id: bytes) -> bytes:
    return anchor + txn_id


def record_bounds(span: Span) -> tuple[bytes, bytes]:
    """The keys of ``TXN_RECORDS`` to scan for the records anchored in ``span`` (it may
    hold some anchored just past it: see :func:`anchored_in`)."""
    # NB: keyed by anchor + txn id, a record anchored below span.end may sort past it
    return span.start, span.end + b"\xff" * TXN_ID_BYTES


def anchored_in(record_key: bytes, span: Span) -> bool:
    """Whether the record at ``record_key`` is anchored in ``span``."""
    return span.contains_key(record_key[:-TXN_ID_BYTES])


def records_in(reader: Reader, span: Span) -> list[TxnRecord]:
    """The records anchored in ``span``, in key order."""
    return [
        TxnRecord.decode(raw)
        for key, raw in reader.scan(TXN_RECORDS, *record_bounds(span))
        if anchored_in(key, span)
    ]


def read_record(reader: Reader, anchor: bytes, txn_id: bytes) -> TxnRecord | None:
    raw = reader.get(TXN_RECORDS, _record_key(anchor, txn_id))
    return TxnRecord.decode(raw) if raw is not None else None


def write_record(rw: ReadWriter, record: TxnRecord) -> None:
    rw.put(TXN_RECORDS, _record_key(record.meta.key, record.meta.id), record.encode())


def delete_record(rw: ReadWriter, anchor: bytes, txn_id: bytes) -> bool:
    """Remove the record; returns whether there was one."""
    return rw.delete(TXN_RECORDS, _record_key(anchor, txn_id))
