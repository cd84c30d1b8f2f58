"""A foreign-key violation (23503) as CockroachDB reports it: the message names the
statement, table and constraint; the DETAIL field names the key."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def family(db: DB) -> DB:
    db.sql("CREATE TABLE parent (id INT PRIMARY KEY)")
    db.sql("CREATE TABLE child (k INT PRIMARY KEY, p INT REFERENCES parent (id))")
    db.sql("INSERT INTO parent VALUES (1), (2)")
    db.sql("INSERT INTO child VALUES (10, 1)")
    return db


@pytest.mark.parametrize(
    ("statement", "message", "detail"),
    [
        (
            "INSERT INTO child VALUES (11, 3)",
            'insert on table "child" violates foreign key constraint "child_p_fkey"',
            'Key (p)=(3) is not present in table "parent".',
        ),
        (
            "UPDATE child SET p = 4 WHERE k = 10",
            'update on table "child" violates foreign key constraint "child_p_fkey"',
            'Key (p)=(4) is not present in table "parent".',
        ),
        (
            "DELETE FROM parent WHERE id = 1",
            'delete on table "parent" violates foreign key constraint "child_p_fkey"'
            ' on table "child"',
            'Key (id)=(1) is still referenced from table "child".',
        ),
        (
            "UPDATE parent SET id = 5 WHERE id = 1",
            'update on table "parent" violates foreign key constraint "child_p_fkey"'
            ' on table "child"',
            'Key (id)=(1) is still referenced from table "child".',
        ),
    ],
)
def test_the_key_is_in_the_detail_not_the_message(
    family: DB, statement: str, message: str, detail: str
) -> None:
    with pytest.raises(SQLError) as caught:
        family.sql(statement)
    error = caught.value
    assert (error.code, error.message, error.detail) == ("23503", message, detail)
    assert str(error) == f"{message}\nDETAIL: {detail}"
