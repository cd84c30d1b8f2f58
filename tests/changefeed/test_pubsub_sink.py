"""The ``gcpubsub://`` sink, as CockroachDB 26.1 documents it ("Changefeed Sinks", "Google
Cloud Pub/Sub": ``gcpubsub://{project}?region={region}&topic_name={topic}&AUTH=specified
&CREDENTIALS={base64 key}``, ``with_table_name_attribute``, ``pubsub_sink_config``; a
region is required unless the changefeed is ``unordered``) and as its
``sink_pubsub_v2.go`` publishes (each message's data ``{"Key":...,"Value":...,"Topic":...}``,
resolved messages to every topic, topics created on first use).

The server is Google's own Pub/Sub emulator (Debian's google-cloud-cli-pubsub-emulator,
a Java server) on loopback, reached through ``PUBSUB_EMULATOR_HOST`` as Google's clients
and CockroachDB reach it; a separate pull subscription reads back what was published."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from feedkv.changefeed.changefeed import ChangefeedSpec
from feedkv.changefeed.jobs import JobRecord
from feedkv.changefeed.options import ChangefeedOptions, parse_options
from feedkv.changefeed.sink import (
    Message,
    SinkError,
    TerminalSinkError,
    parse_sink_uri,
    sink_topics,
)
from feedkv.changefeed.sinks import pubsub
from feedkv.errors import SQLError
from feedkv.security.secrets import Sealer, new_key
from feedkv.testing import oauth_server
from feedkv.testing.oauth_server import ImpersonationServer, JWTCheck, TokenServer
from feedkv.testing.pubsub_emulator import (
    AuthenticatingFront,
    PulledMessage,
    Subscription,
    pubsub_emulator,
)
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

PROJECT = "feedkv-test"
NOW = Timestamp(1_700_000_000_000_000_000, 0)


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    with pubsub_emulator() as host:
        yield host


@pytest.fixture
def pubsub_env(emulator: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", emulator)
    return emulator


EMAIL = f"changefeeds@{PROJECT}.iam.gserviceaccount.com"


def service_account_key(
    token_uri: str = "https://oauth2.googleapis.com/token",
) -> tuple[str, bytes]:
    """``EMAIL``'s key, its tokens from ``token_uri``, and its public half."""
    return oauth_server.service_account_key(PROJECT, EMAIL, token_uri)


KEY, _ = service_account_key()


def make_sink(uri: str, options: ChangefeedOptions | None = None) -> Any:
    options = options or ChangefeedOptions()
    return pubsub.make(parse_sink_uri(uri, options), options)


def pull(subscription: Subscription, count: int) -> list[PulledMessage]:
    got: list[PulledMessage] = []

    def enough() -> bool:
        got.extend(subscription.pull())
        return len(got) >= count

    wait_until(enough, timeout_s=60.0, what=f"{count} Pub/Sub messages")
    return got


def row(topic: str, key: bytes, value: bytes, wall: int = 5) -> Message:
    return Message(topic, key, value, Timestamp(wall, 0), Timestamp(wall, 0))


# Messages.


def test_rows_and_resolved_are_published_as_cockroachdb_publishes_them(pubsub_env: str) -> None:
    subscription = Subscription(pubsub_env, PROJECT, "rides", "rides-reader")
    sink = make_sink(f"gcpubsub://{PROJECT}?region=us-east1&CREDENTIALS={quote(KEY, safe='')}")
    try:
        sink.emit_row(row("rides", b'["paris", 1]', b'{"after": {"city": "paris", "id": 1}}'))
        sink.emit_row(row("rides", b'["lyon", 2]', b'{"after": null}', wall=6))
        sink.flush()
        sink.emit_resolved(Timestamp(10, 0), ["rides"])
    finally:
        sink.close()
    # NB: Pub/Sub delivers in no set order without ordering keys, and CockroachDB's sink
    # sets none
    messages = pull(subscription, 3)
    assert sorted(m.data for m in messages) == [
        b'{"Key":["lyon", 2],"Value":{"after": null},"Topic":"rides"}',
        b'{"Key":["paris", 1],"Value":{"after": {"city": "paris", "id": 1}},"Topic":"rides"}',
        b'{"resolved":"10.0000000000"}',
    ]
    assert all(m.attributes == {} for m in messages)


