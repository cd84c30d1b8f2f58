"""The webhook sink against a real HTTP(S) endpoint on loopback: the wire format,
retries, failures, TLS, option checking, and a changefeed end to end."""

from __future__ import annotations

import base64
import datetime
import decimal
import gzip
import ipaddress
import json
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import zstandard

from feedkv import DB
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.sink import (
    BatchingSink,
    FlushConfig,
    Message,
    RetryConfig,
    SinkError,
    make_sink,
    parse_sink_uri,
)
from feedkv.changefeed.sinks.webhook import (
    DEFAULT_FLUSH,
    DEFAULT_RETRY,
    INFINITE_RETRIES,
    WebhookClient,
    parse_sink_config,
)
from feedkv.errors import SQLError
from feedkv.testing.sink_conformance import SinkSetup
from feedkv.testing.webhook_endpoint import Received, WebhookEndpoint
from feedkv.util.hlc import Timestamp

NOW = Timestamp(1_700_000_000_000_000_000, 0)


# Webhook endpoints (feedkv.testing.webhook_endpoint).


@pytest.fixture
def endpoint() -> Iterator[WebhookEndpoint]:
    server = WebhookEndpoint()
    yield server
    server.close()


@pytest.fixture
def endpoints() -> Iterator[Callable[..., WebhookEndpoint]]:
    """Endpoints built with arguments, closed at the end of the test."""
    made: list[WebhookEndpoint] = []

    def build(**kwargs: Any) -> WebhookEndpoint:
        made.append(WebhookEndpoint(**kwargs))
        return made[-1]

    yield build
    for server in made:
        server.close()


# Messages and sinks.


def message(k: int, topic: str = "t") -> Message:
    ts = Timestamp(NOW.wall + k, 0)
    value = json.dumps({"after": {"k": k, "v": f"v{k}"}, "updated": str(ts)}).encode()
    return Message(topic, json.dumps([k]).encode(), value, ts, ts)


def value_of(m: Message) -> Any:
    assert m.value is not None
    return json.loads(m.value)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def webhook_sink(uri: str, **options: str) -> BatchingSink:
    """The sink ``make`` builds for ``uri`` and ``WITH`` ``options`` (all strings)."""
    parsed = parse_options(options.items(), now=NOW)
    sink = make_sink(parse_sink_uri(uri, parsed), parsed)
    assert isinstance(sink, BatchingSink)
    return sink


def sink_over(endpoint: WebhookEndpoint, **client: Any) -> tuple[BatchingSink, list[float]]:
    """A batcher over a client of ``endpoint`` retrying 5 times; it records the backoff
    it would sleep instead of sleeping."""
    sleeps: list[float] = []
    sink = BatchingSink(
        WebhookClient(endpoint.url(), **client),
        flush=FlushConfig(messages=2),
        retry=RetryConfig(max=5, backoff=0.01),
        sleep=sleeps.append,
    )
    return sink, sleeps


# The wire.


def test_a_batch_holds_each_value_compacted_as_go_marshals_it(endpoint: WebhookEndpoint) -> None:
    """CockroachDB's sink marshals its batch with Go's ``json.Marshal``, which writes each
    ``json.RawMessage`` compacted and HTML-escaped: the changefeed-sinks docs' webhook
    output is ``{"payload":[{"after":{...},"key":[...],...}],"length":1}``, no spaces.
    Spaces inside strings and a DECIMAL's digits stay."""
    sink = webhook_sink(endpoint.uri(), webhook_sink_config='{"Flush": {"Messages": 1}}')
    ts = Timestamp(NOW.wall, 0)
    value = b'{"after": {"d": 1.50, "k": 1, "s": "a, b: <c> & \\"d\\""}, "key": [1, "x y"]}'
    sink.emit_row(Message("t", b'[1, "x y"]', value, ts, ts))
    sink.flush()
    sink.close()
    [request] = endpoint.accepted
    assert request.body == (
        b'{"payload":[{"after":{"d":1.50,"k":1,"s":"a, b: \\u003cc\\u003e \\u0026 \\"d\\""},'
        b'"key":[1,"x y"]}],"length":1}'
    )


