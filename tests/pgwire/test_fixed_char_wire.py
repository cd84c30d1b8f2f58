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