def test_topic_name_and_the_table_name_attribute(pubsub_env: str) -> None:
    """``topic_name`` sends every table to one topic; ``with_table_name_attribute``
    tells them apart by the ``TABLE_NAME`` attribute; resolved goes once to that topic."""
    subscription = Subscription(pubsub_env, PROJECT, "all-tables", "all-tables-reader")
    sink = make_sink(
        f"gcpubsub://{PROJECT}?region=europe-west1&topic_name=all-tables"
        f"&with_table_name_attribute=true&CREDENTIALS={quote(KEY, safe='')}"
    )
    try:
        sink.emit_row(row("rides", b"[1]", b'{"after": {"id": 1}}'))
        sink.emit_row(row("users", b"[7]", b'{"after": {"id": 7}}'))
        sink.flush()
        sink.emit_resolved(Timestamp(10, 0), ["rides", "users"])
    finally:
        sink.close()
    messages = pull(subscription, 3)
    assert sorted((m.attributes.get("TABLE_NAME", ""), m.data) for m in messages) == [
        ("", b'{"resolved":"10.0000000000"}'),
        ("rides", b'{"Key":[1],"Value":{"after": {"id": 1}},"Topic":"rides"}'),
        ("users", b'{"Key":[7],"Value":{"after": {"id": 7}},"Topic":"users"}'),
    ]


def test_the_changefeed_names_the_pubsub_topics_it_publishes_to() -> None:
    """What CREATE CHANGEFEED announces and SHOW CHANGEFEED JOBS lists as ``topics``:
    each table's own topic, or ``topic_name`` for all (a webhook has none)."""
    own = parse_sink_uri(f"gcpubsub://{PROJECT}?region=europe-west1", ChangefeedOptions())
    named = parse_sink_uri(f"gcpubsub://{PROJECT}?topic_name=all-tables", ChangefeedOptions())
    webhook = parse_sink_uri("webhook-https://127.0.0.1:1/hook", ChangefeedOptions())
    assert sink_topics(own, ["users", "rides"]) == ("rides", "users")
    assert sink_topics(named, ["users", "rides"]) == ("all-tables",)
    assert sink_topics(webhook, ["users"]) is None


def test_a_missing_topic_is_created_before_the_first_publish(pubsub_env: str) -> None:
    topic_url = f"http://{pubsub_env}/v1/projects/{PROJECT}/topics/fresh-topic"
    assert httpx.get(topic_url, timeout=60.0).status_code == 404
    sink = make_sink(f"gcpubsub://{PROJECT}?region=us-east1&CREDENTIALS={quote(KEY, safe='')}")
    try:
        sink.emit_row(row("fresh-topic", b"[1]", b'{"after": {"id": 1}}'))
        sink.flush()
    finally:
        sink.close()
    assert httpx.get(topic_url, timeout=60.0).status_code == 200


def test_a_changefeed_publishes_its_rows_and_hides_the_key_on_show(
    db: Any, pubsub_env: str
) -> None:
    """CREATE CHANGEFEED into ``gcpubsub://`` with a service account key: the rows
    arrive as CockroachDB publishes them, and ``CREDENTIALS`` is redacted in SHOW
    CHANGEFEED JOBS."""
    subscription = Subscription(pubsub_env, PROJECT, "orders", "orders-reader")
    db.sql("CREATE TABLE orders (id INT PRIMARY KEY, item STRING)")
    db.sql("INSERT INTO orders VALUES (1, 'tea'), (2, 'cake')")
    uri = f"gcpubsub://{PROJECT}?region=us-east1&AUTH=specified&CREDENTIALS={quote(KEY, safe='')}"
    [(job_id,)] = db.sql(f"CREATE CHANGEFEED FOR orders INTO '{uri}'").rows
    try:
        messages = pull(subscription, 2)
        shown = str(db.sql("SHOW CHANGEFEED JOBS").rows)
    finally:
        db.sql(f"CANCEL JOB {job_id}")
    assert sorted(m.data for m in messages) == [
        b'{"Key":[1],"Value":{"after": {"id": 1, "item": "tea"}},"Topic":"orders"}',
        b'{"Key":[2],"Value":{"after": {"id": 2, "item": "cake"}},"Topic":"orders"}',
    ]
    assert "CREDENTIALS=redacted" in shown
    assert KEY[:40] not in shown and quote(KEY, safe="")[:40] not in shown


