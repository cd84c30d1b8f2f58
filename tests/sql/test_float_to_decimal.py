"""A FLOAT cast to DECIMAL as CockroachDB casts it: the float's shortest digits read in
exponent form (apd's SetFloat64 over Go's ``%E``), so no trailing zeros are made up:
``1.0::FLOAT::DECIMAL`` is ``1``, ``100.0`` is ``1E+2``."""

from __future__ import annotations

import decimal

from feedkv import DB


def test_a_whole_float_casts_to_a_decimal_without_a_fraction(db: DB) -> None:
    [row] = db.sql(
        "SELECT 1.0::FLOAT::DECIMAL::STRING, 0.1::FLOAT::DECIMAL::STRING, "
        "1e20::FLOAT::DECIMAL::STRING, 100.0::FLOAT::DECIMAL::STRING, "
        "123.0::FLOAT::DECIMAL::STRING, 1.5e-7::FLOAT::DECIMAL::STRING, "
        "(-2.5)::FLOAT::DECIMAL::STRING, 0.0::FLOAT::DECIMAL::STRING"
    ).rows
    assert row == ("1", "0.1", "1E+20", "1E+2", "123", "1.5E-7", "-2.5", "0")


def test_infinite_and_nan_floats_stay_special(db: DB) -> None:
    [row] = db.sql(
        "SELECT 'inf'::FLOAT::DECIMAL::STRING, '-inf'::FLOAT::DECIMAL::STRING, "
        "'nan'::FLOAT::DECIMAL::STRING"
    ).rows
    assert row == ("Infinity", "-Infinity", "NaN")


def test_corr_cast_to_decimal_prints_as_cockroachdb(db: DB) -> None:
    db.sql("CREATE TABLE pts (x FLOAT, y FLOAT)")
    db.sql("INSERT INTO pts VALUES (1, 2), (2, 4), (3, 6)")
    [row] = db.sql("SELECT corr(y, x)::DECIMAL, corr(y, x)::DECIMAL::STRING FROM pts").rows
    assert row == (decimal.Decimal("1"), "1")


def test_a_float_stored_in_a_decimal_column_keeps_its_shortest_digits(db: DB) -> None:
    db.sql("CREATE TABLE d (k INT PRIMARY KEY, v DECIMAL, w DECIMAL(10, 2))")
    db.sql("INSERT INTO d VALUES (1, 2.0::FLOAT, 2.0::FLOAT), (2, 0.3::FLOAT, 0.3::FLOAT)")
    rows = db.sql("SELECT v::STRING, w::STRING FROM d ORDER BY k").rows
    assert rows == [("2", "2.00"), ("0.3", "0.30")]
