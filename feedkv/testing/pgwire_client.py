"""A raw PostgreSQL v3 client for protocol tests: frontend messages encoded by hand and
backend messages decoded, with no driver in between to smooth over what the server
sends (for the tests of :mod:`feedkv.pgwire` and of anything that speaks it).

:func:`frontend` builds a typed message, :func:`startup` the first packet, and
:func:`backend_messages` splits a server's bytes into ``(type, body)`` pairs;
:func:`error_fields` reads an ErrorResponse. :class:`RawClient` does the same over a
socket, with a deadline on every read.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Sequence
from typing import Self

__all__ = [
    "RawClient",
    "backend_messages",
    "bind",
    "error_fields",
    "frontend",
    "parse",
    "startup",
]


def frontend(kind: bytes, body: bytes = b"") -> bytes:
    """A typed frontend message: its type byte, its length (counting itself), its body."""
    return kind + struct.pack("!i", len(body) + 4) + body


def startup(user: str = "root", database: str = "defaultdb", version: int = 3 << 16) -> bytes:
    body = struct.pack("!i", version)
    for name, value in (("user", user), ("database", database)):
        body += name.encode() + b"\0" + value.encode() + b"\0"
    body += b"\0"
    return struct.pack("!i", len(body) + 4) + body


def parse(name: str, text: str, oids: Sequence[int] = ()) -> bytes:
    body = name.encode() + b"\0" + text.encode() + b"\0" + struct.pack("!h", len(oids))
    return frontend(b"P", body + b"".join(struct.pack("!i", oid) for oid in oids))


def bind(
    portal: str,
    statement: str,
    params: Sequence[bytes | None] = (),
    *,
    param_formats: Sequence[int] = (),
    result_formats: Sequence[int] = (),
) -> bytes:
    body = portal.encode() + b"\0" + statement.encode() + b"\0"
    body += struct.pack(f"!h{len(param_formats)}h", len(param_formats), *param_formats)
    body += struct.pack("!h", len(params))
    for value in params:
        body += struct.pack("!i", -1) if value is None else struct.pack("!i", len(value)) + value
    body += struct.pack(f"!h{len(result_formats)}h", len(result_formats), *result_formats)
    return frontend(b"B", body)


def backend_messages(data: bytes) -> list[tuple[bytes, bytes]]:
    """``data`` split into ``(type, body)`` messages. A lone ``N`` or ``S`` (the answer
    to an SSLRequest) is a message of its own with an empty body."""
    messages = []
    at = 0
    while at < len(data):
        if len(data) - at == 1:
            messages.append((data[at : at + 1], b""))
            break
        kind = data[at : at + 1]
        (length,) = struct.unpack_from("!i", data, at + 1)
        messages.append((kind, data[at + 5 : at + 1 + length]))
        at += 1 + length
    return messages


def error_fields(body: bytes) -> dict[str, str]:
    """The fields of an ErrorResponse or NoticeResponse body, by their code letter."""
    fields = {}
    for part in body.split(b"\0"):
        if part:
            fields[part[:1].decode()] = part[1:].decode()
    return fields


class RawClient:
    """A socket to a SQL port that sends raw bytes and reads whole backend messages."""

    def __init__(self, host: str, port: int, *, timeout_s: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.timeout_s = timeout_s
        self._buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def until(self, kind: bytes) -> list[tuple[bytes, bytes]]:
        """The messages up to and including the first of type ``kind`` (e.g. ``Z``,
        ReadyForQuery); TimeoutError if none comes within the timeout, EOFError if the
        server closes first."""
        deadline = time.monotonic() + self.timeout_s
        got: list[tuple[bytes, bytes]] = []
        while True:
            while len(self._buffer) >= 5:
                (length,) = struct.unpack_from("!i", self._buffer, 1)
                if len(self._buffer) < 1 + length:
                    break
                message = (self._buffer[:1], self._buffer[5 : 1 + length])
                self._buffer = self._buffer[1 + length :]
                got.append(message)
                if message[0] == kind:
                    return got
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {kind!r} message within {self.timeout_s} s: {got}")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(f"the server closed the connection after {got}")
            self._buffer += chunk

    def read_closed(self) -> bytes:
        """Everything the server sends until it closes the connection."""
        deadline = time.monotonic() + self.timeout_s
        data = self._buffer
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the server kept the connection open: {data!r}")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return data
            if not chunk:
                return data
            data += chunk

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
