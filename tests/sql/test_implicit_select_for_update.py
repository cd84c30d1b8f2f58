"""UPDATE and DELETE read the rows they write with locks (CockroachDB's implicit SELECT FOR
UPDATE, session variable ``enable_implicit_select_for_update``): a second writer of the
row waits for the first instead of one of the two failing with 40001."""

from __future__ import annotations

import threading
from typing import Any

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.kv.store import Store
from feedkv.sql.session import Session
from feedkv.testing.waiting import release_when, run_threads


def _store(db: DB) -> Store:
    node = db.node
    assert node is not None
    return node.store


def _balance(db: DB, k: int) -> Any:
    return db.sql("SELECT v FROM t WHERE k = $1", k).rows[0][0]


def _table(db: DB, rows: int = 2) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    for k in range(1, rows + 1):
        db.sql("INSERT INTO t VALUES ($1, 0)", k)


def test_two_updates_of_one_row_both_commit_in_turn(db: DB) -> None:
    _table(db)
    first, second = db.session(), db.session()
    first.execute("BEGIN")
    first.execute("UPDATE t SET v = v + 1 WHERE k = 1")
    second.execute("BEGIN")
    second.execute("SELECT v FROM t WHERE k = 2")  # its reads start before the first's commit

    def update_second() -> None:
        second.execute("UPDATE t SET v = v + 10 WHERE k = 1")
        second.execute("COMMIT")

    release_when(
        update_second,
        until=lambda: _store(db).locks.waiters() == 1,  # the second waits for the first's lock
        then=lambda: first.execute("COMMIT"),
        what="a lock waiter",
    )
    assert _balance(db, 1) == 11
    assert len(_store(db).locks) == 0


def test_lock_off_goes_back_to_a_serialization_failure(db: DB) -> None:
    _table(db)
    first, second = db.session(), db.session()
    second.execute("SET enable_implicit_select_for_update = false")
    assert second.execute("SHOW enable_implicit_select_for_update").rows == [("off",)]
    first.execute("SET enable_implicit_select_for_update = off")
    first.execute("BEGIN")
    first.execute("UPDATE t SET v = v + 1 WHERE k = 1")
    second.execute("BEGIN")
    second.execute("UPDATE t SET v = v + 10 WHERE k = 1")  # no lock: it does not wait
    first.execute("COMMIT")
    try:
        second.execute("COMMIT")
        code = "ok"
    except SQLError as exc:
        code = exc.code
    assert code == "40001"
    assert _balance(db, 1) == 1
    assert len(_store(db).locks) == 0


def test_deadlock_fails_one_transaction_and_the_other_commits(db: DB) -> None:
    _table(db)
    first, second = db.session(), db.session()
    first.execute("BEGIN")
    first.execute("UPDATE t SET v = v + 1 WHERE k = 1")
    second.execute("BEGIN")
    second.execute("UPDATE t SET v = v + 1 WHERE k = 2")
    outcomes: dict[str, str] = {}
    lock = threading.Lock()

    def cross(name: str, session: Session, k: int) -> None:
        try:
            session.execute("UPDATE t SET v = v + 10 WHERE k = $1", k)
            session.execute("COMMIT")
            outcome = "committed"
        except SQLError as exc:
            session.execute("ROLLBACK")
            outcome = exc.code
        with lock:
            outcomes[name] = outcome

    run_threads([lambda: cross("first", first, 2), lambda: cross("second", second, 1)])
    assert sorted(outcomes.values()) == ["40001", "committed"], outcomes
    winner = next(name for name, outcome in outcomes.items() if outcome == "committed")
    # the winner's two updates landed, the loser's none
    assert sorted([_balance(db, 1), _balance(db, 2)]) == [1, 10]
    assert (_balance(db, 1), _balance(db, 2)) == ((1, 10) if winner == "first" else (10, 1))
    assert len(_store(db).locks) == 0


def test_concurrent_increments_of_hot_rows_lose_none(any_db: DB) -> None:
    db = any_db  # NB: over gRPC too, where the locking read's flag crosses the wire
    _table(db, rows=2)
    workers, rounds = 6, 10
    committed = [0] * workers

    def increment(worker: int) -> None:
        session = db.session()
        for n in range(rounds):
            hot = 1 + (worker + n) % 2
            try:
                session.execute("BEGIN")
                session.execute("UPDATE t SET v = v + 1 WHERE k = $1", hot)
                session.execute("UPDATE t SET v = v + 1 WHERE k = $1", 3 - hot)
                session.execute("COMMIT")
                committed[worker] += 1
            except SQLError as exc:
                assert exc.code == "40001", exc
                session.execute("ROLLBACK")

    run_threads([lambda w=w: increment(w) for w in range(workers)], deadline_s=120)
    total = sum(committed)
    assert total > 0
    # every committed transaction added one to each row, and no other did
    assert (_balance(db, 1), _balance(db, 2)) == (total, total)
    if db.node is not None:
        assert len(_store(db).locks) == 0


def test_delete_locks_the_rows_it_deletes(db: DB) -> None:
    _table(db)
    first, second = db.session(), db.session()
    first.execute("BEGIN")
    first.execute("DELETE FROM t WHERE k = 1")
    second.execute("BEGIN")
    second.execute("SELECT v FROM t WHERE k = 2")

    def update_second() -> None:
        assert second.execute("UPDATE t SET v = 5 WHERE k = 1").tag == "UPDATE 0"
        second.execute("COMMIT")

    release_when(
        update_second,
        until=lambda: _store(db).locks.waiters() == 1,  # the second waits for the first's lock
        then=lambda: first.execute("COMMIT"),
        what="a lock waiter",
    )
    assert db.sql("SELECT k FROM t").rows == [(2,)]


def test_on_conflict_do_update_locks_the_row_it_updates(db: DB) -> None:
    _table(db)
    statement = "INSERT INTO t VALUES ($1, 1) ON CONFLICT (k) DO UPDATE SET v = t.v + excluded.v"
    first, second = db.session(), db.session()
    first.execute("BEGIN")
    first.execute(statement, 1)
    second.execute("BEGIN")
    second.execute("SELECT v FROM t WHERE k = 2")

    def upsert_second() -> None:
        second.execute(statement, 1)
        second.execute(statement, 3)  # no row: inserted, nothing to lock
        second.execute("COMMIT")

    release_when(
        upsert_second,
        until=lambda: _store(db).locks.waiters() == 1,  # the second waits for the first's lock
        then=lambda: first.execute("COMMIT"),
        what="a lock waiter",
    )
    assert db.sql("SELECT k, v FROM t ORDER BY k").rows == [(1, 2), (2, 0), (3, 1)]
    assert len(_store(db).locks) == 0
