"""Row values over the SQL port: a column of ``(1, 'a')``, ``ROW(...)`` or a SELECT
list's ``jsonb_each(j)`` is PostgreSQL's ``record`` (OID 2249), in record_out's text,
as CockroachDB sends a tuple; psycopg reads it as a tuple of the elements' texts."""

from __future__ import annotations

import struct

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
