"""A CHAR(n) value goes out on the wire padded with spaces to n, as CockroachDB sends
it, though SQL expressions see it without its trailing spaces; read by a real client
(psycopg, text format)."""

from __future__ import annotations

import psycopg


def test_a_char_column_is_sent_padded_to_its_length(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE cw (k INT PRIMARY KEY, c CHAR(4), v VARCHAR(4))")
        conn.execute("INSERT INTO cw VALUES (1, 'ab ', 'ab '), (2, '', '')")
        rows = conn.execute("SELECT k, c, length(c), v FROM cw ORDER BY k").fetchall()
        assert rows == [(1, "ab  ", 2, "ab "), (2, "    ", 0, "")]
        [(cast,)] = conn.execute("SELECT 'x'::CHAR(3)").fetchall()
        assert cast == "x  "


def test_a_varchar_column_is_described_as_varchar_with_its_length(pg_url: str) -> None:
    """VARCHAR(n) goes out as PostgreSQL's varchar (OID 1043) with its length, as the
    catalog has it, so JDBC and ORMs map it to a bounded string, not text; in binary
    format too."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE vw (k INT PRIMARY KEY, c CHAR(4), v VARCHAR(4), s STRING)")
        conn.execute("INSERT INTO vw VALUES (1, 'ab', 'ab', 'ab')")
        for binary in (False, True):
            cur = conn.cursor(binary=binary)
            assert cur.execute("SELECT c, v, s FROM vw").fetchall() == [("ab  ", "ab", "ab")]
            assert cur.description is not None
            described = [(col.type_code, col.display_size) for col in cur.description]
            assert described == [(1042, 4), (1043, 4), (25, None)]
