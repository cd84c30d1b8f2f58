"""The CREATE CHANGEFEED options of CockroachDB 26.1 (create-changefeed docs, options
table) that a migrating user writes: ``csv_header``, ``key_column`` with ``unordered``,
``extra_headers``, ``virtual_columns``, ``gc_protect_expires_after``,
``execution_locality`` and ``encode_json_value_null_as_object``: each accepted with
CockroachDB's values, refused with a clear error otherwise, and doing what the docs
say where feedkv can."""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from feedkv import DB
from feedkv.changefeed.changefeed import ChangefeedSpec
from feedkv.changefeed.jobs import (
    CANCELED,
    PAUSED,
    RUNNING,
    JobRecord,
    protected_spans,
    protection_expired,
)
from feedkv.changefeed.options import cursor_age_notices, frequency_notices, parse_options
from feedkv.changefeed.sinks.kafka_partitioner import partition_for
from feedkv.changefeed.sinks.webhook import WebhookClient
from feedkv.errors import SQLError
from feedkv.sql import catalog
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0
QUIET = logging.getLogger("tests.options_parity")


def read_records(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "opts", "logger": QUIET})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(4)])
    found: list[Any] = []
    deadline = time.monotonic() + DEADLINE
    try:
        while len(found) < count:
            assert time.monotonic() < deadline, f"read {len(found)} of {count} messages"
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                found.append(message)
    finally:
        consumer.close()
    return found


@pytest.fixture
def orders(db: DB) -> DB:
    db.sql("CREATE TABLE orders (id INT PRIMARY KEY, region STRING, qty INT)")
    db.sql("INSERT INTO orders VALUES (1, 'eu', 1), (2, 'us', 2), (3, 'eu', 3)")
    return db


def test_csv_header_writes_the_column_names_first(orders: DB, tmp_path: Path) -> None:
    """``csv_header``: each CSV file starts with a line of the column names."""
    out = tmp_path / "csv"
    [(job_id,)] = orders.sql(
        f"CREATE CHANGEFEED FOR orders INTO 'file://{out}?partition_format=flat' "
        "WITH format=csv, initial_scan='only', csv_header"
    ).rows
    assert orders.changefeeds.wait(job_id, timeout=DEADLINE)
    [path] = sorted(out.glob("*.csv"))
    assert path.read_text() == "id,region,qty\n1,eu,1\n2,us,2\n3,eu,3\n"


def test_key_column_keys_and_partitions_messages_by_that_column(orders: DB, bootstrap: str) -> None:
    """``key_column='region', unordered``: the message key is ``["eu"]`` (what the
    partitioner hashes: every row of a region lands in one partition), while
    ``key_in_value`` still carries the primary key."""
    [(job_id,)] = orders.sql(
        f"CREATE CHANGEFEED FOR orders INTO 'kafka://{bootstrap}' "
        "WITH key_column='region', unordered, key_in_value"
    ).rows
    try:
        orders.sql("DELETE FROM orders WHERE id = 2")
        records = read_records(bootstrap, "orders", 4)
    finally:
        orders.sql(f"CANCEL JOB {job_id}")
    keys = sorted((r.key(), json.loads(r.value())["key"][0]) for r in records)
    assert keys == [(b'["eu"]', 1), (b'["eu"]', 3), (b'["us"]', 2), (b'["us"]', 2)]
    for record in records:  # a deletion keyed by the region of the row it deleted
        assert record.partition() == partition_for(record.key(), 4)


def test_extra_headers_go_on_every_kafka_message(orders: DB, bootstrap: str) -> None:
    """``extra_headers='{"x-api-key": "xxx"}'``: a header on every message."""
    [(job_id,)] = orders.sql(
        f"CREATE CHANGEFEED FOR orders INTO 'kafka://{bootstrap}' "
        """WITH extra_headers='{"x-api-key": "xxx", "n": 7}'"""
    ).rows
    try:
        records = read_records(bootstrap, "orders", 3)
    finally:
        orders.sql(f"CANCEL JOB {job_id}")
    for record in records:
        headers = dict(record.headers() or [])
        assert (headers["x-api-key"], headers["n"]) == (b"xxx", b"7")


def test_extra_headers_go_on_every_webhook_request() -> None:
    """The webhook sink sends ``extra_headers`` with each request (its own
    ``Content-Type`` wins)."""
    seen: list[dict[str, str]] = []
    done = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append({k.lower(): v for k, v in self.headers.items()})
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            done.set()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = WebhookClient(
            f"http://127.0.0.1:{server.server_address[1]}/hook",
            extra_headers={"x-api-key": "xxx", "Content-Type": "text/plain"},
        )
        client.send_resolved(Timestamp(1, 0), ["t"])
        assert done.wait(DEADLINE)
    finally:
        server.shutdown()
    assert seen[0]["x-api-key"] == "xxx"
    assert seen[0]["content-type"] == "application/json"


def test_gc_protect_expires_after_cancels_a_paused_job(orders: DB, tmp_path: Path) -> None:
    """``gc_protect_expires_after``: a job paused for longer than it loses its
    protection from garbage collection and is canceled, saying why."""
    [(job_id,)] = orders.sql(
        f"CREATE CHANGEFEED FOR orders INTO 'file://{tmp_path}/out' "
        "WITH gc_protect_expires_after='1s'"
    ).rows
    orders.sql(f"PAUSE JOB {job_id}")
    record = orders.changefeeds.record(job_id)
    assert record is not None and record.status == PAUSED
    held = protected_spans(catalog.Snapshot(orders, orders.now()))
    assert held  # paused: still protected, for now
    wait_until(
        lambda: (r := orders.changefeeds.record(job_id)) is not None and r.status == CANCELED
    )
    record = orders.changefeeds.record(job_id)
    assert record is not None and "gc_protect_expires_after" in record.error
    assert protected_spans(catalog.Snapshot(orders, orders.now())) == []


