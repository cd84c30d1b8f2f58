"""``CREATE CHANGEFEED FOR DATABASE db``: every table of a database, tables created
after the changefeed started joining at their creation, dropped ones leaving without
ending it; a topic per table. Through ``db.sql`` (sinkless and as a job) and ``feedkv
sql``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from feedkv import DB
from feedkv.changefeed.jobs import protected_spans
from feedkv.changefeed.rows import Target
from feedkv.changefeed.sinkless import FeedResult
from feedkv.cli.main import main
from feedkv.errors import SQLError
from feedkv.sql import catalog
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0
FAST = "resolved = '0s', min_checkpoint_frequency = '0s'"


def now(db: DB) -> Timestamp:
    return Timestamp.parse(str(db.sql("SELECT cluster_logical_timestamp()").rows[0][0]))


def until_resolved(result: FeedResult, ts: Timestamp) -> list[tuple[str, Any, Any]]:
    """The row messages (topic, key, value) of ``result`` until a resolved marker at or
    past ``ts``: every row at or below it has arrived."""
    found: list[tuple[str, Any, Any]] = []
    while True:
        row = result.poll(DEADLINE)
        assert row is not None, f"the feed ended after {found}"
        topic, key, value = row
        if topic is not None:
            found.append((topic, json.loads(key), json.loads(value)["after"]))
        elif Timestamp.parse(json.loads(value)["resolved"]) >= ts:
            return found


@pytest.fixture
def shop(db: DB) -> DB:
    db.sql("CREATE DATABASE shop")
    db.sql("CREATE TABLE shop.a (k INT PRIMARY KEY, v STRING)")
    db.sql("CREATE TABLE shop.b (k INT PRIMARY KEY, v STRING)")
    db.sql("CREATE TABLE c (k INT PRIMARY KEY, v STRING)")  # in defaultdb
    db.sql("INSERT INTO shop.a VALUES (1, 'a1')")
    db.sql("INSERT INTO shop.b VALUES (1, 'b1')")
    db.sql("INSERT INTO c VALUES (1, 'c1')")
    return db


def test_every_table_of_the_database_new_ones_join_and_dropped_ones_leave(shop: DB) -> None:
    db = shop
    result = db.sql(f"EXPERIMENTAL CHANGEFEED FOR DATABASE shop WITH {FAST}")
    assert isinstance(result, FeedResult)
    try:
        scanned = until_resolved(result, now(db))
        assert sorted(scanned) == [("a", [1], {"k": 1, "v": "a1"}), ("b", [1], {"k": 1, "v": "b1"})]

        db.sql("CREATE TABLE shop.n (id INT PRIMARY KEY, note STRING)")
        db.sql("INSERT INTO shop.n VALUES (7, 'new')")
        db.sql("INSERT INTO c VALUES (2, 'c2')")  # another database: not watched
        db.sql("INSERT INTO shop.b VALUES (2, 'b2')")
        db.sql("DROP TABLE shop.b")
        db.sql("INSERT INTO shop.a VALUES (2, 'a2')")  # the feed goes on after the drop
        db.sql("CREATE TABLE shop.m (k INT PRIMARY KEY)")
        db.sql("INSERT INTO shop.m VALUES (3)")
        changes = until_resolved(result, now(db))
    finally:
        result.close()
    # NB: at-least-once: a restart when the tables change may send a row twice
    assert sorted(set(map(json.dumps, changes))) == sorted(
        json.dumps(change)
        for change in [
            ["n", [7], {"id": 7, "note": "new"}],
            ["b", [2], {"k": 2, "v": "b2"}],
            ["a", [2], {"k": 2, "v": "a2"}],
            ["m", [3], {"k": 3}],
        ]
    )


def test_a_database_job_follows_tables_created_while_it_was_paused(
    shop: DB, tmp_path: Path
) -> None:
    db = shop
    out = tmp_path / "out"
    db.sql(f"CREATE CHANGEFEED whole FOR DATABASE shop INTO 'file://{out}' WITH {FAST}")
    wait_until(lambda: len(messages(out)) >= 2, timeout_s=DEADLINE, what="the scan")
    db.sql("PAUSE CHANGEFEED whole")
    db.sql("CREATE TABLE shop.later (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO shop.later VALUES (5, 'while paused')")
    db.sql("RESUME CHANGEFEED whole")
    db.sql("INSERT INTO shop.later VALUES (6, 'after')")

    expected = {(1, "a1"), (1, "b1"), (5, "while paused"), (6, "after")}
    wait_until(lambda: expected <= afters(out), timeout_s=DEADLINE, what=f"{expected}")
    assert afters(out) == expected  # nothing of defaultdb.c
    by_topic: dict[str, set[tuple[Any, ...]]] = {}
    for path in out.rglob("*.ndjson"):  # <ts>-<session>-<file id>-<topic>-<schema id>
        for line in path.read_text().splitlines():
            after = json.loads(line)["after"]
            by_topic.setdefault(path.name.split("-")[-2], set()).add((after["k"], after["v"]))
    assert by_topic == {
        "a": {(1, "a1")},
        "b": {(1, "b1")},
        "later": {(5, "while paused"), (6, "after")},
    }  # a topic per table
    ((_name, statement),) = db.sql("SHOW CREATE CHANGEFEED whole").rows
    assert statement == (
        f"CREATE CHANGEFEED whole FOR DATABASE shop INTO 'file://{out}' "
        "WITH OPTIONS (min_checkpoint_frequency = '0s', resolved = '0s')"
    )
    db.sql("PAUSE CHANGEFEED whole")
    db.sql("DROP TABLE shop.b")
    db.sql("ALTER CHANGEFEED whole SET resolved = '1s'")  # its tables are those of now
    record = db.changefeeds.record(show_job_id(db, "whole"))
    assert record is not None
    assert sorted(record.spec.topics.values()) == ["a", "later"]
    with pytest.raises(SQLError) as raised:
        db.sql("ALTER CHANGEFEED whole ADD c")
    assert raised.value.code == "22023"
    assert "watches every table of its database" in raised.value.message


def show_job_id(db: DB, name: str) -> int:
    result = db.sql(f"SHOW CHANGEFEED JOB {name}")
    job_id = result.rows[0][result.columns.index("job_id")]
    assert isinstance(job_id, int)
    return job_id


def messages(out: Path) -> list[dict[str, Any]]:
    if not out.exists():
        return []
    found: list[dict[str, Any]] = []
    for path in sorted(out.rglob("*.ndjson"), key=lambda p: p.name):
        if ".feedkv" not in path.relative_to(out).parts:
            found.extend(json.loads(line) for line in path.read_text().splitlines())
    return found


def afters(out: Path) -> set[tuple[Any, ...]]:
    return {(m["after"]["k"], m["after"]["v"]) for m in messages(out) if m["after"]}


@pytest.mark.parametrize(
    ("statement", "code", "message"),
    [
        ("CREATE CHANGEFEED FOR DATABASE nowhere INTO 'null://'", "3D000", "nowhere"),
        ("CREATE CHANGEFEED FOR DATABASE INTO 'null://'", "42601", "expected a database name"),
        (
            "CREATE CHANGEFEED FOR DATABASE shop INTO 'null://' AS SELECT k FROM c",
            "42601",
            "either FOR targets or AS SELECT",
        ),
    ],
)
def test_bad_database_changefeeds_are_refused(
    shop: DB, statement: str, code: str, message: str
) -> None:
    with pytest.raises(SQLError) as raised:
        shop.sql(statement)
    assert raised.value.code == code, raised.value.message
    assert message in raised.value.message
    assert shop.sql("SHOW CHANGEFEED JOBS").rows == []


def test_a_database_changefeed_from_feedkv_sql(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["sql", "--store", str(tmp_path / "store"), "--format", "csv"]
    statements = [
        "CREATE DATABASE shop",
        "CREATE TABLE shop.a (k INT PRIMARY KEY)",
        "CREATE TABLE shop.b (k INT PRIMARY KEY)",
        "CREATE TABLE c (k INT PRIMARY KEY)",
        "INSERT INTO shop.a VALUES (1)",
        "INSERT INTO shop.b VALUES (2)",
        "INSERT INTO c VALUES (3)",
    ]
    assert main([*args, *(a for s in statements for a in ("-e", s))]) == 0
    capsys.readouterr()
    feed = "EXPERIMENTAL CHANGEFEED FOR DATABASE shop WITH initial_scan = 'only'"
    assert main([*args, "-e", feed]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["table", "key", "value"]
    assert sorted(rows[1:]) == [
        ["a", "[1]", '{"after": {"k": 1}}'],
        ["b", "[2]", '{"after": {"k": 2}}'],
    ]


def table_id(db: DB, database: str, table: str) -> int:
    snapshot = catalog.Snapshot(db, db.now())
    return catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, database), table).id


def test_a_paused_database_job_holds_back_gc_of_tables_created_after_it(
    shop: DB, tmp_path: Path
) -> None:
    db = shop
    db.sql(f"CREATE CHANGEFEED whole FOR DATABASE shop INTO 'file://{tmp_path / 'out'}'")
    db.sql("PAUSE CHANGEFEED whole")
    db.sql("CREATE TABLE shop.later (k INT PRIMARY KEY)")

    spans = [span for span, _since in protected_spans(catalog.Snapshot(db, db.now()))]

    assert Target(table_id(db, "shop", "later")).span in spans
    assert Target(table_id(db, "shop", "a")).span in spans
    assert Target(table_id(db, "defaultdb", "c")).span not in spans
