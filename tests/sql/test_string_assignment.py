"""A typed STRING (a column, a cast) is assigned to string columns only, as in
CockroachDB and PostgreSQL (no assignment cast from a string but to string types); a
string literal takes the column's type. The check is made when the statement is
planned, so an empty table refuses what a full one does."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def tables(db: DB) -> DB:
    db.sql("CREATE TABLE kv (k INT PRIMARY KEY, v INT)")
    db.sql("CREATE TABLE bytes_t (b BYTES PRIMARY KEY)")
    db.sql("CREATE TABLE string_t (s STRING PRIMARY KEY)")
    db.sql("INSERT INTO string_t VALUES ('str'), ('7')")
    db.sql("INSERT INTO bytes_t VALUES ('byte')")
    return db


REFUSED = [
    ("UPDATE kv SET v = '3.2'::STRING", "INT8", "v"),
    ("UPDATE kv SET (k, v) = (3, '3'::STRING)", "INT8", "v"),
    ("UPDATE kv SET (k, v) = (SELECT 3, '3'::STRING)", "INT8", "v"),
    ("UPDATE kv SET v = (SELECT '3'::STRING)", "INT8", "v"),
    ("INSERT INTO kv VALUES (1, '3'::STRING)", "INT8", "v"),
    ("INSERT INTO kv SELECT 1, s FROM string_t WHERE s = '7'", "INT8", "v"),
    ("INSERT INTO bytes_t SELECT * FROM string_t", "BYTES", "b"),
    ("INSERT INTO bytes_t SELECT s FROM string_t", "BYTES", "b"),
    ("UPSERT INTO bytes_t SELECT s FROM string_t", "BYTES", "b"),
    ("INSERT INTO kv VALUES (1, 2) ON CONFLICT (k) DO UPDATE SET v = '5'::STRING", "INT8", "v"),
]


@pytest.mark.parametrize(("statement", "type_name", "column"), REFUSED)
@pytest.mark.parametrize("rows", [False, True], ids=["empty", "with-rows"])
def test_a_typed_string_into_another_type_is_refused_whatever_the_table_holds(
    tables: DB, statement: str, type_name: str, column: str, rows: bool
) -> None:
    if rows:
        tables.sql("INSERT INTO kv VALUES (1, 1), (3, 3)")
    before = tables.sql("SELECT * FROM kv ORDER BY k").rows
    with pytest.raises(SQLError) as raised:
        tables.sql(statement)
    assert raised.value.code == "42804"
    assert raised.value.message == (
        f'value type string doesn\'t match type {type_name} of column "{column}"'
    )
    assert tables.sql("SELECT * FROM kv ORDER BY k").rows == before
    assert tables.sql("SELECT * FROM bytes_t").rows == [(b"byte",)]


def test_bytes_into_a_string_column_is_refused(tables: DB) -> None:
    with pytest.raises(SQLError, match="value type bytes doesn't match type STRING") as raised:
        tables.sql("INSERT INTO string_t SELECT * FROM bytes_t")
    assert raised.value.code == "42804"


def test_string_literals_take_the_columns_type(tables: DB) -> None:
    tables.sql("INSERT INTO kv VALUES (1, '3')")
    tables.sql("UPDATE kv SET v = '4' WHERE k = 1")
    tables.sql("UPDATE kv SET (k, v) = (SELECT 1, '4') WHERE k = 1")
    tables.sql("INSERT INTO bytes_t SELECT 'abc'")
    tables.sql("INSERT INTO string_t SELECT s || '!' FROM string_t WHERE s = 'str'")
    assert tables.sql("SELECT * FROM kv").rows == [(1, 4)]
    assert tables.sql("SELECT * FROM bytes_t ORDER BY b").rows == [(b"abc",), (b"byte",)]
    assert tables.sql("SELECT * FROM string_t ORDER BY s").rows == [("7",), ("str",), ("str!",)]
