"""The catch-up scan's pages: every value above the start once, oldest first, cut by count
and by bytes, each sized as the memory budget counts it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from feedkv.rangefeed.catchup import catch_up
from feedkv.rangefeed.event import Value
from feedkv.rangefeed.registration import event_size
from feedkv.storage import mvcc
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.schema import MVCC_DATABASES
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

SPAN = Span(b"k", b"l")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[LMDBEngine]:
    """``k00``..``k09`` at 10..19, a value of ``k03`` replaced at 20, ``k05`` deleted at 21,
    and a key outside the span at every timestamp."""
    engine = LMDBEngine(tmp_path / "s", databases=MVCC_DATABASES)
    for i in range(10):
        engine.write(lambda rw, i=i: mvcc.put(rw, b"k%02d" % i, Timestamp(10 + i), b"v%d" % i))
        engine.write(lambda rw, i=i: mvcc.put(rw, b"x", Timestamp(10 + i, 1), b"out"))
    engine.write(lambda rw: mvcc.put(rw, b"k03", Timestamp(20), b"v3'"))
    engine.write(lambda rw: mvcc.put(rw, b"k05", Timestamp(21), None))
    yield engine
    engine.close()


@pytest.mark.parametrize("page_values", [1, 3])  # 1: whole pages of keys outside the span
def test_pages_hold_every_value_above_the_start_once_and_oldest_first(
    engine: LMDBEngine, page_values: int
) -> None:
    with engine.snapshot() as snap:
        pages = list(catch_up(snap, SPAN, Timestamp(12), True, page_values=page_values))
    values = [value for page, _ in pages for value in page.values]
    assert all(0 < len(page.values) <= page_values for page, _ in pages)
    assert len(values) == 9
    assert values[:2] == [
        Value(b"k03", b"v3", Timestamp(13)),
        Value(b"k04", b"v4", Timestamp(14)),
    ]
    assert values[-2:] == [
        Value(b"k03", b"v3'", Timestamp(20), b"v3"),
        Value(b"k05", None, Timestamp(21), b"v5"),
    ]
    for page, size in pages:
        assert page.max_ts == max(value.ts for value in page.values)
        assert size == sum(map(event_size, page.values))


def test_pages_are_cut_by_bytes_and_a_bigger_value_is_a_page_of_its_own(
    engine: LMDBEngine,
) -> None:
    engine.write(lambda rw: mvcc.put(rw, b"k08", Timestamp(30), b"b" * 500))
    limit = 2 * event_size(Value(b"k00", b"v0", Timestamp(10)))
    with engine.snapshot() as snap:
        pages = list(catch_up(snap, SPAN, Timestamp(17), False, page_bytes=limit))
    assert [[v.ts.wall for v in page.values] for page, _ in pages] == [
        [18, 19],
        [20, 21],
        [30],
    ]
    assert [size for _, size in pages] == [sum(map(event_size, p.values)) for p, _ in pages]


@pytest.mark.parametrize("by_bytes", [False, True])  # True: pages cut by bytes
def test_a_span_with_fewer_versions_than_the_window_has_changes_is_read_by_key(
    engine: LMDBEngine, by_bytes: bool
) -> None:
    """Keys descending, each key's versions oldest first, each with the value it replaced;
    each page knows its newest value, wherever it is in the page."""
    for i in range(40):  # busy outside the span: the window holds 56 changes, the span 12
        engine.write(lambda rw, i=i: mvcc.put(rw, b"x", Timestamp(22 + i), b"out"))
    limit = 3 * event_size(Value(b"k00", b"v0", Timestamp(10), b"v0")) if by_bytes else 1 << 20
    with engine.snapshot() as snap:
        pages = list(catch_up(snap, SPAN, Timestamp(12), True, page_values=4, page_bytes=limit))
    values = [value for page, _ in pages for value in page.values]
    assert values == [
        Value(b"k09", b"v9", Timestamp(19)),
        Value(b"k08", b"v8", Timestamp(18)),
        Value(b"k07", b"v7", Timestamp(17)),
        Value(b"k06", b"v6", Timestamp(16)),
        Value(b"k05", b"v5", Timestamp(15)),
        Value(b"k05", None, Timestamp(21), b"v5"),
        Value(b"k04", b"v4", Timestamp(14)),
        Value(b"k03", b"v3", Timestamp(13)),
        Value(b"k03", b"v3'", Timestamp(20), b"v3"),
    ]
    for page, size in pages:
        assert page.max_ts == max(value.ts for value in page.values)
        assert size == sum(map(event_size, page.values))
