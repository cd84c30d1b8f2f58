"""The cloud storage sink into Azure Blob Storage (``azure://``, ``azure-blob://``), as
CockroachDB 26.1's docs write its URI (``azure-blob://container/path?AZURE_ACCOUNT_NAME=
...&AZURE_ACCOUNT_KEY=<url-encoded key>``), against Azurite on loopback."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from feedkv import DB
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.sink import make_sink, parse_sink_uri
from feedkv.changefeed.sinks.azure import account_url
from feedkv.changefeed.sinks.azure_principal import STORAGE_SCOPE
from feedkv.errors import SQLError
from feedkv.testing.azurite import ACCOUNT, KEY, Azurite, azurite_blob
from feedkv.testing.certs import shared_certs_dir
from feedkv.testing.oauth_server import TokenServer
from feedkv.testing.sink_conformance import START, SinkSetup, bucket_setup, two_rows_published

DEADLINE = 30.0
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
CLIENT_ID = "0b9c4c2e-5a8f-4f0e-9f3e-feedfeedfeed"
CLIENT_SECRET = "the principal's secret~with.odd_chars"
PRINCIPAL = f"AZURE_CLIENT_ID=i&AZURE_CLIENT_SECRET=s&AZURE_TENANT_ID={TENANT}"


@pytest.fixture(scope="module")
def azurite() -> Iterator[Azurite]:
    executable = azurite_blob()
    if executable is None:
        raise RuntimeError(
            "azurite is not installed: run `make .cache/azurite/node_modules/.bin/azurite-blob` "
            "(make test does), or point FEEDKV_AZURITE at an azurite-blob executable"
        )
    server = Azurite(executable)
    yield server
    server.close()


@pytest.fixture
def service(azurite: Azurite) -> Any:
    from azure.storage.blob import BlobServiceClient

    client = BlobServiceClient.from_connection_string(azurite.connection_string())
    yield client
    client.close()


@pytest.fixture
def container(service: Any) -> str:
    """A container of this test's own."""
    name = f"feeds-{uuid.uuid4().hex[:12]}"
    service.create_container(name)
    return name


def query(azurite: Azurite, key: str = KEY) -> str:
    return (
        f"AZURE_ACCOUNT_NAME={ACCOUNT}&AZURE_ACCOUNT_KEY={quote(key, safe='')}"
        f"&AZURE_ENDPOINT={quote(azurite.account_url, safe='')}"
    )


def blobs(service: Any, container: str, prefix: str) -> dict[str, bytes]:
    client = service.get_container_client(container)
    names = sorted(client.list_blob_names(name_starts_with=prefix))
    return {name: client.download_blob(name).readall() for name in names}


@pytest.mark.parametrize("scheme", ["azure", "azure-blob"])
def test_changefeed_files_land_in_the_container_with_resolved_markers(
    db: DB, azurite: Azurite, service: Any, container: str, scheme: str
) -> None:
    found, resolved = two_rows_published(
        db.sql,
        f"{scheme}://{container}/cdc?{query(azurite)}",
        lambda: blobs(service, container, "cdc/"),
        "a resolved file in the container",
    )
    assert set(json.loads(found[resolved])) == {"resolved"}
    assert not [n for n in found if ".feedkv-probe-" in n]  # CREATE's probe was removed


def test_show_redacts_the_account_key(db: DB, azurite: Azurite, container: str) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    (job_id,) = db.sql(
        f"CREATE CHANGEFEED FOR t INTO 'azure://{container}/x?{query(azurite)}'"
    ).rows[0]
    db.sql(f"PAUSE JOB {job_id}")
    result = db.sql(f"SHOW CHANGEFEED JOB {job_id}")
    shown = dict(zip(result.columns, result.rows[0], strict=True))
    assert "AZURE_ACCOUNT_KEY=redacted" in shown["sink_uri"]
    assert f"AZURE_ACCOUNT_NAME={ACCOUNT}" in shown["sink_uri"]
    assert quote(KEY, safe="") not in str(shown) and KEY not in str(shown)


