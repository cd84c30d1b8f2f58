"""Changefeeds on the thread runner keep every changefeed promise through every sink,
under a nemesis.

A changefeed of table ``t`` (``WITH updated, diff, mvcc_timestamp``, frequent resolved
markers) runs into each sink while, in turn:

- clients run the seeded workload of :mod:`feedkv.testing.sql_workload`: multi-row
  writes, explicit transactions (some rolled back, conflicting ones retried) and range
  splits, pushed by the rangefeed's pusher whenever they linger;
- two transactions are driven by hand through the store on rows of ``t``
  (:func:`~feedkv.testing.sql_workload.abandon_transaction`): a pending one, which the
  pusher moves up and (once expired) aborts, so its row is never published; and a
  committed one, whose row must be published (its commit names its intents and resolves
  them: since records go once their intents are resolved, a commit that named none
  would leave them reading as aborted, as in CockroachDB);
- the sink goes down and comes back, where a sink can (see below);
- a job is paused while the clients write and resumed (a sinkless changefeed is no job):
  its sink is made anew, and the rows after its high-water mark are sent again;
- ``ALTER TABLE t ADD COLUMN c STRING DEFAULT 'x'`` rewrites every row while the clients
  write (a backfill: ``mvcc_timestamp`` lets the validators tell it from the scan).

Then every validator of :mod:`feedkv.testing.changefeed_validator` runs over what a
consumer read, per Kafka partition, and every committed row version must be there.

The outage of each sink, counted in failed requests where the sink can be asked to fail
so that it is sure to be felt:

- ``file://``: none. A local directory does not go down (and tests run as root, so
  permissions cannot take it away); the bucket below runs the same cloud storage sink.
- ``s3://``: a moto server that answers ``503 ServiceUnavailable`` to several
  ``PutObject`` requests in a row, more than boto3 retries by itself, so the sink's own
  retry sends the batch again.
- ``kafka://``: every broker of librdkafka's mock cluster down, then up again, while the
  clients write (the mock cluster's C API, which confluent-kafka does not wrap).
- ``webhook-http://``: the endpoint answers ``503`` to several POSTs in a row, within
  the sink's retries; and, marked as a known bug, more than the sink retries.
- ``experimental-sql://``: none: the sink's table lives in the store the feed reads.
- sinkless: none: the rows stream to the client that asked for them.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import boto3
import pytest
from test_kafka_sink import Reader

import feedkv
from feedkv import DB
from feedkv.changefeed.sinkless import FeedResult
from feedkv.kv.store import StoreConfig
from feedkv.rangefeed.store_feeds import FeedConfig
from feedkv.testing.changefeed_validator import ChangefeedMessage, parse_json_message
from feedkv.testing.kafka_mock import MockKafka
from feedkv.testing.sql_workload import (
    IDS,
    Stats,
    Workload,
    abandon_transaction,
    check_feed,
    cloud_storage_messages,
    create_table,
    embedded,
    published_files,
)
from feedkv.testing.waiting import wait_until
from feedkv.testing.webhook_endpoint import WebhookEndpoint
from feedkv.util.hlc import Timestamp

DEADLINE_S = 30.0  # for the feed to get somewhere
OUTAGE_S = 10.0  # for the failures of an outage to be used up, once the sink is asked
CLIENTS, OPS = 3, 60  # per sink: the workload's size
PENDING, COMMITTED = IDS + 70, IDS + 71  # rows the abandoned transactions write


def feed_options(resolved: str = "100ms") -> str:
    """What every changefeed here is created ``WITH``: what the validators need, resolved
    markers every ``resolved``, and a flush every 100 ms."""
    return (
        f"updated, diff, mvcc_timestamp, resolved = '{resolved}', "
        "min_checkpoint_frequency = '100ms'"
    )


@pytest.fixture
def db(tmp_path: Path, store_config: StoreConfig) -> Iterator[DB]:
    """The changefeed node, with a pusher that moves transactions older than 200 ms up,
    and transactions that expire 2 s after their last heartbeat."""
    database = feedkv.connect(
        tmp_path / "store",
        config=dataclasses.replace(store_config, txn_liveness_ns=2_000_000_000),
        feed_config=FeedConfig(push_age_ns=200_000_000, push_interval_s=0.05),
        changefeed_runner="thread",
    )
    yield database
    database.close()


# Sinks that fail on request.


class FlakyEndpoint(WebhookEndpoint):
    """A webhook endpoint that can be told to fail its next requests."""

    def fail_next(self, count: int) -> int:
        """Answer the next ``count`` requests with a failure; returns the number of
        requests (attempts) after which the endpoint works again."""
        # NB: WebhookEndpoint fails while its attempts are at most _failures, under _cond.
        with self._cond:
            self._failures = self.attempts + count
            return self._failures

    @property
    def requests(self) -> int:
        """The requests answered so far, failed or not."""
        return self.attempts


class FlakyS3:
    """An S3 endpoint on loopback: moto's S3 behind a WSGI layer that can answer
    ``503 ServiceUnavailable`` to the next ``PutObject`` requests. Its bucket is new:
    moto's state is shared by every server of the process."""

    UNAVAILABLE = (
        b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ServiceUnavailable</Code>'
        b"<Message>Service is unable to handle request.</Message></Error>"
    )

    def __init__(self) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        self.bucket = f"feeds-{uuid.uuid4().hex[:12]}"
        self.requests = 0  # PutObject requests answered, failed or not
        self._failing_until = 0
        self._lock = threading.Lock()
        self._moto = DomainDispatcherApplication(create_backend_app)
        self._server = make_server(
            "127.0.0.1", 0, self._answer, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        )
        self.client.create_bucket(Bucket=self.bucket)

    def fail_next(self, count: int) -> int:
        """Answer the next ``count`` PutObject requests with a 503; returns the number of
        PutObject requests after which the server works again."""
        with self._lock:
            self._failing_until = self.requests + count
            return self._failing_until

    def close(self) -> None:
        self.client.close()
        self._server.shutdown()
        self._thread.join()

    def _answer(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if environ["REQUEST_METHOD"] == "PUT":
            with self._lock:
                self.requests += 1
                failing = self.requests <= self._failing_until
            if failing:
                start_response(
                    "503 Service Unavailable",
                    [
                        ("Content-Type", "application/xml"),
                        ("Content-Length", str(len(self.UNAVAILABLE))),
                    ],
                )
                return [self.UNAVAILABLE]
        body: Iterable[bytes] = self._moto(environ, start_response)
        return body


# The sinks, and what their consumers read.

Streams = dict[str, list[ChangefeedMessage]]  # partition -> its messages, in order


class SinkUnderTest:
    """A sink a changefeed job writes into: its URI and options, its outage, and what
    a consumer of it reads (``markers_only``: at least every resolved marker)."""

    markers = 3  # distinct resolved markers a run delivers at least

    def start(self, db: DB) -> Feed:
        """Start a changefeed of ``t`` into the sink."""
        return JobFeed(db, self)

    def uri(self) -> str:
        raise NotImplementedError

    def options(self) -> str:
        return feed_options()

    def go_down(self) -> None:
        """Start an outage (nothing, for a sink that has none)."""

    def come_back(self) -> None:
        """Wait until the outage has been felt, and end it."""

    def streams(self, db: DB, *, markers_only: bool = False) -> Streams:
        raise NotImplementedError

    def close(self) -> None:
        pass


class FileSink(SinkUnderTest):
    def __init__(self, out: Path) -> None:
        self.out = out

    def uri(self) -> str:
        return f"file://{self.out}"

    def streams(self, db: DB, *, markers_only: bool = False) -> Streams:
        names = published_files(self.out) if self.out.exists() else []
        if markers_only:
            names = [n for n in names if n.endswith(".RESOLVED")]
        return {"": cloud_storage_messages(names, lambda name: (self.out / name).read_bytes())}


class FlakyServer(Protocol):
    """A server that fails on request (:meth:`fail_next`) and counts the requests of
    the kind that fails it answered (``requests``)."""

    @property
    def requests(self) -> int: ...

    def fail_next(self, count: int) -> int: ...


class FailingRequests(SinkUnderTest):
    """A sink whose server, when it goes down, fails its next ``failures`` requests (of
    the kind ``what`` names); the outage is over once one more has been answered."""

    what = "requests"

    def __init__(self, server: FlakyServer, failures: int) -> None:
        self.server = server
        self.failures = failures
        self._until = 0

    def go_down(self) -> None:
        self._until = self.server.fail_next(self.failures)

    def come_back(self) -> None:
        wait_until(
            lambda: self.server.requests > self._until,
            timeout_s=OUTAGE_S,
            what=f"{self.failures} failed {self.what}, then one more",
        )


class S3Sink(FailingRequests):
    PREFIX = "cdc"
    what = "PutObject requests"

    def __init__(self) -> None:
        self.s3 = FlakyS3()
        super().__init__(self.s3, failures=6)  # boto3 makes 4 attempts, then the sink retries

    def uri(self) -> str:
        keys = "AWS_ACCESS_KEY_ID=test&AWS_SECRET_ACCESS_KEY=test&AWS_REGION=us-east-1"
        return f"s3://{self.s3.bucket}/{self.PREFIX}?{keys}&AWS_ENDPOINT={self.s3.endpoint}"

    def streams(self, db: DB, *, markers_only: bool = False) -> Streams:
        client, bucket = self.s3.client, self.s3.bucket
        pages = client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=f"{self.PREFIX}/"
        )
        keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
        names = [k.removeprefix(f"{self.PREFIX}/") for k in keys]
        if markers_only:
            names = [n for n in names if n.endswith(".RESOLVED")]

        def read(name: str) -> bytes:
            response = client.get_object(Bucket=bucket, Key=f"{self.PREFIX}/{name}")
            body: bytes = response["Body"].read()
            return body

        return {"": cloud_storage_messages(names, read)}

    def close(self) -> None:
        self.s3.close()


