"""Routing requests to ranges: the client half of range addressing.

A :class:`Router` sends batches over a :class:`Transport` to the range that holds their
keys, found in its :class:`RangeCache`. A node answers a stale address (the range split,
merged, or moved) with a routing error; the router refreshes its cache from the error and
sends again, so callers never see one unless routing keeps failing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Protocol, runtime_checkable

from feedkv.errors import (
    AmbiguousResultError,
    ClientClosedError,
    InvariantViolation,
    NodeUnavailableError,
    NotLeaseHolderError,
    RangeKeyMismatchError,
    RangeNotFoundError,
    RangeRoutingError,
    RangeUnavailableError,
    RetryableError,
)
from feedkv.kv.api import (
    BatchRequest,
    BatchResponse,
    Header,
    RangeLookup,
    RangeLookupResponse,
    Request,
    Scan,
    ScanResponse,
    Transaction,
)
from feedkv.kv.cancellation import check_given_up
from feedkv.kv.range_cache import RangeCache
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.storage.mvcc import KeyValue
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span, key_next

__all__ = ["Dialer", "NodeHealth", "Redialer", "Router", "Transport"]

MAX_ROUTING_ATTEMPTS = 50
MAX_BACKOFF_S = 1.0
QUICK_RETRIES = 3  # routing errors retried at once before the router backs off


class Transport(Protocol):
    """How batches reach a node: in-process or over gRPC."""

    def send(self, batch: BatchRequest) -> BatchResponse:
        """Apply ``batch`` on the node; raises the node's error if it failed."""
        ...

    def now(self) -> Timestamp:
        """The node's clock."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Dialer(Protocol):
    """A transport to a cluster (the node it connects to answers lookups), which also
    reaches each node by id."""

    def dial(self, node_id: int) -> Transport:
        """The transport to node ``node_id``; raises :class:`NodeUnavailableError` when
        the node is unknown or cannot be reached."""
        ...


@runtime_checkable
class Redialer(Protocol):
    """A dialer that can learn a node's address anew."""

    def redial(self, node_id: int) -> bool:
        """After ``node_id`` could not be reached: whether it listens elsewhere now (it
        restarted on another address), so that dialling it again may reach it."""
        ...


@runtime_checkable
class NodeHealth(Protocol):
    """A dialer that knows which nodes are down."""

    def seen_dead(self, node_id: int) -> bool:
        """Whether ``node_id`` is known to be down (liveness heard nothing from it for
        its bound, or it could not be reached at the last try): its replicas are tried
        after the others."""
        ...


