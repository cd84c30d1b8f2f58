"""``SET c = DEFAULT`` in UPDATE and in INSERT ... ON CONFLICT DO UPDATE writes the
column's DEFAULT (NULL without one), as CockroachDB and PostgreSQL do; a quoted
``"default"`` is a column of that name."""

from __future__ import annotations

import pytest

from feedkv import DB


@pytest.fixture
def t(db: DB) -> DB:
    db.sql('CREATE TABLE t (k INT PRIMARY KEY, c INT DEFAULT 7, d INT, "default" INT)')
    db.sql("INSERT INTO t VALUES (1, 2, 3, 4)")
    return db


def test_update_sets_a_column_to_its_default(t: DB) -> None:
    t.sql("UPDATE t SET c = DEFAULT, d = DEFAULT")
    assert t.sql("SELECT * FROM t").rows == [(1, 7, None, 4)]
    t.sql("UPDATE t SET (c, d) = (1, 5)")
    t.sql("UPDATE t SET (c, d) = (DEFAULT, 6)")
    assert t.sql("SELECT c, d FROM t").rows == [(7, 6)]
    t.sql('UPDATE t SET c = "default"')
    assert t.sql("SELECT c FROM t").rows == [(4,)]


def test_on_conflict_do_update_sets_a_column_to_its_default(t: DB) -> None:
    t.sql("INSERT INTO t VALUES (1, 9) ON CONFLICT (k) DO UPDATE SET c = DEFAULT, d = DEFAULT")
    assert t.sql("SELECT * FROM t").rows == [(1, 7, None, 4)]
    t.sql("INSERT INTO t (k, c) VALUES (2, 1) ON CONFLICT (k) DO UPDATE SET c = DEFAULT")
    assert t.sql("SELECT k, c FROM t ORDER BY k").rows == [(1, 7), (2, 1)]