class KafkaSink(SinkUnderTest):
    def __init__(self) -> None:
        self.kafka = MockKafka()
        self._reader: Reader | None = None

    def uri(self) -> str:
        return f"kafka://{self.kafka.bootstrap}"

    def go_down(self) -> None:
        self.kafka.set_down()

    def come_back(self) -> None:
        self.kafka.set_up()

    def streams(self, db: DB, *, markers_only: bool = False) -> Streams:
        if self._reader is None:
            self._reader = Reader(self.kafka.bootstrap, "t")  # waits for the topic
        records = sorted(self._reader.all(), key=lambda r: (r.partition, r.offset))
        streams: Streams = {str(p): [] for p in self._reader.partitions}
        for r in records:
            streams[str(r.partition)].append(parse_json_message(r.topic, r.key, r.value))
        return streams

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        self.kafka.close()


class WebhookSink(FailingRequests):
    """A webhook endpoint failing ``failures`` POSTs in a row while the sink retries a
    delivery ``retries`` times; resolved markers every ``resolved``."""

    what = "POSTs"

    def __init__(self, failures: int, retries: int, resolved: str = "100ms") -> None:
        self.endpoint = FlakyEndpoint(status=503)
        super().__init__(self.endpoint, failures)
        self.retries = retries
        self.resolved = resolved
        if resolved != "100ms":
            self.markers = 2  # the scan's and the last: the run is over in a few seconds

    def uri(self) -> str:
        return self.endpoint.uri()

    def options(self) -> str:
        config = {
            "Flush": {"Messages": 50, "Frequency": "50ms"},
            "Retry": {"Max": self.retries, "Backoff": "20ms"},
        }
        return f"{feed_options(self.resolved)}, webhook_sink_config = '{json.dumps(config)}'"

    def streams(self, db: DB, *, markers_only: bool = False) -> Streams:
        messages = []
        for body in self.endpoint.bodies():
            if "resolved" in body:
                messages.append(parse_json_message(None, None, json.dumps(body)))
                continue
            for value in body["payload"]:
                key = json.dumps(value["key"])  # key_in_value, implied for webhooks
                messages.append(parse_json_message("t", key, json.dumps(value)))
        return {"": messages}

    def close(self) -> None:
        self.endpoint.close()


