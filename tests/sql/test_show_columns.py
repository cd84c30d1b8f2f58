"""SHOW COLUMNS FROM t as CockroachDB answers it: a row per column in the table's order,
hidden ones (``rowid``) too, with column_name, data_type (as SHOW CREATE writes it),
is_nullable, column_default, generation_expression ('' when not computed), indices
(the indexes that hold the column, as SHOW INDEXES lists them, sorted) and is_hidden."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.session import Session

COLUMNS = (
    "column_name",
    "data_type",
    "is_nullable",
    "column_default",
    "generation_expression",
    "indices",
    "is_hidden",
)


@pytest.fixture
def session(db: DB) -> Session:
    return db.session()


def shown(session: Session, table: str) -> list[tuple[object, ...]]:
    result = session.execute(f"SHOW COLUMNS FROM {table}")
    assert result.columns == COLUMNS
    return [(*row[:5], list(row[5].values), row[6]) for row in result.rows]


def test_columns_with_defaults_computed_ones_indexes_and_the_hidden_rowid(
    session: Session,
) -> None:
    session.execute(
        "CREATE TABLE t (a INT, b CHAR(3) NOT NULL DEFAULT 'x', c REAL, "
        "s STRING AS (b || 'y') STORED, v INT AS (a + 1) VIRTUAL, "
        "INDEX (c) STORING (a), UNIQUE (b))"
    )
    assert shown(session, "t") == [
        ("a", "INT8", True, None, "", ["t_c_idx", "t_pkey"], False),
        ("b", "CHAR(3)", False, "'x'", "", ["t_b_key", "t_pkey"], False),
        ("c", "FLOAT4", True, None, "", ["t_c_idx", "t_pkey"], False),
        ("s", "STRING", True, None, "b || 'y'", ["t_pkey"], False),
        # a virtual column is stored in no index
        ("v", "INT8", True, None, "a + 1", [], False),
        # the implicit primary key: in every index, hidden
        ("rowid", "INT8", False, "unique_rowid()", "", ["t_b_key", "t_c_idx", "t_pkey"], True),
    ]


def test_a_declared_primary_key_and_typed_columns(session: Session) -> None:
    session.execute("CREATE TABLE u (k INT PRIMARY KEY, d DECIMAL(10,2), w STRING(5), i INT2)")
    assert shown(session, "u") == [
        ("k", "INT8", False, None, "", ["u_pkey"], False),
        ("d", "DECIMAL(10,2)", True, None, "", ["u_pkey"], False),
        ("w", "STRING(5)", True, None, "", ["u_pkey"], False),
        ("i", "INT2", True, None, "", ["u_pkey"], False),
    ]


def test_an_unknown_table_is_an_error(session: Session) -> None:
    with pytest.raises(SQLError) as caught:
        session.execute("SHOW COLUMNS FROM nosuch")
    assert caught.value.code == "42P01"


def test_qualified_names_and_with_comment(session: Session) -> None:
    session.execute("CREATE TABLE q (k INT PRIMARY KEY)")
    expected = [("k", "INT8", False, None, "", ["q_pkey"], False)]
    assert shown(session, "defaultdb.q") == expected
    assert shown(session, "defaultdb.public.q") == expected
    result = session.execute("SHOW COLUMNS FROM q WITH COMMENT")
    assert result.columns == (*COLUMNS, "comment")
    assert [row[-1] for row in result.rows] == [None]  # feedkv keeps no comments
