"""DROP COLUMN drops the indexes that hold the column (in their key or STORING), UNIQUE
ones too, and the CHECKs that read it, as CockroachDB documents it (since v20.2; its
logic test regression_33361 drops a UNIQUE column); a UNIQUE index of a table another
table's foreign key references (which it may need) still refuses it (2BP01)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def t(db: DB) -> DB:
    db.sql(
        "CREATE TABLE t (k INT PRIMARY KEY, a INT, b INT, u INT UNIQUE, c INT CHECK (c > 0), "
        "INDEX a_idx (a), INDEX b_idx (b) STORING (a), INDEX kb_idx (k) STORING (b))"
    )
    db.sql("INSERT INTO t VALUES (1, 10, 20, 30, 40), (2, 11, 21, 31, 41)")
    return db


def _indexes(db: DB) -> set[str]:
    return {row[1] for row in db.sql("SHOW INDEXES FROM t").rows}


def test_the_indexes_holding_a_dropped_column_go_with_it(t: DB) -> None:
    t.sql("ALTER TABLE t DROP COLUMN a")
    assert _indexes(t) == {"t_pkey", "t_u_key", "kb_idx"}
    with pytest.raises(SQLError):
        t.sql("SELECT * FROM t@a_idx")
    t.sql("CREATE INDEX a_idx ON t (b)")  # the name is free again, and its entries fresh
    assert t.sql("SELECT k FROM t@a_idx WHERE b = 21").rows == [(2,)]


def test_a_check_reading_a_dropped_column_goes_with_it(t: DB) -> None:
    t.sql("ALTER TABLE t DROP COLUMN c")
    assert "CHECK" not in t.sql("SHOW CREATE TABLE t").rows[0][1]
    t.sql("INSERT INTO t VALUES (3, 1, 2, 3)")
    assert t.sql("SELECT count(*) FROM t").rows == [(3,)]


def test_a_unique_index_on_the_column_goes_with_it(t: DB) -> None:
    t.sql("ALTER TABLE t DROP COLUMN u")
    assert _indexes(t) == {"t_pkey", "a_idx", "b_idx", "kb_idx"}
    assert "u" not in t.sql("SHOW CREATE TABLE t").rows[0][1].split()
    t.sql("INSERT INTO t VALUES (3, 10, 20, 40)")
    assert t.sql("SELECT k FROM t ORDER BY k").rows == [(1,), (2,), (3,)]


def test_a_unique_index_of_a_referenced_table_still_refuses_the_drop(t: DB) -> None:
    t.sql("CREATE TABLE child (k INT PRIMARY KEY, u INT REFERENCES t (u))")
    with pytest.raises(SQLError, match='index "t_u_key" uses it') as raised:
        t.sql("ALTER TABLE t DROP COLUMN u")
    assert raised.value.code == "2BP01"
    assert _indexes(t) == {"t_pkey", "t_u_key", "a_idx", "b_idx", "kb_idx"}
