"""Bank transfers: concurrent serializable transactions across ranges that split and merge
underneath them. Money is never created or destroyed at any timestamp, and every committed
transaction's reads are exactly what the store held just below its commit timestamp (so no
lost update and no write skew)."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

import feedkv
from feedkv.errors import FeedKVError, InvalidArgumentError
from feedkv.kv.store import StoreConfig
from feedkv.kv.txn import Txn
from feedkv.server.node import Node
from feedkv.storage.mvcc import scan_intents
from feedkv.testing.waiting import run_threads, wait_until
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

ACCOUNTS = 16
START_BALANCE = 100
TOTAL = ACCOUNTS * START_BALANCE
WORKERS = 6
TRANSFERS_PER_WORKER = 25


def account(i: int) -> bytes:
    return b"acct/%03d" % i


@dataclass(frozen=True)
class Committed:
    commit_ts: Timestamp
    reads: dict[bytes, bytes]
    writes: dict[bytes, bytes]


@pytest.fixture(params=["embedded", "grpc"])
def bank(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[feedkv.DB]:
    config = StoreConfig(sync=False, push_poll_s=0.01)
    if request.param == "embedded":
        db = feedkv.connect(tmp_path / "store", config=config)
        yield db
        db.close()
        return
    with Node(tmp_path / "store", listen="127.0.0.1:0", config=config) as node:
        db = feedkv.connect(node.url)
        yield db
        db.close()


def transfer(txn: Txn, src: bytes, dst: bytes, amount: int, log: list[Committed]) -> None:
    reads = {src: txn.get(src), dst: txn.get(dst)}
    assert reads[src] is not None and reads[dst] is not None
    writes = {
        src: str(int(reads[src]) - amount).encode(),
        dst: str(int(reads[dst]) + amount).encode(),
    }
    for key, value in writes.items():
        txn.put(key, value)
    log.append(Committed(Timestamp(0, 0), reads, writes))  # commit_ts filled in by the caller


def run_workers(db: feedkv.DB, seed: int) -> list[Committed]:
    committed: list[Committed] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        rng = random.Random(seed * 100 + n)
        for _ in range(TRANSFERS_PER_WORKER):
            src, dst = (account(i) for i in rng.sample(range(ACCOUNTS), 2))
            amount = rng.randint(1, 30)
            attempts: list[tuple[Txn, list[Committed]]] = []

            def attempt(
                txn: Txn,
                attempts: list[tuple[Txn, list[Committed]]] = attempts,
                move: tuple[bytes, bytes, int] = (src, dst, amount),
            ) -> None:
                log: list[Committed] = []
                attempts.append((txn, log))
                transfer(txn, *move, log)

            db.run_transaction(attempt)
            txn, log = attempts[-1]
            assert txn.commit_ts is not None
            with lock:
                committed.append(Committed(txn.commit_ts, log[0].reads, log[0].writes))

    run_threads([partial(worker, n) for n in range(WORKERS)], deadline_s=600)
    return committed


def churn_ranges(db: feedkv.DB, stop: threading.Event, seed: int) -> list[str]:
    """Split and merge ranges at account boundaries until ``stop``; returns what it did."""
    rng = random.Random(seed)
    done: list[str] = []
    while not stop.is_set():
        boundary = account(rng.randrange(1, ACCOUNTS))
        try:
            if rng.random() < 0.6:
                db.split(boundary)
                done.append(f"split {boundary!r}")
            else:
                db.merge(boundary)
                done.append(f"merge at {boundary!r}")
        except InvalidArgumentError:
            pass  # merging the last range
        stop.wait(0.005)
    return done


def balances(db: feedkv.DB, as_of: Timestamp | None = None) -> dict[bytes, int]:
    rows = db.scan(b"acct/", b"acct0", as_of=as_of)
    return {kv.key: int(kv.value) for kv in rows}


def test_transfers_keep_the_total_and_are_serializable_while_ranges_split_and_merge(
    bank: feedkv.DB,
) -> None:
    db = bank
    for i in range(ACCOUNTS):
        db.put(account(i), str(START_BALANCE).encode())
    start = db.now()
    for i in (4, 8, 12):
        db.split(account(i))

    stop = threading.Event()
    churn: list[str] = []
    churner = threading.Thread(target=lambda: churn.extend(churn_ranges(db, stop, seed=7)))
    churner.start()
    try:
        committed = run_workers(db, seed=1)
    finally:
        stop.set()
        churner.join()

    assert len(committed) == WORKERS * TRANSFERS_PER_WORKER
    assert churn, "the range churner never ran"
    assert sum(balances(db).values()) == TOTAL

    # The total holds at every commit timestamp and just below it.
    for entry in committed:
        for ts in (entry.commit_ts, entry.commit_ts.prev()):
            assert sum(balances(db, as_of=ts).values()) == TOTAL, f"total broken at {ts}"
    assert sum(balances(db, as_of=start).values()) == TOTAL

    # Serializability in commit-timestamp order: each transaction read exactly what the
    # store held just below its commit timestamp, and its writes are what is there at it.
    for entry in sorted(committed, key=lambda e: e.commit_ts):
        for key, value in entry.reads.items():
            assert db.get(key, as_of=entry.commit_ts.prev()) == value, (
                f"txn at {entry.commit_ts} read {key!r}={value!r}, but the history says "
                f"{db.get(key, as_of=entry.commit_ts.prev())!r}"
            )
        for key, value in entry.writes.items():
            assert db.get(key, as_of=entry.commit_ts) == value
    assert len({e.commit_ts for e in committed}) == len(committed) or all(
        not (set(a.writes) & set(b.writes))
        for a in committed
        for b in committed
        if a is not b and a.commit_ts == b.commit_ts
    )


def test_no_intents_remain_once_transfers_finish(tmp_path: Path) -> None:
    config = StoreConfig(sync=False, push_poll_s=0.01)
    with feedkv.connect(tmp_path / "store", config=config) as db:
        for i in range(ACCOUNTS):
            db.put(account(i), str(START_BALANCE).encode())
        for i in (4, 8, 12):
            db.split(account(i))
        run_workers(db, seed=2)
        store = db.transport.store  # type: ignore[attr-defined]

        def intents_left() -> int:
            with store.engine.snapshot() as snap:
                return len(scan_intents(snap, Span(b"acct/", b"acct0")))

        wait_until(lambda: intents_left() == 0, what="every intent to be resolved")
        assert sum(balances(db).values()) == TOTAL


def test_write_skew_is_prevented(tmp_path: Path) -> None:
    """Two doctors on call: each leaves only if the other stays. Under serializable
    isolation at most one leaves, whichever order the commits land in."""
    with feedkv.connect(tmp_path / "store", config=StoreConfig(sync=False)) as db:
        db.split(b"doc/b")
        db.put(b"doc/a", b"on")
        db.put(b"doc/b", b"on")
        first, second = db.transaction(), db.transaction()
        for txn, me, other in ((first, b"doc/a", b"doc/b"), (second, b"doc/b", b"doc/a")):
            assert txn.get(me) == b"on" and txn.get(other) == b"on"
            txn.put(me, b"off")
        outcomes = []
        for txn in (first, second):
            try:
                txn.commit()
                outcomes.append("committed")
            except FeedKVError as exc:
                outcomes.append(type(exc).__name__)
        assert outcomes.count("committed") == 1, outcomes
        assert [db.get(b"doc/a"), db.get(b"doc/b")].count(b"on") == 1
