"""DECIMAL results as CockroachDB gives them: the General Decimal Arithmetic's
to-scientific-string (``5E-17``, ``1E+2``, ``0.00001``; what ``::STRING`` and the wire
show), trailing zeros kept, and ``sqrt``/``pow`` of DECIMALs to 20 significant digits
(CockroachDB's DECIMAL context), as a quotient is."""

from __future__ import annotations

import decimal

import pytest

from feedkv import DB
from feedkv.errors import SQLError


def test_small_and_large_decimals_show_an_exponent(db: DB) -> None:
    [row] = db.sql(
        "SELECT (1e-16::DECIMAL / 2)::STRING, (1e-16::DECIMAL / 3)::STRING, "
        "(1e-16::DECIMAL / 2 * 2)::STRING, 1e-5::DECIMAL::STRING, 1e2::DECIMAL::STRING, "
        "1.00::DECIMAL::STRING"
    ).rows
    assert row == ("5E-17", "3.3333333333333333333E-17", "1.0E-16", "0.00001", "1E+2", "1.00")


def test_sqrt_and_pow_of_decimals_have_twenty_significant_digits(db: DB) -> None:
    [row] = db.sql(
        "SELECT sqrt(9.789765531128956e-34::DECIMAL), "
        "pow(4.727998800941528e-14::DECIMAL, 0.06081860494226844::DECIMAL), "
        "pow(1e-4::DECIMAL, 2), pow(sqrt(1e-10::DECIMAL), 2), sqrt(2::DECIMAL)"
    ).rows
    assert row == (
        decimal.Decimal("3.1288601009199749773E-17"),
        decimal.Decimal("0.15472926640705911955"),
        decimal.Decimal("1E-8"),
        decimal.Decimal("1E-10"),
        decimal.Decimal("1.4142135623730950488"),
    )


def test_a_negative_decimal_to_a_fractional_power_is_an_error(db: DB) -> None:
    with pytest.raises(SQLError, match="complex result") as raised:
        db.sql("SELECT pow(-2::DECIMAL, 0.5::DECIMAL)")
    assert raised.value.code == "2201F"
