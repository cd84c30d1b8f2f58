"""The cloud storage sink into Google Cloud Storage (``gs://``), as CockroachDB 26.1's
docs write its URI (``gs://bucket/path?AUTH=specified&CREDENTIALS=<base64 key>``),
against gcp-storage-emulator (PyPI's) in this process, on loopback. The emulator takes no
credentials, so the sink reaches it with none (``GS_ENDPOINT`` and no ``CREDENTIALS``)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from feedkv import DB
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.sink import make_sink, parse_sink_uri
from feedkv.errors import SQLError
from feedkv.testing.sink_conformance import START, SinkSetup, bucket_setup, two_rows_published

DEADLINE = 30.0


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
        ("gs://b/x?ASSUME_ROLE=sa@p.iam.gserviceaccount.com", "ASSUME_ROLE"),
        ("gs://b/x?GS_ENDPOINT=localhost:1", "GS_ENDPOINT='localhost:1' is not an http(s) URL"),
        ("gs://b/x?CREDENTALS=x", "did you mean 'CREDENTIALS'"),
    ],
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
