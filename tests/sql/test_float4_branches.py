"""A numeric constant among FLOAT4 expressions is a FLOAT4, as CockroachDB types a
constant from the expressions beside it: the bounds of ``r BETWEEN a AND b``, a CASE's
constant results beside FLOAT4 ones, COALESCE's, GREATEST's and LEAST's constant
arguments (0.7 rounds to 0.699999988 as a FLOAT4 and stays 0.7 as a DECIMAL). Also
``BETWEEN SYMMETRIC``, whose bounds may come in either order (it was read as plain
BETWEEN)."""

from __future__ import annotations

import struct

import pytest

from feedkv import DB
from feedkv.sql.session import Session


def float4(value: float) -> float:
    """``value`` rounded to the nearest float32 (0.7::FLOAT4::FLOAT8)."""
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


FLOAT4_07 = float4(0.7)


@pytest.fixture
def session(db: DB) -> Session:
    s = db.session()
    s.execute("CREATE TABLE t (k INT PRIMARY KEY, r REAL, g FLOAT, INDEX (r))")
    s.execute("INSERT INTO t VALUES (1, 0.7, 0.7), (2, 0.3, 0.3), (3, NULL, NULL)")
    s.execute("CREATE TABLE p (r REAL PRIMARY KEY, k INT)")
    s.execute("INSERT INTO p VALUES (0.7, 1), (0.3, 2)")
    return s


def keys(session: Session, query: str) -> list[int]:
    return [k for (k,) in session.execute(query).rows]


@pytest.mark.parametrize("table", ["t", "t@t_r_idx", "p"])
def test_between_bounds_beside_a_real_are_float4(session: Session, table: str) -> None:
    # as a FLOAT8 0.7 is above the REAL 0.7 (0.699999988), which BETWEEN 0.7 AND 1 missed
    assert keys(session, f"SELECT k FROM {table} WHERE r BETWEEN 0.7 AND 1 ORDER BY k") == [1]
    assert keys(session, f"SELECT k FROM {table} WHERE r NOT BETWEEN 0.7 AND 1 ORDER BY k") == [2]
    symmetric = f"SELECT k FROM {table} WHERE r BETWEEN SYMMETRIC 1 AND 0.7 ORDER BY k"
    assert keys(session, symmetric) == [1]


def test_between_symmetric_takes_its_bounds_in_either_order(session: Session) -> None:
    rows = session.execute(
        "SELECT 2 BETWEEN SYMMETRIC 3 AND 1, 2 BETWEEN 3 AND 1, 2 NOT BETWEEN SYMMETRIC 3 AND 1, "
        "4 BETWEEN SYMMETRIC 3 AND 1, NULL BETWEEN SYMMETRIC 1 AND 3"
    ).rows
    assert rows == [(True, False, False, False, None)]
    assert keys(session, "SELECT k FROM t WHERE k BETWEEN SYMMETRIC 3 AND 2 ORDER BY k") == [2, 3]


def test_case_constants_beside_a_real_are_float4(session: Session) -> None:
    rows = session.execute(
        "SELECT k, (CASE WHEN k > 5 THEN r ELSE 0.7 END)::FLOAT8, "
        "CASE WHEN k > 0 THEN 0.7 ELSE r END = 0.7::FLOAT4, "
        "(CASE k WHEN 1 THEN r ELSE 0.7 END)::FLOAT8 FROM t ORDER BY k"
    ).rows
    assert rows == [(1, FLOAT4_07, True, FLOAT4_07), (2, FLOAT4_07, True, FLOAT4_07),
                    (3, FLOAT4_07, True, FLOAT4_07)]  # fmt: skip
    # beside a FLOAT8 the constant is a FLOAT8
    [(value,)] = session.execute("SELECT (CASE WHEN true THEN 0.7 ELSE g END)::FLOAT8 FROM t "
                                 "WHERE k = 1").rows  # fmt: skip
    assert value == 0.7


def test_coalesce_greatest_and_least_constants_beside_a_real_are_float4(
    session: Session,
) -> None:
    rows = session.execute(
        "SELECT k, COALESCE(r, 0.7)::FLOAT8, greatest(r, 0.7)::FLOAT8, least(r, 0.7)::FLOAT8, "
        "COALESCE(g, 0.7) FROM t ORDER BY k"
    ).rows
    assert rows == [
        (1, FLOAT4_07, FLOAT4_07, FLOAT4_07, 0.7),
        (2, float4(0.3), FLOAT4_07, float4(0.3), 0.3),
        (3, FLOAT4_07, FLOAT4_07, FLOAT4_07, 0.7),
    ]
    assert all(isinstance(row[4], float) for row in rows)


def test_in_constants_beside_a_float4_expression_are_float4(session: Session) -> None:
    rows = session.execute(
        "SELECT r::FLOAT4 IN (0.7), (r + 0)::FLOAT4 IN (0.7, 1), r IN (0.7), "
        "(r * 1)::FLOAT4 NOT IN (0.7) FROM t WHERE k = 1"
    ).rows
    assert rows == [(True, True, True, False)]


def test_the_sum_of_reals_is_a_float8_even_of_one_row(session: Session) -> None:
    # NB: a sum over one row kept the FLOAT4 and printed its float32 digits (0.7)
    rows = session.execute("SELECT sum(r)::STRING, max(r)::STRING FROM t WHERE k = 1").rows
    assert rows == [("0.699999988079071", "0.7")]
    rows = session.execute("SELECT (sum(r) OVER ())::STRING FROM t WHERE k = 1").rows
    assert rows == [("0.699999988079071",)]


def test_an_array_of_constants_beside_a_real_holds_float4s(session: Session) -> None:
    rows = session.execute(
        "SELECT r = ANY (ARRAY[0.7]), r = ANY (ARRAY[0.1, 0.7]), r <> ALL (ARRAY[0.7]), "
        "g = ANY (ARRAY[0.7]) FROM t WHERE k = 1"
    ).rows
    assert rows == [(True, True, False, True)]
