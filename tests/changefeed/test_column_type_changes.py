"""ALTER COLUMN ... TYPE as changefeeds see it: a rewrite of the values is a schema change
that rewrites every row at its timestamp (as an ADD COLUMN's backfill), a trivial one
rewrites nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from feedkv import DB
from feedkv.changefeed.changefeed import ChangefeedError
from feedkv.changefeed.sinkless import FeedResult

FAST = "resolved='0s', min_checkpoint_frequency='0s'"


@pytest.fixture
def table(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING(5), n INT)")
    db.sql("INSERT INTO t VALUES (1, 'a', 10), (2, 'b', NULL)")
    return db


def rows_of(result: FeedResult, n: int) -> list[tuple[Any, dict[str, Any]]]:
    """The next ``n`` row messages (key, value), resolved markers left out."""
    rows = []
    while len(rows) < n:
        row = result.poll(30.0)
        assert row is not None, f"the changefeed ended after {rows}"
        if row[0] is not None:
            rows.append((json.loads(row[1]), json.loads(row[2])))
    return rows


def test_a_rewriting_type_change_re_emits_every_row_in_its_new_type(table: DB) -> None:
    db = table
    result = db.sql(f"EXPERIMENTAL CHANGEFEED FOR t WITH updated, {FAST}")
    assert isinstance(result, FeedResult)
    rows_of(result, 2)
    db.sql("ALTER TABLE t ALTER COLUMN n TYPE STRING")
    db.sql("INSERT INTO t VALUES (3, 'c', 'x')")
    rows = rows_of(result, 3)
    result.close()
    assert [v["after"] for _k, v in rows] == [
        {"k": 1, "v": "a", "n": "10"},
        {"k": 2, "v": "b", "n": None},
        {"k": 3, "v": "c", "n": "x"},
    ]
    assert rows[0][1]["updated"] == rows[1][1]["updated"]  # at the change's timestamp


def test_a_trivial_type_change_rewrites_no_row(table: DB) -> None:
    db = table
    result = db.sql(f"EXPERIMENTAL CHANGEFEED FOR t WITH {FAST}")
    assert isinstance(result, FeedResult)
    rows_of(result, 2)
    db.sql("ALTER TABLE t ALTER COLUMN v TYPE STRING")
    db.sql("INSERT INTO t VALUES (3, 'longer than five', 1)")
    rows = rows_of(result, 1)
    result.close()
    assert rows == [([3], {"after": {"k": 3, "v": "longer than five", "n": 1}})]


def test_the_stop_policy_stops_at_a_rewriting_type_change(table: DB) -> None:
    db = table
    result = db.sql(f"EXPERIMENTAL CHANGEFEED FOR t WITH schema_change_policy='stop', {FAST}")
    assert isinstance(result, FeedResult)
    rows_of(result, 2)
    db.sql("ALTER TABLE t ALTER COLUMN n TYPE DECIMAL USING n * 1.5")
    with pytest.raises(ChangefeedError, match=r"changed the type of column\(s\) n"):
        while result.poll(30.0) is not None:
            pass
