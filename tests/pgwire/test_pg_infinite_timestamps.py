"""TIMESTAMP and TIMESTAMPTZ ``infinity`` and ``-infinity``, as PostgreSQL and
CockroachDB (since v24.3) have them: later and earlier than every other timestamp,
written as those words in text and as the largest and smallest INT8 in binary, kept by
adding or subtracting an interval; stored in a column and read back as themselves."""

from __future__ import annotations

import asyncio
import datetime
import shutil
import subprocess

import asyncpg
import psycopg
import pytest
from psycopg import errors

PSQL = shutil.which("psql")


def test_psql_prints_infinity_and_orders_it_past_every_timestamp(pg_url: str) -> None:
    assert PSQL is not None, "psql is missing: `make` installs Debian's postgresql-client"
    statements = [
        "-c",
        "CREATE TABLE e (id INT PRIMARY KEY, at TIMESTAMPTZ, INDEX (at))",
        "-c",
        "INSERT INTO e VALUES (1, 'infinity'), (2, '-Infinity'), (3, '2024-05-01 12:00:00+00')",
        "-c",
        "SET TIME ZONE 'Asia/Tokyo'",
        "-c",
        "SELECT id, at, at + INTERVAL '1 day', at::TIMESTAMP AS wall FROM e ORDER BY at",
        "-c",
        "SELECT id FROM e WHERE at > now() AND at = 'infinity'::TIMESTAMPTZ",
    ]
    done = subprocess.run(
        [PSQL, pg_url, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", *statements],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "2|-infinity|-infinity|-infinity",
        "3|2024-05-01 21:00:00+09|2024-05-02 21:00:00+09|2024-05-01 21:00:00",
        "1|infinity|infinity|infinity",
        "1",
    ]


def test_asyncpg_sends_and_reads_infinity_in_binary(pg_url: str) -> None:
    """asyncpg reads PostgreSQL's binary infinity as ``datetime.max`` (and sends that
    back as infinity)."""

    async def scenario() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(pg_url)
        try:
            await conn.execute("CREATE TABLE w (id INT PRIMARY KEY, at TIMESTAMP)")
            await conn.executemany(
                "INSERT INTO w VALUES ($1, $2)",
                [(1, datetime.datetime.max), (2, datetime.datetime.min)],
            )
            return await conn.fetch(
                "SELECT id, at, at::STRING AS s, extract(year FROM at)::FLOAT FROM w WHERE at > $1 "
                "OR at < $2 ORDER BY at",
                datetime.datetime(2000, 1, 1),
                datetime.datetime(1900, 1, 1),
            )
        finally:
            await conn.close()

    rows = asyncio.run(asyncio.wait_for(scenario(), timeout=60))
    assert [tuple(r) for r in rows] == [
        (2, datetime.datetime.min, "-infinity", float("-inf")),
        (1, datetime.datetime.max, "infinity", float("inf")),
    ]


def test_an_infinite_timestamp_is_no_date(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with pytest.raises(errors.DatetimeFieldOverflow, match="DATE cannot be infinity"):
            conn.execute("SELECT 'infinity'::TIMESTAMP::DATE")
        row = conn.execute(
            "SELECT '-infinity'::TIMESTAMP < '0001-01-02'::TIMESTAMP, "
            "extract(hour FROM 'infinity'::TIMESTAMP), to_json('-infinity'::TIMESTAMPTZ)"
        ).fetchone()
        assert row == (True, None, "-infinity")


class _Micros(psycopg.adapt.Loader):
    """A binary TIMESTAMP/TIMESTAMPTZ as its INT8 microseconds since 2000 (psycopg has no
    datetime for infinity)."""

    format = psycopg.pq.Format.BINARY

    def load(self, data: bytes | bytearray | memoryview) -> int:
        return int.from_bytes(data, "big", signed=True)


def test_year_one_and_the_last_microsecond_are_not_the_infinities(pg_url: str) -> None:
    first = datetime.datetime(1, 1, 1)
    last = datetime.datetime.max
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE x (at TIMESTAMP PRIMARY KEY, atz TIMESTAMPTZ)")
        with conn.cursor(binary=True) as cur:
            cur.executemany(
                "INSERT INTO x VALUES (%b, %b)",
                [(first, last.replace(tzinfo=datetime.UTC)), (last, None)],
            )
        conn.execute("INSERT INTO x VALUES ('infinity', '-infinity'), ('-infinity', 'infinity')")
        query = "SELECT at, atz FROM x WHERE at > '-infinity' AND at < 'infinity' ORDER BY at"
        expected = [(first, last.replace(tzinfo=datetime.UTC)), (last, None)]
        for binary in (False, True):
            with conn.cursor(binary=binary) as cur:
                assert cur.execute(query).fetchall() == expected
        text = conn.execute("SELECT at::STRING, atz::STRING FROM x ORDER BY at").fetchall()
        assert text == [
            ("-infinity", "infinity"),
            ("0001-01-01 00:00:00", "9999-12-31 23:59:59.999999+00"),
            ("9999-12-31 23:59:59.999999", None),
            ("infinity", "-infinity"),
        ]
        with conn.cursor(binary=True) as cur:
            cur.adapters.register_loader("timestamp", _Micros)
            cur.adapters.register_loader("timestamptz", _Micros)
            micros = cur.execute("SELECT at FROM x ORDER BY at").fetchall()
        seconds_to_2000 = 946_684_800 * 1_000_000
        assert micros == [
            (-(2**63),),
            (
                int((first - datetime.datetime(1970, 1, 1)).total_seconds()) * 10**6
                - seconds_to_2000,
            ),
            (253_402_300_799_999_999 - seconds_to_2000,),
            (2**63 - 1,),
        ]
