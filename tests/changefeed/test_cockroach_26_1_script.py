"""A CockroachDB 26.1 user's script of CREATE CHANGEFEED statements
(``testdata/cockroach_26_1.sql``), run unchanged by ``feedkv sql`` against a
``feedkv start`` node: every statement is accepted, and each changefeed's messages are
the bytes CockroachDB writes, read back from the sinks by separate clients (a Kafka
consumer of librdkafka's mock cluster, the test schema registry, the files, an HTTP
endpoint).

Where the expected bytes come from (CockroachDB 26.1 docs):

- https://www.cockroachlabs.com/docs/v26.1/changefeed-message-envelopes: ``wrapped``
  (``after``, ``before`` with ``diff``, ``key``/``topic``/``updated``/``mvcc_timestamp``
  on request, keys sorted), ``bare`` (the columns at the top, metadata under
  ``__crdb__``), ``key_only`` (no value), ``row`` (the row alone, no value on delete),
  ``enriched`` (``payload`` with ``after``/``before``/``op``/``source``/``ts_ns`` and a
  Kafka Connect ``schema``).
- https://www.cockroachlabs.com/docs/v26.1/changefeed-messages: JSON as CockroachDB's
  JSONB text (``", "`` and ``": "``, DECIMAL digits kept, TIME/INTERVAL/INET/ENUM as SQL
  text, arrays as JSON arrays); timestamps as ``<wall ns>.<10 logical digits>``; resolved
  ``{"resolved":"<ts>"}``; the Avro, CSV, Parquet and Protobuf formats; the key
  ``[<pk>]``.
- https://www.cockroachlabs.com/docs/v26.1/create-changefeed: every option of the
  script (``csv_header``, ``key_column`` with ``unordered``, ``headers_json_column_name``,
  ``extra_headers``, ``virtual_columns``, ``encode_json_value_null_as_object``,
  ``avro_schema_prefix``, ``full_table_name``, ...) and ALTER CHANGEFEED.
- https://www.cockroachlabs.com/docs/v26.1/changefeed-sinks: Kafka ``topic_name``,
  ``topic_prefix`` and ``kafka_sink_config``, the file layout, the webhook body.
- https://www.cockroachlabs.com/docs/v26.1/cdc-queries: the bare envelope by default,
  ``cdc_prev``, ``event_op()``, ``crdb_internal_mvcc_timestamp``, JSON operators and
  ``jsonb_build_object``.

The finer points of each (every type in every format, schema evolution, partitioning,
SASL) are in the parity test of each feature; this test is the script end to end. One
node, one Kafka cluster, one registry and one endpoint serve every changefeed, each
changefeed writing to a topic or directory of its own.
"""

from __future__ import annotations

import base64
import csv
import datetime
import decimal
import io
import json
import re
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow.parquet as pq
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from test_kafka_parity import sarama_partition
from test_protobuf_format import wire

import feedkv
from feedkv.changefeed.proto import changefeed_pb2 as pb
from feedkv.changefeed.sinks.kafka import MVCC_HEADER
from feedkv.testing.certs import shared_certs_dir
from feedkv.testing.kafka_mock import KafkaRecord, MockKafka, read_topic
from feedkv.testing.kafka_sasl import SaslFront
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.oauth_server import JWTCheck, TokenServer
from feedkv.testing.schema_registry import SchemaRegistryServer
from feedkv.testing.waiting import wait_until
from feedkv.testing.webhook_endpoint import WebhookEndpoint

SCRIPT = Path(__file__).parent / "testdata" / "cockroach_26_1.sql"
JOB_PART = "-- {job} is the id"  # the script's second part starts here
DEADLINE_S = 30.0
TS = re.compile(r"\d{19}\.\d{10}")  # an HLC timestamp as CockroachDB writes it
IDP_KEY = b"the identity provider's signing key"
OAUTH_CLIENT, OAUTH_SECRET = "feedkv-app", "s3cr3t"  # the script has the secret in base64