class SQLTableSink(SinkUnderTest):
    def uri(self) -> str:
        return "experimental-sql://sink"

    def streams(self, db: DB, *, markers_only: bool = False) -> Streams:
        rows = sorted(db.sql("SELECT message_id, topic, key, value, resolved FROM sink").rows)
        return {
            "": [
                parse_json_message(topic, None, resolved)
                if resolved is not None
                else parse_json_message(topic, key, value)
                for _id, topic, key, value, resolved in rows
            ]
        }


class Sinkless(SinkUnderTest):
    """No sink: the rows stream back to the SQL client (see :class:`SinklessFeed`)."""

    def start(self, db: DB) -> Feed:
        return SinklessFeed(db)


# The changefeeds.


class JobFeed:
    """``CREATE CHANGEFEED FOR TABLE t INTO`` the sink: a job this node runs."""

    def __init__(self, db: DB, sink: SinkUnderTest) -> None:
        self.db = db
        self.sink = sink
        statement = f"CREATE CHANGEFEED FOR TABLE t INTO '{sink.uri()}' WITH {sink.options()}"
        [(job_id,)] = db.sql(statement).rows
        self.job_id = int(job_id)
        record = db.changefeeds.record(self.job_id)
        assert record is not None
        self.start = record.spec.start  # exclusive: the initial scan reads as of it

    def status(self) -> str:
        """The job's status; a job that failed fails the test."""
        error = self.db.changefeeds.error(self.job_id)
        assert error is None, f"changefeed job {self.job_id} failed: {error}"
        record = self.db.changefeeds.record(self.job_id)
        assert record is not None
        return record.status

    def pause(self) -> None:
        self.db.sql(f"PAUSE JOB {self.job_id}")  # returns once the runner stopped
        assert self.status() == "paused"

    def resume(self) -> None:
        self.db.sql(f"RESUME JOB {self.job_id}")

    def stop(self) -> None:
        # NB: a job is done writing before its files are listed, or a listing could
        # catch a resolved marker without a data file of another date directory
        assert self.status() == "running"
        self.db.sql(f"CANCEL JOB {self.job_id}")
        assert self.status() == "canceled"

    def streams(self, *, markers_only: bool = False) -> Streams:
        return self.sink.streams(self.db, markers_only=markers_only)


