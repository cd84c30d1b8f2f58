"""A view keeps its query's type annotations (``e:::T``) as annotations: SHOW CREATE
VIEW shows ``:::``, and the view's query asserts the type each time it runs, failing or
passing as the same query does outside a view."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def t(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, s STRING)")
    db.sql("INSERT INTO t VALUES (1, '5')")
    return db


def test_show_create_view_shows_the_annotation(t: DB) -> None:
    t.sql("CREATE VIEW v AS SELECT k:::INT AS a, '1':::INT AS b FROM t WHERE k > 0:::INT")
    [(_, text)] = t.sql("SHOW CREATE VIEW v").rows
    assert text == (
        "CREATE VIEW v (a, b) AS SELECT k:::INT AS a, '1':::INT AS b FROM t WHERE k > 0:::INT"
    )
    # NB: a string constant takes the annotated type, as CockroachDB types it from context
    assert t.sql("SELECT * FROM v").rows == [(1, 1)]


@pytest.mark.parametrize(
    ("select", "code", "message"),
    [
        ("SELECT k:::STRING FROM t", "42804", "incompatible type annotation for k as string"),
        ("SELECT 1.5:::INT", "42804", "incompatible type annotation for 1.5 as int8"),
        ("SELECT 'a':::INT", "22P02", "could not parse"),
    ],
)
def test_an_annotation_that_fails_outside_a_view_fails_in_one(
    t: DB, select: str, code: str, message: str
) -> None:
    with pytest.raises(SQLError) as outside:
        t.sql(select)
    with pytest.raises(SQLError) as inside:
        t.sql(f"CREATE VIEW v AS {select}")
    assert (outside.value.code, inside.value.code) == (code, code)
    assert message in outside.value.message and message in inside.value.message


def test_a_view_read_asserts_the_annotation_not_a_cast(t: DB) -> None:
    t.sql("CREATE VIEW v AS SELECT k, s FROM t")
    assert t.sql("SELECT s:::STRING FROM v").rows == [("5",)]
    with pytest.raises(SQLError) as caught:
        t.sql("SELECT s:::INT FROM v")
    assert caught.value.code == "42804"
