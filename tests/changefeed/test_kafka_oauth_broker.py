"""``sasl_mechanism=OAUTHBEARER`` against a broker that checks the token, and a Microsoft
Entra ID service principal for Azure Event Hubs' Kafka endpoint.

librdkafka's mock brokers speak no SASL (their request handlers have no SaslHandshake or
SaslAuthenticate: "SASL Handshake not supported by broker"), so the broker is the mock
cluster behind :class:`~feedkv.testing.kafka_sasl.SaslFront`, which answers the SASL
exchange as a Kafka broker does and checks the JWT
(:class:`~feedkv.testing.oauth_server.JWTCheck`: signature, expiry on its own clock,
audience, tenant). Tokens come from :class:`~feedkv.testing.oauth_server.TokenServer`, a
client-credentials token endpoint on loopback that checks the client's secret.

Event Hubs: CockroachDB 26.1's ``azure-event-hub://`` takes only a shared access key
(``shared_access_key_name`` and ``shared_access_key``; its ``buildAzureKafkaConfig``
forces SASL PLAIN with the namespace's connection string), so a service principal goes,
in CockroachDB as here, through ``kafka://<namespace>.servicebus.windows.net:9093`` with
OAUTHBEARER client credentials: ``sasl_client_id`` (the application id),
``sasl_client_secret``, ``sasl_token_url`` (Entra ID's
``https://login.microsoftonline.com/<tenant>/oauth2/v2.0/token``) and ``sasl_scopes``
(``https://<namespace>.servicebus.windows.net/.default``, whose token Event Hubs takes;
Microsoft's "Authenticate an application with Microsoft Entra ID to access Event Hubs
resources"). Entra ID takes the client's credentials in HTTP Basic auth, as librdkafka
sends them ("The Basic auth pattern ... per RFC 6749 is also supported", Microsoft identity
platform's client credentials flow)."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.sink import Message, parse_sink_uri
from feedkv.changefeed.sinks import kafka
from feedkv.changefeed.sinks.kafka import producer_config
from feedkv.errors import SQLError
from feedkv.testing.kafka_mock import read_topic
from feedkv.testing.kafka_sasl import SaslFront
from feedkv.testing.oauth_server import JWTCheck, TokenServer
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

IDP_KEY = b"the identity provider's signing key"
CLIENT, SECRET = "feedkv-app", "s3cr3t+/="
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
NAMESPACE = "feeds.servicebus.windows.net"
SCOPE = f"https://{NAMESPACE}/.default"
DIAL_S = 6.0


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def oauth_uri(bootstrap: str, token_url: str, *, secret: str = SECRET, extra: str = "") -> str:
    return (
        f"kafka://{bootstrap}?topic_prefix=oauth_&sasl_enabled=true&sasl_mechanism=OAUTHBEARER"
        f"&sasl_client_id={CLIENT}&sasl_client_secret={quote(b64(secret), safe='')}"
        f"&sasl_token_url={quote(token_url, safe='')}{extra}"
    )


def sasl_settings(uri: str) -> dict[str, Any]:
    """The SASL settings of ``uri``'s producer, for a consumer reading back."""
    config = producer_config(parse_sink_uri(uri, ChangefeedOptions()), ChangefeedOptions())
    return {k: v for k, v in config.items() if k.startswith(("sasl.", "security."))}


def make_sink(uri: str) -> kafka.KafkaSink:
    options = ChangefeedOptions()
    return kafka.make(parse_sink_uri(uri, options), options, flush_timeout=30.0)


def check_uri(uri: str) -> SQLError:
    options = ChangefeedOptions()
    with pytest.raises(SQLError) as raised:
        # NB: the dial reads why the brokers refused from the client's log (librdkafka
        # retries them); with no refusal logged, it waits out its timeout
        kafka.check(parse_sink_uri(uri, options), options, timeout=DIAL_S)
    return raised.value


@pytest.fixture
def idp() -> Iterator[TokenServer]:
    server = TokenServer({CLIENT: SECRET}, key=IDP_KEY)
    yield server
    server.close()


@pytest.fixture
def entra() -> Iterator[TokenServer]:
    """Entra ID's token endpoint for one tenant, granting Event Hubs namespaces' scope."""
    server = TokenServer(
        {CLIENT: SECRET},
        key=IDP_KEY,
        path=f"/{TENANT}/oauth2/v2.0/token",
        scopes=frozenset({SCOPE, "https://other.servicebus.windows.net/.default"}),
        issuer=f"https://sts.windows.net/{TENANT}/",
        tenant=TENANT,
    )
    yield server
    server.close()


def all_records(records: dict[int, list[Any]]) -> list[tuple[bytes | None, bytes | None]]:
    return [(r.key, r.value) for rs in records.values() for r in rs]


# A broker that checks the token.


def test_a_sink_delivers_through_a_broker_that_checks_the_idps_tokens(idp: TokenServer) -> None:
    check = JWTCheck(IDP_KEY)
    front = SaslFront(check)
    try:
        uri = oauth_uri(front.bootstrap, idp.url)
        sink = make_sink(uri)
        try:
            sink.dial(30.0)
            sink.emit_row(
                Message("rides", b"[1]", b'{"after": 1}', Timestamp(5, 0), Timestamp(5, 0))
            )
            sink.flush()
        finally:
            sink.close()
        records = read_topic(front.bootstrap, "oauth_rides", 60.0, config=sasl_settings(uri))
    finally:
        front.close()
    assert all_records(records) == [(b"[1]", b'{"after": 1}')]
    assert front.refused == [] and front.accepted >= 2  # the sink's and the reader's
    assert set(check.subjects) == {CLIENT}


