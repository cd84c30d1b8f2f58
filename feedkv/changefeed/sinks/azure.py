"""``azure://container/prefix`` (or ``azure-blob://``): changefeed files in an Azure Blob
Storage container (azure-storage-blob).

URI parameters follow CockroachDB's: ``AZURE_ACCOUNT_NAME`` and ``AZURE_ACCOUNT_KEY``
(the storage account's shared key, URL-encoded in the URI), and ``AZURE_ENVIRONMENT``
(``AZUREPUBLICCLOUD``, the default, ``AZUREUSGOVERNMENTCLOUD``, ``AZURECHINACLOUD``),
which picks the account's endpoint. ``AZURE_ENDPOINT`` is feedkv's own, as
``AWS_ENDPOINT`` is for S3: the account's blob endpoint given whole (Azurite in the
tests, ``http://127.0.0.1:10000/devstoreaccount1``). CockroachDB's other way to sign
in, a Microsoft Entra ID service principal (``AZURE_CLIENT_ID``, ``AZURE_CLIENT_SECRET``,
``AZURE_TENANT_ID``, all three, instead of the account key), gets OAuth tokens from
the tenant's token endpoint (:mod:`feedkv.changefeed.sinks.azure_principal`;
``AZURE_AUTHORITY_HOST``, feedkv's own, names a stand-in) and sends them to an https
endpoint only, as the SDK does.

A Put Blob (or the block list the client commits for a large one) is atomic, so a file
is seen whole or not at all. Blob Storage has no rename: :meth:`AzureBlobs.rename`
copies and deletes, as the S3 store does.

Errors no retry can change (a key the account refuses, no such container or account)
are :class:`TerminalSinkError`; the rest (a throttle, a 5xx, a dropped connection) are
retryable :class:`SinkError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from feedkv.changefeed.options import option_error
from feedkv.changefeed.sink import SinkError, SinkURI, TerminalSinkError
from feedkv.changefeed.sinks.azure_principal import (
    AUTHORITIES,
    ClientSecretCredential,
    valid_tenant,
)

if TYPE_CHECKING:
    from azure.storage.blob import ContainerClient

__all__ = ["ENVIRONMENTS", "TERMINAL_CODES", "AzureBlobs", "account_url"]

# CockroachDB's AZURE_ENVIRONMENT values and their blob endpoints' domains.
ENVIRONMENTS = {
    "AZUREPUBLICCLOUD": "blob.core.windows.net",
    "AZUREUSGOVERNMENTCLOUD": "blob.core.usgovcloudapi.net",
    "AZURECHINACLOUD": "blob.core.chinacloudapi.cn",
}

# Blob Storage error codes that mean the sink's settings are wrong, not that the service
# is in trouble.
TERMINAL_CODES = frozenset(
    {
        "AuthenticationFailed",
        "AuthorizationFailure",
        "AuthorizationPermissionMismatch",
        "ContainerNotFound",
        "ContainerBeingDeleted",
        "InvalidAuthenticationInfo",
        "AccountIsDisabled",
        "InvalidResourceName",
        "InvalidUri",
    }
)
_PRINCIPAL = ("AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_TENANT_ID")


def account_url(uri: SinkURI) -> str:
    """The blob endpoint of the URI's account: ``AZURE_ENDPOINT`` whole, or the
    account's name under its environment's domain."""
    endpoint = uri.param("AZURE_ENDPOINT")
    if endpoint:
        if not endpoint.startswith(("http://", "https://")):
            raise option_error(f"sink parameter AZURE_ENDPOINT={endpoint!r} is not an http(s) URL")
        return endpoint.rstrip("/")
    account = uri.param("AZURE_ACCOUNT_NAME") or ""
    environment = (uri.param("AZURE_ENVIRONMENT") or "AZUREPUBLICCLOUD").upper()
    domain = ENVIRONMENTS.get(environment)
    if domain is None:
        raise option_error(
            f"sink parameter AZURE_ENVIRONMENT={uri.param('AZURE_ENVIRONMENT')!r} is not one "
            f"of {', '.join(ENVIRONMENTS)}"
        )
    return f"https://{account}.{domain}"


class AzureBlobs:
    """The container and prefix an ``azure://`` URI names, as a
    :class:`~feedkv.changefeed.sinks.cloud_storage.BlobStore`."""

    def __init__(self, uri: SinkURI) -> None:
        from azure.core.exceptions import AzureError, ResourceNotFoundError
        from azure.storage.blob import BlobServiceClient

        if not uri.host:
            raise option_error(
                f"sink URI {uri.uri!r} needs a container: {uri.scheme}://container/prefix"
            )
        credential = _credential(uri)
        self.container = uri.host
        self.prefix = uri.path.strip("/")
        self._where = f"{uri.scheme}://{self.container}"
        self._errors: tuple[type[BaseException], ...] = (AzureError,)
        self._not_found = ResourceNotFoundError
        try:
            self._service = BlobServiceClient(
                account_url(uri), credential=credential, retry_total=3
            )
        except ValueError as exc:  # the SDK checks the URL and the key's base64 here
            raise option_error(f"the {uri.scheme}:// sink's settings are refused: {exc}") from None
        self._client: ContainerClient = self._service.get_container_client(self.container)

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def put(self, name: str, data: bytes) -> None:
        key = self._key(name)
        try:
            self._client.upload_blob(key, data, overwrite=True)
        except self._errors as exc:
            raise self._error(f"cannot write {self._where}/{key}", exc) from exc

    def get(self, name: str) -> bytes | None:
        key = self._key(name)
        try:
            return self._client.download_blob(key).readall()
        except self._not_found as exc:
            if _code(exc) == "ContainerNotFound":
                raise self._error(f"cannot read {self._where}/{key}", exc) from exc
            return None
        except self._errors as exc:
            raise self._error(f"cannot read {self._where}/{key}", exc) from exc

    def rename(self, name: str, new_name: str) -> None:
        data = self.get(name)
        if data is None:
            if self.get(new_name) is None:
                raise SinkError(f"cannot publish {self._where}/{self._key(name)}: it is gone")
            return  # a retried rename: done before
        self.put(new_name, data)
        self.delete(name)

    def delete(self, name: str) -> None:
        key = self._key(name)
        try:
            self._client.delete_blob(key)
        except self._not_found as exc:
            if _code(exc) == "ContainerNotFound":
                raise self._error(f"cannot remove {self._where}/{key}", exc) from exc
        except self._errors as exc:
            raise self._error(f"cannot remove {self._where}/{key}", exc) from exc

    def list(self, prefix: str) -> list[str]:
        start = self._key(prefix)
        cut = len(self._key(""))
        try:
            return [key[cut:] for key in self._client.list_blob_names(name_starts_with=start)]
        except self._errors as exc:
            raise self._error(f"cannot list {self._where}/{start}", exc) from exc

    def close(self) -> None:
        self._service.close()

    def _error(self, what: str, exc: BaseException) -> SinkError:
        """``exc`` from the SDK as a sink error: terminal when no retry can change it."""
        from azure.core.exceptions import ClientAuthenticationError

        code = _code(exc)
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if code in TERMINAL_CODES or status == 403 or isinstance(exc, ClientAuthenticationError):
            return TerminalSinkError(
                f"{what}: {code or _first_line(exc)}; check the container and the account's "
                "name and key (AZURE_ACCOUNT_NAME, AZURE_ACCOUNT_KEY) or service principal "
                "(AZURE_CLIENT_ID, AZURE_CLIENT_SECRET, AZURE_TENANT_ID) of the sink URI"
            )
        return SinkError(f"{what}: {_first_line(exc)}")


def _credential(uri: SinkURI) -> Any:
    """What the URI signs in with: the account's shared key, or a service principal's
    tokens (https only). SQLError 22023 names a missing, extra or malformed parameter."""
    if not uri.param("AZURE_ACCOUNT_NAME"):
        raise option_error(
            f"sink parameter AZURE_ACCOUNT_NAME is needed by the {uri.scheme}:// sink"
        )
    auth = (uri.param("AUTH") or "specified").lower()
    if auth != "specified":
        raise option_error(
            f"sink parameter AUTH={uri.param('AUTH')!r}: the {uri.scheme}:// sink signs in "
            "with AUTH=specified only (the machine's own Azure identity is not supported): "
            "give AZURE_ACCOUNT_KEY or a service principal"
        )
    given = [name for name in _PRINCIPAL if uri.param(name)]
    if not given:
        if not uri.param("AZURE_ACCOUNT_KEY"):
            raise option_error(
                f"sink parameter AZURE_ACCOUNT_KEY is needed by the {uri.scheme}:// sink, or a "
                "service principal: AZURE_CLIENT_ID, AZURE_CLIENT_SECRET and AZURE_TENANT_ID"
            )
        if uri.param("AZURE_AUTHORITY_HOST"):
            raise option_error(
                "sink parameter AZURE_AUTHORITY_HOST is used with a service principal only"
            )
        return {
            "account_name": uri.param("AZURE_ACCOUNT_NAME") or "",
            "account_key": uri.param("AZURE_ACCOUNT_KEY") or "",
        }
    missing = [name for name in _PRINCIPAL if name not in given]
    if missing:
        raise option_error(
            f"sink parameter {missing[0]} is needed with {given[0]}: a service principal "
            "signs in with AZURE_CLIENT_ID, AZURE_CLIENT_SECRET and AZURE_TENANT_ID together"
        )
    if uri.param("AZURE_ACCOUNT_KEY"):
        raise option_error(
            "sink parameters AZURE_ACCOUNT_KEY and AZURE_CLIENT_ID: give the account's key or "
            "a service principal, not both"
        )
    tenant = uri.param("AZURE_TENANT_ID") or ""
    if not valid_tenant(tenant):
        raise option_error(
            f"sink parameter AZURE_TENANT_ID={tenant!r} is not a tenant id (a GUID such as "
            "'72f988bf-86f1-41af-91ab-2d7cd011db47') or a tenant's domain"
        )
    if not account_url(uri).startswith("https://"):
        raise option_error(
            f"sink parameter AZURE_ENDPOINT={uri.param('AZURE_ENDPOINT')!r}: a service "
            "principal's tokens are sent over https only; give an https endpoint"
        )
    authority = uri.param("AZURE_AUTHORITY_HOST")
    if authority is None:
        environment = (uri.param("AZURE_ENVIRONMENT") or "AZUREPUBLICCLOUD").upper()
        authority = AUTHORITIES[environment]  # account_url checked the environment
    elif not authority.startswith(("http://", "https://")):
        raise option_error(
            f"sink parameter AZURE_AUTHORITY_HOST={authority!r} is not an http(s) URL"
        )
    return ClientSecretCredential(
        tenant,
        uri.param("AZURE_CLIENT_ID") or "",
        uri.param("AZURE_CLIENT_SECRET") or "",
        authority=authority,
    )


def _code(exc: BaseException) -> str:
    code: Any = getattr(exc, "error_code", None)
    return str(code) if code else ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