def test_protection_expires_only_for_a_paused_job_past_the_duration() -> None:
    """Counted from the pause (the record's last write), only while paused."""
    options = parse_options([("gc_protect_expires_after", "10s")], now=Timestamp(0, 0))
    spec = ChangefeedSpec((), {}, options, Timestamp(1, 0))
    paused = JobRecord(1, spec, Timestamp(1, 0), status=PAUSED, modified=Timestamp(5 * 10**9, 0))
    assert not protection_expired(paused, Timestamp(14 * 10**9, 0))
    assert protection_expired(paused, Timestamp(16 * 10**9, 0))
    assert not protection_expired(replace(paused, status=RUNNING), Timestamp(16 * 10**9, 0))


@pytest.mark.parametrize("value", ["omitted", "null", "NULL"])
def test_virtual_columns_takes_cockroachdbs_values(orders: DB, value: str) -> None:
    """``virtual_columns``: ``omitted`` (the default) or ``null``."""
    options = parse_options([("virtual_columns", value)], now=Timestamp(1, 0))
    assert options.virtual_columns == value.lower()


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("WITH key_column='region'", "key_column needs the unordered option"),
        ("WITH key_column='nope', unordered", "key_column: column nope not present"),
        ("WITH unordered, resolved", "resolved is not usable with unordered"),
        ("WITH csv_header", "csv_header is only usable with format=csv"),
        ("WITH extra_headers='[1]'", "must be a JSON object"),
        ("""WITH extra_headers='{"a": {"b": 1}}'""", "header 'a' has a dict value"),
        ("WITH virtual_columns='none'", "unknown virtual_columns 'none'"),
        ("WITH gc_protect_expires_after='0s'", "must be more than 0s"),
        ("WITH gc_protect_expires_after='soon'", "is not a duration"),
        ("WITH execution_locality='region'", "'region' is not a locality tier"),
        (
            "WITH execution_locality='region=us-east-1,cloud=aws'",
            "no instances found matching locality filter region=us-east-1,cloud=aws",
        ),
        (
            "WITH encode_json_value_null_as_object, format=avro",
            "encode_json_value_null_as_object is only usable with format=json",
        ),
        (
            "WITH encode_json_value_null_as_object='yes'",
            "option encode_json_value_null_as_object takes no value",
        ),
    ],
)
def test_options_are_checked_at_creation(orders: DB, sql: str, message: str) -> None:
    with pytest.raises(SQLError, match=message) as raised:
        orders.sql(f"CREATE CHANGEFEED FOR orders INTO 'kafka://127.0.0.1:1' {sql}")
    assert raised.value.code == "22023"


def test_extra_headers_is_only_for_kafka_and_webhooks(orders: DB, tmp_path: Path) -> None:
    with pytest.raises(SQLError, match="extra_headers is not usable with the cloud storage"):
        orders.sql(
            f"CREATE CHANGEFEED FOR orders INTO 'file://{tmp_path}' "
            """WITH extra_headers='{"a": "b"}'"""
        )


@pytest.mark.parametrize(
    ("given", "notice"),
    [
        (
            (("resolved", "5s"), ("min_checkpoint_frequency", "10s")),
            "(5s) ... configured ... (10s)",
        ),
        ((("resolved", "5s"),), "(5s) ... default ... (30s)"),
        (
            (("resolved", None), ("min_checkpoint_frequency", "10s")),
            "(0s by default) ... configured ... (10s)",
        ),
        ((("resolved", "200ms"),), "(200ms) ... default ... (30s)"),
        ((("resolved", "5s"), ("min_checkpoint_frequency", "5s")), None),
        ((("resolved", "10s"), ("min_checkpoint_frequency", "5s")), None),
        ((), None),
    ],
)
def test_resolved_more_often_than_checkpoints_gets_cockroachdbs_notice(
    given: tuple[tuple[str, str | None], ...], notice: str | None
) -> None:
    """CockroachDB's notice (its changefeed tests pin the words): resolved messages come
    no more often than ``min_checkpoint_frequency``, whatever ``resolved`` asks."""
    options = parse_options(given, now=Timestamp(1, 0))
    if notice is None:
        assert frequency_notices(options) == ()
        return
    resolved, which, every = notice.split(" ... ")
    assert frequency_notices(options) == (
        f"resolved {resolved} messages will not be emitted more frequently than the {which} "
        f"min_checkpoint_frequency {every}, but may be emitted less frequently",
    )


HOUR_NS = 3600 * 10**9


@pytest.mark.parametrize(
    ("cursor_hours_ago", "scan", "hours"),
    [(6.5, None, 6), (30, "no", 30), (5, None, None), (1, None, None), (8, "only", None)],
)
def test_a_cursor_over_five_hours_old_gets_cockroachdbs_notice(
    cursor_hours_ago: float, scan: str | None, hours: int | None
) -> None:
    """CockroachDB warns of a cursor more than five hours old (whole hours, rounded down),
    unless the changefeed only scans."""
    now = Timestamp(100 * HOUR_NS, 0)
    cursor = Timestamp(now.wall - int(cursor_hours_ago * HOUR_NS), 0)
    given: list[tuple[str, str | None]] = [("cursor", str(cursor))]
    if scan is not None:
        given.append(("initial_scan", scan))
    options = parse_options(given, now=now)
    if hours is None:
        assert cursor_age_notices(options, now) == ()
        return
    assert cursor_age_notices(options, now) == (
        f"the provided cursor is {hours} hours old; "
        "older cursors can result in increased changefeed latency",
    )
