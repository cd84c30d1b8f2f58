"""The feed client: the KV client's calls plus change feeds, as the layers above use them.

:class:`FeedClient` is the surface SQL (its descriptor leases and catalog reads), the
changefeed core, the Spark runner and :mod:`feedkv.testing` are written against:
:class:`KV`, the calls of :class:`~feedkv.kv.db.KVClient` (keys, scans, incremental
export, transactions, ranges), plus :meth:`FeedClient.rangefeed`. :class:`feedkv.DB`
is one (it adds SQL and changefeed jobs); so is :class:`KVFeedClient`, the plain
client a process that only reads and follows a node opens with :func:`open_client`
(a Spark worker does: :mod:`feedkv.spark.rows`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from feedkv.errors import ClientClosedError
from feedkv.kv.address import parse_node_urls
from feedkv.kv.db import EXPORT_PAGE_SIZE, KVClient, RangeInfo
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.kv.router import Transport
from feedkv.kv.txn import Txn
from feedkv.rangefeed.client import FeedTransport, RangeFeed
from feedkv.rangefeed.event import Value
from feedkv.storage.export import ExportedVersion
from feedkv.storage.mvcc import KeyValue
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span, check_key

if TYPE_CHECKING:
    from feedkv.kv.grpc_transport import GrpcTransport
    from feedkv.security.secrets import HeldKey

__all__ = ["KV", "FeedClient", "KVFeedClient", "SpanLike", "feed_spans", "open_client"]

T = TypeVar("T")
SpanLike = Span | tuple[bytes, bytes]  # a span, or its (start, end) as a pair of bytes


class KV(Protocol):
    """The calls of :class:`~feedkv.kv.db.KVClient` (see it for their contracts)."""

    sealer: HeldKey

    def now(self) -> Timestamp: ...

    def get(self, key: bytes, *, as_of: Timestamp | None = None) -> bytes | None: ...

    def put(self, key: bytes, value: bytes) -> Timestamp: ...

    def delete(self, key: bytes) -> Timestamp: ...

    def scan(
        self,
        start: bytes,
        end: bytes,
        *,
        as_of: Timestamp | None = None,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[KeyValue]: ...

    def export(
        self,
        span: Span,
        lo: Timestamp,  # exclusive
        hi: Timestamp,
        *,
        with_diff: bool = False,
        page_size: int = EXPORT_PAGE_SIZE,
        page_bytes: int | None = None,
    ) -> Iterator[ExportedVersion]: ...

    def transaction(self, *, priority: int | None = None) -> Txn: ...

    def run_transaction(
        self,
        fn: Callable[[Txn], T],
        *,
        max_attempts: int | None = None,
        max_backoff_s: float = 1.0,
        priority: int | None = None,
    ) -> T: ...

    def split(self, key: bytes) -> tuple[RangeDescriptor, RangeDescriptor]: ...

    def merge(self, key: bytes) -> RangeDescriptor: ...

    def ranges(self) -> list[RangeInfo]: ...

    def close(self) -> None: ...


class FeedClient(KV, Protocol):
    """:class:`KV` plus change feeds."""

    def rangefeed(
        self,
        spans: SpanLike | Iterable[SpanLike],
        since: Timestamp,  # exclusive
        *,
        with_diff: bool = False,
        values: bool = True,
        timestamp_order: bool = False,
    ) -> RangeFeed:
        """Every change in ``spans`` after ``since``, with checkpoints (see
        :meth:`KVFeedClient.rangefeed`)."""
        ...


class KVFeedClient(KVClient):
    """A :class:`~feedkv.kv.db.KVClient` with change feeds, registered through
    ``feeds``. :meth:`close` ends the feeds it opened, then ``feeds`` if it
    ``owns_feeds`` (an embedded node's feeds stop with the node), then the transport."""

    def __init__(
        self,
        transport: Transport,
        feeds: FeedTransport,
        *,
        target: str = "",
        owns_feeds: bool = True,
    ) -> None:
        super().__init__(transport, target=target)
        self._feeds = feeds
        self._owns_feeds = owns_feeds
        self._open_feeds: weakref.WeakSet[RangeFeed] = weakref.WeakSet()
        self._feeds_lock = threading.Lock()
        self._closed = False

    def rangefeed(
        self,
        spans: SpanLike | Iterable[SpanLike],
        since: Timestamp,
        *,
        with_diff: bool = False,
        values: bool = True,
        timestamp_order: bool = False,
    ) -> RangeFeed:
        """Every change in ``spans`` after ``since`` (exclusive), with checkpoints; see
        :mod:`feedkv.rangefeed.client`. Iterate it (or ``async for``); ``close()`` ends it.

        Each key's values come in timestamp order. The history before the first
        checkpoint (the catch-up scan) comes in timestamp order across keys too with
        ``timestamp_order``; without, a range that holds fewer versions than the store
        changed since ``since`` sends its history by key, which costs what the range
        holds instead of the whole store's changes. ``with_diff`` adds each value's
        previous value. ``values=False`` gives a
        checkpoint-only feed, for following the resolved timestamp: the same checkpoints,
        no values, and the nodes skip the catch-up scan and the per-write fan-out for it.
        It cannot be combined with ``with_diff`` (:class:`~feedkv.errors.InvalidArgumentError`).
        ``spans`` may be :class:`Span` s or ``(start, end)`` pairs of bytes; after
        :meth:`close`, :class:`~feedkv.errors.ClientClosedError`.
        """
        self._check_open()
        return self._track(
            RangeFeed(
                self._feeds,
                self._router,
                feed_spans(spans),
                since,
                with_diff=with_diff,
                values=values,
                timestamp_order=timestamp_order,
            )
        )

    def watch(
        self, key: bytes, *, prefix: bool = False, since: Timestamp | None = None
    ) -> RangeFeed:
        """etcd-style: every change of ``key`` (or of every key under it, with ``prefix``)
        as :class:`~feedkv.rangefeed.event.Value` events, history in timestamp order as
        etcd replays revisions. With no ``since``, first the current value(s), then every
        change after them."""
        self._check_open()
        check_key(key)
        span = Span.for_prefix(key) if prefix else Span.for_key(key)
        initial: list[Value] = []
        if since is None:
            since = self.now()
            initial = [
                Value(kv.key, kv.value, kv.ts)
                for kv in self.scan(span.start, span.end, as_of=since)
            ]
        return self._track(
            RangeFeed(
                self._feeds,
                self._router,
                [span],
                since,
                values_only=True,
                timestamp_order=True,
                initial=initial,
            )
        )

    def close(self) -> None:
        """Close the open feeds, then the feed transport (if owned) and the connection.
        Idempotent."""
        with self._feeds_lock:
            self._closed = True
            feeds = list(self._open_feeds)
        for feed in feeds:
            feed.close()
        if self._owns_feeds:
            self._feeds.close()
        super().close()

    def _track(self, feed: RangeFeed) -> RangeFeed:
        with self._feeds_lock:
            if self._closed:
                feed.close()
                raise self._closed_error()
            self._open_feeds.add(feed)
        return feed

    def _check_open(self) -> None:
        if self._closed:
            raise self._closed_error()

    def _closed_error(self) -> ClientClosedError:
        return ClientClosedError(
            f"cannot open a feed: the client of {self.target or 'this store'} is closed"
        )


def feed_spans(
    spans: Span | tuple[bytes, bytes] | Iterable[Span | tuple[bytes, bytes]],
) -> list[Span]:
    """``spans`` as a list of :class:`Span`: one span or many, each a ``Span`` or a
    ``(start, end)`` pair of bytes. TypeError names anything else, at the call."""
    if isinstance(spans, Span) or _is_pair(spans):
        spans = [spans]  # type: ignore[list-item]
    if isinstance(spans, str | bytes) or not isinstance(spans, Iterable):
        raise TypeError(
            f"spans must be a Span, a (start, end) pair of bytes or a list of them, not "
            f"{type(spans).__name__}"
        )
    out = []
    for span in spans:
        if isinstance(span, Span):
            out.append(span)
        elif _is_pair(span):
            out.append(Span(*span))
        else:
            raise TypeError(
                f"a span must be a Span or a (start, end) pair of bytes, not {span!r:.60}"
            )
    return out


def _is_pair(value: object) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and all(isinstance(part, bytes) for part in value)
    )


