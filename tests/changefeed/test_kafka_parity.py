"""The Kafka sink partitions and names topics as CockroachDB's does, so a topic moved
from CockroachDB keeps each key in its partition; read back from librdkafka's mock
cluster by a real consumer."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from feedkv import DB
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.sink import Message, parse_sink_uri
from feedkv.changefeed.sinks import kafka
from feedkv.changefeed.sinks.kafka import kafka_topic
from feedkv.changefeed.sinks.kafka_partitioner import fnv1a_32, partition_for
from feedkv.errors import SQLError
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0
QUIET = logging.getLogger("tests.kafka_parity")


# An independent reference, written from the definitions: FNV-1a (offset basis 2166136261,
# prime 16777619, xor then multiply, modulo 2**32), and sarama's hash partitioner
# (``partition = int32(hash) % n`` with Go's truncating %, negated when negative).


def fnv1a_reference(data: bytes) -> int:
    value = 2166136261
    for octet in data:
        value = ((value ^ octet) * 16777619) % 2**32
    return value


def go_int32(unsigned: int) -> int:
    return unsigned - 2**32 if unsigned >= 2**31 else unsigned


def go_remainder(a: int, b: int) -> int:
    quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # toward zero
    return a - b * quotient


def sarama_partition(key: bytes, partitions: int) -> int:
    partition = go_remainder(go_int32(fnv1a_reference(key)), partitions)
    return -partition if partition < 0 else partition


def test_fnv1a_matches_the_published_test_vectors() -> None:
    """FNV-1a 32-bit test vectors (the FNV reference's: "", "a", "foobar")."""
    assert fnv1a_32(b"") == 0x811C9DC5
    assert fnv1a_32(b"a") == 0xE40C292C
    assert fnv1a_32(b"foobar") == 0xBF9CF968


@pytest.mark.parametrize("partitions", [1, 3, 4, 7, 12, 100])
def test_partitions_match_sarama_hash_partitioner(partitions: int) -> None:
    """CockroachDB's Kafka sink uses sarama's hash partitioner over FNV-1a: the same
    key lands in the same partition here."""
    keys = [json.dumps([k]).encode() for k in range(-50, 500)] + [b"", b'["\xc3\xa9"]']
    for key in keys:
        assert partition_for(key, partitions) == sarama_partition(key, partitions), key


def test_keys_whose_hash_is_negative_as_int32_are_not_placed_as_unsigned() -> None:
    """Half of all keys hash above 2**31: sarama reads them as negative int32s, so
    their partition differs from the unsigned remainder librdkafka's fnv1a gives."""
    differing = [
        k
        for k in range(200)
        if (key := json.dumps([k]).encode()) and partition_for(key, 7) != fnv1a_reference(key) % 7
    ]
    assert differing  # the case exists among ordinary keys...
    for k in differing:  # ...and is placed as sarama places it
        key = json.dumps([k]).encode()
        assert partition_for(key, 7) == sarama_partition(key, 7)


def test_a_topic_without_partitions_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one partition, not 0"):
        partition_for(b"[1]", 0)


def read_partitions(bootstrap: str, topic: str, partitions: int, count: int) -> dict[bytes, int]:
    """Each key read from ``topic`` and the partition it was in; waits for ``count``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "parity", "logger": QUIET})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    found: dict[bytes, int] = {}
    deadline = time.monotonic() + DEADLINE
    try:
        while len(found) < count:
            assert time.monotonic() < deadline, f"read {len(found)} of {count} keys"
            message = consumer.poll(0.1)
            if message is None:
                continue
            assert message.error() is None, message.error()
            key, partition = message.key(), message.partition()
            assert isinstance(key, bytes) and partition is not None
            found[key] = partition
    finally:
        consumer.close()
    return found


def test_the_sink_puts_each_key_in_the_partition_cockroachdb_would(bootstrap: str) -> None:
    """End to end: rows emitted through the Kafka sink into a topic of four partitions
    (the mock cluster's) are found by a consumer in sarama's partition for their key,
    among them keys librdkafka's own fnv1a partitioner would have put elsewhere."""
    sink = kafka.make(
        parse_sink_uri(f"kafka://{bootstrap}", ChangefeedOptions()), ChangefeedOptions()
    )
    keys = [json.dumps([k]).encode() for k in range(60)]
    try:
        for key in keys:
            sink.emit_row(Message("t", key, b"{}", Timestamp(1, 0), Timestamp(1, 0)))
        sink.flush()
    finally:
        sink.close()
    placed = read_partitions(bootstrap, "t", 4, len(keys))
    assert placed == {key: sarama_partition(key, 4) for key in keys}
    assert len(set(placed.values())) == 4
    assert any(placed[key] != fnv1a_reference(key) % 4 for key in keys)


@pytest.mark.parametrize(
    ("table", "topic"),
    [
        ('my"table', "my_u0022_table"),
        ("a b", "a_u0020_b"),
        ("ünï", "_u00fc_n_u00ef_"),
        (".", "_u002e_"),
        ("..", "_u002e__u002e_"),
        ("db.public.t-1_x", "db.public.t-1_x"),
    ],
)
def test_topic_names_escape_what_kafka_forbids_as_cockroachdb_does(table: str, topic: str) -> None:
    """CockroachDB escapes characters outside ``[a-zA-Z0-9._-]`` in a Kafka topic as
    ``_u<hex>_`` (``"`` is ``_u0022_``), and the names ``.`` and ``..`` whole."""
    assert kafka_topic(table) == topic


def test_topic_names_are_cut_at_kafkas_limit() -> None:
    assert kafka_topic("x" * 300) == "x" * 249


def read_records(bootstrap: str, topic: str, count: int) -> list[Any]:
    """The first ``count`` messages of ``topic`` (four partitions), in any order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "parity", "logger": QUIET})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(4)])
    found: list[Any] = []
    deadline = time.monotonic() + DEADLINE
    try:
        while len(found) < count:
            assert time.monotonic() < deadline, f"read {len(found)} of {count} messages"
            message = consumer.poll(0.1)
            if message is None or message.error() is not None:
                continue
            found.append(message)
    finally:
        consumer.close()
    return found


def test_headers_json_column_name_sends_the_column_as_kafka_headers(db: DB, bootstrap: str) -> None:
    """Changefeed messages docs, "Specify a column as a Kafka header": the JSONB column
    named by ``headers_json_column_name`` is emitted as each message's Kafka headers
    and left out of the payload."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, item STRING, kafka_meta JSONB)")
    db.sql(
        """INSERT INTO t VALUES (1, 'a', '{"trace_id": "abc123", "level": 2}'), """
        "(2, 'b', NULL)"
    )
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR t INTO 'kafka://{bootstrap}' "
        "WITH headers_json_column_name='kafka_meta'"
    ).rows
    try:
        records = read_records(bootstrap, "t", 2)
    finally:
        db.sql(f"CANCEL JOB {job_id}")

    by_key = {r.key(): r for r in records}
    assert by_key[b"[1]"].value() == b'{"after": {"id": 1, "item": "a"}}'
    headers = dict(by_key[b"[1]"].headers() or [])
    assert (headers["trace_id"], headers["level"]) == (b"abc123", b"2")
    assert by_key[b"[2]"].value() == b'{"after": {"id": 2, "item": "b"}}'
    assert [name for name, _ in by_key[b"[2]"].headers() or []] == ["mvcc_timestamp"]


