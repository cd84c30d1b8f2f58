"""The batch API a node serves: requests, responses and the transaction they travel with.

A :class:`BatchRequest` addresses one range (``header.range_id``; ``0`` lets the node route
by key, for callers inside the node) and carries requests that the range applies as one
command: all of them or none. Requests are plain frozen dataclasses; the gRPC layer
translates them to protobuf at the edge (:mod:`feedkv.kv.wire`).

Timestamps: a batch outside a transaction reads and writes at ``header.timestamp``, or at
the node's clock when that is ``None`` (reads with ``as_of`` set it). A transactional batch
reads at ``txn.read_ts`` and writes at ``txn.write_ts``; the node may push ``write_ts`` up
(a newer version, a later read, the closed timestamp) and returns the updated
:class:`Transaction` in the response. A transaction whose ``read_ts`` is zero has not
started yet: the node assigns it its clock's time.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.kv.txn_record import TxnRecord
from feedkv.storage.export import ExportedVersion
from feedkv.storage.intent import TxnMeta, TxnStatus
from feedkv.storage.mvcc import KeyValue
from feedkv.util.hlc import ZERO_TIMESTAMP, Timestamp
from feedkv.util.keys import Span
from feedkv.util.value_types import value_type

__all__ = [
    "MAX_PRIORITY",
    "BatchRequest",
    "BatchResponse",
    "ConditionalPut",
    "ConditionalPutResponse",
    "DeleteRange",
    "DeleteRangeResponse",
    "EndTxn",
    "EndTxnResponse",
    "Export",
    "ExportPosition",
    "ExportResponse",
    "GC",
    "GCResponse",
    "Get",
    "GetResponse",
    "Header",
    "HeartbeatTxn",
    "HeartbeatTxnResponse",
    "IncrementalScan",
    "IncrementalScanResponse",
    "Ingest",
    "IngestResponse",
    "Merge",
    "MergeResponse",
    "PushTxn",
    "PushTxnResponse",
    "PushType",
    "WaitEdge",
    "Put",
    "PutResponse",
    "RangeLookup",
    "RangeLookupResponse",
    "RefreshRange",
    "RefreshRangeResponse",
    "Relocate",
    "RelocateResponse",
    "Request",
    "ResolveIntent",
    "ResolveIntentResponse",
    "Response",
    "Scan",
    "ScanResponse",
    "Split",
    "SplitResponse",
    "Transaction",
]


MAX_PRIORITY = 2**31 - 1  # transaction priorities are drawn from [1, MAX_PRIORITY]


@dataclass(frozen=True, slots=True)
class Transaction:
    """A transaction as its coordinator (the client) tracks it.

    ``key`` anchors the transaction record (empty until the first write is sent). ``seq``
    numbers the transaction's writes so a replayed or reordered write is recognised.
    ``min_ts``: the timestamp it started at, which refreshes and pushes never move
    (CockroachDB's MinTimestamp): whether it may still create its record is decided by it
    (:mod:`feedkv.kv.txn_tombstones`).
    """

    id: bytes
    key: bytes
    epoch: int
    read_ts: Timestamp
    write_ts: Timestamp
    priority: int
    seq: int = 0
    min_ts: Timestamp = ZERO_TIMESTAMP

    def meta(self) -> TxnMeta:
        return TxnMeta(self.id, self.key, self.epoch, self.write_ts, self.seq)

    def started(self) -> bool:
        return self.read_ts != ZERO_TIMESTAMP

    # NB: these spell out the constructor, which costs half of dataclasses.replace; a
    # transaction is copied a few times per request, on the hot path of every write.

    def with_write_ts(self, ts: Timestamp) -> Transaction:
        return Transaction(
            self.id, self.key, self.epoch, self.read_ts, ts, self.priority, self.seq, self.min_ts
        )

    def started_at(self, ts: Timestamp) -> Transaction:
        """Reading and writing at ``ts`` (its start, or a refresh: ``min_ts`` stays)."""
        min_ts = self.min_ts if self.read_ts != ZERO_TIMESTAMP else ts
        return Transaction(self.id, self.key, self.epoch, ts, ts, self.priority, self.seq, min_ts)

    def anchored_at(self, key: bytes) -> Transaction:
        """With its record at ``key``."""
        return Transaction(
            self.id, key, self.epoch, self.read_ts, self.write_ts, self.priority, self.seq,
            self.min_ts,
        )  # fmt: skip

    def with_seq(self, seq: int) -> Transaction:
        return Transaction(
            self.id, self.key, self.epoch, self.read_ts, self.write_ts, self.priority, seq,
            self.min_ts,
        )  # fmt: skip


# Requests.


@dataclass(frozen=True, slots=True)
class Get:
    key: bytes


@dataclass(frozen=True, slots=True)
class Put:
    """Write ``value``; ``None`` deletes the key."""

    key: bytes
    value: bytes | None


@value_type  # NB: made for each request (see feedkv.util.value_types)
class ConditionalPut:
    """Write ``value`` only if the current value is ``expected`` (``None``: absent); with
    ``exists``, only if the key holds a value, whatever it is (``expected`` is unused)."""

    key: bytes
    value: bytes | None
    expected: bytes | None
    exists: bool = False


@dataclass(frozen=True, slots=True)
class DeleteRange:
    span: Span


@dataclass(frozen=True, slots=True)
class Ingest:
    """Write ``values[i]`` at ``keys[i]`` as committed values in one command: a bulk
    load's batch for one range (CockroachDB's AddSSTable, as feedkv's rows are not
    files). ``keys`` ascend strictly inside ``span``, and every key must be new (no live
    value): the first that holds one fails the command with
    :class:`ConditionFailedError`, and nothing of it is written.

    Sent outside a transaction, or in a transaction's one-phase commit (the batch that
    ends it, writing committed values at its timestamp); sent in a transaction before
    its ``EndTxn`` (a bulk load across ranges), it writes the transaction's intents
    instead, laid down and resolved as a batch, not key by key
    (:func:`~feedkv.storage.mvcc.ingest_intents`). It writes at the batch's
    timestamp, moved above the range's closed timestamp and every read served in
    ``span``, like any write of committed values; each key's version, time-index entry
    and ``WriteValue`` op are those a put would make (a rangefeed sees the values, range
    sizes count them), but the keys are checked and written as a batch, not evaluated
    one by one."""

    span: Span
    keys: tuple[bytes, ...]
    values: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class Scan:
    """Read the live keys in ``span``.

    ``lock``: a locking read, the row read of an UPDATE or DELETE (CockroachDB's implicit
    SELECT FOR UPDATE). In a transaction, it takes an exclusive lock on each key it
    returns in the range's lock table (:mod:`feedkv.kv.lock_table`), waiting in the
    key's queue while another transaction holds it, and waits for (rather than reads
    under) another transaction's intent at any timestamp. If a key read has a committed
    version above the transaction's read timestamp, the locks are taken and the batch
    fails with :class:`TransactionRetryError` (``RETRY_WRITE_TOO_OLD``) carrying that
    version's timestamp: the coordinator refreshes its reads there and reads again,
    holding the locks. Outside a transaction the flag does nothing.

    ``nowait``: with ``lock``, a key another transaction holds (its lock, or its intent
    while it is pending) fails the batch at once with
    :class:`~feedkv.errors.LockNotAvailableError` instead of waiting (CockroachDB's
    ``WaitPolicy_Error``, SQL's ``FOR UPDATE NOWAIT``).

    ``skip_locked``: with ``lock``, the keys another transaction holds (its lock, or its
    intent, pending or not: none is pushed) are left out of the answer, neither waited
    for nor locked (CockroachDB's ``WaitPolicy_SkipLocked``, SQL's ``SKIP LOCKED``);
    ``limit`` counts the keys returned.
    """

    span: Span
    limit: int | None = None
    reverse: bool = False
    lock: bool = False
    nowait: bool = False
    skip_locked: bool = False


@dataclass(frozen=True, slots=True)
class IncrementalScan:
    """What a :class:`Scan` of ``span`` at the read timestamp ``T`` would answer
    differently from one at ``since`` (exclusive): each key with a committed version in
    ``(since, T]``, with its newest version at or below ``T`` (``None``: deleted then),
    and each key holding the batch transaction's own intent, as a scan would read it.
    Applied to a copy of the span's rows as of ``since``, it gives the scan at ``T``.

    It is a read like a scan, not an export: it records ``T`` in the timestamp cache over
    the whole ``span`` (no write lands at or below it afterwards), the caller counts
    ``span`` among its transaction's reads (a refresh covers it), and another
    transaction's intent at or below ``T`` anywhere in ``span`` conflicts as it does for
    a scan (the store pushes or waits, then runs it again). Its cost is the changes in
    the window, not the span's rows (:mod:`feedkv.storage.export`).

    ``since`` must be at or above the span's GC threshold
    (:class:`~feedkv.errors.BatchTimestampBeforeGCError`) and at or below ``T``. More
    than ``limit`` keys changed: the answer is ``complete=False`` with no rows (read the
    span with a scan instead); the read is recorded all the same."""

    span: Span
    since: Timestamp  # exclusive
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class EndTxn:
    """Commit or roll back the header's transaction.

    ``lock_spans`` cover every intent the transaction wrote outside this batch; the node
    resolves those in its own range at once and the rest in the background. Sent in the
    same batch as the transaction's only writes, on one range, with no ``lock_spans``, it
    commits in one phase: the writes land as committed values and no record is written.
    Otherwise the record goes once every intent is resolved: in this command when they
    all lie in its range (:mod:`feedkv.kv.txn_record`). A transaction that wrote intents
    and has no record (it was removed) cannot commit: ``TransactionAbortedError``.

    ``deadline``: a commit must land below it or fail with a retryable
    ``TransactionRetryError`` (reason ``RETRY_COMMIT_DEADLINE_EXCEEDED``): the transaction
    used something valid only until then (a SQL descriptor lease).
    """

    commit: bool
    lock_spans: tuple[Span, ...] = ()
    deadline: Timestamp | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatTxn:
    """Create the transaction's record (``PENDING``) or keep it alive; returns the record."""


class PushType(enum.Enum):
    TIMESTAMP = "TIMESTAMP"  # move the pushee's commit timestamp above ``push_to``
    ABORT = "ABORT"  # abort the pushee
    TOUCH = "TOUCH"  # succeed only if the pushee is finished or expired
    # change nothing: answer the pushee's record and the waits known at its node that end
    # at it (its dependents: feedkv.kv.txn_wait); a waiter asks this of itself
    QUERY = "QUERY"


# A wait of one transaction for another: (waiter id, blocker id, waiter's priority).
WaitEdge = tuple[bytes, bytes, int]


@dataclass(frozen=True, slots=True)
class PushTxn:
    """Push the transaction ``pushee`` (found through one of its intents).

    Succeeds when the pushee is finished, expired, or has lower priority than the pusher
    (ties go to the larger txn id); otherwise raises :class:`TxnPushFailed` and the pusher
    waits. The response holds the pushee's record after the push.
    """

    pushee: TxnMeta
    push_type: PushType
    push_to: Timestamp
    pusher_priority: int
    pusher_id: bytes | None = None
    # the waits that end at the pusher, as it learned them (feedkv.kv.txn_wait)
    dependents: tuple[WaitEdge, ...] = ()


@dataclass(frozen=True, slots=True)
class ResolveIntent:
    """Resolve ``txn``'s intents in ``span`` to ``status`` (idempotent).

    ``COMMITTED`` commits them at ``txn.write_ts``; ``ABORTED`` removes them; ``PENDING``
    moves them up to ``txn.write_ts``.
    """

    span: Span
    txn: TxnMeta
    status: TxnStatus


@dataclass(frozen=True, slots=True)
class RefreshRange:
    """Check that nothing in ``span`` changed in ``(from_ts, header txn's write_ts]``: no
    committed version and no other transaction's intent. Raises
    :class:`TransactionRetryError` if something did."""

    span: Span
    from_ts: Timestamp  # exclusive


@dataclass(frozen=True, slots=True)
class Split:
    """Split the range holding ``key`` at ``key`` (a no-op if a range starts there).

    A manual split (not ``automatic``) makes the new range *sticky*: the store's own
    merges never undo it."""

    key: bytes
    automatic: bool = False


@dataclass(frozen=True, slots=True)
class Merge:
    """Merge the range holding ``key`` with its right-hand neighbour; an ``automatic``
    merge (the store's own) leaves a sticky right-hand neighbour alone."""

    key: bytes
    automatic: bool = False


@dataclass(frozen=True, slots=True)
class Relocate:
    """Move the range holding ``key`` to node ``node_id`` (a no-op if it is there); the
    node that holds it streams it over and hands it on (see :mod:`feedkv.server.relocation`)."""

    key: bytes
    node_id: int


@dataclass(frozen=True, slots=True)
class RangeLookup:
    """The descriptor of the range holding ``key`` and up to ``prefetch`` ranges after it."""

    key: bytes
    prefetch: int = 8


@dataclass(frozen=True, slots=True)
class ExportPosition:
    """A place in an export's (timestamp, key) order: the next version to read."""

    ts: Timestamp
    key: bytes


@dataclass(frozen=True, slots=True)
class Export:
    """Every committed version in ``span`` with a timestamp in ``(lo, hi]``, ordered by
    (timestamp, key), so each key's versions come oldest first (an incremental export).

    It reads at ``hi`` like a scan: intents that could still commit at or below ``hi``
    are pushed above it or resolved first, and later writes land above ``hi``, so the
    answer is final. At most ``limit`` versions; ``resume`` in the response says where
    to go on (pass it back as ``resume``). ``with_diff`` adds each version's previous
    value."""

    span: Span
    lo: Timestamp
    hi: Timestamp
    with_diff: bool = False
    limit: int | None = None
    resume: ExportPosition | None = None


@dataclass(frozen=True, slots=True)
class GC:
    """Remove the versions in ``span`` that no read at or above ``threshold`` can see,
    and refuse reads and exports below it from then on (``None``: remove none); and
    remove the ``txn_records`` named, anchored in ``span``, each only if it is finished
    or expired (the node's GC queue, or its intent resolver once it resolved a finished
    transaction's intents, sends it; it is not part of the client API)."""

    span: Span
    threshold: Timestamp | None
    txn_records: tuple[TxnMeta, ...] = ()


Request = (
    Get
    | Put
    | ConditionalPut
    | DeleteRange
    | Ingest
    | Scan
    | EndTxn
    | HeartbeatTxn
    | PushTxn
    | ResolveIntent
    | RefreshRange
    | Split
    | Merge
    | RangeLookup
    | Relocate
    | Export
    | GC
    | IncrementalScan
)


# Responses.


@dataclass(frozen=True, slots=True)
class GetResponse:
    value: bytes | None
    ts: Timestamp | None = None  # of the version read


@dataclass(frozen=True, slots=True)
class PutResponse:
    pass


@dataclass(frozen=True, slots=True)
class ConditionalPutResponse:
    pass


@dataclass(frozen=True, slots=True)
class DeleteRangeResponse:
    keys: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class IngestResponse:
    written: int


@dataclass(frozen=True, slots=True)
class ScanResponse:
    rows: tuple[KeyValue, ...]
    resume_key: bytes | None = None


@dataclass(frozen=True, slots=True)
class IncrementalScanResponse:
    """Row ``i``: ``keys[i]`` holds ``values[i]`` (``None``: no row) from the version at
    ``timestamps[i]``; keys ascend. ``complete=False``: over the limit, nothing given."""

    keys: tuple[bytes, ...]
    values: tuple[bytes | None, ...]
    timestamps: tuple[Timestamp, ...]
    complete: bool = True


@dataclass(frozen=True, slots=True)
class EndTxnResponse:
    status: TxnStatus
    one_phase: bool = False


@dataclass(frozen=True, slots=True)
class HeartbeatTxnResponse:
    record: TxnRecord


@dataclass(frozen=True, slots=True)
class PushTxnResponse:
    record: TxnRecord
    dependents: tuple[WaitEdge, ...] = ()  # a QUERY's answer


@dataclass(frozen=True, slots=True)
class ResolveIntentResponse:
    resolved: int


@dataclass(frozen=True, slots=True)
class RefreshRangeResponse:
    pass


@dataclass(frozen=True, slots=True)
class SplitResponse:
    left: RangeDescriptor
    right: RangeDescriptor


@dataclass(frozen=True, slots=True)
class MergeResponse:
    merged: RangeDescriptor


@dataclass(frozen=True, slots=True)
class RelocateResponse:
    moved: RangeDescriptor


@dataclass(frozen=True, slots=True)
class RangeLookupResponse:
    descriptors: tuple[RangeDescriptor, ...]
    closed_timestamps: tuple[Timestamp, ...] = ()  # one per descriptor


@dataclass(frozen=True, slots=True)
class ExportResponse:
    versions: tuple[ExportedVersion, ...]
    resume: ExportPosition | None = None


@dataclass(frozen=True, slots=True)
class GCResponse:
    versions_removed: int
    records_removed: int = 0


Response = (
    GetResponse
    | PutResponse
    | ConditionalPutResponse
    | DeleteRangeResponse
    | IngestResponse
    | ScanResponse
    | EndTxnResponse
    | HeartbeatTxnResponse
    | PushTxnResponse
    | ResolveIntentResponse
    | RefreshRangeResponse
    | SplitResponse
    | MergeResponse
    | RangeLookupResponse
    | RelocateResponse
    | ExportResponse
    | GCResponse
    | IncrementalScanResponse
)


@value_type  # NB: made for each request (see feedkv.util.value_types)
class Header:
    """Where a batch goes and as what: ``timestamp`` (none: the node stamps it), ``txn``.

    ``deadline``, only for a batch without a transaction: the batch must be evaluated
    below it or fail with a retryable ``TransactionRetryError``
    (``RETRY_COMMIT_DEADLINE_EXCEEDED``), as a commit with ``EndTxn.deadline`` does. A
    transaction that has read nothing sends its writes so (see :mod:`feedkv.kv.txn`); a
    transactional batch with one is refused.

    ``lock_timeout_ms``: how long the batch may wait for another transaction's lock or
    intent on one of its keys, each time it waits (0: as long as it takes); past it the
    batch fails with :class:`~feedkv.errors.LockNotAvailableError` (``LOCK_TIMEOUT``), as
    CockroachDB's ``lock_timeout`` session setting has it.
    """

    range_id: int = 0
    generation: int = 0
    timestamp: Timestamp | None = None
    txn: Transaction | None = None
    deadline: Timestamp | None = None
    lock_timeout_ms: int = 0


@value_type  # NB: made for each request (see feedkv.util.value_types)
class BatchRequest:
    header: Header
    requests: tuple[Request, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class BatchResponse:
    responses: tuple[Response, ...]
    timestamp: Timestamp  # the batch's timestamp (a non-transactional write's commit ts)
    txn: Transaction | None = None  # the transaction after the batch (write_ts maybe pushed)
