"""TIME, INTERVAL and INET over the SQL port with psycopg: PostgreSQL's OIDs (1083,
1186, 869), and values that go in as parameters and come back equal, in the text and
the binary format."""

from __future__ import annotations

import datetime
import ipaddress

import psycopg
import pytest

from feedkv.pgwire.types import OID


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_time_interval_and_inet_round_trip_with_their_oids(pg_url: str, binary: bool) -> None:
    row = (
        datetime.time(12, 30, 45, 500000),
        datetime.timedelta(days=3, hours=4, minutes=5, seconds=6, microseconds=7),
        ipaddress.ip_interface("192.168.0.1/24"),
    )
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, at TIME, span INTERVAL, addr INET)")
        conn.execute("INSERT INTO t VALUES (1, %s, %s, %s)", row)
        conn.execute("INSERT INTO t VALUES (2, '08:00', '-1 day', '::1')")
        cursor = conn.cursor(binary=binary)
        cursor.execute("SELECT at, span, addr FROM t ORDER BY k")
        assert [d.type_code for d in cursor.description] == [OID.TIME, OID.INTERVAL, OID.INET]
        assert cursor.fetchall() == [
            row,
            (datetime.time(8), datetime.timedelta(days=-1), ipaddress.ip_address("::1")),
        ]
        cursor.execute(
            "SELECT k FROM t WHERE span < %s AND addr > %s", (datetime.timedelta(0), "10.0.0.0")
        )
        assert cursor.fetchall() == [(2,)]


def test_an_interval_of_months_keeps_them_apart_from_days(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        cursor = conn.execute(
            "SELECT ('1 year 2 months 3 days'::INTERVAL)::STRING, "
            "'2024-01-31'::DATE + '1 month'::INTERVAL"
        )
        assert cursor.fetchone() == ("1 year 2 mons 3 days", datetime.datetime(2024, 2, 29))


def test_an_enum_column_reads_and_takes_its_labels(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
        conn.execute("CREATE TABLE p (k INT PRIMARY KEY, m mood)")
        conn.execute("INSERT INTO p VALUES (1, %s), (2, 'sad'), (3, 'ok')", ("happy",))
        cursor = conn.execute("SELECT m FROM p WHERE m > %s ORDER BY m", ("sad",))
        assert cursor.fetchall() == [("ok",), ("happy",)]
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            conn.execute("INSERT INTO p VALUES (4, 'angry')")
