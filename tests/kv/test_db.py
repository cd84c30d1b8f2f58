"""The client API of an embedded node: single keys, scans, ranges, routing and bad input."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import (
    AmbiguousResultError,
    FeedKVError,
    InvalidArgumentError,
    InvalidKeyError,
    InvalidSpanError,
    InvalidURLError,
    StoreLockedError,
    ValueTooLargeError,
)
from feedkv.kv.api import BatchRequest, BatchResponse, Header, Merge, Put, Scan, Split
from feedkv.kv.db import KVClient
from feedkv.kv.store import DATABASES, Store, StoreConfig
from feedkv.storage.mvcc import MAX_VALUE_BYTES, KeyValue
from feedkv.util.hlc import ManualClock, Timestamp
from feedkv.util.keys import KEY_MAX, MAX_KEY_BYTES

ALL = (b"\x00", b"\xff")


def keys(rows: list[KeyValue]) -> list[bytes]:
    return [kv.key for kv in rows]


def dump(store: Store) -> dict[str, list[tuple[bytes, bytes]]]:
    """Everything the store holds, sub-database by sub-database, but the range size
    estimates: the node's side loop persists those on its own schedule."""
    with store.engine.snapshot() as snap:
        return {
            name: [(k, v) for k, v in snap.scan(name, b"") if not k.startswith(b"size/")]
            for name in DATABASES
        }


def fill(db: DB, names: bytes, value: bytes = b"v") -> None:
    for name in names:
        db.put(bytes([name]), value + bytes([name]))


# Single keys.


def test_put_then_get_returns_the_value_and_delete_removes_it(db: DB) -> None:
    put_ts = db.put(b"k", b"v1")
    assert db.get(b"k") == b"v1"
    delete_ts = db.delete(b"k")
    assert db.get(b"k") is None
    assert delete_ts > put_ts
    assert db.get(b"missing") is None


def test_each_write_commits_at_a_higher_timestamp_than_the_last(db: DB) -> None:
    stamps = [db.put(b"k", str(i).encode()) for i in range(5)]
    assert stamps == sorted(stamps)
    assert len(set(stamps)) == len(stamps)
    assert db.get(b"k") == b"4"


def test_get_as_of_an_old_timestamp_sees_the_value_written_then(db: DB) -> None:
    first = db.put(b"k", b"one")
    second = db.put(b"k", b"two")
    deleted = db.delete(b"k")
    assert db.get(b"k", as_of=first.prev()) is None
    assert db.get(b"k", as_of=first) == b"one"
    assert db.get(b"k", as_of=second.prev()) == b"one"
    assert db.get(b"k", as_of=second) == b"two"
    assert db.get(b"k", as_of=deleted) is None
    assert db.get(b"k") is None


# Scans.


def test_scan_returns_live_keys_of_the_span_in_key_order(db: DB) -> None:
    fill(db, b"abcde")
    db.delete(b"c")
    rows = db.scan(b"b", b"e")
    assert keys(rows) == [b"b", b"d"]
    assert [kv.value for kv in rows] == [b"vb", b"vd"]


def test_reverse_scan_returns_keys_in_descending_order(db: DB) -> None:
    fill(db, b"abcde")
    assert keys(db.scan(b"a", b"z", reverse=True)) == [b"e", b"d", b"c", b"b", b"a"]


@pytest.mark.parametrize(
    ("reverse", "limit", "expected"),
    [
        (False, 2, [b"a", b"b"]),
        (True, 2, [b"e", b"d"]),
        (False, 0, []),
        (False, 10, [b"a", b"b", b"c", b"d", b"e"]),
    ],
)
def test_scan_limit_returns_at_most_that_many_rows_from_the_scan_start(
    db: DB, reverse: bool, limit: int, expected: list[bytes]
) -> None:
    fill(db, b"abcde")
    assert keys(db.scan(*ALL, limit=limit, reverse=reverse)) == expected


def test_a_zero_limit_scan_starting_at_an_existing_key_returns_no_rows(db: DB) -> None:
    fill(db, b"abc")
    assert db.scan(b"a", b"z", limit=0) == []