def test_each_batch_is_one_post_of_payload_and_length_in_order(endpoint: WebhookEndpoint) -> None:
    sink = webhook_sink(
        endpoint.uri(),
        webhook_sink_config='{"Flush": {"Messages": 2, "Frequency": "0s"}}',
        webhook_auth_header="Bearer s3cret",
    )
    messages = [message(k) for k in range(1, 6)]
    for m in messages:
        sink.emit_row(m)
    sink.flush()
    sink.emit_resolved(Timestamp(NOW.wall + 5, 0), ["t"])
    sink.close()
    values = [value_of(m) for m in messages]
    assert endpoint.bodies() == [
        {"payload": values[0:2], "length": 2},
        {"payload": values[2:4], "length": 2},
        {"payload": values[4:5], "length": 1},
        {"resolved": f"{NOW.wall + 5}.0000000000"},
    ]
    for request in endpoint.accepted:
        assert request.path == "/hook"
        assert request.headers["authorization"] == "Bearer s3cret"
        assert request.headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    ("compression", "decompress"),
    [("gzip", gzip.decompress), ("zstd", zstandard.ZstdDecompressor().decompress)],
)
def test_compression_compresses_every_body_and_names_its_encoding(
    endpoint: WebhookEndpoint, compression: str, decompress: Callable[[bytes], bytes]
) -> None:
    """CockroachDB 25.2 takes ``compression`` for webhook sinks: batches and resolved
    markers alike go compressed, with the algorithm as their ``Content-Encoding``."""
    sink = webhook_sink(endpoint.uri(), compression=compression)
    sink.emit_row(message(1))
    sink.flush()
    sink.emit_resolved(Timestamp(NOW.wall + 1, 0), ["t"])
    sink.close()
    assert [r.headers.get("content-encoding") for r in endpoint.accepted] == [compression] * 2
    assert [json.loads(decompress(r.body)) for r in endpoint.accepted] == [
        {"payload": [value_of(message(1))], "length": 1},
        {"resolved": f"{NOW.wall + 1}.0000000000"},
    ]


@pytest.mark.parametrize(
    ("envelope", "marker"),
    [("wrapped", b'{"resolved":"%s"}'), ("bare", b'{"__crdb__":{"resolved":"%s"}}')],
)
def test_a_resolved_marker_is_the_envelopes_as_cockroachdb_posts_it(
    endpoint: WebhookEndpoint, envelope: str, marker: bytes
) -> None:
    """CockroachDB's webhook sink posts the encoder's resolved marker, whose shape
    follows the envelope, as its other sinks write it."""
    sink = webhook_sink(endpoint.uri(), envelope=envelope)
    sink.emit_resolved(NOW, ["t"])
    sink.close()
    assert [r.body for r in endpoint.accepted] == [marker % str(NOW).encode()]


def test_without_an_auth_header_none_is_sent(endpoint: WebhookEndpoint) -> None:
    sink = webhook_sink(endpoint.uri())
    sink.emit_row(message(1))
    sink.flush()
    sink.close()
    assert [r.json["length"] for r in endpoint.accepted] == [1]
    assert "authorization" not in endpoint.accepted[0].headers


def test_a_message_without_a_value_is_sent_as_its_key(endpoint: WebhookEndpoint) -> None:
    sink = webhook_sink(endpoint.uri(), webhook_sink_config='{"Flush": {"Frequency": "0s"}}')
    deleted = Message("t", b'[2, "x"]', None, NOW, NOW)
    sink.emit_row(message(1))
    sink.emit_row(deleted)
    sink.flush()
    sink.close()
    assert endpoint.bodies() == [
        {
            "payload": [value_of(message(1)), {"key": [2, "x"]}],
            "length": 2,
        }
    ]


def test_values_keep_every_digit(endpoint: WebhookEndpoint) -> None:
    exact = b'{"after": {"d": 3.14159265358979323846264338327950288}}'
    sink = webhook_sink(endpoint.uri())
    sink.emit_row(Message("t", b"[1]", exact, NOW, NOW))
    sink.flush()
    sink.close()
    (request,) = endpoint.accepted
    assert b'{"after":{"d":3.14159265358979323846264338327950288}}' in request.body
    payload = json.loads(request.body, parse_float=decimal.Decimal)["payload"]
    assert payload[0]["after"]["d"] == decimal.Decimal("3.14159265358979323846264338327950288")


def test_a_batch_is_sent_when_its_oldest_message_is_frequency_old(
    endpoint: WebhookEndpoint,
) -> None:
    sink = webhook_sink(
        endpoint.uri(), webhook_sink_config='{"Flush": {"Messages": 1000, "Frequency": "10ms"}}'
    )
    sink.emit_row(message(1))
    sink.emit_row(message(2))
    # No flush: the sender seals batches by their age alone (one or two of them,
    # depending on how long the two calls take).
    received = endpoint.wait_for(
        lambda got: len(_rows(got)) >= 2, "batches sealed by age", deadline=10.0
    )
    sink.close()
    assert _rows(received) == [value_of(message(1)), value_of(message(2))]


