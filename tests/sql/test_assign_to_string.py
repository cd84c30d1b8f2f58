"""A number or a BOOL written to a string column goes in as its text: CockroachDB's
assignment cast to a string type (its cast map: "conversions to string types are
assignment casts", after PostgreSQL's I/O conversion). Only where a value is assigned:
a comparison of a string column with a number is still refused, and one VALUES column
is typed once, so a string and a number in it cannot be matched (42804)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def t(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, c CHAR, s STRING, v VARCHAR(3))")
    return db


def test_insert_upsert_and_update_write_a_number_as_its_text(t: DB) -> None:
    t.sql("INSERT INTO t (k, c) VALUES (1, 1)")
    t.sql("INSERT INTO t (k, s) VALUES (2, 1.50), (3, true), (4, 2.5::FLOAT), (5, 1e20::FLOAT)")
    t.sql("UPSERT INTO t (k, s) VALUES (6, 6)")
    t.sql("UPDATE t SET v = k * 100 WHERE k = 1")
    t.sql("INSERT INTO t (k) VALUES (6) ON CONFLICT (k) DO UPDATE SET s = excluded.k + 1")
    assert t.sql("SELECT k, c, s, v FROM t ORDER BY k").rows == [
        (1, "1", None, "100"),
        (2, None, "1.50", None),
        (3, None, "true", None),
        (4, None, "2.5", None),
        (5, None, "1e+20", None),
        (6, None, "7", None),
    ]


def test_the_text_must_fit_the_columns_width(t: DB) -> None:
    for statement in (
        "INSERT INTO t (k, c) VALUES (1, 11)",
        "INSERT INTO t (k, v) VALUES (1, 1234)",
    ):
        with pytest.raises(SQLError) as raised:
            t.sql(statement)
        assert raised.value.code == "22001"
    assert t.sql("SELECT count(*) FROM t").rows == [(0,)]


def test_a_comparison_and_a_mixed_values_column_are_still_refused(t: DB) -> None:
    t.sql("INSERT INTO t (k, s) VALUES (1, '1')")
    with pytest.raises(SQLError) as raised:
        t.sql("SELECT k FROM t WHERE s = 1")
    assert raised.value.code == "42883"
    with pytest.raises(SQLError, match="VALUES types int and string cannot be matched") as raised:
        t.sql("INSERT INTO t (k, s) VALUES (2, 'a'), (3, 5)")
    assert raised.value.code == "42804"
    assert t.sql("SELECT count(*) FROM t").rows == [(1,)]