KAFKA_FEED = "CREATE CHANGEFEED FOR t INTO 'kafka://127.0.0.1:1' WITH "


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            KAFKA_FEED + "headers_json_column_name='nope'",
            "required column nope not present on table t",
        ),
        (
            KAFKA_FEED + "headers_json_column_name='item'",
            "column item of type string does not match required type jsonb",
        ),
        (
            "CREATE CHANGEFEED FOR t INTO 'file:///tmp/x' WITH headers_json_column_name='meta'",
            "option headers_json_column_name is not usable with the cloud storage sink",
        ),
        (
            KAFKA_FEED + "headers_json_column_name='meta', format=csv, initial_scan='only'",
            "headers_json_column_name is only usable with format=json/avro",
        ),
        (
            "EXPERIMENTAL CHANGEFEED FOR t WITH headers_json_column_name='meta'",
            "not usable without a sink",
        ),
    ],
)
def test_headers_json_column_name_is_checked_at_creation(db: DB, sql: str, message: str) -> None:
    """CockroachDB refuses a missing column, one that is not JSONB, a sink other than
    Kafka and a format other than JSON or Avro (changefeed_test.go's option errors)."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, item STRING, meta JSONB)")
    with pytest.raises(SQLError, match=message) as raised:
        db.sql(sql)
    assert raised.value.code == "22023"
