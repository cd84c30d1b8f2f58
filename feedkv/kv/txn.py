"""The transaction coordinator: a serializable transaction as the client runs it.

Reads go to the ranges at the transaction's read timestamp, and the coordinator remembers
every span it read. Writes are buffered in the client until commit (reads see them), so a
conditional put is a read plus a buffered write, and a delete-range is a scan plus
buffered deletes; either way the read is remembered and checked at commit.

Commit:

- **One phase**: when every buffered write lives in one range, one batch carries the
  writes and the ``EndTxn``; the range writes committed values directly, no intents and no
  transaction record. A transaction that has read nothing sends its writes without the
  ``EndTxn``, as a plain write batch (with the transaction's deadline, if it has one):
  having read nothing, it may commit at whatever timestamp the node picks. (Not one
  given a priority: a plain batch has none of its own.)
- **Two phases** otherwise: the coordinator creates the record on the range of the first
  written key (the anchor), writes intents range by range (heartbeating the record
  meanwhile), then sends ``EndTxn`` with the spans it locked. The anchor's range resolves
  its own intents in the same command; the node resolves the rest in the background.
  The record goes once every intent is resolved (:mod:`feedkv.kv.txn_record`).
  A range's new keys (a bulk load's, from ``BULK_PUTS`` on) go as one ``Ingest`` of
  intents under one lock span, which the range resolves as one batch.

Savepoints: :meth:`Txn.savepoint` marks a point that :meth:`Txn.rollback_to` returns the
transaction to, undoing every write made since. Writes wait in the client's buffer until
commit, so undoing one takes it out of the buffer: a rolled-back write never reaches a
range, never commits and is never seen by a rangefeed, whichever ranges the transaction
spans. While a savepoint is held, each buffered write journals what it replaced (the
journal's length plays the part of CockroachDB's write sequence number); rolling back
replays the journal backwards to the savepoint's length. Reads are not undone: their
spans stay to be refreshed, as CockroachDB keeps them. Intents sent at once
(:meth:`Txn.put_now`, schema changes) cannot be taken back this way, so rolling back past
one is refused, as CockroachDB refuses ROLLBACK TO SAVEPOINT after DDL.

Locking reads: :meth:`Txn.scan` with ``lock`` (an UPDATE's or DELETE's row read) takes an
exclusive lock on each key it reads, in the lock table of the store serving the range
(:mod:`feedkv.kv.lock_table`); another transaction that would lock or write the key
waits in the key's queue until this one ends, instead of one of the two failing its
refresh later. If a key read was written above the transaction's read timestamp, the
range answers ``RETRY_WRITE_TOO_OLD`` with the locks taken; the coordinator refreshes
its reads to that version and reads again (it holds the key now, so that read is the
latest). The spans it locked go with ``EndTxn`` (a one-phase commit's too), which lets
go of the locks; a rollback sends them as well. Its first locking read anchors its record
at the first key it locks and starts its heartbeat, whose first beat writes the record:
a waiter pushes the holder through that record and takes its locks only once the record
is finished or expired, so a live transaction keeps them however long it holds them
(:mod:`feedkv.kv.lock_table`). A one-phase commit whose writes lie outside the record's
range goes two-phase instead, as the record's key goes with ``EndTxn``.

Serializability: whenever the write timestamp ends above the read timestamp (a newer
version, a later read, the closed timestamp or a pusher moved it), the coordinator
*refreshes*: it asks each read span whether anything changed between the two timestamps.
If nothing did, the reads are as good at the new timestamp and the commit proceeds there;
otherwise the transaction fails with :class:`TransactionRetryError`, which
``db.run_transaction`` retries.
"""

from __future__ import annotations

import bisect
import contextlib
import enum
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final, cast

from feedkv.errors import (
    ClientClosedError,
    ConditionFailedError,
    ExternalError,
    FeedKVError,
    InvalidArgumentError,
    InvariantViolation,
    RangeKeyMismatchError,
    RetryableError,
    TransactionAbortedError,
    TransactionRetryError,
    TransactionStatusError,
)
from feedkv.kv.api import (
    MAX_PRIORITY,
    BatchResponse,
    ConditionalPut,
    EndTxn,
    Get,
    GetResponse,
    Header,
    HeartbeatTxn,
    IncrementalScan,
    IncrementalScanResponse,
    Ingest,
    Put,
    RefreshRange,
    Request,
    Transaction,
)
from feedkv.kv.helpers import Helpers
from feedkv.kv.metrics import TxnMetrics, unregistered_txn_metrics
from feedkv.kv.txn_heartbeat import HeartbeatTimer, TxnHeartbeat
from feedkv.storage.mvcc import MAX_VALUE_BYTES, KeyValue, check_value
from feedkv.util.hlc import ZERO_TIMESTAMP, Timestamp
from feedkv.util.keys import KEY_MAX, MAX_KEY_BYTES, Span, check_key, key_next, merge_spans

if TYPE_CHECKING:
    from feedkv.kv.router import Router
    from feedkv.security.secrets import HeldKey

__all__ = ["Savepoint", "Txn", "TxnState", "TxnView"]

HEARTBEAT_INTERVAL_S = 1.0
_HEARTBEATS = HeartbeatTimer(HEARTBEAT_INTERVAL_S)
# Threads writing a transaction's intents to its other ranges while it writes one.
_INTENT_WRITERS = Helpers(16, "feedkv-intents")


# Transaction ids, drawn from a generator of their own seeded by the OS (and again in a
# forked child). NB: not the global one: that is the program's to seed, and seeding it
# (hypothesis does before every example) handed a later transaction an earlier one's id,
# so its record too when both anchored on one key: its commit found the earlier commit
# and returned, leaving its intents to be committed at the earlier, lower timestamp.
_IDS = random.Random()
os.register_at_fork(after_in_child=_IDS.seed)

ONE_PHASE_ATTEMPTS = 2  # pushes a one-phase commit takes before it goes two-phase
BULK_PUTS = 16  # new keys a one-range commit writes as one Ingest instead of one by one


