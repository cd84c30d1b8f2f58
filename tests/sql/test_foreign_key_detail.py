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


def test_a_foreign_key_added_over_unmatched_rows_names_one_as_cockroachdb(db: DB) -> None:
    """ALTER TABLE ... ADD CONSTRAINT ... FOREIGN KEY validates the rows there: the
    first without a match is named by its key columns, then its primary key's others
    (strings quoted), and there is no DETAIL."""
    db.sql("CREATE TABLE region (country STRING, code STRING, PRIMARY KEY (country, code))")
    db.sql("INSERT INTO region VALUES ('fr', 'idf')")
    db.sql("CREATE TABLE shop (id INT PRIMARY KEY, country STRING, code STRING)")
    db.sql("INSERT INTO shop VALUES (1, 'fr', 'idf'), (2, 'it', 'l''aquila'), (3, NULL, 'x')")
    with pytest.raises(SQLError) as caught:
        db.sql(
            "ALTER TABLE shop ADD CONSTRAINT shop_region FOREIGN KEY (country, code) "
            "REFERENCES region (country, code)"
        )
    assert caught.value.code == "23503" and caught.value.detail is None
    assert caught.value.message == (
        "foreign key violation: \"shop\" row country='it', code='l''aquila', id=2 has no "
        'match in "region"'
    )
    assert db.sql("SELECT count(*) FROM shop").rows == [(3,)]  # nothing changed
    db.sql("DELETE FROM shop WHERE id = 2")
    db.sql(
        "ALTER TABLE shop ADD CONSTRAINT shop_region FOREIGN KEY (country, code) "
        "REFERENCES region (country, code)"
    )
