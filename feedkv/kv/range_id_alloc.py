"""Range ids from one cluster-wide counter, as CockroachDB's ``/System/RangeIDGenerator``.

The right-hand range of a split needs an id no range of the cluster ever had. Each store
takes ids in blocks of :data:`BLOCK_SIZE` from a counter key (:data:`RANGE_IDS_KEY`),
by an ordinary serializable KV transaction that reads the counter and writes it a block
higher (:func:`take_block`): two stores never get one block, so ids are unique, though
not dense (a block a store held when it stopped is never used).

:class:`RangeIDAllocator` hands the ids of its blocks out; when fewer than
``low_water`` are left it fetches the next block on a thread of its own, so a split
waits for a KV round trip only when the ids ran out (the first split after a start, or
a burst). A split calls :meth:`RangeIDAllocator.allocate` on its caller's thread before
it is proposed or queued for the commit thread (:meth:`feedkv.kv.store.Store._attempt`),
never on the replica loop or under a lock the KV path takes: the counter's own range may
be the one splitting.

Ids before this counter: a store of a cluster used to hand ids out of its own, from
``node_id << 32`` (and the node that bootstrapped the cluster, n1, from 2, as a store in
no cluster still does). So the counter stays below ``2**32`` (:data:`MAX_RANGE_ID`;
a block past it is refused), which keeps its ids apart from every store's old big
ones; and it starts above the small ones. n1 sets it up as it starts (it fetches its
first block at once), from n1's local counter
(:func:`~feedkv.kv.range_descriptor.local_range_id_floor`). Another node that finds no
counter (n1 never set it up: it died first) sets it up itself at
:data:`UNSEEDED_FLOOR`, above any id n1 could have handed out by itself; the
transaction that reads the counter missing and writes it is serializable, so of two
nodes that set it up at once one does, and the other reads its value.

When the counter's range has no quorum, :meth:`~RangeIDAllocator.allocate` raises
:class:`~feedkv.errors.RangeUnavailableError` (retryable): the split fails, and the
store's split queue tries it again in a later round. It never falls back to a local id,
which could collide. A node fetches over a client that gives up on the range soon
(:data:`COUNTER_ROUTING_ATTEMPTS`), and after a failed fetch the allocator fails every
allocation at once for ``retry_after_s``: a split queue with many ranges to split goes
on with its other work instead of waiting out the counter's range for each.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from feedkv.errors import (
    ClientClosedError,
    FeedKVError,
    InvariantViolation,
    RangeRoutingError,
    RangeUnavailableError,
)

__all__ = [
    "BLOCK_SIZE",
    "COUNTER_ROUTING_ATTEMPTS",
    "MAX_RANGE_ID",
    "RANGE_IDS_KEY",
    "RETRY_AFTER_S",
    "UNSEEDED_FLOOR",
    "IDBlocks",
    "RangeIDAllocator",
    "take_block",
]

log = logging.getLogger(__name__)

# NB: beside the node id counter (feedkv.server.cluster), below every table's keys
RANGE_IDS_KEY = b"\x00\x00cluster/range-ids"
BLOCK_SIZE = 10
# the highest id the counter gives: the ids stores handed out themselves start at
# node_id << 32 (n1, which bootstrapped, counted from 2: the counter starts above those)
MAX_RANGE_ID = (1 << 32) - 1
# where a node other than n1 sets a missing counter up: above any small id n1 handed out
# itself (one per range it made), with 2**31 ids left below MAX_RANGE_ID
UNSEEDED_FLOOR = 1 << 31
# sends of a counter request to its range before a fetch fails: with the router's
# backoff about 2 s, the length of an election (its default, 50, waits ~30 s, and a
# transaction retried it: a range without a quorum held a split for minutes)
COUNTER_ROUTING_ATTEMPTS = 11
RETRY_AFTER_S = 5.0  # after a failed fetch, allocations fail at once for this long


class IDBlocks:
    """The ids a store holds: blocks ``[first, first + count)``, handed out in order.
    Pure: no I/O, no locks (the allocator holds its lock around every call)."""

    def __init__(self) -> None:
        self._blocks: list[tuple[int, int]] = []  # [first, end) each, in the order added
        self._highest = 0  # the highest id of any block added

    def add(self, first: int, count: int) -> None:
        """A block fetched from the counter: it lies above every earlier one (the
        counter only grows) and below :data:`MAX_RANGE_ID`."""
        end = first + count
        if count <= 0 or first <= self._highest or end - 1 > MAX_RANGE_ID:
            raise InvariantViolation(
                f"range id block [{first}, {end}) is not above the last one "
                f"(up to {self._highest}) and at most {MAX_RANGE_ID}"
            )
        self._highest = end - 1
        self._blocks.append((first, end))

    def take(self) -> int | None:
        """The next id (``None``: none is left)."""
        if not self._blocks:
            return None
        first, end = self._blocks[0]
        if first + 1 == end:
            self._blocks.pop(0)
        else:
            self._blocks[0] = (first + 1, end)
        return first

    def left(self) -> int:
        """How many ids are left."""
        return sum(end - first for first, end in self._blocks)


class Txn(Protocol):
    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes) -> Any: ...


class TxnRunner(Protocol):
    def run_transaction(self, fn: Callable[[Any], int], *, max_attempts: int | None = ...) -> int:
        """Run ``fn(txn)`` and commit, retrying on retryable errors (:class:`KVClient`)."""
        ...


class _Unreachable(FeedKVError):
    """The counter could not be read (not retried by the transaction runner)."""


def take_block(client: TxnRunner, count: int, floor: int) -> int:
    """Raise the counter by ``count`` and return the first id of the block taken (the
    counter holds the highest id handed out, in decimal). ``floor``: the first id the
    counter gives when it is not set up yet (n1's local floor; :data:`UNSEEDED_FLOOR`
    on the other nodes). Raises :class:`InvariantViolation` past
    :data:`MAX_RANGE_ID`: ids above it could meet an old store's own ids."""

    def take(txn: Txn) -> int:
        try:
            raw = txn.get(RANGE_IDS_KEY)
        except (RangeRoutingError, RangeUnavailableError) as exc:
            # NB: the router gave up on the counter's range already: a transaction
            # retried would wait as long again (retries are for conflicts between nodes)
            raise _Unreachable(f"the counter's range is unavailable: {exc}") from exc
        last = int(raw) if raw is not None else max(floor, 2) - 1
        if last + count > MAX_RANGE_ID:
            raise InvariantViolation(
                f"the cluster's range id counter is at {last}: ids above {MAX_RANGE_ID} "
                "could meet ids stores handed out themselves; no more ranges can split"
            )
        txn.put(RANGE_IDS_KEY, str(last + count).encode())
        return last + 1

    return client.run_transaction(take, max_attempts=5)


