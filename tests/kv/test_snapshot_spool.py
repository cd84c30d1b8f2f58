"""Tests for feedkv.kv.snapshot_spool: snapshot chunks kept in files, on a real disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from feedkv.errors import InvariantViolation
from feedkv.kv.snapshot_spool import SnapshotSpool


def test_chunks_come_back_in_order_and_a_release_deletes_them(tmp_path: Path) -> None:
    spool = SnapshotSpool(tmp_path / "spool")
    chunks = [b"", b"a", b"x" * 70_000, bytes(range(256))]
    token = spool.write(iter(chunks))
    other = spool.write([b"second"])
    assert token != other
    assert list(spool.read(token)) == chunks
    assert list(spool.read(other)) == [b"second"]
    spool.release(token)
    spool.release(token)  # idempotent
    assert spool.held() == [other.decode()]


def test_a_transfer_cut_off_leaves_no_file(tmp_path: Path) -> None:
    spool = SnapshotSpool(tmp_path)

    def cut() -> Iterator[bytes]:
        yield b"first"
        yield b"second"
        raise ConnectionResetError("the stream broke")

    with pytest.raises(ConnectionResetError):
        spool.write(cut())
    assert spool.held() == []


def test_files_a_crash_left_are_deleted_when_the_spool_opens(tmp_path: Path) -> None:
    spool = SnapshotSpool(tmp_path)
    token = spool.write([b"half"])
    (tmp_path / "unrelated").write_bytes(b"kept")
    reopened = SnapshotSpool(tmp_path)
    assert reopened.held() == []
    assert not (tmp_path / token.decode()).exists()
    assert (tmp_path / "unrelated").read_bytes() == b"kept"


def test_a_token_naming_anything_else_is_refused(tmp_path: Path) -> None:
    spool = SnapshotSpool(tmp_path / "spool")
    for bad in (b"../etc/passwd", b"snapshot-1-1/../../x", b"whole snapshot bytes"):
        with pytest.raises(InvariantViolation, match="token"):
            list(spool.read(bad))


def test_a_truncated_file_fails_loudly(tmp_path: Path) -> None:
    spool = SnapshotSpool(tmp_path)
    token = spool.write([b"0123456789"])
    path = tmp_path / token.decode()
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(InvariantViolation, match="mid-frame"):
        list(spool.read(token))
