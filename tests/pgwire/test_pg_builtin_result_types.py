"""The built-ins of issue 46 through a real client: each result column is described
with its function's type (a prepared statement's Describe and the rows' description
agree), so psycopg reads each value as that type."""

from __future__ import annotations

import datetime
import decimal

import psycopg
import pytest

# NB: PostgreSQL's type OIDs, as pg_type has them
_TEXT, _TEXT_ARRAY, _BYTEA, _INT8, _INTERVAL, _TIMESTAMPTZ, _JSONB, _NUMERIC = (
    25, 1009, 17, 20, 1186, 1184, 3802, 1700,
)  # fmt: skip

_QUERY = (
    "SELECT regexp_replace(%s, 'b+', 'X', 'g'), regexp_split_to_array(%s, ','), "
    "sha256(%s), decode(%s, 'hex'), encode('\\x0102'::BYTES, 'base64'), bit_length(%s), "
    "jsonb_set('{\"a\": 1}', '{b}', '[2]'), to_char('2024-05-17'::DATE, 'DD Mon YYYY'), "
    "age('2024-05-17'::TIMESTAMP, '2024-03-16'::TIMESTAMP), to_timestamp(86400), 7 // 2"
)


@pytest.mark.parametrize("prepare", [False, True], ids=["simple", "prepared"])
def test_builtins_are_described_with_their_types(pg_url: str, prepare: bool) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        cur = conn.execute(_QUERY, ["abbbc", "x,y", "abc", "ff00", "ab"], prepare=prepare)
        row = cur.fetchone()
        assert cur.description is not None
        types = [column.type_code for column in cur.description]
    assert types == [
        _TEXT, _TEXT_ARRAY, _TEXT, _BYTEA, _TEXT, _INT8, _JSONB, _TEXT, _INTERVAL,
        _TIMESTAMPTZ, _INT8,
    ]  # fmt: skip
    assert row == (
        "aXc",
        ["x", "y"],
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        b"\xff\x00",
        "AQI=",
        16,
        {"a": 1, "b": [2]},
        "17 May 2024",
        datetime.timedelta(days=61),  # NB: 2 mons 1 day, as psycopg counts a month: 30 days
        datetime.datetime(1970, 1, 2, tzinfo=datetime.UTC),
        3,
    )


def test_a_bad_pattern_and_a_bad_format_are_their_sqlstates(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InvalidRegularExpression):
            conn.execute("SELECT regexp_replace('a', %s, 'b')", ["("])
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="formats are supported"):
            conn.execute("SELECT encode('a'::BYTES, 'base32')")


@pytest.mark.parametrize("prepare", [False, True], ids=["simple", "prepared"])
def test_a_lateral_unnest_reads_each_rows_array(pg_url: str, prepare: bool) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS tagged (k INT PRIMARY KEY, tags STRING[])")
        conn.execute("UPSERT INTO tagged VALUES (1, ARRAY['a', 'b']), (2, NULL)")
        cur = conn.execute(
            "SELECT k, unnest(tags) FROM tagged WHERE k >= %s ORDER BY 1, 2", [1], prepare=prepare
        )
        assert cur.fetchall() == [(1, "a"), (1, "b")]
        assert cur.description is not None
        assert [c.type_code for c in cur.description] == [_INT8, _TEXT]


@pytest.mark.parametrize("prepare", [False, True], ids=["simple", "prepared"])
def test_integer_builtins_of_a_statement_with_placeholders_are_integers(
    pg_url: str, prepare: bool
) -> None:
    """With a placeholder the columns are typed at Describe, before any row: these were
    described as text, so psycopg handed back '2' for jsonb_array_length('[1, 2]')."""
    query = (
        "SELECT jsonb_array_length(%s::JSONB), json_array_length('[1]'), octet_length(%s), "
        "ascii('a'), strpos('abc', 'c'), abs(%s::INT), sign(-5), abs(-1.5), "
        "jsonb_typeof('{}'), to_hex(255)"
    )
    with psycopg.connect(pg_url, autocommit=True) as conn:
        cur = conn.execute(query, ["[1, 2]", "héllo", -3], prepare=prepare)
        row = cur.fetchone()
        assert cur.description is not None
        types = [column.type_code for column in cur.description]
    assert types == [_INT8] * 7 + [_NUMERIC, _TEXT, _TEXT]
    assert row == (2, 1, 6, 97, 3, 3, -1, decimal.Decimal("1.5"), "object", "ff")
