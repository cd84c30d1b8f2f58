"""Savepoints of a transaction: rolling back undoes the writes since, across ranges, and a
rolled-back write never commits nor reaches a range's observers."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as strats

from feedkv import DB
from feedkv.errors import ConditionFailedError, TransactionStatusError
from feedkv.kv.observer import RangeEndReason
from feedkv.kv.store import Store
from feedkv.storage import logical_ops as ops
from feedkv.storage.mvcc import scan_intents
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

ALL = (b"\x00", b"\xff")


class Written:
    """A range observer that keeps the keys of every write it is handed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.keys: set[bytes] = set()

    def on_ops(self, batch: Sequence[ops.LogicalOp]) -> None:
        with self._lock:
            for op in batch:
                key = getattr(op, "key", None)
                if key is not None:
                    self.keys.add(key)

    def on_closed(self, closed_ts: Timestamp) -> None:
        pass

    def on_range_ended(self, reason: RangeEndReason) -> None:
        pass


def watch(store: Store) -> Written:
    written = Written()
    for desc in store.descriptors():
        _desc, snap = store.observe(desc.range_id, written)
        snap.close()
    return written


def rows(db: DB) -> list[tuple[bytes, bytes]]:
    return [(kv.key, kv.value) for kv in db.scan(*ALL)]


@pytest.fixture(params=["one range", "two ranges"])
def layout(request: pytest.FixtureRequest, db: DB) -> str:
    if request.param == "two ranges":
        db.split(b"m")
    return str(request.param)


def test_rollback_to_a_savepoint_undoes_the_writes_since_and_they_never_commit(
    db: DB, store: Store, layout: str
) -> None:
    db.put(b"a", b"before")
    db.put(b"x", b"before")
    written = watch(store)
    with db.transaction() as txn:
        txn.put(b"b", b"kept")
        mark = txn.savepoint()
        txn.put(b"a", b"undone")
        txn.delete(b"x")
        txn.put(b"y", b"undone")
        assert txn.get(b"y") == b"undone"
        txn.rollback_to(mark)
        assert txn.get(b"a") == b"before"
        assert txn.get(b"x") == b"before"
        assert txn.get(b"y") is None
        assert [kv.key for kv in txn.scan(*ALL)] == [b"a", b"b", b"x"]
        txn.put(b"z", b"after")
    assert rows(db) == [(b"a", b"before"), (b"b", b"kept"), (b"x", b"before"), (b"z", b"after")]
    assert written.keys == {b"b", b"z"}  # no op ever named a rolled-back key
    with store.engine.snapshot() as snap:
        assert scan_intents(snap, Span(KEY_MIN, KEY_MAX)) == []


def test_nested_savepoints_roll_back_inner_then_outer(db: DB) -> None:
    with db.transaction() as txn:
        txn.put(b"a", b"1")
        outer = txn.savepoint()
        txn.put(b"a", b"2")
        inner = txn.savepoint()
        txn.put(b"a", b"3")
        txn.put(b"b", b"3")
        txn.rollback_to(inner)
        assert (txn.get(b"a"), txn.get(b"b")) == (b"2", None)
        txn.put(b"c", b"2")
        txn.rollback_to(outer)  # also undoes what came after the inner savepoint
        assert (txn.get(b"a"), txn.get(b"c")) == (b"1", None)
        txn.release(inner)
        txn.release(outer)
    assert rows(db) == [(b"a", b"1")]


def test_a_released_savepoint_keeps_its_writes_for_an_outer_rollback(db: DB) -> None:
    with db.transaction() as txn:
        outer = txn.savepoint()
        txn.put(b"a", b"1")
        inner = txn.savepoint()
        txn.put(b"b", b"1")
        txn.release(inner)
        assert txn.get(b"b") == b"1"
        txn.rollback_to(outer)  # the outer still undoes the released one's writes
        txn.put(b"c", b"1")
    assert rows(db) == [(b"c", b"1")]


