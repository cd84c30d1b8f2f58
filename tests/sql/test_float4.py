"""FLOAT4 (REAL) as CockroachDB has it: a value cast to FLOAT4 or stored in a FLOAT4
column is rounded to the nearest float32; its text has float32's digits (6 significant
digits plus ``extra_float_digits``, or above 0 the shortest text that reads back as
the float32, as CockroachDB's FLT_DIG rule); arithmetic on it is FLOAT8's; a numeric
constant compared with it is a FLOAT4."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.session import Session


@pytest.fixture
def session(db: DB) -> Session:
    return db.session()


def one(session: Session, query: str) -> object:
    [(value,)] = session.execute(query).rows
    return value


@pytest.mark.parametrize(
    ("expression", "text"),
    [
        ("0.1::FLOAT4", "0.1"),
        ("(1/3)::FLOAT4", "0.333333"),
        ("123456789::REAL", "1.23457e+08"),
        ("'2.5'::FLOAT4", "2.5"),
        ("0.1::FLOAT(24)", "0.1"),
        # FLOAT(25) and above are FLOAT8: 15 significant digits
        ("(1/3)::FLOAT(25)", "0.333333333333333"),
        # arithmetic on a FLOAT4 is FLOAT8's, over the float32's value
        ("0.1::FLOAT4 + 0", "0.100000001490116"),
        ("0.1::FLOAT4::FLOAT8", "0.100000001490116"),
        ("1/3::FLOAT4", "0.333333333333333"),
    ],
)
def test_float4_text_has_float32_digits(session: Session, expression: str, text: str) -> None:
    assert one(session, f"SELECT ({expression})::STRING") == text


def test_extra_float_digits_above_zero_give_the_shortest_float32_text(
    session: Session,
) -> None:
    session.execute("SET extra_float_digits = 3")
    assert one(session, "SELECT 0.1::FLOAT4::STRING") == "0.1"
    assert one(session, "SELECT (1/3)::FLOAT4::STRING") == "0.33333334"
    session.execute("SET extra_float_digits = -3")
    assert one(session, "SELECT (1/3)::FLOAT4::STRING") == "0.333"


def test_a_real_column_holds_the_float32_value(session: Session) -> None:
    session.execute("CREATE TABLE m (k INT PRIMARY KEY, r REAL, d FLOAT8)")
    session.execute("INSERT INTO m VALUES (1, 0.1, 0.1), (2, 1/3, 1/3)")
    rows = session.execute("SELECT k, r::STRING, r::FLOAT8::STRING, r = d FROM m ORDER BY k").rows
    assert rows == [
        (1, "0.1", "0.100000001490116", False),
        (2, "0.333333", "0.333333343267441", False),
    ]
    assert session.execute("SELECT k FROM m WHERE r = 0.1").rows == [(1,)]
    assert session.execute("SELECT k FROM m WHERE 0.1 < r").rows == [(2,)]
    assert session.execute("SELECT k FROM m WHERE r IN (0.1, 0.5)").rows == [(1,)]


def test_a_real_primary_key_is_found_by_its_constant(session: Session) -> None:
    session.execute("CREATE TABLE rk (r REAL PRIMARY KEY, v INT)")
    session.execute("INSERT INTO rk VALUES (0.1, 1), (0.2, 2)")
    assert session.execute("SELECT r::STRING, v FROM rk WHERE r = 0.2").rows == [("0.2", 2)]


def test_the_column_type_reads_float4(session: Session) -> None:
    session.execute("CREATE TABLE ty (k INT PRIMARY KEY, a REAL, b FLOAT4, c FLOAT(10), d FLOAT)")
    [(_name, create)] = session.execute("SHOW CREATE TABLE ty").rows
    assert "a FLOAT4 NULL," in create and "b FLOAT4 NULL," in create
    assert "c FLOAT4 NULL," in create and "d FLOAT8 NULL," in create


def test_a_value_past_float32_range_is_out_of_range(session: Session) -> None:
    with pytest.raises(SQLError) as caught:
        session.execute("SELECT 1e40::FLOAT4")
    assert caught.value.code == "22003"
