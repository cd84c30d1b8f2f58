"""Row values over the SQL port: a column of ``(1, 'a')``, ``ROW(...)`` or a SELECT
list's ``jsonb_each(j)`` is PostgreSQL's ``record`` (OID 2249), in record_out's text,
as CockroachDB sends a tuple; psycopg reads it as a tuple of the elements' texts."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import asyncpg
import psycopg

from feedkv.pgwire.types import OID, column_oid, encode_binary, encode_text
from feedkv.sql.records import RECORD_OID, Record


def test_a_row_value_is_a_record_in_its_text_form(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        cursor = conn.execute("SELECT (1, 'a b', NULL, true), ROW(2.5::FLOAT)")
        assert [d.type_code for d in cursor.description] == [RECORD_OID, RECORD_OID]
        assert cursor.fetchall() == [(("1", "a b", None, "t"), ("2.5",))]
        cursor = conn.execute("""SELECT jsonb_each('{"a": 1, "b": "x"}')""")
        assert [d.type_code for d in cursor.description] == [RECORD_OID]
        assert cursor.fetchall() == [(("a", "1"),), (("b", '"x"'),)]
        result = conn.pgconn.exec_(b"SELECT (1, 'a,b', NULL, '')")
        assert result.ftype(0) == RECORD_OID
        assert result.get_value(0, 0) == b'(1,"a,b",,"")'


def test_a_record_in_binary_is_record_send() -> None:
    """PostgreSQL's record_send: the count, then each element's type OID, length and
    binary value (-1 and the unknown type for NULL); a JSONB element the record knows
    is jsonb."""
    record = Record((7, None, {"a": 1}), json_at=frozenset({2}))
    assert column_oid([record, None]) == RECORD_OID
    assert encode_text(record, RECORD_OID) == b'(7,,"{""a"": 1}")'
    jsonb = encode_binary({"a": 1}, OID.JSONB)
    assert encode_binary(record, RECORD_OID) == (
        struct.pack("!i", 3)
        + struct.pack("!Iiq", OID.INT8, 8, 7)
        + struct.pack("!Ii", OID.UNKNOWN, -1)
        + struct.pack("!Ii", OID.JSONB, len(jsonb))
        + jsonb
    )


def test_describe_announces_a_row_value_as_a_record(pg_url: str) -> None:
    """A prepared statement's Describe announces the type its rows carry: a row value's
    column is ``record``, as CockroachDB describes a tuple (not ``text``), so asyncpg
    reads it as a record of typed values (record_recv) and psycopg as one of texts."""

    async def scenario() -> list[tuple[list[int], list[tuple[Any, ...]]]]:
        conn = await asyncpg.connect(pg_url)
        try:
            await conn.execute("CREATE TABLE kv (k INT PRIMARY KEY, v STRING)")
            await conn.execute("INSERT INTO kv VALUES (1, 'a')")
            found = []
            for query in QUERIES:
                statement = await conn.prepare(query)
                types = [a.type.oid for a in statement.get_attributes()]
                found.append((types, [tuple(row) for row in await statement.fetch()]))
            return found
        finally:
            await conn.close()

    assert asyncio.run(asyncio.wait_for(scenario(), timeout=60)) == [
        ([RECORD_OID, OID.INT8], [((1, "a"), 2)]),
        ([RECORD_OID], [(("a", "1"),)]),
        ([OID.INT8, OID.TEXT, RECORD_OID], [(1, "a", (1, "a"))]),
    ]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        cursor = conn.execute(QUERIES[0], prepare=True)
        assert cursor.description is not None
        assert [d.type_code for d in cursor.description] == [RECORD_OID, OID.INT8]
        assert cursor.fetchall() == [(("1", "a"), 2)]


QUERIES = ["SELECT (1, 'a'), 2", """SELECT jsonb_each('{"a": 1}')""", "SELECT *, (k, v) FROM kv"]