# Failures.


@pytest.mark.parametrize(
    ("failure", "failures", "timeout"),
    [("status", 3, 3.0), ("close", 3, 3.0), ("hang", 2, 0.5)],
)
def test_failed_requests_are_retried_with_backoff_until_every_row_arrives(
    endpoints: Callable[..., WebhookEndpoint], failure: str, failures: int, timeout: float
) -> None:
    endpoint = endpoints(failures=failures, failure=failure)
    sink, sleeps = sink_over(endpoint, timeout=timeout)
    messages = [message(k) for k in range(1, 6)]
    for m in messages:
        sink.emit_row(m)
    sink.flush()
    sink.emit_resolved(Timestamp(NOW.wall + 5, 0), ["t"])
    sink.close()
    bodies = endpoint.bodies()
    assert [v for b in bodies[:-1] for v in b["payload"]] == [value_of(m) for m in messages]
    assert bodies[-1] == {"resolved": f"{NOW.wall + 5}.0000000000"}
    assert sleeps == [0.01, 0.02, 0.04][:failures]
    assert sink.stats["retries"] == failures
    assert endpoint.attempts == failures + len(bodies)


def test_an_endpoint_that_never_recovers_fails_the_sink(
    endpoints: Callable[..., WebhookEndpoint],
) -> None:
    endpoint = endpoints(failures=1_000, status=503)
    sink, sleeps = sink_over(endpoint)
    sink.emit_row(message(1))
    with pytest.raises(SinkError, match="503 Service Unavailable: the endpoint is down"):
        sink.flush()
    assert endpoint.attempts == 6  # the first try and 5 retries
    assert len(sleeps) == 5
    with pytest.raises(SinkError):
        sink.emit_row(message(2))
    sink.close()
    assert endpoint.accepted == []


def test_a_failed_resolved_post_raises_after_its_retries(
    endpoints: Callable[..., WebhookEndpoint],
) -> None:
    endpoint = endpoints(failures=1_000, failure="close")
    sink, _sleeps = sink_over(endpoint)
    with pytest.raises(SinkError, match="resolved timestamp"):
        sink.emit_resolved(NOW, ["t"])
    sink.close()
    assert endpoint.attempts == 6


def test_an_error_hides_credentials(endpoints: Callable[..., WebhookEndpoint]) -> None:
    endpoint = endpoints(failures=1, status=401)
    url = f"http://user:hunter2@127.0.0.1:{endpoint.port}/hook"
    client = WebhookClient(url, auth_header="Bearer s3cret")
    with pytest.raises(SinkError, match="401 Unauthorized") as raised:
        client.send("t", [message(1)])
    client.close()
    assert "hunter2" not in str(raised.value)
    assert "s3cret" not in str(raised.value)
    assert f"127.0.0.1:{endpoint.port}/hook" in str(raised.value)


def test_an_unreachable_endpoint_is_a_sink_error() -> None:
    with socket.socket() as s:  # a port nobody listens on once it is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = WebhookClient(f"http://127.0.0.1:{port}/hook")
    with pytest.raises(SinkError, match="cannot post a batch of 1 message of t"):
        client.send("t", [message(1)])
    client.close()


def test_a_timeout_is_a_sink_error_that_says_so(endpoints: Callable[..., WebhookEndpoint]) -> None:
    endpoint = endpoints(failures=1, failure="hang")
    client = WebhookClient(endpoint.url(), timeout=0.05)
    with pytest.raises(SinkError, match=r"timed out.*webhook_client_timeout"):
        client.send("t", [message(1)])
    client.close()


# webhook_sink_config.


def test_sink_config_defaults() -> None:
    assert parse_sink_config(None) == (DEFAULT_FLUSH, DEFAULT_RETRY)
    assert parse_sink_config({}) == (DEFAULT_FLUSH, DEFAULT_RETRY)
    assert DEFAULT_RETRY.max == 3
    assert DEFAULT_RETRY.backoff == 0.5


def test_sink_config_in_cockroachdb_form() -> None:
    flush, retry = parse_sink_config(
        {
            "Flush": {"Messages": 10, "Bytes": 2048, "Frequency": "250ms"},
            "Retry": {"Max": 7, "Backoff": "20ms"},
        }
    )
    assert flush == FlushConfig(messages=10, bytes=2048, frequency=0.25)
    assert (retry.max, retry.backoff) == (7, 0.02)


