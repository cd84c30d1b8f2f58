"""Integer quotients, remainders, abs, sign and powers as CockroachDB computes them (Go's
``/`` and ``%``, math.Trunc, math.Mod, apd's Pow), where Python's operators differ:
``-7 % 3`` is -1 (the remainder takes the dividend's sign; Python's floor gives 2),
``div(-7, 2)`` is -3 (truncated, not floored), ``abs`` of the smallest INT8 is an
error, ``sign`` and ``^`` of INTs are INTs."""

from __future__ import annotations

import decimal

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.session import Session


@pytest.fixture
def session(db: DB) -> Session:
    return db.session()


def one(session: Session, expression: str) -> object:
    [(value,)] = session.execute(f"SELECT {expression}").rows
    return value


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("-7 % 3", -1),
        ("7 % -3", 1),
        ("-7 % -3", -1),
        ("7 % 3", 1),
        ("mod(-7, 3)", -1),
        ("-7.5 % 2", decimal.Decimal("-1.5")),
        ("-7.5::FLOAT % 2", -1.5),
        ("7.5::FLOAT % -2", 1.5),
        ("div(-7, 2)", -3),
        ("div(7, -2)", -3),
        ("div(7, 2)", 3),
        ("div(-7.5, 2)", decimal.Decimal(-3)),
        ("sign(-3)", -1),
        ("sign(0)", 0),
        ("sign(-2.5::FLOAT)", -1.0),
        ("2 ^ 3", 8),
        ("pow(2, 10)", 1024),
        ("(-1) ^ -3", -1),
        ("(-2) ^ 63", -(2**63)),
        ("2::FLOAT ^ 0.5", 2**0.5),
    ],
)
def test_arithmetic_as_cockroachdb(session: Session, expression: str, value: object) -> None:
    found = one(session, expression)
    assert found == value
    assert type(found) is type(value)


def test_the_smallest_int8_negated_is_out_of_range(session: Session) -> None:
    session.execute("CREATE TABLE m (k INT PRIMARY KEY)")
    session.execute("INSERT INTO m VALUES (-9223372036854775808)")
    with pytest.raises(SQLError) as caught:
        session.execute("SELECT -k FROM m")
    assert caught.value.code == "22003"
    assert one(session, "-9223372036854775808") == -(2**63)


def test_a_remainder_of_a_column_keeps_the_dividends_sign(session: Session) -> None:
    session.execute("CREATE TABLE t (k INT PRIMARY KEY)")
    session.execute("INSERT INTO t VALUES (-5), (-4), (4), (5)")
    rows = session.execute("SELECT k, k % 2, k % 2 = 1 FROM t ORDER BY k").rows
    assert rows == [(-5, -1, False), (-4, 0, False), (4, 0, False), (5, 1, True)]


@pytest.mark.parametrize(
    ("expression", "code"),
    [
        ("abs(-9223372036854775807 - 1)", "22003"),
        ("-(-9223372036854775807 - 1)", "22003"),
        ("4 ^ -1", "22003"),  # 0.25 is no INT
        ("2 ^ 63", "22003"),
        ("0 ^ -1", "2201F"),
        ("5 % 0", "22012"),
        ("5::FLOAT % 0", "22012"),
        ("div(5, 0)", "22012"),
    ],
)
def test_what_has_no_int8_or_no_value_is_an_error(
    session: Session, expression: str, code: str
) -> None:
    with pytest.raises(SQLError) as caught:
        one(session, expression)
    assert caught.value.code == code
