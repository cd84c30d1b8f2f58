"""Feeds across the nodes of a cluster: each piece registered where its range lives.

A :class:`ClusterFeedTransport` is the :class:`~feedkv.rangefeed.client.FeedTransport`
of a client of a cluster. The multi-range client (:class:`~feedkv.rangefeed.client.RangeFeed`)
divides its spans on range boundaries and registers each piece with the node its range's
descriptor names (``node_id``); this transport sends the gateway node's pieces through
the gateway's transport and keeps one stream of feeds per other node for theirs. Events of
every node arrive in the feed's one stream.

When a range moves, its old node ends the piece's registration (``REPLICA_REMOVED``,
after the last checkpoint it closed); the client looks the range up again and registers
the piece with the new node from that checkpoint, so nothing is skipped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import grpc

from feedkv.errors import InvalidArgumentError, NodeUnavailableError
from feedkv.kv.wire import MAX_MESSAGE_BYTES
from feedkv.rangefeed.client import FeedTransport
from feedkv.rangefeed.grpc_transport import GrpcFeedTransport
from feedkv.rangefeed.stream import EventStream
from feedkv.security.tls import ClientTLS, open_channel
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["ClusterFeedTransport"]


@dataclass(frozen=True, slots=True)
class _Handle:
    transport: FeedTransport
    inner: object


class ClusterFeedTransport:
    def __init__(
        self,
        gateway: FeedTransport,
        *,
        gateway_node: Callable[[], int],
        addresses: Callable[[int], str | None],
        relearn: Callable[[int], str | None] | None = None,
        owns_gateway: bool = True,
        tls: ClientTLS | None = None,
    ) -> None:
        """``gateway_node()``: the gateway's node id; ``addresses(node_id)``: where a node
        listens (``None``: not known); ``relearn(node_id)``: where it listens, asked
        anew, once the stream to it broke (it may have restarted elsewhere; by default
        ``addresses``). ``owns_gateway``: :meth:`close` closes it too. ``tls``: the
        identity other nodes are called as (``None``: plaintext)."""
        self._tls = tls
        self._relearn = relearn or addresses
        self.gateway = gateway
        self._gateway_node = gateway_node
        self._addresses = addresses
        self._owns_gateway = owns_gateway
        self._lock = threading.Lock()
        self._nodes: dict[int, tuple[grpc.Channel, GrpcFeedTransport]] = {}
        self._closed = False

    def new_stream(self) -> EventStream:
        return self.gateway.new_stream()

    def local_node(self) -> int:
        return self._gateway_node()

    def register(
        self,
        tag: Hashable,
        span: Span,
        start_ts: Timestamp,
        with_diff: bool,
        stream: EventStream,
        *,
        values: bool = True,
        timestamp_order: bool = False,
        node_id: int = 0,
    ) -> object:
        transport = self._transport(node_id)
        inner = transport.register(
            tag, span, start_ts, with_diff, stream, values=values, timestamp_order=timestamp_order
        )
        return _Handle(transport, inner)

    def _transport(self, node_id: int) -> FeedTransport:
        if node_id in (0, self._gateway_node()):
            return self.gateway
        with self._lock:
            if self._closed:
                raise NodeUnavailableError("this cluster's rangefeed client is closed")
            known = self._nodes.get(node_id)
            broken = known is not None and known[1].broken
            # NB: a stream that broke may have met a node that restarted elsewhere
            address = (self._relearn if broken else self._addresses)(node_id)
            if address is None:
                raise NodeUnavailableError(f"node n{node_id} is not known to this node (yet)")
            if known is not None and known[1].address == address:
                return known[1]
            if known is not None:  # the node restarted elsewhere
                known[1].close()
                known[0].close()
            channel = open_channel(
                address,
                [
                    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ],
                self._tls,
            )
            transport = GrpcFeedTransport(channel, address, tls=self._tls)
            self._nodes[node_id] = (channel, transport)
            return transport

    def unregister(self, handle: object) -> None:
        if not isinstance(handle, _Handle):
            raise InvalidArgumentError(f"not a registration of this transport: {handle!r}")
        handle.transport.unregister(handle.inner)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            nodes, self._nodes = list(self._nodes.values()), {}
        for channel, transport in nodes:
            transport.close()
            channel.close()
        if self._owns_gateway:
            self.gateway.close()