# The rows of ``orders`` as CockroachDB's JSON writes their columns (``label``, a
# virtual column, is left out by default).
ALICE = {
    "customer": '"alice"',
    "doc": '{"a": "x", "b": [1, null]}',
    "hdrs": '{"X-Team": "red"}',
    "id": "1",
    "ip": '"10.0.0.1"',
    "opens": '"09:30:00"',
    "price": "9.50",
    "qty": "2",
    "state": '"open"',
    "tags": '["gift", "rush"]',
    "total": "19.00",
    "wait": '"1 day 02:00:00"',
}
SHIPPED = ALICE | {"qty": "3", "state": '"shipped"', "total": "28.50"}
BOB = dict.fromkeys(ALICE, "null") | {"customer": '"bob"', "id": "2"}
BOB_KEY_ONLY = dict.fromkeys(ALICE, "null") | {"id": "2"}  # a deletion outside wrapped


def obj(fields: dict[str, str]) -> str:
    """A JSON object as CockroachDB writes one: keys sorted, ``", "`` and ``": "``."""
    return "{" + ", ".join(f'"{k}": {v}' for k, v in sorted(fields.items())) + "}"


def without(fields: dict[str, str], *names: str) -> dict[str, str]:
    return {k: v for k, v in fields.items() if k not in names}


@dataclass
class Ran:
    """The script run against a node, and the sinks its changefeeds wrote to."""

    node: NodeProcess
    out: str  # what feedkv sql printed, both parts
    jobs: dict[str, int]  # the sink URI of each CREATE CHANGEFEED -> the job id printed
    kafka: MockKafka
    oauth_kafka: SaslFront
    registry: SchemaRegistryServer
    webhook: WebhookEndpoint
    files: Path
    idp_url: str

    def job(self, sink_part: str) -> int:
        [job_id] = [j for uri, j in self.jobs.items() if sink_part in uri]
        return job_id

    def topic(
        self, topic: str, rows: int, *, resolved: bool = False, oauth: bool = False
    ) -> list[KafkaRecord]:
        """The records of ``topic`` (partition by partition, in offset order) once it
        holds ``rows`` row messages (and, with ``resolved``, a resolved marker in every
        partition); ``oauth``: of the broker that takes OAUTHBEARER."""

        def read() -> list[KafkaRecord] | None:
            try:
                found = (
                    read_topic(
                        self.oauth_kafka.bootstrap,
                        topic,
                        DEADLINE_S,
                        config=oauth_consumer_config(self.idp_url),
                    )
                    if oauth
                    else read_topic(self.kafka.bootstrap, topic, DEADLINE_S)
                )
            except TimeoutError:
                return None
            records = [r for p in sorted(found) for r in found[p]]
            if sum(r.key is not None for r in records) < rows:
                return None
            if resolved and not all(any(r.key is None for r in rs) for rs in found.values()):
                return None
            return records

        return wait_until(read, timeout_s=DEADLINE_S, poll_s=0.1, what=f"{rows} rows in {topic}")


def oauth_consumer_config(token_url: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": OAUTH_CLIENT,
        "sasl.oauthbearer.client.secret": OAUTH_SECRET,
        "sasl.oauthbearer.token.endpoint.url": token_url,
        "sasl.oauthbearer.scope": "feeds",
    }


