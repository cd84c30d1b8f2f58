"""IMPORT INTO and changefeeds, as CockroachDB documents them: an import fails the
changefeeds watching its table, and one created after it scans the imported rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from feedkv import DB
from feedkv.changefeed.changefeed import ChangefeedError
from feedkv.changefeed.sinkless import FeedResult
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0
FAST = "resolved='0s', min_checkpoint_frequency='0s'"


def feed(db: DB, statement: str) -> FeedResult:
    result = db.sql(statement)
    assert isinstance(result, FeedResult)
    return result


def keys(rows: list[tuple[Any, Any, Any]]) -> list[int]:
    return [json.loads(k)[0] for t, k, _v in rows if t is not None]


@pytest.fixture
def table(db: DB, tmp_path: Path) -> tuple[DB, str]:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    csv = tmp_path / "rows.csv"
    csv.write_text("".join(f"{k},imported\n" for k in range(100, 1100)))
    return db, f"file://{csv}"


def test_an_import_ends_the_changefeeds_on_its_table_before_its_rows(
    table: tuple[DB, str],
) -> None:
    db, uri = table
    result = feed(db, f"EXPERIMENTAL CHANGEFEED FOR t WITH {FAST}")
    rows: list[tuple[Any, Any, Any]] = []
    while len(keys(rows)) < 2:
        row = result.poll(DEADLINE)
        assert row is not None, f"the changefeed ended early after {rows}"
        rows.append(row)
    assert db.sql(f"IMPORT INTO t CSV DATA ('{uri}')").tag == "IMPORT 1000"
    with pytest.raises(ChangefeedError, match="taken offline by IMPORT INTO") as raised:
        while (row := result.poll(DEADLINE)) is not None:
            rows.append(row)
    assert keys(rows) == [1, 2]  # no imported row was emitted
    resolved = [Timestamp.parse(json.loads(v)["resolved"]) for t, _k, v in rows if t is None]
    offline_at = Timestamp.parse(str(raised.value).split(" at ")[1].split(";")[0])
    assert resolved and max(resolved) < offline_at


def test_a_changefeed_created_after_an_import_scans_the_imported_rows(
    table: tuple[DB, str],
) -> None:
    db, uri = table
    db.sql(f"IMPORT INTO t CSV DATA ('{uri}')")
    result = feed(db, f"EXPERIMENTAL CHANGEFEED FOR t WITH {FAST}")
    rows: list[tuple[Any, Any, Any]] = []
    while len(keys(rows)) < 1002:
        row = result.poll(DEADLINE)
        assert row is not None, f"the changefeed ended early after {len(rows)} rows"
        rows.append(row)
    assert sorted(keys(rows)) == [1, 2, *range(100, 1100)]
    db.sql("INSERT INTO t VALUES (3, 'c')")  # and it follows the table on
    while 3 not in keys(rows):
        row = result.poll(DEADLINE)
        assert row is not None
        rows.append(row)
    result.close()


def test_a_copy_is_ordinary_writes_that_a_running_changefeed_emits(db: DB) -> None:
    """Unlike IMPORT, COPY FROM STDIN (written in bulk, one Ingest command) leaves the
    table online, and a changefeed watching it emits every copied row."""
    db.sql("CREATE TABLE c (k INT PRIMARY KEY, v STRING NOT NULL)")
    db.sql("INSERT INTO c VALUES (1, 'a')")
    result = feed(db, f"EXPERIMENTAL CHANGEFEED FOR c WITH {FAST}")
    rows: list[tuple[Any, Any, Any]] = []
    while 1 not in keys(rows):
        row = result.poll(DEADLINE)
        assert row is not None, f"the changefeed ended early after {rows}"
        rows.append(row)
    url = db.serve_sql()
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        with cur.copy("COPY c FROM STDIN") as copy:
            copy.write("".join(f"{k}\tcopied\n" for k in range(100, 1100)))
        assert cur.statusmessage == "COPY 1000"
    while len(keys(rows)) < 1001:
        row = result.poll(DEADLINE)
        assert row is not None, f"the changefeed ended after {len(keys(rows))} rows"
        rows.append(row)
    assert sorted(keys(rows)) == [1, *range(100, 1100)]
    result.close()
