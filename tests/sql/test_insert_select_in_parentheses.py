"""``INSERT INTO t (SELECT ...)``: the query in parentheses is the rows' source, as in
CockroachDB and PostgreSQL (it was refused as an unsupported source)."""

from __future__ import annotations

from feedkv import DB


def test_a_parenthesized_query_is_the_source(db: DB) -> None:
    db.sql("CREATE TABLE select_t (a INT, b INT)")
    db.sql("INSERT INTO select_t VALUES (1, 2), (3, 4)")
    db.sql("CREATE TABLE insert_t (x INT, y INT)")
    db.sql("INSERT INTO insert_t (SELECT * FROM select_t ORDER BY a DESC LIMIT 1)")
    db.sql("INSERT INTO insert_t (x) (SELECT a FROM select_t WHERE a = 1)")
    assert db.sql("SELECT x, y FROM insert_t ORDER BY x").rows == [(1, None), (3, 4)]