def run_sql(node: NodeProcess, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "feedkv.cli.main", "sql", "--url", node.url],
        input=script,
        capture_output=True,
        text=True,
        timeout=2 * DEADLINE_S,
    )


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ran]:
    base = tmp_path_factory.mktemp("cockroach_26_1")
    kafka = MockKafka()
    idp = TokenServer({OAUTH_CLIENT: OAUTH_SECRET}, key=IDP_KEY)
    oauth_kafka = SaslFront(JWTCheck(IDP_KEY))
    registry = SchemaRegistryServer().start()
    # NB: CockroachDB's webhook sink is HTTPS only: the endpoint has the test node
    # certificate (for 127.0.0.1), and the URI trusts its CA with ca_cert
    certs = shared_certs_dir()
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(certs / "node.crt", certs / "node.key")
    webhook = WebhookEndpoint(tls=tls)
    ca_cert = quote(base64.b64encode((certs / "ca.crt").read_bytes()).decode(), safe="")
    node = NodeProcess(base / "store", "--changefeed-runner", "thread")
    try:
        broker = kafka.bootstrap.split(",")[0]
        text = (
            SCRIPT.read_text()
            .replace("{kafka_oauth}", f"kafka://{oauth_kafka.bootstrap}")
            .replace("{token_url}", quote(idp.url, safe=""))
            .replace("{kafka}", f"kafka://{broker}")
            .replace("{registry}", registry.url)
            .replace("{files}", f"file://{base / 'files'}")
            .replace("{webhook}", webhook.uri(query=f"ca_cert={ca_cert}"))
        )
        first, marker, second = text.partition(JOB_PART)
        assert marker, f"{SCRIPT} has no {JOB_PART!r} line"
        created = run_sql(node, first)
        assert created.returncode == 0, created.stderr
        # cockroach sql's notices only: a Kafka changefeed names its topics, escaped
        notices = created.stderr.splitlines()
        assert all(n.startswith("NOTICE: changefeed will emit to topic ") for n in notices)
        assert "NOTICE: changefeed will emit to topic key_u0020_only" in notices
        sinks = re.findall(r"\bINTO '([^']*)'", first)
        ids = [
            int(i) for i in re.findall(r"^\s+job_id\n-+\n (\d+)\n\(1 row\)$", created.stdout, re.M)
        ]
        assert len(ids) == len(sinks), created.stdout
        jobs = dict(zip(sinks, ids, strict=True))
        ran = Ran(
            node,
            created.stdout,
            jobs,
            kafka,
            oauth_kafka,
            registry,
            webhook,
            base / "files",
            idp.url,
        )
        job = ran.job("topic_prefix=jobs_")
        with feedkv.connect(node.url) as db:  # as a user would: wait until it runs
            wait_until(
                lambda: db.sql(
                    f"SELECT high_water_timestamp FROM [SHOW CHANGEFEED JOB {job}]"
                ).rows[0][0],
                timeout_s=DEADLINE_S,
                what="the jobs_ changefeed's high-water timestamp",
            )
        altered = run_sql(node, (marker + second).replace("{job}", str(job)))
        assert altered.returncode == 0, altered.stderr
        # as CockroachDB's: each ALTER CHANGEFEED names the topics the job emits to
        topics = [
            f"NOTICE: changefeed will emit to topic jobs_{t}" for t in ("customers", "orders")
        ]
        assert sorted(altered.stderr.splitlines()) == sorted(topics * 2), altered.stderr
        ran.out += altered.stdout
        yield ran
    finally:
        node.terminate()
        webhook.close()
        registry.close()
        oauth_kafka.close()
        idp.close()
        kafka.close()


def rows_of(records: list[KafkaRecord]) -> list[tuple[bytes | None, bytes | None]]:
    """The row messages' (key, value), resolved markers left out."""
    return [(r.key, r.value) for r in records if r.key is not None]


def stamps(text: bytes | str | None) -> str:
    """``text`` with each HLC timestamp as ``<ts>``."""
    assert text is not None
    return TS.sub("<ts>", text.decode() if isinstance(text, bytes) else text)


# The statements.


def test_every_statement_of_the_script_is_accepted(ran: Ran) -> None:
    """Each statement answers as in CockroachDB: DDL and DML their tags, CREATE
    CHANGEFEED the new job's id, the job statements theirs."""
    lines = ran.out.splitlines()
    assert lines[:6] == [
        "CREATE TYPE",
        "CREATE TABLE",
        "CREATE TABLE",
        "CREATE TABLE",
        "INSERT 0 2",
        "INSERT 0 1",
    ]
    assert len(ran.jobs) == 20
    assert [line for line in lines if line[:6] in ("UPDATE", "DELETE")] == ["UPDATE 1", "DELETE 1"]
    for tag in ("PAUSE JOB", "RESUME JOB", "INSERT 0 1", "PAUSE JOBS 1"):
        assert tag in lines, tag
    # each ALTER CHANGEFEED: the job's id and new description, as CockroachDB's
    altered = re.findall(
        r"^ +job_id +\| +job_description *\n[-+]+\n +(\d+) \| (.*)$", ran.out, re.M
    )
    assert [int(job_id) for job_id, _ in altered] == [ran.job("topic_prefix=jobs_")] * 2
    assert "TABLE defaultdb.public.customers" in altered[0][1]
    assert "resolved = '10s'" in altered[1][1]
    # SHOW JOBS WHEN COMPLETE: the three initial_scan='only' changefeeds, done
    assert sum(" | succeeded | " in line for line in lines) == 3
    # TRUNCATE of a watched table; SHOW JOBS WHEN COMPLETE: its changefeed, failed
    assert "TRUNCATE" in lines
    [failed] = [line for line in lines if " | failed | " in line]
    assert failed.startswith(f" {ran.job('topic_name=scratch')} | CHANGEFEED | "), failed
    job = ran.job("topic_prefix=jobs_")
    assert re.search(rf"^ {job} \| running$", ran.out, re.M), ran.out
    with feedkv.connect(ran.node.url) as db:
        paused = ran.job("topic_name=paused")
        assert db.sql(f"SELECT status FROM [SHOW CHANGEFEED JOB {paused}]").rows == [("paused",)]