def test_a_token_the_broker_does_not_trust_fails_create_changefeed(idp: TokenServer) -> None:
    """The IdP signs with a key the broker does not trust: the broker refuses the token
    and CREATE CHANGEFEED fails as the caller's mistake (22023), with its reason."""
    front = SaslFront(JWTCheck(b"another issuer's key"))
    try:
        error = check_uri(oauth_uri(front.bootstrap, idp.url))
    finally:
        front.close()
    assert error.code == "22023"
    assert "refuse this client" in error.message
    assert "the token's signature is not by a trusted issuer" in error.message
    assert front.accepted == 0 and front.refused


def test_a_token_expired_on_the_brokers_clock_is_refused(idp: TokenServer) -> None:
    front = SaslFront(JWTCheck(IDP_KEY, clock=lambda: time.time() + 7200))
    try:
        error = check_uri(oauth_uri(front.bootstrap, idp.url))
    finally:
        front.close()
    assert (error.code, "the token has expired" in error.message) == ("22023", True)


def test_a_wrong_client_secret_gets_no_token_and_says_so(idp: TokenServer) -> None:
    """The IdP answers ``invalid_client``: no token, so no broker is reached, and the
    error names the token endpoint's answer."""
    front = SaslFront(JWTCheck(IDP_KEY))
    try:
        error = check_uri(oauth_uri(front.bootstrap, idp.url, secret="wrong"))
    finally:
        front.close()
    assert "no OAuth token could be fetched" in error.message
    assert "401" in error.message or "invalid_client" in error.message
    assert (CLIENT, 401) in idp.requests
    assert front.accepted == 0


# Azure Event Hubs with a Microsoft Entra ID service principal.


def event_hubs_uri(bootstrap: str, token_url: str, scope: str = SCOPE) -> str:
    """CockroachDB's form for a service principal (TLS left out: the mock speaks none)."""
    return (
        f"kafka://{bootstrap}?sasl_enabled=true&sasl_mechanism=OAUTHBEARER"
        f"&sasl_client_id={CLIENT}&sasl_client_secret={quote(b64(SECRET), safe='')}"
        f"&sasl_token_url={quote(token_url, safe='')}&sasl_scopes={quote(scope, safe='')}"
    )


def test_a_service_principal_changefeed_delivers_to_an_event_hubs_namespace(
    db: Any, entra: TokenServer
) -> None:
    """CREATE CHANGEFEED with the service principal's client credentials: the job's sink
    gets a token for the namespace from the tenant's endpoint, the broker takes only a
    token of that tenant for that namespace, the rows arrive, and the secret is redacted
    in SHOW CHANGEFEED JOBS."""
    check = JWTCheck(IDP_KEY, audience=f"https://{NAMESPACE}", tenant=TENANT)
    front = SaslFront(check)
    try:
        uri = event_hubs_uri(front.bootstrap, entra.url)
        db.sql("CREATE TABLE rides (id INT PRIMARY KEY, city STRING)")
        db.sql("INSERT INTO rides VALUES (1, 'paris'), (2, 'lyon')")
        [(job_id,)] = db.sql(f"CREATE CHANGEFEED FOR rides INTO '{uri}'").rows
        try:
            records = wait_until(
                lambda: (
                    found
                    if len(
                        all_records(
                            found := read_topic(
                                front.bootstrap, "rides", 60.0, config=sasl_settings(uri)
                            )
                        )
                    )
                    >= 2
                    else None
                ),
                timeout_s=120.0,
                what="the changefeed's two rows in the event hub",
            )
            shown = str(db.sql("SHOW CHANGEFEED JOBS").rows)
        finally:
            db.sql(f"CANCEL JOB {job_id}")
    finally:
        front.close()
    assert sorted(all_records(records)) == [
        (b"[1]", b'{"after": {"city": "paris", "id": 1}}'),
        (b"[2]", b'{"after": {"city": "lyon", "id": 2}}'),
    ]
    assert set(check.subjects) == {CLIENT} and front.refused == []
    assert "sasl_client_secret=redacted" in shown
    assert b64(SECRET) not in shown and quote(b64(SECRET), safe="") not in shown


def test_a_token_for_another_namespace_is_refused_by_the_event_hub(entra: TokenServer) -> None:
    front = SaslFront(JWTCheck(IDP_KEY, audience=f"https://{NAMESPACE}", tenant=TENANT))
    try:
        error = check_uri(
            event_hubs_uri(
                front.bootstrap, entra.url, "https://other.servicebus.windows.net/.default"
            )
        )
    finally:
        front.close()
    assert error.code == "22023"
    assert "the token's audience 'https://other.servicebus.windows.net'" in error.message


@pytest.mark.parametrize(
    "params",
    [
        "&sasl_mechanism=OAUTHBEARER",
        f"&sasl_client_id={CLIENT}&sasl_token_url=https%3A%2F%2Flogin.microsoftonline.com",
    ],
)
def test_azure_event_hub_scheme_refuses_a_service_principal_saying_how(params: str) -> None:
    """As CockroachDB's ``azure-event-hub://``, the scheme takes the shared access key
    only; the error shows the ``kafka://`` form a service principal takes."""
    options = ChangefeedOptions()
    uri = f"azure-event-hub://{NAMESPACE}:9093?shared_access_key_name=n&shared_access_key=k{params}"
    with pytest.raises(SQLError) as raised:
        kafka.make(parse_sink_uri(uri, options), options)
    assert raised.value.code == "22023"
    assert f"'kafka://{NAMESPACE}:9093?tls_enabled=true&sasl_enabled=true" in raised.value.message
    assert "login.microsoftonline.com/<tenant id>/oauth2/v2.0/token" in raised.value.message
