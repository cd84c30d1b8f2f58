"""Incremental export through the client: ``db.export(span, lo, hi)`` over ranges, pages,
splits behind the client's back, intents in the window, and gRPC."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import InvalidArgumentError, InvalidSpanError
from feedkv.kv.api import BatchRequest, Header, HeartbeatTxn, Put, Transaction
from feedkv.kv.store import Store, StoreConfig
from feedkv.server.node import Node
from feedkv.storage.export import ExportedVersion
from feedkv.util.hlc import ZERO_TIMESTAMP, ManualClock, Timestamp
from feedkv.util.keys import Span

EVERYTHING = Span(b"\x00", b"\xff")


def history(db: DB, clock: ManualClock) -> list[tuple[bytes, Timestamp, bytes | None]]:
    """Three versions of each of ten keys, some deleted; returns what was written."""
    written = []
    for round_ in range(3):
        for i in range(10):
            key = b"k%d" % i
            clock.advance(1000)
            if round_ == 2 and i % 3 == 0:
                written.append((key, db.delete(key), None))
            else:
                value = b"v%d.%d" % (round_, i)
                written.append((key, db.put(key, value), value))
    return written


def as_tuples(versions: Iterator[ExportedVersion]) -> list[tuple[bytes, Timestamp, bytes | None]]:
    return [(v.key, v.ts, v.value) for v in versions]


@pytest.mark.parametrize(
    ("page_size", "page_bytes"), [(1, None), (4, None), (1000, None), (1000, 1), (1000, 100)]
)
def test_export_returns_every_version_in_the_window_once_and_each_key_oldest_first(
    db: DB, clock: ManualClock, page_size: int, page_bytes: int | None
) -> None:
    written = history(db, clock)
    db.split(b"k3")
    db.split(b"k7")
    lo, hi = written[4][1], written[24][1]
    got = as_tuples(db.export(EVERYTHING, lo, hi, page_size=page_size, page_bytes=page_bytes))
    expected = [w for w in written if lo < w[1] <= hi]
    assert sorted(got) == sorted(expected)
    assert len(got) == len(expected)
    for key in {w[0] for w in expected}:
        stamps = [ts for k, ts, _ in got if k == key]
        assert stamps == sorted(stamps)


def test_export_resumes_correctly_when_a_range_splits_between_pages(
    db: DB, clock: ManualClock
) -> None:
    written = history(db, clock)
    versions = db.export(EVERYTHING, ZERO_TIMESTAMP, written[-1][1], page_size=2)
    got = as_tuples(next(versions) for _ in range(3))
    db.split(b"k5")  # behind the export's back: the rest of the first page is in two ranges
    got += as_tuples(versions)
    assert sorted(got) == sorted(written)
    assert len(got) == len(written)


def test_export_with_diff_carries_the_value_each_version_replaced(
    db: DB, clock: ManualClock
) -> None:
    written = history(db, clock)
    previous: dict[bytes, bytes | None] = {}
    expected = []
    for key, ts, value in written:
        expected.append((key, ts, value, previous.get(key)))
        previous[key] = value
    got = [
        (v.key, v.ts, v.value, v.prev_value)
        for v in db.export(EVERYTHING, ZERO_TIMESTAMP, written[-1][1], with_diff=True)
    ]
    assert sorted(got, key=lambda v: (v[1], v[0])) == expected


def test_an_intent_in_the_window_is_pushed_above_it_so_the_export_is_final(
    db: DB, store: Store, clock: ManualClock
) -> None:
    db.put(b"a", b"before")
    now = store.clock.now()
    txn = Transaction(uuid.uuid4().bytes, b"b", 0, now, now, 1)
    txn = store.send(BatchRequest(Header(txn=txn), (HeartbeatTxn(),))).txn or txn
    store.send(BatchRequest(Header(txn=txn), (Put(b"b", b"pending"),)))
    clock.advance(1000)
    hi = db.now()
    got = as_tuples(db.export(EVERYTHING, ZERO_TIMESTAMP, hi))
    assert [key for key, _, _ in got] == [b"a"]
    clock.advance(1000)
    # No write can land at or below an exported window's end any more.
    assert db.put(b"c", b"later") > hi
    assert db.scan(b"b", b"c", as_of=hi) == []


@pytest.mark.parametrize(
    ("lo", "hi", "page_size", "message"),
    [
        (Timestamp(5, 0), Timestamp(4, 0), 10, "inverted"),
        (Timestamp(1, 0), Timestamp(4, 0), 0, "page size"),
    ],
)
def test_bad_export_arguments_are_refused_clearly(
    db: DB, lo: Timestamp, hi: Timestamp, page_size: int, message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        list(db.export(EVERYTHING, lo, hi, page_size=page_size))


def test_export_takes_a_start_end_pair_as_a_rangefeed_does(db: DB, clock: ManualClock) -> None:
    written = history(db, clock)
    lo, hi = written[9][1], written[-1][1]
    pair = (EVERYTHING.start, EVERYTHING.end)
    assert as_tuples(db.export(pair, lo, hi)) == as_tuples(db.export(EVERYTHING, lo, hi))
    assert sorted(as_tuples(db.export(pair, lo, hi))) == sorted(written[10:])
    for bad in [b"k1", ("k1", "k2"), (b"k1", b"k2", b"k3"), (b"k2", b"k1")]:
        with pytest.raises(InvalidSpanError, match="span"):
            list(db.export(bad, lo, hi))  # type: ignore[arg-type]


def test_export_over_grpc_matches_the_embedded_answer(tmp_path: Path) -> None:
    clock = ManualClock()
    config = StoreConfig(closed_ts_interval_s=0.01, sync=False)
    with Node(tmp_path / "store", listen="127.0.0.1:0", config=config, clock=clock) as node:
        remote = feedkv.connect(node.url)
        try:
            written = history(remote, clock)
            remote.split(b"k5")
            got = as_tuples(remote.export(EVERYTHING, written[9][1], written[-1][1], page_size=3))
            assert sorted(got) == sorted(written[10:])
            diff = list(
                remote.export(Span(b"k1", b"k2"), written[1][1], written[11][1], with_diff=True)
            )
            assert [(v.value, v.prev_value) for v in diff] == [(b"v1.1", b"v0.1")]
        finally:
            remote.close()


def test_an_export_bounded_by_bytes_refuses_a_bound_of_nothing(db: DB) -> None:
    with pytest.raises(InvalidArgumentError, match="export page bytes must be > 0, got 0"):
        list(db.export(EVERYTHING, Timestamp(1, 0), Timestamp(4, 0), page_bytes=0))