def _outcome(
    call: Callable[[], BatchResponse],
) -> tuple[BatchResponse | None, BaseException | None]:
    """What ``call()`` returned, or what it raised."""
    try:
        return call(), None
    except BaseException as exc:
        return None, exc


def _random_priority() -> int:
    """A priority in ``[1, MAX_PRIORITY]`` (one random word, not ``randint``'s calls)."""
    return random.getrandbits(MAX_PRIORITY.bit_length()) or 1


@dataclass(frozen=True, slots=True)
class Savepoint:
    """A point in a transaction to roll back to (:meth:`Txn.savepoint`): the lengths of
    the write journal and of the intents sent at once when it was taken."""

    writes: int
    intents: int


class _Unset:
    """A buffer slot that held nothing (journaled so rolling back removes the key)."""


_UNSET: Final = _Unset()

# A journaled write: the key, what the buffer held for it, and whether it was to be
# checked absent or present at commit.
_Undo = tuple[bytes, "bytes | _Unset | None", bool, bool]


def _set_member(keys: set[bytes], key: bytes, member: bool) -> None:
    if member:
        keys.add(key)
    else:
        keys.discard(key)


# The containers Txn.__getattr__ makes at their first use, by attribute (besides the
# Transaction): each cost every transaction made an allocation.
_MADE_AT_FIRST_USE: dict[str, Callable[[], object]] = {
    "_reads": list,
    "_lock_reads": list,
    "_journal": list,
}


class TxnState(enum.Enum):
    OPEN = "open"
    COMMITTED = "committed"
    ROLLED_BACK = "rolled back"


