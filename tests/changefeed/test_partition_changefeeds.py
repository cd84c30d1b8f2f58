"""``CREATE CHANGEFEED FOR TABLE t PARTITION p``: the rows of one partition of a table
(``PARTITION BY LIST`` / ``RANGE``), and nothing of the others; the feed watches only
that partition's spans. Through ``db.sql`` and ``feedkv sql``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from feedkv import DB
from feedkv.changefeed.sinkless import FeedResult
from feedkv.cli.main import main
from feedkv.errors import SQLError
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0
USERS = (
    "CREATE TABLE users (region STRING, id INT, name STRING, PRIMARY KEY (region, id)) "
    "PARTITION BY LIST (region) (PARTITION north_america VALUES IN ('us', 'ca'), "
    "PARTITION europe VALUES IN ('de', 'fr'), PARTITION other VALUES IN (DEFAULT))"
)


def now(db: DB) -> Timestamp:
    return Timestamp.parse(str(db.sql("SELECT cluster_logical_timestamp()").rows[0][0]))


def keys_until_resolved(result: FeedResult, ts: Timestamp) -> list[Any]:
    keys: list[Any] = []
    while True:
        row = result.poll(DEADLINE)
        assert row is not None, f"the feed ended after {keys}"
        if row[0] is not None:
            keys.append(json.loads(row[1]))
        elif Timestamp.parse(json.loads(row[2])["resolved"]) >= ts:
            return keys


@pytest.fixture
def users(db: DB) -> DB:
    db.sql(USERS)
    db.sql(
        "INSERT INTO users VALUES ('us', 1, 'ann'), ('de', 2, 'bo'), ('jp', 3, 'cy'), "
        "('ca', 4, 'di'), ('fr', 5, 'ed'), ('aa', 6, 'fy'), ('zz', 7, 'gu')"
    )
    return db


@pytest.mark.parametrize(
    ("partition", "scanned"),
    [
        ("north_america", [["ca", 4], ["us", 1]]),
        ("europe", [["de", 2], ["fr", 5]]),
        ("other", [["aa", 6], ["jp", 3], ["zz", 7]]),
    ],
)
def test_a_partition_target_emits_only_that_partitions_rows(
    users: DB, partition: str, scanned: list[Any]
) -> None:
    db = users
    result = db.sql(
        f"EXPERIMENTAL CHANGEFEED FOR TABLE users PARTITION {partition} "
        "WITH resolved = '0s', min_checkpoint_frequency = '0s'"
    )
    assert isinstance(result, FeedResult)
    try:
        assert sorted(keys_until_resolved(result, now(db))) == scanned
        db.sql("UPDATE users SET name = name || '!'")
        assert sorted(keys_until_resolved(result, now(db))) == scanned
    finally:
        result.close()


def test_a_partition_job_watches_that_partitions_spans(users: DB, tmp_path: Path) -> None:
    db = users
    (job_id,) = db.sql(
        f"CREATE CHANGEFEED FOR TABLE users PARTITION north_america INTO 'file://{tmp_path}'"
    ).rows[0]
    record = db.changefeeds.record(job_id)
    assert record is not None
    assert len(record.spec.targets) == 2  # a span per listed value
    assert all(target.bounds is not None for target in record.spec.targets)


@pytest.mark.parametrize(
    ("target", "code", "message"),
    [
        ("users PARTITION asia", "42704", "partition 'asia' does not exist in table 'users'"),
        ("users PARTITION", "42601", "expected a partition name after PARTITION"),
        (
            "users PARTITION europe VALUES FROM ('a') TO ('b')",
            "42601",
            "a target takes PARTITION or VALUES FROM, not both",
        ),
        (
            "users PARTITION europe, users PARTITION europe",
            "22023",
            "is a target more than once",
        ),
    ],
)
def test_bad_partition_targets_are_refused(users: DB, target: str, code: str, message: str) -> None:
    with pytest.raises(SQLError) as raised:
        users.sql(f"CREATE CHANGEFEED FOR TABLE {target} INTO 'null://'")
    assert raised.value.code == code, raised.value.message
    assert message in raised.value.message
    assert users.sql("SHOW CHANGEFEED JOBS").rows == []


def test_partitions_from_feedkv_sql(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["sql", "--store", str(tmp_path / "store"), "--format", "csv"]
    statements = [USERS, "INSERT INTO users VALUES ('us', 1, 'ann'), ('de', 2, 'bo')"]
    assert main([*args, *(a for s in statements for a in ("-e", s))]) == 0
    capsys.readouterr()
    assert main([*args, "-e", "SHOW PARTITIONS FROM TABLE users"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows == [
        ["database_name", "table_name", "partition_name", "column_names", "partition_value"],
        ["defaultdb", "users", "north_america", "region", "VALUES IN ('us', 'ca')"],
        ["defaultdb", "users", "europe", "region", "VALUES IN ('de', 'fr')"],
        ["defaultdb", "users", "other", "region", "VALUES IN (DEFAULT)"],
    ]
    feed = "EXPERIMENTAL CHANGEFEED FOR TABLE users PARTITION europe WITH initial_scan = 'only'"
    assert main([*args, "-e", feed]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[1:] == [
        ["users", '["de", 2]', '{"after": {"id": 2, "name": "bo", "region": "de"}}']
    ]


def test_show_create_changefeed_writes_partition_targets_as_partitions(
    users: DB, tmp_path: Path
) -> None:
    """A partition's spans are not all values (a LIST value's end, MINVALUE and
    MAXVALUE, DEFAULT's gaps): SHOW CREATE CHANGEFEED names the partition, and the
    statement it shows makes a changefeed watching the same spans."""
    db = users
    db.sql(
        "CREATE TABLE events (k INT PRIMARY KEY, v STRING) PARTITION BY RANGE (k) "
        "(PARTITION old VALUES FROM (MINVALUE) TO (100), "
        "PARTITION recent VALUES FROM (100) TO (MAXVALUE))"
    )
    (first_id,) = db.sql(
        "CREATE CHANGEFEED feed_p FOR TABLE users PARTITION north_america, TABLE events "
        "PARTITION recent, TABLE users PARTITION other, TABLE events VALUES FROM (5) TO (7) "
        f"INTO 'file://{tmp_path / 'a'}'"
    ).rows[0]
    ((name, shown),) = db.sql("SHOW CREATE CHANGEFEED feed_p").rows
    assert name == "feed_p"
    assert shown == (
        "CREATE CHANGEFEED feed_p FOR TABLE defaultdb.public.users PARTITION north_america, "
        "TABLE defaultdb.public.events PARTITION recent, TABLE defaultdb.public.users "
        "PARTITION other, TABLE defaultdb.public.events VALUES FROM (5) TO (7) "
        f"INTO 'file://{tmp_path / 'a'}'"
    )
    first = db.changefeeds.record(first_id)
    db.sql("DROP CHANGEFEED feed_p")
    (again_id,) = db.sql(shown).rows[0]
    again = db.changefeeds.record(again_id)
    assert first is not None and again is not None
    assert again.spec.targets == first.spec.targets
