"""generate_series(start, stop [, step]) over INTs, as CockroachDB's: read as a table
(``FROM generate_series(1, 3) AS i(i)``, its column named for the alias, else
``generate_series``), or as the only item of a SELECT without FROM (``INSERT INTO t
SELECT generate_series(1, 5)``); ``stop`` included, a negative step counts down, a
whole DECIMAL constant (``2e4``) is an INT."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.mark.parametrize(
    ("query", "columns", "rows"),
    [
        ("SELECT generate_series(1, 3)", ("generate_series",), [(1,), (2,), (3,)]),
        ("SELECT * FROM generate_series(1, 3)", ("generate_series",), [(1,), (2,), (3,)]),
        ("SELECT * FROM generate_series(1, 3) AS x", ("x",), [(1,), (2,), (3,)]),
        ("SELECT generate_series(5, 1, -2) AS g", ("g",), [(5,), (3,), (1,)]),
        ("SELECT * FROM generate_series(3, 1)", ("generate_series",), []),
        ("SELECT i * 2 FROM generate_series(1, 2) AS s(i)", ("?column?",), [(2,), (4,)]),
        (
            "SELECT * FROM generate_series(5, 1, -2) WITH ORDINALITY",
            ("generate_series", "ordinality"),
            [(5, 1), (3, 2), (1, 3)],
        ),
        ("SELECT n FROM generate_series(7, 8) WITH ORDINALITY AS g(v, n)", ("n",), [(1,), (2,)]),
    ],
)
def test_the_series(db: DB, query: str, columns: tuple[str, ...], rows: list[tuple[int]]) -> None:
    result = db.sql(query)
    assert (result.columns, result.rows) == (columns, rows)


def test_rows_for_an_insert_and_an_aggregate(db: DB) -> None:
    db.sql("CREATE TABLE a (a INT PRIMARY KEY, f FLOAT)")
    db.sql("INSERT INTO a SELECT generate_series(1, 5)")
    db.sql("UPSERT INTO a SELECT i, (1e9 + i / 2e4)::FLOAT FROM generate_series(1, 2e4) AS i(i)")
    assert db.sql("SELECT count(*), min(a), max(a) FROM a").rows == [(20000, 1, 20000)]
    assert db.sql("SELECT t.k, g FROM (VALUES (7)) AS t(k), generate_series(1, 2) AS g").rows == [
        (7, 1),
        (7, 2),
    ]


def test_a_zero_step_is_an_error(db: DB) -> None:
    with pytest.raises(SQLError, match="step cannot be 0") as raised:
        db.sql("SELECT generate_series(1, 3, 0)")
    assert raised.value.code == "22023"
