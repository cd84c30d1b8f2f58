"""The KV client: what :class:`feedkv.DB` offers for keys, ranges and transactions.

A :class:`KVClient` talks to a node through a transport: :class:`LocalTransport` for an
embedded node, :class:`~feedkv.kv.grpc_transport.GrpcTransport` for a server. Every call
is safe to make from many threads at once.

Single-key calls (``put``, ``get``, ``delete``) each run as one command of one range.
``scan`` reads every range it crosses at one timestamp. ``transaction()`` and
``run_transaction(fn)`` give serializable transactions (see :mod:`feedkv.kv.txn`).
"""

from __future__ import annotations

import bisect
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self, TypeVar

from feedkv.errors import (
    AmbiguousResultError,
    ClientClosedError,
    ConditionFailedError,
    InvalidArgumentError,
    InvariantViolation,
    RangeKeyMismatchError,
    RangeRoutingError,
    RetryableError,
)
from feedkv.kv.api import (
    BatchRequest,
    BatchResponse,
    ConditionalPut,
    Export,
    ExportPosition,
    ExportResponse,
    Get,
    GetResponse,
    Header,
    Ingest,
    Merge,
    MergeResponse,
    Put,
    RangeLookup,
    RangeLookupResponse,
    Relocate,
    RelocateResponse,
    Split,
    SplitResponse,
)
from feedkv.kv.metrics import unregistered_txn_metrics
from feedkv.kv.node_status import NodeInfo, NodeSource, node_of_its_own
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.kv.router import MAX_ROUTING_ATTEMPTS, Router, Transport
from feedkv.kv.txn import Txn
from feedkv.storage.export import ExportedVersion
from feedkv.storage.mvcc import KeyValue, check_value
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import KEY_MIN, Span, check_key, key_next

if TYPE_CHECKING:
    from feedkv.kv.store import Store
    from feedkv.security.secrets import HeldKey

__all__ = ["KVClient", "LocalTransport", "RangeInfo"]

T = TypeVar("T")

EXPORT_PAGE_SIZE = 5000
FIRST_BYTES_PAGE = 64  # an export bounded by bytes: its first page, before sizes are known
INGEST_BATCH = 10_000  # pairs a command of :meth:`KVClient.ingest` writes at most
SPLIT_ATTEMPTS = 3  # asks of a split whose outcome was lost (see KVClient.split)
_NO_HEADER = Header()  # a plain write's: the router addresses it, the node stamps it


@dataclass(frozen=True, slots=True)
class RangeInfo:
    """A range as ``db.ranges()`` reports it (``sticky``: it starts at a manual split,
    which the store's automatic merges leave alone; ``replicas``: the ids of the nodes
    holding it, its leaseholder first; ``closed_ts``: zero when it is on another node
    than the one asked)."""

    range_id: int
    span: Span
    generation: int
    closed_ts: Timestamp
    sticky: bool
    replicas: tuple[int, ...] = (1,)

    @property
    def lease_holder(self) -> int:
        return self.replicas[0]


class LocalTransport:
    """Batches straight into a store in this process (an embedded node)."""

    def __init__(self, store: Store, *, owned: bool) -> None:
        self.store = store
        self._owned = owned

    def send(self, batch: BatchRequest) -> BatchResponse:
        return self.store.send(batch)

    def now(self) -> Timestamp:
        return self.store.clock.now()

    def nodes(self) -> list[NodeInfo]:
        """A node of its own: node 1, live, holding every range."""
        store = self.store
        return [
            node_of_its_own(store.node_id, len(store.descriptors()), store.clock.physical_now())
        ]

    def gateway_node(self) -> int:
        """The store's node (1 for a node of its own)."""
        return self.store.node_id

    def close(self) -> None:
        if self._owned:
            self.store.close()


