"""JSON messages byte for byte as CockroachDB writes them, and the ``bare`` envelope as
CockroachDB shapes it; read from sinkless changefeeds on a real store."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from feedkv import DB
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.sink import parse_sink_uri
from feedkv.changefeed.sinkless import FeedResult
from feedkv.errors import SQLError
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0


def changefeed(db: DB, options: str) -> FeedResult:
    result = db.sql(f"EXPERIMENTAL CHANGEFEED FOR t WITH {options}")
    assert isinstance(result, FeedResult)
    return result


def next_row(result: FeedResult) -> tuple[Any, ...]:
    """The next row message (resolved markers skipped)."""
    while True:
        row = result.poll(DEADLINE)
        assert row is not None, "the changefeed ended"
        if row[0] is not None:
            return row


def next_resolved(result: FeedResult) -> str:
    while True:
        row = result.poll(DEADLINE)
        assert row is not None, "the changefeed ended"
        if row[0] is None:
            return str(row[2])


def test_wrapped_json_bytes_are_cockroachdbs(db: DB) -> None:
    """CockroachDB writes a changefeed's JSON as its JSONB text: object keys sorted
    (``after``, ``before``, ``key``, ``mvcc_timestamp``, ``topic``, ``updated``; the
    columns too), ``", "`` and ``": "`` between items, strings in raw UTF-8 with only
    quotes, backslashes, control characters and U+2028/U+2029 escaped, TIMESTAMP with
    no trailing zeros in the fraction and TIMESTAMPTZ in UTC with ``Z``, DECIMAL with
    its digits (pkg/ccl/changefeedccl/encoder_json.go; pkg/util/json)."""
    db.sql(
        "CREATE TABLE t (id INT PRIMARY KEY, zeta STRING, alpha DECIMAL, "
        'at TIMESTAMP, tz TIMESTAMPTZ, "Big" INT)'  # NB: "B" sorts before "a"
    )
    db.sql(
        "INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6)",
        1,
        'é "日本" \\ \x01\b\u2028<&>',
        "1.50",
        datetime.datetime(2024, 5, 1, 10, 0, 0, 500000),
        datetime.datetime(2024, 5, 1, 10, 0, 0, 120000, tzinfo=datetime.UTC),
        7,
    )
    result = changefeed(db, "diff, updated, mvcc_timestamp, key_in_value, topic_in_value")
    try:
        topic, key, value = next_row(result)
    finally:
        result.close()

    assert (topic, key) == ("t", "[1]")
    prefix = (
        '{"after": {"Big": 7, "alpha": 1.50, "at": "2024-05-01T10:00:00.5", "id": 1, '
        '"tz": "2024-05-01T10:00:00.12Z", '
        '"zeta": "é \\"日本\\" \\\\ \\u0001\\u0008\\u2028<&>"}, '
        '"before": null, "key": [1], "mvcc_timestamp": "'
    )
    assert value.startswith(prefix), value
    rest = value[len(prefix) :]
    mvcc, _, rest = rest.partition('", "topic": "t", "updated": "')
    Timestamp.parse(mvcc)
    assert rest.endswith('"}')
    Timestamp.parse(rest[:-2])


def test_floats_are_written_as_cockroachdbs_decimals_of_them(db: DB) -> None:
    """CockroachDB turns a FLOAT into JSON through apd: the decimal of the float's
    shortest digits (SetFloat64 parses strconv's 'E' form), printed in the General
    Decimal Arithmetic's scientific form (String): 100.0 is 1E+2, not 100.0."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, f FLOAT)")
    floats = [1.5, 100.0, 1.5e300, 1e-7, 0.000001, 0.0, 1234.0, 1230.0, -3.25]
    for i, f in enumerate(floats):
        db.sql("INSERT INTO t VALUES ($1, $2)", i, f)
    result = changefeed(db, "initial_scan = 'only'")
    values = [value for _topic, _key, value in result]
    written = ["1.5", "1E+2", "1.5E+300", "1E-7", "0.000001", "0", "1234", "1.23E+3", "-3.25"]
    assert values == [f'{{"after": {{"f": {w}, "id": {i}}}}}' for i, w in enumerate(written)]


def test_resolved_messages_are_written_without_spaces(db: DB) -> None:
    """CockroachDB marshals a resolved message with Go's encoding/json:
    ``{"resolved":"<ts>"}``, no spaces (encoder_json.go EncodeResolvedTimestamp)."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    result = changefeed(db, "resolved='0s', min_checkpoint_frequency='0s'")
    try:
        marker = next_resolved(result)
    finally:
        result.close()
    assert marker.startswith('{"resolved":"') and marker.endswith('"}'), marker
    Timestamp.parse(marker[len('{"resolved":"') : -2])


def test_bare_envelope_resolved_messages_sit_under_crdb(db: DB) -> None:
    """Outside the wrapped envelope CockroachDB puts the resolved timestamp under
    ``__crdb__``: ``{"__crdb__":{"resolved":"<ts>"}}``."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    result = changefeed(db, "envelope=bare, resolved='0s', min_checkpoint_frequency='0s'")
    try:
        marker = next_resolved(result)
    finally:
        result.close()
    head = '{"__crdb__":{"resolved":"'
    assert marker.startswith(head) and marker.endswith('"}}'), marker
    Timestamp.parse(marker[len(head) : -3])


def test_bare_envelope_deletes_are_rows_with_only_their_key(db: DB) -> None:
    """CockroachDB's bare envelope emits a deletion as the row with its primary key
    columns set and the others null, with ``__crdb__`` (not a tombstone); ``__crdb__``
    takes its sorted place among the columns, and ``topic_in_value`` is allowed."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, a STRING, z STRING)")
    db.sql("INSERT INTO t VALUES (1, 'x', 'y')")
    result = changefeed(db, "envelope=bare, topic_in_value, key_in_value")
    try:
        _topic, _key, inserted = next_row(result)
        db.sql("DELETE FROM t WHERE id = 1")
        _topic, key, deleted = next_row(result)
    finally:
        result.close()

    crdb = '"__crdb__": {"key": [1], "topic": "t"}'
    assert inserted == '{"__crdb__": {"key": [1], "topic": "t"}, "a": "x", "id": 1, "z": "y"}'
    assert key == "[1]"
    assert deleted == "{" + crdb + ', "a": null, "id": 1, "z": null}'


def test_row_envelope_deletes_are_tombstones(db: DB) -> None:
    """``envelope=row`` has no place for a deleted row: a deletion has no value."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, a STRING)")
    db.sql("INSERT INTO t VALUES (1, 'x')")
    result = changefeed(db, "envelope=row")
    try:
        assert next_row(result) == ("t", "[1]", '{"a": "x", "id": 1}')
        db.sql("DELETE FROM t WHERE id = 1")
        assert next_row(result) == ("t", "[1]", None)
    finally:
        result.close()


