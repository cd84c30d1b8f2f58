"""A client's gateway moves along its URL's list of nodes when its node stops answering
(two real nodes serving gRPC on loopback, stopped under it)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from feedkv.errors import AmbiguousResultError, NodeUnavailableError
from feedkv.kv.address import parse_node_url
from feedkv.kv.api import BatchRequest, Get, Header
from feedkv.kv.gateway import Gateway
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.store import StoreConfig
from feedkv.server.node import Node


def _node(path: Path) -> Node:
    return Node(path, listen="127.0.0.1:0", config=StoreConfig(sync=False))


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[Node]]:
    started = [_node(tmp_path / "a"), _node(tmp_path / "b")]
    yield started
    for node in started:
        node.stop()


def _dead_address() -> tuple[str, int]:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return "127.0.0.1", s.getsockname()[1]


def _gateway(addresses: list[tuple[str, int]]) -> Gateway:
    return Gateway(addresses, move_connect_timeout_s=0.5, rounds=2, first_pause_s=0.01)


def test_a_gateway_call_moves_to_the_next_node_that_answers(nodes: list[Node]) -> None:
    """The first node stops: the clock is asked of the next, which is the gateway from
    then on; who wired the client hears of the move and owns the old connection."""
    a, b = (parse_node_url(n.url) for n in nodes)
    gateway = _gateway([a, b])
    moves: list[tuple[str, str]] = []

    def moved(old: GrpcTransport, new: GrpcTransport) -> None:
        moves.append((old.address, new.address))
        old.close()

    gateway.on_move = moved
    try:
        assert gateway.address == nodes[0].url.removeprefix("feedkv://")
        before = gateway.now()
        nodes[0].stop()
        assert gateway.now() > before
        assert gateway.address == nodes[1].url.removeprefix("feedkv://")
        assert moves == [(nodes[0].url.removeprefix("feedkv://"), gateway.address)]
        assert gateway.now() > before  # no move this time
        assert len(moves) == 1
    finally:
        gateway.close()


def test_a_batch_addressed_to_a_range_moves_the_gateway_but_is_not_sent_again(
    nodes: list[Node],
) -> None:
    """The router, not the gateway, picks where a range's batch goes next (the new
    gateway may hold no replica of it): the batch fails, later calls go to the next."""
    gateway = _gateway([parse_node_url(n.url) for n in nodes])
    try:
        nodes[0].stop()
        addressed = BatchRequest(Header(range_id=1), (Get(b"k"),))
        with pytest.raises(NodeUnavailableError):
            gateway.send(addressed)
        assert gateway.address == nodes[1].url.removeprefix("feedkv://")
        lookup_free = BatchRequest(Header(), (Get(b"k"),))  # the node routes it
        assert gateway.send(lookup_free).responses
    finally:
        gateway.close()


def test_when_no_node_of_the_list_answers_the_error_names_each(nodes: list[Node]) -> None:
    dead = _dead_address()
    gateway = _gateway([parse_node_url(nodes[0].url), dead])
    try:
        nodes[0].stop()
        with pytest.raises(NodeUnavailableError, match="none of the 2 nodes") as raised:
            gateway.now()
        message = str(raised.value)
        assert nodes[0].url.removeprefix("feedkv://") in message
        assert f"127.0.0.1:{dead[1]}" in message
    finally:
        gateway.close()


def test_a_list_of_one_node_has_nowhere_to_move(nodes: list[Node]) -> None:
    """Its channel reconnects by itself when the node returns: the error is the
    transport's own, at once."""
    gateway = _gateway([parse_node_url(nodes[0].url)])
    try:
        nodes[0].stop()
        with pytest.raises(NodeUnavailableError, match=r"^node 127\.0\.0\.1:"):
            gateway.now()
    finally:
        gateway.close()


def test_an_ambiguous_write_is_never_sent_again(nodes: list[Node]) -> None:
    """A call that may have been applied is the caller's to resolve: raised as is, once,
    and the gateway stays (the next call that meets a dead node moves it)."""
    gateway = _gateway([parse_node_url(n.url) for n in nodes])
    calls: list[str] = []

    def write(transport: GrpcTransport) -> None:
        calls.append(transport.address)
        raise AmbiguousResultError("the connection failed during a write")

    try:
        with pytest.raises(AmbiguousResultError):
            gateway.call(write)
        assert calls == [nodes[0].url.removeprefix("feedkv://")]
        assert gateway.address == calls[0]
    finally:
        gateway.close()


def test_a_client_url_lists_nodes_none_of_which_answer(nodes: list[Node]) -> None:
    """Connecting, the first that answers is the gateway; none, each is named."""
    dead = _dead_address()
    gateway = Gateway([dead, parse_node_url(nodes[1].url)], connect_timeout_s=0.5)
    try:
        assert gateway.address == nodes[1].url.removeprefix("feedkv://")
    finally:
        gateway.close()
    with pytest.raises(NodeUnavailableError, match="none of the 2 nodes") as raised:
        Gateway([dead, dead], connect_timeout_s=0.5)
    why = str(raised.value).partition(" answered: ")[2]  # after the list, each node's reason
    assert why.count(f"no feedkv node answered at 127.0.0.1:{dead[1]}") == 2


def test_an_unavailable_node_the_gateway_answered_about_does_not_move_it(
    nodes: list[Node],
) -> None:
    """The gateway answered that a node it called is down (the error comes rebuilt from
    its answer): it is alive, and stays; the error is the caller's."""
    gateway = _gateway([parse_node_url(n.url) for n in nodes])
    calls: list[str] = []

    def relayed(transport: GrpcTransport) -> None:
        calls.append(transport.address)
        raise NodeUnavailableError("node n3 at 127.0.0.1:1 is unavailable")  # no cause

    try:
        with pytest.raises(NodeUnavailableError, match="n3"):
            gateway.call(relayed)
        assert calls == [nodes[0].url.removeprefix("feedkv://")]
        assert gateway.address == calls[0]
    finally:
        gateway.close()