def test_scan_as_of_an_old_timestamp_sees_the_keys_and_values_of_then(db: DB) -> None:
    fill(db, b"abc", b"old")
    then = db.now()
    db.put(b"b", b"new")
    db.delete(b"c")
    db.put(b"d", b"born later")
    old = db.scan(*ALL, as_of=then)
    assert [(kv.key, kv.value) for kv in old] == [(b"a", b"olda"), (b"b", b"oldb"), (b"c", b"oldc")]
    assert all(kv.ts <= then for kv in old)
    now = db.scan(*ALL)
    assert [(kv.key, kv.value) for kv in now] == [
        (b"a", b"olda"),
        (b"b", b"new"),
        (b"d", b"born later"),
    ]


@pytest.mark.parametrize(
    ("reverse", "limit", "expected"),
    [
        pytest.param(False, None, list(b"abcdefghij"), id="forward"),
        pytest.param(True, None, list(reversed(b"abcdefghij")), id="reverse"),
        pytest.param(False, 5, list(b"abcde"), id="forward-limit"),
        pytest.param(True, 5, list(b"jihgf"), id="reverse-limit"),
        pytest.param(False, 3, list(b"abc"), id="first-range-holds-exactly-the-limit"),
        pytest.param(True, 4, list(b"jihg"), id="last-range-holds-exactly-the-limit-reverse"),
    ],
)
def test_scan_across_split_ranges_returns_each_key_once_in_order(
    db: DB, reverse: bool, limit: int | None, expected: list[int]
) -> None:
    fill(db, b"abcdefghij")
    db.split(b"d")
    db.split(b"g")
    rows = db.scan(*ALL, limit=limit, reverse=reverse)
    assert keys(rows) == [bytes([c]) for c in expected]
    assert len(db.ranges()) == 3


class _WriteAfterFirstScan:
    """A transport that lets another client write into the next range as soon as the
    first range has answered a scan."""

    def __init__(self, inner: object, store: Store, write: Put) -> None:
        self._inner = inner
        self._store = store
        self._write = write
        self.written_at: Timestamp | None = None
        self.scan_timestamps: list[Timestamp] = []

    def send(self, batch: BatchRequest) -> BatchResponse:
        response = self._store.send(batch)
        if any(isinstance(r, Scan) for r in batch.requests):
            self.scan_timestamps.append(response.timestamp)
            if self.written_at is None:
                done = self._store.send(BatchRequest(Header(), (self._write,)))
                self.written_at = done.timestamp
        return response

    def now(self) -> Timestamp:
        return self._store.clock.now()

    def close(self) -> None:
        pass


def test_scan_across_ranges_reads_every_range_at_the_first_ranges_timestamp(
    db: DB, store: Store
) -> None:
    fill(db, b"aj")
    db.split(b"d")
    db.split(b"g")
    spy = _WriteAfterFirstScan(db.transport, store, Put(b"e", b"written mid-scan"))
    rows = KVClient(spy).scan(*ALL)
    assert keys(rows) == [b"a", b"j"]
    assert len(spy.scan_timestamps) == 3
    assert len(set(spy.scan_timestamps)) == 1
    assert spy.written_at is not None and spy.written_at > spy.scan_timestamps[0]
    assert db.get(b"e") == b"written mid-scan"


# Ranges.


def test_split_and_merge_bump_generations_and_ranges_reports_them(db: DB) -> None:
    [only] = db.ranges()
    assert (only.range_id, only.span.start, only.span.end, only.generation) == (1, b"", KEY_MAX, 0)

    left, right = db.split(b"m")
    assert (left.range_id, left.start, left.end, left.generation) == (1, b"", b"m", 1)
    assert (right.start, right.end, right.generation) == (b"m", KEY_MAX, 1)
    assert right.range_id != left.range_id
    assert [(r.range_id, r.span, r.generation) for r in db.ranges()] == [
        (left.range_id, left.span, 1),
        (right.range_id, right.span, 1),
    ]

    db.split(b"t")
    merged = db.merge(b"a")
    assert (merged.range_id, merged.start, merged.end) == (1, b"", b"t")
    assert merged.generation == 3
    assert [(r.span.start, r.span.end) for r in db.ranges()] == [(b"", b"t"), (b"t", KEY_MAX)]


