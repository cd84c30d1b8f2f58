"""LIMIT and OFFSET arguments typed as CockroachDB types them: an INT, a numeric constant
without a fraction (``1 + 0.0``) or a string that reads as one; NULL limits nothing; a
negative count is ``negative value for LIMIT`` (2201W), a DECIMAL ``argument of LIMIT
must be type int, not type decimal`` (42804)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def x(db: DB) -> DB:
    db.sql("CREATE TABLE x (k INT PRIMARY KEY)")
    db.sql("INSERT INTO x VALUES (1), (2), (3)")
    return db


@pytest.mark.parametrize(
    ("clause", "keys"),
    [
        ("LIMIT '1'", [1]),
        ("OFFSET 1 + 0.0", [2, 3]),
        ("LIMIT 2.0", [1, 2]),
        ("OFFSET NULL", [1, 2, 3]),
        ("LIMIT NULL OFFSET 2", [3]),
    ],
)
def test_counts_that_read_as_integers(x: DB, clause: str, keys: list[int]) -> None:
    assert [k for (k,) in x.sql(f"SELECT k FROM x ORDER BY k {clause}").rows] == keys


@pytest.mark.parametrize(
    ("clause", "code", "message"),
    [
        ("LIMIT 3.3", "42804", "argument of LIMIT must be type int, not type decimal"),
        ("OFFSET 1.5", "42804", "argument of OFFSET must be type int, not type decimal"),
        ("LIMIT 1.0::DECIMAL", "42804", "argument of LIMIT must be type int, not type decimal"),
        ("LIMIT -100", "2201W", "negative value for LIMIT"),
        ("OFFSET -1", "2201W", "negative value for OFFSET"),
        ("LIMIT 'a'", "22P02", "could not parse 'a' as type int"),
    ],
)
def test_counts_that_do_not(x: DB, clause: str, code: str, message: str) -> None:
    with pytest.raises(SQLError) as caught:
        x.sql(f"SELECT k FROM x {clause}")
    assert (caught.value.code, caught.value.message) == (code, message)
