"""Expression indexes (feedkv/sql/expression_indexes.py): ``CREATE INDEX ON t (lower(a))``
keys on a hidden, inaccessible virtual column, as CockroachDB's do; SHOW CREATE TABLE
shows the expression, a UNIQUE one refuses duplicates, a WHERE on the expression reads
through the index."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


def _table(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, a STRING, email STRING)")
    db.sql("INSERT INTO t VALUES (1, 'Hello', 'Ann@x'), (2, 'WORLD', 'bob@x')")


def _code(db: DB, statement: str) -> str:
    try:
        db.sql(statement)
    except SQLError as exc:
        return exc.code
    return "ok"


def _explained(db: DB, query: str) -> str:
    return "\n".join(row[0] for row in db.sql(f"EXPLAIN {query}").rows)


def test_an_expression_index_is_hidden_and_shown_by_its_expression(db: DB) -> None:
    _table(db)
    db.sql("CREATE INDEX ON t (lower(a))")
    db.sql("CREATE UNIQUE INDEX ON t (lower(email) DESC, (length(a) + 1))")
    text = db.sql("SHOW CREATE TABLE t").rows[0][1]
    assert "INDEX t_expr_idx (lower(a) ASC)" in text
    assert "UNIQUE INDEX t_expr_expr1_key (lower(email) DESC, (length(a) + 1) ASC)" in text
    assert "crdb_internal_idx_expr" not in text
    assert db.sql("SELECT * FROM t ORDER BY k").rows == [
        (1, "Hello", "Ann@x"),
        (2, "WORLD", "bob@x"),
    ]
    assert [row[0] for row in db.sql("SHOW COLUMNS FROM t").rows] == ["k", "a", "email"]
    indexed = {(row[1], row[4]) for row in db.sql("SHOW INDEXES FROM t").rows if row[3] == 1}
    assert ("t_expr_idx", "lower(a)") in indexed
    # SHOW CREATE TABLE's statement makes the same table again
    db.sql("DROP TABLE t")
    db.sql(text)
    assert db.sql("SHOW CREATE TABLE t").rows[0][1] == text


def test_a_subquerys_expression_is_over_its_own_table_not_the_outer_index(db: DB) -> None:
    """The outer table's expression index reads its own ``lower(a)`` as its column,
    never a subquery's (over another table, or the same one planned on its own)."""
    _table(db)
    db.sql("CREATE INDEX ON t (lower(a))")
    db.sql("CREATE TABLE u (k INT PRIMARY KEY, a STRING)")
    db.sql("INSERT INTO u VALUES (1, 'Hello')")
    assert (
        db.sql("SELECT k FROM t WHERE EXISTS (SELECT 1 FROM u WHERE lower(a) = 'world')").rows == []
    )
    assert db.sql("SELECT k FROM t WHERE k IN (SELECT k FROM u WHERE lower(a) = 'hello')").rows == [
        (1,)
    ]
    inner = "SELECT k FROM t WHERE k IN (SELECT k FROM t WHERE lower(a) = 'world')"
    assert db.sql(inner).rows == [(2,)]


def test_a_where_on_the_indexed_expression_reads_through_the_index(db: DB) -> None:
    _table(db)
    db.sql("CREATE INDEX ON t (lower(a))")  # backfilled from the rows there
    query = "SELECT k FROM t WHERE lower(a) = 'world'"
    assert "table: t@t_expr_idx" in _explained(db, query)
    assert db.sql(query).rows == [(2,)]
    db.sql("UPDATE t SET a = 'Other' WHERE k = 2")  # its entry moves with the row
    db.sql("INSERT INTO t VALUES (3, 'world', 'c@x')")
    assert db.sql(query).rows == [(3,)]
    assert db.sql("SELECT k FROM t WHERE LOWER(a) = 'other'").rows == [(2,)]
    assert "FULL SCAN" in _explained(db, "SELECT k FROM t WHERE upper(a) = 'WORLD'")
    db.sql("DELETE FROM t WHERE lower(a) = 'world'")
    assert db.sql("SELECT k FROM t ORDER BY k").rows == [(1,), (2,)]


