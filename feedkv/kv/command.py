"""Evaluating a batch as one command of one range.

:func:`evaluate` runs on the engine's commit thread, inside the engine transaction the
store submitted it in: it reads and writes MVCC state through ``rw`` and returns an
:class:`Applied` record (the response, the logical ops, and what must happen once the
command is durable). Because every command of every range is evaluated on that one
thread, commands are serialized without latches, and a read can never miss a write
ordered before it. If evaluation raises, none of the command's writes land.

Timestamps are settled here. Before a write at ``ts`` lands, ``ts`` moves above the
highest read of its key (timestamp cache) and above the range's closed timestamp; a
transaction's ``write_ts`` follows, and the coordinator must refresh its reads before it
commits. A batch outside a transaction that meets a newer version raises
:class:`WriteTooOldError` and the store re-runs it higher; a transaction's write is
simply placed above the version.

Side effects outside ``rw`` (timestamp cache, closed timestamps) are monotone, so the
engine may re-run a command (after growing its map) without harm.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from feedkv.errors import (
    FeedKVError,
    InvalidArgumentError,
    PushFailedError,
    RangeKeyMismatchError,
    RangeNotFoundError,
    RangeUnavailableError,
    TransactionAbortedError,
    TransactionRetryError,
    TransactionStatusError,
    WriteIntentError,
    WriteTooOldError,
)
from feedkv.kv import range_move
from feedkv.kv.api import (
    GC,
    BatchRequest,
    BatchResponse,
    ConditionalPut,
    ConditionalPutResponse,
    DeleteRange,
    DeleteRangeResponse,
    EndTxn,
    EndTxnResponse,
    Export,
    ExportPosition,
    ExportResponse,
    GCResponse,
    Get,
    GetResponse,
    HeartbeatTxn,
    HeartbeatTxnResponse,
    IncrementalScan,
    IncrementalScanResponse,
    Ingest,
    IngestResponse,
    Merge,
    MergeResponse,
    PushTxn,
    PushTxnResponse,
    PushType,
    Put,
    PutResponse,
    RangeLookup,
    RangeLookupResponse,
    RefreshRange,
    RefreshRangeResponse,
    Request,
    ResolveIntent,
    ResolveIntentResponse,
    Response,
    Scan,
    ScanResponse,
    Split,
    SplitResponse,
    Transaction,
)
from feedkv.kv.closed_timestamp import ClosedTimestamps
from feedkv.kv.lock_table import MAX_LOCKS_PER_SCAN, LockTable
from feedkv.kv.observer import RangeEndReason
from feedkv.kv.range_descriptor import (
    RangeDescriptor,
    all_descriptors,
    delete_descriptor,
    descriptor_by_id,
    descriptor_for_key,
    next_range_id,
    write_descriptor,
)
from feedkv.kv.tscache import TimestampCache
from feedkv.kv.txn_record import TxnRecord, delete_record, read_record, write_record
from feedkv.kv.txn_tombstones import TxnTombstones
from feedkv.kv.txn_wait import WAIT_TTL_NS, TxnWaitQueue
from feedkv.storage import mvcc
from feedkv.storage.engine import ReadWriter
from feedkv.storage.export import (
    PAGE_ENTRIES,
    cheaper_by_key,
    export_pages,
    iter_export,
    span_pages,
)
from feedkv.storage.gc import check_gc_threshold, gc
from feedkv.storage.intent import TxnMeta, TxnStatus
from feedkv.storage.logical_ops import LogicalOp
from feedkv.util.hlc import ZERO_TIMESTAMP, Clock, Timestamp
from feedkv.util.keys import KEY_MAX, Span, check_key, key_next
from feedkv.util.keyspace import pretty_key

__all__ = [
    "Applied",
    "CommandContext",
    "PushBatch",
    "RangeChange",
    "PushNeedsWrite",
    "TxnPushFailed",
    "batch_key",
    "batch_spans",
    "evaluate",
]

_WRITES = (Put, ConditionalPut, DeleteRange, Ingest)
_WriteFn = Callable[[Timestamp, TxnMeta | None], list[LogicalOp]]


class PushBatch(FeedKVError):
    """A batch writing committed values must re-run at ``ts`` (the store does so)."""

    def __init__(self, ts: Timestamp) -> None:
        self.ts = ts
        super().__init__(f"re-run the batch at {ts}")


class PushNeedsWrite(FeedKVError):
    """A push probed against a reader would write the pushee's record: it must go as a
    write. Never leaves the store."""


class TxnPushFailed(PushFailedError):
    """The pushee is alive and outranks the pusher: the pusher must wait. Over the wire
    it arrives as its base, without the record."""

    def __init__(self, record: TxnRecord) -> None:
        self.record = record
        super().__init__(
            f"txn {record.meta.id.hex()[:8]} is pending with priority {record.priority}"
        )


@dataclass(frozen=True, slots=True)
class RangeChange:
    """A split of ``left`` that created ``right``, or a merge of ``right`` into ``left``
    (``reason`` says which); the observers of the ranges it replaced are ended."""

    reason: RangeEndReason
    left: int
    right: int

    def ended(self) -> tuple[int, ...]:
        """The ranges whose descriptors this change replaced."""
        if self.reason is RangeEndReason.RANGE_SPLIT:
            return (self.left,)
        return (self.left, self.right)


@dataclass(slots=True)
class Applied:
    """What a command did: its response and what must follow once it is durable."""

    response: BatchResponse
    range_id: int
    ops: list[LogicalOp] = field(default_factory=list)
    range_changes: list[RangeChange] = field(default_factory=list)
    resolve_later: list[ResolveIntent] = field(default_factory=list)
    # finished records to remove once every resolve_later is done (a GC request)
    records_to_gc: list[TxnMeta] = field(default_factory=list)
    finished_txns: list[bytes] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CommandContext:
    """The store's state a command reads and advances (only under the engine's
    ``eval_lock``: commands on the commit thread, reads beside it)."""

    clock: Clock
    tscache: TimestampCache
    closed: ClosedTimestamps
    txn_liveness_ns: int
    frozen: set[int] = field(default_factory=set)  # ranges moving away: they serve nothing
    replicated: set[int] = field(default_factory=set)  # ranges served through Raft
    # Hands out the id of a split's new range (a replicated range's lease holder gives
    # one it took beforehand: the store's id counter must not travel in the Raft log)
    new_range_id: Callable[[ReadWriter], int] = next_range_id
    # The store's locks (:mod:`feedkv.kv.lock_table`): locking reads take them, writes
    # wait for them, a transaction's end lets go of them
    locks: LockTable = field(default_factory=LockTable)
    # The pushes waiting for the transactions whose records this store holds, to find
    # deadlocks across nodes (:mod:`feedkv.kv.txn_wait`)
    waits: TxnWaitQueue = field(default_factory=lambda: TxnWaitQueue(WAIT_TTL_NS))
    # The transactions whose records this store removed: they may not write one again
    tombstones: TxnTombstones = field(default_factory=lambda: TxnTombstones(ZERO_TIMESTAMP))


def _request_span(request: Request, txn: Transaction | None) -> Span | None:
    """The keys a request touches (``None``: an admin request routed by the node)."""
    if isinstance(request, Get | Put | ConditionalPut):
        return Span.for_key(check_key(request.key))
    if isinstance(
        request,
        DeleteRange | Scan | ResolveIntent | RefreshRange | Export | GC | Ingest | IncrementalScan,
    ):
        return request.span
    if isinstance(request, EndTxn | HeartbeatTxn):
        if txn is None or not txn.key:
            raise InvalidArgumentError(
                f"{type(request).__name__} needs a transaction with an anchor key"
            )
        return Span.for_key(txn.key)
    if isinstance(request, PushTxn):
        return Span.for_key(request.pushee.key)
    return None


def batch_key(batch: BatchRequest) -> bytes:
    """The key whose range a batch without a range id goes to: its first request's."""
    txn = batch.header.txn
    first = next((s for r in batch.requests if (s := _request_span(r, txn))), None)
    return first.start if first is not None else _admin_key(batch.requests[0])


