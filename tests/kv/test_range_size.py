"""Range sizes: estimates from logical ops, exact measurements, persistence, and the store
splitting large ranges at their midpoint and merging small neighbours."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import feedkv
from feedkv.kv.api import BatchRequest, Header, Merge, Split
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.kv.range_size import RangeSizes, measure, op_bytes
from feedkv.kv.store import DATABASES, StoreConfig
from feedkv.storage import logical_ops as ops
from feedkv.storage import mvcc
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.util.hlc import ManualClock, Timestamp
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

EVERYTHING = Span(KEY_MIN, KEY_MAX)
T1 = Timestamp(10, 0)


@pytest.fixture
def engine(tmp_path: Path) -> LMDBEngine:
    eng = LMDBEngine(tmp_path / "engine", databases=DATABASES, sync=False)
    yield eng
    eng.close()


def put_versions(engine: LMDBEngine, rows: list[tuple[bytes, bytes]], ts: Timestamp = T1) -> None:
    def write(rw):  # type: ignore[no-untyped-def]
        for key, value in rows:
            mvcc.put(rw, key, ts, value)

    engine.write(write)


# Estimates.


def test_committed_values_count_their_key_and_value_bytes() -> None:
    small = op_bytes(ops.WriteValue(b"k", T1, b"v" * 10, None))
    large = op_bytes(ops.WriteValue(b"k", T1, b"v" * 110, None))
    assert large - small == 100
    assert op_bytes(ops.CommitIntent(b"t", b"k", T1, b"v" * 10, None)) == small


def test_intents_count_only_once_they_commit() -> None:
    assert op_bytes(ops.WriteIntent(b"t", b"a", b"k", T1)) == 0
    assert op_bytes(ops.AbortIntent(b"t", b"k")) == 0


def test_a_split_halves_the_estimate_and_a_merge_adds_both_sides() -> None:
    sizes = RangeSizes()
    sizes.add(1, 1000)
    sizes.split(1, 2)
    assert (sizes.get(1), sizes.get(2)) == (500, 500)
    sizes.add(2, 100)
    sizes.merge(1, 2)
    assert (sizes.get(1), sizes.get(2)) == (1100, 0)


def test_estimates_survive_a_reopen_and_merged_ranges_are_forgotten(engine: LMDBEngine) -> None:
    sizes = RangeSizes()
    sizes.add(1, 300)
    sizes.add(2, 700)
    sizes.persisted(engine.write(sizes.persist))
    sizes.merge(1, 2)
    sizes.persisted(engine.write(sizes.persist))
    ranges = [RangeDescriptor(1, EVERYTHING, 1), RangeDescriptor(2, EVERYTHING, 1)]
    reopened = RangeSizes()
    with engine.snapshot() as snap:
        missing = reopened.load(snap, ranges)
    assert reopened.get(1) == 1000
    assert [d.range_id for d in missing] == [2]


def test_a_change_after_persisting_is_written_again_next_time(engine: LMDBEngine) -> None:
    sizes = RangeSizes()
    sizes.add(1, 10)
    written = engine.write(sizes.persist)
    sizes.add(1, 5)
    sizes.persisted(written)
    sizes.persisted(engine.write(sizes.persist))
    reopened = RangeSizes()
    with engine.snapshot() as snap:
        reopened.load(snap, [RangeDescriptor(1, EVERYTHING, 1)])
    assert reopened.get(1) == 15


# Measuring.


def test_measuring_an_empty_span_finds_no_bytes_and_no_midpoint(engine: LMDBEngine) -> None:
    with engine.snapshot() as snap:
        measured = measure(snap, EVERYTHING)
    assert (measured.total, measured.midpoint) == (0, None)


def test_a_single_key_cannot_be_cut(engine: LMDBEngine) -> None:
    put_versions(engine, [(b"only", b"x" * 100)])
    put_versions(engine, [(b"only", b"y" * 100)], Timestamp(20, 0))
    with engine.snapshot() as snap:
        measured = measure(snap, EVERYTHING)
    assert measured.total > 200
    assert measured.midpoint is None


def test_the_midpoint_halves_the_bytes_and_counts_every_version(engine: LMDBEngine) -> None:
    put_versions(engine, [(b"k%03d" % i, b"v" * 100) for i in range(100)])
    # Key k000 gets 99 more versions: just over half the bytes sit on that one key.
    for t in range(99):
        put_versions(engine, [(b"k000", b"w" * 100)], Timestamp(20 + t, 0))
    with engine.snapshot() as snap:
        measured = measure(snap, EVERYTHING)
        left = measure(snap, Span(KEY_MIN, measured.midpoint or b""))
    assert measured.midpoint is not None
    assert measured.midpoint == b"k001"
    assert left.total * 2 >= measured.total


def test_a_measurement_covers_only_its_span(engine: LMDBEngine) -> None:
    put_versions(engine, [(b"a", b"1" * 50), (b"b", b"2" * 50), (b"b\x00", b"3" * 50)])
    with engine.snapshot() as snap:
        whole = measure(snap, EVERYTHING).total
        just_b = measure(snap, Span(b"b", b"b\x00")).total
    assert 0 < just_b < whole
    assert whole == pytest.approx(3 * just_b, abs=4)


# The store splits and merges by size.


def auto_config(max_bytes: int, **overrides: object) -> StoreConfig:
    settings: dict[str, object] = {
        "closed_ts_interval_s": 0.01,
        "push_poll_s": 0.01,
        "sync": False,
        "range_max_bytes": max_bytes,
        "range_min_bytes": max_bytes // 4,
        "range_check_interval_s": 0.02,
    }
    settings.update(overrides)
    return StoreConfig(**settings)  # type: ignore[arg-type]


def fill(db: feedkv.DB, count: int, value_size: int = 1000) -> None:
    for i in range(count):
        db.put(b"row/%05d" % i, bytes([i % 251]) * value_size)


def test_a_range_past_the_maximum_splits_and_keeps_every_row(
    tmp_path: Path, wait_until: Callable[..., bool]
) -> None:
    with feedkv.connect(tmp_path / "s", clock=ManualClock(), config=auto_config(32 << 10)) as db:
        fill(db, 200)
        assert wait_until(lambda: len(db.ranges()) >= 4)
        ranges = db.ranges()
        assert all(not r.sticky for r in ranges[1:])
        rows = db.scan(b"row/", b"row0")
        assert [kv.key for kv in rows] == [b"row/%05d" % i for i in range(200)]
        assert all(kv.value == bytes([i % 251]) * 1000 for i, kv in enumerate(rows))


def test_small_neighbours_merge_but_a_manual_split_stays(
    tmp_path: Path, wait_until: Callable[..., bool]
) -> None:
    path = tmp_path / "s"
    clock = ManualClock()
    with feedkv.connect(path, clock=clock, config=auto_config(32 << 10)) as db:
        db.split(b"row/00100")
        fill(db, 200)
        assert wait_until(lambda: len(db.ranges()) >= 5)
    # Reopened with a 64 MiB maximum, every range is small: the automatic splits are
    # merged away, the manual one is not.
    with feedkv.connect(path, clock=clock, config=auto_config(64 << 20)) as db:
        assert wait_until(lambda: len(db.ranges()) == 2)
        left, right = db.ranges()
        assert left.span.start == b""
        assert right.span.start == b"row/00100"
        assert right.sticky
        assert len(db.scan(b"row/", b"row0")) == 200


def test_an_automatic_merge_never_crosses_a_manual_split(db: feedkv.DB) -> None:
    db.split(b"m")
    db.transport.send(BatchRequest(Header(), (Merge(b"a", automatic=True),)))
    assert [r.span.start for r in db.ranges()] == [b"", b"m"]
    db.transport.send(BatchRequest(Header(), (Merge(b"a"),)))
    assert [r.span.start for r in db.ranges()] == [b""]


def test_an_automatic_split_of_a_manual_boundary_keeps_it_manual(db: feedkv.DB) -> None:
    db.split(b"m")
    db.transport.send(BatchRequest(Header(), (Split(b"m", automatic=True),)))
    assert db.ranges()[1].sticky
    db.transport.send(BatchRequest(Header(), (Split(b"t", automatic=True),)))
    db.split(b"t")
    assert [r.sticky for r in db.ranges()] == [False, True, True]
