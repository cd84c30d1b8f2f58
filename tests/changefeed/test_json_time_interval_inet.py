"""TIME, INTERVAL, INET, ENUM and ARRAY in a changefeed's JSON: strings in their SQL text form, as
CockroachDB's changefeeds write them (``"12:30:45.5"``, ``"1 day 02:00:00"``,
``"10.0.0.0/8"``)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from feedkv import DB
from feedkv.changefeed.encoder import json_value
from feedkv.sql.arrays import Array
from feedkv.sql.enums import EnumValue
from feedkv.sql.inet import Inet
from feedkv.sql.interval import Interval
from feedkv.sql.types import ColumnType, Kind
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp


def test_json_values_are_the_sql_text() -> None:
    assert json_value(Kind.TIME, datetime.time(12, 30, 45, 500000)) == '"12:30:45.5"'
    assert json_value(Kind.TIME, datetime.time(8)) == '"08:00:00"'
    assert json_value(Kind.INTERVAL, Interval(14, 3, 3_600_000_000)) == (
        '"1 year 2 mons 3 days 01:00:00"'
    )
    assert json_value(Kind.INTERVAL, Interval()) == '"00:00:00"'
    assert json_value(Kind.INET, Inet.parse("10.0.0.0/8")) == '"10.0.0.0/8"'
    assert json_value(Kind.INET, Inet.parse("::1")) == '"::1"'
    assert json_value(Kind.ENUM, EnumValue("happy", ("sad", "happy"), "mood")) == '"happy"'
    ints = Array((1, None, 3), ColumnType(Kind.INT))
    # a JSON array written as CockroachDB writes JSON (its jsonArray.Format: ", ")
    assert json_value(Kind.ARRAY, ints) == "[1, null, 3]"
    times = Array((datetime.time(8),), ColumnType(Kind.TIME))
    assert json_value(Kind.ARRAY, times) == '["08:00:00"]'


def test_a_changefeed_writes_them_as_strings(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TYPE mood AS ENUM ('sad', 'happy')")
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, at TIME, span INTERVAL, addr INET, m mood)")
    out = tmp_path / "out"
    db.sql(
        f"CREATE CHANGEFEED FOR t INTO 'file://{out}' WITH updated, "
        "resolved='0s', min_checkpoint_frequency='0s'"
    )
    db.sql("INSERT INTO t VALUES (1, '12:30:45.5', '1 day 2 hours', '10.0.0.0/8', 'happy')")
    last = db.now()

    def resolved_past() -> bool:
        marks = sorted(out.rglob("*.RESOLVED"))
        return (
            bool(marks) and Timestamp.parse(json.loads(marks[-1].read_text())["resolved"]) >= last
        )

    wait_until(resolved_past, timeout_s=30, what="a resolved marker past the insert")
    rows = [
        json.loads(line)
        for path in sorted(out.rglob("*.ndjson"))
        for line in path.read_text().splitlines()
    ]
    assert [r["after"] for r in rows] == [
        {"k": 1, "at": "12:30:45.5", "span": "1 day 02:00:00", "addr": "10.0.0.0/8", "m": "happy"}
    ]
