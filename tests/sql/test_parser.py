"""parser: what the statements hold that the executor relies on, without a store."""

from __future__ import annotations

import pytest

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.parser import parse, placeholder_count


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("SELECT * FROM t WHERE k = $1", 1),
        ("SELECT * FROM t JOIN u ON t.k = u.k + $2", 2),
        ("WITH a AS (SELECT k FROM u WHERE w > $1) SELECT * FROM a", 1),
        ("SELECT k FROM t UNION SELECT $3", 3),
        ("SELECT * FROM (SELECT $2 AS x) AS s", 2),
        ("INSERT INTO t SELECT $1, $2", 2),
        ("UPDATE t SET v = u.w + $1 FROM u WHERE u.k = t.k", 1),
        ("DELETE FROM t USING (SELECT $4 AS k) AS s WHERE t.k = s.k", 4),
        ("VALUES ($1), ($2)", 2),
        ("INSERT INTO t (k,v) VALUES ($1,$2)", 2),  # not a dollar quote tagged "1,"
        ("SELECT $1+$2||$x$a$b$x$", 2),
        ("SELECT k FROM t WHERE k = ANY (SELECT k FROM u WHERE w < $2)", 2),
    ],
)
def test_placeholders_are_counted_in_every_part_of_a_statement(text: str, count: int) -> None:
    (statement,) = parse(text)
    assert placeholder_count(statement) == count


@pytest.mark.parametrize(
    "text",
    [
        "SHOW SEQUENCES",
        "SHOW TYPES",
        "SHOW SCHEDULES",
        "SHOW DEFAULT PRIVILEGES",
    ],
)
def test_cockroachdbs_show_statements_not_there_yet_are_unsupported(text: str) -> None:
    """0A000 naming what SHOW supports, not 42704 as if they named a session variable."""
    with pytest.raises(SQLError) as caught:
        parse(text)
    assert caught.value.code == "0A000", caught.value
    assert "feedkv supports SHOW TABLES" in caught.value.message


def test_changefeed_options_are_read_in_cockroachdbs_description_form_too() -> None:
    """``WITH OPTIONS (...)``, as a job's description writes them, reads as ``WITH ...``
    does (so a description runs again); an unclosed one is a syntax error."""
    (plain,) = parse("CREATE CHANGEFEED FOR t INTO 'null://' WITH resolved = '1s', updated")
    (described,) = parse(
        "CREATE CHANGEFEED FOR TABLE t INTO 'null://' WITH OPTIONS (resolved = '1s', updated)"
    )
    assert isinstance(plain, st.CreateChangefeed) and isinstance(described, st.CreateChangefeed)
    assert described.options == plain.options == (("resolved", "1s"), ("updated", None))
    with pytest.raises(SQLError, match="never closed"):
        parse("CREATE CHANGEFEED FOR t INTO 'null://' WITH OPTIONS (updated")
