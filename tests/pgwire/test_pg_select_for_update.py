"""SELECT ... FOR UPDATE as ORMs send it over the wire: psycopg with parameters in the
extended protocol, SQLAlchemy's ``with_for_update()``; NOWAIT's 55P03 reaches the driver
as its LockNotAvailable error."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from psycopg import errors

from feedkv import DB
from feedkv.testing.waiting import run_threads, wait_until


@pytest.fixture
def url(db: DB, pg_url: str) -> str:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO t VALUES (1, 0), (2, 0)")
    return pg_url


def _waiters(db: DB) -> int:
    node = db.node
    assert node is not None
    return node.store.locks.waiters()


def test_psycopg_update_waits_for_a_row_selected_for_update(db: DB, url: str) -> None:
    done = threading.Event()

    def update_second() -> None:
        with psycopg.connect(url, autocommit=True) as second:
            second.execute("UPDATE t SET v = v * 10 WHERE k = %s", (1,))
        done.set()

    with psycopg.connect(url) as first:
        (value,) = first.execute("SELECT v FROM t WHERE k = %s FOR UPDATE", (1,)).fetchone() or ()
        writer = threading.Thread(target=update_second)
        writer.start()
        try:
            wait_until(lambda: _waiters(db) == 1, what="the second's UPDATE to wait")
            assert not done.is_set()
            first.execute("UPDATE t SET v = %s WHERE k = %s", (value + 1, 1))
            first.commit()
        finally:
            writer.join(timeout=60)
    assert not writer.is_alive()
    assert done.is_set()
    assert db.sql("SELECT v FROM t WHERE k = 1").rows == [(10,)]


def test_psycopg_nowait_gets_lock_not_available(url: str) -> None:
    with psycopg.connect(url) as first, psycopg.connect(url) as second:
        first.execute("SELECT v FROM t WHERE k = 2 FOR UPDATE")
        with pytest.raises(errors.LockNotAvailable) as caught:
            second.execute("SELECT v FROM t WHERE k = %s FOR UPDATE NOWAIT", (2,))
        assert caught.value.sqlstate == "55P03"
        assert "could not obtain lock on row (k)=(2) in t@t_pkey" in str(caught.value)
        second.rollback()
        first.commit()
        assert second.execute("SELECT v FROM t WHERE k = 2 FOR UPDATE NOWAIT").fetchall() == [(0,)]
        second.commit()


def test_sqlalchemy_with_for_update_runs_each_locking_clause(url: str) -> None:
    engine = sa.create_engine(url.replace("postgresql://", "cockroachdb+psycopg://", 1))
    table = sa.Table(
        "t", sa.MetaData(), sa.Column("k", sa.Integer, primary_key=True), sa.Column("v", sa.Integer)
    )
    options: list[dict[str, Any]] = [
        {},  # FOR UPDATE
        {"nowait": True},  # FOR UPDATE NOWAIT
        {"of": table},  # FOR UPDATE OF t
        {"read": True},  # FOR SHARE
        {"key_share": True},  # FOR NO KEY UPDATE
    ]
    try:
        with engine.begin() as conn:
            for option in options:
                query = sa.select(table.c.v).where(table.c.k == 1).with_for_update(**option)
                assert "FOR " in str(query.compile(engine))
                assert conn.execute(query).all() == [(0,)], option
    finally:
        engine.dispose()


def test_psycopg_skip_locked_returns_the_free_rows_while_another_holds_one(url: str) -> None:
    with psycopg.connect(url) as first, psycopg.connect(url) as second:
        first.execute("SELECT v FROM t WHERE k = %s FOR UPDATE", (1,))
        found: list[Any] = []

        def read() -> None:
            found.append(second.execute("SELECT k FROM t FOR UPDATE SKIP LOCKED").fetchall())
            found.append(
                second.execute(
                    "SELECT k FROM t WHERE k = %s FOR UPDATE SKIP LOCKED", (1,)
                ).fetchall()
            )

        try:
            # NB: within the deadline while first's transaction is open: a read that
            # waited for its lock would run past it
            run_threads([read], deadline_s=30)
        finally:
            first.commit()
        assert found == [[(2,)], []]
        # NOWAIT in any clause wins over SKIP LOCKED, as in PostgreSQL; second holds k=2
        with psycopg.connect(url) as third, pytest.raises(errors.LockNotAvailable) as caught:
            third.execute("SELECT k FROM t FOR UPDATE SKIP LOCKED FOR UPDATE NOWAIT")
        assert caught.value.sqlstate == "55P03"
        second.rollback()


def test_sqlalchemy_with_for_update_skip_locked(url: str) -> None:
    engine = sa.create_engine(url.replace("postgresql://", "cockroachdb+psycopg://", 1))
    table = sa.Table(
        "t", sa.MetaData(), sa.Column("k", sa.Integer, primary_key=True), sa.Column("v", sa.Integer)
    )
    try:
        with engine.begin() as holder, engine.begin() as worker:
            holder.execute(sa.select(table.c.k).where(table.c.k == 1).with_for_update())
            query = sa.select(table.c.k).order_by(table.c.k).limit(1)
            query = query.with_for_update(skip_locked=True)
            assert "SKIP LOCKED" in str(query.compile(engine))
            assert worker.execute(query).all() == [(2,)]
    finally:
        engine.dispose()


def test_lock_timeout_ends_a_wait_for_a_row_with_lock_not_available(url: str) -> None:
    """``SET lock_timeout`` (CockroachDB's): an UPDATE or a SELECT ... FOR UPDATE waiting
    for a row another transaction's UPDATE holds gives up with 55P03 once it has waited
    that long; a transaction is then aborted, as after any error; the other's write is
    untouched. (Waits for intents, by reads and writes: tests/kv/test_lock_table.py.)"""
    with psycopg.connect(url) as first, psycopg.connect(url, autocommit=True) as second:
        first.execute("UPDATE t SET v = 5 WHERE k = 1")
        second.execute("SET lock_timeout = '100ms'")
        assert second.execute("SHOW lock_timeout").fetchone() == ("100",)
        with pytest.raises(errors.LockNotAvailable) as caught:
            second.execute("UPDATE t SET v = 6 WHERE k = %s", (1,))
        assert caught.value.diag.message_primary is not None
        assert caught.value.diag.message_primary.startswith(
            "canceling statement due to lock timeout"
        )
        with second.transaction():
            with pytest.raises(errors.LockNotAvailable) as caught:
                second.execute("SELECT v FROM t WHERE k >= 1 FOR UPDATE")
            assert caught.value.diag.message_primary == (
                "canceling statement due to lock timeout on row (k)=(1) in t@t_pkey"
            )
            with pytest.raises(errors.InFailedSqlTransaction):
                second.execute("SELECT 1")
            raise psycopg.Rollback
        assert second.execute("SELECT v FROM t WHERE k = 2").fetchone() == (0,)  # no wait
        first.commit()
        assert second.execute("SELECT k, v FROM t ORDER BY k").fetchall() == [(1, 5), (2, 0)]
