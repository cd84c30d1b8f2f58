"""The keyword DEFAULT in an INSERT's VALUES stands for the column's default (NULL when
it has none), per row, as in CockroachDB and PostgreSQL; feedkv refused it (0A000)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def r(db: DB) -> DB:
    db.sql("CREATE TABLE r (k INT PRIMARY KEY, a INT DEFAULT 5, b STRING, c INT NOT NULL)")
    return db


def test_default_in_values_takes_the_columns_default_or_null(r: DB) -> None:
    rows = r.sql(
        "INSERT INTO r VALUES (1, DEFAULT, DEFAULT, 0), (2, 7, 'x', 0) RETURNING k, a, b"
    ).rows
    assert rows == [(1, 5, None), (2, 7, "x")]
    rows = r.sql("INSERT INTO r (c, k, a) VALUES (1, 3, default) RETURNING k, a, b").rows
    assert rows == [(3, 5, None)]


def test_default_of_a_not_null_column_without_one_is_refused(r: DB) -> None:
    with pytest.raises(SQLError) as caught:
        r.sql("INSERT INTO r VALUES (4, 1, 'y', DEFAULT)")
    assert caught.value.code == "23502"
    assert r.sql("SELECT count(*) FROM r").rows == [(0,)]


def test_upsert_takes_default_too(r: DB) -> None:
    r.sql("INSERT INTO r VALUES (1, 9, 'x', 0)")
    assert r.sql("UPSERT INTO r VALUES (1, DEFAULT, DEFAULT, 1) RETURNING a, b, c").rows == [
        (5, None, 1)
    ]
