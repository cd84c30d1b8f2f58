"""ORDER BY a tuple sorts by its elements in turn, each in the tuple's direction, as
CockroachDB flattens it: ORDER BY (a, b) DESC is ORDER BY a DESC, b DESC. An element
is an expression (a constant sorts nothing), never a column ordinal."""

from __future__ import annotations

import pytest

from feedkv import DB


@pytest.fixture
def abc(db: DB) -> DB:
    db.sql("CREATE TABLE abc (a INT, b INT, c INT, PRIMARY KEY (a, b))")
    db.sql("INSERT INTO abc VALUES (7, 8, 6), (1, 2, 7), (2, 0, NULL), (1, 1, 9)")
    return db


def test_a_tuple_sorts_by_its_elements_in_turn(abc: DB) -> None:
    rows = [(1, 1, 9), (1, 2, 7), (2, 0, None), (7, 8, 6)]
    assert abc.sql("SELECT * FROM abc ORDER BY (a, b, c)").rows == rows
    assert abc.sql("SELECT * FROM abc ORDER BY (a, b) DESC").rows == rows[::-1]
    assert abc.sql("SELECT a FROM abc ORDER BY (c, a) DESC LIMIT 2").rows == [(1,), (1,)]
    assert abc.sql("SELECT c FROM abc ORDER BY (b - a, c)").rows == [(None,), (9,), (6,), (7,)]


def test_a_tuple_element_is_an_expression_not_an_ordinal(abc: DB) -> None:
    # (c, 1): by c alone, NULL first; an ordinal 1 would sort by a
    assert abc.sql("SELECT a, c FROM abc ORDER BY (c, 1)").rows == [
        (2, None),
        (7, 6),
        (1, 7),
        (1, 9),
    ]
