"""Per-table failure isolation, as the CDC design states it: one table of a changefeed
whose rows cannot be encoded, or whose topic refuses them, is retried and reported on its
own while the other tables go on. A real node, librdkafka's mock cluster read by a real
consumer, and a real schema registry
(:class:`~feedkv.testing.schema_registry.SchemaRegistryServer`) that refuses, with HTTP
409, a schema change of one table that another producer's schema makes incompatible.
(The node, ``db``, is asked for after the Kafka cluster and the registry, so it closes
before them.)"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import fastavro
import httpx
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from feedkv import DB
from feedkv.kv.store import StoreConfig
from feedkv.testing.schema_registry import SchemaRegistryServer
from feedkv.testing.waiting import wait_until

DEADLINE = 30.0
QUIET = logging.getLogger("tests.table_isolation")
JSON = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


@pytest.fixture
def registry() -> Iterator[SchemaRegistryServer]:
    with SchemaRegistryServer() as server:
        yield server


class AvroTopic:
    """Reads the rows of an Avro ``topic`` from the beginning, decoded (resolved markers
    are left out): each row's key and ``after``."""

    def __init__(self, bootstrap: str, registry: SchemaRegistryServer, topic: str) -> None:
        self.registry = registry
        self.rows: list[tuple[int, dict[str, Any] | None]] = []
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"t-{topic}",
             "enable.auto.commit": False, "logger": QUIET}
        )  # fmt: skip

        def partitions() -> list[int]:
            found = self.consumer.list_topics(topic, timeout=DEADLINE).topics.get(topic)
            return [] if found is None or found.error is not None else sorted(found.partitions)

        parts = wait_until(partitions, timeout_s=DEADLINE, what=f"topic {topic}")
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])

    def _decode(self, data: bytes) -> Any:
        schema = json.loads(self.registry.schema(int.from_bytes(data[1:5])))
        return fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(schema), None)

    def until(self, k: int, after: dict[str, Any] | None) -> bool:
        """Read until the row ``k`` comes as ``after``; fails after DEADLINE."""
        deadline = time.monotonic() + DEADLINE
        while (k, after) not in self.rows:
            assert time.monotonic() < deadline, f"no {(k, after)} after {DEADLINE}s: {self.rows}"
            message = self.consumer.poll(0.1)
            if message is None or message.key() is None:
                continue  # nothing yet, or a resolved marker
            assert message.error() is None, message.error()
            key = self._decode(message.key())  # type: ignore[arg-type]
            value = self._decode(message.value())  # type: ignore[arg-type]
            self.rows.append((key["k"], value["after"]))
        return True

    def close(self) -> None:
        self.consumer.close()


def plant_incompatible_schema(registry: SchemaRegistryServer, subject: str) -> None:
    """Another producer's schema as the latest of ``subject``: a record whose ``k`` is a
    string, which no later schema with a numeric ``k`` can follow (BACKWARD)."""
    other = {"type": "record", "name": "other", "fields": [{"name": "k", "type": "string"}]}
    with httpx.Client(base_url=registry.url, headers=JSON) as client:
        client.put(f"/config/{subject}", json={"compatibility": "NONE"}).raise_for_status()
        client.post(
            f"/subjects/{subject}/versions", json={"schema": json.dumps(other)}
        ).raise_for_status()
        client.put(f"/config/{subject}", json={"compatibility": "BACKWARD"}).raise_for_status()


def set_compatibility(registry: SchemaRegistryServer, subject: str, level: str) -> None:
    with httpx.Client(base_url=registry.url, headers=JSON) as client:
        client.put(f"/config/{subject}", json={"compatibility": level}).raise_for_status()


def running_status(db: DB, job_id: int) -> str:
    rows = db.sql(f"SELECT running_status FROM [SHOW CHANGEFEED JOB {job_id}]").rows
    return str(rows[0][0])


