"""A CHECK violation's message is CockroachDB's, ``failed to satisfy CHECK
constraint (b < 1:::INT8)`` (each constant of the stored expression annotated with its
type, as CockroachDB prints it), without PostgreSQL's tail naming the relation and the
constraint."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.parser import annotated_constants


@pytest.mark.parametrize(
    ("expression", "annotated"),
    [
        ("b < 1", "b < 1:::INT8"),
        ("b > 1.5 AND s <> 'it''s'", "b > 1.5:::DECIMAL AND s <> 'it''s':::STRING"),
        ("x IS NOT NULL", "x IS NOT NULL"),
        ("d > '2020-01-01'::DATE", "d > '2020-01-01'::DATE"),
        ("d > CAST('2020-01-01' AS DATE)", "d > CAST('2020-01-01' AS DATE)"),
    ],
)
def test_constants_are_annotated_unless_cast(expression: str, annotated: str) -> None:
    assert annotated_constants(expression) == annotated


def test_a_check_violation_is_worded_as_cockroachdbs_naming_only_the_expression(db: DB) -> None:
    db.sql("CREATE TABLE c (a INT PRIMARY KEY, b INT CHECK (b < 1))")
    with pytest.raises(SQLError) as caught:
        db.sql("INSERT INTO c VALUES (1, 5)")
    assert caught.value.code == "23514"
    assert caught.value.message == "failed to satisfy CHECK constraint (b < 1:::INT8)"


def test_a_check_added_over_a_violating_row_names_the_row_as_cockroachdb(db: DB) -> None:
    """ALTER TABLE ... ADD CONSTRAINT ... CHECK validates the rows there: the first that
    fails is named by its columns (strings quoted, the hidden rowid left out)."""
    db.sql("CREATE TABLE w (s STRING, n INT)")
    db.sql("INSERT INTO w VALUES ('it''s', 5)")
    with pytest.raises(SQLError) as caught:
        db.sql("ALTER TABLE w ADD CONSTRAINT small CHECK (n < 3 OR s = 'ok')")
    assert caught.value.code == "23514"
    assert caught.value.message == (
        "validation of CHECK \"n < 3:::INT8 OR s = 'ok':::STRING\" failed on row: s='it''s', n=5"
    )
    db.sql("ALTER TABLE w ADD CONSTRAINT small CHECK (n < 9)")
