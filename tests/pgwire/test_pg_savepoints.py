"""Savepoints over the wire with real clients: psycopg's nested transactions, SQLAlchemy's
``begin_nested``, psql's ON_ERROR_ROLLBACK (a savepoint around every statement), and a
sinkless changefeed that never sees a rolled-back write."""

from __future__ import annotations

import shutil
import subprocess
import threading

import psycopg
import pytest
import sqlalchemy as sa
from psycopg import errors
from sqlalchemy import orm

from feedkv import DB
from feedkv.testing.waiting import wait_until

PSQL = shutil.which("psql")


@pytest.fixture
def url(db: DB, pg_url: str) -> str:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    return pg_url


def keys(db: DB) -> list[int]:
    return [row[0] for row in db.sql("SELECT k FROM t ORDER BY k").rows]


class Rollback(Exception):
    pass


def test_psycopg_nested_transactions_roll_back_to_their_savepoints(db: DB, url: str) -> None:
    with psycopg.connect(url) as conn, conn.transaction():
        conn.execute("INSERT INTO t VALUES (1, 'outer')")
        with pytest.raises(Rollback), conn.transaction():  # SAVEPOINT "_pg3_1"
            conn.execute("INSERT INTO t VALUES (2, 'undone')")
            with conn.transaction():  # nested again
                conn.execute("INSERT INTO t VALUES (3, 'undone too')")
            raise Rollback
        with pytest.raises(errors.UniqueViolation), conn.transaction():
            conn.execute("INSERT INTO t VALUES (4, 'undone')")
            conn.execute("INSERT INTO t VALUES (1, 'duplicate')")  # fails: rolled back
        with conn.transaction():
            conn.execute("INSERT INTO t VALUES (5, 'kept')")
        assert conn.execute("SELECT k FROM t ORDER BY k").fetchall() == [(1,), (5,)]
    assert keys(db) == [1, 5]


def test_psycopg_sees_3b001_for_an_unknown_savepoint(url: str) -> None:
    with psycopg.connect(url) as conn:  # NB: psycopg sends BEGIN first
        with pytest.raises(errors.InvalidSavepointSpecification) as caught:
            conn.execute("ROLLBACK TO SAVEPOINT nosuch")
        assert caught.value.sqlstate == "3B001"
        assert 'savepoint "nosuch" does not exist' in str(caught.value)
        conn.rollback()


class Base(orm.DeclarativeBase):
    pass


class Item(Base):
    __tablename__ = "items"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=False)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(40))


def test_sqlalchemy_begin_nested_rolls_back_to_its_savepoint(url: str) -> None:
    engine = sa.create_engine(url.replace("postgresql://", "cockroachdb+psycopg://"))
    try:
        Base.metadata.create_all(engine)
        with orm.Session(engine) as session, session.begin():
            session.add(Item(id=1, name="kept"))
            session.flush()
            nested = session.begin_nested()
            session.add(Item(id=2, name="undone"))
            session.flush()
            nested.rollback()
            with session.begin_nested():
                session.add(Item(id=3, name="kept too"))
        with orm.Session(engine) as session:
            names = session.scalars(sa.select(Item.name).order_by(Item.id)).all()
        assert names == ["kept", "kept too"]
    finally:
        engine.dispose()


@pytest.mark.skipif(PSQL is None, reason="psql is missing: `make` installs postgresql-client")
def test_psql_on_error_rollback_keeps_the_transaction_going_past_a_failed_statement(
    db: DB, url: str
) -> None:
    assert PSQL is not None
    script = (
        "\\set ON_ERROR_ROLLBACK on\n"
        "BEGIN;\n"
        "INSERT INTO t VALUES (1, 'a');\n"
        "INSERT INTO t VALUES (1, 'duplicate');\n"  # fails; psql rolls back to its savepoint
        "INSERT INTO t VALUES (2, 'b');\n"
        "SAVEPOINT mine;\n"
        "INSERT INTO t VALUES (3, 'c');\n"
        "ROLLBACK TO SAVEPOINT mine;\n"
        "COMMIT;\n"
    )
    done = subprocess.run(
        [PSQL, url, "-X", "-q"],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "duplicate key value" in done.stderr
    assert keys(db) == [1, 2]


def test_a_changefeed_never_emits_a_rolled_back_write(db: DB, url: str) -> None:
    seen: list[str] = []
    with psycopg.connect(url, autocommit=True) as feed:
        stream = feed.cursor().stream("EXPERIMENTAL CHANGEFEED FOR t")

        def read() -> None:
            try:
                for _table, key, _value in stream:
                    seen.append(key)
            except errors.QueryCanceled:
                pass

        reader = threading.Thread(target=read)
        reader.start()
        try:
            with psycopg.connect(url) as conn:
                with conn.transaction():
                    conn.execute("INSERT INTO t VALUES (1, 'kept')")
                    with pytest.raises(Rollback), conn.transaction():
                        conn.execute("INSERT INTO t VALUES (2, 'undone')")
                        conn.execute("UPDATE t SET v = 'undone' WHERE k = 1")
                        raise Rollback
                conn.execute("INSERT INTO t VALUES (3, 'sentinel')")
                conn.commit()
            wait_until(lambda: "[3]" in seen, what="the sentinel row in the changefeed")
        finally:
            feed.cancel_safe(timeout=10)
            reader.join(timeout=30)
    assert seen == ["[1]", "[3]"]
    assert db.sql("SELECT k, v FROM t ORDER BY k").rows == [(1, "kept"), (3, "sentinel")]
