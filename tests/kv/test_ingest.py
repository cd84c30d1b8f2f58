"""KVClient.ingest: a bulk load's committed values at one timestamp, range by range, as
Ingest commands (each checked and written as a batch, all of it or none)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import ConditionFailedError
from feedkv.kv.api import BatchRequest, EndTxn, Header, HeartbeatTxn, Ingest, Transaction
from feedkv.kv.store import Store, StoreConfig
from feedkv.rangefeed.event import Value
from feedkv.storage import mvcc
from feedkv.storage.mvcc import KeyValue
from feedkv.testing.feed_validator import read_until_resolved
from feedkv.testing.node_process import NodeProcess
from feedkv.util.hlc import ManualClock
from feedkv.util.keys import Span

DEADLINE_S = 30.0


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


def test_ingest_lands_above_a_read_served_at_its_timestamp(db: DB, clock: ManualClock) -> None:
    clock.advance(1_000_000)
    ts = db.now()
    clock.advance(1_000_000)
    read_at = db.now()
    assert db.get(b"b", as_of=read_at) is None  # the timestamp cache now holds read_at
    highest = db.ingest(pairs_of(b"abc"), ts)
    assert highest > read_at
    assert db.get(b"b", as_of=read_at) is None  # the read still reads what it read
    assert db.get(b"b") == b"vb"


def test_an_ingest_in_a_transaction_writes_intents_its_commit_resolves(
    store: Store, db: DB
) -> None:
    now = db.now()
    txn = Transaction(b"t" * 16, b"a", 0, now, now, 1)
    span = Span(b"a", b"c")
    request = Ingest(span, (b"a", b"b"), (b"1", b"2"))
    store.send(BatchRequest(Header(txn=txn), (HeartbeatTxn(), request)))
    with store.engine.snapshot() as snap:
        intents = mvcc.scan_intents(snap, span)
    assert [(i.key, i.txn.id) for i in intents] == [(b"a", txn.id), (b"b", txn.id)]
    assert db.get(b"a", as_of=now.prev()) is None  # below the intents: not seen
    store.send(BatchRequest(Header(txn=txn), (EndTxn(True, (span,)),)))
    assert [(kv.key, kv.value, kv.ts) for kv in db.scan(b"a", b"z")] == [
        (b"a", b"1", now),
        (b"b", b"2", now),
    ]


def test_a_feed_sees_every_ingested_value_as_a_put(tmp_path: Path) -> None:
    config = StoreConfig(closed_ts_target_ns=50_000_000, closed_ts_interval_s=0.01, sync=False)
    db = feedkv.connect(tmp_path / "store", config=config)
    try:
        since = db.now()
        with db.rangefeed([Span(b"a", b"z")], since) as feed:
            highest = db.ingest(pairs_of(b"abcdef"), db.now(), batch=4)
            events = read_until_resolved(feed, highest, timeout_s=DEADLINE_S)
        values = [(e.key, e.value, e.ts) for e in events if isinstance(e, Value)]
        assert sorted(values) == [(k, v, highest) for k, v in pairs_of(b"abcdef")]
    finally:
        db.close()


def test_a_range_grown_too_big_by_ingests_splits(
    tmp_path: Path, wait_until: Callable[..., bool]
) -> None:
    config = StoreConfig(range_max_bytes=64 << 10, range_min_bytes=1 << 10, sync=False)
    db = feedkv.connect(tmp_path / "store", config=config)
    try:
        pairs = [(b"k%06d" % i, b"x" * 100) for i in range(3000)]  # about 350 KB
        db.ingest(pairs, db.now(), batch=500)
        assert wait_until(lambda: len(db.ranges()) > 2, DEADLINE_S)
        assert len(db.scan(b"k", b"l")) == 3000
    finally:
        db.close()


_INGESTER = """
import sys
import feedkv
from feedkv.kv.store import StoreConfig

db = feedkv.connect(sys.argv[1], config=StoreConfig(sync=True))
for n in range(10_000):
    pairs = [(b"b%05d/%04d" % (n, i), b"v" * 50) for i in range(2000)]
    db.ingest(pairs, db.now())
    print(n, flush=True)
"""


def test_a_crash_during_ingests_leaves_each_batch_whole_or_absent(tmp_path: Path) -> None:
    """SIGKILL while batches of 2,000 keys are written: after the restart every batch
    acknowledged is there whole, and any other is there whole or not at all."""
    store = tmp_path / "store"
    child = subprocess.Popen(
        [sys.executable, "-c", _INGESTER, str(store)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert child.stdout is not None
    acknowledged = -1
    for line in child.stdout:
        acknowledged = int(line.split()[0])
        if acknowledged >= 3:
            break
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert acknowledged >= 3, "the ingesting process ended before its fourth batch"
    db = feedkv.connect(store)
    try:
        counts: dict[bytes, int] = {}
        for kv in db.scan(b"b", b"c"):
            batch = kv.key.split(b"/")[0]
            counts[batch] = counts.get(batch, 0) + 1
    finally:
        db.close()
    assert all(b"b%05d" % n in counts for n in range(acknowledged + 1))
    assert set(counts.values()) == {2000}, {b: c for b, c in counts.items() if c != 2000}


def test_ingest_reaches_a_node_over_the_wire(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "store", "--insecure")
    try:
        db = feedkv.connect(node.url)
        try:
            ts = db.now()
            assert db.ingest(pairs_of(b"abc"), ts) >= ts
            with pytest.raises(ConditionFailedError) as caught:
                db.ingest(pairs_of(b"cd"), db.now())
            assert caught.value.key == b"c"
            assert [(kv.key, kv.value) for kv in db.scan(b"a", b"z")] == pairs_of(b"abc")
        finally:
            db.close()
    finally:
        node.process.terminate()
        node.process.wait(timeout=60)
