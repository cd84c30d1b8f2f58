"""KVClient.ingest: a bulk load's committed values at one timestamp, range by range."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import ConditionFailedError
from feedkv.storage.mvcc import KeyValue
from feedkv.util.hlc import ManualClock


def pairs_of(keys: bytes) -> list[tuple[bytes, bytes]]:
    return [(bytes([c]), b"v" + bytes([c])) for c in keys]


def test_ingest_writes_every_pair_across_ranges_at_the_given_timestamp(
    db: DB, clock: ManualClock
) -> None:
    db.split(b"d")
    db.split(b"g")
    clock.advance(1_000_000)
    ts = db.now()
    written: list[int] = []
    highest = db.ingest(pairs_of(b"abcdefghij"), ts, batch=2, written=written.append)
    rows = db.scan(b"a", b"z")
    assert [(kv.key, kv.value) for kv in rows] == pairs_of(b"abcdefghij")
    assert {kv.ts for kv in rows} == {ts} == {highest}
    # commands of at most 2 pairs, none crossing a range: a-b, c | d-e, f | g-h, i-j
    assert written == [2, 3, 5, 6, 8, 10]


def test_ingest_stops_at_a_key_that_holds_a_value(db: DB) -> None:
    db.split(b"d")
    db.put(b"e", b"old")
    written: list[int] = []
    with pytest.raises(ConditionFailedError) as caught:
        db.ingest(pairs_of(b"abcdef"), db.now(), written=written.append)
    assert caught.value.key == b"e"
    assert written == [3]  # the first range's command; the second wrote nothing
    found: list[KeyValue] = db.scan(b"a", b"z")
    assert [(kv.key, kv.value) for kv in found] == [*pairs_of(b"abc"), (b"e", b"old")]


def test_ingest_below_the_closed_timestamp_lands_above_it(db: DB, clock: ManualClock) -> None:
    old = db.now()
    clock.advance(10_000_000_000)  # ten seconds: the range has closed ``old`` by now
    db.put(b"z", b"moves the closed timestamp")
    highest = db.ingest(pairs_of(b"ab"), old)
    assert highest > old
    assert {kv.ts for kv in db.scan(b"a", b"c")} == {highest}