def test_a_key_the_account_refuses_fails_the_create(
    db: DB, azurite: Azurite, container: str
) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    wrong = "d3Jvbmcga2V5IGZvciB0aGUgYWNjb3VudA=="  # base64, but not the account's key
    with pytest.raises(SQLError) as raised:
        db.sql(f"CREATE CHANGEFEED FOR t INTO 'azure://{container}/x?{query(azurite, wrong)}'")
    assert raised.value.code == "22023"
    assert "AZURE_ACCOUNT_KEY" in raised.value.message


def test_a_missing_container_fails_the_create(db: DB, azurite: Azurite) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    with pytest.raises(SQLError) as raised:
        db.sql(f"CREATE CHANGEFEED FOR t INTO 'azure://no-such-container/x?{query(azurite)}'")
    assert raised.value.code == "22023"
    assert "ContainerNotFound" in raised.value.message


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("azure:///x?AZURE_ACCOUNT_NAME=a&AZURE_ACCOUNT_KEY=aw==", "needs a container"),
        ("azure://c/x?AZURE_ACCOUNT_KEY=aw==", "AZURE_ACCOUNT_NAME is needed"),
        ("azure://c/x?AZURE_ACCOUNT_NAME=a", "AZURE_ACCOUNT_KEY is needed"),
        (
            "azure://c/x?AZURE_ACCOUNT_NAME=a&AZURE_CLIENT_ID=i&AZURE_TENANT_ID=t",
            "AZURE_CLIENT_SECRET is needed with AZURE_CLIENT_ID",
        ),
        (
            f"azure://c/x?AZURE_ACCOUNT_NAME=a&AZURE_ACCOUNT_KEY=aw==&{PRINCIPAL}",
            "give the account's key or a service principal, not both",
        ),
        (
            "azure://c/x?AZURE_ACCOUNT_NAME=a&AZURE_CLIENT_ID=i&AZURE_CLIENT_SECRET=s"
            "&AZURE_TENANT_ID=t%2F..%2Fx",
            "AZURE_TENANT_ID='t/../x' is not a tenant id",
        ),
        (
            f"azure://c/x?AZURE_ACCOUNT_NAME=a&{PRINCIPAL}&AZURE_ENDPOINT=http://127.0.0.1:1/a",
            "a service principal's tokens are sent over https only",
        ),
        (
            f"azure://c/x?AZURE_ACCOUNT_NAME=a&{PRINCIPAL}&AZURE_AUTHORITY_HOST=login.local",
            "AZURE_AUTHORITY_HOST='login.local' is not an http(s) URL",
        ),
        (
            "azure://c/x?AZURE_ACCOUNT_NAME=a&AZURE_ACCOUNT_KEY=aw==&AZURE_AUTHORITY_HOST=http://x",
            "AZURE_AUTHORITY_HOST is used with a service principal only",
        ),
        (
            "azure://c/x?AZURE_ACCOUNT_NAME=a&AZURE_ACCOUNT_KEY=aw==&AZURE_ENVIRONMENT=mars",
            "AZURE_ENVIRONMENT='mars' is not one of",
        ),
        (
            "azure://c/x?AZURE_ACCOUNT_NAME=a&AZURE_ACCOUNT_KEY=aw==&AZURE_ENDPOINT=c:/x",
            "AZURE_ENDPOINT='c:/x' is not an http(s) URL",
        ),
        ("azure://c/x?AZURE_ACCOUNT_NAME=a&AZURE_ACOUNT_KEY=k", "did you mean 'AZURE_ACCOUNT_KEY'"),
        (
            "azure://c/x?AZURE_ACCOUNT_NAME=a&AUTH=implicit",
            "signs in with AUTH=specified only",
        ),
    ],
)
def test_bad_azure_uris_are_refused_naming_the_part(uri: str, message: str) -> None:
    options = ChangefeedOptions()
    with pytest.raises(SQLError) as raised:
        make_sink(parse_sink_uri(uri, options), options, start=START)
    assert raised.value.code == "22023"
    assert message in raised.value.message


