"""The Kafka sink's ``sasl_mechanism=OAUTHBEARER`` with OAuth 2.0 client credentials,
as CockroachDB 26.1 takes them (its docs' "Kafka" sink URI parameters and the tutorial
"Connect to a Changefeed Kafka Sink with OAuth Using Okta"): ``sasl_client_id``,
``sasl_client_secret`` (base64-encoded in the URI), ``sasl_token_url`` (URL-encoded),
``sasl_scopes`` and ``sasl_grant_type``.

The token endpoint is a real HTTP server on loopback. These tests check the request
librdkafka makes to the token endpoint and the producer's settings; a broker checking the
token (librdkafka's mock brokers speak no SASL, so one put in front of them) is in
test_kafka_oauth_broker.py."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote

import pytest

from feedkv.changefeed.changefeed import ChangefeedSpec
from feedkv.changefeed.jobs import JobRecord, redacted
from feedkv.changefeed.options import ChangefeedOptions, parse_options
from feedkv.changefeed.sink import parse_sink_uri
from feedkv.changefeed.sinks import kafka
from feedkv.changefeed.sinks.kafka import producer_config
from feedkv.errors import SQLError
from feedkv.security.secrets import Sealer, new_key
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0
SECRET = "s3cr3t+/=&"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def oauth_uri(token_url: str, extra: str = "", *, host: str = "127.0.0.1:9092") -> str:
    """A Kafka sink URI with OAuth client credentials, written as CockroachDB's docs
    write one: the secret base64-encoded and URL-escaped, the token URL URL-encoded."""
    return (
        f"kafka://{host}?topic_name=vehicles&sasl_enabled=true&sasl_mechanism=OAUTHBEARER"
        f"&sasl_client_id=feedkv-client&sasl_client_secret={quote(b64(SECRET), safe='')}"
        f"&sasl_token_url={quote(token_url, safe='')}{extra}"
    )


def config_of(uri: str) -> dict[str, Any]:
    return producer_config(parse_sink_uri(uri, ChangefeedOptions()), ChangefeedOptions())


class TokenEndpoint:
    """An OAuth 2.0 token endpoint on loopback: it answers every POST with a JWT
    (librdkafka reads a token's ``exp`` and ``sub``) and records the requests."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, list[str]]]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                form = parse_qs(body.decode(), keep_blank_values=True)
                endpoint.requests.append((self.path, dict(self.headers), form))
                answer = json.dumps(
                    {"access_token": jwt(), "token_type": "bearer", "expires_in": 3600}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}/oauth2/token"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def jwt() -> str:
    def part(claims: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part({'sub': 'feedkv', 'exp': 4102444800, 'iat': 1})}."


@pytest.fixture
def token_endpoint() -> Iterator[TokenEndpoint]:
    endpoint = TokenEndpoint()
    yield endpoint
    endpoint.close()


# The settings librdkafka gets.


def test_oauth_client_credentials_become_librdkafka_oidc_settings() -> None:
    config = config_of(oauth_uri("https://idp.example/oauth2/v1/token", "&sasl_scopes=kafka"))
    assert config["security.protocol"] == "SASL_PLAINTEXT"
    assert config["sasl.mechanism"] == "OAUTHBEARER"
    assert config["sasl.oauthbearer.method"] == "oidc"
    assert config["sasl.oauthbearer.client.id"] == "feedkv-client"
    assert config["sasl.oauthbearer.client.secret"] == SECRET  # decoded from base64
    assert config["sasl.oauthbearer.token.endpoint.url"] == "https://idp.example/oauth2/v1/token"
    assert config["sasl.oauthbearer.grant.type"] == "client_credentials"
    assert config["sasl.oauthbearer.scope"] == "kafka"
    assert "sasl.username" not in config and "sasl.password" not in config


def test_scopes_may_repeat_as_in_cockroachdb() -> None:
    """CockroachDB reads every ``sasl_scopes`` parameter; the token request's ``scope``
    holds them separated by spaces (RFC 6749 3.3)."""
    url = "https://idp.example/token"
    repeated = config_of(oauth_uri(url, "&sasl_scopes=read&sasl_scopes=write"))
    assert repeated["sasl.oauthbearer.scope"] == "read write"
    assert "sasl.oauthbearer.scope" not in config_of(oauth_uri(url))


def test_tls_and_the_explicit_handshake_and_grant_type_are_taken() -> None:
    config = config_of(
        oauth_uri(
            "https://idp.example/token",
            "&tls_enabled=true&sasl_handshake=true&sasl_grant_type=client_credentials",
        )
    )
    assert config["security.protocol"] == "SASL_SSL"
    assert config["sasl.oauthbearer.grant.type"] == "client_credentials"


def test_an_unpadded_url_safe_secret_decodes() -> None:
    encoded = base64.urlsafe_b64encode(b"ab?").decode().rstrip("=")
    uri = oauth_uri("https://idp.example/token").replace(quote(b64(SECRET), safe=""), encoded)
    assert config_of(uri)["sasl.oauthbearer.client.secret"] == "ab?"


TOKEN = quote("https://idp.example/token", safe="")
OAUTH = "kafka://h:9092?sasl_enabled=true&sasl_mechanism=OAUTHBEARER"
CREDENTIALS = f"sasl_client_id=c&sasl_client_secret={b64('s')}&sasl_token_url={TOKEN}"


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        (f"{OAUTH}&sasl_client_secret={b64('s')}&sasl_token_url={TOKEN}", "sasl_client_id is"),
        (f"{OAUTH}&sasl_client_id=c&sasl_token_url={TOKEN}", "sasl_client_secret is needed"),
        (f"{OAUTH}&sasl_client_id=c&sasl_client_secret={b64('s')}", "sasl_token_url is needed"),
        (
            f"{OAUTH}&sasl_client_id=c&sasl_client_secret=!!&sasl_token_url={TOKEN}",
            "sasl_client_secret is not base64",
        ),
        (
            f"{OAUTH}&sasl_client_id=c&sasl_client_secret={b64('s')}&sasl_token_url=idp/token",
            "sasl_token_url='idp/token' is not an http(s) URL",
        ),
        (f"{OAUTH}&{CREDENTIALS}&sasl_grant_type=password", "sasl_grant_type='password'"),
        (f"{OAUTH}&{CREDENTIALS}&sasl_user=u", "sasl_user is not used with"),
        (
            f"kafka://h:9092?sasl_enabled=true&sasl_user=u&sasl_password=p&{CREDENTIALS}",
            "sasl_client_id is for sasl_mechanism=OAUTHBEARER, not PLAIN",
        ),
        (f"kafka://h:9092?{CREDENTIALS}", "sasl_client_id needs sasl_enabled=true"),
        (f"{OAUTH}&{CREDENTIALS}&sasl_handshake=false", "sasl_handshake=false is for Kafka"),
        (f"{OAUTH}&{CREDENTIALS}&sasl_handshake=nope", "sasl_handshake='nope' is not a boolean"),
        (f"{OAUTH}&{CREDENTIALS}&sasl_client_id=d", "sasl_client_id' is given more than once"),
    ],
)
def test_bad_oauth_params_are_refused_naming_the_parameter(uri: str, message: str) -> None:
    options = ChangefeedOptions()
    with pytest.raises(SQLError) as raised:
        kafka.make(parse_sink_uri(uri, options), options)
    assert raised.value.code == "22023"
    assert message in raised.value.message


