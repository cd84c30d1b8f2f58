"""JSON built from SQL values of every type reaches psycopg as CockroachDB sends it
(text and binary formats): a DECIMAL inside a built object was an internal error
when the row was sent."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_a_decimal_in_a_built_object_is_sent_with_its_digits(pg_url: str, binary: bool) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        cur = conn.cursor(binary=binary)
        cur.execute("SELECT jsonb_build_object('d', 1.5::DECIMAL), to_jsonb(1.50::DECIMAL)::STRING")
        assert cur.fetchall() == [({"d": 1.5}, "1.50")]
        # NB: the raw bytes, which psycopg's JSON loader would read into floats
        result = conn.pgconn.exec_params(
            b"SELECT json_build_object('d', 10.00::DECIMAL)", [], result_format=int(binary)
        )
        raw = result.get_value(0, 0)
    assert raw is not None
    assert bytes(raw).removeprefix(b"\x01") == b'{"d": 10.00}'


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_every_type_is_converted_to_json_over_the_wire(pg_url: str, binary: bool) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        row: tuple[Any, ...] | None = (
            conn.cursor(binary=binary)
            .execute(
                "SELECT jsonb_build_object("
                "'tz', '2026-01-02 03:04:05.123456+00'::TIMESTAMPTZ, "
                "'ts', '2026-01-02 03:04:05'::TIMESTAMP, 'date', '2026-01-02'::DATE, "
                "'time', '03:04:05'::TIME, 'iv', '2 hours'::INTERVAL, "
                "'id', '8b6c0a36-3c8e-4d7a-9a43-3c0f6ad1e7a1'::UUID, 'arr', ARRAY[1, 2], "
                "'b', '\\x0a'::BYTES, 'ip', '10.0.0.1'::INET), "
                "to_jsonb('2026-01-02'::DATE), to_json(ARRAY['a', 'b'])"
            )
            .fetchone()
        )
    assert row == (
        {
            "tz": "2026-01-02T03:04:05.123456Z",
            "ts": "2026-01-02T03:04:05",
            "date": "2026-01-02",
            "time": "03:04:05",
            "iv": "02:00:00",
            "id": "8b6c0a36-3c8e-4d7a-9a43-3c0f6ad1e7a1",
            "arr": [1, 2],
            "b": "\\x0a",
            "ip": "10.0.0.1",
        },
        "2026-01-02",
        ["a", "b"],
    )


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_jsonb_agg_of_timestamps_and_decimals_over_the_wire(pg_url: str, binary: bool) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE pay (k INT PRIMARY KEY, at TIMESTAMPTZ, amount DECIMAL)")
        conn.execute("INSERT INTO pay VALUES (1, '2026-01-02 03:04:05+00', 1.25), (2, NULL, 2.5)")
        rows = (
            conn.cursor(binary=binary)
            .execute("SELECT jsonb_agg(at ORDER BY k), jsonb_agg(amount ORDER BY k) FROM pay")
            .fetchall()
        )
    assert rows == [(["2026-01-02T03:04:05Z", None], [1.25, 2.5])]


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_a_json_string_document_goes_in_as_a_parameter_and_is_copied(
    pg_url: str, binary: bool
) -> None:
    # PostgreSQL takes any JSON text: a top-level string was refused ("could not parse JSON")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        cur = conn.cursor(binary=binary)
        cur.execute("CREATE TABLE j (k INT PRIMARY KEY, v JSONB)")
        cur.execute("INSERT INTO j VALUES (1, %s)", [Jsonb("str")])
        assert cur.execute("SELECT %s::JSONB", [Jsonb("s")]).fetchall() == [("s",)]
        cur.execute("INSERT INTO j SELECT 2, v FROM j WHERE k = 1")  # a JSONB column copied
        rows = cur.execute("SELECT k, v, v::STRING, v->>0 IS NULL FROM j ORDER BY k").fetchall()
        assert rows == [(1, "str", '"str"', True), (2, "str", '"str"', True)]
