"""The locking clauses read alone (no store): which sources a SELECT locks, how, and
the shapes refused before any row is read."""

from __future__ import annotations

import pytest

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.execution import RowLocking
from feedkv.sql.parser import parse
from feedkv.sql.row_locking import check_locking, source_name, table_locking


def _select(text: str) -> st.Select:
    (statement,) = parse(text)
    assert isinstance(statement, st.Select)
    return statement


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SELECT * FROM t", {"t": None, "u": None}),
        ("SELECT * FROM t FOR UPDATE", {"t": "wait", "u": "wait"}),
        ("SELECT * FROM t FOR NO KEY UPDATE OF u", {"t": None, "u": "wait"}),
        ("SELECT * FROM t FOR UPDATE OF t NOWAIT", {"t": "nowait", "u": None}),
        ("SELECT * FROM t FOR SHARE", {"t": None, "u": None}),
        ("SELECT * FROM t FOR KEY SHARE NOWAIT", {"t": None, "u": None}),
        # a table named by several clauses takes NOWAIT from any (as PostgreSQL)
        ("SELECT * FROM t FOR UPDATE OF t FOR UPDATE NOWAIT", {"t": "nowait", "u": "nowait"}),
        ("SELECT * FROM t FOR SHARE OF t FOR UPDATE OF u", {"t": None, "u": "wait"}),
    ],
)
def test_table_locking_follows_the_exclusive_clauses_naming_a_table(
    text: str, expected: dict[str, RowLocking | None]
) -> None:
    s = _select(text)
    assert {name: table_locking(s, name) for name in expected} == expected


@pytest.mark.parametrize(
    ("text", "code", "message"),
    [
        ("SELECT count(*) FROM t FOR UPDATE", "0A000", "aggregate functions"),
        ("SELECT k FROM t ORDER BY max(k) FOR SHARE", "0A000", "aggregate functions"),
        ("SELECT k FROM t GROUP BY k FOR UPDATE", "0A000", "GROUP BY clause"),
        ("SELECT rank() OVER () FROM t FOR UPDATE", "0A000", "window functions"),
        ("SELECT DISTINCT ON (k) k FROM t FOR UPDATE", "0A000", "DISTINCT clause"),
        ("SELECT k FROM t FOR UPDATE OF x", "42P01", 'relation "x" in FOR UPDATE clause'),
    ],
)
def test_check_locking_refuses_what_leaves_no_row_to_lock(
    text: str, code: str, message: str
) -> None:
    s = _select(text)
    with pytest.raises(SQLError) as caught:
        check_locking(s, [source_name(s.table, s.alias)], read_only=False)
    assert caught.value.code == code
    assert message in caught.value.message


def test_read_only_refuses_exclusive_locks_only() -> None:
    shared, exclusive = _select("SELECT k FROM t FOR SHARE"), _select("SELECT k FROM t FOR UPDATE")
    check_locking(shared, ["t"], read_only=True)
    with pytest.raises(SQLError) as caught:
        check_locking(exclusive, ["t"], read_only=True)
    assert caught.value.code == "25006"


def test_source_name_is_the_alias_else_the_table() -> None:
    assert source_name(st.TableName("t"), None) == "t"
    assert source_name(st.TableName("t"), "x") == "x"
    assert source_name(None, None) == ""
