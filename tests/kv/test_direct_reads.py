"""Reads beside the commit thread: a read-only batch runs on the caller's thread against
the committed state unless a write it overlaps is evaluated and not yet durable; then it
goes through the commit queue, in order with the writes. Which way a read went shows in
the engine's job count (only queued work is counted)."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from feedkv import DB
from feedkv.kv.api import (
    BatchRequest,
    EndTxn,
    Get,
    Header,
    Put,
    RangeLookup,
    Scan,
    Split,
    Transaction,
)
from feedkv.kv.command import batch_spans
from feedkv.kv.store import Store, StoreConfig
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

TS = Timestamp(10, 0)


@pytest.fixture
def config(config: StoreConfig) -> StoreConfig:
    """No closed-timestamp jobs while a test counts the queued ones."""
    return dataclasses.replace(config, closed_ts_interval_s=3600.0)


def batch(*requests: object, txn: Transaction | None = None) -> BatchRequest:
    return BatchRequest(Header(txn=txn), tuple(requests))  # type: ignore[arg-type]


def get(store: Store, key: bytes) -> bytes | None:
    response = store.send(batch(Get(key)))
    return response.responses[0].value  # type: ignore[union-attr]


def queued_jobs(store: Store) -> int:
    return store.engine.stats.jobs


# The spans a batch touches.


def test_a_batch_touches_the_keys_and_spans_of_its_requests() -> None:
    spans = batch_spans(batch(Get(b"a"), Put(b"c", b"v"), Scan(Span(b"x", b"z"))))
    assert spans == (Span.for_key(b"a"), Span.for_key(b"c"), Span(b"x", b"z"))


def test_a_commit_touches_its_record_and_every_intent_it_resolves() -> None:
    txn = Transaction(uuid.uuid4().bytes, b"anchor", 0, TS, TS, 1)
    end = EndTxn(True, (Span(b"m", b"p"),))
    assert batch_spans(batch(end, txn=txn)) == (Span.for_key(b"anchor"), Span(b"m", b"p"))


def test_a_split_touches_the_range_map_itself() -> None:
    assert batch_spans(batch(Split(b"k"))) is None


def test_a_range_lookup_touches_no_key() -> None:
    assert batch_spans(batch(RangeLookup(b"k"))) == ()


# Which way a read goes.


def test_a_read_with_nothing_in_flight_runs_on_the_callers_thread(db: DB, store: Store) -> None:
    db.put(b"k", b"v")
    before = queued_jobs(store)
    assert get(store, b"k") == b"v"
    assert queued_jobs(store) == before


def test_a_read_of_a_key_being_synced_goes_through_the_commit_queue(db: DB, store: Store) -> None:
    db.put(b"k", b"v")
    # NB: the state a write is in between its evaluation and its fsync, held open here.
    store._in_flight.add(batch(Put(b"k", b"v2")))
    try:
        before = queued_jobs(store)
        assert get(store, b"k") == b"v"
        assert queued_jobs(store) == before + 1
        assert get(store, b"other") is None
        assert queued_jobs(store) == before + 1  # a key not being written: direct
    finally:
        store._in_flight.clear()


def test_a_split_being_synced_sends_every_read_through_the_commit_queue(
    db: DB, store: Store
) -> None:
    store._in_flight.add(batch(Split(b"k")))
    try:
        before = queued_jobs(store)
        assert get(store, b"anything") is None
        assert queued_jobs(store) == before + 1
    finally:
        store._in_flight.clear()


def test_a_write_is_in_flight_only_until_it_is_durable(db: DB, store: Store) -> None:
    db.put(b"k", b"v")
    assert not store._in_flight.blocks((Span.for_key(b"k"),))
