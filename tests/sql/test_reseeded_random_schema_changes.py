"""Schema changes stay each their own transaction when the program seeds the global
``random`` (hypothesis does before every example): a DROP TABLE after a TRUNCATE, each
begun after the same seed, took the TRUNCATE's transaction id and with it its committed
record, so the DROP answered DROP TABLE and changed nothing (its intents were later
committed at the TRUNCATE's timestamp, below their own: an ``InvariantViolation``)."""

from __future__ import annotations

import random

import pytest

from feedkv import DB
from feedkv.errors import SQLError


def _reseeded(db: DB, statement: str) -> None:
    state = random.getstate()
    random.seed(0)
    try:
        db.sql(statement)
    finally:
        random.setstate(state)


def test_drop_table_after_truncate_under_a_reseeded_random_drops_the_table(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("UPSERT INTO t VALUES (1, 'a'), (2, 'b')")
    for statement in ("TRUNCATE t", "UPSERT INTO t VALUES (1, 'z')", "DROP TABLE t"):
        _reseeded(db, statement)
    with pytest.raises(SQLError) as caught:
        db.sql("SELECT * FROM t")
    assert caught.value.code == "42P01"
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    assert db.sql("SELECT * FROM t").rows == []
