"""READ ONLY transactions, as CockroachDB: BEGIN READ ONLY, SET TRANSACTION READ ONLY,
``SET transaction_read_only``, and the session's default_transaction_read_only (SET, or
SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY) for the transactions that follow,
implicit ones too. A statement that writes, and nextval() or setval(), fail with 25006
and write nothing; reads run; READ WRITE overrides the default."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.session import Session


@pytest.fixture
def session(db: DB) -> Session:
    db.sql("CREATE TABLE kv (k STRING PRIMARY KEY, v STRING)")
    db.sql("CREATE SEQUENCE a")
    db.sql("INSERT INTO kv VALUES ('k', 'v')")
    return db.session()


WRITES = [
    ("CREATE TABLE tab (a INT)", "CREATE TABLE"),
    ("INSERT INTO kv VALUES ('foo')", "INSERT"),
    ("UPDATE kv SET v = 'foo'", "UPDATE"),
    ("UPSERT INTO kv VALUES ('foo')", "UPSERT"),
    ("DELETE FROM kv", "DELETE"),
    ("SELECT nextval('a')", "nextval()"),
    ("SELECT setval('a', 2)", "setval()"),
    ("ALTER TABLE kv ADD COLUMN w INT", "ALTER TABLE"),
]


def _read_only(session: Session) -> str:
    ((value,),) = session.execute("SHOW transaction_read_only").rows
    assert isinstance(value, str)
    return value


@pytest.mark.parametrize(("statement", "what"), WRITES)
@pytest.mark.parametrize("how", ["BEGIN READ ONLY", "SET TRANSACTION", "SET variable"])
def test_a_read_only_transaction_refuses_writes(
    db: DB, session: Session, statement: str, what: str, how: str
) -> None:
    if how == "BEGIN READ ONLY":
        session.execute("BEGIN READ ONLY")
    else:
        session.execute("BEGIN")
        assert _read_only(session) == "off"
        session.execute(
            "SET TRANSACTION READ ONLY"
            if how == "SET TRANSACTION"
            else "SET transaction_read_only = on"
        )
    assert _read_only(session) == "on"
    assert session.execute("SELECT v FROM kv").rows == [("v",)]
    with pytest.raises(SQLError) as raised:
        session.execute(statement)
    assert raised.value.code == "25006"
    assert raised.value.message == f"cannot execute {what} in a read-only transaction"
    session.execute("ROLLBACK")
    assert db.sql("SELECT * FROM kv").rows == [("k", "v")]
    assert db.sql("SELECT nextval('a')").rows == [(1,)]


def test_the_default_makes_every_transaction_read_only_until_read_write(
    db: DB, session: Session
) -> None:
    session.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    assert session.execute("SHOW default_transaction_read_only").rows == [("on",)]
    assert _read_only(session) == "on"
    for statement, what in WRITES:
        with pytest.raises(
            SQLError, match=f"cannot execute {what.replace('(', '.').replace(')', '.')}"
        ):
            session.execute(statement)
    session.execute("BEGIN")
    assert _read_only(session) == "on"
    session.execute("COMMIT")
    session.execute("BEGIN READ WRITE")
    session.execute("INSERT INTO kv VALUES ('x', 'y')")
    session.execute("COMMIT")
    session.execute("SET default_transaction_read_only = false")
    session.execute("INSERT INTO kv VALUES ('z', 'w')")
    assert db.sql("SELECT k FROM kv ORDER BY k").rows == [("k",), ("x",), ("z",)]


def test_a_read_mode_given_twice_is_refused(session: Session) -> None:
    session.execute("BEGIN")
    with pytest.raises(SQLError, match="read mode specified multiple times") as raised:
        session.execute("SET TRANSACTION READ ONLY, READ WRITE")
    assert raised.value.code == "42601"
    session.execute("ROLLBACK")
    with pytest.raises(SQLError) as outside:
        session.execute("SET TRANSACTION READ ONLY")
    assert outside.value.code == "25P01"