# The token request, made by librdkafka to a real endpoint.


def test_the_producer_fetches_its_token_with_the_client_credentials(
    token_endpoint: TokenEndpoint,
) -> None:
    """librdkafka POSTs the client credentials as Go's clientcredentials package does for
    CockroachDB: the id and the (decoded) secret in HTTP Basic auth, ``grant_type`` and
    the space-separated ``scope`` in the form."""
    uri = oauth_uri(token_endpoint.url, "&sasl_scopes=kafka.write&sasl_scopes=kafka.read")
    options = ChangefeedOptions()
    sink = kafka.make(parse_sink_uri(uri, options), options)
    try:
        wait_until(lambda: token_endpoint.requests, timeout_s=DEADLINE, what="a token request")
    finally:
        sink.close()
    path, headers, form = token_endpoint.requests[0]
    assert path == "/oauth2/token"
    scheme, _, credentials = headers["Authorization"].partition(" ")
    assert scheme == "Basic"
    assert base64.b64decode(credentials).decode() == f"feedkv-client:{SECRET}"
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert form == {"grant_type": ["client_credentials"], "scope": ["kafka.write kafka.read"]}


def test_a_token_endpoint_that_is_down_is_named_when_the_brokers_cannot_be_used() -> None:
    """No broker can be reached without a token: the dial's error says why."""
    down = "http://127.0.0.1:9/oauth2/token"  # the discard port: nothing listens
    options = ChangefeedOptions()
    sink = kafka.make(parse_sink_uri(oauth_uri(down, host="127.0.0.1:9"), options), options)
    try:
        with pytest.raises(Exception) as raised:
            sink.dial(2.0)
    finally:
        sink.close()
    assert "no OAuth token could be fetched" in str(raised.value)
    assert down in str(raised.value)


# Secrets at rest and on show.


def test_the_client_secret_is_redacted_on_show_and_sealed_at_rest() -> None:
    uri = oauth_uri("https://idp.example/token")
    encoded = b64(SECRET)
    shown = redacted(uri)
    assert "sasl_client_secret=redacted" in shown
    assert encoded not in shown and quote(encoded, safe="") not in shown
    assert "sasl_client_id=feedkv-client" in shown  # not a secret: kept, as CockroachDB
    now = Timestamp(1_700_000_000_000_000_000, 0)
    options = parse_options((), now=now)
    spec = ChangefeedSpec((), {}, options, now, uri)
    stored = JobRecord(7, spec, created=now).to_json(Sealer(new_key()))
    assert quote(encoded, safe="").encode() not in stored
    assert encoded.encode() not in stored and SECRET.encode() not in stored
