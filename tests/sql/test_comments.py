"""COMMENT ON DATABASE | TABLE | COLUMN | INDEX, read back as CockroachDB reads them:
SHOW COLUMNS | INDEXES ... WITH COMMENT, and SHOW CREATE TABLE's COMMENT ON statements
after the table (each statement ending with ';'); a comment follows its column or index
through TRUNCATE and renames, and goes with what it was on."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


def _column_comments(db: DB, table: str) -> dict[str, str | None]:
    rows = db.sql(f"SELECT column_name, comment FROM [SHOW COLUMNS FROM {table} WITH COMMENT]").rows
    return dict(rows)


def _index_comments(db: DB, table: str) -> dict[str, str | None]:
    rows = db.sql(
        f"SELECT DISTINCT index_name, comment FROM [SHOW INDEXES FROM {table} WITH COMMENT]"
    ).rows
    return dict(rows)


def test_comments_survive_truncate_with_quotes_kept(db: DB) -> None:
    db.sql("CREATE TABLE t (x INT, y INT, z INT, INDEX i1 (x), INDEX i2 (y))")
    db.sql("COMMENT ON COLUMN t.x IS '''hi''); DROP TABLE t;'")
    db.sql("COMMENT ON COLUMN t.z IS 'comm\"en\"t2'")
    db.sql("COMMENT ON INDEX t@i2 IS 'comm''ent3'")
    db.sql("TRUNCATE t")
    assert _column_comments(db, "t") == {
        "x": "'hi'); DROP TABLE t;",
        "y": None,
        "z": 'comm"en"t2',
        "rowid": None,
    }
    assert _index_comments(db, "t") == {"t_pkey": None, "i1": None, "i2": "comm'ent3"}


def test_show_create_table_ends_each_statement_with_a_semicolon_and_lists_comments(
    db: DB,
) -> None:
    db.sql("CREATE TABLE c (a INT PRIMARY KEY, b INT, INDEX c_b_idx (b))")
    assert db.sql("SELECT create_statement FROM [SHOW CREATE c]").rows == [
        (
            "CREATE TABLE public.c (\n"
            "\ta INT8 NOT NULL,\n"
            "\tb INT8 NULL,\n"
            "\tCONSTRAINT c_pkey PRIMARY KEY (a ASC),\n"
            "\tINDEX c_b_idx (b ASC)\n"
            ");",
        )
    ]
    db.sql("COMMENT ON TABLE c IS 'table'")
    db.sql("COMMENT ON COLUMN c.a IS 'column'")
    db.sql("COMMENT ON INDEX c_b_idx IS 'it''s an index'")
    [(text,)] = db.sql("SELECT create_statement FROM [SHOW CREATE TABLE c]").rows
    assert text.split(");\n", 1)[1] == (
        "COMMENT ON TABLE public.c IS 'table';\n"
        "COMMENT ON COLUMN public.c.a IS 'column';\n"
        "COMMENT ON INDEX public.c@c_b_idx IS 'it''s an index';"
    )


def test_null_or_empty_removes_a_comment_and_renames_keep_it(db: DB) -> None:
    db.sql("CREATE TABLE t (a INT PRIMARY KEY, b INT)")
    db.sql("COMMENT ON COLUMN t.a IS 'key'")
    db.sql("COMMENT ON COLUMN t.b IS 'value'")
    db.sql("ALTER TABLE t RENAME COLUMN b TO v")
    db.sql("ALTER TABLE t RENAME TO u")
    assert _column_comments(db, "u") == {"a": "key", "v": "value"}
    db.sql("COMMENT ON COLUMN u.a IS NULL")
    db.sql("COMMENT ON COLUMN u.v IS ''")
    assert _column_comments(db, "u") == {"a": None, "v": None}


def test_dropped_columns_indexes_and_tables_take_their_comments(db: DB) -> None:
    db.sql("CREATE TABLE t (x INT, y INT)")
    db.sql("CREATE INDEX i ON t (x)")
    db.sql("COMMENT ON COLUMN t.y IS 'old y'")
    db.sql("COMMENT ON INDEX t@i IS 'old i'")
    db.sql("COMMENT ON TABLE t IS 'old t'")
    db.sql("ALTER TABLE t DROP COLUMN y")
    db.sql("ALTER TABLE t ADD COLUMN y INT")
    db.sql("DROP INDEX t@i")
    db.sql("CREATE INDEX i ON t (x)")
    assert _column_comments(db, "t")["y"] is None
    assert _index_comments(db, "t")["i"] is None
    db.sql("DROP TABLE t")
    db.sql("CREATE TABLE t (x INT)")
    [(text,)] = db.sql("SELECT create_statement FROM [SHOW CREATE t]").rows
    assert "COMMENT" not in text


def test_comment_on_what_does_not_exist_is_refused(db: DB) -> None:
    db.sql("CREATE TABLE t (x INT)")
    for statement, code in (
        ("COMMENT ON COLUMN t.nope IS 'x'", "42703"),
        ("COMMENT ON INDEX t@nope IS 'x'", "42704"),
        ("COMMENT ON TABLE nope IS 'x'", "42P01"),
        ("COMMENT ON DATABASE nope IS 'x'", "3D000"),
    ):
        with pytest.raises(SQLError) as caught:
            db.sql(statement)
        assert caught.value.code == code, statement
