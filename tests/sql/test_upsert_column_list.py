"""UPSERT with a column list keeps the values of the columns it leaves out; without one
it writes every column, those its rows leave out taking their DEFAULT (NULL without
one), as CockroachDB documents UPSERT. Computed columns follow what was written."""

from __future__ import annotations

from decimal import Decimal

import pytest

from feedkv import DB


@pytest.fixture
def acct(db: DB) -> DB:
    db.sql(
        "CREATE TABLE acct (k INT PRIMARY KEY, name STRING, balance INT DEFAULT 100, "
        "note STRING, twice INT AS (balance * 2) STORED)"
    )
    db.sql("INSERT INTO acct VALUES (1, 'a', 5, 'old'), (2, 'b', 6, 'old')")
    return db


def test_upsert_without_a_column_list_writes_defaults_for_columns_not_given(acct: DB) -> None:
    acct.sql("UPSERT INTO acct VALUES (1, 'a2')")
    assert acct.sql("SELECT * FROM acct ORDER BY k").rows == [
        (1, "a2", 100, None, 200),
        (2, "b", 6, "old", 12),
    ]


def test_upsert_with_a_column_list_keeps_the_columns_it_leaves_out(acct: DB) -> None:
    acct.sql("UPSERT INTO acct (k, name) VALUES (1, 'a2'), (3, 'c')")
    assert acct.sql("SELECT * FROM acct ORDER BY k").rows == [
        (1, "a2", 5, "old", 10),
        (2, "b", 6, "old", 12),
        (3, "c", 100, None, 200),
    ]


def test_upsert_select_without_a_column_list_writes_every_column(acct: DB) -> None:
    acct.sql("UPSERT INTO acct SELECT k, 'z' FROM acct WHERE k = 2")
    assert acct.sql("SELECT * FROM acct WHERE k = 2").rows == [(2, "z", 100, None, 200)]


def test_upsert_without_a_column_list_on_an_indexed_table(db: DB) -> None:
    db.sql(
        "CREATE TABLE idx (a DECIMAL PRIMARY KEY, b DECIMAL, c DECIMAL DEFAULT (10.0), "
        "d DECIMAL AS (a + c) STORED, UNIQUE INDEX secondary (d, b), CHECK (c > 0))"
    )
    db.sql("INSERT INTO idx VALUES (1, 1, 1), (2, 2, 2)")
    db.sql("UPSERT INTO idx VALUES (1.0)")
    assert db.sql("SELECT * FROM idx@secondary ORDER BY d, b").rows == [
        (Decimal("2"), Decimal("2"), Decimal("2"), Decimal("4")),
        (Decimal("1"), None, Decimal("10.0"), Decimal("11.0")),
    ]


def test_on_conflict_without_a_column_list_sees_defaults_as_excluded(acct: DB) -> None:
    acct.sql(
        "INSERT INTO acct VALUES (1, 'a2') ON CONFLICT (k) DO UPDATE "
        "SET name = excluded.name, balance = excluded.balance"
    )
    assert acct.sql("SELECT * FROM acct WHERE k = 1").rows == [(1, "a2", 100, "old", 200)]
