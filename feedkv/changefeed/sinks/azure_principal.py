"""Signing in to Azure Storage as a Microsoft Entra ID service principal: CockroachDB's
``AZURE_CLIENT_ID``, ``AZURE_CLIENT_SECRET`` and ``AZURE_TENANT_ID``.

:class:`ClientSecretCredential` is the OAuth 2.0 client credentials grant (RFC 6749
4.4) against the tenant's token endpoint, ``<authority>/<tenant>/oauth2/v2.0/token``,
for the scope ``https://storage.azure.com/.default``, over httpx: what azure-identity's
class of that name does, written here because that package is not a dependency. It is an
``azure.core`` token credential (``get_token(*scopes)``), so the Blob Storage client
sends its tokens as ``Authorization: Bearer``. A token is kept until
:data:`REFRESH_BEFORE_S` before it expires, then a new one is fetched (one at a time).

The authority is the cloud's (``AZURE_ENVIRONMENT``: :data:`AUTHORITIES`), or
feedkv's own ``AZURE_AUTHORITY_HOST`` (a stand-in in the tests), as azure-identity's
``AZURE_AUTHORITY_HOST``.

Errors: the token endpoint refusing the principal (a wrong secret, an unknown client or
tenant: 400 or 401) raises ``azure.core``'s ``ClientAuthenticationError`` (the storage
SDK's ``AzureSigningError``, which its retries let through), which the sink treats as
terminal; an endpoint out of reach or failing (5xx) raises
``ServiceRequestError``, which it retries.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

__all__ = [
    "AUTHORITIES",
    "REFRESH_BEFORE_S",
    "STORAGE_SCOPE",
    "ClientSecretCredential",
    "valid_tenant",
]

# The Entra ID authority of each of CockroachDB's AZURE_ENVIRONMENT values.
AUTHORITIES = {
    "AZUREPUBLICCLOUD": "https://login.microsoftonline.com",
    "AZUREUSGOVERNMENTCLOUD": "https://login.microsoftonline.us",
    "AZURECHINACLOUD": "https://login.chinacloudapi.cn",
}
STORAGE_SCOPE = "https://storage.azure.com/.default"
REFRESH_BEFORE_S = 300.0  # a token this close to its expiry is replaced first
TIMEOUT_S = 30.0
_TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}")


def valid_tenant(tenant: str) -> bool:
    """Whether ``tenant`` is a tenant id (a GUID) or domain, safe in the token's URL."""
    return _TENANT.fullmatch(tenant) is not None


class ClientSecretCredential:
    """See the module docstring. ``clock``: seconds, for expiries (``time.time``)."""

    def __init__(
        self,
        tenant_id: str,
        client_id: str,
        client_secret: str,
        *,
        authority: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.token_url = f"{authority.rstrip('/')}/{tenant_id}/oauth2/v2.0/token"
        self._client_id = client_id
        self._secret = client_secret
        self._clock = clock
        self._lock = threading.Lock()
        self._held: dict[str, Any] = {}  # scope -> AccessToken
        self.fetched = 0  # tokens fetched, for tests of the cache

    def get_token(self, *scopes: str, **_: Any) -> Any:
        """A bearer token for ``scopes`` (blocks while one is fetched)."""
        from azure.core.credentials import AccessToken

        scope = " ".join(scopes) or STORAGE_SCOPE
        with self._lock:
            held = self._held.get(scope)
            if held is not None and held.expires_on - REFRESH_BEFORE_S > self._clock():
                return held
            token, lifetime = self._fetch(scope)
            held = AccessToken(token, int(self._clock() + lifetime))
            self._held[scope] = held
            self.fetched += 1
            return held

    def _fetch(self, scope: str) -> tuple[str, float]:
        from azure.core.exceptions import ServiceRequestError

        form = {
            "grant_type": "client_credentials",
            "client_id": self._client_id,
            "client_secret": self._secret,
            "scope": scope,
        }
        try:
            answer = httpx.post(self.token_url, data=form, timeout=TIMEOUT_S)
        except httpx.HTTPError as exc:
            raise ServiceRequestError(f"cannot reach {self.token_url}: {exc}") from exc
        if answer.status_code in (400, 401, 403):
            raise _refused()(
                f"the service principal {self._client_id!r} was refused a token by "
                f"{self.token_url}: {_why(answer)}"
            )
        if answer.status_code != 200:
            raise ServiceRequestError(
                f"{self.token_url} answered {answer.status_code}: {_why(answer)}"
            )
        try:
            body = answer.json()
            return str(body["access_token"]), float(body.get("expires_in", 3600))
        except (ValueError, KeyError, TypeError) as exc:
            raise ServiceRequestError(
                f"{self.token_url} answered no access_token: {answer.text[:200]}"
            ) from exc

    def close(self) -> None:
        """Nothing to release (each fetch is a request of its own)."""


def _refused() -> type[Exception]:
    """The error for a principal the endpoint refuses: the storage SDK's signing error
    (a ``ClientAuthenticationError``), which its retry policy raises at once, where it
    would retry another one for a minute."""
    try:
        from azure.storage.blob._shared.authentication import AzureSigningError
    except ImportError:  # NB: a private module of the SDK's; the public base will do
        from azure.core.exceptions import ClientAuthenticationError

        return ClientAuthenticationError
    return AzureSigningError


def _why(answer: httpx.Response) -> str:
    try:
        body = answer.json()
        return str(body.get("error_description") or body.get("error") or answer.text)[:300]
    except ValueError:
        return answer.text[:300].strip() or answer.reason_phrase