# Envelopes.


def test_wrapped_gives_cockroachdbs_bytes_and_resolved_markers(ran: Ran) -> None:
    """``updated, diff, mvcc_timestamp, resolved, key_in_value, topic_in_value``: the
    scan's rows (``before`` null), the update with ``before``, the deletion with
    ``after`` null; resolved markers in every partition, without spaces; each key in
    CockroachDB's partition."""
    records = ran.topic("wrapped", 4, resolved=True)
    meta = ', "key": [{k}], "mvcc_timestamp": "<ts>", "topic": "orders", "updated": "<ts>"}}'
    assert [(r[0], stamps(r[1])) for r in rows_of(records)] == [
        (b"[1]", '{"after": ' + obj(ALICE) + ', "before": null' + meta.format(k=1)),
        (
            b"[1]",
            '{"after": ' + obj(SHIPPED) + ', "before": ' + obj(ALICE) + meta.format(k=1),
        ),
        (b"[2]", '{"after": ' + obj(BOB) + ', "before": null' + meta.format(k=2)),
        (b"[2]", '{"after": null, "before": ' + obj(BOB) + meta.format(k=2)),
    ]
    resolved = {stamps(r.value) for r in records if r.key is None}
    assert resolved == {'{"resolved":"<ts>"}'}
    # each key in the partition CockroachDB's sink picks (sarama's hash partitioner over
    # FNV-1a of the key) among the mock cluster's four
    partitions = {r.key: r.partition for r in records if r.key is not None}
    assert partitions == {k: sarama_partition(k, 4) for k in (b"[1]", b"[2]")}


def test_bare_row_and_key_only_give_cockroachdbs_bytes(ran: Ran) -> None:
    """``bare``: the columns at the top, ``topic`` under ``__crdb__``, a deletion as the
    key columns set and the rest null; ``row``: the row alone, a deletion without a
    value; ``key_only``: keys without values, in a topic whose name Kafka does not
    allow escaped as CockroachDB does (``key only`` -> ``key_u0020_only``)."""
    crdb = '{"__crdb__": {"topic": "orders"}, '
    assert rows_of(ran.topic("bare", 4)) == [
        (b"[1]", (crdb + obj(ALICE)[1:]).encode()),
        (b"[1]", (crdb + obj(SHIPPED)[1:]).encode()),
        (b"[2]", (crdb + obj(BOB)[1:]).encode()),
        (b"[2]", (crdb + obj(BOB_KEY_ONLY)[1:]).encode()),
    ]
    assert rows_of(ran.topic("row", 4)) == [
        (b"[1]", obj(ALICE).encode()),
        (b"[1]", obj(SHIPPED).encode()),
        (b"[2]", obj(BOB).encode()),
        (b"[2]", None),
    ]
    assert rows_of(ran.topic("key_u0020_only", 4)) == [(b"[1]", None)] * 2 + [(b"[2]", None)] * 2