def test_a_rolled_back_insert_check_no_longer_applies(db: DB) -> None:
    db.put(b"k", b"exists")
    with db.transaction() as txn:
        mark = txn.savepoint()
        txn.put_if_present(b"gone", b"v")  # would fail at commit: no such key
        txn.rollback_to(mark)
        txn.put(b"gone", b"v")
    assert rows(db) == [(b"gone", b"v"), (b"k", b"exists")]
    txn = db.transaction()
    mark = txn.savepoint()
    txn.put_if_absent(b"new", b"v")
    txn.rollback_to(mark)
    txn.put_if_absent(b"k", b"v")  # checked at commit, against the store
    with pytest.raises(ConditionFailedError):
        txn.commit()


def test_rollback_past_an_intent_sent_at_once_is_refused_and_undoes_nothing(
    db: DB, store: Store
) -> None:
    txn = db.transaction()
    mark = txn.savepoint()
    txn.put(b"a", b"buffered")
    txn.put_now(b"d", b"descriptor")
    with pytest.raises(TransactionStatusError, match="intent"):
        txn.rollback_to(mark)
    assert txn.get(b"a") == b"buffered"
    txn.commit()
    assert rows(db) == [(b"a", b"buffered"), (b"d", b"descriptor")]


def test_savepoints_of_an_ended_transaction_are_refused(db: DB) -> None:
    txn = db.transaction()
    mark = txn.savepoint()
    txn.rollback()
    with pytest.raises(TransactionStatusError):
        txn.rollback_to(mark)
    with pytest.raises(TransactionStatusError):
        txn.savepoint()


# A model check: any sequence of writes, savepoints, releases and rollbacks commits what a
# stack of copies of the buffer says it should, and a scan in between reads it (the scan
# finds the buffered writes of its span among the written keys kept in order).

_KEYS = [b"a", b"k", b"q", b"z"]
_steps = strats.lists(
    strats.one_of(
        strats.tuples(strats.just("put"), strats.sampled_from(_KEYS), strats.binary(max_size=3)),
        strats.tuples(strats.just("delete"), strats.sampled_from(_KEYS)),
        strats.just(("savepoint",)),
        strats.tuples(strats.just("release"), strats.integers(0, 3)),
        strats.tuples(strats.just("rollback"), strats.integers(0, 3)),
        strats.tuples(strats.just("scan"), strats.sampled_from(_KEYS), strats.integers(1, 4)),
    ),
    max_size=25,
)
_prefixes = itertools.count()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_steps)
def test_savepoints_agree_with_a_stack_of_buffer_copies(db: DB, steps: list[tuple]) -> None:
    prefix = b"t%d/" % next(_prefixes)
    db.put(prefix + b"k", b"committed")
    model: dict[bytes, bytes | None] = {}

    def now() -> dict[bytes, bytes]:
        rows = {b"k": b"committed"}
        for key, value in model.items():
            if value is None:
                rows.pop(key, None)
            else:
                rows[key] = value
        return rows

    held: list[tuple[object, dict[bytes, bytes | None]]] = []
    with db.transaction() as txn:
        for step in steps:
            if step[0] == "put":
                txn.put(prefix + step[1], step[2])
                model[step[1]] = step[2]
            elif step[0] == "delete":
                txn.delete(prefix + step[1])
                model[step[1]] = None
            elif step[0] == "savepoint":
                held.append((txn.savepoint(), dict(model)))
            elif step[0] == "scan":
                start = _KEYS.index(step[1])
                keys = _KEYS[start : start + step[2]]
                end = prefix + keys[-1] + b"\x00"
                scanned = {
                    kv.key[len(prefix) :]: kv.value for kv in txn.scan(prefix + keys[0], end)
                }
                assert scanned == {k: v for k, v in now().items() if k in keys}
            elif held:
                index = step[1] % len(held)
                if step[0] == "release":
                    for mark, _copy in reversed(held[index:]):
                        txn.release(mark)  # type: ignore[arg-type]
                    del held[index:]
                else:
                    for mark, _copy in reversed(held[index + 1 :]):
                        txn.release(mark)  # type: ignore[arg-type]
                    del held[index + 1 :]
                    txn.rollback_to(held[index][0])  # type: ignore[arg-type]
                    model = dict(held[index][1])
    expected = now()
    found = {kv.key[len(prefix) :]: kv.value for kv in db.scan(prefix, prefix + b"\xff")}
    assert found == expected
