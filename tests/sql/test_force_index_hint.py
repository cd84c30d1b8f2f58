"""CockroachDB's index hint ``t@{FORCE_INDEX=name}`` reads as ``t@name``: the same rows,
through the index named; an index that does not exist is refused as with ``t@name``, and
the text of a string that looks like a hint is left alone."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def p(db: DB) -> DB:
    db.sql("CREATE TABLE p (k INT PRIMARY KEY, f FLOAT UNIQUE)")
    db.sql("INSERT INTO p VALUES (1, 'NaN'), (2, -1), (3, 1)")
    return db


@pytest.mark.parametrize("hint", ["primary", "p_f_key", " p_f_key ", '"p_f_key"'])
def test_force_index_reads_through_the_named_index(p: DB, hint: str) -> None:
    rows = p.sql(f"SELECT k, f IS NaN, isnan(f) FROM p@{{FORCE_INDEX={hint}}} ORDER BY f").rows
    assert rows == [(1, True, True), (2, False, False), (3, False, False)]


def test_force_index_of_a_missing_index_is_refused(p: DB) -> None:
    with pytest.raises(SQLError, match="nosuch"):
        p.sql("SELECT * FROM p@{FORCE_INDEX=nosuch}")


def test_a_hint_inside_a_string_is_text(p: DB) -> None:
    assert p.sql("SELECT 'p@{FORCE_INDEX=primary}'").rows == [("p@{FORCE_INDEX=primary}",)]
