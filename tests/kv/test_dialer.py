"""A client's dialer when its gateway is gone (found by the cluster nemesis)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import grpc
import pytest

from feedkv.errors import NodeUnavailableError
from feedkv.kv.address import parse_node_url
from feedkv.kv.api import BatchRequest, BatchResponse
from feedkv.kv.dialer import ClusterDialer, RemoteNodes, call
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.store import StoreConfig
from feedkv.server.node import Node
from feedkv.testing.node_process import free_port
from feedkv.util.hlc import Timestamp


class _Gone:
    """The gateway's transport, once its node died: every call fails."""

    def send(self, batch: BatchRequest) -> BatchResponse:
        raise NodeUnavailableError("the gateway is gone")

    def now(self) -> Timestamp:
        raise NodeUnavailableError("the gateway is gone")

    def close(self) -> None:
        pass


def test_a_client_whose_gateway_died_cannot_relearn_an_address_and_says_so() -> None:
    """A node the client dialled died and restarted elsewhere, and so did the client's
    gateway, the only node it asks where nodes listen: redialling must fail as
    unavailable (go through another node) instead of reporting that nothing moved, which
    left the router resending to the same dead addresses as if the range were merely
    electing a lease holder (a SQL client retried such a statement for minutes)."""
    gateway_address = f"127.0.0.1:{free_port()}"  # nothing listens there any more
    channel = grpc.insecure_channel(gateway_address)
    remote = RemoteNodes(partial(call, channel))
    remote._gateway, remote._addresses = 1, {1: gateway_address, 2: f"127.0.0.1:{free_port()}"}
    dialer = ClusterDialer(
        _Gone(),
        gateway_node=remote.gateway_node,
        addresses=remote.address,
        nodes=remote.status,
        relearn=remote.relearn,
        connect_timeout_s=0.5,
    )
    try:
        with pytest.raises(NodeUnavailableError):
            dialer.dial(2)  # it died: the address it was dialled at is remembered
        with pytest.raises(NodeUnavailableError, match="gateway"):
            dialer.redial(2)
    finally:
        dialer.close()
        channel.close()


def test_the_node_a_gateway_moved_away_from_is_reached_through_its_old_connection(
    tmp_path: Path,
) -> None:
    """A client's gateway moved to another node: its old connection is how the dialer
    reaches the old node from then on (the channel fails at once while the node is down
    and reconnects when it is back), not a new one dialled from an address."""
    with Node(tmp_path / "s", listen="127.0.0.1:0", config=StoreConfig(sync=False)) as node:
        old = GrpcTransport(*parse_node_url(node.url))
        dialer = ClusterDialer(
            _Gone(), gateway_node=lambda: 2, addresses=lambda _node: None, nodes=list
        )
        try:
            with pytest.raises(NodeUnavailableError, match="not known"):
                dialer.dial(1)
            dialer.adopt(1, old)
            assert dialer.dial(1) is old
            assert dialer.dial(1).now() > Timestamp(0, 0)
        finally:
            dialer.close()