# Bad parameters, at CREATE CHANGEFEED.

GOOD = f"CREDENTIALS={quote(KEY, safe='')}"


@pytest.mark.parametrize(
    ("uri", "options", "message"),
    [
        (
            f"gcpubsub://{PROJECT}?{GOOD}",
            {},
            "sink parameter region is needed by gcpubsub:// sinks",
        ),
        (f"gcpubsub://{PROJECT}?region=us-east1", {}, "CREDENTIALS is needed with AUTH=specified"),
        (
            f"gcpubsub://{PROJECT}?region=us-east1&CREDENTIALS=not-base64!",
            {},
            "CREDENTIALS is not a base64-encoded service account key",
        ),
        (
            f"gcpubsub://{PROJECT}?region=us-east1&CREDENTIALS={base64.b64encode(b'{}').decode()}",
            {},
            "CREDENTIALS is not a base64-encoded service account key",
        ),
        (
            f"gcpubsub://{PROJECT}?region=us-east1&AUTH=implicit&{GOOD}",
            {},
            "CREDENTIALS is not used with AUTH=implicit",
        ),
        (f"gcpubsub://{PROJECT}?region=us-east1&AUTH=magic&{GOOD}", {}, "AUTH='magic'"),
        (
            f"gcpubsub://{PROJECT}?region=us-east1&{GOOD}&ASSUME_ROLE=feeds,x@p.iam",
            {},
            "ASSUME_ROLE='feeds,x@p.iam': 'feeds' is not a service account email",
        ),
        (f"gcpubsub://Bad_Project?region=us-east1&{GOOD}", {}, "is not a Google Cloud project id"),
        (f"gcpubsub://?region=us-east1&{GOOD}", {}, "needs a project"),
        (
            f"gcpubsub://{PROJECT}?region=us-east1&{GOOD}&topic_name=a",
            {},
            "topic_name='a' is not a Pub/Sub topic name",
        ),
        (
            f"gcpubsub://{PROJECT}?region=us-east1&{GOOD}",
            {"pubsub_sink_config": '{"Flush": {"Mesages": 5}}'},
            "option pubsub_sink_config: unknown key Flush.Mesages; did you mean Flush.Messages?",
        ),
    ],
    ids=oauth_server.key_hidden(KEY),
)
def test_bad_pubsub_parameters_are_refused_naming_them(
    uri: str, options: dict[str, str], message: str
) -> None:
    parsed = parse_options(tuple(options.items()), now=NOW)
    with pytest.raises(SQLError) as raised:
        pubsub.make(parse_sink_uri(uri, parsed), parsed)
    assert raised.value.code == "22023"
    assert message in raised.value.message


def test_no_region_is_needed_when_unordered() -> None:
    options = parse_options((("unordered", None),), now=NOW)
    sink = pubsub.make(parse_sink_uri(f"gcpubsub://{PROJECT}?{GOOD}", options), options)
    sink.close()


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            f"CREATE CHANGEFEED FOR t INTO 'gcpubsub://{PROJECT}?{GOOD}'",
            "sink parameter region is needed by gcpubsub:// sinks",
        ),
        (
            f"CREATE CHANGEFEED FOR t INTO 'gcpubsub://{PROJECT}?region=us-east1&{GOOD}' "
            "WITH format=avro",
            "avro",
        ),
        (
            f"CREATE CHANGEFEED FOR t INTO 'gcpubsub://{PROJECT}?region=us-east1&{GOOD}' "
            "WITH envelope=key_only",
            "key_only",
        ),
        (
            f"CREATE CHANGEFEED FOR t INTO 'gcpubsub://{PROJECT}?region=us-east1&{GOOD}&regoin=x'",
            "regoin",
        ),
    ],
    ids=oauth_server.key_hidden(KEY),
)
def test_create_changefeed_refuses_a_bad_pubsub_sink(db: Any, sql: str, message: str) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    with pytest.raises(SQLError) as raised:
        db.sql(sql)
    assert raised.value.code == "22023"
    assert message in raised.value.message


