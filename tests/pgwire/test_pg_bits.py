"""BIT and VARBIT over the SQL port with psycopg: PostgreSQL's OIDs (1560, 1562), the
text form ('0101') and the binary one (the bit count, then the bits packed eight to a
byte, as PostgreSQL sends them)."""

from __future__ import annotations

import psycopg
import pytest

from feedkv.pgwire.types import OID


def test_bits_read_as_text_with_their_oids(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE b (k BIT(4) PRIMARY KEY, v VARBIT(12))")
        conn.execute("INSERT INTO b VALUES (B'0101', B'1'), (%s, %s)", ("1000", "101010101"))
        cursor = conn.execute("SELECT k, v FROM b ORDER BY k")
        assert [d.type_code for d in cursor.description] == [OID.BIT, OID.VARBIT]
        assert cursor.fetchall() == [("0101", "1"), ("1000", "101010101")]
        cursor = conn.execute("SELECT k FROM b WHERE v = %s", ("1",))
        assert cursor.fetchall() == [("0101",)]
        with pytest.raises(psycopg.errors.StringDataLengthMismatch):
            conn.execute("INSERT INTO b VALUES (B'011', NULL)")
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            conn.execute("INSERT INTO b VALUES ('01x1', NULL)")


def test_bits_read_in_the_binary_format_as_postgresql_packs_them(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        cursor = conn.cursor(binary=True)
        cursor.execute("SELECT B'0101', B'101010101'::VARBIT")
        # 4 bits: 0101 0000; 9 bits: 10101010 1000 0000
        assert cursor.fetchone() == (b"\x00\x00\x00\x04\x50", b"\x00\x00\x00\x09\xaa\x80")
