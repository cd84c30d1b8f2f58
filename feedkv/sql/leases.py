"""Descriptor leases: statements use a table's descriptor without reading it.

Reading the descriptor in every statement's transaction costs a round trip per statement
(an INSERT would need two instead of one). A *lease* lets a client use one version of a
table's descriptor for transactions that commit before the lease expires; a schema change
of the table first waits until no unexpired lease on the table remains, and then commits
the new version at or above the time it found none, so strictly above every commit that
used the old version. This is CockroachDB's descriptor lease in its simplest form: one
version at a time, so no schema change needs intermediate states.

Keys, in the catalog keyspace::

    F1 "lease" table id lease id -> {"version": v, "expires": wall ns}
    F1 "pend" table id           -> {"expires": wall ns}: a schema change of the table
                                    waits for its leases; no new ones until it is gone

**Acquiring** is one transaction: read the marker (present and unexpired: no lease),
read the descriptor, write a lease record expiring ``duration`` after the read. **Using**:
the statement's transaction takes the lease's expiry as its commit deadline (the node
refuses to commit at or past it, a retryable error) and holds a reference to the lease
until it ends. A lease is renewed (a new record) once half its duration is gone; a lease
that is no longer current deletes its record when its last user ends.

**Changing** a table (:func:`prepare_change`, called by the schema change inside its
transaction before it reads the rows it rewrites; its writes are buffered until commit,
so it holds no locks while it waits):

1. write the marker, so no new lease is granted;
2. drain this client's own lease on the table;
3. wait until a scan at some time ``S`` finds no record of the table expiring after ``S``
   (holders watch the markers with a rangefeed and release at once, or the lease expires);
4. move the schema change's transaction up to ``S`` (refreshing its reads), read the
   records again in it (any that is live means a race: retry); it deletes them and the
   marker along with the new version.

Every commit that used the old version landed below its lease's expiry or before its
holder deleted the record, so below ``S``. The scan in step 4 is part of the
transaction, so a lease acquired after ``S`` either sees the new version or, if it
committed first, makes the schema change's refresh fail. The marker only keeps holders
from starving a schema change; safety never depends on it (or on the watch).

Statements inside ``BEGIN`` ... ``COMMIT`` use leases too, while their transaction has
run nothing but reads and writes of rows (a schema change in it must see its own new
versions) and reads at or above the time the lease's version was read (``read_at``: a
transaction that began earlier reads the descriptor in itself, since the version it
sees may be older). The transaction holds its leases until it ends, and commits below
the earliest expiry. Before a schema change in such a transaction, its leases are given
back (its earlier statements used the version the change replaces, in the same
transaction), so the change does not wait for its own transaction's leases.

NB: a statement's timestamp is above the leased version's because a store has one node
and one clock: the version was read before the lease was granted, and every later
timestamp of that node is higher. Several nodes would need the version's modification
time as a lower bound on the transaction's timestamp.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from feedkv.errors import FeedKVError, TransactionRetryError
from feedkv.kv.txn import Txn
from feedkv.rangefeed.event import Value
from feedkv.sql import catalog
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.row_codec import CATALOG_PREFIX
from feedkv.util.encoding import decode_value, encode_value
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span, prefix_end

if TYPE_CHECKING:
    from feedkv.kv.db import KVClient
    from feedkv.rangefeed.client import RangeFeed
    from feedkv.rangefeed.feed_client import FeedClient

__all__ = ["LEASE_DURATION_S", "Lease", "Leases", "prepare_change", "withdraw_change"]

log = logging.getLogger(__name__)

LEASE_DURATION_S = 30.0
_REFUSED_RETRY_NS = 1_000_000_000  # a refused table is tried again this soon at most
_MARKER_MARGIN_NS = 10_000_000_000  # a marker outlives the leases it waits for by this

_LEASE = CATALOG_PREFIX + encode_value("lease")
_PENDING = CATALOG_PREFIX + encode_value("pend")


def _lease_prefix(table_id: int) -> bytes:
    return _LEASE + encode_value(table_id)


def _marker_key(table_id: int) -> bytes:
    return _PENDING + encode_value(table_id)


def _expires(raw: bytes) -> int:
    return int(json.loads(raw)["expires"])


@dataclass(eq=False, slots=True)
class Lease:
    """Version ``desc.version`` of a table, usable by commits below ``expires`` of
    transactions that read at or above ``read_at`` (when the version was read)."""

    desc: TableDescriptor
    expires: Timestamp
    key: bytes
    read_at: Timestamp
    refs: int = 0
    current: bool = True  # no longer current: its record goes when its last user ends


class Leases:
    """One client's descriptor leases (a :class:`feedkv.DB` has one, shared by its
    sessions). Thread-safe; a table being acquired meanwhile is read the old way."""

    def __init__(
        self, db: FeedClient, *, duration_s: float = LEASE_DURATION_S, watch: bool = True
    ) -> None:
        """``watch=False``: do not follow the markers; a schema change then waits for
        this client's leases to expire."""
        self._db = db
        self.duration_ns = int(duration_s * 1e9)
        self._lock = threading.Lock()
        self._current: dict[int, Lease] = {}
        self._acquiring: set[int] = set()
        self._refused_until: dict[int, int] = {}  # table id -> wall ns
        self._drains: dict[int, int] = {}  # table id -> times drained
        self._watch: RangeFeed | None = None
        self._watching = not watch
        self._closed = False

    def use(self, table_id: int) -> Lease | None:
        """A lease on table ``table_id`` with a reference taken (give it back with
        :meth:`release`), or ``None``: read the descriptor in the transaction instead."""
        now = time.time_ns()
        with self._lock:
            lease = self._current.get(table_id)
            if lease is not None and lease.expires.wall - now > self.duration_ns // 2:
                lease.refs += 1
                return lease
            if (
                self._closed
                or table_id in self._acquiring
                or self._refused_until.get(table_id, 0) > now
            ):
                return self._use_if_valid(lease, now)
            self._acquiring.add(table_id)
            drains = self._drains.get(table_id, 0)
        self._start_watch()
        try:
            fresh = self._acquire(table_id)
        except FeedKVError as exc:
            log.debug("no lease on table %d: %s", table_id, exc)
            fresh = None
        with self._lock:
            self._acquiring.discard(table_id)
            if isinstance(fresh, int):  # refused until then
                self._refused_until[table_id] = min(fresh, now + _REFUSED_RETRY_NS)
                fresh = None
            if fresh is None:
                return self._use_if_valid(lease, now)
            fresh.refs += 1
            if self._drains.get(table_id, 0) != drains:  # drained while it was acquired
                fresh.current = False  # its user's release deletes the record
                return fresh
            old = self._current.get(table_id)
            self._current[table_id] = fresh
            stale = old is not None and self._retire(old)
        if stale:
            assert old is not None
            self._delete_record(old)
        return fresh

    def release(self, lease: Lease) -> None:
        """Give back a reference :meth:`use` took."""
        with self._lock:
            lease.refs -= 1
            gone = not lease.current and lease.refs == 0
        if gone:
            self._delete_record(lease)

    def drain(self, table_id: int) -> None:
        """Stop using the lease on ``table_id`` (a schema change waits for it): its
        record is deleted now, or when its last user ends."""
        with self._lock:
            self._refused_until[table_id] = time.time_ns() + _REFUSED_RETRY_NS
            self._drains[table_id] = self._drains.get(table_id, 0) + 1
            lease = self._current.pop(table_id, None)
            unused = lease is not None and self._retire(lease)
        if unused:
            assert lease is not None
            self._delete_record(lease)

    def close(self) -> None:
        """Stop watching and give up every lease (best effort: a record left behind
        expires). Idempotent."""
        with self._lock:
            self._closed = True
            leases = [lease for lease in self._current.values() if self._retire(lease)]
            self._current.clear()
            watch, self._watch = self._watch, None
        if watch is not None:
            watch.close()
        for lease in leases:
            self._delete_record(lease)

    # Plumbing.

    def _use_if_valid(self, lease: Lease | None, now: int) -> Lease | None:
        """The lease while it is current and has a second to run (under the lock)."""
        if lease is None or not lease.current or lease.expires.wall - now < 1_000_000_000:
            return None
        lease.refs += 1
        return lease

    @staticmethod
    def _retire(lease: Lease) -> bool:
        """Mark ``lease`` no longer current; whether nobody uses it (under the lock)."""
        lease.current = False
        return lease.refs == 0

    def _acquire(self, table_id: int) -> Lease | int | None:
        """A new lease, the wall time until which the table is refused (a schema change
        is pending), or ``None`` (no such table)."""
        key = _lease_prefix(table_id) + encode_value(uuid.uuid4().bytes)

        def attempt(txn: Txn) -> Lease | int | None:
            marker = txn.get(_marker_key(table_id))
            read_ts = txn.read_ts
            assert read_ts is not None
            if marker is not None and _expires(marker) > read_ts.wall:
                return _expires(marker)
            desc = catalog.table_by_id(txn, table_id)
            if desc is None or desc.dropped:
                return None
            expires = Timestamp(read_ts.wall + self.duration_ns)
            record = {"version": desc.version, "expires": expires.wall}
            txn.put(key, json.dumps(record).encode())
            return Lease(desc, expires, key, read_ts)

        return self._db.run_transaction(attempt, max_attempts=5)

    def _delete_record(self, lease: Lease) -> None:
        try:
            self._db.delete(lease.key)
        except FeedKVError as exc:  # it expires anyway
            log.debug("could not delete lease record: %s", exc)

    def _start_watch(self) -> None:
        """Follow the markers, so a schema change of a leased table waits for statements
        in flight here, not for the lease to expire."""
        with self._lock:
            first = not (self._watching or self._closed)
            self._watching = True
        if not first:
            return
        feed = self._db.rangefeed(Span(_PENDING, prefix_end(_PENDING)), self._db.now())
        with self._lock:
            self._watch = feed
            closed = self._closed
        if closed:
            feed.close()
            return
        threading.Thread(
            target=self._follow, args=(feed,), name="feedkv-lease-watch", daemon=True
        ).start()

    def _follow(self, feed: RangeFeed) -> None:
        try:
            for event in feed:
                if not isinstance(event, Value):
                    continue
                table_id = int(decode_value(event.key, len(_PENDING))[0])  # type: ignore[arg-type]
                if event.value is not None:
                    self.drain(table_id)
                else:
                    with self._lock:
                        self._refused_until.pop(table_id, None)
        except FeedKVError as exc:  # leases still end by expiring
            log.warning("descriptor lease watch ended: %s", exc)


