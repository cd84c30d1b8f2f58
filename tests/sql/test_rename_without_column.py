"""``ALTER TABLE t RENAME b TO d`` renames column ``b`` (the COLUMN keyword is optional
in CockroachDB, as in PostgreSQL); only ``RENAME TO name`` renames the table."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


def test_rename_without_column_renames_the_column(db: DB) -> None:
    db.sql("CREATE TABLE t (a INT PRIMARY KEY, b INT)")
    db.sql("INSERT INTO t VALUES (1, 2)")
    db.sql("ALTER TABLE t RENAME b TO d")
    assert db.sql("SELECT d FROM t").rows == [(2,)]
    with pytest.raises(SQLError) as raised:
        db.sql("SELECT * FROM d")
    assert raised.value.code == "42P01"


def test_rename_to_still_renames_the_table(db: DB) -> None:
    db.sql("CREATE TABLE t (a INT PRIMARY KEY)")
    db.sql("ALTER TABLE t RENAME TO u")
    assert db.sql("SELECT count(*) FROM u").rows == [(0,)]


def test_renaming_a_missing_column_is_an_error(db: DB) -> None:
    db.sql("CREATE TABLE t (a INT PRIMARY KEY)")
    with pytest.raises(SQLError) as raised:
        db.sql("ALTER TABLE t RENAME nosuch TO y")
    assert raised.value.code == "42703"
