"""GROUP BY takes a position in the select list or an expression: a constant that is
no integer (a string, a fraction, a boolean) is refused with 42601, as CockroachDB
does, rather than grouping every row into one."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.mark.parametrize(("clause", "shown"), [("'a'", "'a'"), ("1.5", "1.5"), ("true", "true")])
def test_a_non_integer_constant_is_refused(db: DB, clause: str, shown: str) -> None:
    db.sql("CREATE TABLE kv (k INT PRIMARY KEY, v INT)")
    with pytest.raises(SQLError, match=f"non-integer constant in GROUP BY: {shown}") as raised:
        db.sql(f"SELECT count(*) FROM kv GROUP BY {clause}")
    assert raised.value.code == "42601"


def test_a_position_still_names_a_select_item(db: DB) -> None:
    db.sql("CREATE TABLE kv (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO kv VALUES (1, 2), (3, 2)")
    assert db.sql("SELECT v, count(*) FROM kv GROUP BY 1").rows == [(2, 2)]
    with pytest.raises(SQLError) as raised:
        db.sql("SELECT v, count(*) FROM kv GROUP BY 3")
    assert raised.value.code == "42P10"


def test_parentheses_around_an_entry_change_nothing(db: DB) -> None:
    db.sql("CREATE TABLE t (x JSONB, y INT)")
    db.sql("""INSERT INTO t VALUES ('{"a": 1}', 5), ('{"a": 1}', 10), ('[1, 2]', 5)""")
    rows = db.sql("SELECT x, sum(y) FROM t GROUP BY (x) ORDER BY sum(y)").rows
    assert rows == [([1, 2], 5), ({"a": 1}, 15)]
    assert db.sql("SELECT y, count(*) FROM t GROUP BY ((1)) ORDER BY 1").rows == [(5, 2), (10, 1)]
