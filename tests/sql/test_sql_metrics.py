"""Tests for feedkv.sql.metrics: each statement executed successfully is counted by its
type (its own count for SELECT, INSERT, UPDATE, DELETE, BEGIN, COMMIT, ROLLBACK; DDL's or
misc's for the rest), alone or sent together, one that failed as a failure only, and
sql_query_count is their sum."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.metrics import SQLMetrics
from feedkv.sql.session import Session
from feedkv.util.metrics import Registry

COUNTS = (
    "sql_select_count",
    "sql_insert_count",
    "sql_update_count",
    "sql_delete_count",
    "sql_ddl_count",
    "sql_misc_count",
    "sql_txn_begin_count",
    "sql_txn_commit_count",
    "sql_txn_rollback_count",
    "sql_failure_count",
    "sql_query_count",
)


def counts(registry: Registry) -> dict[str, float]:
    text = registry.exposition().decode()
    found = {f.name: f.samples[0].value for f in text_string_to_metric_families(text)}
    return {name: found[name] for name in COUNTS}


def test_each_statement_is_counted_by_its_type(db: DB) -> None:
    registry = Registry()
    session = Session(db, metrics=SQLMetrics(registry))
    for text in (
        "CREATE TABLE t (k INT PRIMARY KEY, v STRING)",
        "INSERT INTO t VALUES (1, 'a')",
        "UPDATE t SET v = 'b' WHERE k = 1",
        "SELECT * FROM t",
        "SET application_name = 'x'",
        "SHOW application_name",
        "BEGIN",
        "DELETE FROM t WHERE k = 1",
        "COMMIT",
        "BEGIN",
        "ROLLBACK",
        "INSERT INTO t VALUES (2, 'c'); INSERT INTO t VALUES (3, 'd'); SELECT 1",
    ):
        session.execute(text)
    for failing in ("SELECT * FROM nosuch", "INSERT INTO t VALUES (2, 'again')"):
        with pytest.raises(SQLError):
            session.execute(failing)
    assert counts(registry) == {
        "sql_select_count": 2,
        "sql_insert_count": 3,
        "sql_update_count": 1,
        "sql_delete_count": 1,
        "sql_ddl_count": 1,
        "sql_misc_count": 2,
        "sql_txn_begin_count": 2,
        "sql_txn_commit_count": 1,
        "sql_txn_rollback_count": 1,
        "sql_failure_count": 2,
        "sql_query_count": 16,
    }
