"""A FLOAT's text as CockroachDB writes it (a cast to STRING, a concatenation, the
wire's text format): ``15 + extra_float_digits`` significant digits as Go's ``%g``, so
``0.1 + 0.2`` is ``0.3`` by default (extra_float_digits 0, CockroachDB's SET docs), and
the shortest exact text once extra_float_digits is 1 or more."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.sql.types import float_text

VALUES = "(0.0), (123.4567890123456789), (12345678901234567890000), (0.0001234567890123456789)"


@pytest.mark.parametrize(
    ("digits", "expected"),
    [
        (0, ["0", "123.456789012346", "1.23456789012346e+22", "0.000123456789012346"]),
        (3, ["0", "123.45678901234568", "1.2345678901234568e+22", "0.00012345678901234567"]),
        (-8, ["0", "123.4568", "1.234568e+22", "0.0001234568"]),
        (-15, ["0", "1e+02", "1e+22", "0.0001"]),
    ],
)
def test_a_cast_to_string_follows_extra_float_digits(
    db: DB, digits: int, expected: list[str]
) -> None:
    session = db.session()
    session.execute("CREATE TABLE vals (k INT PRIMARY KEY, f FLOAT)")
    session.execute(
        "INSERT INTO vals VALUES (1, 0.0), (2, 123.4567890123456789), "
        "(3, 12345678901234567890000), (4, 0.0001234567890123456789)"
    )
    session.execute(f"SET extra_float_digits = {digits}")
    rows = session.execute("SELECT f::STRING, 'f=' || f FROM vals ORDER BY k").rows
    assert [text for text, _ in rows] == expected
    assert [joined for _, joined in rows] == ["f=" + text for text in expected]


def test_the_default_shows_fifteen_significant_digits(db: DB) -> None:
    [row] = db.sql(
        "SELECT (0.1::FLOAT + 0.2::FLOAT)::STRING, 100::FLOAT::STRING, 1e15::FLOAT::STRING, "
        "1e6::FLOAT::STRING, (-0.0)::FLOAT::STRING"
    ).rows
    assert row == ("0.3", "100", "1e+15", "1000000", "0")


def test_float_text_rounds_half_to_even_like_go() -> None:
    assert float_text(2.5, -14) == "2"
    assert float_text(3.5, -14) == "4"
    assert float_text(-0.0) == "-0"
    assert float_text(float("nan")) == "NaN"
    assert float_text(float("-inf"), 3) == "-Infinity"
