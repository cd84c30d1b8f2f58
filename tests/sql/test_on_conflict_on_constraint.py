"""``INSERT ... ON CONFLICT ON CONSTRAINT name``: the arbiter named by its constraint
(the primary key's ``t_pkey``, or a unique index or UNIQUE constraint), as CockroachDB
and PostgreSQL take it; a name of no constraint is 42704, of an index that is not
unique 42P10."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def t(db: DB) -> DB:
    db.sql("CREATE TABLE t (a INT, b INT, c INT, PRIMARY KEY (a, b), UNIQUE (c), INDEX (b))")
    db.sql("INSERT INTO t VALUES (1, 2, 3)")
    return db


def test_the_primary_keys_constraint_arbitrates(t: DB) -> None:
    t.sql("INSERT INTO t VALUES (1, 2, 4) ON CONFLICT ON CONSTRAINT t_pkey DO NOTHING")
    t.sql(
        "INSERT INTO t VALUES (1, 2, 5) ON CONFLICT ON CONSTRAINT t_pkey "
        "DO UPDATE SET c = excluded.c + 1"
    )
    assert t.sql("SELECT * FROM t").rows == [(1, 2, 6)]


def test_a_unique_constraint_arbitrates_by_its_columns(t: DB) -> None:
    t.sql("INSERT INTO t VALUES (2, 2, 3) ON CONFLICT ON CONSTRAINT t_c_key DO UPDATE SET c = 10")
    assert t.sql("SELECT * FROM t").rows == [(1, 2, 10)]
    t.sql("INSERT INTO t VALUES (3, 3, 10) ON CONFLICT ON CONSTRAINT t_c_key DO NOTHING")
    assert t.sql("SELECT count(*) FROM t").rows == [(1,)]
    # A clash on another constraint than the one named is still an error.
    with pytest.raises(SQLError) as raised:
        t.sql("INSERT INTO t VALUES (1, 2, 11) ON CONFLICT ON CONSTRAINT t_c_key DO NOTHING")
    assert raised.value.code == "23505"


@pytest.mark.parametrize(("name", "code"), [("nope", "42704"), ("t_b_idx", "42P10")])
def test_a_name_that_is_no_unique_constraint_is_refused(t: DB, name: str, code: str) -> None:
    with pytest.raises(SQLError) as raised:
        t.sql(f"INSERT INTO t VALUES (5, 5, 5) ON CONFLICT ON CONSTRAINT {name} DO NOTHING")
    assert raised.value.code == code
    assert t.sql("SELECT count(*) FROM t").rows == [(1,)]