class RangeIDAllocator:
    """Hands out range ids from blocks it takes with ``take_block(count)`` (which
    returns the block's first id; it may block on a KV round trip and raise). Safe to
    call from any thread; :meth:`allocate` blocks only when no id is left."""

    def __init__(
        self,
        take_block: Callable[[int], int],
        *,
        block_size: int = BLOCK_SIZE,
        low_water: int | None = None,
        retry_after_s: float = RETRY_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``retry_after_s``: after a fetch failed, how long allocations that need one
        fail at once with its error (``clock``: seconds, monotonic)."""
        self._take_block = take_block
        self._retry_after_s = retry_after_s
        self._clock = clock
        self._failed: tuple[float, str] | None = None  # when the last fetch failed, and why
        self._block_size = block_size
        self._low_water = block_size // 2 if low_water is None else low_water
        self._blocks = IDBlocks()
        self._lock = threading.Lock()  # guards _blocks and _prefetching
        self._fetch_lock = threading.Lock()  # one fetch at a time
        self._prefetching = False
        self._closed = False

    def allocate(self) -> int:
        """A range id no other store or call gets. Raises :class:`RangeUnavailableError`
        (retryable) when the counter cannot be reached."""
        while True:
            with self._lock:
                got = self._blocks.take()
                if got is not None:
                    self._maybe_prefetch()
                    return got
            self._fetch(ahead=False)

    def prefetch(self) -> None:
        """Fetch a block now on the allocator's thread, if few ids are left (a node
        calls this as it starts)."""
        with self._lock:
            self._maybe_prefetch()

    def close(self) -> None:
        """No more prefetching (a fetch under way finishes or fails on its own)."""
        with self._lock:
            self._closed = True

    def _maybe_prefetch(self) -> None:
        # NB: under _lock
        if self._closed or self._prefetching or self._blocks.left() > self._low_water:
            return
        self._prefetching = True
        threading.Thread(target=self._prefetch, name="feedkv-range-ids", daemon=True).start()

    def _prefetch(self) -> None:
        try:
            self._fetch(ahead=True)
        except ClientClosedError:
            pass  # the node stops
        except FeedKVError as exc:
            log.info("could not fetch range ids ahead (a split fetches them): %s", exc)
        finally:
            with self._lock:
                self._prefetching = False

    def _fetch(self, *, ahead: bool) -> None:
        """Take one block, unless another fetch left enough ids meanwhile."""
        with self._fetch_lock:
            with self._lock:
                left = self._blocks.left()
            if left > (self._low_water if ahead else 0):
                return
            failed = self._failed
            if failed is not None and self._clock() - failed[0] < self._retry_after_s:
                raise RangeUnavailableError(
                    f"{failed[1]} (the counter is tried again {self._retry_after_s:g} s "
                    "after a failure; the split is retried later)"
                )
            try:
                first = self._take_block(self._block_size)
            except (ClientClosedError, InvariantViolation):
                raise
            except RangeUnavailableError as exc:
                self._failed = (self._clock(), str(exc))
                raise
            except FeedKVError as exc:
                why = f"cannot take range ids from the cluster's counter: {exc}"
                self._failed = (self._clock(), why)
                raise RangeUnavailableError(why) from exc
            self._failed = None
            with self._lock:
                self._blocks.add(first, self._block_size)
