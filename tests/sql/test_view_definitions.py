"""What CockroachDB refuses in a view's definition, refused likewise: a write read as a
table (its query would write on every read), and CREATE OR REPLACE VIEW giving a column
another type."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def t(db: DB) -> DB:
    db.sql("CREATE TABLE t (a INT PRIMARY KEY, b INT)")
    db.sql("INSERT INTO t VALUES (1, 10), (2, 20)")
    return db


@pytest.mark.parametrize(
    ("source", "verb"),
    [
        ("[INSERT INTO t VALUES (3, 30) RETURNING a, b]", "INSERT"),
        ("[UPDATE t SET b = 0 RETURNING a, b]", "UPDATE"),
        ("(SELECT * FROM [DELETE FROM t RETURNING a, b])", "DELETE"),
    ],
)
def test_a_view_cannot_read_a_write(t: DB, source: str, verb: str) -> None:
    with pytest.raises(SQLError) as caught:
        t.sql(f"CREATE VIEW w AS SELECT a, b FROM {source}")
    assert caught.value.code == "0A000"
    assert caught.value.message == f"{verb} cannot be used inside a view definition"
    assert t.sql("SELECT a, b FROM t ORDER BY a").rows == [(1, 10), (2, 20)]


@pytest.mark.parametrize(
    ("replacement", "change"),
    [
        ("SELECT a AS x, (a + 1)::STRING AS x1 FROM t", "from int to string"),
        ("SELECT a AS x, 1.5 AS x1 FROM t", "from int to decimal"),
    ],
)
def test_or_replace_cannot_change_a_columns_type(t: DB, replacement: str, change: str) -> None:
    t.sql("CREATE VIEW v AS SELECT a AS x, a + 1 AS x1 FROM t")
    with pytest.raises(SQLError) as caught:
        t.sql(f"CREATE OR REPLACE VIEW v AS {replacement}")
    assert caught.value.code == "42P16"
    assert caught.value.message == f'cannot change type of view column "x1" {change}'
    t.sql("CREATE OR REPLACE VIEW v AS SELECT a AS x, a + 2 AS x1, b AS x2 FROM t")
    assert t.sql("SELECT * FROM v ORDER BY x").rows == [(1, 3, 10), (2, 4, 20)]


def test_a_view_over_a_view_keeps_its_types_too(t: DB) -> None:
    t.sql("CREATE VIEW v AS SELECT a, b FROM t")
    t.sql("CREATE VIEW w AS SELECT a, b FROM v")
    with pytest.raises(SQLError) as caught:
        t.sql("CREATE OR REPLACE VIEW w AS SELECT a, b::STRING AS b FROM v")
    assert caught.value.code == "42P16"


def test_a_column_count_mismatch_says_so_as_cockroachdb_does(t: DB) -> None:
    with pytest.raises(SQLError) as caught:
        t.sql("CREATE VIEW v (x) AS SELECT a, b FROM t")
    assert caught.value.message == (
        "CREATE VIEW specifies 1 column name, but data source has 2 columns"
    )
