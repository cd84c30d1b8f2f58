"""A column ALTER TABLE ... ADD COLUMN adds in an explicit transaction is not public
until that transaction commits, as CockroachDB's column mutations: the transaction's
later statements cannot name it and ``*`` leaves it out, yet every row they write
holds its default (or computed value), and the commit makes it public."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def t(db: DB) -> DB:
    db.sql("CREATE TABLE t (x INT PRIMARY KEY, n INT)")
    db.sql("INSERT INTO t VALUES (12, 1)")
    return db


def test_a_column_added_in_a_transaction_is_not_seen_until_commit(t: DB) -> None:
    session = t.session()
    session.execute("BEGIN")
    session.execute("ALTER TABLE t ADD COLUMN y INT NOT NULL DEFAULT 123")
    assert session.execute("SELECT * FROM t").rows == [(12, 1)]
    assert session.execute("UPDATE t SET x = 124 WHERE x = 12 RETURNING *").rows == [(124, 1)]
    session.execute("INSERT INTO t VALUES (5, 2)")
    session.execute("UPSERT INTO t VALUES (6)")
    assert " y " not in session.execute("SHOW CREATE TABLE t").rows[0][1]
    assert [row[0] for row in session.execute("SHOW COLUMNS FROM t").rows] == ["x", "n"]
    session.execute("COMMIT")
    assert t.sql("SELECT * FROM t ORDER BY x").rows == [
        (5, 2, 123),
        (6, None, 123),
        (124, 1, 123),
    ]


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("SELECT y FROM t", 'column "y" does not exist'),
        ("UPDATE t SET x = 1 RETURNING y", 'column "y" does not exist'),
        ("UPDATE t SET y = 1", 'column "y" does not exist'),
        ("INSERT INTO t (x, y) VALUES (1, 2)", 'column "y" does not exist'),
        (
            "INSERT INTO t (x) VALUES (12) ON CONFLICT (x) DO UPDATE SET y = 456",
            'column "y" does not exist',
        ),
        ("UPSERT INTO t VALUES (1, 2, 3)", "UPSERT has more expressions than target columns"),
    ],
)
def test_the_transaction_cannot_name_the_column_it_is_adding(
    t: DB, statement: str, message: str
) -> None:
    session = t.session()
    session.execute("BEGIN")
    session.execute("ALTER TABLE t ADD COLUMN y INT NOT NULL DEFAULT 123")
    with pytest.raises(SQLError, match=message):
        session.execute(statement)
    session.execute("ROLLBACK")
    assert [row[0] for row in t.sql("SHOW COLUMNS FROM t").rows] == ["x", "n"]


def test_a_computed_column_added_in_a_transaction_is_filled_by_its_writes(t: DB) -> None:
    session = t.session()
    session.execute("BEGIN")
    session.execute("ALTER TABLE t ADD COLUMN p INT AS (x + n) STORED")
    session.execute("UPDATE t SET x = 2 WHERE n = 1")
    session.execute("UPSERT INTO t SELECT * FROM t WHERE x = 2")
    session.execute("COMMIT")
    assert t.sql("SELECT * FROM t").rows == [(2, 1, 3)]


def test_a_column_added_outside_a_transaction_is_public_at_once(t: DB) -> None:
    t.sql("ALTER TABLE t ADD COLUMN y INT DEFAULT 7")
    assert t.sql("SELECT x, y FROM t").rows == [(12, 7)]


def test_a_batch_adding_a_column_commits_it_public(t: DB) -> None:
    t.sql("ALTER TABLE t ADD COLUMN y INT DEFAULT 7; INSERT INTO t VALUES (1, 2)")
    assert t.sql("SELECT x, n, y FROM t ORDER BY x").rows == [(1, 2, 7), (12, 1, 7)]
