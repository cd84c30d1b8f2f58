"""A JSON number keeps its decimal digits, as CockroachDB keeps it (an apd decimal, per
its JSONB docs): ``'{"a": 1.10}'::JSONB`` is stored and read back as ``{"a": 1.10}``,
never as the float 1.1, and compares equal to ``{"a": 1.1}``."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql import jsonb


def one(db: DB, query: str) -> object:
    [(value,)] = db.sql(query).rows
    return value


def text(db: DB, query: str) -> str:
    """The JSON text of a query's one JSONB value, as CockroachDB prints it."""
    return jsonb.dumps(one(db, query), spaced=True)


def test_a_number_keeps_its_digits_from_text_to_text(db: DB) -> None:
    assert text(db, """SELECT '{"a": 1.10, "b": [2.50, 3]}'::JSONB""") == (
        '{"a": 1.10, "b": [2.50, 3]}'
    )
    assert text(db, "SELECT '1.10'::JSONB") == "1.10"
    assert text(db, "SELECT '-0.0'::JSONB") == "-0.0"
    # An exponent is written as CockroachDB's decimal writes it.
    assert text(db, "SELECT '1e2'::JSONB") == "1E+2"
    assert text(db, "SELECT '1.5e-7'::JSONB") == "1.5E-7"
    assert text(db, "SELECT '12345678901234567890.123456789'::JSONB") == (
        "12345678901234567890.123456789"
    )


def test_a_stored_number_reads_back_with_its_digits(tmp_path: Path) -> None:
    with feedkv.connect(tmp_path / "store") as db:
        db.sql("CREATE TABLE j (k INT PRIMARY KEY, v JSONB)")
        db.sql(
            """INSERT INTO j VALUES (1, '{"a": 1.10}'), (2, '0.1000'), """
            "(3, to_jsonb(1.50)), (4, jsonb_build_object('d', 2.500))"
        )
    with feedkv.connect(tmp_path / "store") as db:
        rows = db.sql("SELECT v FROM j ORDER BY k").rows
        assert [jsonb.dumps(v, spaced=True) for (v,) in rows] == [
            '{"a": 1.10}',
            "0.1000",
            "1.50",
            '{"d": 2.500}',
        ]
        assert rows[0][0] == {"a": Decimal("1.10")}
        assert one(db, "SELECT v->>'a' FROM j WHERE k = 1") == "1.10"
        assert one(db, "SELECT v->'d' FROM j WHERE k = 4") == Decimal("2.500")


def test_numbers_compare_by_value_not_by_digits(db: DB) -> None:
    assert one(db, """SELECT '{"a": 1.10}'::JSONB = '{"a": 1.1}'::JSONB""") is True
    assert one(db, "SELECT '1.0'::JSONB = '1'::JSONB") is True
    assert one(db, """SELECT '{"a": [1.50]}'::JSONB @> '{"a": [1.5]}'""") is True
    assert one(db, "SELECT '2.50'::JSONB < '10'::JSONB") is True
    assert one(db, "SELECT ('{\"a\": 1.10}'::JSONB->>'a')::DECIMAL") == Decimal("1.10")
    assert one(db, "SELECT ('{\"a\": 2.5}'::JSONB->'a')::FLOAT") == 2.5


def test_a_jsonb_column_of_numbers_and_objects_sorts_in_jsonbs_order(db: DB) -> None:
    """null < strings < numbers < booleans < arrays < objects, SQL NULL first."""
    db.sql("CREATE TABLE mixed (k INT PRIMARY KEY, v JSONB)")
    db.sql(
        """INSERT INTO mixed VALUES (1, '{"a": 1}'), (2, '2.50'), (3, '"s"'), (4, NULL), """
        "(5, 'true'), (6, '[1]'), (7, '10'), (8, 'null')"
    )
    order = [k for (k,) in db.sql("SELECT k FROM mixed ORDER BY v").rows]
    assert order == [4, 8, 3, 2, 7, 5, 6, 1]
    assert [k for (k,) in db.sql("SELECT k FROM mixed ORDER BY v DESC").rows] == order[::-1]


def test_text_that_is_not_a_json_number_is_refused(db: DB) -> None:
    for bad in ("NaN", "Infinity", "1.2.3", "01"):
        with pytest.raises(SQLError) as caught:
            db.sql(f"SELECT '{bad}'::JSONB")
        assert caught.value.code == "22P02"


def test_group_by_and_distinct_take_equal_numbers_as_one_value(db: DB) -> None:
    db.sql("CREATE TABLE g (k INT PRIMARY KEY, v JSONB)")
    db.sql(
        """INSERT INTO g VALUES (1, '{"a": 1.10}'), (2, '{"a": 1.1}'), (3, '{"a": 1}'), """
        """(4, '{"a": 1.0}'), (5, '[1, 2.50]'), (6, '[1, 2.5]')"""
    )
    assert db.sql("SELECT count(*) FROM g GROUP BY v").rows == [(2,), (2,), (2,)]
    assert one(db, "SELECT count(DISTINCT v) FROM g") == 3
    assert len(db.sql("SELECT DISTINCT v FROM g").rows) == 3
