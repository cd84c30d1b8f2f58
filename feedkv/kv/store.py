"""A store: one engine holding many ranges, and the loop that applies their commands.

:meth:`Store.send` is the whole write path. It submits the batch to the engine as one
function (:func:`feedkv.kv.command.evaluate`), so the command is evaluated on the commit
thread, lands in the next group commit, and its logical ops reach the range's observers
in apply order under ``engine.apply_lock``. A read-only batch is evaluated on the
caller's thread instead (``engine.read_now``), unless a write it overlaps has been
evaluated and is not yet durable: then it is queued with the writes (see
:class:`_InFlight`). So reads do not wait for other keys' fsyncs.

When evaluation meets another transaction's intent, ``send`` resolves the conflict on
the caller's thread, outside the commit thread:

- it pushes the intent's transaction through its record (a writer asks to abort it, a
  reader to move its commit timestamp above the read);
- a finished, expired or lower-priority pushee gives way at once; otherwise the pusher
  waits for the pushee to finish (woken when any transaction finishes, re-pushing
  every ``push_poll_s`` so an expired heartbeat is noticed);
- then it resolves the intents it met and runs the batch again.

Priorities are random per transaction and ties go to the larger txn id, so in any cycle of
waiters one transaction outranks the next and the cycle breaks: no deadlock.

A batch that meets a lock (:mod:`feedkv.kv.lock_table`) joins the key's queue and waits
until the key is free for it, then runs again. A locking read that meets an intent waits
for its writer to finish (a ``TOUCH`` push) instead of aborting it by priority. A live
transaction is never made to give way by how long it holds a key: a waiter held up by a
lock's holder pushes it (``TOUCH``) every ``push_poll_s`` through its record, as it
pushes an intent's writer, and breaks its locks only once the record is finished or
expired (its coordinator died and stopped heartbeating it). Both kinds of waiter record
whom they wait for in the store's :class:`WaitForGraph`, and every push that fails is
known at the pushee's record's node (:mod:`feedkv.kv.txn_wait`), which a waiting pusher
asks for the waits ending at itself: the lowest in priority of a cycle of waits, on one
store or across nodes, gives up with ``TransactionRetryError``
(``ABORT_REASON_DEADLOCK``), which frees the others. A waiter whose caller gives up (a
cancelled SQL statement: :mod:`feedkv.kv.cancellation`) stops within one poll, having
applied nothing.

Three side loops run per store: one closes every range's timestamp every
``closed_ts_interval_s`` (tells observers, and persists range size estimates), one
resolves the intents of finished transactions that live outside the range of their
record, and one splits ranges grown past ``range_max_bytes`` at their byte midpoint and
merges neighbours that are both below ``range_min_bytes`` (never across a manual split).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import msgpack

from feedkv.errors import (
    ClientClosedError,
    FeedKVError,
    InvalidArgumentError,
    InvariantViolation,
    LockNotAvailableError,
    NodeUnavailableError,
    NotLeaseHolderError,
    PushFailedError,
    RangeKeyMismatchError,
    RangeNotFoundError,
    RangeRoutingError,
    RangeUnavailableError,
    TransactionAbortedError,
    TransactionRetryError,
    WriteIntentError,
)
from feedkv.kv import range_move, replica_collector, replicated_merge
from feedkv.kv.api import (
    GC,
    MAX_PRIORITY,
    BatchRequest,
    BatchResponse,
    ConditionalPut,
    DeleteRange,
    Export,
    GCResponse,
    Get,
    Header,
    IncrementalScan,
    Ingest,
    Merge,
    PushTxn,
    PushTxnResponse,
    PushType,
    Put,
    RangeLookup,
    RefreshRange,
    Relocate,
    RelocateResponse,
    ResolveIntent,
    Scan,
    Split,
    Transaction,
    WaitEdge,
)
from feedkv.kv.cancellation import check_given_up
from feedkv.kv.closed_timestamp import ClosedTimestamps
from feedkv.kv.command import (
    Applied,
    CommandContext,
    PushBatch,
    PushNeedsWrite,
    batch_key,
    batch_spans,
    evaluate,
)
from feedkv.kv.lock_table import LockConflictError, LockTable
from feedkv.kv.observer import RangeEndReason, RangeObserver
from feedkv.kv.range_descriptor import (
    META,
    RangeDescriptor,
    ReplicaDescriptor,
    all_descriptors,
    delete_descriptor,
    descriptor_by_id,
    descriptor_for_key,
    next_range_id,
    replica_tombstone,
    seed_range_ids,
    write_descriptor,
    write_replica_tombstone,
)
from feedkv.kv.range_descriptor import bootstrap as bootstrap_meta
from feedkv.kv.range_move import MoveRecord
from feedkv.kv.range_size import RangeSizes, measure, op_bytes
from feedkv.kv.replica import AppliedEntry, Replica
from feedkv.kv.replica_collector import ReplicaCollector
from feedkv.kv.replica_loop import ReplicaLoop, Send, SendSnapshot
from feedkv.kv.replica_refusal import Refusal
from feedkv.kv.replicated_command import Effects
from feedkv.kv.snapshot_spool import SnapshotSpool
from feedkv.kv.tscache import TimestampCache
from feedkv.kv.txn_record import TXN_RECORDS, TxnRecord, read_record, records_in
from feedkv.kv.txn_tombstones import TxnTombstones
from feedkv.kv.wait_for import WaitForGraph, is_victim
from feedkv.raft import RAFT_DB, ConfChange, ConfChangeType, ConfState, EngineRaftStorage
from feedkv.raft import Config as RaftConfig
from feedkv.raft.engine_storage import read_conf_state
from feedkv.storage import mvcc
from feedkv.storage.engine import Completion, Reader, ReadWriter, Snapshot
from feedkv.storage.gc import DEFAULT_GC_TTL_NS, forward_threshold, gc_threshold
from feedkv.storage.intent import Intent, TxnMeta, TxnStatus
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.logical_ops import LogicalOp
from feedkv.storage.schema import MVCC_DATABASES
from feedkv.util.hlc import ZERO_TIMESTAMP, Clock, Timestamp
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span, key_next

__all__ = ["DEFAULT_GC_TTL_NS", "Store", "StoreConfig"]


# Requests that never write: they are answered without waiting for a group's fsync.
_READ_ONLY = frozenset({Get, Scan, RefreshRange, RangeLookup, Export, IncrementalScan})
_WRITES = (Put, ConditionalPut, DeleteRange, Ingest)


def _nowait(batch: BatchRequest) -> bool:
    """Whether ``batch`` holds a locking read that fails rather than waits for a key
    another transaction holds (:class:`~feedkv.kv.api.Scan`'s ``nowait``)."""
    return any(isinstance(r, Scan) and r.lock and r.nowait for r in batch.requests)


def _lock_deadline(header: Header) -> float | None:
    """When a wait for another transaction's lock or intent that starts now gives up
    (``time.monotonic()``), by the batch's ``lock_timeout_ms``; ``None``: never."""
    return time.monotonic() + header.lock_timeout_ms / 1000 if header.lock_timeout_ms else None


def _wait_s(poll_s: float, give_up_at: float | None, key: bytes) -> float:
    """How long the next wait for ``key`` lasts: ``poll_s``, or less to end at
    ``give_up_at``; :class:`LockNotAvailableError` (``LOCK_TIMEOUT``) once that passed."""
    if give_up_at is None:
        return poll_s
    left = give_up_at - time.monotonic()
    if left <= 0:
        raise LockNotAvailableError(key, LockNotAvailableError.LOCK_TIMEOUT)
    return min(poll_s, left)


def _is_query(batch: BatchRequest) -> bool:
    """Whether ``batch`` is a ``QUERY`` push, which only reads (a waiter's ask for the
    waits on itself: :mod:`feedkv.kv.txn_wait`)."""
    requests = batch.requests
    return (
        len(requests) == 1
        and type(requests[0]) is PushTxn
        and requests[0].push_type is PushType.QUERY
    )


log = logging.getLogger(__name__)


def _deadlock(txn: Transaction, blocker: bytes) -> TransactionRetryError[Timestamp]:
    return TransactionRetryError(
        "ABORT_REASON_DEADLOCK",
        f"txn {txn.id.hex()[:8]} waits for txn {blocker.hex()[:8]} in a cycle of "
        "waits (a deadlock) and gave up for the others; start it again",
    )


DATABASES = (*MVCC_DATABASES, META, TXN_RECORDS, RAFT_DB)
SLOW_PUSH_S = 1.0
CLOSED_TARGETS_REFRESH_S = 0.5  # how often Store.closed_targets is read
Entry = tuple[str, bytes, bytes]  # a snapshot's (database, key, value)
MERGE_RETRY_S = 60.0  # how long small replicated neighbours whose merge failed stay apart
RESOLVE_ATTEMPTS = 10  # misses of a resolve whose ranges split or merge under it
CLEANUP_BATCH = 256  # finished transactions the resolver cleans up at a time, at most


@dataclass(frozen=True, slots=True)
class StoreConfig:
    closed_ts_target_ns: int = 1_000_000_000
    closed_ts_interval_s: float = 0.2
    txn_liveness_ns: int = 5_000_000_000  # a pending txn not heartbeated this long is expired
    push_poll_s: float = 0.05
    sync: bool = True
    range_max_bytes: int = 64 << 20  # split a range past this size
    range_min_bytes: int = 16 << 20  # merge neighbours that are both below this size
    range_check_interval_s: float = 10.0  # how often small neighbours are looked for
    gc_ttl_ns: int = DEFAULT_GC_TTL_NS  # history kept for reads in the past
    gc_interval_s: float = 60.0  # how often ranges are garbage-collected
    # a transaction record left behind (its cleanup never ran) idle this long is removed
    # by the GC pass (CockroachDB's kv.transaction.cleanup threshold, 1 h)
    txn_cleanup_threshold_ns: int = 3600 * 1_000_000_000
    snapshot_chunk_bytes: int = 1 << 20  # about how much of a Raft snapshot a chunk holds
    # after a receiver refused a snapshot for a replica, how long before another one is
    # made for it (each copies the range to the sender's spool)
    snapshot_refused_backoff_s: float = 1.0
    # Moves an automatic split point back to a boundary the layer above needs kept whole
    # (a SQL row's start, so its column families stay in one range); None: any key.
    split_key: Callable[[bytes], bytes] | None = None


@dataclass(frozen=True, slots=True)
class _Cleanup:
    """What the resolver does after a command: resolve its intents on other ranges, and
    once they all are, remove the finished records that waited for them."""

    resolves: tuple[ResolveIntent, ...]
    records: tuple[TxnMeta, ...]

    @classmethod
    def of(cls, applied: Applied) -> _Cleanup:
        return cls(tuple(applied.resolve_later), tuple(applied.records_to_gc))


class _InFlight:
    """The write batches of the commit group being evaluated and synced. A read runs on
    its own thread beside the commit thread (:meth:`Store._read`), against the committed
    state: it would miss these, so one that overlaps them goes through the commit queue
    instead. A write evaluated after the read took its timestamp-cache entry is pushed
    above it.

    The commit thread adds each batch as it evaluates it and forgets them all once their
    group is durable (a group hook, before their callers are told), so one group is held
    at most (a group that failed to commit stays until the next is durable: reads that
    overlap it only queue meanwhile). A batch's spans are worked out when a read first
    asks, not when the batch is written: a workload of writes alone never needs them.

    NB: no lock of its own: :meth:`add` and :meth:`blocks` run under the engine's
    ``eval_lock``, and :meth:`clear` swaps the list whole."""

    def __init__(self) -> None:
        # a batch, or its spans once a read asked (None: a split or merge)
        self._held: list[BatchRequest | tuple[Span, ...] | None] = []

    def add(self, batch: BatchRequest) -> None:
        self._held.append(batch)

    def clear(self) -> None:
        self._held = []

    def blocks(self, spans: tuple[Span, ...]) -> bool:
        """Whether a write in flight overlaps ``spans`` or rewrites the range map (which
        every request reads)."""
        held = self._held
        for i, item in enumerate(held):
            if isinstance(item, BatchRequest):
                item = held[i] = batch_spans(item)
            if item is None or any(w.overlaps(r) for w in item for r in spans):
                return True
        return False


class _WaitQueue:
    """Wakes pushers when a transaction finishes; a generation count closes the race
    between a failed push and the wait that follows it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.generation = 0

    def notify(self) -> None:
        with self._cond:
            self.generation += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> None:
        with self._cond:
            if self.generation == seen:
                self._cond.wait(timeout)


class _ReplicatedRange:
    """A replicated range's data in a store, for its replica's snapshots and membership
    (:class:`~feedkv.kv.replica.RangeData`): its descriptor, and the range state a move
    streams (:mod:`feedkv.kv.range_move`: versions, intents, transaction records; the
    time index rebuilt), with its GC threshold."""

    def __init__(
        self,
        engine: LMDBEngine,
        ctx: CommandContext,
        range_id: int,
        node_id: int,
        removed: set[int],
        spool: SnapshotSpool,
        chunk_bytes: int,
    ) -> None:
        self._engine = engine
        self._ctx = ctx
        self.range_id = range_id
        self._node_id = node_id
        self._removed = removed  # ranges whose replica here was removed from the group
        self._spool = spool
        self._chunk_bytes = chunk_bytes

    def refusal(self, header: bytes) -> Refusal | None:
        """Why a snapshot whose first chunk is ``header`` may not be installed here now:
        while another range of this store still holds part of its span (a split that
        made this range has not applied here yet: it will create the replica; until
        then the leader retries), or a removed replica's data there is still being
        deleted (:mod:`feedkv.kv.replica_collector`)."""
        desc = RangeDescriptor.decode(msgpack.unpackb(header, raw=False)[0])
        with self._engine.snapshot() as snap:
            if any(span.overlaps(desc.span) for span in replica_collector.records(snap).values()):
                return Refusal.COLLECTING
            if any(
                d.range_id != self.range_id and d.span.overlaps(desc.span)
                for d in all_descriptors(snap)
            ):
                return Refusal.OVERLAP
        return None

    def accepts(self, data: bytes) -> bool:
        return self.refusal(next(self._spool.read(data))) is None

    def spool(self, chunks: Iterable[bytes]) -> bytes:
        return self._spool.write(chunks)

    def spooled(self, data: bytes) -> Iterator[bytes]:
        return self._spool.read(data)

    def release(self, data: bytes) -> None:
        self._spool.release(data)

    def snapshot_chunks(self, reader: Reader) -> Iterator[bytes]:
        """A header (the descriptor, GC threshold, promises and merge marker), then the
        range state, about ``chunk_bytes`` per chunk."""
        desc = descriptor_by_id(reader, self.range_id)
        if desc is None:
            raise InvariantViolation(f"a snapshot of r{self.range_id}, which is not here")
        threshold = gc_threshold(reader, desc.span)
        # What the entries the snapshot stands for promised, which the replica that
        # installs it never applies: no write below a read served or a timestamp closed.
        # Every read served so far was at or below the clock (an HLC takes in every
        # request's timestamp), so the clock bounds them all.
        promised = [self._ctx.closed.get(self.range_id), self._ctx.clock.now()]
        marker = replicated_merge.read_marker(reader, self.range_id)  # frozen for a merge
        header: bytes = msgpack.packb(
            [
                desc.encode(),
                [threshold.wall, threshold.logical],
                [[ts.wall, ts.logical] for ts in promised],
                None if marker is None else [marker.into, marker.state],
            ],
            use_bin_type=True,
        )
        yield header
        for chunk in range_move.read_snapshot(
            reader, desc.span, chunk_entries=1 << 30, chunk_bytes=self._chunk_bytes
        ):
            packed: bytes = msgpack.packb([list(e) for e in chunk], use_bin_type=True)
            yield packed

    def install(self, rw: ReadWriter, data: bytes) -> None:
        """From the spool, a chunk at a time, in the caller's one transaction."""
        chunks = self._spool.read(data)
        raw, threshold, promised, marker = msgpack.unpackb(next(chunks), raw=False)
        desc = RangeDescriptor.decode(raw)
        held = descriptor_by_id(rw, self.range_id)
        if held is not None:
            range_move.clear_range(rw, held.span)
            delete_descriptor(rw, held)
        range_move.clear_range(rw, desc.span)
        for chunk in chunks:
            entries = msgpack.unpackb(chunk, raw=False)
            range_move.write_entries(rw, [tuple(entry) for entry in entries])
        forward_threshold(rw, desc.span, Timestamp(*threshold))
        write_descriptor(rw, desc)
        frozen = None if marker is None else replicated_merge.MergeMarker(*marker)
        replicated_merge.write_marker(rw, self.range_id, frozen)
        if frozen is not None:
            self._ctx.frozen.add(self.range_id)  # NB: again if run twice: harmless
        self._serve()
        # NB: promises only, should this replica lead: its observers learn a closed
        # timestamp from the entries it applies (those after the snapshot may lie below)
        closed, reads = (Timestamp(*ts) for ts in promised)
        self._ctx.closed.forward(self.range_id, closed)
        self._ctx.tscache.add_span(desc.span, reads, None)

    def members_changed(self, rw: ReadWriter, conf: ConfState, change: ConfChange | None) -> None:
        """The descriptor's ``replicas`` are the voters' nodes, in lease order: a learner
        (a replica being added) serves nothing and counts towards no quorum until it is
        promoted; its ``ids`` hold every replica with its id, learners too. A change
        from the log (``change``; not a snapshot's members) bumps the generation, as
        CockroachDB's replica changes do: every replica applies it alike, so where a dead
        lease holder's last report and a survivor's disagree on the members, the
        survivor's newer descriptor wins (:mod:`feedkv.kv.directory`)."""
        desc = descriptor_by_id(rw, self.range_id)
        if desc is None:
            return  # a replica waiting for its snapshot: the snapshot brings the members
        mine = desc.replica_of(self._node_id)
        if mine is not None and mine.replica_id not in (*conf.voters, *conf.learners):
            # NB: the engine may run this twice; the store drops the replica once the
            # change is durable (Store._on_replicated_apply)
            self._removed.add(self.range_id)
        nodes = desc.replica_nodes((*conf.voters, *conf.learners))
        if change is not None and change.type is not ConfChangeType.REMOVE_NODE:
            # NB: no context: an entry from before replica ids, whose id is its node's
            nodes.setdefault(change.node_id, change.context or change.node_id)
        ids = tuple(
            ReplicaDescriptor(nodes[r], r, learner=r not in conf.voters)
            for r in (*conf.voters, *conf.learners)
            if nodes.get(r)
        )
        voters = {r.node_id for r in ids if not r.learner}
        kept = [n for n in desc.replicas if n in voters]
        replicas = (*kept, *sorted(voters.difference(kept)))
        used = max((r.replica_id for r in ids), default=0)
        next_id = max(desc.next_id, used + 1)
        generation = desc.generation + (change is not None)
        changed = replace(
            desc, generation=generation, replicas=replicas, ids=ids, next_replica_id=next_id
        )
        write_descriptor(rw, changed)
        self._serve()

    def replicas(self, reader: Reader) -> tuple[dict[int, int], int]:
        desc = descriptor_by_id(reader, self.range_id)
        if desc is None:
            return {}, replica_tombstone(reader, self.range_id)
        group = read_conf_state(reader, self.range_id) if desc.legacy else ConfState()
        nodes = desc.replica_nodes((*group.voters, *group.learners))
        return nodes, max(desc.next_id, replica_tombstone(reader, self.range_id))

    def _serve(self) -> None:
        # NB: in the engine transaction, which may run twice: adding again is harmless
        if self.range_id not in self._ctx.replicated:
            self._ctx.replicated.add(self.range_id)
            self._ctx.closed.restart(self.range_id, Timestamp(0, 0))


class ClusterSender(Protocol):
    """How a store of a cluster reaches the ranges other nodes hold (the node's router)."""

    def push(self, request: PushTxn) -> PushTxnResponse:
        """Push at the node holding the pushee's record; raises :class:`PushFailedError`
        when the pushee outranks the pusher."""
        ...

    def resolve(self, request: ResolveIntent) -> None:
        """Resolve the intents of ``request.span`` on every range and node it covers."""
        ...

    def locate(self, key: bytes) -> RangeDescriptor | None:
        """The range holding ``key`` as the cluster's nodes last reported it (``None``:
        no report names one); no I/O."""
        ...


class Store:
    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock | None = None,
        config: StoreConfig | None = None,
        node_id: int = 1,
        bootstrap: bool = True,
    ) -> None:
        """``bootstrap``: create range r1 (on node ``node_id``) if the store has no
        ranges; a node joining a cluster starts empty and receives ranges."""
        self.config = config or StoreConfig()
        self.clock = clock or Clock()
        self.node_id = node_id
        self.engine = LMDBEngine(path, databases=DATABASES, sync=self.config.sync)
        if bootstrap:
            self.engine.write(lambda rw: bootstrap_meta(rw, node_id))
        else:
            self.engine.write(lambda rw: seed_range_ids(rw, node_id))
        # Set by a node of a cluster: requests the node answers itself (range lookups
        # from its directory, relocations), and how pushes and resolves reach other nodes.
        self.intercept: Callable[[BatchRequest], BatchResponse | None] | None = None
        # Set by a node in no cluster: how it answers a relocation, a batch's only
        # request. NB: not an intercept: that would be asked about every batch
        self.relocate: Callable[[Relocate], RelocateResponse] | None = None
        self.cluster: ClusterSender | None = None
        # Set by a node: the id of a split's right-hand range, from the cluster's counter
        # (feedkv.kv.range_id_alloc; a KV round trip at times); None: the store's own.
        self.range_ids: Callable[[], int] | None = None
        self.replicas: ReplicaLoop | None = None  # set by replicate()
        self.collector: ReplicaCollector | None = None  # set by replicate()
        # replicated ranges: the closed timestamp of their last applied entry carrying one
        self._applied_closed: dict[int, Timestamp] = {}
        self._removed: set[int] = set()  # replicas removed from their groups, to drop
        self._coordinating: set[int] = set()  # right-hand ranges of merges run from here
        self._merge_refused: dict[int, float] = {}  # right-hand range -> when (monotonic)
        opened_at = self.clock.now()
        self._ctx = CommandContext(
            clock=self.clock,
            tscache=TimestampCache(opened_at),
            closed=ClosedTimestamps(self.config.closed_ts_target_ns, opened_at),
            txn_liveness_ns=self.config.txn_liveness_ns,
            locks=LockTable(),
            tombstones=TxnTombstones(opened_at),
        )
        self._wait_for = WaitForGraph()
        self._lock_waiters: dict[bytes, TxnMeta] = {}  # txns waiting in lock queues here
        self._observers: dict[int, list[RangeObserver]] = {}
        self._sizes = RangeSizes()
        with self.engine.snapshot() as snap:
            self._unmeasured = self._sizes.load(snap, all_descriptors(snap))
        self._check_ranges = threading.Event()
        self._waiters = _WaitQueue()
        self._in_flight = _InFlight()
        self.engine.on_group_applied(self._in_flight.clear)
        self._to_resolve: queue.SimpleQueue[_Cleanup | None] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self.protected: Callable[[], list[tuple[Span, Timestamp]]] = list
        # Spans whose ranges close at a target of their own (ns), set by the layers
        # above (tables' zone configurations); read every CLOSED_TARGETS_REFRESH_S.
        self.closed_targets: Callable[[], list[tuple[Span, int]]] = list
        # The GC TTLs the layers above set (ns): the default zone's (None: the config's
        # gc_ttl_ns) and those of spans with their own (tables' zone configurations).
        self.gc_ttls: Callable[[], tuple[int | None, list[tuple[Span, int]]]] = lambda: (None, [])
        self._threads = [
            threading.Thread(target=self._close_loop, name="feedkv-closed-ts", daemon=True),
            threading.Thread(target=self._resolve_loop, name="feedkv-resolver", daemon=True),
            threading.Thread(target=self._range_loop, name="feedkv-ranges", daemon=True),
            threading.Thread(target=self._gc_loop, name="feedkv-gc", daemon=True),
            threading.Thread(
                target=self._closed_targets_loop, name="feedkv-closed-targets", daemon=True
            ),
        ]
        for thread in self._threads:
            thread.start()

    # The public surface.

    @property
    def locks(self) -> LockTable:
        """The store's lock table (:mod:`feedkv.kv.lock_table`), to look at."""
        return self._ctx.locks

    def send(self, batch: BatchRequest) -> BatchResponse:
        """Apply ``batch`` as one command of its range; blocks until it is durable."""
        return self.finish(batch, self.start(batch))

    def start(self, batch: BatchRequest) -> Completion[Applied]:
        """Begin applying ``batch`` without waiting: the first attempt, which completes
        on the commit thread (or at once: a read, or a refusal). Pass it to
        :meth:`finish`; :meth:`settled` says whether that will return at once."""
        header = batch.header
        try:
            if self._stopping.is_set():
                raise NodeUnavailableError("the node is shutting down")
            if header.txn is not None and header.txn.started():
                self.clock.update(header.txn.write_ts)
            if header.timestamp is not None:
                self.clock.update(header.timestamp)
            if self.intercept is not None and (answer := self.intercept(batch)) is not None:
                return Completion.of(Applied(answer, header.range_id))
        except FeedKVError as exc:
            return Completion.failed(exc)
        return self._attempt(batch)

    @staticmethod
    def settled(attempt: Completion[Applied]) -> bool:
        """Whether ``attempt`` has completed with nothing left to do: no conflicting
        intent to push and no timestamp to move, so :meth:`finish` will not block."""
        return attempt.done() and not isinstance(
            attempt.exception(), WriteIntentError | PushBatch | LockConflictError
        )

    def finish(self, batch: BatchRequest, attempt: Completion[Applied]) -> BatchResponse:
        """Wait for ``attempt`` (from :meth:`start`); resolve the conflicts it met and run
        the batch again until it applies. Raises the batch's error."""
        queued: list[bytes] = []  # keys whose queues the batch's transaction joined
        try:
            while True:
                try:
                    return attempt.result().response
                except WriteIntentError as exc:
                    batch = self._pin_timestamp(batch)
                    self._handle_conflicts(batch, exc.intents)
                except PushBatch as exc:
                    at = max(exc.ts, self.clock.now())
                    batch = replace(batch, header=replace(batch.header, timestamp=at))
                except LockConflictError as exc:
                    if _nowait(batch):
                        raise LockNotAvailableError(exc.key) from None
                    self._wait_for_lock(batch, exc.key, queued)
                except (RangeNotFoundError, NotLeaseHolderError) as exc:
                    self._describe_refusal(exc, batch)
                    raise
                finally:
                    # NB: an error leaving this frame holds it in its traceback, and
                    # ``attempt`` holds that error: a cycle only the cyclic GC could free.
                    del attempt
                attempt = self._attempt(batch)
        finally:
            txn = batch.header.txn
            if queued and txn is not None:
                for key in queued:
                    self._ctx.locks.dequeue(key, txn.id)

    def _describe_refusal(
        self,
        exc: RangeNotFoundError[RangeDescriptor] | NotLeaseHolderError[RangeDescriptor],
        batch: BatchRequest,
    ) -> None:
        """Give a refusal of ``batch``'s range the range's descriptor as this node knows
        it, so its client updates its cache from the answer rather than a lookup: a
        replica without the lease, its own (the lease holder it knows first); a range
        not here, where the cluster's reports put the batch's keys, when that is
        newer than the batch's address: of a higher generation. (The ranges a split or
        merge makes are a generation above every range their keys were in before, so
        a range of a generation no higher is the very range as the client has it, or
        an ancestor a report still names, as the parent of the split that made the
        client's range: sending the client there would only cost it a round trip.)"""
        if exc.descriptor is not None:
            return
        if isinstance(exc, NotLeaseHolderError):
            with self.engine.snapshot() as snap:
                desc = descriptor_by_id(snap, exc.range_id)
            holder = exc.lease_holder
            if desc is not None and holder in desc.replicas:
                desc = replace(desc, replicas=(holder, *(n for n in desc.replicas if n != holder)))
            exc.descriptor = desc
            return
        try:
            key = batch_key(batch)
        except InvalidArgumentError:
            return  # NB: a batch of no key: no range to tell of
        desc = self.cluster.locate(key) if self.cluster is not None else None
        header = batch.header
        if desc is not None and desc.generation > header.generation:
            exc.descriptor = desc

    def descriptors(self) -> list[RangeDescriptor]:
        with self.engine.snapshot() as snap:
            return all_descriptors(snap)

    def range_bytes(self, range_id: int) -> int:
        """The range's size estimate (what the split and merge policy goes by)."""
        return self._sizes.get(range_id)

    def closed_timestamp(self, range_id: int) -> Timestamp:
        """The range's closed timestamp: no write will land at or below it. A replicated
        range's is the one its applied log carries (what its observers were told): its
        lease holder closes timestamps as it evaluates, ahead of entries still in
        flight, which may hold writes below them."""
        if self._is_replicated(range_id):
            return self._applied_closed.get(range_id, ZERO_TIMESTAMP)
        return self._ctx.closed.get(range_id)

    def observe(self, range_id: int, observer: RangeObserver) -> tuple[RangeDescriptor, Snapshot]:
        """Register ``observer`` on a range; returns its descriptor and a snapshot holding
        every command applied before the first ``on_ops`` the observer will get."""
        with self.engine.apply_lock:
            snap = self.engine.snapshot()
            desc = descriptor_by_id(snap, range_id)
            if desc is None:
                snap.close()
                raise RangeRoutingError(f"range r{range_id} is not on this store")
            self._observers.setdefault(range_id, []).append(observer)
            return desc, snap

    def unobserve(self, range_id: int, observer: RangeObserver) -> None:
        with self.engine.apply_lock:
            observers = self._observers.get(range_id, [])
            if observer in observers:
                observers.remove(observer)

    def close(self) -> None:
        """Stop the side loops, end every observer, and close the engine. Idempotent."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._check_ranges.set()
        self._to_resolve.put(None)
        self._waiters.notify()
        for thread in self._threads:
            thread.join()
        if self.replicas is not None:
            self.replicas.stop()
        if self.collector is not None:
            self.collector.stop()
        with self.engine.apply_lock:
            observers, self._observers = self._observers, {}
            for group in observers.values():
                for observer in group:
                    observer.on_range_ended(RangeEndReason.NODE_SHUTDOWN)
        self.engine.close()

    def resolve(self, request: ResolveIntent) -> None:
        """Resolve ``request``'s intents in every range its span overlaps, range by range;
        blocks on the writes. Ranges may split or merge meanwhile: a part that its range no
        longer holds is tried again on the boundaries then, and after ``RESOLVE_ATTEMPTS``
        such misses :class:`~feedkv.errors.RangeRoutingError` is raised. Resolving again
        is harmless; any other error stops it, with the parts before it resolved. In a
        cluster the node's router does it, reaching the ranges other nodes hold."""
        if self.cluster is not None:
            self.cluster.resolve(request)
            return
        left: Span | None = request.span
        misses = 0
        while left is not None:
            with self.engine.snapshot() as snap:
                desc = descriptor_for_key(snap, left.start)
            part = Span(left.start, min(left.end, desc.span.end))
            try:
                self._execute(
                    BatchRequest(Header(range_id=desc.range_id), (replace(request, span=part),))
                )
            except RangeRoutingError:
                misses += 1
                if misses >= RESOLVE_ATTEMPTS:
                    raise
                continue
            left = Span(part.end, left.end) if part.end < left.end else None

    # Replication (issue 38's first steps: see feedkv.kv.replica and replica_loop).

    def bootstrap_replicated(self, nodes: Sequence[int]) -> None:
        """Create range r1, over the whole keyspace, replicated on ``nodes`` (this one
        among them), unless the store has ranges already. Every one of ``nodes`` writes
        the same first state, so the range starts replicated with no snapshot to send."""
        if self.node_id not in nodes:
            raise InvariantViolation(f"node {self.node_id} bootstraps a range it is not in")

        def bootstrap(rw: ReadWriter) -> None:
            if bootstrap_meta(rw, self.node_id, replicas=tuple(nodes)):
                Replica.bootstrap(rw, 1, nodes)

        self.engine.write(bootstrap)

    def replicate(
        self,
        send: Send,
        *,
        send_snapshot: SendSnapshot,
        tick_s: float = 0.05,
        raft: RaftConfig | None = None,
    ) -> ReplicaLoop:
        """Serve the ranges replicated on this store (their descriptors name more than
        one node) through their Raft groups; ``send`` carries this node's messages to
        the others, whose messages the node's transport hands to the returned loop's
        ``receive``; ``send_snapshot`` streams snapshots, which the other node's
        transport hands to its loop's ``receive_snapshot`` (spooled in the store's
        ``raft-snapshots`` directory until installed)."""
        if self.replicas is not None:
            raise InvariantViolation("the store replicates already")
        spool = SnapshotSpool(Path(self.engine.path) / "raft-snapshots")
        chunk_bytes = self.config.snapshot_chunk_bytes
        self.collector = ReplicaCollector(self.engine, self.node_id)
        loop = ReplicaLoop(
            self.engine,
            self.node_id,
            send,
            lambda range_id: _ReplicatedRange(
                self.engine, self._ctx, range_id, self.node_id, self._removed, spool, chunk_bytes
            ),
            send_snapshot=send_snapshot,
            tick_s=tick_s,
            config=raft,
            refused_backoff_s=self.config.snapshot_refused_backoff_s,
            on_stage=self._on_replicated_stage,
            on_apply=self._on_replicated_apply,
            on_lease=self._on_lease,
            on_removed=self._destroy_replica,
        )
        with self.engine.snapshot() as snap:
            # NB: read first, add after: a replica reads the engine as it starts
            mine = [
                (desc, replicated_merge.read_marker(snap, desc.range_id) is not None)
                for desc in all_descriptors(snap)
                if len(desc.replicas) > 1 and self.node_id in desc.replicas
            ]
            loop.forget(replicated_merge.tombstones(snap))
            unfinished = replica_collector.records(snap)
        for range_id in unfinished:  # NB: a crash cut their deletion short
            loop.collecting(range_id, self.collector.collect(range_id))
        for desc, frozen in mine:
            loop.add(desc.range_id, restarted=True)  # NB: with its replica id here
            self._ctx.replicated.add(desc.range_id)
            self._ctx.closed.restart(desc.range_id, Timestamp(0, 0))
            if frozen:
                self._ctx.frozen.add(desc.range_id)  # a merge froze it
        self.replicas = loop
        loop.start()
        return loop

    def start_replicating(self, range_id: int) -> None:
        """Serve ``range_id``, held here alone, through a Raft group of this one replica
        from now on (the first step of adding replicas to it: :meth:`add_replica`)."""
        loop = self._replication()
        if loop.has(range_id):
            return

        def convert(rw: ReadWriter) -> None:
            desc = descriptor_by_id(rw, range_id)
            if desc is None:
                raise RangeNotFoundError(range_id)
            mine = desc.replica_of(self.node_id)
            if desc.replicas != (self.node_id,) or mine is None:
                raise InvalidArgumentError(f"{desc} is not held by this node alone")
            Replica.bootstrap(rw, range_id, (mine.replica_id,))
            # NB: from here on the commit thread refuses the range's commands
            self._ctx.replicated.add(range_id)

        with self.engine.apply_lock:
            # what this store closed while it held the range alone stays promised
            self._applied_closed[range_id] = self._ctx.closed.get(range_id)
        self.engine.write(convert)
        loop.add(range_id, campaign=True)

    def add_replica(self, range_id: int, node_id: int, *, timeout_s: float = 60.0) -> None:
        """Add a replica of ``range_id`` on node ``node_id``: as a learner, which the
        leader sends a snapshot, then as a voter. Runs on the range's lease holder. The
        replica gets an id the range never gave before (the loop hands it out), even on
        a node that held one of the range's replicas earlier."""
        loop = self._replication()
        self._check_not_merging(range_id)
        for change in (ConfChangeType.ADD_LEARNER, ConfChangeType.ADD_NODE):
            # NB: replica id 0: the loop names the replica on node_id, or a fresh one
            done = loop.change_members(range_id, ConfChange(change, 0, context=node_id))
            done.result(timeout_s)

    def remove_replica(self, range_id: int, node_id: int, *, timeout_s: float = 60.0) -> None:
        """Remove the replica of ``range_id`` on node ``node_id`` from its group. Runs on
        the range's lease holder; the caller checks that the voters left are a live
        quorum (:func:`~feedkv.kv.placement.choose_replica_change`). The removed store
        drops its replica once it applies the change (:meth:`drop_replica`)."""
        change = ConfChange(ConfChangeType.REMOVE_NODE, 0, context=node_id)
        self._check_not_merging(range_id)
        self._replication().change_members(range_id, change).result(timeout_s)

    def _check_not_merging(self, range_id: int) -> None:
        """A range in a merge keeps its members: the merge needs both ranges on the same
        nodes (:mod:`feedkv.kv.replicated_merge`)."""
        with self.engine.snapshot() as snap:
            desc = descriptor_by_id(snap, range_id)
            right = replicated_merge.neighbour(snap, desc) if desc is not None else None
            into_me = right is not None and (
                (marker := replicated_merge.read_marker(snap, right.range_id)) is not None
                and marker.into == range_id
            )
        if range_id in self._ctx.frozen or into_me:
            raise RangeUnavailableError(f"r{range_id} is merging: its members stay for now")

    def drop_replica(self, range_id: int, *, if_leaderless: bool = False) -> None:
        """This store's replica of ``range_id`` is no longer in its group: stop driving
        it, delete its data, descriptor and Raft state, and end its feeds with
        ``REPLICA_REMOVED`` (they resume on a replica still in the group). Also for a
        replica that learns of its removal from another node's report of the range,
        having missed the change itself (its node was down): then ``if_leaderless``,
        as the report may be older than this replica's membership (a replica that
        hears from a leader is a member). A node added back has a replica of a new id
        (:mod:`feedkv.kv.range_descriptor`): the first message to it collects the old
        one (:class:`~feedkv.kv.replica_loop.ReplicaLoop`), so nothing of the old one
        passes for the new one's."""
        loop = self._replication()
        loop.remove(range_id, lambda: self._destroy_replica(range_id), if_leaderless=if_leaderless)

    def _destroy_replica(self, range_id: int, next_replica_id: int = 0) -> Completion[None]:
        """On the replica loop, once it no longer drives the range's replica: a tombstone
        is written (no replica of the range with an id below the next one the range
        gives, or ``next_replica_id``, is made here again), its descriptor and Raft
        state go, and its feeds end, in one small transaction; its data goes on the
        collector's thread (:mod:`feedkv.kv.replica_collector`), which the returned
        completion follows."""
        ctx = self._ctx
        collector = self.collector
        if collector is None:
            raise InvariantViolation("a replica is destroyed on a store that does not replicate")

        def destroy(rw: ReadWriter) -> None:
            desc = descriptor_by_id(rw, range_id)
            if desc is not None:
                replica_collector.write_record(rw, range_id, desc.span)
                delete_descriptor(rw, desc)
            # NB: above every id the range gave as far as this store knows, its own too
            floor = max(next_replica_id, desc.next_id if desc is not None else 0)
            write_replica_tombstone(rw, range_id, floor)
            EngineRaftStorage.destroy(rw, range_id)

        def ended(_: None) -> None:
            ctx.replicated.discard(range_id)
            self._removed.discard(range_id)
            self._applied_closed.pop(range_id, None)
            for observer in self._observers.pop(range_id, ()):
                observer.on_range_ended(RangeEndReason.REPLICA_REMOVED)

        self.engine.submit(destroy, ended).result()
        self._sizes.set(range_id, 0)
        log.info(
            "n%d: the replica of r%d was removed from its group; dropped", self.node_id, range_id
        )
        return collector.collect(range_id)

    def _replication(self) -> ReplicaLoop:
        if self.replicas is None:
            raise InvalidArgumentError("this store does not replicate: call replicate() first")
        return self.replicas

    def _replicated_range(self, batch: BatchRequest) -> int | None:
        """The range ``batch`` goes to when this store serves it through Raft."""
        loop = self.replicas
        if loop is None or not self._ctx.replicated:
            return None  # NB: the common case, with no lookup: no range is replicated here
        range_id = batch.header.range_id
        if not range_id:
            with self.engine.snapshot() as snap:
                range_id = descriptor_for_key(snap, batch_key(batch)).range_id
        return range_id if loop.has(range_id) else None

    def _split_context(self, *, replicated: bool) -> CommandContext:
        """The context of a split: its right-hand range's id taken now, on the caller's
        thread, never the commit thread or the replica loop (from the cluster's counter,
        a KV round trip that may go to the very range splitting), or outside the log for
        a replicated range (its replicas apply the same id); else the command takes one
        from the store's own counter in its transaction."""
        ctx = self._ctx
        if self.range_ids is not None:
            right_id = self.range_ids()
        elif replicated:
            right_id = self.engine.write(next_range_id)
        else:
            return ctx
        return replace(ctx, new_range_id=lambda _: right_id)

    def _attempt_replicated(
        self, loop: ReplicaLoop, range_id: int, batch: BatchRequest, ctx: CommandContext
    ) -> Completion[Applied]:
        """Propose ``batch`` to the range's Raft log, evaluated on this store if it holds
        the lease; a read-only batch is read there, with no log entry."""
        if _READ_ONLY.issuperset(map(type, batch.requests)) or _is_query(batch):
            read: Completion[Applied] = loop.read(
                range_id, lambda view: evaluate(ctx, view, batch, replicated=True)
            )
            read.add_done_callback(lambda: self._after_replicated(read))
            return read

        def command(view: ReadWriter) -> tuple[Applied, Effects]:
            reads: list[tuple[Span, Timestamp, bytes | None]] = []
            ctx.tscache.recording = reads
            try:
                applied = evaluate(ctx, view, batch, replicated=True)
            finally:
                ctx.tscache.recording = None
            splits = []
            for change in applied.range_changes:
                if change.reason is not RangeEndReason.RANGE_SPLIT:
                    raise InvalidArgumentError(
                        f"range r{range_id} is replicated: it cannot merge yet"
                    )
                splits.append((change.left, change.right))
            closed = ctx.closed.get(applied.range_id)
            return applied, Effects(tuple(applied.ops), tuple(reads), closed, tuple(splits))

        attempt: Completion[Applied] = loop.propose(range_id, command)
        attempt.add_done_callback(lambda: self._after_replicated(attempt))
        return attempt

    def _merge_replicated(self, loop: ReplicaLoop, range_id: int, batch: BatchRequest) -> Applied:
        """Merge a replicated range with its right-hand neighbour (on the caller's
        thread: the steps wait on both ranges' logs; :mod:`feedkv.kv.replicated_merge`)."""
        (request,) = batch.requests
        if not isinstance(request, Merge):
            raise InvalidArgumentError("a merge goes in a batch of its own")
        if not loop.holds_lease(range_id):
            raise NotLeaseHolderError(range_id, self.node_id, loop.status(range_id)[0])
        with self.engine.snapshot() as snap:
            left = descriptor_by_id(snap, range_id)
            if left is None or left.end == KEY_MAX:
                raise InvalidArgumentError(f"cannot merge r{range_id}: it is the last range")
            right = replicated_merge.neighbour(snap, left)
            if right is None:
                raise InvalidArgumentError(
                    f"cannot merge {left}: its right-hand neighbour is on other nodes; "
                    "move them together first"
                )
        self._coordinating.add(right.range_id)
        try:
            return replicated_merge.merge(self._ctx, loop, self.engine, range_id, request)
        finally:
            self._coordinating.discard(right.range_id)

    def _after_replicated(self, attempt: Completion[Applied]) -> None:
        """A command of a replicated range applied on this store, which evaluated it:
        what follows belongs to this node alone (the replicas' observers had its ops)."""
        if attempt.exception(timeout=0) is not None:
            return
        applied = attempt.result(timeout=0)
        if applied.resolve_later:
            self._to_resolve.put(_Cleanup.of(applied))
        if applied.finished_txns:
            self._waiters.notify()

    def _on_lease(self, range_id: int) -> None:
        """This store's replica of ``range_id`` took up its lease (on the replica loop,
        before it evaluates anything): cover the range's timestamp cache up to now, above
        every read an earlier leaseholder answered (see
        :meth:`~feedkv.kv.replica.Replica.take_lease_start`)."""
        ctx = self._ctx

        def cover(snap: Reader) -> None:
            desc = descriptor_by_id(snap, range_id)
            if desc is not None:
                now = ctx.clock.now()
                ctx.tscache.add_span(desc.span, now, None)
                # NB: the records an earlier leaseholder removed are not known here
                ctx.tombstones.cover(range_id, now)
                ctx.locks.clear(desc.span)  # NB: left from an earlier lease here

        self.engine.read_now(cover)

    def _on_replicated_stage(
        self, rw: ReadWriter, range_id: int, entries: Sequence[AppliedEntry]
    ) -> None:
        """Entries of a replicated range apply here (any replica; inside the engine
        transaction, under ``eval_lock``): their reads enter the timestamp cache and
        their closed timestamp closes the range, so this replica, should it take the
        lease, never lets a write land below either."""
        ctx = self._ctx
        for entry in entries:
            for span, ts, txn_id in entry.effects.reads:
                ctx.tscache.add_span(span, ts, txn_id)
            if entry.effects.closed is not None:
                ctx.closed.forward(range_id, entry.effects.closed)
            for left, right in entry.effects.splits:
                # the split's writes made the new range's descriptor: start its group
                desc = descriptor_by_id(rw, right)
                if desc is None:
                    raise InvariantViolation(f"a split of r{left} left no descriptor of r{right}")
                conf = desc.members
                Replica.bootstrap(rw, right, [r.replica_id for r in conf if not r.learner])
                ctx.replicated.add(right)
                ctx.closed.split(left, right)
                ctx.tombstones.split(left, right)
            if entry.effects.freeze:
                # a merge froze or thawed the range: by its marker, as the entry left it
                if replicated_merge.read_marker(rw, range_id) is not None:
                    ctx.frozen.add(range_id)
                else:
                    ctx.frozen.discard(range_id)
            for left, right in entry.effects.merges:
                # the right-hand range's data is the left one's now; its group ends here,
                # for good: its id is never served again (replicated_merge.write_tombstone)
                EngineRaftStorage.destroy(rw, right)
                replicated_merge.write_tombstone(rw, right)
                ctx.closed.merge(left, right)
                ctx.tombstones.merge(left, right)
                ctx.frozen.discard(right)
                ctx.replicated.discard(right)

    def _on_replicated_apply(self, range_id: int, entries: Sequence[AppliedEntry]) -> None:
        """Entries of a replicated range applied here, durably (under ``apply_lock``):
        their ops, then their closed timestamp, go to the range's observers. A change
        that removed this store's replica has it dropped (:meth:`drop_replica`)."""
        if range_id in self._removed and self.replicas is not None:
            self.drop_replica(range_id)
        for entry in entries:
            if entry.snapshot:
                # NB: under apply_lock, the snapshot durable: a feed registered again
                # here scans the data it brought
                for observer in self._observers.pop(range_id, ()):
                    observer.on_range_ended(RangeEndReason.RAFT_SNAPSHOT)
                continue
            effects = entry.effects
            if effects.ops:
                self._sizes.add(range_id, sum(map(op_bytes, effects.ops)))
                self._hand_over(range_id, effects.ops)
            if effects.closed is not None:
                self._applied_closed[range_id] = effects.closed
                for observer in self._observers.get(range_id, ()):
                    observer.on_closed(effects.closed)
            for left, right in effects.splits:
                self._applied_closed[right] = self._applied_closed.get(left, ZERO_TIMESTAMP)
                if self.replicas is not None:
                    self.replicas.add(right)
                self._sizes.split(left, right)
                for observer in self._observers.pop(left, ()):
                    observer.on_range_ended(RangeEndReason.RANGE_SPLIT)
            for left, right in effects.merges:
                closed = self._applied_closed.pop(right, ZERO_TIMESTAMP)
                self._applied_closed[left] = max(self._applied_closed.get(left, closed), closed)
                self._sizes.merge(left, right)
                for ended in (left, right):
                    for observer in self._observers.pop(ended, ()):
                        observer.on_range_ended(RangeEndReason.RANGE_MERGED)

    def _close_replicated(self) -> None:
        """Close the replicated ranges this store holds the lease of, through their logs
        (an idle range's closed timestamp moves on only so)."""
        loop, ctx = self.replicas, self._ctx
        if loop is None:
            return
        for range_id in loop.leases():

            def close(_: ReadWriter, range_id: int = range_id) -> tuple[None, Effects]:
                return None, Effects(closed=ctx.closed.close(range_id, ctx.clock.now()))

            loop.propose(range_id, close)

    def _is_replicated(self, range_id: int) -> bool:
        return self.replicas is not None and self.replicas.has(range_id)

    def _serves(self, range_id: int) -> bool:
        """Whether this store still serves ``range_id`` (``0``: routed by key, taken as
        yes): not moving away, and its lease if it is replicated."""
        return not range_id or (range_id not in self._ctx.frozen and self._leads(range_id))

    def _leads(self, range_id: int) -> bool:
        """Whether this store serves ``range_id``: it holds it alone, or its lease."""
        loop = self.replicas
        return loop is None or not loop.has(range_id) or loop.holds_lease(range_id)

    # Moving ranges between nodes (the steps of feedkv.server.relocation; records in
    # feedkv.kv.range_move).

    def freeze(self, record: MoveRecord) -> tuple[RangeDescriptor, Timestamp]:
        """Stop serving the range ``record`` moves (it persists with the record), close it
        up to now and tell its observers; returns its descriptor and that timestamp, above
        every read it served."""
        ctx, range_id = self._ctx, record.desc.range_id

        def freeze(rw: ReadWriter) -> tuple[RangeDescriptor, Timestamp]:
            desc = descriptor_by_id(rw, range_id)
            if desc is None:
                raise RangeNotFoundError(range_id)
            # NB: by the record, not ``frozen``: the engine may run this again, and an
            # earlier run's side effects outside ``rw`` stay
            held = range_move.read_record(rw, "moving", range_id)
            if held is not None and held.move_id != record.move_id:
                raise RangeUnavailableError(f"{desc} is already moving")
            range_move.write_record(rw, record)
            ctx.frozen.add(range_id)
            return desc, ctx.closed.forward(range_id, ctx.clock.now())

        def publish(frozen: tuple[RangeDescriptor, Timestamp]) -> None:
            # NB: the range's locks stay behind when it moves: let them go (the waiters
            # run again and learn where the range went)
            ctx.locks.clear(frozen[0].span)
            for observer in self._observers.get(range_id, ()):
                observer.on_closed(frozen[1])  # the feeds' last checkpoint here

        return self.engine.submit(freeze, publish).result()

    def snapshot_range(self, span: Span) -> tuple[Timestamp, Iterator[list[Entry]]]:
        """A frozen range's GC threshold and its state, in chunks (a snapshot of now)."""
        snap = self.engine.snapshot()
        threshold = gc_threshold(snap, span)

        def chunks() -> Iterator[list[Entry]]:
            with snap:
                yield from range_move.read_snapshot(snap, span)

        return threshold, chunks()

    def drop_range(self, record: MoveRecord) -> None:
        """The move's commit point, here on the node it leaves: the range's state and
        descriptor go, a ``moved`` record keeps where it went; its observers end with
        ``REPLICA_REMOVED``."""
        range_id = record.desc.range_id

        def drop(rw: ReadWriter) -> None:
            desc = descriptor_by_id(rw, range_id)
            if desc is None:
                raise RangeNotFoundError(range_id)
            range_move.clear_range(rw, desc.span)
            delete_descriptor(rw, desc)
            range_move.delete_record(rw, "moving", range_id)
            range_move.write_record(rw, replace(record, kind="moved"))

        def ended(_: None) -> None:
            for observer in self._observers.pop(range_id, ()):
                observer.on_range_ended(RangeEndReason.REPLICA_REMOVED)

        self.engine.submit(drop, ended).result()
        self._ctx.frozen.discard(range_id)
        self._sizes.set(range_id, 0)

    def abort_move(self, range_id: int) -> None:
        """Serve the range again: its move did not commit."""

        def abort(rw: ReadWriter) -> None:
            range_move.delete_record(rw, "moving", range_id)
            self._ctx.frozen.discard(range_id)

        self.engine.write(abort)

    def install(self, record: MoveRecord, chunk: list[Entry]) -> None:
        """Write a chunk of a range arriving here (with its ``pending`` record: it serves
        nothing until :meth:`activate`)."""

        def install(rw: ReadWriter) -> None:
            range_move.write_record(rw, record)
            range_move.write_entries(rw, chunk)

        self.engine.write(install)

    def activate(self, record: MoveRecord) -> None:
        """Serve the range that arrived (its ``pending`` record): its descriptor now,
        closed where its old node closed it (every write lands above that, which is
        above every read served there), with its GC threshold. Idempotent."""
        ctx, desc, closed = self._ctx, record.desc, record.closed

        def activate(rw: ReadWriter) -> None:
            if range_move.read_record(rw, "pending", desc.range_id) is None:
                return  # activated already: a repeated call
            ctx.clock.update(closed)
            ctx.tscache.add_span(desc.span, closed, None)
            ctx.closed.forward(desc.range_id, closed)
            forward_threshold(rw, desc.span, record.gc)
            write_descriptor(rw, desc)
            range_move.delete_record(rw, "pending", desc.range_id)
            range_move.delete_record(rw, "moved", desc.range_id)  # it came back

        self.engine.write(activate)
        self._quietly(self._measure, desc)

    def discard_pending(self, record: MoveRecord) -> None:
        """Drop a range that arrived for a move that did not commit."""

        def discard(rw: ReadWriter) -> None:
            held = range_move.read_record(rw, "pending", record.desc.range_id)
            if held is not None and held.move_id == record.move_id:
                range_move.clear_range(rw, record.desc.span)
                range_move.delete_record(rw, "pending", record.desc.range_id)

        self.engine.write(discard)

    def move_records(self, kind: str) -> list[MoveRecord]:
        with self.engine.snapshot() as snap:
            return range_move.records(snap, kind)

    # Applying commands.

    def _execute(self, batch: BatchRequest) -> Applied:
        return self._attempt(batch).result()

    def _attempt(self, batch: BatchRequest) -> Completion[Applied]:
        """Evaluate ``batch`` once: a write on the commit thread, a read here if it can
        (a replicated range's: on its replica loop)."""
        try:
            ctx = self._ctx
            # NB: a store that replicates no range asks nothing more
            range_id = self._replicated_range(batch) if ctx.replicated else None
            kinds = set(map(type, batch.requests))  # NB: one C call, not a generator a kind
            if Relocate in kinds and self.relocate is not None:
                request = batch.requests[0]
                if len(batch.requests) == 1 and isinstance(request, Relocate):
                    answer = BatchResponse((self.relocate(request),), self.clock.now(), None)
                    return Completion.of(Applied(answer, batch.header.range_id))
            if Split in kinds:
                ctx = self._split_context(replicated=range_id is not None)
            if range_id and self.replicas is not None:
                if Merge in kinds:
                    return Completion.of(self._merge_replicated(self.replicas, range_id, batch))
                return self._attempt_replicated(self.replicas, range_id, batch, ctx)
            if _READ_ONLY.issuperset(kinds):
                return self._read(batch, batch_spans(batch))
            if PushTxn in kinds:
                if _is_query(batch):
                    return self._read(batch, batch_spans(batch))
                if (probed := self._probe_push(batch)) is not None:
                    return probed
            in_flight = self._in_flight

            def command(rw: ReadWriter) -> Applied:
                in_flight.add(batch)  # the commit thread, under eval_lock
                return evaluate(ctx, rw, batch)

            return self.engine.submit(command, self._on_applied)
        except Exception as exc:
            return Completion.failed(exc)

    def _probe_push(self, batch: BatchRequest) -> Completion[Applied] | None:
        """A push answered on this thread when it writes nothing (it fails: the pushee is
        alive; or the pushee is finished); ``None`` when it must go as a write. NB: a
        waiter pushes every poll and most such pushes fail, and a failing job in a group
        commit has the whole group evaluated again."""
        ctx = self._ctx
        spans = batch_spans(batch) or (Span(KEY_MIN, KEY_MAX),)

        def probe(rw: ReadWriter) -> Completion[Applied] | None:
            if self._in_flight.blocks(spans):
                return None  # NB: a record being written must not be read before it lands
            try:
                return Completion.of(evaluate(ctx, rw, batch, probe=True))
            except PushNeedsWrite:
                return None
            except Exception as exc:
                return Completion.failed(exc)

        return self.engine.read_now(probe)

    def _read(self, batch: BatchRequest, spans: tuple[Span, ...] | None) -> Completion[Applied]:
        """Evaluate a read-only batch on this thread when no write it overlaps is being
        synced, so it does not wait for a group commit's fsync; else in the commit queue,
        in order with the writes (always correct, and fair to a read of a hot key)."""
        ctx = self._ctx
        read_spans = spans if spans is not None else (Span(KEY_MIN, KEY_MAX),)

        def direct(rw: ReadWriter) -> Applied | None:
            # NB: under the engine's eval_lock, so no write is being evaluated meanwhile.
            return None if self._in_flight.blocks(read_spans) else evaluate(ctx, rw, batch)

        applied = self.engine.read_now(direct)
        if applied is not None:
            return Completion.of(applied)

        def queued(rw: ReadWriter) -> Applied:
            return evaluate(ctx, rw, batch)

        return self.engine.submit(queued, self._on_applied, read_only=True)

    def _on_applied(self, applied: Applied) -> None:
        # The store's own bookkeeping first: a failing observer must not skip it.
        if applied.ops:
            size = self._sizes.add(applied.range_id, sum(map(op_bytes, applied.ops)))
            if size > self.config.range_max_bytes:
                self._check_ranges.set()
        for change in applied.range_changes:
            if change.reason is RangeEndReason.RANGE_SPLIT:
                self._sizes.split(change.left, change.right)
            else:
                self._sizes.merge(change.left, change.right)
        if applied.resolve_later:
            self._to_resolve.put(_Cleanup.of(applied))
        if applied.finished_txns:
            self._waiters.notify()
        if applied.ops and applied.range_id in self._observers:
            self._hand_over(applied.range_id, applied.ops)
        for change in applied.range_changes:
            for range_id in change.ended():
                for observer in self._observers.pop(range_id, ()):
                    observer.on_range_ended(change.reason)

    def _hand_over(self, range_id: int, ops: Sequence[LogicalOp]) -> None:
        """Give a command's ops to the range's observers. One that fails on them is
        ended, not skipped: it missed these ops, and its feeds must not go on as if it had
        not (they register again from their checkpoints), nor may the others miss them."""
        for observer in list(self._observers.get(range_id, ())):
            try:
                observer.on_ops(ops)
            except Exception:
                log.exception("an observer of r%d failed on its ops; it is ended", range_id)
                self._observers[range_id].remove(observer)
                with contextlib.suppress(Exception):
                    observer.on_range_ended(RangeEndReason.REPLICA_REMOVED)

    # Conflicts.

    def _pin_timestamp(self, batch: BatchRequest) -> BatchRequest:
        """Fix the timestamp of a batch that had the node choose one, before pushing on
        its behalf: a retry at a fresh ``now()`` would meet the pushed intent again."""
        header = batch.header
        if header.txn is not None and not header.txn.started():
            now = self.clock.now()
            txn = header.txn.started_at(now)
            return replace(batch, header=replace(header, txn=txn))
        if header.txn is None and header.timestamp is None:
            return replace(batch, header=replace(header, timestamp=self.clock.now()))
        return batch

    def _wait_for_lock(self, batch: BatchRequest, key: bytes, queued: list[bytes]) -> None:
        """Wait in ``key``'s queue until the batch may go (see the module docstring);
        ``queued``: the keys whose queues the batch's transaction is in (the caller takes
        it out of them when the batch is done)."""
        locks = self._ctx.locks
        txn = batch.header.txn
        txn_id = txn.id if txn is not None else None
        if txn is not None and key not in queued:
            locks.enqueue(key, txn.id)
            queued.append(key)
        # the blocker, when to push it next, and since when it blocks (a blocker without
        # a record yet is taken for alive until the liveness window has passed since)
        watched, push_at, since = None, 0.0, ZERO_TIMESTAMP
        give_up_at = _lock_deadline(batch.header)
        if txn is not None:
            self._lock_waiters[txn.id] = txn.meta()
        try:
            while True:
                seen = locks.generation
                blocker = locks.blocker(key, txn_id)
                if blocker is None or not self._serves(batch.header.range_id):
                    return  # NB: a range that left runs again, to say where it went
                if txn is not None:
                    self._check_deadlock(txn, blocker)
                if blocker != watched:
                    # NB: a blocker is pushed only once it has held the waiter up a poll,
                    # not by every one of a long queue of quick ones (a hot row)
                    watched, since = blocker, self.clock.now()
                    push_at = time.monotonic() + self.config.push_poll_s
                elif time.monotonic() >= push_at:
                    push_at = time.monotonic() + self.config.push_poll_s
                    # NB: a blocker with no record's key (none a coordinator of feedkv's
                    # makes) cannot be pushed: it is waited for
                    holder = locks.holder_meta(key)
                    if holder is not None and holder.id == blocker and holder.key:
                        self._push_blocker(holder.with_ts(since), txn, key, holds=True)
                        continue
                    ahead = self._lock_waiters.get(blocker)
                    if ahead is not None and ahead.key:
                        # NB: the waiter ahead waits itself, maybe on another node: the
                        # push makes this wait known at its record's node
                        self._push_blocker(ahead.with_ts(since), txn, key, holds=False)
                if self._stopping.is_set():
                    raise NodeUnavailableError("the node is shutting down")
                check_given_up()
                locks.wait(seen, _wait_s(self.config.push_poll_s, give_up_at, key))
        finally:
            if txn is not None:
                self._wait_for.done(txn.id)
                self._lock_waiters.pop(txn.id, None)

    def _push_blocker(
        self, blocker: TxnMeta, waiter: Transaction | None, key: bytes, *, holds: bool
    ) -> None:
        """Push the transaction the waiter waits for at ``key`` through its record (a
        ``TOUCH``): if it holds the lock and is finished, or expired (its coordinator
        stopped heartbeating it), its locks here go to their queues. Raises if the
        waiter is the victim of a deadlock across nodes; a record out of reach leaves
        the wait as it is."""
        dependents = self._dependents(waiter)
        request = PushTxn(
            blocker,
            PushType.TOUCH,
            self.clock.now(),
            waiter.priority if waiter is not None else 0,
            waiter.id if waiter is not None else None,
            dependents,
        )
        try:
            record = self.push(request).record
        except PushFailedError:
            if waiter is not None:
                self._check_distributed_deadlock(waiter, blocker.id, dependents)
            return
        except (NodeUnavailableError, RangeUnavailableError, RangeRoutingError) as exc:
            log.debug("could not push txn %s blocking %r: %s", blocker.id.hex()[:8], key, exc)
            return
        if not holds:
            return  # NB: a waiter ahead that ended leaves the queue itself
        if record.status is TxnStatus.ABORTED:
            log.warning(
                "the lock on %r: its holder, txn %s, is gone (its record aborted or not "
                "heartbeated for %.1f s): its locks here go to their queues",
                key,
                blocker.id.hex()[:8],
                self.config.txn_liveness_ns / 1e9,
            )
        self._ctx.locks.release(blocker.id)

    def _dependents(self, txn: Transaction | None) -> tuple[WaitEdge, ...]:
        """The waits ending at ``txn`` that its record's node knows of (a ``QUERY`` push
        of itself: :mod:`feedkv.kv.txn_wait`); none when it has no record's key or the
        node is out of reach."""
        if txn is None or not txn.key:
            return ()
        request = PushTxn(txn.meta(), PushType.QUERY, ZERO_TIMESTAMP, txn.priority, txn.id)
        try:
            return self.push(request).dependents
        except (NodeUnavailableError, RangeUnavailableError, RangeRoutingError) as exc:
            log.debug("could not ask for the waits on txn %s: %s", txn.id.hex()[:8], exc)
            return ()

    @staticmethod
    def _check_distributed_deadlock(
        txn: Transaction, blocker: bytes, dependents: tuple[WaitEdge, ...]
    ) -> None:
        """Raise if ``txn``'s wait for ``blocker`` closes a cycle with the waits ending at
        ``txn`` (``dependents``) and ``txn`` is the cycle's victim."""
        if not any(waiter == blocker for waiter, _, _ in dependents):
            return
        edges = {waiter: (to, priority) for waiter, to, priority in dependents}
        edges[txn.id] = (blocker, txn.priority)
        if is_victim(edges, txn.id):
            raise _deadlock(txn, blocker)

    def _check_deadlock(self, txn: Transaction, blocker: bytes) -> None:
        """Record that ``txn`` waits for ``blocker``; raise if that closes a cycle of
        waits of which ``txn`` is the victim."""
        self._wait_for.waits(txn.id, txn.priority, blocker)
        if self._wait_for.is_victim(txn.id):
            raise _deadlock(txn, blocker)

    def _handle_conflicts(self, batch: BatchRequest, intents: list[Intent]) -> None:
        header = batch.header
        txn = header.txn
        writing = any(isinstance(r, _WRITES) for r in batch.requests)
        locking = txn is not None and any(isinstance(r, Scan) and r.lock for r in batch.requests)
        read_ts = txn.read_ts if txn is not None else header.timestamp
        if read_ts is None:
            raise InvariantViolation("conflicts are handled after the batch's timestamp is fixed")
        by_txn: dict[bytes, list[Intent]] = {}
        for intent in intents:
            by_txn.setdefault(intent.txn.id, []).append(intent)
        resolves: list[ResolveIntent] = []
        for group in by_txn.values():
            pushee = max((i.txn for i in group), key=lambda m: m.write_ts)
            if locking and txn is not None and _nowait(batch):
                record = self._touch_once(pushee, read_ts.next(), txn, group[0].key)
                meta = record.meta if record.status is not TxnStatus.ABORTED else pushee
                resolves.extend(
                    ResolveIntent(Span.for_key(i.key), meta, record.status) for i in group
                )
                continue
            # NB: a locking read waits for the writer (it would only queue behind it for
            # the lock the intent stands for), not abort it by priority
            push_type = (
                PushType.TOUCH if locking else PushType.ABORT if writing else PushType.TIMESTAMP
            )
            record = self._push(
                pushee,
                push_type,
                read_ts.next(),
                txn,
                give_up_at=_lock_deadline(header),
                key=group[0].key,
            )
            meta = record.meta if record.status is not TxnStatus.ABORTED else pushee
            if len(group) >= mvcc.BULK_RESOLVE:
                # NB: one span over a transaction's intents, not one per key: a bulk
                # load's (a COPY across ranges) are then resolved as one batch. Its other
                # intents in between are the same transaction's, resolved as well.
                keys = [i.key for i in group]
                span = Span(min(keys), key_next(max(keys)))
                resolves.append(ResolveIntent(span, meta, record.status))
                continue
            resolves.extend(ResolveIntent(Span.for_key(i.key), meta, record.status) for i in group)
        self._execute(BatchRequest(Header(range_id=header.range_id), tuple(resolves)))

    def _touch_once(
        self, pushee: TxnMeta, push_to: Timestamp, pusher: Transaction, key: bytes
    ) -> TxnRecord:
        """A ``nowait`` locking read's push of the writer of the intent at ``key``: one
        ``TOUCH``, which succeeds only if the writer is finished or expired (its intent
        is then resolved and the read goes on); :class:`LockNotAvailableError` if it is
        alive, as CockroachDB's ``WaitPolicy_Error`` does."""
        request = PushTxn(pushee, PushType.TOUCH, push_to, pusher.priority, pusher.id)
        try:
            return self.push(request).record
        except PushFailedError as exc:
            raise LockNotAvailableError(key) from exc

    def _push(
        self,
        pushee: TxnMeta,
        push_type: PushType,
        push_to: Timestamp,
        pusher: Transaction | None,
        *,
        give_up_at: float | None = None,
        key: bytes = b"",
    ) -> TxnRecord:
        """Push ``pushee`` until the push succeeds, waiting between tries; past
        ``give_up_at`` (``time.monotonic()``), :class:`LockNotAvailableError` for ``key``,
        the intent the push is for."""
        priority = pusher.priority if pusher is not None else random.randint(1, MAX_PRIORITY)
        request = PushTxn(pushee, push_type, push_to, priority, pusher.id if pusher else None)
        waited_since = time.monotonic()
        warned = False
        query_at = waited_since + self.config.push_poll_s  # when to ask for the waits on it
        try:
            while True:
                seen = self._waiters.generation
                try:
                    return self.push(request).record
                except PushFailedError as exc:
                    waited = time.monotonic() - waited_since
                    if not warned and waited > SLOW_PUSH_S:
                        warned = True
                        log.warning(
                            "slow push: waited %.1f s for txn %s blocking %s (%s)",
                            waited,
                            pushee.id.hex()[:8],
                            pusher.id.hex()[:8] if pusher is not None else "a request",
                            exc,
                        )
                    if pusher is not None:
                        if request.push_type is PushType.TOUCH:
                            self._check_deadlock(pusher, pushee.id)
                        self._check_distributed_deadlock(pusher, pushee.id, request.dependents)
                self._check_still_pending(pusher)
                check_given_up()
                self._waiters.wait(seen, _wait_s(self.config.push_poll_s, give_up_at, key))
                # NB: the waits on the pusher are asked for once it has waited a poll, and
                # a poll apart, so a wait that ends soon costs no round trip more
                if time.monotonic() >= query_at:
                    query_at = time.monotonic() + self.config.push_poll_s
                    request = replace(request, dependents=self._dependents(pusher))
        finally:
            if push_type is PushType.TOUCH and pusher is not None:
                self._wait_for.done(pusher.id)

    def push(self, request: PushTxn) -> PushTxnResponse:
        """Push at the pushee's record, here or (in a cluster) on the node holding it;
        raises :class:`PushFailedError` when the pushee outranks the pusher."""
        if self.cluster is not None:
            return self.cluster.push(request)
        result = self._execute(BatchRequest(Header(), (request,))).response.responses[0]
        if not isinstance(result, PushTxnResponse):
            raise InvariantViolation(f"a push answered with {result!r}")
        return result

    def _check_still_pending(self, txn: Transaction | None) -> None:
        if self._stopping.is_set():
            raise NodeUnavailableError("the node is shutting down")
        if txn is None or not txn.key:
            return
        with self.engine.snapshot() as snap:
            record = read_record(snap, txn.key, txn.id)
        if record is not None and record.status is TxnStatus.ABORTED:
            raise TransactionAbortedError(
                "TransactionAbortedError(ABORT_REASON_PUSHER_ABORTED): "
                f"txn {txn.id.hex()[:8]} was aborted while it waited for another transaction"
            )

    # Side loops.

    def _close_loop(self) -> None:
        ctx = self._ctx

        def close_all(rw: ReadWriter) -> tuple[list[tuple[int, Timestamp]], dict[int, int | None]]:
            now = ctx.clock.now()
            closed = [
                (d.range_id, ctx.closed.close(d.range_id, now))
                for d in all_descriptors(rw)
                if not self._is_replicated(d.range_id)
            ]
            return closed, self._sizes.persist(rw)

        def publish(done: tuple[list[tuple[int, Timestamp]], dict[int, int | None]]) -> None:
            closed, sizes = done
            self._sizes.persisted(sizes)
            for range_id, ts in closed:
                for observer in self._observers.get(range_id, ()):
                    observer.on_closed(ts)

        while not self._stopping.wait(self.config.closed_ts_interval_s):
            # NB: a write job, so the group hooks run after publish: the feeds' Waker
            # flushes the checkpoints it deferred (a read-only job's group runs no hooks)
            self._quietly(lambda: self.engine.submit(close_all, publish).result())
            self._close_replicated()

    def _closed_targets_loop(self) -> None:
        # NB: a thread of its own: reading the targets goes through the layers above (a
        # catalog read that may wait on a transaction), which must never hold up closing
        while not self._stopping.wait(CLOSED_TARGETS_REFRESH_S):
            self._quietly(self._apply_closed_targets)

    def _apply_closed_targets(self) -> None:
        """Give each range the shortest closed timestamp target of the spans it overlaps
        in :attr:`closed_targets` (none: the store's default)."""
        spans = self.closed_targets()
        targets: dict[int, int] = {}
        if spans:
            for desc in self.descriptors():
                found = [ns for span, ns in spans if span.overlaps(desc.span)]
                if found:
                    targets[desc.range_id] = min(found)
        self._ctx.closed.set_targets(targets)

    def closed_target(self, range_id: int) -> int:
        """How far behind now range ``range_id`` closes its timestamps (ns)."""
        return self._ctx.closed.target(range_id)

    def _resolve_loop(self) -> None:
        item = self._to_resolve.get()
        while item is not None:
            # NB: the cleanups queued meanwhile go with it: their records go in one GC
            # command a range, not one each (a command is an fsync)
            cleanups = [item]
            while len(cleanups) < CLEANUP_BATCH:
                try:
                    item = self._to_resolve.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    break
                cleanups.append(item)
            self._quietly(self._clean_up, cleanups)
            if item is not None:
                item = self._to_resolve.get()

    def _clean_up(self, cleanups: list[_Cleanup]) -> None:
        """Resolve finished transactions' intents on other ranges, then remove their
        records (a record whose intents were not all resolved is left to the GC pass)."""
        done: list[TxnMeta] = []
        for cleanup in cleanups:
            try:
                for request in cleanup.resolves:
                    self.resolve(request)
            except FeedKVError as exc:
                log.warning("resolving the intents of a finished txn failed: %s", exc)
                continue
            done.extend(cleanup.records)
        groups: dict[int, tuple[RangeDescriptor, list[TxnMeta]]] = {}
        with self.engine.snapshot() as snap:
            for meta in done:
                try:
                    desc = descriptor_for_key(snap, meta.key)
                except RangeKeyMismatchError:
                    continue  # its range moved away: the GC pass there removes it
                groups.setdefault(desc.range_id, (desc, []))[1].append(meta)
        for desc, metas in groups.values():
            self._quietly(self._gc_records, desc, metas)

    def _gc_records(self, desc: RangeDescriptor, metas: list[TxnMeta]) -> int:
        """Remove the records of ``metas`` (anchored in ``desc``) that are finished or
        expired; returns how many went."""
        header = Header(range_id=desc.range_id, generation=desc.generation)
        response = self._execute(BatchRequest(header, (GC(desc.span, None, tuple(metas)),)))
        return sum(
            r.records_removed for r in response.response.responses if isinstance(r, GCResponse)
        )

    def _range_loop(self) -> None:
        for desc in self._unmeasured:
            self._quietly(self._measure, desc)
        while True:
            self._check_ranges.wait(self.config.range_check_interval_s)
            self._check_ranges.clear()
            if self._stopping.is_set():
                return
            self._quietly(self._split_and_merge)

    def _measure(self, desc: RangeDescriptor) -> tuple[int, bytes | None]:
        """Measure ``desc`` exactly and correct its estimate; returns (bytes, midpoint)."""
        with self.engine.apply_lock:
            snap = self.engine.snapshot()
            estimate = self._sizes.get(desc.range_id)
        with snap:
            measured = measure(snap, desc.span)
        with self.engine.apply_lock:
            self._sizes.add(desc.range_id, measured.total - estimate)
        return measured.total, measured.midpoint

    def _split_and_merge(self) -> None:
        config = self.config
        everything = self.descriptors()
        for desc in (d for d in everything if self._leads(d.range_id)):
            if self._sizes.get(desc.range_id) > config.range_max_bytes:
                size, midpoint = self._measure(desc)
                if config.split_key is not None and midpoint is not None:
                    midpoint = config.split_key(midpoint)
                    if midpoint <= desc.span.start:
                        midpoint = None  # one row fills the range: nowhere to split
                if size > config.range_max_bytes and midpoint is not None:
                    log.info("splitting %s (%d bytes) at %r", desc, size, midpoint)
                    try:
                        self._execute(BatchRequest(Header(), (Split(midpoint, automatic=True),)))
                    except RangeUnavailableError as exc:
                        # NB: no range id now (feedkv.kv.range_id_alloc): the next round
                        # tries again; the merges and other splits go on meanwhile
                        log.info("not splitting %s now: %s", desc, exc)
        small = config.range_min_bytes
        for left, right in itertools.pairwise(everything):
            sizes = map(self._sizes.get, (left.range_id, right.range_id))
            if left.end != right.start or right.sticky or max(sizes) >= small:
                continue  # not neighbours here (a cluster), kept apart, or big enough
            if not self._may_merge(left, right):
                continue
            if self._measure(left)[0] < small and self._measure(right)[0] < small:
                log.info("merging %s and %s: both are below %d bytes", left, right, small)
                try:
                    self._execute(BatchRequest(Header(), (Merge(left.start, automatic=True),)))
                except RangeUnavailableError as exc:
                    log.info("not merging %s and %s now: %s", left, right, exc)
                    self._merge_refused[right.range_id] = time.monotonic()
                return  # the descriptors changed; look again next round
        if self.replicas is not None and self._ctx.replicated:
            self._settle_replicated_merges(self.replicas)

    def _may_merge(self, left: RangeDescriptor, right: RangeDescriptor) -> bool:
        """Whether small neighbours ``left`` and ``right`` may merge on their own now:
        both held here alone, or both replicated on the same nodes with both leases here,
        every replica of the right-hand one up to date (a replica that is down or behind
        would have the merge given up, with the range frozen meanwhile), and no merge of
        them refused in the last ``MERGE_RETRY_S``."""
        if len(left.replicas) == 1 and len(right.replicas) == 1:
            return True
        loop = self.replicas
        refused = self._merge_refused.get(right.range_id)
        if loop is None or (refused is not None and time.monotonic() - refused < MERGE_RETRY_S):
            return False
        if sorted(left.replicas) != sorted(right.replicas):
            return False
        if not (loop.holds_lease(left.range_id) and loop.holds_lease(right.range_id)):
            return False
        return loop.applied_everywhere(right.range_id, loop.status(right.range_id)[2])

    def _settle_replicated_merges(self, loop: ReplicaLoop) -> None:
        """Finish or give up the merges of replicated ranges nobody carries on
        (:mod:`feedkv.kv.replicated_merge`)."""
        with self.engine.snapshot() as snap:
            finish, thaw = replicated_merge.unfinished(snap, loop, self._coordinating)
        for desc, marker in thaw:
            log.info("thawing %s: the merge into r%d it froze for was given up", desc, marker.into)
            replicated_merge.thaw(self._ctx, loop, desc, marker)
        for left in finish:
            log.info("finishing the merge decided into %s", left)
            self._execute(BatchRequest(Header(range_id=left.range_id), (Merge(left.start),)))

    # Garbage collection.

    def _gc_loop(self) -> None:
        while not self._stopping.wait(self.config.gc_interval_s):
            self._quietly(self.collect_garbage)

    def collect_garbage(self) -> int:
        """GC every range up to its GC TTL ago (:meth:`_gc_ttl_ns`), but never past its
        closed timestamp nor into history that :attr:`protected` (spans and the
        timestamps they need history from, set by the layers above: changefeed jobs)
        still holds; and remove the transaction records left behind
        (:meth:`_collect_txn_records`). Returns the number of versions removed."""
        protected = self.protected()
        default_ttl, ttls = self.gc_ttls()
        now = self.clock.now().wall
        removed = 0
        for desc in self.descriptors():
            if not self._leads(desc.range_id):
                continue
            self._collect_txn_records(desc)
            horizon = now - self._gc_ttl_ns(desc.span, default_ttl, ttls)
            threshold = min(Timestamp(max(horizon, 0), 0), self.closed_timestamp(desc.range_id))
            for span, ts in protected:
                if span.overlaps(desc.span):
                    threshold = min(threshold, ts)
            if threshold > Timestamp(0, 0):
                header = Header(range_id=desc.range_id, generation=desc.generation)
                response = self._execute(BatchRequest(header, (GC(desc.span, threshold),)))
                removed += sum(
                    r.versions_removed
                    for r in response.response.responses
                    if isinstance(r, GCResponse)
                )
        return removed

    def _collect_txn_records(self, desc: RangeDescriptor) -> int:
        """Remove the transaction records of ``desc`` idle past the cleanup threshold:
        left behind by a node that died before its cleanup, by a pusher that aborted
        them, or by a coordinator that vanished (expired). A finished one's intents on
        other ranges are resolved first; one whose resolve fails stays for the next pass.
        Returns how many were removed."""
        now_ns = self.clock.physical_now()
        threshold_ns = self.config.txn_cleanup_threshold_ns
        with self.engine.snapshot() as snap:
            idle = [r for r in records_in(snap, desc.span) if r.idle(now_ns, threshold_ns)]
        doomed: list[TxnMeta] = []
        for record in idle:
            try:
                for span in record.lock_spans:
                    self.resolve(ResolveIntent(span, record.meta, record.status))
            except FeedKVError as exc:
                log.warning("txn %s keeps its record: %s", record.meta.id.hex()[:8], exc)
                continue
            doomed.append(record.meta)
        return self._gc_records(desc, doomed) if doomed else 0

    def _gc_ttl_ns(self, span: Span, default: int | None, ttls: list[tuple[Span, int]]) -> int:
        """The GC TTL of a range's ``span``: that of a span with its own that covers it,
        else the longest of the default's and those of the spans it overlaps (a range
        holding keys of several zones keeps history for the one that wants it longest)."""
        fallback = self.config.gc_ttl_ns if default is None else default
        for own, ttl in ttls:
            if own.contains(span):
                return ttl
        return max([fallback, *(ttl for own, ttl in ttls if own.overlaps(span))])

    def _quietly(self, fn: Callable[..., object], *args: object) -> None:
        try:
            fn(*args)
        except FeedKVError as exc:
            # NB: a closing client means the node stops: the work is redone after
            if not self._stopping.is_set() and not isinstance(exc, ClientClosedError):
                log.warning("background work failed (it will be retried lazily): %s", exc)