def test_enriched_carries_op_source_and_a_kafka_connect_schema(ran: Ran) -> None:
    """``envelope=enriched, enriched_properties='source,schema', diff``: ``payload``
    (``after``, ``before``, ``op`` c/u/d, ``source`` naming the job, the table and its
    primary keys, ``ts_ns``) beside a Kafka Connect ``schema``."""
    job = ran.job("topic_name=enriched")
    records = rows_of(ran.topic("enriched", 4))
    source = (
        '{"changefeed_sink": "kafka", "cluster_id": "<cluster>", "cluster_name": "", '
        '"crdb_internal_table_id": <table>, "database_name": "defaultdb", '
        f'"db_version": "<version>", "job_id": "{job}", "node_id": "1", '
        '"node_name": "<node>", "origin": "cockroachdb", "primary_keys": ["id"], '
        '"schema_name": "public", "source_node_locality": "", "table_name": "orders"}'
    )
    payloads = []
    for key, value in records:
        assert value is not None
        message = json.loads(value)
        assert list(message) == ["payload", "schema"]
        text = value.decode()
        payload = text[len('{"payload": ') : text.index(', "schema": ')]
        payload = re.sub(r'"cluster_id": "[0-9a-f]+"', '"cluster_id": "<cluster>"', payload)
        payload = re.sub(
            r'"crdb_internal_table_id": \d+', '"crdb_internal_table_id": <table>', payload
        )
        payload = re.sub(r'"db_version": "[^"]+"', '"db_version": "<version>"', payload)
        payload = re.sub(r'"node_name": "[^"]+"', '"node_name": "<node>"', payload)
        payloads.append((key, re.sub(r'"ts_ns": \d{19}}$', '"ts_ns": <ns>}', payload)))
        schema = message["schema"]
        assert (schema["name"], schema["type"]) == ("cockroachdb.envelope", "struct")
        assert [f["field"] for f in schema["fields"]] == [
            "before",
            "after",
            "source",
            "ts_ns",
            "op",
        ]
        after = schema["fields"][1]
        assert after["name"] == "orders.after.value"
        assert [f["field"] for f in after["fields"]][:3] == ["id", "customer", "qty"]
    tail = ', "source": ' + source + ', "ts_ns": <ns>}'
    assert payloads == [
        (b"[1]", '{"after": ' + obj(ALICE) + ', "before": null, "op": "c"' + tail),
        (b"[1]", '{"after": ' + obj(SHIPPED) + ', "before": ' + obj(ALICE) + ', "op": "u"' + tail),
        (b"[2]", '{"after": ' + obj(BOB) + ', "before": null, "op": "c"' + tail),
        (b"[2]", '{"after": null, "before": ' + obj(BOB) + ', "op": "d"' + tail),
    ]


# Formats.


def test_avro_is_read_through_the_registry(ran: Ran) -> None:
    """``format=avro, confluent_schema_registry, avro_schema_prefix='crdb_', diff``: the
    subjects and record names carry the prefix, and a consumer's Avro deserializer
    reads the key and the wrapped rows (DECIMAL as decimals, TIME as ``time-micros``,
    ARRAY as arrays, INTERVAL, INET, ENUM and JSONB as strings)."""
    records = rows_of(ran.topic("avro", 4))
    # NB: the subjects are named for the table, not the topic_name (CockroachDB freezes
    # them to the table's name at the statement's time; cockroachdb/cockroach#59764)
    assert set(ran.registry.subjects()) == {"crdb_orders-key", "crdb_orders-value"}
    client = SchemaRegistryClient({"url": ran.registry.url})
    decode = AvroDeserializer(client)
    key_context = SerializationContext("avro", MessageField.KEY)
    value_context = SerializationContext("avro", MessageField.VALUE)
    decoded = [(decode(key, key_context), decode(value, value_context)) for key, value in records]
    alice = {
        "id": 1,
        "customer": "alice",
        "qty": 2,
        "price": decimal.Decimal("9.50"),
        "total": decimal.Decimal("19.00"),
        "state": "open",
        "tags": ["gift", "rush"],
        "wait": "1 day 02:00:00",
        "opens": datetime.time(9, 30),
        "ip": "10.0.0.1",
        "doc": '{"a": "x", "b": [1, null]}',
        "hdrs": '{"X-Team": "red"}',
    }
    shipped = alice | {"qty": 3, "state": "shipped", "total": decimal.Decimal("28.50")}
    bob = dict.fromkeys(alice) | {"id": 2, "customer": "bob", "doc": "null"}
    assert decoded == [
        ({"id": 1}, {"after": alice, "before": None}),
        ({"id": 1}, {"after": shipped, "before": alice}),
        ({"id": 2}, {"after": bob, "before": None}),
        ({"id": 2}, {"after": None, "before": bob}),
    ]


