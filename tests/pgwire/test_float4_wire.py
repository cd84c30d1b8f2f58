"""A FLOAT4 value goes out on the wire as CockroachDB writes it: float32's digits
(6 significant ones at the default extra_float_digits, the shortest float32 text above
0), read by a real client (psycopg, text format)."""

from __future__ import annotations

import psycopg


def test_a_real_column_is_sent_with_float32_digits(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE w (k INT PRIMARY KEY, r REAL)")
        conn.execute("INSERT INTO w VALUES (1, 1/3), (2, 0.1)")
        rows = conn.execute("SELECT k, r FROM w ORDER BY k").fetchall()
        assert rows == [(1, 0.333333), (2, 0.1)]
        conn.execute("SET extra_float_digits = 1")
        [(third,)] = conn.execute("SELECT r FROM w WHERE k = 1").fetchall()
        assert third == 0.33333334
