"""RowDescription's table OID and column number, as psycopg reads them
(``PGresult.ftable``/``ftablecol``): for a result column read as is from a table (by a
SELECT or a RETURNING), that table's pg_class OID and the column's pg_attribute attnum;
from a view, the view's OID and the column's number in it (as PostgreSQL); 0 for a
computed one."""

from __future__ import annotations

import psycopg


def _origins(cur: psycopg.Cursor) -> list[tuple[int, int]]:
    result = cur.pgresult
    assert result is not None
    return [(result.ftable(i), result.ftablecol(i)) for i in range(result.nfields)]


def _attribute(conn: psycopg.Connection, table: str, column: str) -> tuple[int, int]:
    row = conn.execute(
        "SELECT c.oid, a.attnum FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid "
        "WHERE c.relname = %s AND a.attname = %s",
        [table, column],
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_a_selected_column_names_its_table_and_attnum(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING, n INT)")
        conn.execute("INSERT INTO t VALUES (1, 'a', 2)")
        t_id, t_s, t_n = (_attribute(conn, "t", c) for c in ("id", "s", "n"))
        assert t_id[0] == t_s[0] != 0 and (t_id[1], t_s[1], t_n[1]) == (1, 2, 3)
        cur = conn.execute("SELECT s, n + 1 AS m, id AS k, 7, * FROM t WHERE id = %s", [1])
        assert cur.fetchall() == [("a", 3, 1, 7, 1, "a", 2)]
        assert _origins(cur) == [t_s, (0, 0), t_id, (0, 0), t_id, t_s, t_n]
        simple = psycopg.ClientCursor(conn)  # the simple protocol: Query, not Parse
        simple.execute("SELECT n, count(*) FROM t GROUP BY n")
        assert simple.fetchall() == [(2, 1)]
        assert _origins(simple) == [t_n, (0, 0)]


def test_joined_tables_columns_each_name_their_own_table(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE a (id INT PRIMARY KEY, x STRING)")
        conn.execute("CREATE TABLE b (id INT PRIMARY KEY, a_id INT, y STRING)")
        conn.execute("INSERT INTO a VALUES (1, 'x1')")
        conn.execute("INSERT INTO b VALUES (5, 1, 'y5')")
        cur = conn.execute(
            "SELECT b.y, a.x, q.v FROM a JOIN b ON b.a_id = a.id "
            "JOIN (SELECT 1 AS v) AS q ON q.v = a.id WHERE a.id = %s",
            [1],
        )
        assert cur.fetchall() == [("y5", "x1", 1)]
        # NB: a derived table's column is computed: 0, as PostgreSQL for a constant
        assert _origins(cur) == [_attribute(conn, "b", "y"), _attribute(conn, "a", "x"), (0, 0)]


def test_a_rowid_table_numbers_its_columns_as_pg_attribute_does(pg_url: str) -> None:
    """A table without a primary key has a hidden rowid column, last in pg_attribute."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE h (s STRING, n INT)")
        conn.execute("INSERT INTO h VALUES ('a', 1)")
        cur = conn.execute("SELECT n, s FROM h")
        assert cur.fetchall() == [(1, "a")]
        assert _origins(cur) == [_attribute(conn, "h", "n"), _attribute(conn, "h", "s")]


def _oid(conn: psycopg.Connection, relation: str) -> int:
    row = conn.execute("SELECT oid FROM pg_class WHERE relname = %s", [relation]).fetchone()
    assert row is not None
    return int(row[0])


def test_a_views_column_names_the_view_and_its_number_in_it(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
        conn.execute("INSERT INTO t VALUES (1, 'a')")
        conn.execute("CREATE VIEW v (k, label) AS SELECT id, s FROM t")
        v = _oid(conn, "v")
        assert v not in (0, _oid(conn, "t"))
        cur = conn.execute("SELECT label, k + 1, k FROM v WHERE k = %s", [1])
        assert cur.fetchall() == [("a", 2, 1)]
        assert _origins(cur) == [(v, 2), (0, 0), (v, 1)]


def test_returning_columns_name_their_table_and_attnum(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING, n INT)")
        t_id, t_s, t_n = (_attribute(conn, "t", c) for c in ("id", "s", "n"))
        cur = conn.execute("INSERT INTO t VALUES (%s, 'a', 2) RETURNING s, n * 2, id", [1])
        assert cur.fetchall() == [("a", 4, 1)]
        assert _origins(cur) == [t_s, (0, 0), t_id]
        cur = conn.execute("UPDATE t SET n = n + 1 WHERE id = %s RETURNING *", [1])
        assert cur.fetchall() == [(1, "a", 3)]
        assert _origins(cur) == [t_id, t_s, t_n]