def test_sink_config_keys_left_out_take_defaults_and_match_any_case() -> None:
    flush, retry = parse_sink_config({"flush": {"messages": 10}, "RETRY": {"max": "inf"}})
    assert flush == FlushConfig(10, DEFAULT_FLUSH.bytes, DEFAULT_FLUSH.frequency)
    assert retry.max == INFINITE_RETRIES
    assert retry.backoff == DEFAULT_RETRY.backoff
    assert parse_sink_config({"Retry": {"Max": "5"}})[1].max == 5


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ('{"Flsh": {}}', "unknown key Flsh; did you mean Flush?"),
        ('{"Batch": {}}', "unknown key Batch (expected Flush, Retry)"),
        ('{"Flush": {"Mesages": 1}}', "unknown key Flush.Mesages; did you mean Flush.Messages?"),
        ('{"Retry": {"Backof": "1s"}}', "unknown key Retry.Backof; did you mean Retry.Backoff?"),
        ('{"Flush": {"Messages": 1, "messages": 2}}', "Flush.Messages is given more than once"),
        ('{"Flush": 10}', "Flush must be an object"),
        ('{"Flush": {"Messages": 0}}', "Flush.Messages must be a positive integer, not 0"),
        ('{"Flush": {"Messages": -5}}', "Flush.Messages must be a positive integer, not -5"),
        ('{"Flush": {"Messages": "10"}}', 'Flush.Messages must be a positive integer, not "10"'),
        ('{"Flush": {"Messages": 2.5}}', "Flush.Messages must be a positive integer, not 2.5"),
        ('{"Flush": {"Bytes": true}}', "Flush.Bytes must be a positive integer, not true"),
        ('{"Flush": {"Frequency": 5}}', "Flush.Frequency must be a duration string"),
        ('{"Flush": {"Frequency": "soon"}}', 'Flush.Frequency must be a duration such as "1s"'),
        ('{"Retry": {"Max": 0}}', 'Retry.Max must be a positive integer, or "inf"'),
        (
            '{"Retry": {"Max": "forever"}}',
            'Retry.Max must be a positive integer, or "inf" to retry forever, not "forever"',
        ),
        ('{"Retry": {"Backoff": "-1s"}}', "Retry.Backoff must be a duration"),
    ],
)
def test_a_bad_sink_config_is_refused_naming_the_key(
    endpoint: WebhookEndpoint, config: str, message: str
) -> None:
    with pytest.raises(SQLError) as raised:
        webhook_sink(endpoint.uri(), webhook_sink_config=config)
    assert raised.value.code == "22023"
    assert "option webhook_sink_config: " + message in str(raised.value)


@pytest.mark.parametrize(
    ("query", "options", "message"),
    [
        ("ca_cert=not%20base64%21", {}, "sink parameter ca_cert is not base64"),
        ("ca_cert=" + b64(b"hello"), {}, "ca_cert is base64 but not of a PEM"),
        (
            "ca_cert=" + b64(b"-----BEGIN CERTIFICATE-----\nxx\n-----END CERTIFICATE-----\n"),
            {},
            "sink parameter ca_cert is not a usable certificate",
        ),
        (
            "insecure_tls_skip_verify=maybe",
            {},
            # said once, with what to write instead
            "sink parameter insecure_tls_skip_verify='maybe' is not a boolean: write "
            "insecure_tls_skip_verify=true or insecure_tls_skip_verify=false",
        ),
        ("client_key=LS0tLS1CRUdJTiBYLS0tLS0=", {}, "client_key needs client_cert as well"),
        ("", {"webhook_client_timeout": "0s"}, "webhook_client_timeout must be more than 0s"),
        ("", {"webhook_auth_header": "Bearer a\nb"}, "webhook_auth_header must be printable"),
    ],
)
def test_bad_parameters_are_refused_when_the_sink_is_made(
    endpoint: WebhookEndpoint, query: str, options: dict[str, str], message: str
) -> None:
    uri = endpoint.uri(query=query).replace("webhook-http:", "webhook-https:")
    with pytest.raises(SQLError) as raised:
        webhook_sink(uri, **options)
    assert raised.value.code == "22023"
    assert message in str(raised.value)