def test_a_split_at_an_existing_boundary_changes_nothing(db: DB) -> None:
    db.split(b"m")
    before = db.ranges()
    left, right = db.split(b"m")
    assert (left.end, right.start) == (b"m", b"m")
    assert db.ranges() == before


def test_a_split_whose_answer_was_lost_is_asked_again(
    db: DB, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A split applied whose answer never came back (its lease moved with it in
    flight: AmbiguousResultError) is asked again, and answers the split it made."""
    lost: list[BatchRequest] = []

    def send_losing_the_first_split_answer(batch: BatchRequest) -> BatchResponse:
        response = store.send(batch)
        if any(isinstance(r, Split) for r in batch.requests) and not lost:
            lost.append(batch)
            raise AmbiguousResultError("the lease moved with the split in flight")
        return response

    monkeypatch.setattr(db.transport, "send", send_losing_the_first_split_answer)
    left, right = db.split(b"m")
    assert lost and (left.end, right.start) == (b"m", b"m")
    assert [r.span.start for r in db.ranges()][-1] == b"m"


def test_ranges_report_closed_timestamps_that_follow_the_clock(
    db: DB, clock: ManualClock, config: StoreConfig, wait_until: Callable[..., bool]
) -> None:
    db.split(b"m")
    clock.advance(5 * config.closed_ts_target_ns)
    now = db.now()
    target = Timestamp(now.wall - config.closed_ts_target_ns, 0)
    assert wait_until(lambda: all(r.closed_ts >= target for r in db.ranges()))
    assert all(r.closed_ts < now for r in db.ranges())

    merged = db.merge(b"a")
    [info] = db.ranges()
    assert info.range_id == merged.range_id
    assert info.closed_ts >= target


def test_both_halves_of_a_split_keep_their_parents_closed_timestamp(
    db: DB, clock: ManualClock, config: StoreConfig, wait_until: Callable[..., bool]
) -> None:
    clock.advance(3 * config.closed_ts_target_ns)
    now = db.now()
    assert wait_until(
        lambda: db.ranges()[0].closed_ts >= Timestamp(now.wall - config.closed_ts_target_ns)
    )
    db.split(b"m")
    left, right = db.ranges()
    assert right.closed_ts >= Timestamp(now.wall - config.closed_ts_target_ns)
    assert left.closed_ts >= Timestamp(now.wall - config.closed_ts_target_ns)


def test_client_routes_correctly_after_a_split_behind_its_back(db: DB, store: Store) -> None:
    db.put(b"a", b"1")
    db.put(b"z", b"1")
    store.send(BatchRequest(Header(), (Split(b"k"),)))
    store.send(BatchRequest(Header(), (Split(b"s"),)))

    assert db.get(b"z") == b"1"
    db.put(b"q", b"2")
    db.put(b"a", b"2")
    assert db.get(b"a") == b"2"
    assert [(kv.key, kv.value) for kv in db.scan(*ALL)] == [
        (b"a", b"2"),
        (b"q", b"2"),
        (b"z", b"1"),
    ]
    assert keys(db.scan(*ALL, reverse=True)) == [b"z", b"q", b"a"]


def test_client_routes_correctly_after_a_merge_behind_its_back(db: DB, store: Store) -> None:
    db.split(b"k")
    db.put(b"a", b"1")
    db.put(b"z", b"1")
    store.send(BatchRequest(Header(), (Merge(b"a"),)))

    assert db.get(b"z") == b"1"
    db.put(b"z", b"2")
    assert db.get(b"z") == b"2"
    assert keys(db.scan(*ALL)) == [b"a", b"z"]
    assert len(db.ranges()) == 1


def test_a_transaction_commits_after_a_split_behind_the_clients_back(db: DB, store: Store) -> None:
    # The client's range cache still holds one range over both keys.
    db.put(b"a", b"1")
    db.put(b"z", b"1")
    store.send(BatchRequest(Header(), (Split(b"k"),)))

    with db.transaction() as txn:
        txn.put(b"a", b"2")
        txn.put(b"z", b"2")

    assert (db.get(b"a"), db.get(b"z")) == (b"2", b"2")


def test_a_reopened_store_keeps_its_data_and_ranges(
    tmp_path: Path, clock: ManualClock, config: StoreConfig
) -> None:
    with feedkv.connect(tmp_path / "store", clock=clock, config=config) as first:
        first.put(b"a", b"kept")
        first.split(b"m")
        first.put(b"x", b"kept too")
    with feedkv.connect(tmp_path / "store", clock=clock, config=config) as second:
        assert second.get(b"a") == b"kept"
        assert second.get(b"x") == b"kept too"
        assert [r.span.start for r in second.ranges()] == [b"", b"m"]


def test_a_second_connect_to_an_open_store_is_refused_naming_the_owner(
    db: DB, tmp_path: Path
) -> None:
    with pytest.raises(StoreLockedError, match=str(os.getpid())):
        feedkv.connect(tmp_path / "store")
    assert db.get(b"still usable") is None


# Bad input.

BIG = b"x" * (MAX_VALUE_BYTES + 1)

BAD_CALLS: list[tuple[str, Callable[[DB], object], type[FeedKVError], str]] = [
    ("str key", lambda db: db.put("k", b"v"), InvalidKeyError, "not str"),  # type: ignore[arg-type]
    ("str value", lambda db: db.put(b"k", "v"), InvalidArgumentError, "not str"),  # type: ignore[arg-type]
    ("None value", lambda db: db.put(b"k", None), InvalidArgumentError, "not NoneType"),  # type: ignore[arg-type]
    ("empty key", lambda db: db.put(b"", b"v"), InvalidKeyError, "empty key"),
    ("empty key delete", lambda db: db.delete(b""), InvalidKeyError, "empty key"),
    ("empty key get", lambda db: db.get(b""), InvalidKeyError, "empty key"),
    ("int key get", lambda db: db.get(7), InvalidKeyError, "not int"),  # type: ignore[arg-type]
    (
        "key too long",
        lambda db: db.put(b"k" * (MAX_KEY_BYTES + 1), b"v"),
        InvalidKeyError,
        "longer than the limit",
    ),
    ("key at KEY_MAX", lambda db: db.put(KEY_MAX, b"v"), InvalidKeyError, "KEY_MAX"),
    ("value over 16 MiB", lambda db: db.put(b"k", BIG), ValueTooLargeError, "exceeds the limit"),
    ("inverted scan", lambda db: db.scan(b"z", b"a"), InvalidSpanError, "must sort after"),
    ("str scan bound", lambda db: db.scan("a", b"z"), InvalidSpanError, "bytes"),  # type: ignore[arg-type]
    ("negative limit", lambda db: db.scan(*ALL, limit=-1), InvalidArgumentError, ">= 0"),
    ("split at empty key", lambda db: db.split(b""), InvalidKeyError, "empty key"),
    ("merge last range", lambda db: db.merge(b"q"), InvalidArgumentError, "last range"),
]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [case[1:] for case in BAD_CALLS],
    ids=[case[0] for case in BAD_CALLS],
)
def test_bad_input_fails_with_a_clear_error_and_writes_nothing(
    db: DB,
    store: Store,
    call: Callable[[DB], object],
    error: type[FeedKVError],
    message: str,
) -> None:
    db.split(b"m")
    db.put(b"k", b"original")
    before = dump(store)
    with pytest.raises(error, match=message):
        call(db)
    assert dump(store) == before
    assert db.get(b"k") == b"original"


@pytest.mark.parametrize(
    "target",
    ["http://x", "feedkv://host", "feedkv://h:99999", "feedkv://h:0", "feedkv://:1", ""],
)
def test_connect_rejects_targets_that_are_neither_a_url_nor_a_directory(target: str) -> None:
    with pytest.raises(InvalidURLError, match="cannot connect to") as info:
        feedkv.connect(target)
    assert isinstance(info.value, ValueError)
    assert repr(target) in str(info.value)
