"""Edges of SELECT where CockroachDB refuses rather than answers: ``*`` with no FROM
clause (42602, no row of zero columns) and a LIMIT or OFFSET past the int64 range
(22003, not "no limit")."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.mark.parametrize("query", ["SELECT *", "SELECT 1, *", "SELECT * FROM (SELECT *)"])
def test_a_star_needs_a_from_clause(db: DB, query: str) -> None:
    with pytest.raises(SQLError, match='cannot use "\\*" without a FROM clause') as raised:
        db.sql(query)
    assert raised.value.code == "42602"


@pytest.mark.parametrize("clause", ["LIMIT", "OFFSET"])
def test_a_count_past_int64_is_out_of_range(db: DB, clause: str) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    db.sql("INSERT INTO t VALUES (1)")
    with pytest.raises(SQLError, match="out of int64 range") as raised:
        db.sql(f"SELECT * FROM t {clause} 9223372036854775808")
    assert raised.value.code == "22003"
    assert db.sql("SELECT * FROM t LIMIT 9223372036854775807").rows == [(1,)]