def test_tls_parameters_need_an_https_uri(endpoint: WebhookEndpoint) -> None:
    with pytest.raises(SQLError, match="insecure_tls_skip_verify needs TLS: use a webhook-https"):
        webhook_sink(endpoint.uri(query="insecure_tls_skip_verify=true"))


def test_a_uri_without_a_host_is_refused() -> None:
    with pytest.raises(SQLError, match="needs a host"):
        webhook_sink("webhook-https:///hook")


# TLS.


@dataclass(frozen=True)
class PKI:
    ca_pem: bytes
    server_cert: Path
    server_key: Path
    client_cert_pem: bytes
    client_key_pem: bytes


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    """A CA, a server certificate for 127.0.0.1 and a client certificate it signed."""
    pytest.importorskip("cryptography")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def issue(
        subject: str, key: Any, issuer: str, issuer_key: Any, *, ca: bool, sans: list[Any]
    ) -> Any:
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name(issuer))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    def pem(cert: Any) -> bytes:
        out: bytes = cert.public_bytes(serialization.Encoding.PEM)
        return out

    def key_pem(key: Any) -> bytes:
        out: bytes = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return out

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = issue("feedkv test CA", ca_key, "feedkv test CA", ca_key, ca=True, sans=[])
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = issue(
        "127.0.0.1",
        server_key,
        "feedkv test CA",
        ca_key,
        ca=False,
        sans=[x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = issue("feedkv-client", client_key, "feedkv test CA", ca_key, ca=False, sans=[])
    directory = tmp_path_factory.mktemp("pki")
    (directory / "server.crt").write_bytes(pem(server))
    (directory / "server.key").write_bytes(key_pem(server_key))
    return PKI(
        pem(ca),
        directory / "server.crt",
        directory / "server.key",
        pem(client),
        key_pem(client_key),
    )


@pytest.fixture
def tls_endpoint(pki: PKI) -> Iterator[WebhookEndpoint]:
    """An HTTPS endpoint that asks for (and checks, if given) a client certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    context.load_verify_locations(cadata=pki.ca_pem.decode())
    context.verify_mode = ssl.CERT_OPTIONAL
    server = WebhookEndpoint(tls=context)
    yield server
    server.close()


def test_tls_trusts_ca_cert_and_presents_the_client_certificate(
    tls_endpoint: WebhookEndpoint, pki: PKI
) -> None:
    query = (
        f"ca_cert={quote(b64(pki.ca_pem), safe='')}"
        # NB: left unescaped on purpose: a '+' in it reads back as a space.
        f"&client_cert={b64(pki.client_cert_pem)}"
        f"&client_key={quote(b64(pki.client_key_pem), safe='')}"
    )
    sink = webhook_sink(tls_endpoint.uri(query=query))
    sink.emit_row(message(1))
    sink.flush()
    sink.close()
    (request,) = tls_endpoint.accepted
    assert request.json["payload"] == [value_of(message(1))]
    assert request.client_cert["subject"] == ((("commonName", "feedkv-client"),),)


def test_tls_refuses_a_server_certificate_it_cannot_verify(tls_endpoint: WebhookEndpoint) -> None:
    sink = webhook_sink(
        tls_endpoint.uri(), webhook_sink_config='{"Retry": {"Max": 1, "Backoff": "1ms"}}'
    )
    sink.emit_row(message(1))
    with pytest.raises(SinkError, match="CERTIFICATE_VERIFY_FAILED"):
        sink.flush()
    sink.close()
    assert tls_endpoint.accepted == []


def test_insecure_tls_skip_verify_accepts_any_server_certificate(
    tls_endpoint: WebhookEndpoint,
) -> None:
    sink = webhook_sink(tls_endpoint.uri(query="insecure_tls_skip_verify=true"))
    sink.emit_row(message(1))
    sink.flush()
    sink.close()
    assert [r.json["length"] for r in tls_endpoint.accepted] == [1]


# The sink contract.


@pytest.fixture(
    params=[
        None,
        '{"Flush": {"Messages": 2, "Frequency": "0s"}}',
        '{"Flush": {"Bytes": 300, "Frequency": "5ms"}}',
    ],
    ids=["defaults", "two-per-post", "small-aged-batches"],
)
def webhook_setup(
    request: pytest.FixtureRequest, endpoints: Callable[..., WebhookEndpoint]
) -> SinkSetup:
    """The webhook sink posting to an endpoint, read back as the endpoint took the
    posts: one stream, the messages of each batch in order; its failing twin posts to
    an endpoint that answers 503, until told to recover."""
    config: str | None = request.param
    endpoint = endpoints()
    options = {} if config is None else {"webhook_sink_config": config}

    def reader() -> dict[str, list[bytes]]:
        payloads: list[bytes] = []
        for body in endpoint.bodies():
            if "resolved" in body:
                payloads.append(json.dumps(body).encode())
            else:
                payloads += [json.dumps(value).encode() for value in body["payload"]]
        return {"": payloads}

    down = endpoints(failures=1_000, status=503)

    def failing() -> BatchingSink:
        return webhook_sink(
            down.uri(), webhook_sink_config='{"Retry": {"Max": 2, "Backoff": "1ms"}}'
        )

    return SinkSetup(
        lambda: webhook_sink(endpoint.uri(), **options),
        reader,
        failing=failing,
        recover=down.recover,
    )


def test_the_webhook_sink_keeps_the_sink_contract(webhook_setup: SinkSetup) -> None:
    webhook_setup.check()


# End to end.


def test_a_changefeed_into_a_webhook_delivers_rows_then_resolved(
    db: DB, endpoint: WebhookEndpoint
) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    db.sql(
        f"CREATE CHANGEFEED FOR t INTO '{endpoint.uri()}' WITH updated, resolved='0s', "
        "min_checkpoint_frequency='0s', webhook_auth_header='Bearer e2e', "
        """webhook_sink_config='{"Flush": {"Messages": 10}}'"""
    )
    endpoint.wait_for(lambda got: len(_rows(got)) >= 3, "the initial scan")
    db.sql("UPDATE t SET v = 'B' WHERE k = 2")

    def update_resolved(got: list[Received]) -> bool:
        updates = [r for r in _rows(got) if r["after"] == {"k": 2, "v": "B"}]
        return bool(updates) and any(
            ts >= Timestamp.parse(updates[0]["updated"]) for ts in _resolved(got)
        )

    received = endpoint.wait_for(update_resolved, "the update and a resolved post covering it")
    db.close()
    assert all(r.headers["authorization"] == "Bearer e2e" for r in received)
    afters = [r["after"] for r in _rows(received)]
    assert afters[:3] == [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}, {"k": 3, "v": "c"}]
    # each message names its row and its topic, as CockroachDB's webhook messages do
    assert all(r["key"] == [r["after"]["k"]] and r["topic"] == "t" for r in _rows(received))
    assert {"k": 2, "v": "B"} in afters[3:]
    # No row at or below a resolved timestamp follows it.
    resolved = Timestamp(0, 0)
    for request in received:
        body = request.json
        if "resolved" in body:
            assert Timestamp.parse(body["resolved"]) >= resolved
            resolved = Timestamp.parse(body["resolved"])
            continue
        assert body["length"] == len(body["payload"])
        for row in body["payload"]:
            assert Timestamp.parse(row["updated"]) > resolved


def test_a_csv_export_into_a_webhook_posts_its_rows_as_csv(
    db: DB, endpoint: WebhookEndpoint
) -> None:
    # CockroachDB's webhook sink takes format=csv (with initial_scan='only'): a batch is
    # its rows' CSV lines, sent as text/csv
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a,b'), (2, NULL), (3, 'c')")
    db.sql(
        f"CREATE CHANGEFEED FOR t INTO '{endpoint.uri()}' WITH format=csv, "
        """initial_scan='only', webhook_sink_config='{"Flush": {"Messages": 2}}'"""
    )
    received = endpoint.wait_for(
        lambda got: sum(r.body.count(b"\n") for r in got) >= 3, "the three rows"
    )
    assert {r.headers["content-type"] for r in received} == {"text/csv"}
    assert [len(r.body.splitlines()) for r in received] == [2, 1]
    assert b"".join(r.body for r in received) == b'1,"a,b"\n2,\n3,c\n'


def test_a_bad_sink_config_refuses_create_changefeed(db: DB, endpoint: WebhookEndpoint) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    with pytest.raises(SQLError, match=r"did you mean Flush\.Messages") as raised:
        db.sql(
            f"CREATE CHANGEFEED FOR t INTO '{endpoint.uri()}' WITH "
            """webhook_sink_config='{"Flush": {"Mesages": 10}}'"""
        )
    assert raised.value.code == "22023"


def _rows(received: list[Received]) -> list[Any]:
    return [row for r in received if "payload" in r.json for row in r.json["payload"]]


def _resolved(received: list[Received]) -> list[Timestamp]:
    return [Timestamp.parse(r.json["resolved"]) for r in received if "resolved" in r.json]
