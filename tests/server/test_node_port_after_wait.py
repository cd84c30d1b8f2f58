"""A new node serves on the port it waited for its cluster on, unless another process
took that port in the moment between its two servers: a node asked for any free port
then takes another, and one asked for that port says it cannot listen."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from feedkv.errors import NodeUnavailableError
from feedkv.server.node import Node


@pytest.fixture
def taken() -> Iterator[int]:
    with socket.socket() as other:  # another process's listener on the port
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def test_a_node_asked_for_any_port_takes_another_when_its_port_was_taken(
    tmp_path: Path, taken: int
) -> None:
    with Node(tmp_path / "n1", listen=None) as node:
        node._serve_after_wait(f"127.0.0.1:{taken}", "127.0.0.1:0")
        assert node.server is not None
        assert node.server.port not in (0, taken)


def test_a_node_asked_for_its_port_says_it_cannot_listen_there(tmp_path: Path, taken: int) -> None:
    with Node(tmp_path / "n1", listen=None) as node:
        with pytest.raises(NodeUnavailableError, match=f"cannot listen on 127.0.0.1:{taken}"):
            node._serve_after_wait(f"127.0.0.1:{taken}", f"127.0.0.1:{taken}")
        assert node.server is None
