"""A catalog query's result columns are typed and named as the SQL layer (and PostgreSQL)
types and names them: a comparison is a bool (``t``, OID 16), not SQLite's ``1``; an
expression is ``?column?``, not its rewritten text; ``count(*)`` is ``count``; a
regclass goes out as regclass (2205) printing the relation's name, ``::oid`` as oid
(26), a regtype as regtype (2206), a name column as name (19), as PostgreSQL sends them.
Checked through psycopg (RowDescription's OIDs) and psql (the text) on a secure node."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import psycopg
import pytest
from psql_helpers import psql

from feedkv.pgwire.types import OID


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute("CREATE TABLE u (a INT PRIMARY KEY, s STRING)")
        yield connection


def described(conn: psycopg.Connection, text: str) -> tuple[list[tuple[str, int]], list[tuple]]:
    """The columns (name, type OID) and rows of ``text``."""
    cursor = conn.execute(text)
    assert cursor.description is not None
    return [(c.name, c.type_code) for c in cursor.description], cursor.fetchall()


def test_a_comparison_is_a_bool_named_column(conn: psycopg.Connection, pg_url: str) -> None:
    text = "SELECT relname = 'u' FROM pg_class WHERE relname = 'u'"
    assert described(conn, text) == ([("?column?", OID.BOOL)], [(True,)])
    assert psql(pg_url, text).splitlines()[:3] == [" ?column? ", "----------", " t"]
    # NB: the same comparison over a table, through the SQL layer, for the record
    assert described(conn, "SELECT a = 1 FROM u")[0] == [("?column?", OID.BOOL)]


def test_a_regclass_cast_to_oid_and_compared(conn: psycopg.Connection, pg_url: str) -> None:
    text = "SELECT 'u'::regclass::oid > 0"
    assert described(conn, text) == ([("?column?", OID.BOOL)], [(True,)])
    assert psql(pg_url, text).splitlines()[:3] == [" ?column? ", "----------", " t"]


def test_regclass_oid_regtype_and_name_columns_have_postgresql_types(
    conn: psycopg.Connection,
) -> None:
    [(oid,)] = conn.execute("SELECT oid FROM pg_class WHERE relname = 'u'").fetchall()
    columns, rows = described(
        conn,
        "SELECT 'u'::regclass, 'u'::regclass::oid, 'int8'::regtype, 'int8'::regtype::oid, "
        "relname, relname::name, relnamespace, c.oid::regclass::text, "
        "to_regclass('u') AS r, to_regtype('text') "
        "FROM pg_class c WHERE relname = 'u'",
    )
    assert columns == [
        ("regclass", OID.REGCLASS),
        ("oid", OID.OID),
        ("regtype", OID.REGTYPE),
        ("oid", OID.OID),
        ("relname", OID.NAME),
        ("relname", OID.NAME),
        ("relnamespace", OID.OID),
        ("oid", OID.TEXT),
        ("r", OID.REGCLASS),
        ("to_regtype", OID.REGTYPE),
    ]
    assert rows == [("u", oid, "bigint", 20, "u", "u", 2200, "u", "u", "text")]


def test_a_regtype_compares_as_the_types_oid(conn: psycopg.Connection) -> None:
    found = conn.execute(
        "SELECT a.attname, a.atttypid::regtype FROM pg_attribute a "
        "WHERE a.attrelid = 'u'::regclass AND a.atttypid = 'bigint'::regtype"
    ).fetchall()
    assert found == [("a", "bigint")]
    assert conn.execute("SELECT 0::regtype::text, 0::regclass::text").fetchone() == ("-", "-")
    with pytest.raises(psycopg.errors.UndefinedObject):
        conn.execute("SELECT 'nope'::regtype FROM pg_type")


def test_count_null_aliases_and_functions_are_named_and_typed_as_the_sql_layer(
    conn: psycopg.Connection,
) -> None:
    text = (
        "SELECT count(*), NULL, relname AS x, 1 + 1, pg_table_is_visible(oid), "
        "format_type(20, NULL), current_database(), relhasindex, NOT relhasindex, "
        "relname LIKE 'u%', relkind IN ('r', 'v') FROM pg_class WHERE relname = 'u' "
        "GROUP BY relname, oid, relhasindex, relkind"
    )
    columns, rows = described(conn, text)
    assert columns == [
        ("count", OID.INT8),
        ("?column?", OID.TEXT),
        ("x", OID.NAME),
        ("?column?", OID.INT8),
        ("pg_table_is_visible", OID.BOOL),
        ("format_type", OID.TEXT),
        ("current_database", OID.NAME),
        ("relhasindex", OID.BOOL),
        ("?column?", OID.BOOL),
        ("?column?", OID.BOOL),
        ("?column?", OID.BOOL),
    ]
    assert rows == [(1, None, "u", 2, True, "bigint", "defaultdb", True, False, True, True)]
    # the SQL layer names and types the same expressions alike
    mine, _ = described(
        conn, "SELECT count(*), NULL, s AS x, 1 + 1, a IN (1, 2) FROM u GROUP BY s, a"
    )
    assert [name for name, _ in mine] == ["count", "?column?", "x", "?column?", "?column?"]
    assert [oid for _, oid in mine] == [OID.INT8, OID.TEXT, OID.TEXT, OID.INT8, OID.BOOL]


def test_an_empty_result_keeps_its_columns_types(conn: psycopg.Connection) -> None:
    columns, rows = described(
        conn, "SELECT oid, relname, relname = 'x', count(*) FROM pg_class WHERE false GROUP BY 1"
    )
    assert rows == []
    assert columns == [
        ("oid", OID.OID),
        ("relname", OID.NAME),
        ("?column?", OID.BOOL),
        ("count", OID.INT8),
    ]
    # a catalog feedkv keeps empty: its columns, typed where their expressions tell
    columns, rows = described(conn, "SELECT tgname, tgenabled = 'O' FROM pg_trigger")
    assert (columns, rows) == ([("tgname", OID.TEXT), ("?column?", OID.BOOL)], [])


def test_prepared_and_binary_results_keep_the_types(conn: psycopg.Connection) -> None:
    with conn.cursor(binary=True) as cursor:
        cursor.execute(
            "SELECT oid, relname, relname = %s FROM pg_class WHERE relname = %s", ["u", "u"]
        )
        assert cursor.description is not None
        assert [c.type_code for c in cursor.description] == [OID.OID, OID.NAME, OID.BOOL]
        [(oid, name, equal)] = cursor.fetchall()
    assert (name, equal) == ("u", True)
    assert conn.execute("SELECT oid FROM pg_class WHERE relname = 'u'").fetchone() == (oid,)


def test_arithmetic_is_typed_and_divides_as_the_sql_layer(conn: psycopg.Connection) -> None:
    conn.execute("INSERT INTO u VALUES (1, 'one')")
    text = "SELECT 3 / 2, 4 / 2, 1.5 * 2, 1.5, 2.5::float8 / 2, 1 + 1"
    columns, rows = described(conn, f"{text} FROM pg_class WHERE relname = 'u'")
    mine = described(conn, f"{text} FROM u")
    assert (columns, rows) == mine
    assert rows == [(Decimal("1.5"), Decimal("2"), Decimal("3.0"), Decimal("1.5"), 1.25, 2)]
    assert [oid for _, oid in columns] == [OID.NUMERIC] * 4 + [OID.FLOAT8, OID.INT8]
    # SQLite's division truncates integers and gives NULL for a zero divisor
    found = conn.execute("SELECT relname FROM pg_class WHERE relnatts / 4 > 0.4")
    assert ("u",) in found.fetchall()
    with pytest.raises(psycopg.errors.DivisionByZero):
        conn.execute("SELECT relnatts / 0 FROM pg_class")


def test_char_and_regproc_columns_have_postgresql_types(conn: psycopg.Connection) -> None:
    columns, rows = described(
        conn,
        "SELECT c.relkind, t.typinput, t.typtype, a.amhandler FROM pg_class c, pg_type t, "
        "pg_am a WHERE c.relname = 'u' AND t.typname = 'int8' AND a.amname = 'heap'",
    )
    assert columns == [
        ("relkind", OID.CHAR),
        ("typinput", OID.REGPROC),
        ("typtype", OID.CHAR),
        ("amhandler", OID.REGPROC),
    ]
    assert rows == [("r", "int8in", "b", "heap_tableam_handler")]


def test_catalogs_feedkv_keeps_empty_answer_as_empty_tables(conn: psycopg.Connection) -> None:
    assert conn.execute("SELECT count(*) FROM pg_policy").fetchall() == [(0,)]
    joined = conn.execute(
        "SELECT count(*), max(tgname) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
    )
    assert joined.fetchall() == [(0, None)]
    outer = conn.execute(
        "SELECT relname, tgname FROM pg_class c LEFT JOIN pg_trigger t ON t.tgrelid = c.oid "
        "WHERE relname = 'u'"
    )
    assert outer.fetchall() == [("u", None)]
    assert conn.execute("SELECT tgname FROM pg_trigger").fetchall() == []
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="name its columns"):
        conn.execute("SELECT * FROM pg_trigger")


def test_a_regclass_is_its_oid_in_binary_and_sorts_by_it(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE a_later (k INT PRIMARY KEY)")
    [(oid,)] = conn.execute("SELECT 'u'::regclass::oid").fetchall()
    row = conn.execute("SELECT 'u'::regclass, 'int8'::regtype", binary=True).fetchone()
    assert row == (oid.to_bytes(4, "big"), (20).to_bytes(4, "big"))  # as PostgreSQL's
    ordered = conn.execute(
        "SELECT c.oid::regclass FROM pg_class c WHERE relname IN ('u', 'a_later') ORDER BY 1"
    )
    assert ordered.fetchall() == [("u",), ("a_later",)]  # by OID, as PostgreSQL orders them
