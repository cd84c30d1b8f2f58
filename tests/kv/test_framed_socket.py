"""Frames on a connection: read back as written up to the receiver's limit, a torn or
oversized one fails the connection, and a dial that fails names what it dialed."""

from __future__ import annotations

import io
import socket

import pytest

from feedkv.errors import NodeUnavailableError
from feedkv.kv.framed_socket import connect, frame, read_frame

LIMIT = 1 << 16


def test_frames_read_back_in_order_and_an_end_between_frames_is_none() -> None:
    bodies = [b"", b"one", bytes(range(256)) * 40, b"x" * LIMIT]
    reader = io.BytesIO(b"".join(frame(body) for body in bodies))
    assert [read_frame(reader, LIMIT) for _ in bodies] == bodies
    assert read_frame(reader, LIMIT) is None


@pytest.mark.parametrize(
    "wire",
    [frame(b"whole")[:-1], frame(b"whole")[:2], frame(b"x" * (LIMIT + 1))],
    ids=["inside-a-body", "inside-a-length", "beyond-the-limit"],
)
def test_a_torn_or_oversized_frame_fails_the_connection(wire: bytes) -> None:
    with pytest.raises(ConnectionError):
        read_frame(io.BytesIO(wire), LIMIT)


def test_a_port_nothing_listens_on_fails_the_dial_naming_what_was_dialed() -> None:
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(NodeUnavailableError, match=f"cannot connect to the batch port .*:{port}"):
        connect("127.0.0.1", port, None, 5.0, "the batch port")
