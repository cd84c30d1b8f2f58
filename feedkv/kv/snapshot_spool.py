"""Raft snapshots in chunks, kept on disk while they are sent, and once received until
they are installed.

A snapshot of a large range does not fit in memory, on either side. Its sender copies it
from an engine snapshot a chunk at a time to a file of its own here, ends the engine
snapshot, and streams the file's chunks
(:meth:`~feedkv.kv.replica.Replica.snapshot_frames`: a slow receiver holds no read
transaction open on the sender's store); the file goes once the transfer ended. The
receiver writes each chunk to a file of its own as it arrives
(:meth:`SnapshotSpool.write`), and Raft carries a small token naming that file in the
snapshot's place. The range then installs it from the file, a chunk at a
time, in the one engine write transaction that persists the snapshot, so a crash leaves
either the old state or the new one, never a mix.

A transfer cut off mid-way leaves no file (its partial file is deleted) and changes
nothing; the sender learns of it and Raft sends the snapshot again. Files a crash left
behind are deleted when the spool opens. Each file is a sequence of frames: a 4-byte
big-endian length, then that many bytes.
"""

from __future__ import annotations

import itertools
import os
import re
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

from feedkv.errors import InvariantViolation

__all__ = ["SnapshotSpool"]

_LENGTH = struct.Struct(">I")
_PREFIX = "snapshot-"
_TOKEN = re.compile(rb"snapshot-[0-9]+-[0-9]+")


class SnapshotSpool:
    """The snapshots a store sends, and those it received and has not installed yet, one
    file each, under ``directory`` (created; what a crash left there is deleted).
    Thread-safe: each transfer writes a file of its own."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        for left in directory.glob(f"{_PREFIX}*"):
            left.unlink(missing_ok=True)  # NB: a transfer a crash cut short, or not installed
        self._names = itertools.count(1)
        self._pid = os.getpid()

    def write(self, chunks: Iterable[bytes]) -> bytes:
        """Write ``chunks`` to a new file as they come (one in memory at a time); returns
        the token naming it once the last is written. If ``chunks`` raises (the transfer
        was cut off), the file is deleted and the error goes on to the caller."""
        name = f"{_PREFIX}{self._pid}-{next(self._names)}"
        path = self.directory / name
        try:
            with path.open("wb") as out:
                for chunk in chunks:
                    out.write(_LENGTH.pack(len(chunk)))
                    out.write(chunk)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return name.encode()

    def read(self, token: bytes) -> Iterator[bytes]:
        """The chunks of the file ``token`` names, in the order written, one at a time."""
        with self._path(token).open("rb") as spooled:
            while header := spooled.read(_LENGTH.size):
                if len(header) != _LENGTH.size:
                    raise InvariantViolation(f"spooled snapshot {token!r} ends in a frame's length")
                (size,) = _LENGTH.unpack(header)
                chunk = spooled.read(size)
                if len(chunk) != size:
                    raise InvariantViolation(f"spooled snapshot {token!r} ends mid-frame")
                yield chunk

    def release(self, token: bytes) -> None:
        """Delete the file ``token`` names (installed, refused, or sent); idempotent."""
        self._path(token).unlink(missing_ok=True)

    def held(self) -> list[str]:
        """The files held now (for tests and ``debug``)."""
        return sorted(p.name for p in self.directory.glob(f"{_PREFIX}*"))

    def _path(self, token: bytes) -> Path:
        if not _TOKEN.fullmatch(token):
            raise InvariantViolation(f"not a spooled snapshot's token: {token[:64]!r}")
        return self.directory / token.decode()
