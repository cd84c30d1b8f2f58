"""AS OF SYSTEM TIME as CockroachDB defines its edges: ``now()`` in such a query is the
time read at, an interval (a string or an INTERVAL, negated or not) is that long before
now; an interval under a microsecond (which would read now), one after now and the zero
timestamp are refused."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import SQLError
from feedkv.util.hlc import LateClock


def test_now_is_the_time_read_at(db: DB) -> None:
    [(now,)] = db.sql("SELECT * FROM (SELECT now()) AS OF SYSTEM TIME '2018-01-01'").rows
    assert now == datetime.datetime(2018, 1, 1, tzinfo=datetime.UTC)


def test_now_follows_a_relative_time(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    db.sql("INSERT INTO t VALUES (1)")
    [(was,)] = db.sql("SELECT now() FROM t AS OF SYSTEM TIME '-1us'").rows
    [(now,)] = db.sql("SELECT now()").rows
    assert was < now


@pytest.mark.parametrize(
    ("when", "message"),
    [
        ("'-0.1us'", "interval value '-0.1us' too small"),
        ("'-0us'", "too small, absolute value must be >= 1µs"),
        ("'0'", "zero timestamp is invalid"),
        ("'0.1us'", "interval value '0.1us' too small"),
        ("'10s'", "cannot specify timestamp in the future"),
        ("INTERVAL '10s'", "cannot specify timestamp in the future"),
    ],
)
def test_times_that_are_no_time_before_now_are_refused(db: DB, when: str, message: str) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    with pytest.raises(SQLError, match=message) as raised:
        db.sql(f"SELECT * FROM t AS OF SYSTEM TIME {when}")
    assert raised.value.code == "22007"


@pytest.mark.parametrize(
    "when", ["INTERVAL '-1us'", "-('1000' || 'us')::INTERVAL", "-INTERVAL '1ms'", "'-1ms'"]
)
def test_an_interval_value_reads_that_long_before_now(db: DB, when: str) -> None:
    [(was,)] = db.sql(f"SELECT * FROM (SELECT now()) AS OF SYSTEM TIME {when}").rows
    [(now,)] = db.sql("SELECT now()").rows
    assert was < now


def test_follower_read_timestamp_is_a_time_old_enough_to_read_at(tmp_path: Path) -> None:
    # CockroachDB's: 4.8 s before the statement's time, and AS OF SYSTEM TIME takes it
    clock = LateClock(60 * 10**9)  # the table is a minute old when the clock catches up
    with feedkv.connect(tmp_path / "store", clock=clock, changefeed_runner="thread") as db:
        db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
        db.sql("INSERT INTO t VALUES (1)")
        clock.catch_up()
        db.sql("INSERT INTO t VALUES (2)")
        lag = db.sql("SELECT (now() - follower_read_timestamp())::STRING").rows
        assert lag == [("00:00:04.8",)]
        assert db.sql("SELECT k FROM t AS OF SYSTEM TIME follower_read_timestamp()").rows == [(1,)]