def test_protobuf_messages_hold_cockroachdbs_envelope(ran: Ran) -> None:
    """``format=protobuf``: keys are ``Key`` messages (``{"id": int64}``), values a
    ``Message`` holding ``wrapped`` (field 1) with ``after`` (field 1); a deletion's
    ``wrapped`` is empty."""
    records = rows_of(ran.topic("protobuf", 4))
    keys = [key for key, _ in records]
    assert keys == [b"\n\x08\n\x02id\x12\x02 \x02"] * 2 + [b"\n\x08\n\x02id\x12\x02 \x01"] * 2
    values = [value for _, value in records]
    assert values[1] == b"\n\x00"  # bob's deletion
    for value in (values[0], values[2], values[3]):
        assert value is not None
        [(number, wrapped)] = wire(value)
        assert number == 1  # wrapped
        assert [n for n, _ in wire(wrapped)] == [1]  # after only
    rows = [pb.Message.FromString(v).wrapped.after.values for v in values if v != b"\n\x00"]
    assert [r["customer"].string_value for r in rows] == ["bob", "alice", "alice"]
    assert rows[1]["price"].decimal_value.value == "9.50"
    assert rows[1]["opens"].time_value == "09:30:00"
    assert rows[1]["wait"].interval_value == "1 day 02:00:00"
    assert [t.string_value for t in rows[1]["tags"].array_value.values] == ["gift", "rush"]
    assert rows[2]["qty"].int64_value == 3
    assert rows[0]["qty"].WhichOneof("value") is None  # NULL: no member set


def file_bytes(ran: Ran, directory: str, suffix: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted((ran.files / directory).rglob(f"*{suffix}"))]


def test_csv_files_hold_a_header_and_export_style_rows(ran: Ran) -> None:
    """``format=csv, initial_scan='only', csv_header``: one file with the column names
    first, then the rows as EXPORT writes them (NULL empty, arrays and JSON quoted)."""
    [data] = file_bytes(ran, "csv", ".csv")
    assert data.decode() == (
        "id,customer,qty,price,total,state,tags,wait,opens,ip,doc,hdrs\n"
        '1,alice,2,9.50,19.00,open,"{gift,rush}",1 day 02:00:00,09:30:00,10.0.0.1,'
        '"{""a"": ""x"", ""b"": [1, null]}","{""X-Team"": ""red""}"\n'
        "2,bob,,,,,,,,,null,\n"
    )
    assert list(csv.reader(io.StringIO(data.decode())))[1][6] == "{gift,rush}"


def test_json_files_encode_json_null_and_null_virtual_columns(ran: Ran) -> None:
    """``encode_json_value_null_as_object``: a JSONB ``null`` is
    ``{"__crdb_json_null__": true}`` (a SQL NULL stays ``null``); ``virtual_columns=
    'null'``: the virtual column is there, null; files of ``<after>, "key"`` lines."""
    [data] = file_bytes(ran, "json", ".ndjson")
    alice = ALICE | {"label": "null"}
    bob = BOB | {"label": "null", "doc": '{"__crdb_json_null__": true}'}
    assert data.decode() == (
        '{"after": ' + obj(alice) + ', "key": [1]}\n' + '{"after": ' + obj(bob) + ', "key": [2]}\n'
    )


def test_parquet_files_carry_cockroachdbs_metadata_columns(ran: Ran) -> None:
    """``format=parquet, updated, diff``: the table's columns, then
    ``__crdb__event_type``, ``__crdb__updated`` and ``__crdb__before``."""

    def rows() -> list[dict[str, Any]] | None:
        found = [
            row
            for path in sorted((ran.files / "parquet").rglob("*.parquet"))
            for row in pq.read_table(path).to_pylist()
        ]
        return found if len(found) >= 4 else None

    found = wait_until(rows, timeout_s=DEADLINE_S, poll_s=0.1, what="4 parquet rows")
    assert list(found[0]) == [
        "id",
        "customer",
        "qty",
        "price",
        "total",
        "state",
        "tags",
        "wait",
        "opens",
        "ip",
        "doc",
        "hdrs",
        "__crdb__event_type",
        "__crdb__updated",
        "__crdb__before",
    ]
    events = sorted((r["id"], r["__crdb__event_type"], r["qty"]) for r in found)
    assert events == [(1, "c", 2), (1, "u", 3), (2, "c", None), (2, "d", None)]
    for row in found:
        assert TS.fullmatch(row["__crdb__updated"]), row
    [update] = [r for r in found if r["__crdb__event_type"] == "u"]
    assert json.loads(update["__crdb__before"])["qty"] == 2


