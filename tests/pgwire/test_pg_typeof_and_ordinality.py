"""pg_typeof and WITH ORDINALITY through real clients: pg_typeof names the type of the
value it gets by its SQL standard name, as CockroachDB's (a STRING); unnest and
generate_series WITH ORDINALITY number their rows from 1 in a last INT column, which a
client that prepares the statement (asyncpg) sees described as such."""

from __future__ import annotations

import asyncio
import datetime

import asyncpg
import psycopg
import pytest
from psycopg import errors


def test_pg_typeof_names_each_values_type(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE v (n INT4 PRIMARY KEY, s VARCHAR(4), at TIMESTAMP)")
        conn.execute("INSERT INTO v VALUES (1, 'a', '2024-01-02 03:04:05')")
        row = conn.execute(
            "SELECT pg_typeof(n), pg_typeof(s), pg_typeof(at), pg_typeof(now()), "
            "pg_typeof(1.5), pg_typeof(%s::FLOAT), pg_typeof(ARRAY[n]), pg_typeof(NULL), "
            "pg_typeof('{}'::JSONB), pg_typeof(n > 0) FROM v",
            [2.5],
        ).fetchone()
        # NB: as CockroachDB: the value's type, so an INT4's is bigint and a VARCHAR's text
        assert row == (
            "bigint",
            "text",
            "timestamp without time zone",
            "timestamp with time zone",
            "numeric",
            "double precision",
            "bigint[]",
            "unknown",
            "jsonb",
            "boolean",
        )
        with pytest.raises(errors.UndefinedFunction, match="pg_typeof"):
            conn.execute("SELECT pg_typeof(1, 2)")


def test_with_ordinality_numbers_the_rows(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        cur = conn.execute("SELECT * FROM unnest(%s::STRING[]) WITH ORDINALITY", [["x", "y"]])
        assert [c.name for c in cur.description] == ["unnest", "ordinality"]
        assert cur.fetchall() == [("x", 1), ("y", 2)]
        cur = conn.execute(
            "SELECT g.n, g.v FROM generate_series(10, 30, 10) WITH ORDINALITY AS g(v, n)"
        )
        assert cur.fetchall() == [(1, 10), (2, 20), (3, 30)]


def test_asyncpg_prepares_an_unnest_with_ordinality(pg_url: str) -> None:
    async def scenario() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(pg_url)
        try:
            query = "SELECT v, n FROM unnest($1::INT[]) WITH ORDINALITY AS u(v, n) ORDER BY n DESC"
            statement = await conn.prepare(query)
            assert [a.type.name for a in statement.get_attributes()] == ["int8", "int8"]
            return await statement.fetch([7, 8])
        finally:
            await conn.close()

    rows = asyncio.run(asyncio.wait_for(scenario(), timeout=60))
    assert [tuple(r) for r in rows] == [(8, 2), (7, 1)]


def test_asyncpg_prepares_a_series_of_times_with_placeholders(pg_url: str) -> None:
    """generate_series over times is described before it runs: with a TIMESTAMPTZ start,
    its other placeholders a TIMESTAMPTZ stop and an INTERVAL step (PostgreSQL's
    overload), its column a timestamptz; asyncpg encodes and decodes them in binary."""

    async def scenario() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(pg_url)
        try:
            query = "SELECT g FROM generate_series($1::TIMESTAMPTZ, $2, $3) AS g"
            statement = await conn.prepare(query)
            assert [p.name for p in statement.get_parameters()] == [
                "timestamptz",
                "timestamptz",
                "interval",
            ]
            assert [a.type.name for a in statement.get_attributes()] == ["timestamptz"]
            start = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
            return await statement.fetch(
                start, start + datetime.timedelta(hours=1), datetime.timedelta(minutes=30)
            )
        finally:
            await conn.close()

    rows = asyncio.run(asyncio.wait_for(scenario(), timeout=60))
    start = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    assert [r["g"] for r in rows] == [start + datetime.timedelta(minutes=m) for m in (0, 30, 60)]
