"""A statement that waits for another transaction's lock ends when it is cancelled or
runs past its ``statement_timeout`` (57014), having written nothing, and the holder goes
on: in-process, and over gRPC where the node holds the wait (feedkv.kv.cancellation)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import Store, StoreConfig
from feedkv.kv.txn import _INTENT_WRITERS
from feedkv.server.node import Node
from feedkv.sql.interrupt import STATEMENT_TIMEOUT, QueryCanceled
from feedkv.sql.session import Session
from feedkv.testing.certs import shared_certs_dir
from feedkv.testing.waiting import wait_until

DEADLINE_S = 30.0


@pytest.fixture(params=["embedded", "grpc"])
def db_and_store(
    request: pytest.FixtureRequest, tmp_path: Path, store_config: StoreConfig
) -> Iterator[tuple[DB, Store]]:
    """A client and the store its waits happen in: the same process, or a node it
    reaches over gRPC (TLS, as root)."""
    if request.param == "embedded":
        database = feedkv.connect(tmp_path / "store", config=store_config)
        assert database.node is not None
        yield database, database.node.store
        database.close()
        return
    certs = shared_certs_dir()
    with Node(
        tmp_path / "store", listen="127.0.0.1:0", config=store_config, certs_dir=certs
    ) as node:
        database = feedkv.connect(node.url, certs_dir=certs)
        yield database, node.store
        database.close()


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


def test_a_cancel_ends_statements_waiting_for_a_lock(db_and_store: tuple[DB, Store]) -> None:
    """Two waiters: over gRPC the first goes as a call of its own, the second (sent while
    the first is in flight) on the shared stream; each is given up by its own token."""
    db, store = db_and_store
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO t VALUES (1, 1)")
    holder = db.session()
    holder.execute("BEGIN")
    holder.execute("UPDATE t SET v = 2 WHERE k = 1")
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


def test_statement_timeout_ends_a_wait_for_a_lock(db_and_store: tuple[DB, Store]) -> None:
    db, store = db_and_store
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO t VALUES (1, 1)")
    holder = db.session()
    holder.execute("BEGIN")
    holder.execute("UPDATE t SET v = 2 WHERE k = 1")
    waiter = _Waiter(db, "UPDATE t SET v = 3 WHERE k = 1", timeout="200ms")
    error = waiter.join()
    assert isinstance(error, QueryCanceled) and str(error) == STATEMENT_TIMEOUT
    assert error.code == "57014"
    holder.execute("COMMIT")
    assert db.sql("SELECT v FROM t").rows == [(2,)]
    assert store.locks.waiters() == 0


def test_statement_timeout_ends_a_wait_of_intents_written_on_a_helper(
    db_and_store: tuple[DB, Store],
) -> None:
    """A write across three ranges sends the middle range's intents from a helper thread:
    that batch's wait for a lock ends at the statement's timeout too. (It did not: it
    waited out the 5 s fallback, broke the holder's lock, and the write committed.)"""
    db, store = db_and_store
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
