"""A numeric constant beside a FLOAT is a FLOAT, as CockroachDB types a constant from
the other side of its operator: a FLOAT column holding 0.1 has ``f = 0.1`` (the
constant was kept as the DECIMAL 0.1, which no float equals), and ``f + 0.2`` is FLOAT
arithmetic. A DECIMAL compared with a FLOAT sees the float as the decimal of its
shortest text, as CockroachDB's DDecimal.Compare does (apd's SetFloat64)."""

from __future__ import annotations

import decimal

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.session import Session


@pytest.fixture
def session(db: DB) -> Session:
    s = db.session()
    s.execute("CREATE TABLE t (k INT PRIMARY KEY, f FLOAT, d DECIMAL)")
    s.execute("INSERT INTO t VALUES (1, 0.1, 0.1), (2, 0.30000000000000004, 0.3)")
    return s


@pytest.mark.parametrize(
    ("condition", "keys"),
    [
        ("f = 0.1", [1]),
        ("0.1 = f", [1]),
        ("f <> 0.1", [2]),
        ("f <= 0.1", [1]),
        ("f > 0.1", [2]),
        ("f = 0.3", []),  # 0.1 + 0.2 is not the float nearest 0.3
        ("f IN (0.1, 0.3)", [1]),
        ("f BETWEEN 0.1 AND 0.2", [1]),
        ("f = 1e-1", [1]),
        ("d = f", [1]),
        ("f = d", [1]),
        ("d < f", [2]),
    ],
)
def test_a_constant_compared_with_a_float_is_a_float(
    session: Session, condition: str, keys: list[int]
) -> None:
    rows = session.execute(f"SELECT k FROM t WHERE {condition} ORDER BY k").rows
    assert [k for (k,) in rows] == keys


def test_a_float_primary_key_is_found_by_a_decimal_constant(session: Session) -> None:
    session.execute("CREATE TABLE p (f FLOAT PRIMARY KEY, v STRING)")
    session.execute("INSERT INTO p VALUES (0.1, 'a'), (0.2, 'b')")
    assert session.execute("SELECT v FROM p WHERE f = 0.1").rows == [("a",)]
    assert session.execute("SELECT v FROM p WHERE f >= 0.2").rows == [("b",)]


def test_casts_on_both_sides_compare_as_floats(session: Session) -> None:
    rows = session.execute(
        "SELECT 0.1 = 0.1::FLOAT, 0.1::FLOAT = 0.1, 0.1::DECIMAL = 0.1::FLOAT, 0.1 < 0.1::FLOAT"
    ).rows
    assert rows == [(True, True, True, False)]


def test_arithmetic_of_a_float_and_a_constant_is_float_arithmetic(session: Session) -> None:
    rows = session.execute("SELECT k, f + 0.2, f * 1.5, 1 - f FROM t ORDER BY k").rows
    assert rows[0] == (1, 0.1 + 0.2, 0.1 * 1.5, 1 - 0.1)
    assert all(isinstance(v, float) for v in rows[0][1:])
    # 0.1 + 0.2 in floats is not 0.3 (in DECIMAL it was)
    assert session.execute("SELECT f + 0.2 = 0.3 FROM t WHERE k = 1").rows == [(False,)]


def test_in_constants_beside_a_float_expression_are_floats(session: Session) -> None:
    rows = session.execute(
        "SELECT f * 1 IN (0.1), f + 0 NOT IN (0.1, 0.2), 0.1::FLOAT IN (0.1) FROM t WHERE k = 1"
    ).rows
    assert rows == [(True, False, True)]


def test_arithmetic_of_a_decimal_and_a_float_is_refused_as_cockroachdb(
    session: Session,
) -> None:
    """CockroachDB has no DECIMAL-with-FLOAT arithmetic (42883); feedkv computed a
    DECIMAL, which neither it nor PostgreSQL (a FLOAT) gives. A cast picks one."""
    for expression in ("d + f", "f * d", "(k / 2) + f"):
        with pytest.raises(SQLError) as caught:
            session.execute(f"SELECT {expression} FROM t WHERE k = 1")
        assert caught.value.code == "42883"
    rows = session.execute("SELECT d::FLOAT + f, d + f::DECIMAL FROM t WHERE k = 1").rows
    assert rows == [(0.1 + 0.1, decimal.Decimal("0.2"))]


def test_a_placeholder_beside_a_float_is_a_float(session: Session) -> None:
    [(value,)] = session.execute("SELECT f + $1 FROM t WHERE k = 1", decimal.Decimal("0.2")).rows
    assert value == 0.1 + 0.2