def test_a_unique_expression_index_refuses_a_duplicate_naming_the_expression(db: DB) -> None:
    _table(db)
    db.sql("CREATE UNIQUE INDEX ON t (lower(email))")
    with pytest.raises(SQLError) as caught:
        db.sql("INSERT INTO t VALUES (3, 'x', 'ANN@X')")
    assert caught.value.code == "23505"
    assert caught.value.message == 'duplicate key value violates unique constraint "t_expr_key"'
    assert caught.value.detail == "Key (lower(email))=('ann@x') already exists."
    db.sql("INSERT INTO t VALUES (3, 'x', 'carl@x')")
    db.sql("INSERT INTO t VALUES (4, 'y', 'Dora@x')")
    assert _code(db, "CREATE UNIQUE INDEX ON t (lower(a))") == "ok"
    assert _code(db, "CREATE UNIQUE INDEX ON t (upper(email))") == "ok"
    assert _code(db, "CREATE UNIQUE INDEX ON t (length(a))") == "23505"  # the rows there


def test_create_table_takes_an_expression_index(db: DB) -> None:
    db.sql(
        "CREATE TABLE u (k INT PRIMARY KEY, a STRING, INDEX (lower(a)), UNIQUE INDEX ((k + 10)))"
    )
    db.sql("INSERT INTO u VALUES (1, 'A'), (2, 'b')")
    assert _code(db, "UPSERT INTO u VALUES (3, 'c')") == "ok"
    assert db.sql("SELECT k FROM u WHERE lower(a) = 'a'").rows == [(1,)]
    text = db.sql("SHOW CREATE TABLE u").rows[0][1]
    assert "INDEX u_expr_idx (lower(a) ASC)" in text
    assert "UNIQUE INDEX u_expr_key ((k + 10) ASC)" in text


def test_dropping_the_index_drops_its_column(db: DB) -> None:
    _table(db)
    db.sql("CREATE INDEX i1 ON t (lower(a))")
    db.sql("CREATE INDEX i2 ON t (lower(a), k)")  # the same expression: the same column
    db.sql("DROP INDEX t@i1")
    assert "INDEX i2 (lower(a) ASC, k ASC)" in db.sql("SHOW CREATE TABLE t").rows[0][1]
    assert db.sql("SELECT k FROM t WHERE lower(a) = 'hello'").rows == [(1,)]
    db.sql("DROP INDEX t@i2")
    assert _code(db, "SELECT crdb_internal_idx_expr FROM t") == "42703"
    db.sql("CREATE INDEX ON t (lower(a))")  # and makes it again
    assert db.sql("SELECT k FROM t WHERE lower(a) = 'hello'").rows == [(1,)]


@pytest.mark.parametrize(
    ("statement", "code"),
    [
        ("CREATE INDEX ON t (random())", "0A000"),  # volatile
        ("CREATE INDEX ON t ((now()::STRING))", "0A000"),  # not immutable
        ("CREATE INDEX ON t ((SELECT 1))", "0A000"),
        ("CREATE INDEX ON t ((count(a)))", "42803"),
        ("CREATE INDEX ON t (lower(nope))", "42703"),
        # the column it keys on cannot be named, as CockroachDB's inaccessible column
        ("INSERT INTO t (k, crdb_internal_idx_expr) VALUES (9, 'x')", "42703"),
        ("SELECT crdb_internal_idx_expr FROM t", "42703"),
        ("SELECT k FROM t WHERE crdb_internal_idx_expr = 'x'", "42703"),
        ("SELECT t.crdb_internal_idx_expr FROM t JOIN t AS u USING (k)", "42703"),
        ("UPDATE t SET crdb_internal_idx_expr = 'x'", "42703"),
        ("ALTER TABLE t DROP COLUMN crdb_internal_idx_expr", "42703"),
        ("COMMENT ON COLUMN t.crdb_internal_idx_expr IS 'x'", "42703"),
    ],
)
def test_bad_index_expressions_are_refused(db: DB, statement: str, code: str) -> None:
    _table(db)
    db.sql("CREATE INDEX ON t (lower(a))")
    assert _code(db, statement) == code
