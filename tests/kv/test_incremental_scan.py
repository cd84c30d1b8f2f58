"""IncrementalScan (and ``Txn.scan_changes``): a transactional read of what changed in a
span since a timestamp, which applied to a copy of the span at that timestamp gives the
transaction's scan; conflicts, timestamp cache and refresh are a scan's."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import pytest

from feedkv import DB
from feedkv.errors import (
    BatchTimestampBeforeGCError,
    InvalidArgumentError,
    TransactionRetryError,
)
from feedkv.kv import wire
from feedkv.kv.api import (
    GC,
    MAX_PRIORITY,
    BatchRequest,
    BatchResponse,
    Header,
    IncrementalScan,
    IncrementalScanResponse,
    Put,
)
from feedkv.kv.store import Store
from feedkv.storage.mvcc import scan_intents
from feedkv.util.hlc import ManualClock, Timestamp
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

ALL = (b"\x00", b"\xff")
KEYS = [bytes([c]) for c in b"abcdefghijklmnopqrstuvwxyz"]


@pytest.fixture(params=["one range", "two ranges"])
def layout(request: pytest.FixtureRequest, db: DB) -> str:
    if request.param == "two ranges":
        db.split(b"m")
    return str(request.param)


def copy_at(db: DB) -> tuple[dict[bytes, bytes], Timestamp]:
    """The committed rows and the timestamp they were read at (a transaction's scan)."""
    txn = db.transaction()
    rows = {kv.key: kv.value for kv in txn.scan(*ALL)}
    read_ts = txn.read_ts
    assert read_ts is not None
    txn.commit()
    return rows, read_ts


def applied(copy: dict[bytes, bytes], changes: dict[bytes, bytes | None]) -> dict[bytes, bytes]:
    merged = dict(copy)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def random_writes(db: DB, rng: random.Random, count: int) -> None:
    for _ in range(count):
        key = rng.choice(KEYS)
        if rng.random() < 0.3:
            db.delete(key)
        else:
            db.put(key, rng.randbytes(rng.randint(0, 4)) + b"v")


@pytest.mark.parametrize("seed", range(4))
def test_changes_applied_to_an_older_copy_give_the_scan_at_the_read(
    db: DB, layout: str, seed: int
) -> None:
    rng = random.Random(seed)
    random_writes(db, rng, 30)
    copy, since = copy_at(db)
    random_writes(db, rng, rng.randint(0, 30))
    txn = db.transaction()
    changes = txn.scan_changes(*ALL, since)
    assert changes is not None
    scanned = {kv.key: kv.value for kv in txn.scan(*ALL)}
    assert applied(copy, changes) == scanned
    txn.commit()


def test_nothing_changed_gives_no_changes_and_a_deleted_key_gives_none(db: DB) -> None:
    db.put(b"a", b"1")
    db.put(b"b", b"2")
    copy, since = copy_at(db)
    txn = db.transaction()
    assert txn.scan_changes(*ALL, since) == {}
    txn.commit()
    db.delete(b"a")
    db.put(b"b", b"3")
    db.put(b"b", b"4")
    txn = db.transaction()
    assert txn.scan_changes(*ALL, since) == {b"a": None, b"b": b"4"}
    txn.commit()
    assert copy == {b"a": b"1", b"b": b"2"}


def test_a_transactions_own_buffered_writes_are_among_its_changes(db: DB, layout: str) -> None:
    db.put(b"a", b"1")
    db.put(b"z", b"1")
    _copy, since = copy_at(db)
    txn = db.transaction()
    txn.put(b"b", b"mine")
    txn.delete(b"z")
    assert txn.scan_changes(*ALL, since) == {b"b": b"mine", b"z": None}
    txn.rollback()


def test_more_changes_than_the_limit_answers_none(db: DB, layout: str) -> None:
    _copy, since = copy_at(db)
    for key in KEYS[:10]:
        db.put(key, b"v")
    txn = db.transaction()
    assert txn.scan_changes(*ALL, since, limit=5) is None
    assert txn.scan_changes(*ALL, since, limit=10) is not None
    txn.commit()


def test_a_write_below_the_read_lands_above_it(
    db: DB, store: Store, clock: ManualClock, layout: str
) -> None:
    """The timestamp cache holds the read over the whole span, as a scan's would."""
    _copy, since = copy_at(db)
    clock.advance(1_000_000)  # the write below the read is still above the copy's scan
    txn = db.transaction()
    assert txn.scan_changes(*ALL, since) == {}
    read_ts = txn.read_ts
    assert read_ts is not None
    # A key never written and not among the changes: the read covers it all the same
    below = Timestamp(read_ts.wall - 1, 0)
    response = store.send(BatchRequest(Header(timestamp=below), (Put(b"q", b"late"),)))
    assert response.timestamp > read_ts
    txn.commit()


def test_a_change_after_the_read_fails_the_refresh_of_a_pushed_transaction(
    db: DB, store: Store, layout: str
) -> None:
    """The span is among the transaction's reads: pushed, it must refresh it, and a
    version written in the span after the read fails that refresh."""
    db.put(b"c", b"1")
    _copy, since = copy_at(db)
    txn = db.transaction()
    assert txn.scan_changes(*ALL, since) == {}
    db.put(b"d", b"written after the read")
    # a read of the key the transaction will write pushes its write above the read
    db.get(b"w")
    txn.put(b"w", b"x")
    with pytest.raises(TransactionRetryError):
        txn.commit()


def test_an_open_writers_intent_is_pushed_above_the_read_as_a_scans_is(
    db: DB, store: Store, layout: str, wait_until: Callable[..., bool]
) -> None:
    _copy, since = copy_at(db)
    writer = db.transaction(priority=1)
    writer.put_now(b"c", b"intent")
    writer.put(b"y", b"other")  # two keys: a record, so the intent is pushed, not aborted
    reader = db.transaction(priority=MAX_PRIORITY)
    assert reader.scan_changes(*ALL, since) == {}
    read_ts = reader.read_ts
    assert read_ts is not None
    reader.commit()
    commit_ts = writer.commit()
    assert commit_ts > read_ts
    assert db.get(b"c") == b"intent"
    assert db.get(b"c", as_of=read_ts) is None
    with store.engine.snapshot() as snap:
        assert scan_intents(snap, Span(KEY_MIN, KEY_MAX), max_ts=read_ts) == []


def test_since_below_the_gc_threshold_is_refused(db: DB, store: Store) -> None:
    db.put(b"a", b"1")
    _copy, since = copy_at(db)
    db.put(b"a", b"2")
    threshold = db.now()
    store.send(BatchRequest(Header(), (GC(Span(KEY_MIN, KEY_MAX), threshold),)))
    txn = db.transaction()
    with pytest.raises(BatchTimestampBeforeGCError):
        txn.scan_changes(*ALL, since)
    txn.rollback()


def test_since_above_the_read_is_refused(db: DB) -> None:
    txn = db.transaction()
    txn.get(b"a")
    read_ts = txn.read_ts
    assert read_ts is not None
    with pytest.raises(InvalidArgumentError):
        txn.scan_changes(*ALL, read_ts.next())
    txn.rollback()


def test_requests_and_responses_cross_the_wire_unchanged() -> None:
    request = BatchRequest(
        Header(range_id=3), (IncrementalScan(Span(b"a", b"z"), Timestamp(5, 1), 7),)
    )
    assert wire.batch_request_from_proto(wire.batch_request_to_proto(request)) == request
    response = BatchResponse(
        (
            IncrementalScanResponse(
                (b"a", b"b", b"c"),
                (b"1", None, b""),
                (Timestamp(5, 2), Timestamp(6, 0), Timestamp(7, 0)),
            ),
            IncrementalScanResponse((), (), (), complete=False),
        ),
        Timestamp(8, 0),
    )
    assert wire.batch_response_from_proto(wire.batch_response_to_proto(response)) == response


def test_a_reader_waits_for_an_intent_it_cannot_push_and_then_reads_its_commit(
    db: DB, layout: str
) -> None:
    """As a scan does: the intent of a higher-priority writer below the read holds the
    reader until the writer commits, and the reader then sees the committed value."""
    _copy, since = copy_at(db)
    writer = db.transaction(priority=MAX_PRIORITY)
    writer.put_now(b"c", b"written")
    writer.put(b"y", b"also")
    reader = db.transaction(priority=1)
    assert reader.get(b"zz") is None  # reading from now on, above the intent
    answered = threading.Event()
    found: list[dict[bytes, bytes | None] | None] = []

    def read() -> None:
        found.append(reader.scan_changes(*ALL, since))
        answered.set()

    thread = threading.Thread(target=read)
    thread.start()
    commit_ts = writer.commit()
    assert answered.wait(30)
    thread.join()
    read_ts = reader.read_ts
    assert read_ts is not None and commit_ts <= read_ts
    assert found == [{b"c": b"written", b"y": b"also"}]
    reader.commit()