def batch_spans(batch: BatchRequest) -> tuple[Span, ...] | None:
    """The keys ``batch`` reads or writes, with the intents an ``EndTxn`` resolves;
    ``None`` for a split or merge (they rewrite the range map, which every request reads
    and a ``RangeLookup`` reads alone)."""
    spans: list[Span] = []
    for request in batch.requests:
        if isinstance(request, RangeLookup):
            continue
        try:
            span = _request_span(request, batch.header.txn)
        except InvalidArgumentError:
            return None  # evaluation will refuse it; assume the worst until then
        if span is None:
            return None
        spans.append(span)
        if isinstance(request, EndTxn):
            spans.extend(request.lock_spans)
    return tuple(spans)


def _route(rw: ReadWriter, batch: BatchRequest, frozen: set[int]) -> RangeDescriptor:
    header = batch.header
    if header.range_id:
        desc = descriptor_by_id(rw, header.range_id)
        if desc is None:
            # NB: an arrival first: a range moving back holds the record of its last
            # move away, which names the node it is now leaving
            if range_move.read_record(rw, "pending", header.range_id) is not None:
                raise RangeUnavailableError(f"range r{header.range_id} is arriving here")
            moved = range_move.read_record(rw, "moved", header.range_id)
            if moved is not None:
                raise RangeKeyMismatchError(f"range r{header.range_id} moved", [moved.desc])
            raise RangeNotFoundError(header.range_id)
    else:
        desc = descriptor_for_key(rw, batch_key(batch))
    if frozen and desc.range_id in frozen:
        raise RangeUnavailableError(f"range r{desc.range_id} is moving to another node")
    start, end = desc.span.start, desc.span.end
    txn_key = header.txn.key if header.txn is not None else b""
    for request in batch.requests:
        # The common cases first, without building a span.
        if isinstance(request, Get | Put | ConditionalPut):
            if start <= check_key(request.key) < end:
                continue
            _mismatch(rw, desc, Span.for_key(request.key))
        elif isinstance(request, EndTxn) and txn_key and start <= txn_key < end:
            continue
        span = _request_span(request, header.txn)
        if span is not None and not desc.span.contains(span):
            _mismatch(rw, desc, span)
    return desc


def _mismatch(rw: ReadWriter, desc: RangeDescriptor, span: Span) -> None:
    current = [d for d in all_descriptors(rw) if d.span.overlaps(span)]
    raise RangeKeyMismatchError(
        f"{span} is not inside {desc}; it now spans " + ", ".join(str(d) for d in current),
        current,
    )


