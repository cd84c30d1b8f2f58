"""``||`` with an array on either side is array concatenation (CockroachDB's array
operators): arrays joined, or an element appended or prepended; never the text of
the array followed by the text of the element."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.arrays import Array
from feedkv.sql.types import ColumnType, Kind


def test_an_element_is_appended_or_prepended(db: DB) -> None:
    db.sql("CREATE TABLE kv (k INT PRIMARY KEY)")
    db.sql("INSERT INTO kv VALUES (1), (3)")
    [(appended, prepended)] = db.sql(
        "SELECT array_agg(k) || 1, 0 || array_agg(k) FROM (SELECT k FROM kv ORDER BY k)"
    ).rows
    ints = ColumnType(Kind.INT)
    assert appended == Array((1, 3, 1), ints)
    assert prepended == Array((0, 1, 3), ints)


def test_arrays_are_joined_and_strings_still_concatenate(db: DB) -> None:
    [row] = db.sql(
        "SELECT (ARRAY[1, 2] || ARRAY[3])::STRING, (ARRAY['a'] || 'b')::STRING, 'x' || 'y'"
    ).rows
    assert row == ("{1,2,3}", "{a,b}", "xy")


def test_arrays_of_different_types_do_not_join(db: DB) -> None:
    with pytest.raises(SQLError, match="unsupported binary operator") as raised:
        db.sql("SELECT ARRAY[1] || ARRAY['a']")
    assert raised.value.code == "42883"