@pytest.mark.parametrize("backfill", [False, True], ids=["changes", "with-a-backfill"])
def test_a_table_whose_schema_is_refused_is_set_aside_and_recovers_while_the_other_goes_on(
    bootstrap: str, registry: SchemaRegistryServer, db: DB, backfill: bool
) -> None:
    """``backfill``: under ``schema_change_events='column_changes'`` the column added is
    due a scan of the table as of it; the scan, refused too, runs when the table
    recovers, in its place before the rows after the change."""
    events = ", schema_change_events='column_changes'" if backfill else ""
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v STRING)")
    db.sql("CREATE TABLE b (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO a VALUES (1, 'a1')")
    db.sql("INSERT INTO b VALUES (1, 'b1')")
    job_id = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a, TABLE b INTO 'kafka://{bootstrap}' WITH format=avro, "
        f"confluent_schema_registry='{registry.url}', resolved='0s', "
        f"min_checkpoint_frequency='0s'{events}"
    ).rows[0][0]
    topic_a, topic_b = AvroTopic(bootstrap, registry, "a"), AvroTopic(bootstrap, registry, "b")
    try:
        assert topic_a.until(1, {"k": 1, "v": "a1"})
        assert topic_b.until(1, {"k": 1, "v": "b1"})

        # a's next schema cannot follow the subject's latest: every row of a after the
        # change is refused by the registry
        plant_incompatible_schema(registry, "a-value")
        db.sql("ALTER TABLE a ADD COLUMN w INT")
        db.sql("INSERT INTO a VALUES (2, 'a2', 20)")
        refused_at = db.now()
        db.sql("INSERT INTO b VALUES (2, 'b2')")

        # b goes on, and the job says which table fails and why
        assert topic_b.until(2, {"k": 2, "v": "b2"})
        status = wait_until(
            lambda: (found := running_status(db, job_id)) and "table a failing" in found and found,
            timeout_s=DEADLINE,
            what="SHOW CHANGEFEED JOB to name the failing table",
        )
        assert "409" in status and "the other tables go on" in status, status
        assert "table b" not in status
        record = db.changefeeds.record(job_id)
        assert record is not None and record.status == "running"
        # the high-water mark holds for a's sake: a restart would owe nothing
        assert record.high_water is not None and record.high_water < refused_at
        db.sql("INSERT INTO b VALUES (3, 'b3')")
        assert topic_b.until(3, {"k": 3, "v": "b3"})

        # the registry takes a's schema again: a catches up and the status clears
        set_compatibility(registry, "a-value", "NONE")
        assert topic_a.until(2, {"k": 2, "v": "a2", "w": 20})
        if backfill:  # the deferred scan as of the change: the row then, with w
            assert topic_a.until(1, {"k": 1, "v": "a1", "w": None})
            # NB: one key, one partition: in the order sent
            first = topic_a.rows.index((1, {"k": 1, "v": "a1"}))
            assert first < topic_a.rows.index((1, {"k": 1, "v": "a1", "w": None}))
        db.sql("INSERT INTO a VALUES (3, 'a3', 30)")
        assert topic_a.until(3, {"k": 3, "v": "a3", "w": 30})
        wait_until(
            lambda: "failing" not in running_status(db, job_id),
            timeout_s=DEADLINE,
            what="the job's status to clear",
        )

        def past_refusal() -> bool:
            found = db.changefeeds.record(job_id)
            return (
                found is not None
                and found.high_water is not None
                and (found.high_water > refused_at)
            )

        wait_until(past_refusal, timeout_s=DEADLINE, what="the high-water mark past a's rows")
    finally:
        topic_a.close()
        topic_b.close()


