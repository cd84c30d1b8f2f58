"""Incremental export equals a brute-force filter of the full committed history."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from feedkv.errors import BatchTimestampBeforeGCError, InvalidArgumentError
from feedkv.storage import export, gc, mvcc
from feedkv.storage.intent import TxnMeta, TxnStatus
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.logical_ops import CommitIntent, LogicalOp, WriteValue
from feedkv.storage.mvcc_key import (
    decode_change_key,
    decode_change_keys,
    decode_change_timestamps,
    encode_change_key,
)
from feedkv.storage.schema import MVCC_DATABASES
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

History = list[tuple[Timestamp, bytes, bytes | None]]
KEYS = [b"k%02d" % i for i in range(40)] + [b"k05\x00", b"k05\x00\x00"]
LAST = 2000


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LMDBEngine, History]]:
    """A store with ~2000 ticks of puts, deletes and committed/aborted transactions."""
    engine = LMDBEngine(Path(tmp_path_factory.mktemp("export")) / "s", databases=MVCC_DATABASES)
    rng = random.Random(1234)
    history: History = []

    def record(ops: list[LogicalOp]) -> None:
        for op in ops:
            if isinstance(op, WriteValue | CommitIntent):
                history.append((op.ts, op.key, op.value))

    tick = 1
    while tick < LAST:
        key = rng.choice(KEYS)
        roll = rng.random()
        at = Timestamp(tick, rng.randrange(3))
        if roll < 0.6:
            value = None if rng.random() < 0.15 else b"v%d" % tick
            record(engine.write(lambda rw, k=key, t=at, v=value: mvcc.put(rw, k, t, v)))
        else:
            txn = TxnMeta(tick.to_bytes(16, "big"), key, 0, at, 1)
            keys = sorted(set(rng.sample(KEYS, 3)))
            engine.write(
                lambda rw, t=txn, ks=keys: [
                    mvcc.put(rw, k, t.write_ts, b"t" + k, txn=t) for k in ks
                ]
            )
            tick += rng.randrange(1, 4)
            status = TxnStatus.COMMITTED if roll < 0.9 else TxnStatus.ABORTED
            final = txn.with_ts(Timestamp(tick, 0))
            record(
                engine.write(
                    lambda rw, f=final, s=status, ks=keys: [
                        op for k in ks for op in mvcc.resolve_intent(rw, k, f, s)
                    ]
                )
            )
        tick += 1
    # One transaction stays open: the export must report its intent, never its value.
    open_txn = TxnMeta(b"open".ljust(16, b"-"), b"k07", 0, Timestamp(LAST + 5, 0), 1)
    engine.write(lambda rw: mvcc.put(rw, b"k07", open_txn.write_ts, b"pending", txn=open_txn))
    yield engine, history
    engine.close()


def brute_force(
    history: History, span: Span, lo: Timestamp, hi: Timestamp, with_diff: bool
) -> list[tuple[Timestamp, bytes, bytes | None, bytes | None]]:
    rows = []
    for ts, key, value in history:
        if span.contains_key(key) and lo < ts <= hi:
            prev = None
            if with_diff:
                older = [(t, v) for t, k, v in history if k == key and t < ts]
                prev = max(older)[1] if older else None
            rows.append((ts, key, value, prev))
    return sorted(rows, key=lambda r: (r[0], r[1]))


def span_of(start: bytes, end_index: int) -> Span:
    """From ``start`` to the ``end_index``-th key, or to ``z`` past the keys or at ``start``."""
    end = sorted(KEYS)[end_index] if end_index < len(KEYS) else b"z"
    return Span(start, end if end > start else b"z")


@settings(max_examples=150, deadline=None)
@given(
    lo=st.integers(0, LAST + 10),
    width=st.integers(0, LAST),
    start=st.sampled_from(KEYS),
    end_index=st.integers(0, len(KEYS)),
    with_diff=st.booleans(),
)
def test_export_equals_brute_force_for_random_windows(
    store: tuple[LMDBEngine, History],
    lo: int,
    width: int,
    start: bytes,
    end_index: int,
    with_diff: bool,
) -> None:
    engine, history = store
    span = span_of(start, end_index)
    lo_ts, hi_ts = Timestamp(lo, 0), Timestamp(lo + width, 2)
    with engine.snapshot() as snap:
        result = export.export(snap, span, lo_ts, hi_ts, with_diff=with_diff)
    got = [(v.ts, v.key, v.value, v.prev_value) for v in result.versions]
    assert got == brute_force(history, span, lo_ts, hi_ts, with_diff)
    pending = [i.key for i in result.intents]
    assert pending == ([b"k07"] if span.contains_key(b"k07") and hi_ts.wall >= LAST + 5 else [])


@settings(max_examples=60, deadline=None)
@given(
    lo=st.integers(0, LAST),
    start=st.sampled_from(sorted(KEYS)[:30]),
    page_size=st.integers(1, 50),
    with_diff=st.booleans(),
)
def test_export_pages_are_the_versions_in_columns_cut_by_size(
    store: tuple[LMDBEngine, History], lo: int, start: bytes, page_size: int, with_diff: bool
) -> None:
    engine, history = store
    span, lo_ts, hi_ts = Span(start, b"k30"), Timestamp(lo), Timestamp(LAST)
    with engine.snapshot() as snap:
        pages = list(
            export.export_pages(snap, span, lo_ts, hi_ts, with_diff=with_diff, page_size=page_size)
        )
    rows = []
    for page in pages:
        assert 0 < len(page.keys) <= page_size
        assert len(page.timestamps) == len(page.values) == len(page.keys)
        assert page.value_bytes == sum(len(value) for value in page.values if value is not None)
        prev_values = page.prev_values if with_diff else [None] * len(page.keys)
        assert (page.prev_values is None) is not with_diff
        rows += zip(page.timestamps, page.keys, page.values, prev_values, strict=True)
    assert rows == brute_force(history, span, lo_ts, hi_ts, with_diff)


@settings(max_examples=120, deadline=None)
@given(
    lo=st.integers(0, LAST + 10),
    width=st.integers(0, LAST + 10),
    start=st.sampled_from(KEYS),
    end_index=st.integers(0, len(KEYS)),
    with_diff=st.booleans(),
    page_size=st.integers(1, 50),
)
def test_span_pages_hold_the_exports_versions_by_key_descending_each_oldest_first(
    store: tuple[LMDBEngine, History],
    lo: int,
    width: int,
    start: bytes,
    end_index: int,
    with_diff: bool,
    page_size: int,
) -> None:
    engine, history = store
    span = span_of(start, end_index)
    lo_ts = Timestamp(lo, 1)
    hi_ts = Timestamp(lo + width, 2) if width <= LAST else Timestamp(2**63, 0)
    with engine.snapshot() as snap:
        pages = list(
            export.span_pages(snap, span, lo_ts, hi_ts, with_diff=with_diff, page_size=page_size)
        )
    rows = []
    for page in pages:
        assert 0 < len(page.keys) <= page_size
        assert (page.prev_values is None) is not with_diff
        prev_values = page.prev_values if with_diff else [None] * len(page.keys)
        rows += zip(page.timestamps, page.keys, page.values, prev_values, strict=True)
    by_key_descending = sorted(rows, key=lambda row: (row[1], row[0]))
    by_key_descending.sort(key=lambda row: row[1], reverse=True)  # stable: oldest first
    assert rows == by_key_descending
    assert sorted(rows) == brute_force(history, span, lo_ts, hi_ts, with_diff)


def test_span_pages_read_only_the_span_and_give_keys_with_zero_bytes_back_whole(
    store: tuple[LMDBEngine, History],
) -> None:
    engine, history = store
    span = Span(b"k05", b"k06")  # k05, k05\x00 and k05\x00\x00
    with engine.snapshot() as snap:
        keys = {
            key
            for page in export.span_pages(snap, span, Timestamp(0), Timestamp(LAST))
            for key in page.keys
        }
    assert (
        keys
        == {b"k05", b"k05\x00", b"k05\x00\x00"}
        == {k for _, k, _ in history if span.contains_key(k)}
    )


def test_a_narrow_span_in_a_busy_window_is_read_by_key_and_a_wide_one_by_the_index(
    store: tuple[LMDBEngine, History],
) -> None:
    engine, _ = store
    with engine.snapshot() as snap:
        # k05..k06 holds a few hundred versions; the store took ~2,000 changes since 0
        assert export.cheaper_by_key(snap, Span(b"k05", b"k06"), Timestamp(0))
        # from near the end the window holds a few changes, fewer than the span's versions
        assert not export.cheaper_by_key(snap, Span(b"k05", b"k06"), Timestamp(LAST - 20))
        # the whole keyspace holds every version: the index is never worse
        assert not export.cheaper_by_key(snap, Span(b"a", b"z"), Timestamp(0))


def test_a_big_span_is_read_by_key_when_the_window_holds_twice_its_versions(
    tmp_path: Path,
) -> None:
    with LMDBEngine(tmp_path / "s", databases=MVCC_DATABASES) as engine:
        at = Timestamp(10)
        engine.write(lambda rw: [mvcc.put(rw, b"a%04d" % i, at, b"v") for i in range(1100)])
        engine.write(lambda rw: [mvcc.put(rw, b"b%04d" % i, at.next(), b"v") for i in range(2300)])
        with engine.snapshot() as snap:
            # 1,100 versions against windows of 3,400, 2,300 and no changes
            assert export.cheaper_by_key(snap, Span(b"a", b"b"), Timestamp(0))
            assert export.cheaper_by_key(snap, Span(b"a", b"b"), at)
            assert not export.cheaper_by_key(snap, Span(b"a", b"b"), at.next())
            # 2,300 versions: the whole index (3,400) is less than twice as many
            assert not export.cheaper_by_key(snap, Span(b"b", b"c"), Timestamp(0))


def test_spans_are_weighed_against_a_big_window_through_the_index_size(tmp_path: Path) -> None:
    """Past 8,192 changes the window is not counted whole: the span's versions are
    counted up to half the index (rounded up), then the window up to twice them."""
    with LMDBEngine(tmp_path / "s", databases=MVCC_DATABASES) as engine:
        at = Timestamp(10)
        engine.write(lambda rw: [mvcc.put(rw, b"a%05d" % i, at, b"v") for i in range(4500)])
        engine.write(lambda rw: [mvcc.put(rw, b"b%05d" % i, at.next(), b"v") for i in range(4501)])
        with engine.snapshot() as snap:
            # 9,001 changes: 4,501 versions are more than half of them, 4,500 are not
            assert not export.cheaper_by_key(snap, Span(b"b", b"c"), Timestamp(0))
            assert export.cheaper_by_key(snap, Span(b"a", b"b"), Timestamp(0))
            assert not export.cheaper_by_key(snap, Span(b"a", b"c"), Timestamp(0))
    with LMDBEngine(tmp_path / "t", databases=MVCC_DATABASES) as engine:
        engine.write(lambda rw: [mvcc.put(rw, b"c%d" % i, Timestamp(5), b"v") for i in range(10)])
        engine.write(lambda rw: [mvcc.put(rw, b"a%05d" % i, at, b"v") for i in range(9000)])
        with engine.snapshot() as snap:
            # a window of 9,000 of 9,010 changes, counted up to twice the span's versions
            assert export.cheaper_by_key(snap, Span(b"a00000", b"a01000"), Timestamp(5))
            assert not export.cheaper_by_key(snap, Span(b"a00000", b"a05000"), Timestamp(5))


def test_versions_written_together_share_one_timestamp(tmp_path: Path) -> None:
    engine = LMDBEngine(tmp_path / "s", databases=MVCC_DATABASES)
    at = Timestamp(7, 1)
    engine.write(lambda rw: [mvcc.put(rw, b"k%d" % i, at, b"v") for i in range(5)])
    engine.write(lambda rw: mvcc.put(rw, b"k9", Timestamp(8), None))
    engine.write(lambda rw: mvcc.put(rw, b"k9", Timestamp(9), b""))
    with engine.snapshot() as snap:
        (page,) = export.export_pages(snap, Span(b"k", b"l"), Timestamp(0), Timestamp(9))
    engine.close()
    assert page.timestamps == [at] * 5 + [Timestamp(8), Timestamp(9)]
    assert len({id(ts) for ts in page.timestamps[:5]}) == 1
    assert page.values == [b"v"] * 5 + [None, b""]  # a deletion, then an empty value


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_change_keys_decode_as_one_by_one_sharing_a_timestamp_per_run(
    runs: list[int], rng: random.Random
) -> None:
    """Long runs (a transaction's keys) and short ones (single-key writes), in any mix: the
    decoder bisects long runs and decodes the rest key by key."""
    raws = []
    for tick, length in enumerate(runs):
        at = Timestamp(tick * 3 + rng.randrange(3), rng.randrange(2))
        raws += [encode_change_key(at, b"k%03d" % i) for i in range(length)]
    keys, timestamps = decode_change_keys(raws)
    assert list(zip(timestamps, keys, strict=True)) == list(map(decode_change_key, raws))
    assert len({id(ts) for ts in timestamps}) == len(set(timestamps))


def test_a_chunk_of_two_timestamps_shares_the_one_before_it_and_decodes_the_next() -> None:
    first, second = Timestamp(5, 1), Timestamp(7, 0)
    raws = [encode_change_key(first, b"k%d" % i) for i in range(3)]
    raws += [encode_change_key(second, b"k%d" % i) for i in range(2)]
    before = Timestamp(5, 1)
    timestamps = decode_change_timestamps(raws, before)
    assert timestamps == [first] * 3 + [second] * 2
    assert all(ts is before for ts in timestamps[:3])
    assert len({id(ts) for ts in timestamps[3:]}) == 1
    assert decode_change_timestamps(raws, second) == timestamps  # a later one is not shared


@settings(max_examples=80, deadline=None)
@given(
    txns=st.lists(
        st.lists(st.sampled_from(b"abcdefgh"), min_size=1, max_size=6, unique=True),
        min_size=1,
        max_size=7,
    ),
    bounds=st.tuples(st.sampled_from(b"abcdefghi"), st.sampled_from(b"abcdefghi")),
    page_size=st.integers(1, 30),
)
def test_chunks_of_a_few_transactions_keep_exactly_the_keys_in_the_span(
    tmp_path_factory: pytest.TempPathFactory,
    txns: list[list[int]],
    bounds: tuple[int, int],
    page_size: int,
) -> None:
    """A chunk of a few runs of one timestamp is bounded by each run's first and last
    key, of more by all its keys: either way, a key outside the span anywhere in a run is
    dropped and every key inside is kept."""
    start, end = sorted(bytes([b]) for b in bounds)
    span = Span(start, end + b"\x00")
    engine = LMDBEngine(tmp_path_factory.mktemp("runs") / "s", databases=MVCC_DATABASES)
    expected = []
    for tick, letters in enumerate(txns, start=1):
        keys = [bytes([letter]) for letter in letters]
        engine.write(lambda rw, t=tick, ks=keys: [mvcc.put(rw, k, Timestamp(t), k) for k in ks])
        expected += [(Timestamp(tick), k) for k in sorted(keys) if span.contains_key(k)]
    with engine.snapshot() as snap:
        pages = list(
            export.export_pages(snap, span, Timestamp(0), Timestamp(99), page_size=page_size)
        )
    engine.close()
    got = [row for page in pages for row in zip(page.timestamps, page.keys, strict=True)]
    assert got == expected


def test_big_values_make_pages_of_about_page_bytes(tmp_path: Path) -> None:
    engine = LMDBEngine(tmp_path / "s", databases=MVCC_DATABASES)
    for i in range(10):
        engine.write(lambda rw, i=i: mvcc.put(rw, b"k%d" % i, Timestamp(i + 1), b"x" * 1000))
    with engine.snapshot() as snap:
        pages = list(
            export.export_pages(
                snap, Span(b"k", b"l"), Timestamp(0), Timestamp(10), page_bytes=2500
            )
        )
    engine.close()
    assert [len(page.keys) for page in pages] == [3, 3, 3, 1]


@pytest.mark.parametrize("page_size, page_bytes", [(0, 100), (10, 0)])
def test_pages_without_room_for_a_version_are_refused(
    store: tuple[LMDBEngine, History], page_size: int, page_bytes: int
) -> None:
    engine, _ = store
    with engine.snapshot() as snap, pytest.raises(InvalidArgumentError, match="room"):
        next(
            export.export_pages(
                snap,
                Span(b"a", b"z"),
                Timestamp(0),
                Timestamp(5),
                page_size=page_size,
                page_bytes=page_bytes,
            )
        )


def test_each_keys_versions_come_oldest_first(store: tuple[LMDBEngine, History]) -> None:
    engine, _ = store
    with engine.snapshot() as snap:
        versions = list(export.iter_export(snap, Span(b"k", b"l"), Timestamp(0), Timestamp(LAST)))
    last_seen: dict[bytes, Timestamp] = {}
    for version in versions:
        assert last_seen.get(version.key, Timestamp(0)) < version.ts
        last_seen[version.key] = version.ts
    assert len(last_seen) > 30


def test_export_refuses_an_inverted_window(store: tuple[LMDBEngine, History]) -> None:
    engine, _ = store
    with engine.snapshot() as snap, pytest.raises(InvalidArgumentError, match="inverted"):
        export.export(snap, Span(b"a", b"z"), Timestamp(10), Timestamp(5))


def test_export_starting_below_the_gc_threshold_fails_instead_of_missing_history(
    tmp_path: Path,
) -> None:
    with LMDBEngine(tmp_path / "s", databases=MVCC_DATABASES) as engine:
        for n in range(1, 6):
            engine.write(lambda rw, n=n: mvcc.put(rw, b"k", Timestamp(n * 10), b"v%d" % n))
        engine.write(lambda rw: gc.gc(rw, Span(b"a", b"z"), Timestamp(35)))
        with engine.snapshot() as snap:
            with pytest.raises(BatchTimestampBeforeGCError, match="export at 34"):
                export.export(snap, Span(b"a", b"z"), Timestamp(34), Timestamp(100))
            window = export.export(
                snap, Span(b"a", b"z"), Timestamp(35), Timestamp(100), with_diff=True
            )
            # Outside the collected span the history is intact.
            assert (
                export.export(snap, Span(b"z", b"zz"), Timestamp(0), Timestamp(100)).versions == []
            )
    assert [(v.ts, v.value, v.prev_value) for v in window.versions] == [
        (Timestamp(40), b"v4", b"v3"),
        (Timestamp(50), b"v5", b"v4"),
    ]