def _admin_key(request: Request) -> bytes:
    if isinstance(request, Split | Merge | RangeLookup):
        return check_key(request.key) if request.key else request.key
    raise InvalidArgumentError(f"cannot route a {type(request).__name__} without keys")


def evaluate(
    ctx: CommandContext,
    rw: ReadWriter,
    batch: BatchRequest,
    *,
    replicated: bool = False,
    probe: bool = False,
) -> Applied:
    """Evaluate ``batch`` against ``rw`` as one command of the range it addresses;
    ``replicated``: on the range's lease holder, to be proposed to its Raft log (a
    replicated range refuses any other way in). ``probe``: a push evaluated against a
    reader, which raises :class:`PushNeedsWrite` rather than write."""
    if not batch.requests:
        raise InvalidArgumentError("empty batch: send at least one request")
    desc = _route(rw, batch, ctx.frozen)
    if (desc.range_id in ctx.replicated) != replicated:
        raise RangeUnavailableError(
            f"range r{desc.range_id} is {'not ' if replicated else ''}replicated here: "
            "send the batch again"
        )
    now = ctx.clock.now()
    closed = ctx.closed.close(desc.range_id, now)
    txn = batch.header.txn
    deadline = batch.header.deadline
    if txn is not None:
        if deadline is not None:
            raise InvalidArgumentError(
                "header.deadline is for batches without a transaction; "
                "put a transaction's deadline on its EndTxn"
            )
        if not txn.started():
            txn = txn.started_at(now)
    ts = batch.header.timestamp or now
    applied = Applied(BatchResponse((), ts, txn), desc.range_id)
    ev = _Evaluator(ctx, rw, desc, applied, ts, txn, closed)
    ev.probe = probe
    last = batch.requests[-1]
    if (
        txn is not None
        and isinstance(last, EndTxn)
        and last.commit
        # NB: a transaction that wrote no intent (sequence and epoch 0) may name spans it
        # only locked: the commit lets go of those locks
        and (not last.lock_spans or not (txn.seq or txn.epoch))
        and any(isinstance(r, _WRITES) for r in batch.requests)
    ):
        ev.begin_one_phase()
    responses = tuple(map(ev.run, batch.requests))
    if deadline is not None and ev.ts >= deadline:
        raise TransactionRetryError(
            "RETRY_COMMIT_DEADLINE_EXCEEDED",
            f"the batch at {ev.ts} would land at or past its deadline {deadline}",
        )
    applied.response = BatchResponse(responses, ev.ts, ev.txn)
    return applied


def _read_part(span: Span, resume_key: bytes, reverse: bool) -> Span | None:
    """The part of ``span`` a scan read before it stopped at ``resume_key`` (``None``:
    nothing, the limit ran out before the first key)."""
    if reverse:
        resume_end = key_next(resume_key)
        return Span(resume_end, span.end) if resume_end < span.end else None
    return Span(span.start, resume_key) if span.start < resume_key else None


def _check_ended(record: TxnRecord, commit: bool, *, one_phase: bool = False) -> None:
    """Raise if an ``EndTxn`` (committing, or not) cannot end the transaction of
    ``record``, which may have ended: it was aborted (by a pusher: one of higher
    priority, or its heartbeat expired) and the ``EndTxn`` commits, or it committed (a
    two-phase commit's ``EndTxn`` sent again finds its own commit, which stands; a
    one-phase commit's writes would land a second time)."""
    txn_id = record.meta.id.hex()[:8]
    if record.status is TxnStatus.ABORTED and commit:
        raise TransactionAbortedError(
            "TransactionAbortedError(ABORT_REASON_ABORTED_RECORD_FOUND): "
            f"txn {txn_id} was aborted (a higher-priority transaction or an expired "
            "heartbeat); start it again"
        )
    if record.status is TxnStatus.COMMITTED and (not commit or one_phase):
        raise TransactionStatusError(f"txn {txn_id} is already committed")


def _record_gone(txn_id: bytes, tombstones: TxnTombstones) -> TransactionAbortedError:
    """The error of a transaction that would create its record, or commit without one,
    when it may not (see :mod:`feedkv.kv.txn_tombstones`)."""
    short = txn_id.hex()[:8]
    if tombstones.was_removed(txn_id):
        return TransactionAbortedError(
            "TransactionAbortedError(ABORT_REASON_RECORD_ALREADY_WRITTEN_POSSIBLE_REPLAY): "
            f"txn {short} has finished and its record was removed; start it again"
        )
    return TransactionAbortedError(
        "TransactionAbortedError(ABORT_REASON_TIMESTAMP_CACHE_REJECTED): "
        f"txn {short} has no record, and may not create one (it began before this "
        "node knows which records were removed, or a pusher took it for abandoned); "
        "start it again"
    )


