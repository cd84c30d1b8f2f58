"""Two things SQLAlchemy sends that feedkv refused (0A000): the regular expression
operators ``~``, ``~*``, ``!~``, ``!~*`` (``column.regexp_match(...)``), and
``date_trunc`` with its unit bound as a placeholder (``func.date_trunc('month', c)``)
or of a DATE (a TIMESTAMPTZ), as CockroachDB runs them."""

from __future__ import annotations

import datetime

import psycopg
import pytest
import sqlalchemy as sa


@pytest.fixture
def conn(pg_url: str) -> psycopg.Connection:
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute("CREATE TABLE ev (k INT PRIMARY KEY, name STRING, at TIMESTAMP)")
        connection.execute(
            "INSERT INTO ev VALUES (1, 'Alpha', '2024-05-17 10:11:12'), "
            "(2, 'beta', '2024-05-30 23:00:00'), (3, 'gamma', '2024-06-02 01:00:00'), "
            "(4, NULL, NULL)"
        )
        yield connection


def test_regular_expression_operators(conn: psycopg.Connection) -> None:
    row = conn.execute(
        "SELECT 'abc' ~ 'b.', 'abc' ~* 'B', 'abc' !~ 'x', 'abc' !~* 'A', NULL::STRING ~ 'a'"
    ).fetchone()
    assert row == (True, True, True, False, None)
    matched = conn.execute("SELECT k FROM ev WHERE name ~ %s ORDER BY k", ("^[a-b]",))
    assert matched.fetchall() == [(2,)]
    with pytest.raises(psycopg.errors.InvalidRegularExpression):
        conn.execute("SELECT 'a' ~ '('")
    with pytest.raises(psycopg.errors.UndefinedFunction):
        conn.execute("SELECT 1 ~ 'a'")


def test_date_trunc_takes_its_unit_from_a_placeholder(conn: psycopg.Connection) -> None:
    rows = conn.execute(
        "SELECT date_trunc(%s, at), count(*) FROM ev WHERE at IS NOT NULL GROUP BY 1 ORDER BY 1",
        ("month",),
    ).fetchall()
    assert rows == [(datetime.datetime(2024, 5, 1), 2), (datetime.datetime(2024, 6, 1), 1)]
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        conn.execute("SELECT date_trunc(%s, at) FROM ev", ("fortnight",))


def test_sqlalchemy_sends_both(conn: psycopg.Connection, pg_url: str) -> None:
    engine = sa.create_engine(pg_url.replace("postgresql://", "cockroachdb+psycopg://"))
    try:
        ev = sa.Table("ev", sa.MetaData(), autoload_with=engine)
        with engine.connect() as c:
            names = c.execute(
                sa.select(ev.c.name).where(ev.c.name.regexp_match("^[A-Z]")).order_by(ev.c.k)
            ).scalars()
            assert list(names) == ["Alpha"]
            month = sa.func.date_trunc("month", ev.c.at)
            counted = c.execute(
                sa.select(month, sa.func.count())
                .where(ev.c.at.is_not(None))
                .group_by(month)
                .order_by(month)
            ).all()
            assert counted == [
                (datetime.datetime(2024, 5, 1), 2),
                (datetime.datetime(2024, 6, 1), 1),
            ]
    finally:
        engine.dispose()


def test_date_trunc_of_a_date_is_a_timestamptz(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE days (d DATE PRIMARY KEY)")
    conn.execute("INSERT INTO days VALUES ('2024-05-17'), ('2024-05-30')")
    rows = conn.execute("SELECT DISTINCT date_trunc(%s, d) FROM days", ("month",)).fetchall()
    assert rows == [(datetime.datetime(2024, 5, 1, tzinfo=datetime.UTC),)]
