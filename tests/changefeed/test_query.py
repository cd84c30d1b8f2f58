"""CDC queries: CREATE CHANGEFEED ... AS SELECT, with cdc_prev and event_op()."""

from __future__ import annotations

import decimal
import json
from pathlib import Path

import pytest

from feedkv import DB
from feedkv.changefeed.sinkless import FeedResult
from feedkv.errors import SQLError

DEADLINE = 30.0


@pytest.fixture
def table(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING, n INT)")
    db.sql("INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 20)")
    return db


def test_a_query_filters_and_projects_with_the_previous_row_and_the_operation(table: DB) -> None:
    db = table
    result = db.sql(
        "EXPERIMENTAL CHANGEFEED AS SELECT k, n * 2 AS dbl, cdc_prev.n AS old, "
        "event_op() AS op FROM t WHERE n > 5 OR event_op() = 'delete'"
    )
    assert isinstance(result, FeedResult)
    first = result.poll(DEADLINE)
    db.sql("UPDATE t SET n = 3 WHERE k = 2")  # filtered out: n is not > 5
    db.sql("UPDATE t SET n = 30 WHERE k = 1")
    db.sql("DELETE FROM t WHERE k = 2")
    second, third = result.poll(DEADLINE), result.poll(DEADLINE)
    result.close()
    # keys sorted, as CockroachDB's JSON
    assert first == ("t", "[2]", json.dumps({"dbl": 40, "k": 2, "old": None, "op": "insert"}))
    assert second == ("t", "[1]", json.dumps({"dbl": 60, "k": 1, "old": 1, "op": "update"}))
    # a deletion in the bare envelope: the projection of the row with only its key set
    assert third == ("t", "[2]", json.dumps({"dbl": None, "k": 2, "old": 3, "op": "delete"}))


def test_a_change_function_without_an_alias_names_its_column_for_itself(table: DB) -> None:
    """CockroachDB names the column of an unaliased ``event_op()`` (and the other
    functions of a change) ``event_op``; a predicate that is such a function alone works."""
    result = table.sql(
        "EXPERIMENTAL CHANGEFEED AS SELECT k, event_op(), cdc_is_delete() FROM t "
        "WHERE cdc_is_delete()"
    )
    assert isinstance(result, FeedResult)
    table.sql("UPDATE t SET n = 2 WHERE k = 1")  # filtered out: not a deletion
    table.sql("DELETE FROM t WHERE k = 2")
    deleted = result.poll(DEADLINE)
    result.close()
    assert deleted == (
        "t",
        "[2]",
        json.dumps({"cdc_is_delete": True, "event_op": "delete", "k": 2}),
    )


def test_transaction_timestamp_is_the_changes_mvcc_timestamp_and_now_is_refused(
    table: DB,
) -> None:
    """CockroachDB's CDC queries docs: transaction_timestamp() and statement_timestamp()
    return the event's MVCC timestamp; now() is not supported."""
    result = table.sql(
        "EXPERIMENTAL CHANGEFEED WITH initial_scan='only' AS SELECT k, "
        "transaction_timestamp() = statement_timestamp() AS same, "
        "extract(epoch FROM transaction_timestamp()) * 1000000 AS micros, "
        "crdb_internal_mvcc_timestamp AS mvcc FROM t WHERE k = 1"
    )
    [(_table, _key, value)] = list(result)
    row = json.loads(value, parse_float=decimal.Decimal)
    assert row["same"] is True
    assert row["micros"] == int(row["mvcc"]) // 1000  # the MVCC timestamp's wall time
    with pytest.raises(SQLError) as raised:
        table.sql("EXPERIMENTAL CHANGEFEED AS SELECT k, now() FROM t")
    assert raised.value.code == "0A000"
    assert "use transaction_timestamp()" in raised.value.message


def test_current_user_is_the_user_who_created_the_changefeed(table: DB) -> None:
    """CockroachDB evaluates a session function in a CDC query with the data of the
    session that created it."""
    table.sql("CREATE USER maxroach")
    table.sql("GRANT SELECT ON t TO maxroach")
    result = table.session(user="maxroach").execute(
        "EXPERIMENTAL CHANGEFEED WITH initial_scan='only' AS "
        "SELECT k, current_user AS who FROM t WHERE k = 1"
    )
    assert [value for _table, _key, value in result] == ['{"k": 1, "who": "maxroach"}']


def test_a_query_with_star_and_the_wrapped_envelope(table: DB) -> None:
    result = table.sql(
        "EXPERIMENTAL CHANGEFEED WITH envelope=wrapped, initial_scan='only' "
        "AS SELECT * FROM t WHERE v = 'b'"
    )
    assert [json.loads(v) for _t, _k, v in result] == [{"after": {"k": 2, "v": "b", "n": 20}}]


def test_a_query_job_keeps_the_bare_envelope_and_alter_keeps_it_too(
    table: DB, tmp_path: Path
) -> None:
    """A CDC query changefeed job writes the bare envelope (its default, as in
    CockroachDB) once its options are read back from the job record, and after an
    ALTER CHANGEFEED ... SET that does not name the envelope."""
    [(job_id,)] = table.sql(
        f"CREATE CHANGEFEED INTO 'file://{tmp_path}/out?partition_format=flat' "
        "WITH initial_scan='only' AS SELECT k, v FROM t WHERE k = 1"
    ).rows
    assert table.changefeeds.wait(job_id, timeout=DEADLINE)
    lines = [line for path in sorted(tmp_path.rglob("*.ndjson")) for line in path.open()]
    # the projection is the whole message: CockroachDB puts the key in a file's values
    # (key_in_value) only for a changefeed without a query
    assert lines == ['{"k": 1, "v": "a"}\n']

    [(paused,)] = table.sql(
        f"CREATE CHANGEFEED INTO 'file://{tmp_path}/paused' AS SELECT k FROM t"
    ).rows
    table.sql(f"PAUSE JOB {paused}")
    table.sql(f"ALTER CHANGEFEED {paused} SET resolved = '10s'")
    record = table.changefeeds.record(paused)
    assert record is not None
    assert record.spec.options.envelope == "bare"


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("SELECT nope FROM t", "42703"),
        ("SELECT count(*) FROM t", "42803"),
        ("SELECT k FROM t WHERE event_op(1) = 'x'", "42883"),
        ("SELECT k FROM nope", "42P01"),
        ("SELECT k FROM t ORDER BY k", "0A000"),
        ("SELECT cdc_prev.nope FROM t", "42703"),
        # what CockroachDB's CDC queries docs list as not permitted, or that would have
        # been ignored: a query sees one change at a time
        ("SELECT DISTINCT k FROM t", "0A000"),
        ("SELECT k FROM t GROUP BY k", "0A000"),
        ("SELECT k, row_number() OVER () FROM t", "42P20"),
        ("SELECT k, random() FROM t", "0A000"),
        ("SELECT k FROM t WHERE gen_random_uuid() IS NOT NULL", "0A000"),
    ],
)
def test_bad_queries_are_refused_at_creation(table: DB, query: str, code: str) -> None:
    with pytest.raises(SQLError) as raised:
        table.sql(f"EXPERIMENTAL CHANGEFEED AS {query}")
    assert raised.value.code == code