class SinklessFeed:
    """``EXPERIMENTAL CHANGEFEED FOR t`` through a SQL session; a thread of the test
    reads the rows as they stream back. No job: it cannot be paused."""

    def __init__(self, db: DB) -> None:
        result = db.session().execute(f"EXPERIMENTAL CHANGEFEED FOR t WITH {feed_options()}")
        assert isinstance(result, FeedResult) and result.changefeed is not None
        self.start = result.changefeed.spec.start
        self._result = result
        self._lock = threading.Lock()
        self._rows: list[tuple[Any, ...]] = []
        self._error: BaseException | None = None
        self._reader = threading.Thread(target=self._read, name="sinkless-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for row in self._result:
                with self._lock:
                    self._rows.append(row)
        except BaseException as exc:
            self._error = exc

    def status(self) -> str:
        assert self._error is None, f"the sinkless changefeed failed: {self._error!r}"
        return "running" if self._reader.is_alive() else "ended"

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def stop(self) -> None:
        assert self.status() == "running"
        self._result.close()
        self._reader.join(DEADLINE_S)
        assert not self._reader.is_alive(), "the sinkless changefeed did not stop"
        self.status()

    def streams(self, *, markers_only: bool = False) -> Streams:
        with self._lock:
            rows = list(self._rows)
        return {"": [parse_json_message(topic, key, value) for topic, key, value in rows]}


Feed = JobFeed | SinklessFeed


def lowest_resolved(streams: Mapping[str, list[ChangefeedMessage]]) -> Timestamp | None:
    """The highest resolved marker that every stream has delivered, if any."""
    highest = [
        max((m.resolved for m in s if m.resolved is not None), default=None)
        for s in streams.values()
    ]
    if not highest or any(mark is None for mark in highest):
        return None
    return min(mark for mark in highest if mark is not None)


def wait_for_resolved(feed: Feed, ts: Timestamp) -> None:
    """Wait until every stream of the feed has a resolved marker at or past ``ts``."""

    def reached() -> bool:
        assert feed.status() == "running"
        mark = lowest_resolved(feed.streams(markers_only=True))
        return mark is not None and mark >= ts

    wait_until(reached, timeout_s=DEADLINE_S, poll_s=0.1, what=f"a resolved marker >= {ts}")


# The nemesis.


def run_nemesis(db: DB, feed: Feed, sink: SinkUnderTest, seed: int) -> Stats:
    """The workload, with the abandoned transactions, the outage, a pause and the
    schema change each while the clients write; returns what the clients did."""
    workload = Workload(embedded(db), seed, clients=CLIENTS, ops=OPS)
    step = workload.total // 8
    workload.allow(2 * step)
    workload.start().wait_for(step)
    abandon_transaction(db, [PENDING], commit=False)
    abandon_transaction(db, [COMMITTED], commit=True)

    sink.go_down()
    workload.allow(4 * step)
    workload.wait_for(3 * step)
    sink.come_back()

    feed.pause()
    workload.allow(6 * step)
    workload.wait_for(5 * step)  # written while paused
    feed.resume()

    workload.allow(workload.total)
    workload.wait_for(6 * step)
    db.sql("ALTER TABLE t ADD COLUMN c STRING DEFAULT 'x'")
    return workload.join()


SINKS: dict[str, Callable[[Path], SinkUnderTest]] = {
    "file": lambda tmp_path: FileSink(tmp_path / "out"),
    "s3": lambda tmp_path: S3Sink(),
    "kafka": lambda tmp_path: KafkaSink(),
    "webhook": lambda tmp_path: WebhookSink(failures=5, retries=8),
    # NB: resolved markers are then due every 10 s only (and one at the end of the scan),
    # so the deliveries the outage fails are batches of rows, sent by the batcher's thread
    "webhook-retries-exhausted": lambda tmp_path: WebhookSink(5, retries=2, resolved="10s"),
    "experimental-sql": lambda tmp_path: SQLTableSink(),
    "sinkless": lambda tmp_path: Sinkless(),
}
SEEDS = {name: 20260610 + i for i, name in enumerate(SINKS)}


@pytest.fixture(params=list(SINKS))
def sink(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, SinkUnderTest]]:
    """The sink under test, by name."""
    made = SINKS[request.param](tmp_path)
    yield request.param, made
    made.close()


@pytest.mark.timeout(120)
def test_every_sink_keeps_every_changefeed_promise_under_a_nemesis(
    db: DB, sink: tuple[str, SinkUnderTest]
) -> None:
    name, under_test = sink
    seed = SEEDS[name]
    create_table(db)
    feed = under_test.start(db)
    wait_for_resolved(feed, feed.start)  # the initial scan is in

    stats = run_nemesis(db, feed, under_test, seed)
    end = db.now()
    wait_for_resolved(feed, end)
    feed.stop()

    assert stats.commits > 0 and stats.rollbacks > 0 and stats.splits > 0
    rows = check_feed(
        db, feed.streams(), feed.start, end, seed, min_versions=150, min_markers=under_test.markers
    )
    keys = {tuple(m.key or ()) for m in rows}
    assert (PENDING,) not in keys  # aborted: never published
    assert (COMMITTED,) in keys  # committed: published
    assert any(m.after is not None and m.after.get("c") == "x" for m in rows)  # the backfill