# Signing in: the emulator checks no token, so a front that does stands before it.

GOOGLE_KEY = b"the token server's signing key"


@pytest.fixture
def google_token_server() -> Iterator[TokenServer]:
    """Google's OAuth token endpoint on loopback: it takes a service account's signed
    assertion (what google-auth sends for a JSON key) and issues tokens."""
    server = TokenServer({}, key=GOOGLE_KEY, path="/token")
    yield server
    server.close()


def test_credentials_sign_in_as_the_service_account(
    emulator: str, google_token_server: TokenServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CREDENTIALS``: the key's account gets a token for Pub/Sub's scope from the
    key's token endpoint (an assertion signed with its private key), and every request
    carries it; an endpoint that checks tokens takes the messages."""
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    key, public = service_account_key(google_token_server.url)
    google_token_server.add_service_account(EMAIL, public)
    check = JWTCheck(GOOGLE_KEY, audience=pubsub.SCOPE)
    front = AuthenticatingFront(emulator, check)
    subscription = Subscription(emulator, PROJECT, "signed-in", "signed-in-reader")
    try:
        options = ChangefeedOptions()
        sink = pubsub.make(
            parse_sink_uri(
                f"gcpubsub://{PROJECT}?region=us-east1&CREDENTIALS={quote(key, safe='')}", options
            ),
            options,
            endpoint=front.url,
        )
        try:
            sink.emit_row(row("signed-in", b"[1]", b'{"after": {"id": 1}}'))
            sink.flush()
        finally:
            sink.close()
    finally:
        front.close()
    [message] = pull(subscription, 1)
    assert message.data == b'{"Key":[1],"Value":{"after": {"id": 1}},"Topic":"signed-in"}'
    assert front.refused == []
    assert set(check.subjects) == {EMAIL}
    assert (EMAIL, 200) in google_token_server.requests


def test_a_token_the_endpoint_refuses_fails_the_sink_for_good(
    emulator: str, google_token_server: TokenServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 401 is no fault a retry mends: the sink's error is terminal and says why."""
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    key, public = service_account_key(google_token_server.url)
    google_token_server.add_service_account(EMAIL, public)
    front = AuthenticatingFront(emulator, JWTCheck(b"another issuer's key"))
    try:
        options = parse_options(
            (("pubsub_sink_config", '{"Retry": {"Max": 1, "Backoff": "10ms"}}'),), now=NOW
        )
        sink = pubsub.make(
            parse_sink_uri(
                f"gcpubsub://{PROJECT}?region=us-east1&CREDENTIALS={quote(key, safe='')}", options
            ),
            options,
            endpoint=front.url,
        )
        try:
            sink.emit_row(row("refused-topic", b"[1]", b'{"after": {"id": 1}}'))
            with pytest.raises(TerminalSinkError) as raised:
                sink.flush()
        finally:
            sink.close()
    finally:
        front.close()
    assert "401" in str(raised.value)
    assert "the token's signature is not by a trusted issuer" in str(raised.value)


def test_auth_implicit_uses_the_machines_application_default_credentials(
    emulator: str,
    google_token_server: TokenServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    """``AUTH=implicit``: the key Application Default Credentials name
    (``GOOGLE_APPLICATION_CREDENTIALS``), not one in the URI."""
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    key, public = service_account_key(google_token_server.url)
    google_token_server.add_service_account(EMAIL, public)
    key_file = tmp_path / "key.json"
    key_file.write_bytes(base64.b64decode(key))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
    check = JWTCheck(GOOGLE_KEY, audience=pubsub.SCOPE)
    front = AuthenticatingFront(emulator, check)
    subscription = Subscription(emulator, PROJECT, "implicit", "implicit-reader")
    try:
        options = ChangefeedOptions()
        sink = pubsub.make(
            parse_sink_uri(f"gcpubsub://{PROJECT}?region=us-east1&AUTH=implicit", options),
            options,
            endpoint=front.url,
        )
        try:
            sink.emit_row(row("implicit", b"[1]", b'{"after": {"id": 1}}'))
            sink.flush()
        finally:
            sink.close()
    finally:
        front.close()
    assert len(pull(subscription, 1)) == 1
    assert set(check.subjects) == {EMAIL}


def test_the_key_is_sealed_in_the_job_record() -> None:
    """``CREDENTIALS`` is never stored in clear: the job record seals it."""
    uri = f"gcpubsub://{PROJECT}?region=us-east1&CREDENTIALS={quote(KEY, safe='')}"
    spec = ChangefeedSpec((), {}, parse_options((), now=NOW), NOW, uri)
    stored = JobRecord(7, spec, created=NOW).to_json(Sealer(new_key()))
    assert KEY[:60].encode() not in stored
    assert quote(KEY, safe="")[:60].encode() not in stored
    assert b"BEGIN PRIVATE KEY" not in stored


TARGET = f"publisher@{PROJECT}.iam.gserviceaccount.com"
DELEGATE = f"relay@{PROJECT}.iam.gserviceaccount.com"


def test_assume_role_publishes_as_the_impersonated_account(
    emulator: str, google_token_server: TokenServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ASSUME_ROLE=<delegate>,<target>``: the key's account (with the cloud-platform
    scope) asks IAM Credentials for a token of the target through the delegate, and the
    messages are published as the target."""
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    key, public = service_account_key(google_token_server.url)
    google_token_server.add_service_account(EMAIL, public)
    # NB: google-auth narrows the key's scope to IAM's own to call IAM Credentials
    caller = JWTCheck(GOOGLE_KEY)
    iam = ImpersonationServer(
        caller,
        key=GOOGLE_KEY,
        accounts=frozenset({TARGET}),
    )
    check = JWTCheck(GOOGLE_KEY, audience=pubsub.SCOPE)
    front = AuthenticatingFront(emulator, check)
    subscription = Subscription(emulator, PROJECT, "impersonated", "impersonated-reader")
    try:
        options = ChangefeedOptions()
        uri = (
            f"gcpubsub://{PROJECT}?region=us-east1&CREDENTIALS={quote(key, safe='')}"
            f"&ASSUME_ROLE={quote(f'{DELEGATE},{TARGET}', safe='')}"
        )
        sink = pubsub.make(
            parse_sink_uri(uri, options), options, endpoint=front.url, iam_endpoint=iam.url
        )
        try:
            sink.emit_row(row("impersonated", b"[1]", b'{"after": {"id": 1}}'))
            sink.flush()
        finally:
            sink.close()
    finally:
        front.close()
        iam.close()
    assert len(pull(subscription, 1)) == 1
    assert set(check.subjects) == {TARGET}
    assert iam.requests == [(TARGET, [DELEGATE], [pubsub.SCOPE])]
    assert set(caller.subjects) == {EMAIL}  # the key's account asked


def test_an_unreachable_endpoint_is_a_retryable_sink_error(
    google_token_server: TokenServer,
) -> None:
    """A Pub/Sub that cannot be reached is a fault outside, retried by the changefeed:
    a SinkError, not a terminal one, naming the endpoint."""
    key, public = service_account_key(google_token_server.url)
    google_token_server.add_service_account(EMAIL, public)
    options = parse_options(
        (("pubsub_sink_config", '{"Retry": {"Max": 1, "Backoff": "10ms"}}'),), now=NOW
    )
    sink = pubsub.make(
        parse_sink_uri(
            f"gcpubsub://{PROJECT}?region=us-east1&CREDENTIALS={quote(key, safe='')}", options
        ),
        options,
        endpoint="http://127.0.0.1:9",  # the discard port: nothing listens
    )
    try:
        sink.emit_row(row("nowhere", b"[1]", b'{"after": {"id": 1}}'))
        with pytest.raises(SinkError) as raised:
            sink.flush()
    finally:
        sink.close()
    assert not isinstance(raised.value, TerminalSinkError)
    assert "http://127.0.0.1:9" in str(raised.value)
