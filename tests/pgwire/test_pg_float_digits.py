"""FLOATs in the wire's text format follow the session's ``extra_float_digits`` as in
CockroachDB (15 significant digits by default, the shortest exact text from 1 up);
the binary format is always exact."""

from __future__ import annotations

import psycopg


def test_text_results_follow_extra_float_digits(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE vals (k INT PRIMARY KEY, f FLOAT)")
        conn.execute(
            "INSERT INTO vals VALUES (1, 0.1::FLOAT + 0.2::FLOAT), (2, 12345678901234567890000)"
        )
        query = b"SELECT f FROM vals ORDER BY k"
        by_default = conn.pgconn.exec_(query)
        assert [by_default.get_value(i, 0) for i in range(2)] == [b"0.3", b"1.23456789012346e+22"]
        conn.execute("SET extra_float_digits = 3")
        exact = conn.pgconn.exec_(query)
        assert [exact.get_value(i, 0) for i in range(2)] == [
            b"0.30000000000000004",
            b"1.2345678901234568e+22",
        ]
        conn.execute("SET extra_float_digits = -10")
        short = conn.pgconn.exec_(query)
        assert [short.get_value(i, 0) for i in range(2)] == [b"0.3", b"1.2346e+22"]
        binary = conn.cursor(binary=True).execute("SELECT f FROM vals ORDER BY k").fetchall()
        assert binary == [(0.30000000000000004,), (1.2345678901234568e22,)]


def test_copy_to_writes_floats_as_text_results_do(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE vals (k INT PRIMARY KEY, f FLOAT)")
        conn.execute("INSERT INTO vals VALUES (1, 0.1::FLOAT + 0.2::FLOAT)")
        with conn.cursor().copy("COPY vals TO STDOUT") as copy:
            data = b"".join(bytes(chunk) for chunk in copy)
    assert data == b"1\t0.3\n"