def open_client(url: str, *, password: str | None = None) -> KVFeedClient:
    """A client of the cluster of the node at ``feedkv://host:port`` (over gRPC; with TLS
    when the URL names a ``certs_dir``, logged in with ``password`` when given)."""
    transport, feeds = remote_transports(url, password=password)
    return KVFeedClient(transport, feeds, target=url)


def remote_transports(
    url: str,
    certs_dir: str | Path | None = None,
    user: str | None = None,
    *,
    password: str | None = None,
) -> tuple[Transport, FeedTransport]:
    """The batch and feed transports of a client of the cluster of the node at ``url``:
    that node answers lookups, and each request and feed goes to the node holding its
    range (one connection per node, opened on first use). With ``password``, the client
    logs in now (a wrong one raises :class:`~feedkv.errors.PermissionDeniedError`)."""
    # NB: imported here: a process that never dials a node does not import gRPC
    from feedkv.kv.dialer import ClusterDialer, RemoteNodes, call
    from feedkv.kv.gateway import Gateway
    from feedkv.kv.grpc_transport import url_tls
    from feedkv.rangefeed.cluster_feeds import ClusterFeedTransport
    from feedkv.rangefeed.grpc_transport import GrpcFeedTransport
    from feedkv.security.tls import call_metadata

    tls = url_tls(url, certs_dir, user, password)
    gateway = Gateway(parse_node_urls(url), tls=tls, label=url.partition("?")[0])
    if tls is not None and password is not None:
        try:
            call_metadata(gateway.transport.channel)  # logs in
        except BaseException:
            gateway.close()
            raise
    nodes = RemoteNodes(
        lambda method, message: gateway.call(lambda t: call(t.channel, method, message))
    )
    transport = ClusterDialer(
        gateway,
        gateway_node=nodes.gateway_node,
        addresses=nodes.address,
        nodes=nodes.status,
        relearn=nodes.relearn,
        tls=tls,
    )
    gateway_feeds = GrpcFeedTransport(gateway.transport.channel, gateway.address, tls=tls)
    feeds = ClusterFeedTransport(
        gateway_feeds,
        gateway_node=nodes.gateway_node,
        addresses=nodes.address,
        relearn=nodes.relearn,
        tls=tls,
    )

    def moved(old: GrpcTransport, new: GrpcTransport) -> None:
        """The gateway moved to ``new``: the old node is one like the others now."""
        old_node = nodes.forget_gateway()
        gateway_feeds.reconnect(new.channel, new.address)
        if old_node:
            transport.adopt(old_node, old)
        else:
            old.close()

    gateway.on_move = moved
    return transport, feeds