@pytest.mark.parametrize(
    ("environment", "url"),
    [
        ("", "https://acct.blob.core.windows.net"),
        ("AzureUSGovernmentCloud", "https://acct.blob.core.usgovcloudapi.net"),
        ("AZURECHINACLOUD", "https://acct.blob.core.chinacloudapi.cn"),
    ],
)
def test_the_environment_picks_the_accounts_endpoint(environment: str, url: str) -> None:
    given = f"&AZURE_ENVIRONMENT={environment}" if environment else ""
    uri = f"azure://c/p?AZURE_ACCOUNT_NAME=acct&AZURE_ACCOUNT_KEY=aw=={given}"
    assert account_url(parse_sink_uri(uri, ChangefeedOptions())) == url


# The sink contract.


@pytest.fixture(params=["", "&partition_format=flat&file_size=256"], ids=["daily", "small-files"])
def azure_setup(request: pytest.FixtureRequest, azurite: Azurite, service: Any) -> SinkSetup:
    extra: str = request.param
    return bucket_setup(
        lambda container: f"azure://{container}/kit?{query(azurite)}{extra}",
        service.create_container,
        lambda container: list(blobs(service, container, "kit/").values()),
    )


def test_the_azure_sink_keeps_the_sink_contract(azure_setup: SinkSetup) -> None:
    azure_setup.check()


def test_the_spark_runners_staging_stays_beside_the_sinks_prefix(
    azurite: Azurite, service: Any, container: str
) -> None:
    """A batch published exactly once (as the Spark runner publishes it) lands under the
    sink's prefix alone; its staging and manifest go beside it, so a loader copying the
    prefix sees only data files."""
    from feedkv.changefeed.sinks.batch_publisher import BatchPublisher, layout
    from feedkv.changefeed.sinks.cloud_storage import blob_store

    where = layout(parse_sink_uri(f"azure://{container}/cdc?{query(azurite)}", ChangefeedOptions()))
    root = blob_store(where.root)
    try:
        publisher = BatchPublisher.of(root, 9, where)
        task = publisher.stage()
        task.put("2024-05-01/a.ndjson", b"1\n")
        task.put("2024-05-01/b.ndjson", b"2\n")
        assert blobs(service, container, "cdc/") == {}  # staged: out of the prefix
        publisher.publish(0, task.staged)
        publisher.publish(0, task.staged)  # a replay publishes nothing twice
    finally:
        root.close()
    assert blobs(service, container, "cdc/") == {
        "cdc/2024-05-01/a.ndjson": b"1\n",
        "cdc/2024-05-01/b.ndjson": b"2\n",
    }
    assert list(blobs(service, container, ".cdc.feedkv/")) == [
        ".cdc.feedkv/jobs/9/manifests/00000000000000000000.json"
    ]


# A Microsoft Entra ID service principal (AZURE_CLIENT_ID, AZURE_CLIENT_SECRET,
# AZURE_TENANT_ID): Azurite over https, taking OAuth tokens, and a stand-in for the
# tenant's token endpoint. NB: the tests take ``db`` last, so its jobs stop before the
# token endpoint and the trust in the test CA go.


@pytest.fixture(scope="module")
def azurite_oauth() -> Iterator[Azurite]:
    executable = azurite_blob()
    if executable is None:
        raise RuntimeError("azurite is not installed: see the azurite fixture")
    certs = shared_certs_dir()
    server = Azurite(executable, tls=(certs / "node.crt", certs / "node.key"))
    yield server
    server.close()