# Kafka topics, keys and headers.


def test_topic_prefix_full_table_name_and_kafka_sink_config(ran: Ran) -> None:
    """``topic_prefix=crdb_`` with ``full_table_name``: the topic
    ``crdb_defaultdb.public.orders``; ``initial_scan='no'``: only the changes."""
    assert rows_of(ran.topic("crdb_defaultdb.public.orders", 2)) == [
        (b"[1]", ('{"after": ' + obj(SHIPPED) + "}").encode()),
        (b"[2]", b'{"after": null}'),
    ]


def test_key_column_keys_messages_by_that_column(ran: Ran) -> None:
    """``key_column='customer', unordered``: the message key is ``[<customer>]``, the
    primary key in the value with ``key_in_value``."""
    by_key: dict[bytes | None, list[bytes | None]] = {}
    for key, value in rows_of(ran.topic("by_customer", 4)):
        by_key.setdefault(key, []).append(value)
    assert by_key == {
        b'["alice"]': [
            ('{"after": ' + obj(ALICE) + ', "key": [1]}').encode(),
            ('{"after": ' + obj(SHIPPED) + ', "key": [1]}').encode(),
        ],
        b'["bob"]': [
            ('{"after": ' + obj(BOB) + ', "key": [2]}').encode(),
            b'{"after": null, "key": [2]}',
        ],
    }


def test_headers_come_from_the_json_column_and_extra_headers(ran: Ran) -> None:
    """``headers_json_column_name='hdrs'``: the column's members become Kafka headers
    and the column leaves the value; ``extra_headers`` go on every message."""
    records = [r for r in ran.topic("headers", 2) if r.key is not None]
    # NB: feedkv adds its own mvcc_timestamp header to every message (for consumers
    # that deduplicate; see feedkv.changefeed.sinks.kafka); CockroachDB sends none
    headers = [sorted(h for h in r.headers if h[0] != MVCC_HEADER) for r in records]
    assert [TS.fullmatch(dict(r.headers)[MVCC_HEADER].decode()) is not None for r in records] == [
        True,
        True,
    ]
    assert [(r.key, r.value, h) for r, h in zip(records, headers, strict=True)] == [
        (
            b"[1]",
            ('{"after": ' + obj(without(ALICE, "hdrs")) + "}").encode(),
            [("X-Source", b"crdb"), ("X-Team", b"red")],
        ),
        (
            b"[2]",
            ('{"after": ' + obj(without(BOB, "hdrs")) + "}").encode(),
            [("X-Source", b"crdb")],
        ),
    ]


def test_sasl_oauthbearer_delivers_through_a_broker_that_checks_the_token(ran: Ran) -> None:
    """``sasl_mechanism=OAUTHBEARER`` with ``sasl_client_id``, ``sasl_client_secret``
    (base64), ``sasl_token_url`` and ``sasl_scopes``: the broker (which checks the
    JWT the token endpoint signed) takes the messages."""
    rows = {(k, v) for k, v in rows_of(ran.topic("oauth", 2, oauth=True))}
    assert rows == {
        (b'["alice"]', b'{"after": {"city": "Paris", "name": "alice"}}'),
        (b'["bob"]', b'{"after": {"city": "Oslo", "name": "bob"}}'),
    }


# A webhook.


def compact(text: str) -> str:
    """``text`` (JSON as CockroachDB's encoder writes it, no spaces inside these
    strings) as Go's ``json.Marshal`` embeds it in a webhook batch."""
    return text.replace(", ", ",").replace(": ", ":")