def test_row_envelope_carries_timestamps_under_crdb_and_takes_diff(db: DB) -> None:
    """CockroachDB's JSON encoder shapes ``envelope=row`` as it does ``bare``: ``updated``
    and ``mvcc_timestamp`` sit under ``__crdb__`` in its sorted place; ``diff`` is taken
    and writes no ``before``; a deletion is still a tombstone and a resolved message
    sits under ``__crdb__`` (changefeedccl encoder_json.go, and its encoder tests'
    ``format=json,envelope=row,updated,diff``)."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, a STRING)")
    db.sql("INSERT INTO t VALUES (1, 'x')")
    result = changefeed(
        db,
        "envelope = 'row', updated, mvcc_timestamp, diff, resolved='0s', "
        "min_checkpoint_frequency='0s'",
    )
    try:
        topic, key, inserted = next_row(result)
        db.sql("DELETE FROM t WHERE id = 1")
        deleted = next_row(result)
        marker = next_resolved(result)
    finally:
        result.close()

    assert (topic, key) == ("t", "[1]")
    head, tail = '{"__crdb__": {"mvcc_timestamp": "', '"}, "a": "x", "id": 1}'
    assert inserted.startswith(head) and inserted.endswith(tail), inserted
    mvcc, updated = inserted[len(head) : -len(tail)].split('", "updated": "')
    assert Timestamp.parse(mvcc) <= Timestamp.parse(updated)  # the scan's time, after it
    assert deleted == ("t", "[1]", None)
    assert marker.startswith('{"__crdb__":{"resolved":"'), marker


@pytest.mark.parametrize("envelope", ["key_only", "row"])
@pytest.mark.parametrize("uri", ["file:///tmp/feed", "webhook-https://example.com/hook"])
def test_key_only_and_row_envelopes_are_for_kafka_and_sinkless_only(
    db: DB, envelope: str, uri: str
) -> None:
    """CREATE CHANGEFEED docs, option ``envelope``: ``key_only`` and ``row`` are only
    usable with the Kafka sink and sinkless changefeeds."""
    options = parse_options([("envelope", envelope)], now=db.now())
    with pytest.raises(SQLError, match=f"envelope={envelope} is only usable with the Kafka") as e:
        parse_sink_uri(uri, options)
    assert e.value.code == "22023"
    assert parse_sink_uri("kafka://127.0.0.1:9092", options).kind.name == "kafka"


def test_topic_in_value_is_refused_for_the_row_envelope(db: DB) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    with pytest.raises(
        SQLError, match="topic_in_value is only usable with envelope=wrapped or bare"
    ):
        changefeed(db, "envelope=row, topic_in_value")


def test_bare_envelope_in_files_carries_the_key_under_crdb(db: DB, tmp_path: Path) -> None:
    """Changefeed message envelopes docs, ``bare`` into cloud storage: a file sink has no
    message key, so CockroachDB puts it in ``__crdb__`` (``key_in_value`` is implied):
    ``{"__crdb__": {"key": [...]}, "city": ...}``."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, city STRING)")
    db.sql("INSERT INTO t VALUES (1, 'seattle')")
    out = tmp_path / "out"
    db.sql(f"CREATE CHANGEFEED FOR t INTO 'file://{out}' WITH envelope=bare, initial_scan='only'")

    def written() -> list[str]:
        return [
            line for path in out.rglob("*.ndjson") for line in path.read_text().splitlines() if line
        ]

    lines = wait_until(written, timeout_s=DEADLINE, what="the scanned row in a file")
    assert lines == ['{"__crdb__": {"key": [1]}, "city": "seattle", "id": 1}']


def test_bare_deletes_of_split_families_keep_to_their_family(db: DB) -> None:
    """With ``split_column_families`` a bare deletion on a family's topic is that
    family's row (its columns null, the key set), as its other messages are."""
    db.sql(
        "CREATE TABLE t (k INT PRIMARY KEY, a STRING, b STRING, FAMILY f1 (k, a), FAMILY f2 (b))"
    )
    db.sql("INSERT INTO t VALUES (1, 'a1', 'b1')")
    result = changefeed(db, "envelope=bare, split_column_families")
    try:
        scanned = sorted([next_row(result), next_row(result)])
        db.sql("DELETE FROM t WHERE k = 1")
        deleted = sorted([next_row(result), next_row(result)])
    finally:
        result.close()
    assert scanned == [
        ("t.f1", "[1]", '{"a": "a1", "k": 1}'),
        ("t.f2", "[1]", '{"b": "b1", "k": 1}'),
    ]
    assert deleted == [
        ("t.f1", "[1]", '{"a": null, "k": 1}'),
        ("t.f2", "[1]", '{"b": null, "k": 1}'),
    ]
