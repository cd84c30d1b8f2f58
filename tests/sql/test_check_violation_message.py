"""A CHECK violation's message has CockroachDB's shape first, ``failed to satisfy CHECK
constraint (b < 1:::INT8)`` (each constant of the stored expression annotated with its
type, as CockroachDB prints it), then the relation and constraint PostgreSQL names."""

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


def test_a_check_violation_names_the_expression_relation_and_constraint(db: DB) -> None:
    db.sql("CREATE TABLE c (a INT PRIMARY KEY, b INT CHECK (b < 1))")
    with pytest.raises(SQLError) as caught:
        db.sql("INSERT INTO c VALUES (1, 5)")
    assert caught.value.code == "23514"
    assert caught.value.message == (
        "failed to satisfy CHECK constraint (b < 1:::INT8): "
        'new row for relation "c" violates check constraint "c_b_check"'
    )
