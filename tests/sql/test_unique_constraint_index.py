"""The index behind a UNIQUE constraint (a column's UNIQUE, a table's UNIQUE (...), or
ALTER TABLE ADD CONSTRAINT ... UNIQUE) is dropped by DROP INDEX only with CASCADE (or by
ALTER TABLE DROP CONSTRAINT), as CockroachDB; an index made as a UNIQUE INDEX is dropped
as any index."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def t(db: DB) -> DB:
    db.sql(
        "CREATE TABLE t (k INT PRIMARY KEY, a INT UNIQUE, b INT, c INT, d INT, "
        "CONSTRAINT b_unique UNIQUE (b), UNIQUE INDEX c_idx (c))"
    )
    db.sql("ALTER TABLE t ADD CONSTRAINT d_unique UNIQUE (d)")
    db.sql("INSERT INTO t VALUES (1, 1, 1, 1, 1)")
    return db


def _indexes(db: DB) -> set[str]:
    return {row[1] for row in db.sql("SHOW INDEXES FROM t").rows}


@pytest.mark.parametrize("name", ["t_a_key", "b_unique", "d_unique"])
def test_a_unique_constraints_index_is_dropped_only_with_cascade(t: DB, name: str) -> None:
    with pytest.raises(SQLError) as raised:
        t.sql(f"DROP INDEX t@{name}")
    assert raised.value.code == "2BP01"
    assert raised.value.message.startswith(f'index "{name}" is in use as unique constraint')
    assert name in _indexes(t)
    t.sql(f"DROP INDEX t@{name} CASCADE")
    assert name not in _indexes(t)


def test_a_unique_index_is_dropped_without_cascade(t: DB) -> None:
    t.sql("CREATE UNIQUE INDEX made ON t (b, c)")
    t.sql("DROP INDEX t@made")
    t.sql("DROP INDEX c_idx")
    assert _indexes(t) == {"t_pkey", "t_a_key", "b_unique", "d_unique"}
    t.sql("INSERT INTO t VALUES (2, 2, 2, 1, 2)")  # c is no longer unique
    assert t.sql("SELECT count(*) FROM t WHERE c = 1").rows == [(2,)]


def test_drop_constraint_drops_a_unique_constraint(t: DB) -> None:
    t.sql("ALTER TABLE t DROP CONSTRAINT t_a_key")
    t.sql("INSERT INTO t VALUES (2, 1, 2, 2, 2)")
    assert "t_a_key" not in _indexes(t)
    assert t.sql("SELECT count(*) FROM t WHERE a = 1").rows == [(2,)]