@pytest.fixture
def oauth_service(azurite_oauth: Azurite, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A client of the https Azurite by the account's key (to make and read containers);
    the process trusts the test CA (the sink's client too: REQUESTS_CA_BUNDLE)."""
    from azure.storage.blob import BlobServiceClient

    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(shared_certs_dir() / "ca.crt"))
    client = BlobServiceClient.from_connection_string(azurite_oauth.connection_string())
    yield client
    client.close()


@pytest.fixture
def entra() -> Iterator[TokenServer]:
    """The tenant's token endpoint: it knows one client and its secret, grants Blob
    Storage's scope only, and issues tokens as Entra ID does (its issuer, the scope's
    resource as audience)."""
    server = TokenServer(
        {CLIENT_ID: CLIENT_SECRET},
        key=b"entra's signing key",
        path=f"/{TENANT}/oauth2/v2.0/token",
        scopes=frozenset({STORAGE_SCOPE}),
        issuer=f"https://sts.windows.net/{TENANT}/",
        tenant=TENANT,
    )
    yield server
    server.close()


def principal_query(azurite: Azurite, entra: TokenServer, secret: str = CLIENT_SECRET) -> str:
    authority = entra.url.split(f"/{TENANT}/", 1)[0]
    return (
        f"AZURE_ACCOUNT_NAME={ACCOUNT}&AZURE_CLIENT_ID={CLIENT_ID}"
        f"&AZURE_CLIENT_SECRET={quote(secret, safe='')}&AZURE_TENANT_ID={TENANT}"
        f"&AZURE_ENDPOINT={quote(azurite.account_url, safe='')}"
        f"&AZURE_AUTHORITY_HOST={quote(authority, safe='')}"
    )


def test_a_service_principal_writes_the_files_with_its_tokens(
    azurite_oauth: Azurite, oauth_service: Any, entra: TokenServer, db: DB
) -> None:
    """CockroachDB's ``azure://container/path?AZURE_ACCOUNT_NAME=..&AZURE_CLIENT_ID=..
    &AZURE_CLIENT_SECRET=..&AZURE_TENANT_ID=..``: the sink gets a token for
    ``https://storage.azure.com/.default`` from the tenant's endpoint with the client's
    id and secret, and Azurite (which takes a bearer token over https only) takes the
    files written with it; the secret is redacted when the job is shown."""
    container = f"feeds-{uuid.uuid4().hex[:12]}"
    oauth_service.create_container(container)
    uri = f"azure://{container}/cdc?{principal_query(azurite_oauth, entra)}"
    two_rows_published(
        db.sql,
        uri,
        lambda: blobs(oauth_service, container, "cdc/"),
        "a resolved file written with the principal's token",
    )
    assert entra.requests and set(entra.requests) == {(CLIENT_ID, 200)}
    [(shown,)] = db.sql("SELECT sink_uri FROM [SHOW CHANGEFEED JOBS]").rows
    assert "AZURE_CLIENT_SECRET=redacted" in shown and quote(CLIENT_SECRET, safe="") not in shown


def test_a_secret_the_tenant_refuses_fails_the_create(
    azurite_oauth: Azurite, oauth_service: Any, entra: TokenServer, db: DB
) -> None:
    """A wrong client secret: the token endpoint answers ``invalid_client`` (401), and
    CREATE CHANGEFEED fails naming the service principal's parameters."""
    container = f"feeds-{uuid.uuid4().hex[:12]}"
    oauth_service.create_container(container)
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    query = principal_query(azurite_oauth, entra, secret="not the secret")
    with pytest.raises(SQLError) as raised:
        db.sql(f"CREATE CHANGEFEED FOR t INTO 'azure://{container}/x?{query}'")
    assert raised.value.code == "22023"
    assert f"the service principal {CLIENT_ID!r} was refused a token" in raised.value.message
    assert "AZURE_CLIENT_SECRET" in raised.value.message
    assert (CLIENT_ID, 401) in entra.requests
    assert blobs(oauth_service, container, "") == {}
