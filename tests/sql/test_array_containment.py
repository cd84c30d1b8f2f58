"""``@>`` and ``<@`` of arrays (CockroachDB's and PostgreSQL's array operators): whether
one array holds every element of the other. They were 0A000 ("@> of arrays is not
supported"), so a filter on an array column, as ORMs write it, failed."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


def test_an_array_contains_another_whose_elements_it_all_holds(db: DB) -> None:
    [row] = db.sql(
        "SELECT ARRAY[1, 2, 3] @> ARRAY[3, 1], ARRAY[1, 2] @> ARRAY[4], ARRAY[2] <@ ARRAY[1, 2], "
        "ARRAY[1, NULL] @> ARRAY[NULL::INT], ARRAY[1] @> ARRAY[]::INT[], "
        "ARRAY['a', 'b'] @> '{b}', NULL::INT[] @> ARRAY[1]"
    ).rows
    assert row == (True, False, True, False, True, True, None)


def test_a_filter_on_an_array_column_with_a_parameter(db: DB) -> None:
    db.sql("CREATE TABLE posts (id INT PRIMARY KEY, tags STRING[])")
    db.sql("INSERT INTO posts VALUES (1, ARRAY['db', 'cdc']), (2, ARRAY['db']), (3, NULL)")
    found = db.sql("SELECT id FROM posts WHERE tags @> $1 ORDER BY id", ["db"]).rows
    assert found == [(1,), (2,)]
    found = db.sql("SELECT id FROM posts WHERE tags <@ ARRAY['db', 'x'] ORDER BY id").rows
    assert found == [(2,)]


def test_an_array_and_a_value_of_another_type_do_not_compare(db: DB) -> None:
    with pytest.raises(SQLError) as raised:
        db.sql("SELECT ARRAY[1] @> 1")
    assert raised.value.code == "42883"
