"""CockroachDB's ``IF(cond, then, else)``: ``CASE WHEN cond THEN then ELSE else END``,
its column named ``if`` (it was refused as an unsupported expression)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.session import Session


@pytest.fixture
def session(db: DB) -> Session:
    return db.session()


def test_if_picks_a_branch_by_its_condition(session: Session) -> None:
    result = session.execute("SELECT IF(true, 1, 2), IF(false, 1, 2), IF(NULL, 1, 2)")
    assert result.columns == ("if", "if", "if")
    assert result.rows == [(1, 2, 2)]
    session.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    session.execute("INSERT INTO t VALUES (1, 10), (2, NULL)")
    rows = session.execute("SELECT k, IF(v IS NULL, 0, v) FROM t ORDER BY k").rows
    assert rows == [(1, 10), (2, 0)]
    # the branch not taken is not evaluated
    assert session.execute("SELECT IF(true, 1, 1 / 0)").rows == [(1,)]


def test_a_condition_that_is_no_bool_is_an_error(session: Session) -> None:
    with pytest.raises(SQLError) as caught:
        session.execute("SELECT IF(1, 2, 3)")
    assert caught.value.code == "42804"
