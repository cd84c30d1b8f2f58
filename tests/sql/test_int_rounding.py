"""A DECIMAL cast or assigned to an INT rounds half away from zero (CockroachDB's
apd RoundHalfUp, PostgreSQL's numeric to int), a FLOAT half to even (math.RoundToEven):
feedkv rounded a DECIMAL half to even too (2.5::INT was 2, -2.5 stored in an INT -2)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.sql.session import Session


@pytest.fixture
def session(db: DB) -> Session:
    return db.session()


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2.5::INT", 3),
        ("3.5::INT", 4),
        ("(-2.5)::INT", -3),
        ("-0.5::INT", -1),  # -(0.5::INT)
        ("'2.5'::DECIMAL::INT", 3),
        ("2.4::INT", 2),
        ("2.5::FLOAT::INT", 2),
        ("3.5::FLOAT::INT", 4),
        ("(-2.5)::FLOAT::INT", -2),
        ("2.5::FLOAT4::INT", 2),
    ],
)
def test_a_cast_to_int_rounds_as_cockroachdb(session: Session, expression: str, value: int) -> None:
    assert session.execute(f"SELECT {expression}").rows == [(value,)]


def test_a_decimal_stored_in_an_int_column_rounds_half_away_from_zero(session: Session) -> None:
    session.execute("CREATE TABLE t (k INT PRIMARY KEY, i INT, s INT2)")
    session.execute("INSERT INTO t VALUES (1, 2.5, -2.5), (2, -2.5, 0.5), (3, 2.5::FLOAT, 1)")
    session.execute("UPDATE t SET s = 1.5 WHERE k = 3")
    rows = session.execute("SELECT k, i, s FROM t ORDER BY k").rows
    assert rows == [(1, 3, -3), (2, -3, 1), (3, 2, 2)]
