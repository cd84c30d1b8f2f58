"""A client's dialer when its gateway is gone (found by the cluster nemesis)."""

from __future__ import annotations

from functools import partial

import grpc
import pytest

from feedkv.errors import NodeUnavailableError
from feedkv.kv.api import BatchRequest, BatchResponse
from feedkv.kv.dialer import ClusterDialer, RemoteNodes, call
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
