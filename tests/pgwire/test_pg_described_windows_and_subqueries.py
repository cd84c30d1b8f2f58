"""What Parse/Describe tells of a query with placeholders (SQLAlchemy sends every
query so, through psycopg): a window function's column has its type (INT8 for
row_number, as CockroachDB's; feedkv said text, so drivers gave '2'), and a
correlated subquery with a placeholder is described over the outer row's columns
(feedkv failed it with 42P01, "missing FROM-clause entry")."""

from __future__ import annotations

import decimal

import psycopg
import pytest
import sqlalchemy as sa
from psycopg.postgres import types as pg_types


@pytest.fixture
def conn(pg_url: str) -> psycopg.Connection:
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute("CREATE TABLE a (id INT PRIMARY KEY, name STRING)")
        connection.execute("CREATE TABLE p (id INT PRIMARY KEY, a_id INT, price DECIMAL(8,2))")
        connection.execute("INSERT INTO a VALUES (1, 'ann'), (2, 'bob')")
        connection.execute("INSERT INTO p VALUES (1, 1, 5), (2, 1, 15), (3, 2, 1)")
        yield connection


@pytest.mark.parametrize("binary", [False, True])
def test_window_functions_are_described_with_their_types(
    conn: psycopg.Connection, binary: bool
) -> None:
    cur = conn.cursor(binary=binary)
    cur.execute(
        "SELECT id, row_number() OVER w, rank() OVER w, percent_rank() OVER w, "
        "lag(price) OVER w, count(*) OVER w, sum(price) OVER w FROM p "
        "WHERE id > %s WINDOW w AS (PARTITION BY a_id ORDER BY price) ORDER BY id",
        (0,),
    )
    names = [pg_types.get(d.type_code).name for d in cur.description]
    assert names == ["int8", "int8", "int8", "float8", "numeric", "int8", "numeric"]
    assert cur.fetchall() == [
        (1, 1, 1, 0.0, None, 1, decimal.Decimal("5.00")),
        (2, 2, 2, 1.0, decimal.Decimal("5.00"), 2, decimal.Decimal("20.00")),
        (3, 1, 1, 0.0, None, 1, decimal.Decimal("1.00")),
    ]


def test_a_correlated_subquery_takes_a_placeholder(conn: psycopg.Connection) -> None:
    rows = conn.execute(
        "SELECT a.name FROM a WHERE EXISTS "
        "(SELECT 1 FROM p WHERE p.a_id = a.id AND p.price > %s) ORDER BY a.name",
        (decimal.Decimal("10"),),
    ).fetchall()
    assert rows == [("ann",)]
    counted = conn.execute(
        "SELECT a.name, (SELECT count(*) FROM p WHERE p.a_id = a.id AND p.price < %s) "
        "FROM a ORDER BY a.name",
        (100,),
    ).fetchall()
    assert counted == [("ann", 2), ("bob", 1)]


def test_sqlalchemy_any_and_row_number(conn: psycopg.Connection, pg_url: str) -> None:
    engine = sa.create_engine(pg_url.replace("postgresql://", "cockroachdb+psycopg://"))
    try:
        metadata = sa.MetaData()
        a = sa.Table("a", metadata, autoload_with=engine)
        p = sa.Table("p", metadata, autoload_with=engine)
        with engine.connect() as c:
            names = c.execute(
                sa.select(a.c.name).where(
                    sa.exists().where(p.c.a_id == a.c.id).where(p.c.price > 10)
                )
            ).scalars()
            assert list(names) == ["ann"]
            ranked = c.execute(
                sa.select(p.c.id, sa.func.row_number().over(order_by=p.c.price.desc()))
                .order_by(p.c.id)
                .limit(2)
            ).all()
            assert ranked == [(1, 2), (2, 1)]
    finally:
        engine.dispose()
