"""An INSERT or UPSERT that leaves out a primary key column without a DEFAULT is refused
when planned, as CockroachDB refuses it: 42830 ``missing "k" primary key column``
(its code for this); a key column with a DEFAULT (a hidden rowid) may be left out."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def t(db: DB) -> DB:
    db.sql("CREATE TABLE ab (a INT, b INT, c INT, PRIMARY KEY (a, b))")
    db.sql("CREATE TABLE d (k INT PRIMARY KEY DEFAULT 7, v INT)")
    return db


@pytest.mark.parametrize(
    ("statement", "column"),
    [
        ("INSERT INTO ab (a, c) VALUES (1, 2)", "b"),
        ("UPSERT INTO ab (b) VALUES (1)", "a"),
        ("INSERT INTO ab VALUES (1)", "b"),
        ("INSERT INTO ab SELECT 1", "b"),
        ("INSERT INTO ab (c) VALUES (1) ON CONFLICT DO NOTHING", "a"),
    ],
)
def test_a_left_out_key_column_is_refused(t: DB, statement: str, column: str) -> None:
    with pytest.raises(SQLError) as raised:
        t.sql(statement)
    assert raised.value.code == "42830"
    assert raised.value.message == f'missing "{column}" primary key column'
    assert t.sql("SELECT count(*) FROM ab").rows == [(0,)]


def test_a_key_column_with_a_default_or_a_rowid_may_be_left_out(t: DB) -> None:
    t.sql("INSERT INTO d (v) VALUES (1)")
    assert t.sql("SELECT * FROM d").rows == [(7, 1)]
    t.sql("CREATE TABLE r (x INT)")
    t.sql("INSERT INTO r (x) SELECT 1")
    assert t.sql("SELECT x FROM r").rows == [(1,)]
    # A NULL written into the key is a NOT NULL violation, as before.
    with pytest.raises(SQLError) as raised:
        t.sql("INSERT INTO ab VALUES (NULL, 1)")
    assert raised.value.code == "23502"