class KVClient:
    """The KV API over a transport (:class:`feedkv.DB` adds feeds on top)."""

    def __init__(
        self,
        transport: Transport,
        *,
        target: str = "",
        routing_attempts: int = MAX_ROUTING_ATTEMPTS,
    ) -> None:
        """``routing_attempts``: sends of a request to its range before it fails (see
        :class:`~feedkv.kv.router.Router`)."""
        self.target = target
        self._transport = transport
        self._router = Router(transport, max_attempts=routing_attempts)
        # the node's, for an embedded node's client (a client of a server counts its
        # transactions but exposes them nowhere)
        self.txn_metrics = unregistered_txn_metrics()
        # what seals changefeed jobs' secrets (feedkv.security.secrets): the key in the
        # certs directory of a secure node or client; None: an insecure one's, the store's
        self.sealer: HeldKey = None

    @property
    def transport(self) -> Transport:
        return self._transport

    # Single keys.

    def put(self, key: bytes, value: bytes) -> Timestamp:
        """Write ``value`` at ``key``; returns the commit timestamp."""
        if type(value) is not bytes:
            raise InvalidArgumentError(f"values are bytes, not {type(value).__name__}")
        check_value(value)  # the size limit, before the value crosses the wire
        check_key(key)
        return self._router.send_key(key, _NO_HEADER, (Put(key, value),)).timestamp

    def delete(self, key: bytes) -> Timestamp:
        """Delete ``key`` (a tombstone); returns the commit timestamp."""
        return self._write(key, None)

    def _write(self, key: bytes, value: bytes | None) -> Timestamp:
        check_key(key)
        return self._router.send_key(key, _NO_HEADER, (Put(key, value),)).timestamp

    def ingest(
        self,
        pairs: Sequence[tuple[bytes, bytes]],
        ts: Timestamp,
        *,
        batch: int = INGEST_BATCH,
        written: Callable[[int], None] | None = None,
    ) -> Timestamp:
        """Write ``pairs`` (keys ascending, each once) as committed values at ``ts``: a
        bulk load's writes, with no transaction, no intents and no record
        (:meth:`ingest_columns` of the pairs' keys and values)."""
        if not pairs:
            return ts
        keys, values = zip(*pairs, strict=True)
        return self.ingest_columns(keys, values, ts, batch=batch, written=written)

    def ingest_columns(
        self,
        keys: Sequence[bytes],
        values: Sequence[bytes],
        ts: Timestamp,
        *,
        batch: int = INGEST_BATCH,
        written: Callable[[int], None] | None = None,
    ) -> Timestamp:
        """Write ``values[i]`` at ``keys[i]`` (keys ascending, each once) as committed
        values at ``ts``: a bulk load's writes, with no transaction, no intents and no
        record. Each range's keys go in :class:`~feedkv.kv.api.Ingest` commands of up to
        ``batch``; a range that closed ``ts`` or served a read at it moves its command
        above (then it and the commands after it land above ``ts``). Every key must hold
        no value: :class:`ConditionFailedError` names the first that does. Each command
        is atomic, the whole is not: after each, ``written(n)`` says that the first
        ``n`` keys are written (a caller that fails deletes those). Returns the highest
        timestamp written."""
        highest = ts
        header = Header(timestamp=ts)
        i = 0
        while i < len(keys):
            desc = self._router.ranges.get(keys[i])
            stop = min(len(keys), i + batch)
            if not desc.contains_key(keys[stop - 1]):
                stop = bisect.bisect_left(keys, desc.span.end, i, stop)
            chunk = tuple(keys[i:stop])
            span = Span(chunk[0], key_next(chunk[-1]))
            request = Ingest(span, chunk, tuple(values[i:stop]))
            try:
                response = self._router.send_key(chunk[0], header, (request,), span=span)
            except RangeKeyMismatchError:
                continue  # the range split: the router refreshed its cache, divide again
            if response.timestamp > highest:
                # NB: the next commands start where this one landed: the range closed
                # ``ts`` meanwhile, and each would otherwise be refused there and run again
                highest = response.timestamp
                header = Header(timestamp=highest)
            i = stop
            if written is not None:
                written(i)
        return highest

    def increment(self, key: bytes, delta: int, *, initial: int = 0) -> int:
        """Add ``delta`` to the integer at ``key`` (``initial`` when the key is absent)
        and return the sum, atomically and outside any transaction (never rolled back).
        Each try is one conditional put on the value read: a concurrent increment makes
        it fail, and the next try starts from the value that one found. The value is
        the integer's decimal text."""
        check_key(key)
        current = self.get(key)
        while True:
            try:
                old = int(current) if current is not None else initial
            except ValueError:
                raise InvalidArgumentError(
                    f"cannot increment {key!r}: it holds {(current or b'')[:20]!r}, not an integer"
                ) from None
            new = old + delta
            request = ConditionalPut(key, str(new).encode(), current)
            try:
                self._router.send_key(key, _NO_HEADER, (request,))
            except ConditionFailedError as exc:
                current = exc.actual
                continue
            return new

    def get(self, key: bytes, *, as_of: Timestamp | None = None) -> bytes | None:
        """The value at ``key`` now, or as of ``as_of``; ``None`` if absent."""
        check_key(key)
        response = self._router.send_key(key, Header(timestamp=as_of), (Get(key),))
        result = response.responses[0]
        return result.value if isinstance(result, GetResponse) else None

    def scan(
        self,
        start: bytes,
        end: bytes,
        *,
        as_of: Timestamp | None = None,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[KeyValue]:
        """Live keys in ``[start, end)`` at one timestamp (now, or ``as_of``), in key order
        (descending with ``reverse``), at most ``limit`` of them."""
        if limit is not None and limit < 0:
            raise InvalidArgumentError(f"scan limit must be >= 0, got {limit}")
        pinned: list[Timestamp | None] = [as_of]

        def pin(response: BatchResponse) -> None:
            pinned[0] = response.timestamp  # every range reads at the first one's timestamp

        rows, _read = self._router.scan(
            Span(start, end),
            lambda: Header(timestamp=pinned[0]),
            limit=limit,
            reverse=reverse,
            on_response=pin,
        )
        return rows

    def export(
        self,
        span: Span | tuple[bytes, bytes],
        lo: Timestamp,
        hi: Timestamp,
        *,
        with_diff: bool = False,
        page_size: int = EXPORT_PAGE_SIZE,
        page_bytes: int | None = None,
    ) -> Iterator[ExportedVersion]:
        """Every committed version in ``span`` with a timestamp in ``(lo, hi]`` (an
        incremental export), range by range; within a range ordered by (timestamp, key),
        so each key's versions come oldest first. The answer is final: intents that
        could still commit in the window are pushed above ``hi`` first. ``with_diff``
        adds each version's previous value. Fetched ``page_size`` versions at a time,
        and with ``page_bytes`` about that many bytes at a time at most (a caller that
        must bound what it holds: a page's versions are learnt from the last page's
        sizes, the first page being :data:`FIRST_BYTES_PAGE` versions at most).
        ``span`` is a :class:`Span` or a ``(start, end)`` pair of bytes."""
        span = Span.of(span)
        if hi < lo:
            raise InvalidArgumentError(f"export window ({lo}, {hi}] is inverted")
        if page_size <= 0:
            raise InvalidArgumentError(f"export page size must be > 0, got {page_size}")
        if page_bytes is not None and page_bytes <= 0:
            raise InvalidArgumentError(f"export page bytes must be > 0, got {page_bytes}")
        limit = page_size if page_bytes is None else min(page_size, FIRST_BYTES_PAGE)
        # Pieces still to read, each with where its (timestamp, key) order resumes; a
        # resume point stays valid for any part of its piece, so a split range between
        # pages only divides the piece.
        todo: list[tuple[Span, ExportPosition | None]] = [(span, None)]
        header = Header(timestamp=hi)
        while todo:
            piece, resume = todo.pop()
            part = self._router.divide(piece)[0][1]
            try:
                response = self._router.send_key(
                    part.start,
                    header,
                    (Export(part, lo, hi, with_diff, limit, resume),),
                    span=part,
                )
            except RangeRoutingError:
                todo.append((piece, resume))  # the cache is fresh now: divide again
                continue
            result = response.responses[0]
            if not isinstance(result, ExportResponse):
                raise InvariantViolation(f"an export answered with {result!r}")
            if part.end < piece.end:
                todo.append((Span(part.end, piece.end), resume))
            if result.resume is not None:
                todo.append((part, result.resume))
            if page_bytes is not None and result.versions:
                size = sum(_version_bytes(v) for v in result.versions)
                learnt = len(result.versions) * page_bytes // max(1, size)
                limit = max(1, min(page_size, learnt))
            yield from result.versions

    # Transactions.

    def transaction(self, *, priority: int | None = None) -> Txn:
        """A new transaction; as a context manager it commits on success and rolls back
        on an exception."""
        return Txn(self._router, priority=priority, metrics=self.txn_metrics, sealer=self.sealer)

    def run_transaction(
        self,
        fn: Callable[[Txn], T],
        *,
        max_attempts: int | None = None,
        max_backoff_s: float = 1.0,
        priority: int | None = None,
    ) -> T:
        """Run ``fn(txn)`` and commit, retrying on retryable errors with jittered
        exponential backoff; returns what ``fn`` returned. ``fn`` may run several times,
        so it should have no effects outside the transaction. ``priority``: the first
        attempt's (default: drawn at random)."""
        attempt = 0
        while True:
            attempt += 1
            txn = self.transaction(priority=priority)
            try:
                result = fn(txn)
                txn.commit(restarts=attempt - 1)
                return result
            except RetryableError as exc:
                txn.rollback()
                if max_attempts is not None and attempt >= max_attempts:
                    self.txn_metrics.restarts.observe(attempt - 1)
                    raise
                # A retried txn keeps its priority so that it eventually wins its conflicts.
                priority = max(priority or 0, txn.priority)
                delay = min(max_backoff_s, 0.001 * 2 ** min(attempt, 20))
                if self._router.closing.wait(random.uniform(0, delay)):
                    raise ClientClosedError("the client is closing: no more retries") from exc
            except BaseException:
                txn.rollback()
                raise

    # Ranges and time.

    def now(self) -> Timestamp:
        """The node's current time: a timestamp above every committed write."""
        return self._transport.now()

    def split(self, key: bytes) -> tuple[RangeDescriptor, RangeDescriptor]:
        """Split the range holding ``key`` so a range starts at ``key``. A split whose
        outcome was lost (its range's lease moved with it in flight) is asked again: a
        split at a range's start answers the split that made it."""
        check_key(key)
        for attempt in range(SPLIT_ATTEMPTS):
            try:
                response = self._router.send_key(key, Header(), (Split(key),))
                break
            except AmbiguousResultError:
                if attempt == SPLIT_ATTEMPTS - 1:
                    raise
        result = response.responses[0]
        if not isinstance(result, SplitResponse):
            raise InvalidArgumentError(f"split answered with {result!r}")
        self._router.ranges.insert((result.left, result.right))
        return result.left, result.right

    def merge(self, key: bytes) -> RangeDescriptor:
        """Merge the range holding ``key`` with the range to its right."""
        response = self._router.send_key(key, Header(), (Merge(key),))
        result = response.responses[0]
        if not isinstance(result, MergeResponse):
            raise InvalidArgumentError(f"merge answered with {result!r}")
        self._router.ranges.insert((result.merged,))
        return result.merged

    def relocate(self, key: bytes, node_id: int) -> RangeDescriptor:
        """Move the range holding ``key`` to node ``node_id``; returns its descriptor
        there. Requests to the range wait while it moves (about as long as streaming its
        data); feeds on it end on the old node and go on from the new one."""
        check_key(key)
        response = self._router.send_key(key, Header(), (Relocate(key, node_id),))
        result = response.responses[0]
        if not isinstance(result, RelocateResponse):
            raise InvalidArgumentError(f"relocate answered with {result!r}")
        self._router.ranges.insert((result.moved,))
        return result.moved

    def ranges(self) -> list[RangeInfo]:
        """Every range, in key order, with its closed timestamp."""
        response = self._transport.send(
            BatchRequest(Header(), (RangeLookup(KEY_MIN, prefetch=1 << 30),))
        )
        result = response.responses[0]
        if not isinstance(result, RangeLookupResponse):
            raise InvalidArgumentError(f"range lookup answered with {result!r}")
        return [
            RangeInfo(d.range_id, d.span, d.generation, ts, d.sticky, d.replicas)
            for d, ts in zip(result.descriptors, result.closed_timestamps, strict=True)
        ]

    def nodes(self) -> list[NodeInfo]:
        """The nodes of the cluster, as the node this client connects to sees them:
        address, epoch, liveness, ranges held, clock offset (see
        :mod:`feedkv.kv.node_status`)."""
        if not isinstance(self._transport, NodeSource):
            raise InvalidArgumentError(
                f"this client's transport ({type(self._transport).__name__}) cannot list "
                "nodes; connect with feedkv.connect()"
            )
        return self._transport.nodes()

    def gateway_node(self) -> int:
        """The id of the node this client's requests enter the cluster through
        (``crdb_internal.node_id()``)."""
        if not isinstance(self._transport, NodeSource):
            raise InvalidArgumentError(
                f"this client's transport ({type(self._transport).__name__}) knows no "
                "node; connect with feedkv.connect()"
            )
        return self._transport.gateway_node()

    @property
    def closing(self) -> threading.Event:
        """Set (by :meth:`close`, or by an owner stopping): requests that wait to retry
        give up with :class:`~feedkv.errors.ClientClosedError`."""
        return self._router.closing

    def close(self) -> None:
        self._router.closing.set()
        self._transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _version_bytes(version: ExportedVersion) -> int:
    """About what an exported version weighs: its key and values."""
    return len(version.key) + len(version.value or b"") + len(version.prev_value or b"") + 32