def read_json(bootstrap: str, topic: str, want: set[int]) -> set[int]:
    """The keys of ``topic``'s JSON rows, read until every key of ``want`` came."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"j-{topic}",
         "enable.auto.commit": False, "logger": QUIET}
    )  # fmt: skip
    try:

        def partitions() -> list[int]:
            found = consumer.list_topics(topic, timeout=DEADLINE).topics.get(topic)
            return [] if found is None or found.error is not None else sorted(found.partitions)

        parts = wait_until(partitions, timeout_s=DEADLINE, what=f"topic {topic}")
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        seen: set[int] = set()
        deadline = time.monotonic() + DEADLINE
        while not want <= seen:
            assert time.monotonic() < deadline, f"only {sorted(seen)} in {topic}"
            message = consumer.poll(0.1)
            if message is None or message.key() is None:
                continue
            assert message.error() is None, message.error()
            seen.add(json.loads(message.key())[0])  # type: ignore[arg-type]
        return seen
    finally:
        consumer.close()


def test_a_table_whose_kafka_topic_refuses_its_rows_is_reported_while_the_other_goes_on(
    bootstrap: str, db: DB
) -> None:
    """A row too large for Kafka (librdkafka's message.max.bytes, 1 MB): its table's
    topic refuses it, so that table is set aside and retried while the other goes on."""
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v STRING)")
    db.sql("CREATE TABLE b (k INT PRIMARY KEY, v STRING)")
    job_id = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a, TABLE b INTO 'kafka://{bootstrap}' WITH "
        "resolved='0s', min_checkpoint_frequency='0s'"
    ).rows[0][0]
    db.sql("INSERT INTO a VALUES (1, 'small')")
    db.sql("INSERT INTO b VALUES (1, 'small')")
    assert read_json(bootstrap, "a", {1}) and read_json(bootstrap, "b", {1})
    db.sql("INSERT INTO a VALUES ($1, $2)", 2, "x" * 1_500_000)
    db.sql("INSERT INTO b VALUES (2, 'after')")
    status = wait_until(
        lambda: (found := running_status(db, job_id)) and "table a failing" in found and found,
        timeout_s=DEADLINE,
        what="SHOW CHANGEFEED JOB to name the failing table",
    )
    assert "Kafka topic 'a' refused" in status and "too large" in status.lower(), status
    db.sql("INSERT INTO b VALUES (3, 'more')")
    assert read_json(bootstrap, "b", {1, 2, 3}) == {1, 2, 3}
    record = db.changefeeds.record(job_id)
    assert record is not None and record.status == "running"


@pytest.mark.parametrize(
    "store_config",
    [
        StoreConfig(closed_ts_interval_s=0.01, closed_ts_target_ns=50_000_000, sync=False),
        StoreConfig(sync=False),  # a node's: ranges close 1 s behind, every 200 ms
    ],
    ids=["fast-closed-timestamps", "node-closed-timestamps"],
)
@pytest.mark.parametrize(
    "options",
    ["resolved='1s'", "resolved='0s', min_checkpoint_frequency='0s'"],
    ids=["default-checkpoints", "fast-checkpoints"],
)
def test_a_table_whose_row_kafka_never_takes_stays_set_aside(
    bootstrap: str, db: DB, options: str
) -> None:
    """The table stays set aside (and named) while Kafka refuses its row, and the job's
    high-water mark holds before the row. With a node's closed timestamps a value comes
    a second ahead of the checkpoint that covers it: a retry at the next checkpoint read
    the table's changes up to that checkpoint only, found none, and the table
    "recovered", its row lost (seen from feedkv sql on a feedkv start node)."""
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v STRING)")
    db.sql("CREATE TABLE b (k INT PRIMARY KEY, v STRING)")
    job_id = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a, TABLE b INTO 'kafka://{bootstrap}' WITH {options}"
    ).rows[0][0]
    db.sql("INSERT INTO b VALUES (1, 'small')")
    assert read_json(bootstrap, "b", {1})
    db.sql("INSERT INTO a VALUES ($1, $2)", 2, "x" * 1_500_000)
    written = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]
    db.sql("INSERT INTO b VALUES (2, 'after')")
    assert read_json(bootstrap, "b", {1, 2}) == {1, 2}
    # three retries of a, at least (0.2 s, 0.4 s, 0.8 s apart), each refused
    wait_until(
        lambda: "(attempt 4," in running_status(db, job_id),
        timeout_s=DEADLINE,
        what="a's fourth attempt",
    )
    db.sql("INSERT INTO b VALUES (3, 'more')")
    assert read_json(bootstrap, "b", {1, 2, 3}) == {1, 2, 3}
    status = running_status(db, job_id)
    assert "table a failing" in status and "too large" in status.lower(), status
    show = f"SELECT high_water_timestamp FROM [SHOW CHANGEFEED JOB {job_id}]"
    (high_water,) = db.sql(show).rows[0]
    assert high_water is None or float(high_water) < float(written)
