"""The overlay of proposals in flight reads exactly as if they had been applied."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from feedkv.storage.engine import WriteBatch
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.overlay import Overlay, OverlayView

DBS = ("a", "b")


def _random_batch(rng: random.Random) -> WriteBatch:
    batch = WriteBatch()
    for _ in range(rng.randint(1, 6)):
        db = rng.choice(DBS)
        key = bytes([rng.randint(0, 20)])
        if rng.random() < 0.3:
            batch.delete(db, key)
        else:
            batch.put(db, key, rng.randbytes(3))
    return batch


def _everything(reader: object, rng: random.Random) -> list[object]:
    """The same reads of both readers: gets, scans both ways, seeks and counts."""
    out: list[object] = []
    for db in DBS:
        lo, hi = sorted(bytes([rng.randint(0, 21)]) for _ in range(2))
        end = None if rng.random() < 0.3 else hi
        out.append(list(reader.scan(db, lo, end)))  # type: ignore[attr-defined]
        out.append(list(reader.scan(db, lo, end, reverse=True)))  # type: ignore[attr-defined]
        out.append(reader.get(db, lo))  # type: ignore[attr-defined]
        out.append(reader.seek(db, lo))  # type: ignore[attr-defined]
        out.append(reader.seek_before(db, hi))  # type: ignore[attr-defined]
        out.append(reader.count(db, lo, end, 4))  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize("seed", range(30))
def test_a_view_reads_as_the_engine_with_every_proposal_applied(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    with (
        LMDBEngine(tmp_path / "applied", databases=DBS, sync=False) as applied,
        LMDBEngine(tmp_path / "all", databases=DBS, sync=False) as everything,
    ):
        overlay = Overlay()
        index = 0
        pending: list[tuple[int, WriteBatch]] = []
        for _ in range(40):
            action = rng.random()
            if action < 0.5:
                # a command evaluated against the view, proposed at the next index
                with applied.snapshot() as base:
                    view = OverlayView(base, overlay)
                    with everything.snapshot() as truth:
                        assert _everything(view, random.Random(index)) == _everything(
                            truth, random.Random(index)
                        )
                    for db, key, value in _random_batch(rng):
                        if value is None:
                            view.delete(db, key)
                        else:
                            view.put(db, key, value)
                index += 1
                overlay.add(index, view.batch)
                pending.append((index, view.batch))
                everything.write(view.batch.apply)
            elif pending:
                # the oldest few entries apply
                upto = pending[rng.randint(0, len(pending) - 1)][0]
                for _, batch in [p for p in pending if p[0] <= upto]:
                    applied.write(batch.apply)
                pending = [p for p in pending if p[0] > upto]
                overlay.applied(upto)
        assert len(overlay) == len(pending)


def test_a_view_sees_its_own_writes_above_the_overlay(tmp_path: Path) -> None:
    with LMDBEngine(tmp_path / "e", databases=DBS, sync=False) as engine:
        engine.write(lambda rw: rw.put("a", b"k", b"base"))
        overlay = Overlay()
        first = WriteBatch()
        first.put("a", b"k", b"proposed")
        overlay.add(1, first)
        with engine.snapshot() as base:
            view = OverlayView(base, overlay)
            assert view.get("a", b"k") == b"proposed"
            assert view.delete("a", b"k") is True
            assert view.get("a", b"k") is None
            assert list(view.scan("a", b"")) == []
            assert view.delete("a", b"k") is False
        assert [(db, key, value) for db, key, value in view.batch] == [
            ("a", b"k", None),
            ("a", b"k", None),
        ]


def test_clearing_the_overlay_forgets_every_proposal(tmp_path: Path) -> None:
    with LMDBEngine(tmp_path / "e", databases=DBS, sync=False) as engine:
        overlay = Overlay()
        batch = WriteBatch()
        batch.put("b", b"x", b"1")
        overlay.add(7, batch)
        overlay.clear()
        with engine.snapshot() as base:
            assert OverlayView(base, overlay).get("b", b"x") is None
        assert len(overlay) == 0