class Txn:
    """One transaction. Use it from one thread; ``db.transaction()`` makes one."""

    # NB: the state that starts the same in every transaction starts here, in the
    # class, and a transaction sets its own when it changes: one is made per statement
    # outside BEGIN, and __init__ setting each cost it more than the rest of its making.
    state = TxnState.OPEN
    commit_ts: Timestamp | None = None
    deadline: Timestamp | None = None
    # How long each of its batches may wait for another transaction's lock or intent (0:
    # as long as it takes; see Header.lock_timeout_ms): SQL's lock_timeout, set per
    # statement
    lock_timeout_ms = 0
    # The written keys in order, made by the first read of a span and kept up to date
    # after (``None``: not made, or dropped by a bulk change): see _written_in
    _ordered: list[bytes] | None = None
    # A bulk load's new keys (ascending) and values, kept as the caller's two lists while
    # they are the only writes: see _writes
    _bulk: tuple[list[bytes], list[bytes]] | None = None
    _savepoints = 0  # held; while any is, writes are journaled
    _heartbeat_thread: TxnHeartbeat | None = None
    _recorded = False  # whether the record was written (not only its heartbeats)
    # Made at their first use (see __getattr__): a statement alone that reads nothing
    # (an INSERT, an UPDATE by key) needs none of them.
    _txn: Transaction
    _reads: list[Span]
    _lock_reads: list[Span]  # spans read with locks (see scan's ``lock``)
    _journal: list[_Undo]  # journaled writes, while a savepoint is held

    def __init__(
        self,
        router: Router,
        *,
        priority: int | None = None,
        metrics: TxnMetrics | None = None,
        sealer: HeldKey = None,
    ) -> None:
        """``sealer``: what seals job secrets written through this transaction (its
        client's; :mod:`feedkv.security.secrets`)."""
        self._router = router
        self.sealer = sealer
        self._metrics = metrics or unregistered_txn_metrics()
        # A priority drawn at random is worth no more than the random one a batch without
        # a transaction pushes with: only then may the writes go as such a batch.
        self._any_priority = priority is None
        self._priority = priority
        self._writes_map: dict[bytes, bytes | None] = {}
        self._present: set[bytes] = set()  # written keys that must hold a value before
        self._absent_set: set[bytes] = set()  # written keys that must hold nothing before
        self._locked: list[Span] = []

    if not TYPE_CHECKING:  # NB: so mypy still refuses any other missing attribute

        def __getattr__(self, name: str) -> object:
            """Make the transaction as its coordinator tracks it (``_txn``), or one of
            the lists of _MADE_AT_FIRST_USE, when it is first needed.

            NB: Python calls this only for an attribute the instance lacks, so it runs
            once, at the first use of ``_txn``, and costs nothing after. A statement
            alone that reads nothing commits its writes as a plain batch (see
            _commit_unread) and never needs one: its id and random priority cost every
            such statement a few calls."""
            if name != "_txn":
                make = _MADE_AT_FIRST_USE.get(name)
                if make is None:
                    raise AttributeError(
                        f"{type(self).__name__!r} object has no attribute {name!r}"
                    )
                made = make()
                setattr(self, name, made)
                return made
            priority = self._priority
            self._txn = txn = Transaction(
                id=_IDS.randbytes(16),  # NB: unique, not secret; no system call (see _IDS)
                key=b"",
                epoch=0,
                read_ts=ZERO_TIMESTAMP,
                write_ts=ZERO_TIMESTAMP,
                priority=priority if priority is not None else _random_priority(),
            )
            return txn

    def _has_read(self) -> bool:
        """Whether the transaction has started (read, or been given a timestamp),
        without making it (see __getattr__): one not made yet has not."""
        txn: Transaction | None = self.__dict__.get("_txn")
        return txn is not None and txn.started()

    @property
    def id(self) -> bytes:
        return self._txn.id

    @property
    def priority(self) -> int:
        return self._txn.priority

    @property
    def read_ts(self) -> Timestamp | None:
        """The timestamp the transaction reads at (``None`` until its first read)."""
        return self._txn.read_ts if self._txn.started() else None

    # Reads.

    def get(self, key: bytes) -> bytes | None:
        self._check_open()
        check_key(key)
        if key in self._writes:
            return self._writes[key]
        return self._get_committed(key)

    def _get_committed(self, key: bytes) -> bytes | None:
        """``key``'s value at the read timestamp, this transaction's writes left out."""
        response = self._send_key(key, (Get(key),))
        self._reads.append(Span.for_key(key))
        result = response.responses[0]
        return result.value if isinstance(result, GetResponse) else None

    def scan(
        self,
        start: bytes,
        end: bytes,
        *,
        limit: int | None = None,
        reverse: bool = False,
        lock: bool = False,
        nowait: bool = False,
        skip_locked: bool = False,
    ) -> list[KeyValue]:
        """Live keys in ``[start, end)`` with this transaction's own writes applied.
        ``lock``: lock the keys read until the transaction ends (see the module
        docstring); may wait for another transaction holding one, or with ``nowait``
        fails at once with :class:`~feedkv.errors.LockNotAvailableError`, or with
        ``skip_locked`` leaves the keys others hold out."""
        self._check_open()
        span = Span(start, end)
        if limit is not None and limit < 0:
            raise InvalidArgumentError(f"scan limit must be >= 0, got {limit}")
        writes = self._writes
        own = {k: writes[k] for k in self._written_in(start, end)}
        return self._merged(
            span, own, limit, reverse, lock=lock, nowait=nowait, skip_locked=skip_locked
        )

    def _merged(
        self,
        span: Span,
        own: dict[bytes, bytes | None],
        limit: int | None,
        reverse: bool,
        *,
        lock: bool = False,
        nowait: bool = False,
        skip_locked: bool = False,
    ) -> list[KeyValue]:
        """The committed keys of ``span`` read at the read timestamp, with ``own`` (this
        transaction's writes in the span, by key) applied over them. NB: with a limit,
        the committed keys are read up to it plus ``own``'s deletions (each may hide
        one), not to the span's end, and ``own`` applies up to the last key read: past
        it, the committed keys are not known."""
        wanted = None if limit is None else limit + sum(v is None for v in own.values())
        if lock:
            rows = self._locking_scan(span, wanted, reverse, nowait, skip_locked)
        else:
            rows = self._scan(span, wanted, reverse)
        if not own:
            return rows
        if wanted and len(rows) >= wanted:  # NB: fewer: the span's end was reached
            last = rows[-1].key
            own = {k: v for k, v in own.items() if (k >= last if reverse else k <= last)}
        merged = {kv.key: kv for kv in rows}
        for key, value in own.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = KeyValue(key, value, self._txn.read_ts)
        rows = [merged[k] for k in sorted(merged, reverse=reverse)]
        return rows if limit is None else rows[:limit]

    def _scan(
        self,
        span: Span,
        limit: int | None,
        reverse: bool,
        *,
        lock: bool = False,
        nowait: bool = False,
        skip_locked: bool = False,
    ) -> list[KeyValue]:
        rows, read = self._router.scan(
            span,
            self._header,
            limit=limit,
            reverse=reverse,
            on_response=self._adopt,
            lock=lock,
            nowait=nowait,
            skip_locked=skip_locked,
        )
        if skip_locked:
            # NB: as CockroachDB's: a SKIP LOCKED read refreshes only the keys it
            # returned, not the span, whose rows it skipped are others' to change
            self._reads.extend(Span.for_key(kv.key) for kv in rows)
        else:
            self._reads.extend(read)
        return rows

    def writes_in(self, start: bytes, end: bytes) -> bool:
        """Whether the transaction has written (or deleted) a key in ``[start, end)``,
        buffered or sent as an intent already."""
        if any(span.start < end and start < span.end for span in self._locked):
            return True
        if self._bulk is not None:
            keys = self._bulk[0]
            i = bisect.bisect_left(keys, start)
            if i < len(keys) and keys[i] < end:
                return True
            return any(start <= key < end for key in self._writes_map)
        return bool(self._written_in(start, end))

    def _written_in(self, start: bytes, end: bytes) -> list[bytes]:
        """The keys written (or deleted) in ``[start, end)``, ascending. NB: found by
        bisecting the written keys kept in order, not by a pass over every write: a
        statement that reads one row and writes it, row after row (UPSERT into a table
        keyed by rowid), would otherwise cost O(rows squared)."""
        writes = self._writes
        keys = self._ordered
        if keys is None:
            keys = self._ordered = sorted(writes)
        return keys[bisect.bisect_left(keys, start) : bisect.bisect_left(keys, end)]

    def scan_changes(
        self, start: bytes, end: bytes, since: Timestamp, *, limit: int | None = None
    ) -> dict[bytes, bytes | None] | None:
        """What :meth:`scan` of ``[start, end)`` would answer differently from a scan of
        the committed values at ``since`` (exclusive): each such key's value now
        (``None``: no row), this transaction's own writes included. Applied to a copy of
        the span as of ``since``, it gives this transaction's scan.

        A read like :meth:`scan` (:class:`~feedkv.kv.api.IncrementalScan`): conflicts,
        timestamp cache and refresh are a scan's. ``None`` when more than ``limit`` keys
        changed (scan instead); raises :class:`~feedkv.errors.BatchTimestampBeforeGCError`
        when ``since`` is below the span's GC threshold, and
        :class:`~feedkv.errors.InvalidArgumentError` when it is above the read."""
        self._check_open()
        span = Span(start, end)
        changed: dict[bytes, bytes | None] = {}
        complete = True
        for part, response in self._router.send_span(
            span,
            self._header,
            lambda p: (IncrementalScan(p, since, None if limit is None else limit - len(changed)),),
        ):
            self._adopt(response)
            # NB: read, whatever the answer: the timestamp cache holds it over the part
            self._reads.append(part)
            result = response.responses[0]
            if not isinstance(result, IncrementalScanResponse):
                raise InvariantViolation(f"an incremental scan answered with {result!r}")
            if not result.complete:
                complete = False
                break
            changed.update(zip(result.keys, result.values, strict=True))
        if not complete:
            return None
        writes = self._writes
        for key in self._written_in(start, end):
            changed[key] = writes[key]
        if limit is not None and len(changed) > limit:
            return None
        return changed

    def _locking_scan(
        self, span: Span, limit: int | None, reverse: bool, nowait: bool, skip_locked: bool
    ) -> list[KeyValue]:
        # NB: counted as locked before it is sent: a scan that fails may have taken locks
        self._lock_reads.append(span)
        if not self._txn.key:
            # Its locks make it known to others, who push it through its record to learn
            # whether it is alive: the record goes at the first key it locks, written by
            # its first heartbeat (until then, a pusher takes it for alive: see
            # _Evaluator.push_txn), and no record is written for a transaction that ends
            # before that, as most do.
            self._txn = self._txn.anchored_at(_first_key(span))
            self._keep_alive()
        while True:
            try:
                return self._scan(
                    span, limit, reverse, lock=True, nowait=nowait, skip_locked=skip_locked
                )
            except TransactionRetryError as exc:
                if exc.reason != "RETRY_WRITE_TOO_OLD" or exc.ts is None:
                    raise
                self._refresh(max(exc.ts, self._txn.write_ts))

    def view(self) -> TxnView:
        """A reader that sees what this transaction sees now, and none of the writes it
        makes after (a SQL cursor's view: insensitive, as PostgreSQL's and CockroachDB's).
        Its reads are the transaction's: at its read timestamp, remembered and refreshed
        as any other. Costs a copy of the writes buffered so far."""
        self._check_open()
        return TxnView(self, dict(self._writes))

    # Writes (buffered until commit).

    def put(self, key: bytes, value: bytes) -> None:
        self._check_open()
        check_key(key)
        if value is None:
            raise InvalidArgumentError("put needs a value; use delete() to remove a key")
        check_value(value)
        self._buffer(key, value)

    def put_now(self, key: bytes, value: bytes, *, anchor: bytes | None = None) -> None:
        """Write ``key`` as an intent at once instead of at commit: until the transaction
        ends, a reader of ``key`` at or above its timestamp waits for it, or pushes it
        if it outranks it. The transaction then commits in two phases, its record at
        ``anchor`` (default ``key``): intents on the record's range are resolved with
        the commit, the others just after it."""
        self.put(key, value)
        if not self._txn.key:
            self._txn = self._txn.anchored_at(anchor if anchor is not None else key)
        self._start_heartbeat()
        # NB: counted as locked before it is sent: a send that fails may still have
        # written the intent, which the end of the transaction must then resolve (and
        # a savepoint must not roll back past)
        self._locked.append(Span.for_key(key))
        self._send_key(key, (Put(key, value),))

    def delete(self, key: bytes) -> None:
        self._check_open()
        check_key(key)
        self._buffer(key, None)

    def conditional_put(self, key: bytes, value: bytes | None, expected: bytes | None) -> None:
        """Write ``value`` if ``key`` holds ``expected`` (``None``: absent), else raise
        :class:`ConditionFailedError` with the actual value."""
        actual = self.get(key)
        if actual != expected:
            raise ConditionFailedError(key, expected, actual)
        if value is None:
            self.delete(key)
        else:
            self.put(key, value)

    def put_if_absent(self, key: bytes, value: bytes) -> None:
        """Write ``value`` if ``key`` holds nothing, checked when the writes are sent at
        commit, which then raises :class:`ConditionFailedError`: an insert's existence
        check without the read :meth:`conditional_put` makes first. A key this
        transaction already wrote is checked at once, against that write."""
        # NB: the map itself unless a bulk batch is to move (see _writes): a call fewer
        # on every row an INSERT writes
        writes = self._writes_map if self._bulk is None else self._writes
        if key in writes:
            written = writes[key]
            if written is not None:
                raise ConditionFailedError(key, None, written)
            self.put(key, value)  # this transaction deleted it
            return
        self.put(key, value)  # NB: journals the key's checks too, before adding one
        self._absent_set.add(key)  # NB: not _absent: _writes above moved a bulk batch

    @property
    def _writes(self) -> dict[bytes, bytes | None]:
        """The buffered writes by key (``None``: a deletion). NB: a bulk load's batch
        (:meth:`put_if_absent_many` of ascending keys into a transaction with no other
        write) stays two lists until something other than the commit looks at the
        writes: a COPY's 200k keys put in a dict and a set, then sorted and taken out
        again, cost a fifth of its CPU."""
        if self._bulk is not None:
            self._unbulk()
        return self._writes_map

    @property
    def _absent(self) -> set[bytes]:
        if self._bulk is not None:
            self._unbulk()
        return self._absent_set

    def _unbulk(self) -> None:
        """Move the bulk batch into the writes by key, as any others."""
        if self._bulk is None:
            return
        keys, values = self._bulk
        self._bulk = None
        self._writes_map.update(zip(keys, values, strict=True))
        self._absent_set.update(keys)
        self._ordered = None

    def put_if_absent_many(
        self, keys: list[bytes], values: list[bytes], *, ascending: bool = False
    ) -> bool:
        """:meth:`put_if_absent` of each key (each once) with its value, in bulk: a
        bulk load's rows, with no Python code run per key. ``False``, and nothing
        buffered, when a key was written by this transaction already or a savepoint is
        held (call :meth:`put_if_absent` for each then). ``ascending``: the caller
        knows that ``keys`` ascend strictly (the transaction then keeps the lists as
        they are, when they are its only writes). The lists are the transaction's
        from now on: the caller must not change them."""
        self._check_open()
        if self._savepoints:
            return False
        alone = self._bulk is None and not self._writes_map
        writes = self._writes
        if writes and not writes.keys().isdisjoint(keys):
            return False
        if not keys:
            return True
        if set(map(type, keys)) != {bytes} or not all(keys):
            raise InvalidArgumentError("keys are non-empty bytes")
        highest = keys[-1] if ascending else max(keys)
        if max(map(len, keys)) > MAX_KEY_BYTES or highest >= KEY_MAX:
            for key in keys:
                check_key(key)  # names the first bad one
        if set(map(type, values)) != {bytes}:
            raise InvalidArgumentError("values are bytes")
        if max(map(len, values)) > MAX_VALUE_BYTES:
            for value in values:
                check_value(value)
        if len(keys) != len(values):
            raise InvalidArgumentError(f"{len(keys)} keys and {len(values)} values")
        if alone and ascending:
            self._bulk = (keys, values)
            return True
        writes.update(zip(keys, values, strict=True))
        self._absent.update(keys)
        self._ordered = None
        return True

    def put_if_present(self, key: bytes, value: bytes) -> None:
        """Write ``value`` if ``key`` holds a value, checked when the writes are sent at
        commit, which then raises :class:`ConditionFailedError`: an update of a row that
        rewrites it whole, without reading it first. A key this transaction already wrote
        is checked at once, against that write."""
        writes = self._writes
        if key in writes:
            written = writes[key]
            if written is None:
                raise ConditionFailedError(key, None, None, exists=True)
            self.put(key, value)
            return
        self.put(key, value)  # NB: journals the key's checks too, before adding one
        self._present.add(key)

    def delete_range(self, start: bytes, end: bytes) -> list[bytes]:
        """Delete every live key in ``[start, end)``; returns the keys deleted."""
        keys = [kv.key for kv in self.scan(start, end)]
        for key in keys:
            self._buffer(key, None)
        return keys

    def _buffer(self, key: bytes, value: bytes | None) -> None:
        """Buffer a write of ``key``, journaling what it replaces while a savepoint is
        held."""
        writes = self._writes_map if self._bulk is None else self._writes
        if self._savepoints:
            self._journal.append(
                (
                    key,
                    writes.get(key, _UNSET),
                    key in self._absent_set,
                    key in self._present,
                )
            )
        if self._ordered is not None and key not in writes:
            bisect.insort(self._ordered, key)
        writes[key] = value

    # Savepoints.

    def savepoint(self) -> Savepoint:
        """Mark this point: :meth:`rollback_to` undoes every write made after it. Hold it
        until :meth:`release` (or the end of the transaction)."""
        self._check_open()
        self._savepoints += 1
        return Savepoint(len(self._journal), len(self._locked))

    def release(self, savepoint: Savepoint) -> None:
        """Stop holding ``savepoint``; its writes stay. Once none is held, the journal
        goes (nothing can be rolled back to any more)."""
        if self._savepoints <= 0:
            raise TransactionStatusError("release of a savepoint that is not held")
        self._savepoints -= 1
        if not self._savepoints:
            self._journal.clear()

    def rollback_to(self, savepoint: Savepoint) -> None:
        """Undo every write made since ``savepoint`` (which stays held). Raises
        :class:`TransactionStatusError` if the transaction has ended, or if an intent was
        sent since (by :meth:`put_now`): that write cannot be taken back."""
        self._check_open()
        if not self._savepoints or savepoint.writes > len(self._journal):
            raise TransactionStatusError("rollback to a savepoint that is not held")
        if len(self._locked) > savepoint.intents:
            raise TransactionStatusError(
                "cannot roll back to a savepoint past a write sent as an intent at once"
            )
        journal, writes = self._journal, self._writes
        while len(journal) > savepoint.writes:
            key, value, absent, present = journal.pop()
            if isinstance(value, _Unset):
                del writes[key]
                if self._ordered is not None:
                    del self._ordered[bisect.bisect_left(self._ordered, key)]
            else:
                writes[key] = value
            _set_member(self._absent, key, absent)
            _set_member(self._present, key, present)

    # Timestamps.

    def limit_commit(self, deadline: Timestamp) -> None:
        """Commit below ``deadline`` or not at all: a commit that would land at or past it
        raises :class:`TransactionRetryError` (``RETRY_COMMIT_DEADLINE_EXCEEDED``)."""
        self._check_open()
        if self.deadline is None or deadline < self.deadline:
            self.deadline = deadline

    def advance_to(self, ts: Timestamp) -> None:
        """Move the transaction up to ``ts`` now: refresh its reads there (raises
        :class:`TransactionRetryError` if one changed), so it commits at ``ts`` or later."""
        self._check_open()
        if not self._txn.started():
            self._txn = self._txn.started_at(ts)
        elif ts > self._txn.read_ts:
            self._refresh(max(ts, self._txn.write_ts))

    # Ending.

    def commit(self, *, restarts: int | None = None) -> Timestamp:
        """Commit; returns the commit timestamp. Raises a :class:`RetryableError` if the
        transaction must be retried (it is then rolled back). ``restarts``: the retries
        ``run_transaction`` made before this attempt, observed with the commit's count
        (in one call: see :class:`TxnMetrics`)."""
        self._check_open()
        try:
            if self._bulk is not None or self._writes_map:
                self._commit_writes()
            else:
                ts = self.commit_ts = self._txn.read_ts if self._txn.started() else None
                deadline = self.deadline
                if ts is not None and deadline is not None and ts >= deadline:
                    raise TransactionRetryError(
                        "RETRY_COMMIT_DEADLINE_EXCEEDED",
                        f"the reads at {ts} are at or past the deadline {deadline}",
                    )
                # NB: it wrote nothing, so ending it either way is the same: an abort
                # lets go of the locks it took. Its heartbeat stops first, so no beat
                # lands after the end and writes a record of its own
                self._stop_heartbeat()
                self._end_quietly()
        except BaseException:
            self._rollback_quietly()
            raise
        self._stop_heartbeat()  # NB: a one-phase commit of one that held locks beats too
        self.state = TxnState.COMMITTED
        if restarts is None:
            self._metrics.committed()
        else:
            self._metrics.committed_after(restarts)
        return self.commit_ts or self._txn.write_ts

    def rollback(self) -> None:
        """Abandon the transaction and remove its intents. Idempotent."""
        if self.state is not TxnState.OPEN:
            return
        self._rollback_quietly()

    def _rollback_quietly(self) -> None:
        self.state = TxnState.ROLLED_BACK
        self._metrics.aborted()
        self._stop_heartbeat()
        self._end_quietly()

    def _end_quietly(self) -> None:
        """Abort: remove the intents sent and let go of the locks taken, if any."""
        if not self._locked and not self._lock_reads:
            return
        spans = tuple(merge_spans(self._locked + self._lock_reads))
        if not self._txn.key:
            self._txn = self._txn.anchored_at(_first_key(spans[0]))
        # If this fails, the record expires and pushers clean up the intents (and
        # waiters break the locks: see feedkv.kv.lock_table).
        with contextlib.suppress(FeedKVError):
            self._send_key(self._txn.key, (EndTxn(False, spans),))

    def _puts(self) -> list[Put | ConditionalPut]:
        """The buffered writes as requests, with their checks."""
        # NB: first: it moves a bulk load's batch into the sets (see put_if_absent)
        writes = self._writes_map if self._bulk is None else self._writes
        absent, present = self._absent_set, self._present
        return [
            ConditionalPut(k, v, None)
            if k in absent
            else ConditionalPut(k, v, None, exists=True)
            if k in present
            else Put(k, v)
            for k, v in writes.items()
        ]

    def _commit_writes(self) -> None:
        if self._locked:  # put_now wrote intents and the record, at its anchor
            self._commit_two_phase(self._puts())
            return
        if self._bulk is not None:
            if self._commit_bulk(*self._bulk):
                return
            if len(self._bulk[0]) >= BULK_PUTS:
                self._commit_two_phase_bulk(*self._bulk)
                return
        keys = sorted(self._writes)
        if len(keys) > 1 and not self._router.ranges.get(keys[0]).contains_key(keys[-1]):
            self._commit_two_phase(self._puts(), ingest=True)
            return
        # one key goes to its range whatever the range's bounds
        span = Span(keys[0], key_next(keys[-1])) if len(keys) > 1 else None
        requests = self._one_range_requests(keys)
        if self._any_priority and not self._has_read():
            if self._commit_unread(keys[0], requests, span):
                return
        elif self._commit_one_phase(keys[0], requests, span):
            return
        self._commit_two_phase(self._puts(), ingest=True)

    def _commit_bulk(self, keys: list[bytes], values: list[bytes]) -> bool:
        """Commit a bulk load's batch, the transaction's only writes (``keys`` new and
        ascending), as one :class:`Ingest` in one command when the keys lie in one
        range; ``False`` when they do not, or the range split meanwhile (the writes are
        then committed as any others)."""
        if len(keys) < BULK_PUTS or not self._router.ranges.get(keys[0]).contains_key(keys[-1]):
            return False
        span = Span(keys[0], key_next(keys[-1]))
        requests: tuple[Request, ...] = (Ingest(span, tuple(keys), tuple(values)),)
        if self._any_priority and not self._has_read():
            return self._commit_unread(keys[0], requests, span)
        return self._commit_one_phase(keys[0], requests, span)

    def _one_range_requests(self, keys: list[bytes]) -> tuple[Request, ...]:
        """The writes of one command (``keys``, sorted, all in one range): from
        ``BULK_PUTS`` new keys on (an INSERT of many rows, a COPY), those go as one
        :class:`Ingest`, checked and written as a batch instead of a conditional put
        each; the rest as requests of their own."""
        if len(keys) < BULK_PUTS:
            return tuple(self._puts())
        writes, absent = self._writes, self._absent
        values = list(map(writes.__getitem__, keys))
        if len(absent) == len(writes) and absent.issuperset(keys) and None not in values:
            new = keys  # NB: a COPY's: every write a new key, checked in C, not key by key
        else:
            new = [k for k in keys if k in absent and writes[k] is not None]
            if len(new) < BULK_PUTS:
                return tuple(self._puts())
            values = list(map(writes.__getitem__, new))
        bulk = cast("tuple[bytes, ...]", tuple(values))  # none is None
        ingest = Ingest(Span(new[0], key_next(new[-1])), tuple(new), bulk)
        if len(new) == len(writes):
            return (ingest,)
        rest = [p for p in self._puts() if not (p.key in absent and p.value is not None)]
        return (ingest, *rest)

    def _commit_unread(self, key: bytes, requests: tuple[Request, ...], span: Span | None) -> bool:
        """Commit ``requests`` (all in ``span``, inside one range as the cache has it,
        ``key`` the first) as one batch without the transaction, as a plain write:
        nothing was read and nothing sent, so any timestamp serves, and the node picks
        one above every read of the keys, with none of a transaction's bookkeeping. Such
        a batch is never aborted (it waits for the intents it meets, pushing them with a
        random priority, as this transaction would have). ``False`` when the range split
        under it."""
        try:
            response = self._router.send_key_as(
                key,
                requests,
                deadline=self.deadline,
                lock_timeout_ms=self.lock_timeout_ms,
                span=span,
            )
        except RangeKeyMismatchError:
            return False
        self.commit_ts = response.timestamp
        return True

    def _commit_one_phase(
        self, key: bytes, requests: tuple[Request, ...], span: Span | None
    ) -> bool:
        """Commit ``requests`` (all in ``span``, inside one range as the cache has it,
        ``key`` the first) in one command; ``False`` when it should go two-phase
        instead."""
        if not self._txn.key:
            self._txn = self._txn.anchored_at(key)
        elif not self._router.ranges.get(key).contains_key(self._txn.key):
            # NB: one that took locks keeps the record it heartbeats, whose key goes with
            # the EndTxn: on another range, that is a batch across ranges (two phases,
            # as CockroachDB's record at its first locked key makes it)
            return False
        for _attempt in range(ONE_PHASE_ATTEMPTS):
            try:
                end = EndTxn(True, tuple(merge_spans(self._lock_reads)), self.deadline)
                # NB: not _send_key: the transaction ends here, so nothing in the
                # response needs adopting but its commit timestamp.
                response = self._router.send_key(key, self._header(), (*requests, end), span=span)
            except RangeKeyMismatchError:
                return False  # the range split under us: the writes now span ranges
            except TransactionRetryError as exc:
                if exc.ts is None:
                    raise
                self._refresh(exc.ts)
                continue
            self.commit_ts = self._txn.write_ts if response.txn is None else response.txn.write_ts
            return True
        # NB: a refresh plus a one-phase retry that take longer than the closed-timestamp
        # target are pushed again every time (a large INSERT on a busy node). Intents fix
        # the write timestamp once written, so two phases always finish.
        return False

    def _commit_two_phase(self, puts: list[Put | ConditionalPut], *, ingest: bool = False) -> None:
        """Write ``puts`` as intents range by range, then end the transaction.
        ``ingest``: a range's new keys (from ``BULK_PUTS`` on) go as one
        :class:`Ingest` of intents, laid down and resolved as a batch (see
        :meth:`_commit_two_phase_bulk`); not when an intent was sent before (by
        :meth:`put_now`), which that batch would meet on its own key."""
        if not self._txn.key:  # its record goes with its first write
            self._txn = self._txn.anchored_at(puts[0].key)
        try:
            remaining = puts
            while remaining:
                remaining = self._write_intents(remaining, ingest=ingest)
            self._finish_two_phase()
        finally:
            self._stop_heartbeat()

    def _write_intents(
        self, puts: list[Put | ConditionalPut], *, ingest: bool
    ) -> list[Put | ConditionalPut]:
        """Write ``puts`` as intents, range by range as the range cache divides them:
        the record's range first (the record goes in the same command as that range's
        intents: one command, and fsync, fewer before the commit; and a record is
        written before any intent, since a pusher takes an intent without one for
        orphaned), then every other range at once (on idle helper threads, see
        :mod:`feedkv.kv.helpers`). ``ingest``: see :meth:`_commit_two_phase`. Returns
        the puts to divide again (their range split or merged meanwhile)."""
        batches: dict[int, list[Put | ConditionalPut]] = {}
        descs = {}
        for put in puts:
            desc = self._router.ranges.get(put.key)
            batches.setdefault(desc.range_id, []).append(put)
            descs[desc.range_id] = desc
        if not self._recorded:
            home = next((rid for rid, d in descs.items() if d.contains_key(self._txn.key)), None)
            if home is None:
                self._start_heartbeat()  # NB: the record's range has no writes
            else:
                batch = batches.pop(home)
                keys = [p.key for p in batch]
                keys.append(self._txn.key)
                requests = (HeartbeatTxn(), *self._range_requests(batch, ingest))
                try:
                    self._send_key(
                        batch[0].key, requests, span=Span(min(keys), key_next(max(keys)))
                    )
                except RangeKeyMismatchError:
                    return puts  # the router refreshed its cache: divide again
                self._recorded = True
                self._keep_alive()
                self._lock_written(batch, ingest)
        header = self._header()
        started = []
        for index, batch in enumerate(batches.values()):
            keys = [p.key for p in batch]
            send = partial(
                self._router.send_key,
                batch[0].key,
                header,
                self._range_requests(batch, ingest),
                span=Span(min(keys), key_next(max(keys))),
            )
            # NB: the last batch (and any no helper takes) is sent from this thread
            last = index == len(batches) - 1
            started.append((batch, None if last else _INTENT_WRITERS.try_start(send), send))
        # this thread's own sends first, while the helpers send theirs
        outcomes = [(batch, _outcome(send)) for batch, helper, send in started if helper is None]
        outcomes += [
            (batch, _outcome(helper.result)) for batch, helper, _ in started if helper is not None
        ]
        again: list[Put | ConditionalPut] = []
        failure: BaseException | None = None
        for batch, (response, error) in outcomes:
            if isinstance(error, RangeKeyMismatchError):
                again.extend(batch)
            elif error is not None:
                failure = failure or error  # NB: raised once every batch is answered
            elif response is not None:
                self._adopt(response)
                self._lock_written(batch, ingest)
        if failure is not None:
            raise failure
        return again

    def _range_requests(
        self, batch: list[Put | ConditionalPut], ingest: bool
    ) -> tuple[Request, ...]:
        return self._ingest_requests(batch) if ingest else tuple(batch)

    def _lock_written(self, batch: list[Put | ConditionalPut], ingest: bool) -> None:
        if ingest and len(batch) >= BULK_PUTS:
            # NB: one span, not one per key: the range resolves the transaction's
            # intents in it as one batch, and merging 200k point spans is not free
            keys = [p.key for p in batch]
            self._locked.append(Span(min(keys), key_next(max(keys))))
        else:
            self._locked.extend(Span.for_key(p.key) for p in batch)

    def _ingest_requests(self, batch: list[Put | ConditionalPut]) -> tuple[Request, ...]:
        """One range's writes, its new keys (``BULK_PUTS`` or more) as one :class:`Ingest`
        of intents and the rest as they are."""
        new = [p for p in batch if type(p) is ConditionalPut and p.expected is None]
        new = [p for p in new if not p.exists and p.value is not None]
        if len(new) < BULK_PUTS:
            return tuple(batch)
        new.sort(key=lambda p: p.key)
        keys = tuple(p.key for p in new)
        values = cast("tuple[bytes, ...]", tuple(p.value for p in new))
        ingest = Ingest(Span(keys[0], key_next(keys[-1])), keys, values)
        if len(new) == len(batch):
            return (ingest,)
        taken = set(keys)
        return (ingest, *(p for p in batch if p.key not in taken))

    def _commit_two_phase_bulk(self, keys: list[bytes], values: list[bytes]) -> None:
        """Commit a bulk load's batch (``keys`` new and ascending, the transaction's only
        writes) that spans ranges, in two phases that pay per range, not per key: each
        range's keys go as one :class:`Ingest` of the transaction's intents (the first
        with the record), then ``EndTxn`` names one span per range, and each range
        resolves the intents in it as one batch, publishing them to its rangefeeds with
        one op (:func:`~feedkv.storage.mvcc.resolve_intents`). Atomic as any two-phase
        commit: until the record commits, every intent holds off readers at or above
        its timestamp, and an aborted transaction's intents are removed, never seen."""
        if not self._txn.key:  # its record goes with its first write
            self._txn = self._txn.anchored_at(keys[0])
        try:
            lo = 0
            while lo < len(keys):
                desc = self._router.ranges.get(keys[lo])
                hi = bisect.bisect_left(keys, desc.end, lo)
                chunk = tuple(keys[lo:hi])
                span = Span(chunk[0], key_next(chunk[-1]))
                requests: tuple[Request, ...] = (Ingest(span, chunk, tuple(values[lo:hi])),)
                sent = span
                record = not self._recorded and desc.contains_key(self._txn.key)
                if record:
                    requests = (HeartbeatTxn(), *requests)
                    txn_key = self._txn.key
                    sent = Span(min(span.start, txn_key), max(span.end, key_next(txn_key)))
                # NB: locked before it is sent, as put_now's: a send that fails may still
                # have written the intents, which the end of the transaction must remove
                self._locked.append(span)
                try:
                    self._send_key(chunk[0], requests, span=sent)
                except RangeKeyMismatchError:
                    self._locked.pop()  # nothing was written: divide again
                    continue
                if record:
                    self._recorded = True
                    self._keep_alive()
                lo = hi
            self._finish_two_phase()
        finally:
            self._stop_heartbeat()

    def _finish_two_phase(self) -> None:
        """End a transaction whose writes are all sent as intents: commit its record
        (refreshing its reads first if its write timestamp moved)."""
        self._start_heartbeat()  # NB: idempotent; the record's range had no writes
        lock_spans = tuple(merge_spans(self._locked + self._lock_reads))
        while True:
            if self._txn.write_ts != self._txn.read_ts:
                self._refresh(self._txn.write_ts)
            try:
                self._send_key(self._txn.key, (EndTxn(True, lock_spans, self.deadline),))
            except TransactionRetryError as exc:
                if exc.ts is None or exc.reason != "RETRY_PUSHED":
                    raise
                self._txn = self._txn.with_write_ts(exc.ts)
                continue
            self.commit_ts = self._txn.write_ts
            return

    def _start_heartbeat(self) -> None:
        """Write the transaction record (at ``key``) and keep it alive until the
        transaction ends. Idempotent."""
        if self._recorded:
            return
        self._send_key(self._txn.key, (HeartbeatTxn(),))
        self._recorded = True
        self._keep_alive()

    def _keep_alive(self) -> None:
        """Heartbeat the record, written now, until the transaction ends (from a thread
        of its own only if it lasts that long: see :mod:`feedkv.kv.txn_heartbeat`).
        Idempotent."""
        if self._heartbeat_thread is not None:
            return
        self._heartbeat_thread = TxnHeartbeat(_HEARTBEATS, self._heartbeat)

    def _stop_heartbeat(self) -> None:
        if self._heartbeat_thread is not None:
            self._heartbeat_thread.stop()

    def _heartbeat(self) -> bool:
        """One beat of the record; whether to go on: not once the transaction was
        aborted (or the client closed), but after a failure that may pass (its range
        moving, a node down), as a record left to expire would let a waiter take the
        locks of a transaction still alive."""
        try:
            self._router.send_key(self._txn.key, self._header(), (HeartbeatTxn(),))
        except (TransactionAbortedError, ClientClosedError):
            return False
        except (RetryableError, ExternalError):
            return True
        except FeedKVError:
            return False
        return True

    def _refresh(self, to_ts: Timestamp) -> None:
        """Move the reads from ``read_ts`` up to ``to_ts`` or raise TransactionRetryError."""
        from_ts = self._txn.read_ts
        header = Header(txn=self._txn.with_write_ts(to_ts))
        self._router.send_spans(
            merge_spans(self._reads), header, lambda p: (RefreshRange(p, from_ts),)
        )
        self._txn = self._txn.started_at(to_ts)

    # Plumbing.

    def _header(self) -> Header:
        return Header(txn=self._txn, lock_timeout_ms=self.lock_timeout_ms)

    def _send_key(
        self, key: bytes, requests: tuple[Request, ...], *, span: Span | None = None
    ) -> BatchResponse:
        response = self._router.send_key_as(
            key, requests, txn=self._txn, lock_timeout_ms=self.lock_timeout_ms, span=span
        )
        self._adopt(response)
        return response

    def _adopt(self, response: BatchResponse) -> None:
        txn = response.txn
        if txn is None:
            return
        current = self._txn
        self._txn = Transaction(
            current.id,
            current.key,
            current.epoch,
            txn.read_ts if not current.started() else current.read_ts,
            max(current.write_ts, txn.write_ts),
            current.priority,
            max(current.seq, txn.seq),
            txn.min_ts if not current.started() else current.min_ts,
        )

    def _check_open(self) -> None:
        if self.state is not TxnState.OPEN:
            raise TransactionStatusError(f"the transaction is {self.state.value}")

    def __enter__(self) -> Txn:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None and self.state is TxnState.OPEN:
            self.commit()
        else:
            self.rollback()


