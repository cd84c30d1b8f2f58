"""Casts to bounded strings as CockroachDB's STRING docs define them: an explicit cast
to ``STRING(n)`` (or ``VARCHAR(n)``) truncates to n characters, while assigning a
longer value to a ``STRING(n)`` column is an error (22001)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


def test_an_explicit_cast_truncates(db: DB) -> None:
    [row] = db.sql(
        "SELECT CAST('hello world' AS STRING(5)), 'abcdef'::VARCHAR(3), 12345::STRING(2), "
        """'"abc"'::JSONB::VARCHAR(3)"""
    ).rows
    assert row == ("hello", "abc", "12", '"ab')


def test_assigning_a_longer_value_is_an_error(db: DB) -> None:
    db.sql("CREATE TABLE bounded (k INT PRIMARY KEY, v STRING(3))")
    with pytest.raises(SQLError) as raised:
        db.sql("INSERT INTO bounded VALUES (1, 'abcd')")
    assert raised.value.code == "22001"
    db.sql("INSERT INTO bounded VALUES (1, 'abcd'::STRING(3))")
    assert db.sql("SELECT v FROM bounded").rows == [("abc",)]
