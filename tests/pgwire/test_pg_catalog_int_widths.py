"""The catalog's small integer columns go out as PostgreSQL declares them: pg_attribute's
attnum and attlen as int2 (21), atttypmod as int4 (23), pg_class's relnatts, pg_type's
typlen and pg_index's indnatts as int2, information_schema.columns' ordinal_position
(a cardinal_number, a domain over integer: its base type on the wire) as int4; not as
int8 (20). In binary results each value takes its type's width."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from feedkv.pgwire.types import OID


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute("CREATE TABLE w (a INT PRIMARY KEY, s VARCHAR(10), n DECIMAL(8, 2))")
        yield connection


def test_catalog_small_integer_columns_have_postgresql_types(conn: psycopg.Connection) -> None:
    for binary in (False, True):
        cursor = conn.cursor(binary=binary)
        cursor.execute(
            "SELECT a.attnum, a.attlen, a.atttypmod, c.relnatts, t.typlen, i.indnatts "
            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_type t ON t.oid = a.atttypid "
            "JOIN pg_index i ON i.indrelid = c.oid "
            "WHERE c.relname = 'w' ORDER BY a.attnum"
        )
        assert cursor.description is not None
        assert [c.type_code for c in cursor.description] == [
            OID.INT2, OID.INT2, OID.INT4, OID.INT2, OID.INT2, OID.INT2,
        ]  # fmt: skip
        # NB: VARCHAR(10)'s typmod is 14 (its length + 4), a numeric's and a varlena's -1
        assert cursor.fetchall() == [
            (1, 8, -1, 3, 8, 1),
            (2, -1, 14, 3, -1, 1),
            (3, -1, 8 << 16 | 2 + 4, 3, -1, 1),
        ]


def test_information_schema_ordinal_position_is_int4(conn: psycopg.Connection) -> None:
    for binary in (False, True):
        cursor = conn.cursor(binary=binary)
        cursor.execute(
            "SELECT column_name, ordinal_position, character_maximum_length "
            "FROM information_schema.columns WHERE table_name = 'w' ORDER BY ordinal_position"
        )
        assert cursor.description is not None
        assert [c.type_code for c in cursor.description] == [OID.TEXT, OID.INT4, OID.INT4]
        assert cursor.fetchall() == [("a", 1, None), ("s", 2, 10), ("n", 3, None)]


def test_an_int2_catalog_column_of_nulls_keeps_its_type(conn: psycopg.Connection) -> None:
    cursor = conn.cursor(binary=True)
    cursor.execute("SELECT attnum FROM pg_attribute WHERE false")
    assert cursor.description is not None
    assert [c.type_code for c in cursor.description] == [OID.INT2]
    assert cursor.fetchall() == []