def _first_key(span: Span) -> bytes:
    """The first key of ``span`` that can anchor a record. NB: a scan may start at the
    empty key, which is no key: a record anchored there has no key, and the EndTxn that
    lets go of the locks needs one (they were kept forever)."""
    return span.start or key_next(span.start)


class TxnView:
    """A transaction's reads with its own writes as they were when :meth:`Txn.view` made
    it (a :class:`~feedkv.sql.catalog.Reader`). Use it from the transaction's thread,
    while the transaction is open."""

    def __init__(self, txn: Txn, writes: dict[bytes, bytes | None]) -> None:
        self._txn = txn
        self._writes = writes
        self._keys = sorted(writes)

    @property
    def sealer(self) -> HeldKey:
        return self._txn.sealer

    def get(self, key: bytes) -> bytes | None:
        self._txn._check_open()
        check_key(key)
        if key in self._writes:
            return self._writes[key]
        return self._txn._get_committed(key)

    def scan(
        self, start: bytes, end: bytes, *, limit: int | None = None, reverse: bool = False
    ) -> list[KeyValue]:
        self._txn._check_open()
        if limit is not None and limit < 0:
            raise InvalidArgumentError(f"scan limit must be >= 0, got {limit}")
        keys = self._keys[
            bisect.bisect_left(self._keys, start) : bisect.bisect_left(self._keys, end)
        ]
        own = {key: self._writes[key] for key in keys}
        return self._txn._merged(Span(start, end), own, limit, reverse)
