"""INSERT ... ON CONFLICT (unique column) DO UPDATE where the conflicting row is the
one holding the proposed row's own primary key: that is the row's first update (as in
CockroachDB), not "a row affected a second time"; two proposed rows that hit one
existing row still are."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def fam(db: DB) -> DB:
    db.sql("CREATE TABLE fam (x INT PRIMARY KEY, y INT, y2 INT, y3 INT)")
    db.sql("CREATE UNIQUE INDEX secondary ON fam (y) STORING (y2)")
    db.sql("UPSERT INTO fam (x, y) VALUES (4, 4), (5, 5)")
    return db


def test_the_conflict_on_the_rows_own_key_updates_it(fam: DB) -> None:
    fam.sql(
        "INSERT INTO fam (x, y) VALUES (4, 4), (5, 5) "
        "ON CONFLICT (y) DO UPDATE SET y = NULL, y2 = excluded.y, y3 = excluded.y"
    )
    assert fam.sql("SELECT * FROM fam ORDER BY x").rows == [(4, None, 4, 4), (5, None, 5, 5)]


def test_two_proposed_rows_on_one_existing_row_are_refused(fam: DB) -> None:
    with pytest.raises(SQLError, match="cannot affect row a second time") as raised:
        fam.sql("INSERT INTO fam (x, y) VALUES (8, 4), (9, 4) ON CONFLICT (y) DO UPDATE SET y2 = 1")
    assert raised.value.code == "21000"
    assert fam.sql("SELECT x, y2 FROM fam ORDER BY x").rows == [(4, None), (5, None)]


def test_upsert_lets_a_later_row_with_the_same_key_overwrite_an_earlier_one(db: DB) -> None:
    # CockroachDB's logic test upsert: without secondary indexes UPSERT INTO kv VALUES
    # (10, 11), (10, 12) counts 2; with a UNIQUE one (regression #44466) it is refused
    db.sql("CREATE TABLE kv (k INT PRIMARY KEY, v INT)")
    result = db.sql("UPSERT INTO kv VALUES (1, 1), (1, 2) RETURNING k, v")
    assert result.rows == [(1, 1), (1, 2)]
    assert db.sql("SELECT * FROM kv").rows == [(1, 2)]
    db.sql("CREATE TABLE u (k INT PRIMARY KEY, v INT, w INT UNIQUE)")
    db.sql("INSERT INTO u (k) VALUES (0)")
    with pytest.raises(SQLError, match="cannot affect row a second time") as raised:
        db.sql("UPSERT INTO u (w, k) VALUES (0, 0), (1, 0)")
    assert raised.value.code == "21000"
    assert db.sql("SELECT * FROM u").rows == [(0, None, None)]
