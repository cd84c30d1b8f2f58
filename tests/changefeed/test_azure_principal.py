"""A service principal's OAuth client credentials grant against a stand-in for
Microsoft Entra ID's token endpoint (``/<tenant>/oauth2/v2.0/token``) on loopback: the
form it sends, the token kept until shortly before it expires, and the errors a
refusal and an endpoint out of reach become."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.core.exceptions import ClientAuthenticationError, ServiceRequestError

from feedkv.changefeed.sinks.azure_principal import (
    REFRESH_BEFORE_S,
    STORAGE_SCOPE,
    ClientSecretCredential,
    valid_tenant,
)
from feedkv.testing.node_process import free_port
from feedkv.testing.oauth_server import TokenServer

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
CLIENT_ID = "feeds-writer"
SECRET = "s3cret"


@pytest.fixture
def entra() -> Iterator[TokenServer]:
    server = TokenServer(
        {CLIENT_ID: SECRET},
        key=b"entra's signing key",
        path=f"/{TENANT}/oauth2/v2.0/token",
        scopes=frozenset({STORAGE_SCOPE}),
        lifetime_s=3600,
    )
    yield server
    server.close()


def authority(server: TokenServer) -> str:
    return server.url.split(f"/{TENANT}/", 1)[0]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_token_is_kept_until_shortly_before_it_expires(entra: TokenServer) -> None:
    clock = Clock(1_000_000.0)
    credential = ClientSecretCredential(
        TENANT, CLIENT_ID, SECRET, authority=authority(entra), clock=clock
    )
    first = credential.get_token(STORAGE_SCOPE)
    assert first.token.count(".") == 2  # the endpoint's JWT, as it issued it
    assert first.expires_on == int(clock.now + 3600)
    clock.now += 3600 - REFRESH_BEFORE_S - 1
    assert credential.get_token(STORAGE_SCOPE) is first
    assert credential.fetched == 1
    clock.now += 2  # within REFRESH_BEFORE_S of the expiry: a new one
    assert credential.get_token(STORAGE_SCOPE) is not first
    assert credential.fetched == 2
    assert entra.requests == [(CLIENT_ID, 200), (CLIENT_ID, 200)]


def test_a_refused_principal_is_an_authentication_error_naming_it(entra: TokenServer) -> None:
    credential = ClientSecretCredential(TENANT, CLIENT_ID, "wrong", authority=authority(entra))
    with pytest.raises(ClientAuthenticationError, match="invalid_client") as refused:
        credential.get_token(STORAGE_SCOPE)
    assert f"service principal {CLIENT_ID!r} was refused a token" in str(refused.value)
    assert "wrong" not in str(refused.value)  # the secret is never shown
    with pytest.raises(ClientAuthenticationError, match="invalid_scope"):
        ClientSecretCredential(TENANT, CLIENT_ID, SECRET, authority=authority(entra)).get_token(
            "https://vault.azure.net/.default"
        )


def test_an_endpoint_out_of_reach_is_a_request_error_the_sdk_retries() -> None:
    credential = ClientSecretCredential(
        TENANT, CLIENT_ID, SECRET, authority=f"http://127.0.0.1:{free_port()}"
    )
    with pytest.raises(ServiceRequestError, match="cannot reach"):
        credential.get_token(STORAGE_SCOPE)


@pytest.mark.parametrize(
    ("tenant", "valid"),
    [(TENANT, True), ("contoso.onmicrosoft.com", True), ("t/../x", False), ("", False)],
)
def test_a_tenant_is_a_guid_or_a_domain(tenant: str, valid: bool) -> None:
    assert valid_tenant(tenant) is valid