def test_the_webhook_gets_compact_payload_batches(ran: Ran) -> None:
    """``webhook-https://`` (``ca_cert`` trusting the endpoint's CA): each POST a
    ``{"payload":[...],"length":n}`` batch (one message each, as ``webhook_sink_config``
    asks) of wrapped messages with ``key`` and ``topic`` (both on for webhooks, as the
    changefeed-sinks docs' webhook messages show, ``"topic":"vehicles"``), compact as
    the docs show them."""
    received = ran.webhook.wait_for(lambda got: len(got) >= 4, "4 webhook batches")
    bodies = [r.body.decode() for r in received]
    batch = '{{"payload":[{}],"length":1}}'
    expected = [
        '{"after": ' + obj(ALICE) + ', "key": [1], "topic": "orders"}',
        '{"after": ' + obj(BOB) + ', "key": [2], "topic": "orders"}',
        '{"after": ' + obj(SHIPPED) + ', "key": [1], "topic": "orders"}',
        '{"after": null, "key": [2], "topic": "orders"}',
    ]
    assert bodies == [batch.format(compact(e)) for e in expected]


# CDC queries.


def test_cdc_queries_project_filter_and_see_the_previous_row(ran: Ran) -> None:
    """A CDC query: the bare envelope by default, ``(cdc_prev).qty``, ``->>``,
    ``jsonb_build_object`` and ``event_op()`` (``insert``/``update``: reading
    ``cdc_prev`` gives the previous row), only the rows its WHERE accepts; with
    ``envelope=wrapped, diff``, ``before`` as the whole previous row, not projected
    (cdc-queries docs, "Capture delete messages"), ``cdc_prev`` as an object of the
    table's columns, and ``crdb_internal_mvcc_timestamp``,
    ``changefeed_creation_timestamp()`` and ``event_schema_timestamp()`` as DECIMALs (JSON
    numbers)."""
    assert rows_of(ran.topic("query", 2)) == [
        (
            b"[1]",
            b'{"a": "x", "id": 1, "meta": {"customer": "alice", "state": "open"}, '
            b'"op": "insert", "prev_qty": null, "qty": 2}',
        ),
        (
            b"[1]",
            b'{"a": "x", "id": 1, "meta": {"customer": "alice", "state": "shipped"}, '
            b'"op": "update", "prev_qty": 2, "qty": 3}',
        ),
    ]
    wrapped = [(k, stamps(v)) for k, v in rows_of(ran.topic("query_wrapped", 2))]
    times = '"created": <ts>, "id": 1, "mvcc": <ts>'
    assert wrapped[0] == (
        b"[1]",
        '{"after": {"cdc_prev": null, ' + times + ', "qty": 2, "schema_ts": <ts>}, "before": null}',
    )
    # cdc_prev: the table's columns, the virtual one computed
    prev = obj(ALICE | {"label": '"ALICE"'})
    key, value = wrapped[1]
    # NB: not pinned here: whether the whole-row before holds the virtual column (feedkv
    # writes it null; a changefeed without a query leaves it out)
    value = value.replace('"label": null, ', "")
    assert (key, value) == (
        b"[1]",
        '{"after": {"cdc_prev": '
        + prev
        + ", "
        + times
        + ', "qty": 3, "schema_ts": <ts>}, "before": '
        + obj(ALICE)
        + "}",
    )


# Job control.


def test_an_altered_changefeed_adds_a_table_with_its_initial_scan(ran: Ran) -> None:
    """PAUSE JOB, ALTER CHANGEFEED ... ADD customers WITH initial_scan='yes', RESUME
    JOB: ``orders`` keeps its changes (at least once), ``customers`` gets its existing
    row and the new one."""
    orders = {(k, v) for k, v in rows_of(ran.topic("jobs_orders", 2))}
    assert orders == {
        (b"[1]", ('{"after": ' + obj(SHIPPED) + "}").encode()),
        (b"[2]", b'{"after": null}'),
    }
    customers = {(k, v) for k, v in rows_of(ran.topic("jobs_customers", 2))}
    assert customers == {
        (b'["alice"]', b'{"after": {"city": "Paris", "name": "alice"}}'),
        (b'["bob"]', b'{"after": {"city": "Oslo", "name": "bob"}}'),
    }