def withdraw_change(db: KVClient, table_id: int) -> None:
    """The schema change :func:`prepare_change` prepared did not commit: remove its marker
    (best effort), so the table's leases come back now rather than when it expires."""
    try:
        db.delete(_marker_key(table_id))
    except FeedKVError as exc:
        log.debug("could not remove the pending marker of table %d: %s", table_id, exc)


def prepare_change(
    db: KVClient,
    txn: Txn,
    table_id: int,
    *,
    local: Leases | None = None,
    duration_s: float = LEASE_DURATION_S,
    own: Collection[bytes] = frozenset(),
) -> list[bytes]:
    """Before ``txn`` writes a new version of table ``table_id``: wait until no lease on
    the old version remains and move ``txn`` above the last commit that used one (see
    the module docstring). Raises :class:`TransactionRetryError` on a race. Returns the
    keys ``txn`` must delete along with the new version (the marker and dead records),
    which the caller writes after its own so that the transaction keeps its anchor on
    the table's rows. ``own``: the records of leases ``txn`` itself holds, which it does
    not wait for (its statements that used the old version commit with the change)."""
    marker = _marker_key(table_id)
    expires = db.now().wall + int(duration_s * 1e9) + _MARKER_MARGIN_NS
    db.put(marker, json.dumps({"expires": expires}).encode())
    if local is not None:
        local.drain(table_id)
    prefix = _lease_prefix(table_id)
    end = prefix_end(prefix)
    delay = 0.001
    while True:
        now = db.now()
        live = [
            kv
            for kv in db.scan(prefix, end, as_of=now)
            if kv.key not in own and _expires(kv.value) > now.wall
        ]
        if not live:
            break
        if now.wall > expires:
            raise TransactionRetryError(
                "RETRY_DESCRIPTOR_LEASES", f"leases on table {table_id} outlived the wait"
            )
        time.sleep(delay)  # wait-ok: holders release on their own; nothing to wait on here
        delay = min(delay * 2, 0.1)
    txn.advance_to(now)
    read_ts = txn.read_ts
    assert read_ts is not None
    dead = txn.scan(prefix, end)
    if any(kv.key not in own and _expires(kv.value) > read_ts.wall for kv in dead):
        raise TransactionRetryError(
            "RETRY_DESCRIPTOR_LEASES", f"a lease on table {table_id} was granted meanwhile"
        )
    return [*(kv.key for kv in dead), marker]
