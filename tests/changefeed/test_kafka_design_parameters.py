"""The CDC design's Kafka sink parameters: ``kafka_topic_prefix`` (``topic_prefix`` under
its other name) and ``schema_topic=<topic>`` (every schema change of a watched table as a
message on that topic), against librdkafka's mock cluster read by a real consumer."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from feedkv import DB
from feedkv.changefeed.sinks.kafka import MVCC_HEADER
from feedkv.cli.main import main
from feedkv.errors import SQLError
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0
QUIET = logging.getLogger("tests.kafka_design")
FAST = "resolved = '0s', min_checkpoint_frequency = '0s'"


Found = list[tuple[Any, Any, Timestamp]]


def read(bootstrap: str, topic: str, enough: int | Callable[[Found], bool]) -> Found:
    """The non-resolved messages of ``topic`` (key, value, MVCC time), JSON decoded,
    until there are ``enough`` (a count, or a test of them), waiting up to DEADLINE."""
    done = enough if callable(enough) else lambda found: len(found) >= enough
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "t", "enable.auto.commit": False,
         "logger": QUIET}
    )  # fmt: skip
    try:

        def partitions() -> list[int]:
            found = consumer.list_topics(topic, timeout=DEADLINE).topics.get(topic)
            return [] if found is None or found.error is not None else sorted(found.partitions)

        parts = wait_until(partitions, timeout_s=DEADLINE, what=f"topic {topic}")
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        found: list[tuple[Any, Any, Timestamp]] = []
        deadline = time.monotonic() + DEADLINE
        while not done(found):
            assert time.monotonic() < deadline, f"only {found} in {topic}"
            message = consumer.poll(0.1)
            if message is None or message.key() is None:
                continue  # nothing yet, or a resolved marker
            assert message.error() is None, message.error()
            headers = dict(message.headers() or [])
            mvcc = headers[MVCC_HEADER]
            assert isinstance(mvcc, bytes)
            value = message.value()
            found.append(
                (
                    json.loads(message.key()),  # type: ignore[arg-type]
                    None if value is None else json.loads(value),
                    Timestamp.parse(mvcc.decode()),
                )
            )
        return found
    finally:
        consumer.close()


def test_kafka_topic_prefix_names_each_topic_as_topic_prefix_does(db: DB, bootstrap: str) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a')")
    db.sql(
        f"CREATE CHANGEFEED FOR t INTO 'kafka://{bootstrap}?kafka_topic_prefix=design_' WITH {FAST}"
    )
    ((key, value, _ts),) = read(bootstrap, "design_t", 1)
    assert (key, value) == ([1], {"after": {"k": 1, "v": "a"}})


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "topic_prefix=a_&kafka_topic_prefix=b_",
            "topic_prefix and kafka_topic_prefix are one parameter under two names",
        ),
        ("schema_topic=", "sink parameter schema_topic needs a topic name"),
    ],
)
def test_bad_design_parameters_are_refused(
    db: DB, bootstrap: str, query: str, message: str
) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    with pytest.raises(SQLError) as raised:
        db.sql(f"CREATE CHANGEFEED FOR t INTO 'kafka://{bootstrap}?{query}'")
    assert raised.value.code == "22023"
    assert message in raised.value.message
    assert db.sql("SHOW CHANGEFEED JOBS").rows == []


def test_schema_topic_is_kafka_only(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    with pytest.raises(SQLError) as raised:
        db.sql(f"CREATE CHANGEFEED FOR t INTO 'file://{tmp_path}?schema_topic=s'")
    assert raised.value.code == "22023"
    assert "schema_topic" in raised.value.message


def test_schema_changes_go_to_the_schema_topic_between_the_rows_around_them(
    db: DB, bootstrap: str
) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a')")
    db.sql(
        f"CREATE CHANGEFEED FOR t INTO 'kafka://{bootstrap}?topic_prefix=p_&schema_topic=schemas' "
        f"WITH {FAST}"
    )
    db.sql("INSERT INTO t VALUES (2, 'b')")
    db.sql("ALTER TABLE t ADD COLUMN n INT")
    db.sql("INSERT INTO t VALUES (3, 'c', 7)")
    db.sql("ALTER TABLE t DROP COLUMN v")
    db.sql("INSERT INTO t VALUES (4, 8)")

    rows = read(bootstrap, "p_t", lambda found: {k[0] for k, _v, _ts in found} == {1, 2, 3, 4})
    changes = read(bootstrap, "schemas", 2)

    (added, added_value, added_ts), (dropped, dropped_value, dropped_ts) = sorted(
        changes, key=lambda c: c[2]
    )
    assert added == dropped == ["t"]
    assert added_value == {
        "table": "t",
        "version": added_value["version"],
        "columns": [{"name": "k", "type": "INT8"}, {"name": "v", "type": "STRING"},
                    {"name": "n", "type": "INT8"}],
        "added_columns": ["n"],
        "dropped_columns": [],
        "created": False,
        "dropped": False,
        "updated": str(added_ts),
    }  # fmt: skip
    assert dropped_value["dropped_columns"] == ["v"]
    assert dropped_value["version"] > added_value["version"]
    by_key: dict[int, Timestamp] = {}
    for key, _value, ts in rows:  # NB: the DROP COLUMN's backfill sends rows again later
        by_key[key[0]] = min(ts, by_key.get(key[0], ts))
    assert by_key[2] < added_ts < by_key[3] < dropped_ts < by_key[4]


def test_design_parameters_from_feedkv_sql(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bootstrap: str
) -> None:
    args = ["sql", "--store", str(tmp_path / "store"), "--format", "csv"]
    assert main([*args, "-e", "CREATE TABLE t (k INT PRIMARY KEY)"]) == 0
    feed = (
        f"CREATE CHANGEFEED FOR t INTO 'kafka://{bootstrap}?topic_prefix=a_&kafka_topic_prefix=b_'"
    )
    assert main([*args, "-e", feed]) != 0
    assert "one parameter under two names" in capsys.readouterr().err


def test_a_table_dropped_from_a_database_feed_sends_its_drop_to_the_schema_topic(
    db: DB, bootstrap: str
) -> None:
    """A table leaving a ``FOR DATABASE`` changefeed (dropped) is a schema change of a
    watched table like any other: the schema topic says it was dropped, after its rows
    and before the rows of the other tables that follow."""
    db.sql("CREATE DATABASE shop")
    db.sql("CREATE TABLE shop.orders (id INT PRIMARY KEY)")
    db.sql("CREATE TABLE shop.items (id INT PRIMARY KEY)")
    db.sql("INSERT INTO shop.items VALUES (7)")
    db.sql(
        f"CREATE CHANGEFEED FOR DATABASE shop "
        f"INTO 'kafka://{bootstrap}?topic_prefix=p_&schema_topic=schemas' WITH {FAST}"
    )
    db.sql("INSERT INTO shop.items VALUES (8)")
    db.sql("DROP TABLE shop.items")
    db.sql("INSERT INTO shop.orders VALUES (1)")

    items = read(bootstrap, "p_items", lambda found: {k[0] for k, _v, _ts in found} == {7, 8})
    (order,) = read(bootstrap, "p_orders", 1)
    ((key, value, dropped_ts),) = read(bootstrap, "schemas", 1)

    assert key == ["items"]
    assert value["table"] == "items" and value["dropped"] is True
    assert value["updated"] == str(dropped_ts)
    assert max(ts for _k, _v, ts in items) < dropped_ts < order[2]
    assert db.sql("SELECT status FROM [SHOW CHANGEFEED JOBS]").rows == [("running",)]


def test_a_table_created_in_a_database_feed_is_announced_on_the_schema_topic(
    db: DB, bootstrap: str
) -> None:
    """A table joining a ``FOR DATABASE`` changefeed (created after it started) is
    announced on the schema topic: the table, its descriptor's version, its columns and
    when it was created, before any of its rows."""
    db.sql("CREATE DATABASE shop")
    db.sql("CREATE TABLE shop.orders (id INT PRIMARY KEY)")
    db.sql(
        f"CREATE CHANGEFEED FOR DATABASE shop "
        f"INTO 'kafka://{bootstrap}?topic_prefix=p_&schema_topic=schemas' WITH {FAST}"
    )
    db.sql("INSERT INTO shop.orders VALUES (1)")
    read(bootstrap, "p_orders", 1)  # the feed runs
    db.sql("CREATE TABLE shop.items (id INT PRIMARY KEY, name STRING NOT NULL)")
    db.sql("INSERT INTO shop.items VALUES (7, 'seven')")

    ((_key, item, item_ts),) = read(bootstrap, "p_items", 1)
    ((key, value, created_ts),) = read(bootstrap, "schemas", 1)

    assert item == {"after": {"id": 7, "name": "seven"}}
    assert key == ["items"]
    assert value == {
        "table": "items",
        "version": value["version"],
        "columns": [{"name": "id", "type": "INT8"}, {"name": "name", "type": "STRING"}],
        "added_columns": ["id", "name"],
        "dropped_columns": [],
        "created": True,
        "dropped": False,
        "updated": str(created_ts),
    }
    assert isinstance(value["version"], int) and value["version"] >= 1
    assert created_ts < item_ts