class _Evaluator:
    def __init__(
        self,
        ctx: CommandContext,
        rw: ReadWriter,
        desc: RangeDescriptor,
        applied: Applied,
        ts: Timestamp,
        txn: Transaction | None,
        closed: Timestamp,
    ) -> None:
        self.ctx = ctx
        self.rw = rw
        self.desc = desc
        self.applied = applied
        self.ts = ts
        self.txn = txn
        self.closed = closed
        self.one_phase = False
        self.probe = False

    # Timestamps.

    def begin_one_phase(self) -> None:
        """Evaluate the batch's writes as committed values at the transaction's timestamp.

        NB: not for a transaction that has written before (a sequence number or an epoch
        past 0): its intents are out there, and its record decides their fate, in two
        phases; without a record (removed once it finished, or a pusher took its intents
        for orphaned) the ``EndTxn`` refuses to commit it. One that has not written has
        no intent, and only its intents make it known to others: nobody can have pushed
        or aborted it, and it makes a record itself only once it writes intents."""
        txn = self.txn
        if txn is None or txn.seq or txn.epoch:
            return
        self.one_phase = True
        self.ts = txn.write_ts

    @property
    def read_ts(self) -> Timestamp:
        return self.txn.read_ts if self.txn is not None else self.ts

    @property
    def txn_id(self) -> bytes | None:
        return self.txn.id if self.txn is not None else None

    def _write_ts(self, floor: Timestamp) -> Timestamp:
        """The timestamp a write lands at, given the highest read below it must clear
        (and the closed timestamp)."""
        floor = max(floor, self.closed)
        if self.txn is not None and not self.one_phase:
            ts = self.txn.write_ts
            if ts <= floor:
                ts = floor.next()
                self.txn = self.txn.with_write_ts(ts)
            return ts
        if self.ts <= floor:
            self._pushed(floor.next())
        return self.ts

    def _pushed(self, ts: Timestamp) -> None:
        """A batch writing committed values must move to ``ts``: re-run it there."""
        if self.one_phase and self.txn is not None:
            # NB: refresh to now, not just above the closed timestamp: the closed timestamp
            # moves on during the refresh's round trip, so a retry aimed just above it
            # would be pushed again, forever.
            ts = max(ts, self.ctx.clock.now())
            raise TransactionRetryError(
                "RETRY_SERIALIZABLE",
                f"the one-phase commit was pushed from {self.ts} to {ts}; refresh and retry",
                ts,
            )
        raise PushBatch(ts)

    def _next_seq(self) -> TxnMeta | None:
        if self.txn is None or self.one_phase:
            return None
        self.txn = self.txn.with_seq(self.txn.seq + 1)
        return self.txn.meta()

    def _write(self, key_floor: Timestamp, write: _WriteFn) -> list[LogicalOp]:
        while True:
            ts = self._write_ts(key_floor)
            meta = self._next_seq()
            try:
                return write(ts, meta)
            except WriteTooOldError as exc:
                if self.txn is None or self.one_phase:
                    self._pushed(exc.actual_ts)
                if self.txn is not None:
                    self.txn = self.txn.with_seq(self.txn.seq - 1)
                key_floor = exc.existing_ts

    # Requests.

    def run(self, request: Request) -> Response:
        handler = _HANDLERS.get(type(request))
        if handler is None:
            raise InvalidArgumentError(f"unknown request type {type(request).__name__}")
        return handler(self, request)

    def get(self, req: Get) -> GetResponse:
        ts = self.read_ts
        kv = mvcc.get(self.rw, req.key, ts, txn=self._read_meta())
        self.ctx.tscache.add_key(req.key, ts, self.txn_id)
        return GetResponse(kv.value, kv.ts) if kv is not None else GetResponse(None)

    def scan(self, req: Scan) -> ScanResponse:
        if req.lock and self.txn is not None:
            return self._locking_scan(req, self.txn)
        ts = self.read_ts
        result = mvcc.scan(
            self.rw, req.span, ts, txn=self._read_meta(), limit=req.limit, reverse=req.reverse
        )
        read: Span | None = req.span
        if result.resume_key is not None:
            read = _read_part(req.span, result.resume_key, req.reverse)
        if read is not None:
            self.ctx.tscache.add_span(read, ts, self.txn_id)
        return ScanResponse(tuple(result.rows), result.resume_key)

    def incremental_scan(self, req: IncrementalScan) -> IncrementalScanResponse:
        """See :class:`~feedkv.kv.api.IncrementalScan`. The conflicts are a scan's: every
        other transaction's intent at or below the read in the span, found before
        anything is read (the store pushes them and runs the batch again)."""
        ts = self.read_ts
        if req.since > ts:
            raise InvalidArgumentError(
                f"an incremental scan from {req.since} cannot read at {ts}, below it"
            )
        check_gc_threshold(self.rw, req.span, req.since)
        meta = self._read_meta()
        own: list[bytes] = []
        conflicts = []
        for intent in mvcc.scan_intents(self.rw, req.span):
            if meta is not None and intent.txn.id == meta.id:
                own.append(intent.key)
            elif intent.txn.write_ts <= ts:
                conflicts.append(intent)
        if conflicts:
            raise WriteIntentError(conflicts)
        self.ctx.tscache.add_span(req.span, ts, self.txn_id)
        changed: dict[bytes, tuple[Timestamp, bytes | None]] = {}
        limit = req.limit
        if req.since < ts:
            by_key = cheaper_by_key(self.rw, req.span, req.since)
            pages = (span_pages if by_key else export_pages)(self.rw, req.span, req.since, ts)
            # NB: each key's versions come oldest first in both orders: the last one stays
            for page in pages:
                versions = zip(page.timestamps, page.values, strict=True)
                changed.update(zip(page.keys, versions, strict=True))
                if limit is not None and len(changed) > limit:
                    return IncrementalScanResponse((), (), (), complete=False)
        for key in own:
            kv = mvcc.get(self.rw, key, ts, txn=meta)
            if kv is not None:
                changed[key] = (kv.ts, kv.value)
            else:
                found = mvcc.version_at(self.rw, key, ts)
                changed[key] = (found[0] if found is not None else ts, None)
        if limit is not None and len(changed) > limit:
            return IncrementalScanResponse((), (), (), complete=False)
        keys = tuple(sorted(changed))
        return IncrementalScanResponse(
            keys, tuple(changed[k][1] for k in keys), tuple(changed[k][0] for k in keys)
        )

    def _locking_scan(self, req: Scan, txn: Transaction) -> ScanResponse:
        """A locking read (see :class:`~feedkv.kv.api.Scan`): waits for other
        transactions' locks and intents in the span, reads, locks the keys read, and
        fails with ``RETRY_WRITE_TOO_OLD`` if one has a version above the read."""
        locks = self.ctx.locks
        if req.skip_locked:
            response = self._skipping_scan(req, txn)
        else:
            locks.check_span(req.span, txn.id)
            others = [i for i in mvcc.scan_intents(self.rw, req.span) if i.txn.id != txn.id]
            if others:
                raise WriteIntentError(others)
            response = self.scan(replace(req, lock=False))
        keys = [kv.key for kv in response.rows]
        if not keys or len(keys) > MAX_LOCKS_PER_SCAN:
            return response
        locks.acquire(keys, txn.meta())
        read: Span | None = req.span
        if response.resume_key is not None:
            read = _read_part(req.span, response.resume_key, req.reverse)
        newest = mvcc.newest_version_ts(self.rw, read) if read is not None else None
        if newest is not None and newest > txn.read_ts:
            raise TransactionRetryError(
                "RETRY_WRITE_TOO_OLD",
                f"a key locked in {req.span} has a version at {newest}, above the "
                f"read at {txn.read_ts}; refresh there and read again",
                newest,
            )
        return response

    def _skipping_scan(self, req: Scan, txn: Transaction) -> ScanResponse:
        """A ``skip_locked`` scan's rows: those of the parts of the span between the keys
        another transaction holds (a lock, or an intent, which is not pushed). Cut short
        by the limit at a part's end, it resumes at the held key after that part."""
        held = {i.key for i in mvcc.scan_intents(self.rw, req.span) if i.txn.id != txn.id}
        held.update(self.ctx.locks.refused_in(req.span, txn.id))
        if not held:
            return self.scan(replace(req, lock=False))
        keys = sorted(held)
        starts = [req.span.start, *(key_next(k) for k in keys)]
        ends = [*keys, req.span.end]
        # (part, the held key read after it in the scan's order, if any)
        parts = [
            (Span(a, b), keys[i] if i < len(keys) else None)
            for i, (a, b) in enumerate(zip(starts, ends, strict=True))
        ]
        if req.reverse:
            parts = [(part, keys[i - 1] if i else None) for i, (part, _) in enumerate(parts)]
            parts.reverse()
        rows: list[mvcc.KeyValue] = []
        for part, after in parts:
            if part.start < part.end:
                left = None if req.limit is None else req.limit - len(rows)
                result = self.scan(Scan(part, left, req.reverse))
                rows.extend(result.rows)
                if result.resume_key is not None:
                    return ScanResponse(tuple(rows), result.resume_key)
            if req.limit is not None and len(rows) >= req.limit and after is not None:
                return ScanResponse(tuple(rows), after)
        return ScanResponse(tuple(rows))

    def _check_locks(self, key: bytes) -> None:
        locks = self.ctx.locks
        if locks:
            locks.check(key, self.txn_id)

    def _read_meta(self) -> TxnMeta | None:
        return self.txn.meta() if self.txn is not None else None

    def put(self, req: Put) -> PutResponse:
        self._check_locks(req.key)
        floor = self.ctx.tscache.max_read(req.key, self.txn_id)
        self.applied.ops.extend(
            self._write(floor, lambda ts, meta: mvcc.put(self.rw, req.key, ts, req.value, txn=meta))
        )
        return PutResponse()

    def conditional_put(self, req: ConditionalPut) -> ConditionalPutResponse:
        self._check_locks(req.key)
        floor = self.ctx.tscache.max_read(req.key, self.txn_id)
        self.applied.ops.extend(
            self._write(
                floor,
                lambda ts, meta: mvcc.conditional_put(
                    self.rw, req.key, ts, req.value, req.expected, txn=meta, exists=req.exists
                ),
            )
        )
        return ConditionalPutResponse()

    def delete_range(self, req: DeleteRange) -> DeleteRangeResponse:
        self.ctx.locks.check_span(req.span, self.txn_id)
        floor = self.ctx.tscache.max_read_span(req.span, self.txn_id)
        deleted: list[bytes] = []

        def write(ts: Timestamp, meta: TxnMeta | None) -> list[LogicalOp]:
            keys, ops = mvcc.delete_range(self.rw, req.span, ts, txn=meta)
            deleted[:] = keys
            return ops

        self.applied.ops.extend(self._write(floor, write))
        return DeleteRangeResponse(tuple(deleted))

    def ingest(self, req: Ingest) -> IngestResponse:
        """Committed values outside a transaction or in its one-phase commit; else the
        transaction's intents, laid down and later resolved in bulk
        (:func:`~feedkv.storage.mvcc.ingest_intents`)."""
        self.ctx.locks.check_span(req.span, self.txn_id)
        floor = self.ctx.tscache.max_read_span(req.span, self.txn_id)

        def write(ts: Timestamp, meta: TxnMeta | None) -> list[LogicalOp]:
            if meta is None:
                return mvcc.ingest(self.rw, req.span, req.keys, req.values, ts)
            return mvcc.ingest_intents(self.rw, req.span, req.keys, req.values, ts, meta)

        self.applied.ops.extend(self._write(floor, write))
        return IngestResponse(len(req.keys))

    # Transactions.

    def _txn(self, request: Request) -> Transaction:
        if self.txn is None:
            raise InvalidArgumentError(f"{type(request).__name__} needs a transaction")
        return self.txn

    def end_txn(self, req: EndTxn) -> EndTxnResponse:
        txn = self._txn(req)
        if req.commit and req.deadline is not None:
            commit_ts = self.ts if self.one_phase else txn.write_ts
            if commit_ts >= req.deadline:
                raise TransactionRetryError(
                    "RETRY_COMMIT_DEADLINE_EXCEEDED",
                    f"the commit at {commit_ts} would land at or past its deadline {req.deadline}",
                )
        if self.one_phase:
            # The batch's writes already landed as committed values at ``self.ts``.
            self.txn = txn.with_write_ts(self.ts)
            # NB: one that held locks may have a record (its heartbeat's), written
            # committed here; one that was aborted meanwhile fails
            record = read_record(self.rw, txn.key, txn.id) if req.lock_spans else None
            if record is not None:
                _check_ended(record, commit=True, one_phase=True)
                # NB: its writes are committed values: the record has nothing left to say
                self._remove_record(record.meta)
            elif req.lock_spans and self.ctx.tombstones.was_removed(txn.id):
                raise _record_gone(txn.id, self.ctx.tombstones)
            self._release_locks(self.txn, req.lock_spans, TxnStatus.COMMITTED)
            return EndTxnResponse(TxnStatus.COMMITTED, one_phase=True)
        record = read_record(self.rw, txn.key, txn.id)
        if record is not None and record.finished():
            self.ctx.locks.release(txn.id)  # NB: it ended; its locks go whatever follows
            _check_ended(record, req.commit)
            return EndTxnResponse(record.status)
        wrote = bool(txn.seq or txn.epoch)
        if record is None and req.commit and wrote:
            # NB: its record was written before its first intent, so it is gone: removed
            # once the transaction finished, or never there (a pusher then took its
            # intents for orphaned). Either way committing now would lose writes.
            raise _record_gone(txn.id, self.ctx.tombstones)
        if req.commit:
            if record is not None and record.meta.write_ts > txn.write_ts:
                raise TransactionRetryError(
                    "RETRY_PUSHED",
                    f"another transaction pushed this one to {record.meta.write_ts}",
                    record.meta.write_ts,
                )
            if txn.write_ts != txn.read_ts:
                raise TransactionRetryError(
                    "RETRY_SERIALIZABLE",
                    f"reads at {txn.read_ts} must be refreshed to {txn.write_ts} before commit",
                    txn.write_ts,
                )
        status = TxnStatus.COMMITTED if req.commit else TxnStatus.ABORTED
        if record is None and not (req.lock_spans and wrote):
            # NB: one that wrote nothing (a locking read's locks at most) has no intent to
            # resolve: its end lets go of the locks and leaves no record behind
            self._release_locks(txn, req.lock_spans, status)
            self.applied.finished_txns.append(txn.id)
            return EndTxnResponse(status)
        meta = txn.meta()
        remote: list[Span] = []
        for span in req.lock_spans:
            local = span.intersect(self.desc.span)
            if local is not None:
                self.applied.ops.extend(mvcc.resolve_intents(self.rw, local, meta, status))
            remote.extend(span.subtract(self.desc.span) if local is not None else [span])
        if remote:
            # The record stays, finished, until the other ranges' intents are resolved.
            priority = record.priority if record is not None else txn.priority
            now_ns = self.ctx.clock.physical_now()
            write_record(self.rw, TxnRecord(meta, status, priority, now_ns, tuple(remote)))
            self.applied.resolve_later.extend(ResolveIntent(s, meta, status) for s in remote)
            self.applied.records_to_gc.append(meta)
        else:
            self._remove_record(meta)  # every intent is resolved: nothing needs it
        self.ctx.locks.release(txn.id)
        self.applied.finished_txns.append(txn.id)
        return EndTxnResponse(status)

    def _remove_record(self, meta: TxnMeta) -> bool:
        """Remove the record of ``meta``'s transaction (if any), for good: it may not be
        written again. Returns whether there was one."""
        self.ctx.tombstones.removed(meta.id, self.ctx.clock.now())
        return delete_record(self.rw, meta.key, meta.id)

    def _release_locks(
        self, txn: Transaction, lock_spans: tuple[Span, ...], status: TxnStatus
    ) -> None:
        """Let go of the locks of a transaction that wrote no intent: this store's at
        once, the other ranges' through a resolve (which finds no intent there, and lets
        go of the locks of the store serving the range)."""
        self.ctx.locks.release(txn.id)
        meta = None
        for span in lock_spans:
            for remote in span.subtract(self.desc.span):
                meta = meta or txn.meta()
                self.applied.resolve_later.append(ResolveIntent(remote, meta, status))

    def heartbeat_txn(self, req: HeartbeatTxn) -> HeartbeatTxnResponse:
        txn = self._txn(req)
        now_ns = self.ctx.clock.physical_now()
        record = read_record(self.rw, txn.key, txn.id)
        if record is None:
            # NB: a transaction built started, by hand (tests, tools), has no min_ts
            start = txn.min_ts if txn.min_ts != ZERO_TIMESTAMP else txn.read_ts
            if not self.ctx.tombstones.may_create(txn.id, start, self.desc.range_id):
                raise _record_gone(txn.id, self.ctx.tombstones)
            record = TxnRecord(txn.meta(), TxnStatus.PENDING, txn.priority, now_ns)
        elif record.status is TxnStatus.ABORTED:
            raise TransactionAbortedError(
                "TransactionAbortedError(ABORT_REASON_ABORTED_RECORD_FOUND): "
                f"txn {txn.id.hex()[:8]} was aborted while it ran; start it again"
            )
        elif record.status is TxnStatus.PENDING:
            meta = TxnMeta(txn.id, txn.key, max(txn.epoch, record.meta.epoch), record.meta.write_ts)
            record = replace(record, meta=meta, last_active_ns=now_ns)
        write_record(self.rw, record)
        return HeartbeatTxnResponse(record)

    def push_txn(self, req: PushTxn) -> PushTxnResponse:
        pushee = req.pushee
        now_ns = self.ctx.clock.physical_now()
        record = read_record(self.rw, pushee.key, pushee.id)
        if req.push_type is PushType.QUERY:
            if record is None:
                record = TxnRecord(pushee, TxnStatus.PENDING, 0, pushee.write_ts.wall)
            return PushTxnResponse(record, self.ctx.waits.dependents(pushee.id, now_ns))
        if record is None and self.ctx.tombstones.was_removed(pushee.id):
            # NB: removed once it finished and its intents were resolved (or, expired,
            # by the GC pass): aborted is the answer that leaves the pusher nothing to undo
            return self._push_answer(req, TxnRecord(pushee, TxnStatus.ABORTED, 0, now_ns))
        if record is None and req.push_type is PushType.TOUCH:
            # NB: a transaction that holds only locks writes its record with its first
            # heartbeat (CockroachDB's lazily created records): until the liveness window
            # has passed since it began, it may be alive, and the push waits
            record = TxnRecord(pushee, TxnStatus.PENDING, 0, pushee.write_ts.wall)
            if not record.expired(now_ns, self.ctx.txn_liveness_ns):
                self._waits(req)
                raise TxnPushFailed(record)
            record = None
        if record is None:
            # Records are written before intents, so an intent without one is orphaned.
            return self._write_pushed(req, TxnRecord(pushee, TxnStatus.ABORTED, 0, now_ns))
        if record.finished():
            return self._push_answer(req, record)
        aborted = replace(record, status=TxnStatus.ABORTED, last_active_ns=now_ns)
        if record.expired(now_ns, self.ctx.txn_liveness_ns):
            return self._write_pushed(req, aborted)
        if req.push_type is PushType.TIMESTAMP and record.meta.write_ts >= req.push_to:
            return self._push_answer(req, record)
        wins = (req.pusher_priority, req.pusher_id or b"") > (record.priority, pushee.id)
        if req.push_type is PushType.TOUCH or not wins:
            self._waits(req)
            raise TxnPushFailed(record)
        if req.push_type is PushType.ABORT:
            return self._write_pushed(req, aborted)
        return self._write_pushed(req, record.pushed_to(req.push_to))

    def _write_pushed(self, req: PushTxn, record: TxnRecord) -> PushTxnResponse:
        if self.probe:
            raise PushNeedsWrite()
        write_record(self.rw, record)
        if record.status is TxnStatus.ABORTED:
            self.applied.finished_txns.append(record.meta.id)
        return self._push_answer(req, record)

    def _waits(self, req: PushTxn) -> None:
        """The failed push ``req`` waits for its pushee (:mod:`feedkv.kv.txn_wait`)."""
        if req.pusher_id is not None:
            now_ns = self.ctx.clock.physical_now()
            waits = self.ctx.waits
            waits.waits(req.pusher_id, req.pusher_priority, req.pushee.id, req.dependents, now_ns)

    def _push_answer(self, req: PushTxn, record: TxnRecord) -> PushTxnResponse:
        if req.pusher_id is not None:
            self.ctx.waits.stopped(req.pusher_id)
        return PushTxnResponse(record)

    def resolve_intent(self, req: ResolveIntent) -> ResolveIntentResponse:
        if req.status is not TxnStatus.PENDING:
            self.ctx.locks.release(req.txn.id, req.span)
        ops = mvcc.resolve_intents(self.rw, req.span, req.txn, req.status)
        self.applied.ops.extend(ops)
        return ResolveIntentResponse(len(ops))

    def refresh_range(self, req: RefreshRange) -> RefreshRangeResponse:
        txn = self._txn(req)
        changed = mvcc.first_change(self.rw, req.span, req.from_ts, txn.write_ts, txn_id=txn.id)
        if changed is not None:
            intents = mvcc.scan_intents(self.rw, Span(changed, key_next(changed)), txn.write_ts)
            what = "intent" if any(i.txn.id != txn.id for i in intents) else "committed value"
            raise TransactionRetryError(
                "RETRY_SERIALIZABLE",
                f"failed preemptive refresh due to a conflict: {what} on key {pretty_key(changed)}",
            )
        self.ctx.tscache.add_span(req.span, txn.write_ts, txn.id)
        return RefreshRangeResponse()

    def export(self, req: Export) -> ExportResponse:
        if self.txn is not None:
            raise InvalidArgumentError("an export cannot run inside a transaction")
        intents = mvcc.scan_intents(self.rw, req.span, max_ts=req.hi)
        if intents:
            raise WriteIntentError(intents)  # the store pushes them above hi, then retries
        self.ctx.tscache.add_span(req.span, req.hi, None)
        start_at = (req.resume.ts, req.resume.key) if req.resume is not None else None
        versions = iter_export(
            self.rw,
            req.span,
            req.lo,
            req.hi,
            with_diff=req.with_diff,
            start_at=start_at,
            page_size=min(req.limit + 1, PAGE_ENTRIES) if req.limit else PAGE_ENTRIES,
        )
        page = list(itertools.islice(versions, req.limit)) if req.limit else list(versions)
        resume = None
        if req.limit and len(page) == req.limit:
            following = next(versions, None)
            if following is not None:
                resume = ExportPosition(following.ts, following.key)
        return ExportResponse(tuple(page), resume)

    def gc(self, req: GC) -> GCResponse:
        span = req.span.intersect(self.desc.span)
        if span is None or self.txn is not None:
            raise InvalidArgumentError(f"GC of {req.span} does not fit range {self.desc}")
        versions = 0 if req.threshold is None else gc(self.rw, span, req.threshold).versions_removed
        now_ns = self.ctx.clock.physical_now()
        records = 0
        for meta in req.txn_records:
            if not span.contains_key(meta.key):
                raise InvalidArgumentError(
                    f"GC of {req.span} names a record anchored at {pretty_key(meta.key)}, "
                    f"outside range {self.desc}"
                )
            record = read_record(self.rw, meta.key, meta.id)
            # NB: one heartbeated since the GC pass read it is alive again: it stays
            if record is not None and (
                record.finished() or record.expired(now_ns, self.ctx.txn_liveness_ns)
            ):
                records += self._remove_record(record.meta)
        return GCResponse(versions, records)

    # Ranges.

    def split(self, req: Split) -> SplitResponse:
        key = check_key(req.key)
        desc = descriptor_for_key(self.rw, key)
        if desc.start == key:
            if not req.automatic and not desc.sticky:
                desc = replace(desc, sticky=True)
                write_descriptor(self.rw, desc)
            left = next(d for d in all_descriptors(self.rw) if d.end == key)
            return SplitResponse(left, desc)
        generation = desc.generation + 1
        left = replace(desc, span=Span(desc.start, key), generation=generation)
        # NB: the right-hand range's replicas are the left's, with the same ids
        right = replace(
            desc,
            range_id=self.ctx.new_range_id(self.rw),
            span=Span(key, desc.end),
            generation=generation,
            sticky=not req.automatic,
        )
        write_descriptor(self.rw, left)
        write_descriptor(self.rw, right)
        self.ctx.closed.split(left.range_id, right.range_id)
        self.ctx.tombstones.split(left.range_id, right.range_id)
        self.applied.range_changes.append(
            RangeChange(RangeEndReason.RANGE_SPLIT, left.range_id, right.range_id)
        )
        return SplitResponse(left, right)

    def merge(self, req: Merge) -> MergeResponse:
        left = descriptor_for_key(self.rw, check_key(req.key) if req.key else req.key)
        if left.end == KEY_MAX:
            raise InvalidArgumentError(f"cannot merge {left}: it is the last range")
        right = descriptor_for_key(self.rw, left.end)
        if req.automatic and right.sticky:
            return MergeResponse(left)
        merged = replace(
            left,
            span=Span(left.start, right.end),
            generation=max(left.generation, right.generation) + 1,
        )
        delete_descriptor(self.rw, left)
        delete_descriptor(self.rw, right)
        write_descriptor(self.rw, merged)
        self.ctx.closed.merge(left.range_id, right.range_id)
        self.ctx.tombstones.merge(left.range_id, right.range_id)
        self.applied.range_changes.append(
            RangeChange(RangeEndReason.RANGE_MERGED, left.range_id, right.range_id)
        )
        return MergeResponse(merged)

    def range_lookup(self, req: RangeLookup) -> RangeLookupResponse:
        descs = all_descriptors(self.rw)
        index = next(i for i, d in enumerate(descs) if d.contains_key(req.key))
        found = tuple(descs[index : index + 1 + max(req.prefetch, 0)])
        closed = tuple(self.ctx.closed.get(d.range_id) for d in found)
        return RangeLookupResponse(found, closed)


_HANDLERS: dict[type, Callable[[_Evaluator, Any], Response]] = {
    Get: _Evaluator.get,
    Scan: _Evaluator.scan,
    Put: _Evaluator.put,
    ConditionalPut: _Evaluator.conditional_put,
    DeleteRange: _Evaluator.delete_range,
    Ingest: _Evaluator.ingest,
    EndTxn: _Evaluator.end_txn,
    HeartbeatTxn: _Evaluator.heartbeat_txn,
    PushTxn: _Evaluator.push_txn,
    ResolveIntent: _Evaluator.resolve_intent,
    RefreshRange: _Evaluator.refresh_range,
    Split: _Evaluator.split,
    Merge: _Evaluator.merge,
    RangeLookup: _Evaluator.range_lookup,
    Export: _Evaluator.export,
    GC: _Evaluator.gc,
    IncrementalScan: _Evaluator.incremental_scan,
}