class Router:
    def __init__(self, transport: Transport, *, max_attempts: int = MAX_ROUTING_ATTEMPTS) -> None:
        """``max_attempts``: sends of a request to a range before giving up (with the
        backoff between them, 50 wait about 30 s for a range that moves or elects a
        lease holder; a caller with other work to do may wait less)."""
        self.transport = transport
        self.max_attempts = max_attempts
        self._dialer = transport if isinstance(transport, Dialer) else None
        self._health = transport if isinstance(transport, NodeHealth) else None
        self.ranges = RangeCache(self._lookup)
        self.closing = threading.Event()  # set: requests that wait to retry give up

    def _send(self, batch: BatchRequest, desc: RangeDescriptor) -> BatchResponse:
        """Send an addressed batch to the node holding ``desc``'s range (its lease, when
        the range is replicated: a replica without it names the one it believes holds
        it, or the next replica is tried, as it is after a node that no longer holds a
        replica; the cache learns where the lease was, and which nodes the range left).
        A refusal that carries a descriptor newer than ``desc`` (the replicas the range
        has now) is followed without a lookup; one naming another range (the keys
        merged into it) is raised as a :class:`RangeKeyMismatchError` carrying it."""
        dialer = self._dialer
        if dialer is None:
            return self.transport.send(batch)
        addressed = desc
        tried: list[int] = []
        answers: list[str] = []  # what each replica tried said, for the error
        live = False  # a replica tried answered (it did not hold the lease)
        left: list[int] = []  # replicas tried that the range left
        node = self._next_replica(desc, tried, desc.lease_holder)
        while True:
            try:
                response = dialer.dial(node).send(batch)
            except RangeNotFoundError as exc:
                # NB: the replica was moved off the node (or the range merged away); the
                # node tells where the keys are when it heard, else the other replicas
                # are asked now: one holds the lease, or names it
                tried.append(node)
                left.append(node)
                answers.append(f"n{node}: no replica")
                fresh = _newer(desc, exc.descriptor)
                if fresh is not None and fresh.range_id != desc.range_id:
                    raise RangeKeyMismatchError(
                        f"{desc} is not on n{node}: its keys are in {fresh}", [fresh]
                    ) from exc
                desc = self._learn(desc, fresh)
                node = self._next_replica(desc, tried, desc.lease_holder if fresh else 0)
                if not node:
                    raise
                continue
            except NotLeaseHolderError as exc:
                live = True
                tried.append(node)
                hint = f"n{exc.lease_holder}" if exc.lease_holder else "none known"
                answers.append(f"n{node}: not the lease holder (it points to {hint})")
                desc = self._learn(desc, _newer(desc, exc.descriptor))
                node = self._next_replica(desc, tried, exc.lease_holder)
                if not node:
                    if desc is addressed:
                        # NB: the cached replicas may be stale (the range gained replicas
                        # this client never heard of): look the range up afresh next time
                        self.ranges.evict(desc)
                    raise RangeUnavailableError(
                        f"no replica of {desc} holds its lease: {'; '.join(answers)}"
                    ) from exc
                continue
            except AmbiguousResultError:
                # NB: the write may have been applied, so the caller must hear of it; but
                # if the node restarted elsewhere, the next request goes there
                if isinstance(dialer, Redialer):
                    with contextlib.suppress(NodeUnavailableError):  # not this error
                        dialer.redial(node)
                raise
            except NodeUnavailableError as exc:
                if node not in tried and isinstance(dialer, Redialer) and dialer.redial(node):
                    tried.append(node)
                    continue  # it restarted on another address: try it there, once
                tried.append(node)
                # NB: why, which may be the operator's to mend (a CA the node does not trust)
                answers.append(f"n{node}: unavailable ({exc})")
                if len(desc.replicas) > 1 and (node := self._next_replica(desc, tried, 0)):
                    continue
                if live:
                    # NB: the live replicas are electing a lease holder (the last one just
                    # died): the range is unavailable for now, which the caller waits out
                    self.ranges.evict(desc)
                    raise RangeUnavailableError(
                        f"no replica of {desc} holds its lease: {'; '.join(answers)}"
                    ) from None
                self._unavailable(desc, dialer, tried)
                raise
            if node != desc.lease_holder or left or desc is not addressed:
                others = tuple(n for n in desc.replicas if n != node and n not in left)
                self.ranges.insert([replace(desc, replicas=(node, *others))])
            return response

    def _learn(self, desc: RangeDescriptor, fresh: RangeDescriptor | None) -> RangeDescriptor:
        """``fresh`` (a refusal's news of ``desc``'s range), cached in its place; else
        ``desc``."""
        if fresh is None:
            return desc
        self.ranges.insert([fresh])
        return fresh

    def _next_replica(self, desc: RangeDescriptor, tried: list[int], hint: int) -> int:
        """The replica to try next: the hinted lease holder, else one not tried (0:
        none left); one seen dead only when every other was tried (a dial to a dead
        host waits out the connect timeout)."""
        health = self._health
        if hint and hint not in tried and (health is None or not health.seen_dead(hint)):
            return hint  # NB: what the sort below puts first, without sorting every replica
        untried = [n for n in (hint, *desc.replicas) if n and n not in tried]
        if health is not None:
            untried.sort(key=health.seen_dead)  # NB: stable: the hint first among equals
        return untried[0] if untried else 0

    def _unavailable(self, desc: RangeDescriptor, dialer: Dialer, tried: list[int]) -> None:
        """``desc``'s nodes (``tried``) are unavailable. A cached address may name a node
        the range left before it died: look again (at the node this client connects to),
        and say so when the range is elsewhere now; or a node may have restarted on
        another address: then the range is sent there."""
        self.ranges.evict(desc)
        fresh = self.ranges.get(desc.start)
        if fresh.replicas != desc.replicas:
            raise RangeKeyMismatchError(
                f"node n{desc.lease_holder} is unavailable, and {desc} is now {fresh}", [fresh]
            ) from None
        moved = [n for n in tried if isinstance(dialer, Redialer) and dialer.redial(n)]
        if moved:
            raise RangeUnavailableError(
                f"{', '.join(f'n{n}' for n in moved)} moved to another address; {desc} is "
                "sent there"
            ) from None

    def _lookup(self, key: bytes) -> Sequence[RangeDescriptor]:
        response = self.transport.send(BatchRequest(Header(), (RangeLookup(key),)))
        result = response.responses[0]
        if not isinstance(result, RangeLookupResponse):
            raise RangeRoutingError(f"range lookup for {key!r} answered with {result!r}")
        return result.descriptors

    def _refresh(self, desc: RangeDescriptor, exc: RangeRoutingError) -> None:
        self.ranges.evict(desc)
        if isinstance(exc, RangeKeyMismatchError):
            self.ranges.insert(exc.descriptors)

    def _back_off(self, attempt: int) -> None:
        """Wait before resending to a range that is moving (a move takes about as long
        as streaming its data): 1 ms doubling up to 1 s, about 30 s over all the
        attempts; raises :class:`ClientClosedError` once the client is closing (a node
        that stops, its quorum gone, must not wait that long for every request), and
        the caller's error once it gave up (a statement cancelled, or past its
        statement_timeout: :func:`~feedkv.kv.cancellation.check_given_up`)."""
        check_given_up()
        if self.closing.wait(min(MAX_BACKOFF_S, 0.001 * 2 ** min(attempt, 10))):
            raise ClientClosedError("the client is closing: it no longer waits for a range")
        check_given_up()

    def _retry(self, desc: RangeDescriptor, exc: RetryableError, failures: int) -> None:
        """Before sending again: a stale address is refreshed, a moving range waited for
        (as is an address no newer than the one that failed: a node answering from the
        record of an older move)."""
        if isinstance(exc, RangeRoutingError) and not _no_news(desc, exc):
            self._refresh(desc, exc)
            if failures < QUICK_RETRIES:
                return  # the fresh address is likely right: at once
        # NB: where ranges move between nodes, the address a lookup gives may be stale
        # for a heartbeat: wait for the cluster to catch up
        self._back_off(failures)

    def send_key(
        self,
        key: bytes,
        header: Header,
        requests: tuple[Request, ...],
        *,
        span: Span | None = None,
    ) -> BatchResponse:
        """Send ``requests`` (all inside the range holding ``key``) to that range, as
        ``header`` says (its range fields are the router's to fill).

        ``span`` covers every key of the requests; when the fresh descriptors show it no
        longer fits in one range, the routing error is raised so the caller can divide
        the batch."""
        return self.send_key_as(
            key,
            requests,
            header.timestamp,
            header.txn,
            header.deadline,
            header.lock_timeout_ms,
            span=span,
        )

    def send_key_as(
        self,
        key: bytes,
        requests: tuple[Request, ...],
        timestamp: Timestamp | None = None,
        txn: Transaction | None = None,
        deadline: Timestamp | None = None,
        lock_timeout_ms: int = 0,
        *,
        span: Span | None = None,
    ) -> BatchResponse:
        """:meth:`send_key` with the header's fields (see :class:`Header`) rather than
        one: the batch's one header is the addressed one built here, as a hot path (a
        transaction's writes) sends."""
        error: RetryableError | None = None
        # NB: a store's own client (no dialer) sends to its transport directly, without
        # _send's replica walk: every embedded write takes this path
        send = self.transport.send if self._dialer is None else None
        for attempt in range(self.max_attempts):
            desc = self._get(key)
            if error is not None and span is not None and not desc.span.contains(span):
                raise error
            addressed = BatchRequest(
                Header(desc.range_id, desc.generation, timestamp, txn, deadline, lock_timeout_ms),
                requests,
            )
            try:
                return send(addressed) if send is not None else self._send(addressed, desc)
            except (RangeKeyMismatchError, RangeNotFoundError, RangeUnavailableError) as exc:
                error = exc
                self._retry(desc, exc, attempt)
        raise RangeRoutingError(
            f"gave up routing a request for {key!r} after {self.max_attempts} attempts; "
            f"the last met: {error}"
        ) from error

    def send_span(
        self,
        span: Span,
        header: Callable[[], Header],
        make: Callable[[Span], tuple[Request, ...]],
        *,
        reverse: bool = False,
    ) -> Iterator[tuple[Span, BatchResponse]]:
        """Send ``make(part)`` to each range ``span`` touches, in key order (or reverse);
        yields each part and its response. Stop iterating to stop sending.

        ``header()`` is called for each batch, so a caller can pin the timestamp the first
        response chose for the rest."""
        remaining: Span | None = span
        failures = 0
        while remaining is not None:
            parts = self.divide(remaining)
            for desc, part in reversed(parts) if reverse else parts:
                batch = BatchRequest(
                    replace(header(), range_id=desc.range_id, generation=desc.generation),
                    make(part),
                )
                try:
                    response = self._send(batch, desc)
                except (RangeKeyMismatchError, RangeNotFoundError, RangeUnavailableError) as exc:
                    failures += 1
                    if failures >= self.max_attempts:
                        raise RangeRoutingError(
                            f"gave up routing {part} after {failures} attempts; the last, to "
                            f"{desc}, met: {exc}"
                        ) from exc
                    self._retry(desc, exc, failures)
                    break
                failures = 0  # NB: the limit is per part: a long scan meets many moves
                yield part, response
                if reverse:
                    remaining = Span(span.start, part.start) if part.start > span.start else None
                else:
                    remaining = Span(part.end, span.end) if part.end < span.end else None

    def send_spans(
        self,
        spans: Iterable[Span],
        header: Header,
        make: Callable[[Span], tuple[Request, ...]],
    ) -> None:
        """Send ``make(part)`` for every range-sized part of ``spans``, all the parts of
        one range in one batch (a transaction's refresh of many point reads is one round
        trip per range, not one per read)."""
        pending = list(spans)
        failures = 0
        while pending:
            groups: dict[int, tuple[RangeDescriptor, list[Span]]] = {}
            for span in pending:
                for desc, part in self.divide(span):
                    groups.setdefault(desc.range_id, (desc, []))[1].append(part)
            pending = []
            for desc, parts in groups.values():
                batch = BatchRequest(
                    replace(header, range_id=desc.range_id, generation=desc.generation),
                    tuple(request for part in parts for request in make(part)),
                )
                try:
                    self._send(batch, desc)
                except (RangeKeyMismatchError, RangeNotFoundError, RangeUnavailableError) as exc:
                    failures += 1
                    if failures >= self.max_attempts:
                        raise
                    self._retry(desc, exc, failures)
                    pending.extend(parts)

    def scan(
        self,
        span: Span,
        header: Callable[[], Header],
        *,
        limit: int | None,
        reverse: bool,
        on_response: Callable[[BatchResponse], None],
        lock: bool = False,
        nowait: bool = False,
        skip_locked: bool = False,
    ) -> tuple[list[KeyValue], list[Span]]:
        """Scan ``span`` range by range until ``limit`` rows; returns the rows and the
        spans actually read (what a transaction must refresh). ``on_response`` sees each
        range's response first (to pin a timestamp or adopt a transaction update).
        ``lock``, ``nowait``, ``skip_locked``: a locking read (see
        :class:`~feedkv.kv.api.Scan`)."""
        rows: list[KeyValue] = []
        read: list[Span] = []
        if limit == 0:
            return rows, read
        for part, response in self.send_span(
            span,
            header,
            lambda p: (
                Scan(
                    p,
                    None if limit is None else limit - len(rows),
                    reverse,
                    lock,
                    nowait,
                    skip_locked,
                ),
            ),
            reverse=reverse,
        ):
            on_response(response)
            result = response.responses[0]
            if not isinstance(result, ScanResponse):
                raise InvariantViolation(f"a scan answered with {result!r}")
            rows.extend(result.rows)
            if result.resume_key is None:
                read.append(part)
            else:
                done = _read_before(part, result.resume_key, reverse)
                read.extend([done] if done is not None else [])
            if result.resume_key is not None or (limit is not None and len(rows) >= limit):
                break
        return rows, read

    def _get(self, key: bytes) -> RangeDescriptor:
        """The range holding ``key``, waiting while no node reports it (it is moving)."""
        retries = 0  # NB: a count, not a loop over itertools.count(), whose setup each request paid
        while True:
            try:
                return self.ranges.get(key)
            except RangeUnavailableError:
                if retries + 1 >= self.max_attempts:
                    raise
                self._back_off(retries)
                retries += 1

    def divide(self, span: Span) -> list[tuple[RangeDescriptor, Span]]:
        """The cached ranges ``span`` touches and the part of it in each, in key order."""
        parts = []
        start = span.start
        while start < span.end:
            desc = self._get(start)
            part = Span(start, min(desc.end, span.end))
            parts.append((desc, part))
            start = part.end
        return parts


def _newer(desc: RangeDescriptor, told: RangeDescriptor | None) -> RangeDescriptor | None:
    """``told``, a refusal's descriptor, when it is news to a client that addressed
    ``desc``: of a higher generation, ``desc``'s range or another its keys went to (a
    split's or merge's ranges are a generation above every range their keys were in
    before; another range of a generation no higher is an ancestor, as the parent of the
    split that made ``desc``)."""
    if told is None or told.generation <= desc.generation:
        return None
    return told


def _no_news(desc: RangeDescriptor, exc: RangeRoutingError) -> bool:
    """Whether a routing error only names ``desc``'s range at a generation no newer."""
    if not isinstance(exc, RangeKeyMismatchError) or not exc.descriptors:
        return False
    return all(
        d.range_id == desc.range_id and d.generation <= desc.generation for d in exc.descriptors
    )


def _read_before(part: Span, resume_key: bytes, reverse: bool) -> Span | None:
    """The part of ``part`` a limited scan covered before stopping at ``resume_key``."""
    if reverse:
        end = key_next(resume_key)
        return Span(end, part.end) if end < part.end else None
    return Span(part.start, resume_key) if part.start < resume_key else None
