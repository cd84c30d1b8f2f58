"""``UPDATE ... SET (a, b) = (SELECT x, y ...)``: each column takes the value of its
place in the subquery's one row, as CockroachDB; no row sets them NULL, two rows are an
error (21000), a width other than the columns' is refused (42601); the subquery may
read the row being updated."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def lots(db: DB) -> DB:
    db.sql("CREATE TABLE lots (k1 INT PRIMARY KEY, k2 INT, k3 INT)")
    db.sql("INSERT INTO lots VALUES (1, 2, 3)")
    db.sql("CREATE TABLE empty (x INT, y INT)")
    return db


def test_the_subquerys_row_is_assigned_in_order(lots: DB) -> None:
    lots.sql("UPDATE lots SET (k3, k2) = (SELECT 666, 777), k1 = (SELECT 2)")
    assert lots.sql("SELECT * FROM lots").rows == [(2, 777, 666)]
    lots.sql("UPDATE lots SET (k3, k2, k1) = (SELECT * FROM lots)")
    assert lots.sql("SELECT * FROM lots").rows == [(666, 777, 2)]


def test_no_row_sets_nulls(lots: DB) -> None:
    lots.sql("UPDATE lots SET (k2, k3) = (SELECT x, y FROM empty)")
    assert lots.sql("SELECT * FROM lots").rows == [(1, None, None)]


def test_the_subquery_reads_the_row_being_updated(lots: DB) -> None:
    lots.sql("INSERT INTO lots VALUES (10, 20, 30)")
    lots.sql("UPDATE lots SET (k2, k3) = (SELECT lots.k3 + 1, lots.k1 * 2)")
    assert lots.sql("SELECT * FROM lots ORDER BY k1").rows == [(1, 4, 2), (10, 31, 20)]


@pytest.mark.parametrize(
    ("statement", "code", "message"),
    [
        (
            "UPDATE lots SET (k2, k3) = (SELECT * FROM lots)",
            "42601",
            "number of columns (2) does not match number of values (3)",
        ),
        (
            "UPDATE lots SET (k2, k3) = (SELECT 1)",
            "42601",
            "number of columns (2) does not match number of values (1)",
        ),
        (
            "UPDATE lots SET (k2, k3) = (SELECT 1, 2 UNION ALL SELECT 3, 4)",
            "21000",
            "more than one row returned by a subquery used as an expression",
        ),
    ],
)
def test_a_subquery_of_the_wrong_shape_is_refused(
    lots: DB, statement: str, code: str, message: str
) -> None:
    with pytest.raises(SQLError) as raised:
        lots.sql(statement)
    assert (raised.value.code, raised.value.message) == (code, message)
    assert lots.sql("SELECT * FROM lots").rows == [(1, 2, 3)]
