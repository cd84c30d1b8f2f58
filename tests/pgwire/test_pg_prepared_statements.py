"""SQL's PREPARE / EXECUTE / DEALLOCATE over the SQL port, sharing one namespace with the
protocol's named statements, and both listed in pg_catalog.pg_prepared_statements as
CockroachDB lists them (``PREPARE name (types) AS text``, the types as regtype names,
``from_sql`` telling which made it); pg_catalog.pg_sequence describes the sequences."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import psycopg
import pytest

from feedkv import DB


@pytest.fixture
def conn(db: DB) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db.serve_sql(), autocommit=True) as connection:
        connection.execute("CREATE TABLE t (k INT PRIMARY KEY, s STRING)")
        yield connection


def test_prepare_and_execute_run_statements(conn: psycopg.Connection) -> None:
    conn.execute("PREPARE ins (int8, text) AS INSERT INTO t VALUES ($1, $2)")
    conn.execute("EXECUTE ins (1, 'one')")
    conn.execute("EXECUTE ins (1 + 1, 'tw' || 'o')")
    conn.execute("PREPARE q AS SELECT k, s FROM t WHERE k > $1 ORDER BY k")
    cursor = conn.execute("EXECUTE q (0)")
    assert cursor.description is not None and [d.name for d in cursor.description] == ["k", "s"]
    assert cursor.fetchall() == [(1, "one"), (2, "two")]
    assert conn.execute('PREPARE "Cat" AS SELECT count(*) FROM pg_class').statusmessage == (
        "PREPARE"
    )
    assert conn.execute('EXECUTE "Cat"').fetchone() is not None
    conn.execute("DEALLOCATE q")
    with pytest.raises(psycopg.Error) as caught:
        conn.execute("EXECUTE q (0)")
    assert caught.value.sqlstate == "26000"


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        ("EXECUTE nope", "26000"),
        ("EXECUTE q", "42601"),  # one value too few
        ("EXECUTE q (1, 2)", "42601"),
        ("EXECUTE q ('x')", "22P02"),
        ("PREPARE q AS SELECT 1", "42P05"),
        ("PREPARE r (nosuchtype) AS SELECT $1", "42704"),
        ("PREPARE r AS SELECT nosuch FROM t", "42703"),
    ],
)
def test_bad_prepares_and_executes_fail_clearly(
    conn: psycopg.Connection, sql: str, code: str
) -> None:
    conn.execute("PREPARE q (int8) AS SELECT k FROM t WHERE k = $1")
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(sql)
    assert caught.value.sqlstate == code
    names = [n for (n,) in conn.execute("SELECT name FROM pg_prepared_statements")]
    assert names == ["q"]  # the failure made no statement


def test_a_wrong_count_of_values_is_worded_as_cockroachdb(conn: psycopg.Connection) -> None:
    conn.execute("PREPARE ins (int8, text) AS INSERT INTO t VALUES ($1, $2)")
    with pytest.raises(psycopg.Error) as caught:
        conn.execute("EXECUTE ins (1)")
    assert caught.value.diag.message_primary == (
        'wrong number of parameters for prepared statement "ins": expected 2, got 1'
    )


def test_pg_prepared_statements_lists_sql_and_protocol_statements(
    conn: psycopg.Connection,
) -> None:
    before = datetime.datetime.now(datetime.UTC)
    conn.execute("PREPARE ins (int8, text) AS INSERT INTO t VALUES ($1, $2)")
    cursor = conn.cursor()
    for _ in range(2):  # psycopg prepares a statement run twice with prepare=True
        cursor.execute("SELECT s FROM t WHERE k = %s::INT8", (7,), prepare=True)
    rows = conn.execute(
        "SELECT name, statement, prepare_time, parameter_types, from_sql "
        "FROM pg_catalog.pg_prepared_statements ORDER BY from_sql, name"
    ).fetchall()
    assert [(r[0].startswith("_pg"), r[1].split(" AS ")[1], r[3], r[4]) for r in rows] == [
        # NB: the type psycopg's Parse gave (it sends 7 as an int2)
        (True, "SELECT s FROM t WHERE k = $1::INT8", ["smallint"], False),
        (False, "INSERT INTO t VALUES ($1, $2)", ["bigint", "text"], True),
    ]
    assert rows[1][1] == "PREPARE ins (int8, text) AS INSERT INTO t VALUES ($1, $2)"
    assert all(before <= r[2] <= datetime.datetime.now(datetime.UTC) for r in rows)


def test_pg_sequence_describes_each_sequence(conn: psycopg.Connection) -> None:
    conn.execute("CREATE SEQUENCE up INCREMENT 5 START 10 MINVALUE 1 MAXVALUE 1000")
    conn.execute("CREATE SEQUENCE down INCREMENT -1")
    rows = conn.execute(
        "SELECT c.relname, s.seqtypid, s.seqstart, s.seqincrement, s.seqmax, s.seqmin, "
        "s.seqcache, s.seqcycle FROM pg_catalog.pg_sequence s "
        "JOIN pg_class c ON c.oid = s.seqrelid ORDER BY c.relname"
    ).fetchall()
    assert rows == [
        ("down", 20, -1, -1, -1, -(2**63), 1, False),
        ("up", 20, 10, 5, 1000, 1, 1, False),
    ]


def test_a_placeholder_in_case_takes_the_type_of_the_other_results(
    conn: psycopg.Connection,
) -> None:
    # NB: psycopg sends a str as of unknown type: the server types the placeholder
    cursor = conn.execute("SELECT CASE WHEN true THEN %s ELSE 1 END", ["5"])
    assert cursor.fetchone() == (5,)
    conn.execute("INSERT INTO t VALUES (1, NULL)")
    cursor = conn.execute("SELECT COALESCE(s, %s) FROM t", ["none"])
    assert cursor.fetchone() == ("none",)


def test_a_statement_whose_columns_another_session_changed_is_refused_as_postgresql_does(
    db: DB, conn: psycopg.Connection
) -> None:
    # PostgreSQL refuses a cached plan whose result type changed (0A000), and so did this
    # run against PostgreSQL 15 with psycopg; before, the rows no longer matched their
    # description (asyncpg: a protocol error) or failed to encode (XX000)
    conn.execute("INSERT INTO t VALUES (1, 'a')")
    for _ in range(2):
        assert conn.execute("SELECT * FROM t", prepare=True).fetchall() == [(1, "a")]
    db.sql("ALTER TABLE t ADD COLUMN n INT DEFAULT 7")
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="must not change result type"):
        conn.execute("SELECT * FROM t", prepare=True)
    assert conn.execute("SELECT * FROM t", prepare=False).fetchall() == [(1, "a", 7)]


def test_a_write_returning_changed_columns_is_refused_before_it_runs(
    db: DB, conn: psycopg.Connection
) -> None:
    insert = "INSERT INTO t (k, s) VALUES (%s, 'x') RETURNING *"
    for k in (1, 2):
        assert conn.execute(insert, (k,), prepare=True).fetchall() == [(k, "x")]
    db.sql("ALTER TABLE t ADD COLUMN n INT DEFAULT 7")
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="must not change result type"):
        conn.execute(insert, (3,), prepare=True)
    assert conn.execute("SELECT k FROM t ORDER BY k").fetchall() == [(1,), (2,)]
