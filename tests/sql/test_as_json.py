"""Every SQL value as JSON, as CockroachDB's ``tree.AsJSON`` converts it: through
``to_jsonb``/``to_json``, ``jsonb_build_object``/``json_build_object`` and ``jsonb_agg``
(the value's JSON text shown by ``::STRING``)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.as_json import as_json


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("1.50::DECIMAL", "1.50"),
        ("-0.000123::DECIMAL", "-0.000123"),
        ("'NaN'::DECIMAL", '"NaN"'),
        ("2.5::FLOAT", "2.5"),
        ("2.0::FLOAT", "2"),
        ("1e20::FLOAT", "1E+20"),
        ("0.1::FLOAT4", "0.10000000149011612"),
        ("'-Infinity'::FLOAT", '"-Infinity"'),
        ("7", "7"),
        ("true", "true"),
        ("'a\"b'", '"a\\"b"'),
        ("'2026-01-02 03:04:05.123+00'::TIMESTAMPTZ", '"2026-01-02T03:04:05.123Z"'),
        ("'2026-01-02 03:04:05+00'::TIMESTAMPTZ", '"2026-01-02T03:04:05Z"'),
        ("'2026-01-02 03:04:05.5'::TIMESTAMP", '"2026-01-02T03:04:05.5"'),
        ("'2026-01-02'::DATE", '"2026-01-02"'),
        ("'03:04:05.25'::TIME", '"03:04:05.25"'),
        ("'1 day 2 hours'::INTERVAL", '"1 day 02:00:00"'),
        (
            "'8b6c0a36-3c8e-4d7a-9a43-3c0f6ad1e7a1'::UUID",
            '"8b6c0a36-3c8e-4d7a-9a43-3c0f6ad1e7a1"',
        ),
        ("'\\x01ff'::BYTES", '"\\\\x01ff"'),
        ("'192.168.0.1/24'::INET", '"192.168.0.1/24"'),
        ("ARRAY[1, NULL, 3]", "[1, null, 3]"),
        ("ARRAY['2026-01-02'::DATE]", '["2026-01-02"]'),
        ("'{\"b\": [1]}'::JSONB", '{"b": [1]}'),
        ("(1, 'a')", '{"f1": 1, "f2": "a"}'),
        (
            "ROW(1.50, NULL, (true, ARRAY[2]))",
            '{"f1": 1.50, "f2": null, "f3": {"f1": true, "f2": [2]}}',
        ),
    ],
)
def test_to_jsonb_converts_each_type_as_cockroachdb(db: DB, value: str, text: str) -> None:
    [(jsonb, json)] = db.sql(f"SELECT to_jsonb({value})::STRING, to_json({value})::STRING").rows
    assert (jsonb, json) == (text, text)
    [(built,)] = db.sql(f"SELECT jsonb_build_object('v', {value})::STRING").rows
    assert built == '{"v": ' + text + "}"


def test_a_timestamptz_is_written_in_the_session_time_zone(db: DB) -> None:
    db.sql("SET TIME ZONE 'Europe/Berlin'")
    [(text,)] = db.sql("SELECT to_jsonb('2026-01-02 03:04:05.1+00'::TIMESTAMPTZ)::STRING").rows
    assert text == '"2026-01-02T04:04:05.1+01:00"'


def test_to_jsonb_of_null_is_null(db: DB) -> None:
    assert db.sql("SELECT to_jsonb(NULL::DECIMAL) IS NULL").rows == [(True,)]


def test_json_build_object_keeps_a_decimals_digits(db: DB) -> None:
    [(built,)] = db.sql(
        "SELECT json_build_object('d', 1.5::DECIMAL, 'e', 10.00::DECIMAL)::STRING"
    ).rows
    assert built == '{"d": 1.5, "e": 10.00}'


def test_jsonb_agg_takes_timestamptz_and_decimal_columns(db: DB) -> None:
    db.sql("CREATE TABLE m (k INT PRIMARY KEY, at TIMESTAMPTZ, amount DECIMAL)")
    db.sql(
        "INSERT INTO m VALUES (1, '2026-01-02 03:04:05+00', 1.50), "
        "(2, '2026-01-03 00:00:00.25+00', NULL)"
    )
    [(times, amounts)] = db.sql(
        "SELECT jsonb_agg(at ORDER BY k)::STRING, jsonb_agg(amount ORDER BY k)::STRING FROM m"
    ).rows
    assert times == '["2026-01-02T03:04:05Z", "2026-01-03T00:00:00.25Z"]'
    assert amounts == "[1.50, null]"


def test_a_built_object_with_a_decimal_is_stored_in_a_jsonb_column(db: DB) -> None:
    db.sql("CREATE TABLE docs (k INT PRIMARY KEY, j JSONB)")
    db.sql("INSERT INTO docs VALUES (1, jsonb_build_object('d', 2.25::DECIMAL))")
    assert db.sql("SELECT j->>'d' FROM docs").rows == [("2.25",)]


def test_row_to_json_takes_a_row_value_only(db: DB) -> None:
    """CockroachDB's row_to_json has the one signature ``row_to_json(tuple)``."""
    [(text, second)] = db.sql(
        "SELECT row_to_json((1, 'a'))::STRING, row_to_json(ROW(1, 'a'))->>'f2'"
    ).rows
    assert (text, second) == ('{"f1": 1, "f2": "a"}', "a")
    with pytest.raises(SQLError) as raised:
        db.sql("SELECT row_to_json(1)")
    assert (raised.value.code, str(raised.value)) == (
        "42883",
        "unknown signature: row_to_json(int)",
    )


def test_a_value_with_no_sql_type_is_refused_not_written_as_its_repr() -> None:
    with pytest.raises(SQLError) as raised:
        as_json(object())
    assert raised.value.code == "0A000"
