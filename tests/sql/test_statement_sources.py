"""A statement read as a table, CockroachDB's ``FROM [...]``: a write with RETURNING
(``[INSERT | UPSERT | UPDATE | DELETE ... RETURNING ...]``) runs once, in the reading
statement's transaction, and its RETURNING rows are the source's rows; a SHOW of the
schema (``[SHOW CREATE t]``, ``[SHOW COLUMNS FROM t]``...) gives its rows."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def kv(db: DB) -> DB:
    db.sql("CREATE TABLE kv (k STRING PRIMARY KEY, v STRING UNIQUE)")
    db.sql("INSERT INTO kv VALUES ('a', 'b'), ('c', 'd')")
    return db


def _rows(db: DB) -> list[tuple[object, ...]]:
    return list(db.sql("SELECT k, v FROM kv ORDER BY k").rows)


def test_an_insert_read_as_a_table_writes_its_rows_and_yields_them(kv: DB) -> None:
    rows = kv.sql(
        "SELECT v || 'hello' FROM [INSERT INTO kv VALUES ('e', 'f'), ('g', '') RETURNING v] "
        "ORDER BY 1"
    ).rows
    assert rows == [("fhello",), ("hello",)]
    assert _rows(kv) == [("a", "b"), ("c", "d"), ("e", "f"), ("g", "")]


def test_a_delete_read_as_a_table_counts_what_its_limit_deleted(kv: DB) -> None:
    assert kv.sql("SELECT count(*) FROM [DELETE FROM kv LIMIT 1 RETURNING v]").rows == [(1,)]
    assert len(_rows(kv)) == 1


def test_upsert_and_update_sources_take_an_alias_and_quotes(kv: DB) -> None:
    rows = kv.sql(
        "SELECT u.k FROM [UPSERT INTO kv VALUES ('x', 'y') RETURNING k] AS u UNION VALUES ('z') "
        "ORDER BY 1"
    ).rows
    assert rows == [("x",), ("z",)]
    rows = kv.sql("SELECT * FROM [UPDATE kv SET v = 'q\"]' WHERE k = 'x' RETURNING k, v]").rows
    assert rows == [("x", 'q"]')]
    assert ("x", 'q"]') in _rows(kv)


def test_a_failed_read_of_a_write_writes_nothing(kv: DB) -> None:
    with pytest.raises(SQLError) as caught:
        kv.sql("SELECT * FROM [INSERT INTO kv VALUES ('h', 'b') RETURNING k]")
    assert caught.value.code == "23505"
    with pytest.raises(SQLError) as caught:
        kv.sql("SELECT nope FROM [INSERT INTO kv VALUES ('h', 'h') RETURNING k]")
    assert caught.value.code == "42703"
    assert _rows(kv) == [("a", "b"), ("c", "d")]


def test_a_write_without_returning_is_no_source(kv: DB) -> None:
    with pytest.raises(SQLError, match="does not return any columns"):
        kv.sql("SELECT * FROM [DELETE FROM kv WHERE k = 'a']")
    assert len(_rows(kv)) == 2


def test_a_read_only_transaction_refuses_a_write_source(kv: DB) -> None:
    session = kv.session()
    session.execute("BEGIN READ ONLY")
    with pytest.raises(SQLError) as caught:
        session.execute("SELECT * FROM [DELETE FROM kv RETURNING k]")
    assert caught.value.code == "25006"
    session.execute("ROLLBACK")
    assert len(_rows(kv)) == 2


def test_a_show_of_the_schema_reads_as_a_table(kv: DB) -> None:
    [(create,)] = kv.sql("SELECT create_statement FROM [SHOW CREATE kv]").rows
    assert create.startswith("CREATE TABLE")
    columns = kv.sql("SELECT column_name FROM [SHOW COLUMNS FROM kv] AS c ORDER BY 1").rows
    assert columns == [("k",), ("v",)]
    assert ("kv",) in kv.sql("SELECT table_name FROM [SHOW TABLES]").rows


def test_show_tables_reads_as_a_table_with_cockroachdbs_columns(kv: DB) -> None:
    kv.sql("CREATE VIEW vs AS SELECT v FROM kv")
    rows = kv.sql(
        "SELECT table_name, type, owner, estimated_row_count, locality FROM [SHOW TABLES] "
        "WHERE schema_name = 'public' AND estimated_row_count = 0 ORDER BY table_name"
    ).rows
    assert rows == [("kv", "table", "root", 0, None), ("vs", "view", "root", 0, None)]


def test_a_show_of_a_session_variable_is_no_source(kv: DB) -> None:
    with pytest.raises(SQLError, match="cannot be read as a table"):
        kv.sql("SELECT * FROM [SHOW intervalstyle]")


def test_a_common_table_expression_over_a_show_reads_its_rows(kv: DB) -> None:
    # CockroachDB's SHOW JOBS page filters jobs so: WITH x AS (SHOW JOBS) SELECT ... FROM x
    kv.sql("CREATE CHANGEFEED FOR kv INTO 'null://'")
    rows = kv.sql("WITH x AS (SHOW JOBS) SELECT job_type FROM x WHERE job_type = 'CHANGEFEED'").rows
    assert rows == [("CHANGEFEED",)]
    assert kv.sql("with t as ( show columns from kv ) select column_name from t").rows == [
        ("k",),
        ("v",),
    ]
    # NB: only the text outside literals is read so
    assert kv.sql("SELECT 'AS (SHOW JOBS)'").rows == [("AS (SHOW JOBS)",)]
