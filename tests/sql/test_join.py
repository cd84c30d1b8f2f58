"""Joins hash on ON's equalities between the two sides, expressions included
(``a.id = b.id + 1``), and answer as every pair evaluated would: NULL keys match
nothing, INT and DECIMAL keys compare by value, outer joins keep their unpaired rows,
the rest of ON is applied to the matched pairs. The reference is the same ON made
unhashable (``... OR false``), which the join evaluates on every pair."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.testing.call_count import count_calls

SIDES = ["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"]
EQUALITIES = [
    "a.i = b.i + 1",
    "a.d = b.i * 2",
    "a.i + 1 = b.d - 1",
    "-a.i = b.i - 4",
    "b.i + 1 = a.d",
    "a.f = b.i + 1",
    "a.i = b.i + 1 AND a.d < b.d",
    "(a.i - 1) * 2 = b.d AND a.s <> b.s",
]


@pytest.fixture
def mixed(db: DB) -> DB:
    """``f`` with seeded INT, DECIMAL, FLOAT and STRING columns, some NULL."""
    rng = random.Random(46)

    def maybe(value: Any) -> str:
        return "NULL" if rng.random() < 0.15 else str(value)

    db.sql("CREATE TABLE f (id INT PRIMARY KEY, i INT, d DECIMAL, f FLOAT, s STRING)")
    rows = []
    for n in range(60):
        i = rng.randint(-5, 5)
        d = Decimal(rng.randint(-10, 10)) / rng.choice([1, 2])
        f = rng.randint(-5, 5) + rng.choice([0.0, 0.5])
        rows.append(f"({n}, {maybe(i)}, {maybe(d)}, {maybe(f)}, {maybe(repr(rng.choice('xyz')))})")
    db.sql(f"INSERT INTO f VALUES {', '.join(rows)}")
    return db


def _sorted(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=lambda row: [(v is None, str(v)) for v in row])


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("on", EQUALITIES)
def test_a_hash_join_on_expressions_answers_as_every_pair_evaluated(
    mixed: DB, side: str, on: str
) -> None:
    query = f"SELECT a.id, b.id FROM f AS a {side} f AS b ON {on}"
    hashed = mixed.sql(query).rows
    nested = mixed.sql(f"{query} OR false").rows
    assert any(a is not None and b is not None for a, b in hashed)
    assert _sorted(hashed) == _sorted(nested)


def test_explain_shows_a_hash_join_on_an_expression(mixed: DB) -> None:
    query = "SELECT a.id FROM f AS a JOIN f AS b ON a.i = b.i + 1 AND a.d < b.d"
    lines = [line for (line,) in mixed.sql(f"EXPLAIN {query}").rows]
    assert lines[3:6] == ["• hash join", "│ equality: (a.i) = (b.i + 1)", "│ pred: a.d < b.d"]
    nested = [line for (line,) in mixed.sql(f"EXPLAIN {query} OR false").rows]
    assert nested[3] == "• cross join"


def _join_calls(db: DB, rows: int) -> int:
    db.sql("DROP TABLE IF EXISTS g")
    db.sql("CREATE TABLE g (id INT PRIMARY KEY, v INT)")
    db.sql(f"INSERT INTO g SELECT i, i % 7 FROM generate_series(1, {rows}) AS s(i)")
    session = db.session()
    session.execute("SET vectorize = on")
    session.execute("BEGIN")
    result: list[Any] = []
    query = "SELECT count(*) FROM g AS a JOIN g AS b ON a.id = b.id + 1"
    calls = count_calls(lambda: result.append(session.execute(query)))
    session.execute("COMMIT")
    assert result[0].rows == [(rows - 1,)]
    return calls


def test_a_join_on_an_expression_over_twice_the_rows_does_about_twice_the_work(
    db: DB,
) -> None:
    once = _join_calls(db, 400)
    twice = _join_calls(db, 800)
    assert once > 400  # NB: the count saw the statement run
    # NB: a pair-by-pair join makes about four times the calls over twice the rows
    assert twice <= 2.4 * once, (once, twice)


def test_a_key_is_computed_only_where_pairs_are_made(mixed: DB) -> None:
    mixed.sql("CREATE TABLE e (id INT)")
    overflowing = "SELECT a.id FROM f AS a JOIN e ON a.i + 9223372036854775807 = e.id"
    assert mixed.sql(overflowing).rows == mixed.sql(f"{overflowing} OR false").rows == []
    mixed.sql("INSERT INTO e VALUES (1)")
    codes = []
    for query in (overflowing, f"{overflowing} OR false"):
        with pytest.raises(SQLError) as raised:
            mixed.sql(query)
        codes.append(raised.value.code)
    assert codes == ["22003", "22003"]
