"""An INSERT or UPSERT whose values and target columns differ in number, and VALUES rows
of different lengths, are refused (42601) with CockroachDB's words, counting both
sides."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        (
            "INSERT INTO kv VALUES ('a', 'b', 'c')",
            "INSERT has more expressions than target columns, 3 expressions for 2 targets",
        ),
        (
            "INSERT INTO kv (k) VALUES ('a', 'b')",
            "INSERT has more expressions than target columns, 2 expressions for 1 targets",
        ),
        (
            "INSERT INTO kv (k, v) VALUES ('a')",
            "INSERT has more target columns than expressions, 1 expressions for 2 targets",
        ),
        (
            "INSERT INTO kv (k) SELECT 'a', 'b'",
            "INSERT has more expressions than target columns, 2 expressions for 1 targets",
        ),
        (
            "UPSERT INTO kv VALUES ('a', 'b', 'c')",
            "UPSERT has more expressions than target columns, 3 expressions for 2 targets",
        ),
        (
            "INSERT INTO kv VALUES ('b'), ('c', DEFAULT)",
            "VALUES lists must all be the same length, expected 1 columns, found 2",
        ),
        (
            "SELECT * FROM (VALUES (1, 2), (3)) AS v",
            "VALUES lists must all be the same length, expected 2 columns, found 1",
        ),
    ],
)
def test_the_refusal_counts_both_sides(db: DB, statement: str, message: str) -> None:
    db.sql("CREATE TABLE kv (k STRING PRIMARY KEY, v STRING)")
    with pytest.raises(SQLError) as raised:
        db.sql(statement)
    assert (raised.value.code, str(raised.value)) == ("42601", message)
