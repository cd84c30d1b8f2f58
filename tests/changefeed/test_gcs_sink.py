"""The cloud storage sink into Google Cloud Storage (``gs://``), as CockroachDB 26.1's
docs write its URI (``gs://bucket/path?AUTH=specified&CREDENTIALS=<base64 key>``),
against gcp-storage-emulator (PyPI's) in this process, on loopback. The emulator takes no
credentials, so the sink reaches it with none (``GS_ENDPOINT`` and no ``CREDENTIALS``)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from feedkv import DB
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.sink import Message, make_sink, parse_sink_uri
from feedkv.changefeed.sinks.gcs import READ_WRITE_SCOPE
from feedkv.errors import SQLError
from feedkv.testing import oauth_server
from feedkv.testing.bearer_front import BearerFront
from feedkv.testing.oauth_server import ImpersonationServer, JWTCheck, TokenServer
from feedkv.testing.sink_conformance import START, SinkSetup, bucket_setup, two_rows_published
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0
PROJECT = "feeds-project"
EMAIL = f"writer@{PROJECT}.iam.gserviceaccount.com"  # the key's account
TARGET = f"loader@{PROJECT}.iam.gserviceaccount.com"  # the account impersonated
DELEGATE = f"relay@{PROJECT}.iam.gserviceaccount.com"
GOOGLE_KEY = b"the token server's signing key"


def service_account_key(token_uri: str) -> tuple[str, bytes]:
    """``EMAIL``'s key, its tokens from ``token_uri``, and its public half."""
    return oauth_server.service_account_key(PROJECT, EMAIL, token_uri)


KEY, _ = service_account_key("https://oauth2.googleapis.com/token")


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    from gcp_storage_emulator.server import create_server

    server = create_server("127.0.0.1", 0, in_memory=True)
    server.start()
    host, port = server._api._httpd.server_address  # NB: the port it was given
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def client(endpoint: str) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(
        project="test",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": endpoint},
    )


@pytest.fixture
def bucket(client: Any) -> str:
    name = f"feeds-{uuid.uuid4().hex[:12]}"
    client.create_bucket(name)
    return name


def blobs(client: Any, bucket: str, prefix: str) -> dict[str, bytes]:
    found = sorted(client.list_blobs(bucket, prefix=prefix), key=lambda b: b.name)
    return {b.name: b.download_as_bytes() for b in found}


def test_changefeed_files_land_in_the_bucket_with_resolved_markers(
    db: DB, endpoint: str, client: Any, bucket: str
) -> None:
    two_rows_published(
        db.sql,
        f"gs://{bucket}/cdc?GS_ENDPOINT={quote(endpoint, safe='')}",
        lambda: blobs(client, bucket, "cdc/"),
        "a resolved file in the bucket",
    )


def test_a_missing_bucket_fails_the_create(db: DB, endpoint: str) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    with pytest.raises(SQLError) as raised:
        db.sql(f"CREATE CHANGEFEED FOR t INTO 'gs://no-such-bucket/x?GS_ENDPOINT={endpoint}'")
    assert raised.value.code == "22023"
    assert "check the bucket and the credentials" in raised.value.message


def test_show_redacts_the_credentials() -> None:
    from feedkv.changefeed.jobs import redacted

    key = base64.b64encode(b'{"type": "service_account"}').decode()
    shown = redacted(f"gs://b/p?AUTH=specified&CREDENTIALS={quote(key, safe='')}")
    assert "CREDENTIALS=redacted" in shown and key not in shown


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("gs:///x?AUTH=implicit", "needs a bucket"),
        ("gs://b/x", "CREDENTIALS is needed with AUTH=specified"),
        ("gs://b/x?CREDENTIALS=!!", "CREDENTIALS is not a base64-encoded service account key"),
        (
            f"gs://b/x?CREDENTIALS={base64.b64encode(b'{}').decode()}",
            "CREDENTIALS is not a base64-encoded service account key",
        ),
        ("gs://b/x?AUTH=implicit&CREDENTIALS=e30=", "CREDENTIALS is not used with AUTH=implicit"),
        ("gs://b/x?AUTH=magic", "AUTH='magic': specified or implicit"),
        (
            "gs://b/x?ASSUME_ROLE=sa@p.iam.gserviceaccount.com",
            "ASSUME_ROLE needs credentials to impersonate the account with",
        ),
        (
            "gs://b/x?AUTH=implicit&ASSUME_ROLE=feeds,sa@p.iam",
            "ASSUME_ROLE='feeds,sa@p.iam': 'feeds' is not a service account email",
        ),
        (
            f"gs://b/x?CREDENTIALS={quote(KEY, safe='')}&ASSUME_ROLE={TARGET}"
            "&GS_IAM_ENDPOINT=iam.local",
            "GS_IAM_ENDPOINT='iam.local' is not an http(s) URL",
        ),
        ("gs://b/x?GS_ENDPOINT=localhost:1", "GS_ENDPOINT='localhost:1' is not an http(s) URL"),
        ("gs://b/x?CREDENTALS=x", "did you mean 'CREDENTIALS'"),
    ],
    ids=oauth_server.key_hidden(KEY),
)
def test_bad_gs_uris_are_refused_naming_the_part(uri: str, message: str) -> None:
    options = ChangefeedOptions()
    with pytest.raises(SQLError) as raised:
        make_sink(parse_sink_uri(uri, options), options, start=START)
    assert raised.value.code == "22023"
    assert message in raised.value.message


# The sink contract.


