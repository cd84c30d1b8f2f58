"""A statement that waits for another transaction's lock ends when it is cancelled or
runs past its ``statement_timeout`` (57014), having written nothing, and the holder goes
on: in-process, and over gRPC where the node holds the wait (feedkv.kv.cancellation)."""

from __future__ import annotations

import threading

from feedkv import DB
from feedkv.kv.store import Store
from feedkv.kv.txn import _INTENT_WRITERS
from feedkv.sql.interrupt import STATEMENT_TIMEOUT, QueryCanceled
from feedkv.sql.session import Session
from feedkv.testing.waiting import wait_until

DEADLINE_S = 30.0


class _Waiter:
    """A session running ``statement`` on a thread of its own, and what it raised."""

    def __init__(self, db: DB, statement: str, *, timeout: str = "0") -> None:
        self.session: Session = db.session()
        self.session.execute(f"SET statement_timeout = '{timeout}'")
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(statement,), daemon=True)
        self._thread.start()

    def _run(self, statement: str) -> None:
        try:
            self.session.execute(statement)
        except BaseException as exc:
            self.error = exc

    def join(self) -> BaseException | None:
        self._thread.join(DEADLINE_S)
        assert not self._thread.is_alive(), "the waiting statement did not end"
        return self.error


def _held_row(db: DB) -> Session:
    """A table ``t`` with row 1, and a session whose open transaction holds that row."""
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO t VALUES (1, 1)")
    holder = db.session()
    holder.execute("BEGIN")
    holder.execute("UPDATE t SET v = 2 WHERE k = 1")
    return holder


def test_a_cancel_ends_statements_waiting_for_a_lock(any_db_and_store: tuple[DB, Store]) -> None:
    """Two waiters: over gRPC the first goes as a call of its own, the second (sent while
    the first is in flight) on the shared stream; each is given up by its own token."""
    db, store = any_db_and_store
    holder = _held_row(db)
    first = _Waiter(db, "UPDATE t SET v = 3 WHERE k = 1")
    wait_until(lambda: store.locks.waiters() == 1, timeout_s=DEADLINE_S, what="the 1st waiter")
    second = _Waiter(db, "UPDATE t SET v = 4 WHERE k = 1")
    wait_until(lambda: store.locks.waiters() == 2, timeout_s=DEADLINE_S, what="the 2nd waiter")

    second.session.interrupt.cancel()
    error = second.join()
    assert isinstance(error, QueryCanceled) and str(error) == "query execution canceled"
    first.session.interrupt.cancel()
    assert isinstance(first.join(), QueryCanceled)

    assert store.locks.waiters() == 0
    holder.execute("COMMIT")  # its lock was never broken: the waiters gave up
    assert db.sql("SELECT v FROM t").rows == [(2,)]
    first.session.interrupt.reset()  # as a connection does before its next query
    first.session.execute("UPDATE t SET v = 5 WHERE k = 1")
    assert db.sql("SELECT v FROM t").rows == [(5,)]


def test_statement_timeout_ends_a_wait_for_a_lock(any_db_and_store: tuple[DB, Store]) -> None:
    db, store = any_db_and_store
    holder = _held_row(db)
    waiter = _Waiter(db, "UPDATE t SET v = 3 WHERE k = 1", timeout="200ms")
    error = waiter.join()
    assert isinstance(error, QueryCanceled) and str(error) == STATEMENT_TIMEOUT
    assert error.code == "57014"
    holder.execute("COMMIT")
    assert db.sql("SELECT v FROM t").rows == [(2,)]
    assert store.locks.waiters() == 0


def test_statement_timeout_ends_a_wait_of_intents_written_on_a_helper(
    any_db_and_store: tuple[DB, Store],
) -> None:
    """A write across three ranges sends the middle range's intents from a helper thread:
    that batch's wait for a lock ends at the statement's timeout too. (It did not: it
    waited out the 5 s fallback, broke the holder's lock, and the write committed.)"""
    db, store = any_db_and_store
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    db.sql("ALTER TABLE t SPLIT AT VALUES (500), (1000)")
    db.sql("INSERT INTO t VALUES (1, 0), (600, 0), (1200, 0)")
    holder = db.session()
    holder.execute("BEGIN")
    holder.execute("SELECT * FROM t WHERE k = 600 FOR UPDATE")
    # a helper idle, so the intents at 600 (neither the first range's nor the last's) go on it
    wait_until(lambda: _INTENT_WRITERS.try_start(lambda: None), what="a helper").result()
    wait_until(lambda: _INTENT_WRITERS.idle > 0, timeout_s=DEADLINE_S, what="an idle helper")
    waiter = _Waiter(db, "UPSERT INTO t VALUES (1, 7), (600, 7), (1200, 7)", timeout="300ms")
    error = waiter.join()
    assert isinstance(error, QueryCanceled) and str(error) == STATEMENT_TIMEOUT
    holder.execute("UPDATE t SET v = 2 WHERE k = 600")
    holder.execute("COMMIT")  # its lock was never broken
    assert db.sql("SELECT k, v FROM t ORDER BY k").rows == [(1, 0), (600, 2), (1200, 0)]
    assert store.locks.waiters() == 0
