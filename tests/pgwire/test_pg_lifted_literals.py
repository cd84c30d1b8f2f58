"""A simple query whose integer literals run as parameters (feedkv.sql.literal_lifting)
answers as the same text run as written: rows, column types and errors alike, over
columns of every kind a number meets."""

from __future__ import annotations

import threading

import psycopg

from feedkv.pgwire.server import PGServer
from feedkv.sql.literal_lifting import lifted
from feedkv.sql.session import prepare
from feedkv.testing.waiting import wait_until

COLUMNS = "k INT PRIMARY KEY, s STRING, f FLOAT, r REAL, d DECIMAL, i2 INT2, b BOOL, ts TIMESTAMP"
ROWS = "(1, '5', 5.5, 0.1, 5.5, 5, true, '2020-01-01'), (2, '7', -3, 16777216, -1, -3, false, NULL)"
AS_WRITTEN = " /* as written */"  # NB: a comment: the text is run with its literals


def _statements(table: str) -> list[str]:
    out = []
    for column in ("k", "s", "f", "r", "d", "i2", "b", "ts"):
        out += [
            f"SELECT k, {column} FROM {table} WHERE {column} = 5 ORDER BY k",
            f"SELECT k FROM {table} WHERE {column} < -2 AND k > 0 ORDER BY k",
            f"SELECT k FROM {table} WHERE 16777216 <= {column} ORDER BY k",
            f"UPDATE {table} SET {column} = {column} + -3 WHERE k = 2 RETURNING {column}",
            f"UPDATE {table} SET {column} = 9 WHERE k = 1 RETURNING k, {column}",
            f"INSERT INTO {table} (k, {column}) VALUES (100, -7) RETURNING {column}",
            f"DELETE FROM {table} WHERE k = 100 RETURNING {column}",
            f"INSERT INTO {table} (k, i2) VALUES (200, 99999)",
        ]
    return out


def _run(conn: psycopg.Connection, text: str) -> tuple[object, ...]:
    try:
        cursor = conn.execute(text)  # NB: without parameters: the simple query protocol
    except psycopg.Error as exc:
        return ("error", exc.sqlstate)
    types = tuple(column.type_code for column in cursor.description or ())
    return (types, cursor.fetchall() if cursor.description else cursor.rowcount)


def test_lifted_literals_answer_as_the_text_as_written(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for table in ("lifted", "written"):
            conn.execute(f"CREATE TABLE {table} ({COLUMNS})")
            conn.execute(f"INSERT INTO {table} VALUES {ROWS}")
        statements = _statements("lifted")
        assert sum(lifted(text, prepare) is not None for text in statements) >= 40
        for text in statements:
            written = text.replace("lifted", "written") + AS_WRITTEN
            assert lifted(written, prepare) is None
            assert _run(conn, text) == _run(conn, written), text
        assert _run(conn, "SELECT * FROM lifted ORDER BY k") == _run(
            conn, "SELECT * FROM written ORDER BY k"
        )


def test_a_running_lifted_statement_shows_as_written(pg_url: str) -> None:
    text = "UPDATE kv SET v = 2 WHERE k = 1"
    assert lifted(text, prepare) is not None
    with (
        psycopg.connect(pg_url, autocommit=True) as holder,
        psycopg.connect(pg_url, autocommit=True) as writer,
        psycopg.connect(pg_url, autocommit=True) as watcher,
    ):
        holder.execute("CREATE TABLE kv (k INT PRIMARY KEY, v INT)")
        holder.execute("INSERT INTO kv VALUES (1, 0)")
        holder.execute("BEGIN")
        holder.execute("UPDATE kv SET v = 1 WHERE k = 1 /* holds the row */")
        thread = threading.Thread(target=writer.execute, args=(text,))
        thread.start()
        try:
            wait_until(
                lambda: any(text in str(row) for row in watcher.execute("SHOW QUERIES")),
                timeout_s=30,
                what="the lifted UPDATE to wait on the row, as written",
            )
        finally:
            holder.execute("COMMIT")
            thread.join(30)
        assert not thread.is_alive()
        assert watcher.execute("SELECT v FROM kv").fetchall() == [(2,)]


def test_a_table_with_a_jsonb_column_keeps_its_literals(pg_server: PGServer, pg_url: str) -> None:
    """An integer parameter meets a JSONB column as a JSON number, where the literal is
    refused: a table with one runs its texts as written."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE js (k INT PRIMARY KEY, j JSONB, v INT)")
        conn.execute("CREATE TABLE plain (k INT PRIMARY KEY, v INT)")
        conn.execute("INSERT INTO js VALUES (1, '5', 0)")
        conn.execute("INSERT INTO plain VALUES (1, 0)")
        [(connection, _sock)] = pg_server._connections.values()
        assert connection._lifted("UPDATE plain SET v = 7 WHERE k = 1") is not None
        assert connection._lifted("UPDATE js SET v = 7 WHERE k = 1") is None
        assert _run(conn, "SELECT k FROM js WHERE j = 5") == _run(
            conn, "SELECT k FROM js WHERE j = 5" + AS_WRITTEN
        )
        for text in ("INSERT INTO js (k, j) VALUES (3, 5)", "UPDATE js SET j = 7 WHERE k = 1"):
            assert lifted(text, prepare) is not None
            assert _run(conn, text) == ("error", "42804") == _run(conn, text + AS_WRITTEN)