@pytest.fixture(params=["", "&partition_format=flat&file_size=256"], ids=["daily", "small-files"])
def gcs_setup(request: pytest.FixtureRequest, endpoint: str, client: Any) -> SinkSetup:
    extra: str = request.param
    return bucket_setup(
        lambda bucket: f"gs://{bucket}/kit?GS_ENDPOINT={quote(endpoint, safe='')}{extra}",
        client.create_bucket,
        lambda bucket: list(blobs(client, bucket, "kit/").values()),
    )


def test_the_gs_sink_keeps_the_sink_contract(gcs_setup: SinkSetup) -> None:
    gcs_setup.check()


# ASSUME_ROLE: service account impersonation.


@dataclass
class Google:
    """Google's side of impersonation on loopback: the OAuth token endpoint the key
    names, IAM Credentials (which lets the key's account impersonate ``TARGET`` only),
    and Cloud Storage's check of each request's token before the emulator."""

    key: str
    tokens: TokenServer
    iam: ImpersonationServer
    check: JWTCheck
    front: BearerFront

    def uri(self, bucket: str, role: str) -> str:
        iam_base = self.iam.url.split("/v1/", 1)[0]
        return (
            f"gs://{bucket}/cdc?CREDENTIALS={quote(self.key, safe='')}"
            f"&ASSUME_ROLE={quote(role, safe='')}&GS_ENDPOINT={quote(self.front.url, safe='')}"
            f"&GS_IAM_ENDPOINT={quote(iam_base, safe='')}"
        )


@pytest.fixture
def google(endpoint: str) -> Iterator[Google]:
    tokens = TokenServer({}, key=GOOGLE_KEY, path="/token")
    key, public = service_account_key(tokens.url)
    tokens.add_service_account(EMAIL, public)
    iam = ImpersonationServer(JWTCheck(GOOGLE_KEY), key=GOOGLE_KEY, accounts=frozenset({TARGET}))
    check = JWTCheck(GOOGLE_KEY, audience=READ_WRITE_SCOPE)
    front = BearerFront(endpoint, check)
    yield Google(key, tokens, iam, check, front)
    front.close()
    iam.close()
    tokens.close()


def test_assume_role_writes_the_files_as_the_impersonated_account(
    db: DB, client: Any, bucket: str, google: Google
) -> None:
    """CockroachDB's ``gs://...?AUTH=specified&CREDENTIALS=<key>&ASSUME_ROLE=<account>``:
    the key's account (with the cloud-platform scope) asks IAM Credentials'
    ``generateAccessToken`` for a token of the account for Cloud Storage's read-write
    scope, and every request to the bucket carries that token."""
    two_rows_published(
        db.sql,
        google.uri(bucket, TARGET),
        lambda: blobs(client, bucket, "cdc/"),
        "a resolved file written as the impersonated account",
    )
    assert google.front.refused == []
    assert set(google.check.subjects) == {TARGET}
    assert google.iam.requests and all(
        r == (TARGET, [], [READ_WRITE_SCOPE]) for r in google.iam.requests
    )
    assert (EMAIL, 200) in google.tokens.requests  # the key's account signed in first


def test_assume_role_goes_through_the_delegates_of_a_chain(
    client: Any, bucket: str, google: Google
) -> None:
    """``ASSUME_ROLE=<delegate>,<target>``: the last account is impersonated, the others
    named as delegates, as CockroachDB's chained roles."""
    options = ChangefeedOptions()
    sink = make_sink(
        parse_sink_uri(google.uri(bucket, f"{DELEGATE},{TARGET}"), options), options, start=START
    )
    try:
        sink.emit_row(
            Message("t", b"[1]", b'{"after": {"k": 1}}', Timestamp(5, 0), Timestamp(5, 0))
        )
        sink.flush()
    finally:
        sink.close()
    assert any(name.endswith(".ndjson") for name in blobs(client, bucket, "cdc/"))
    assert google.iam.requests and all(
        r == (TARGET, [DELEGATE], [READ_WRITE_SCOPE]) for r in google.iam.requests
    )
    assert set(google.check.subjects) == {TARGET}


def test_assume_role_with_auth_implicit_impersonates_with_the_machines_credentials(
    client: Any,
    bucket: str,
    google: Google,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``AUTH=implicit&ASSUME_ROLE=<account>``: the machine's Application Default
    Credentials (here a key file named by ``GOOGLE_APPLICATION_CREDENTIALS``) ask for the
    account's token."""
    key_file = tmp_path / "adc.json"
    key_file.write_bytes(base64.b64decode(google.key))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
    uri = google.uri(bucket, TARGET).replace(
        f"CREDENTIALS={quote(google.key, safe='')}", "AUTH=implicit"
    )
    options = ChangefeedOptions()
    sink = make_sink(parse_sink_uri(uri, options), options, start=START)
    try:
        at = Timestamp(5, 0)
        sink.emit_row(Message("t", b"[1]", b'{"after": {"k": 1}}', at, at))
        sink.flush()
    finally:
        sink.close()
    assert any(name.endswith(".ndjson") for name in blobs(client, bucket, "cdc/"))
    assert set(google.check.subjects) == {TARGET}
    assert (EMAIL, 200) in google.tokens.requests


def test_an_account_that_may_not_be_impersonated_fails_the_create(
    db: DB, bucket: str, google: Google
) -> None:
    """IAM Credentials refuses (403) to let the key's account impersonate one it has no
    role on: CREATE CHANGEFEED fails naming the parameters to check, and nothing reaches
    the bucket."""
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    other = f"admin@{PROJECT}.iam.gserviceaccount.com"
    with pytest.raises(SQLError) as raised:
        db.sql(f"CREATE CHANGEFEED FOR t INTO '{google.uri(bucket, other)}'")
    assert raised.value.code == "22023"
    assert "ASSUME_ROLE" in raised.value.message
    assert "permission denied" in raised.value.message
    assert google.check.subjects == []
