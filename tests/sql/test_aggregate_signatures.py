"""Aggregates called with more arguments than any of their signatures take are refused
(42883), as CockroachDB refuses them: sqlglot's reading of string_agg kept its first
two arguments and dropped the rest, so string_agg(v, v, v) ran as string_agg(v, v)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def staff(db: DB) -> DB:
    db.sql("CREATE TABLE staff (id INT PRIMARY KEY, company INT, name STRING)")
    db.sql("INSERT INTO staff VALUES (1, 1, 'A'), (2, 1, 'B')")
    return db


@pytest.mark.parametrize(
    "call",
    [
        "string_agg(name, name, name)",
        "string_agg(name, ',', name, ',')",
        "string_agg(name, name, name) OVER (PARTITION BY company)",
        "json_agg(id, id)",
        "jsonb_agg(id, id)",
    ],
)
def test_too_many_arguments_are_refused(staff: DB, call: str) -> None:
    with pytest.raises(SQLError) as raised:
        staff.sql(f"SELECT {call} FROM staff")
    assert raised.value.code == "42883"
    assert "unknown signature" in str(raised.value)


def test_the_signatures_that_exist_still_run(staff: DB) -> None:
    assert staff.sql("SELECT string_agg(name, ', ' ORDER BY name, id) FROM staff").rows == [
        ("A, B",)
    ]
    assert staff.sql("SELECT string_agg(DISTINCT name, ',' ORDER BY name) FROM staff").rows == [
        ("A,B",)
    ]
    # each value after the first comes after its own separator, as in PostgreSQL
    assert staff.sql("SELECT string_agg(name, lower(name)) FROM staff").rows == [("AbB",)]
    assert staff.sql("SELECT json_agg(id ORDER BY id DESC) FROM staff").rows == [([2, 1],)]


def test_count_star_with_more_is_a_syntax_error(staff: DB) -> None:
    with pytest.raises(SQLError) as raised:
        staff.sql("SELECT count(*, 1) FROM staff")
    assert (raised.value.code, str(raised.value)) == ("42601", 'at or near ",": syntax error')
