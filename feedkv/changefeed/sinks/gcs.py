"""``gs://bucket/prefix``: changefeed files in a Google Cloud Storage bucket
(google-cloud-storage).

URI parameters follow CockroachDB's: ``AUTH=specified`` (the default) with
``CREDENTIALS``, a service account's JSON key base64-encoded, or ``AUTH=implicit``, the
machine's own credentials (Application Default Credentials); ``ASSUME_ROLE=<service
account>`` impersonates that account with either (``<delegate>,...,<target>``: through
delegates, the last one impersonated), through IAM Credentials' ``generateAccessToken``
(:mod:`feedkv.changefeed.sinks.google_credentials`), for Cloud Storage's read-write
scope, as CockroachDB's sink asks. ``GS_ENDPOINT`` is feedkv's own, as ``AWS_ENDPOINT``
is for S3: a Cloud Storage-compatible server given whole (an emulator in the tests),
reached without credentials unless ``CREDENTIALS`` (or ``ASSUME_ROLE``) names some;
``GS_IAM_ENDPOINT``, feedkv's too, is the IAM Credentials service's base URL
(``https://iamcredentials.googleapis.com`` by default; a stand-in in the tests).

An upload is atomic (a blob appears when its upload finalizes), so a file is seen whole
or not at all. Cloud Storage has no rename: :meth:`GCSBlobs.rename` copies and deletes.

Errors no retry can change (credentials refused, access denied, no such bucket, an
account that may not be impersonated) are :class:`TerminalSinkError`; the rest (a
throttle, a 5xx, a dropped connection) are retryable :class:`SinkError`.
"""

from __future__ import annotations

from typing import Any

from feedkv.changefeed.options import option_error
from feedkv.changefeed.sink import SinkError, SinkURI, TerminalSinkError
from feedkv.changefeed.sinks.google_credentials import (
    CLOUD_PLATFORM_SCOPE,
    IAM_CREDENTIALS,
    generate_access_token_url,
    impersonating,
    role_chain,
    service_account,
)

__all__ = ["READ_WRITE_SCOPE", "GCSBlobs"]

_TERMINAL_STATUS = frozenset({401, 403, 404})
READ_WRITE_SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"  # ASSUME_ROLE's


class GCSBlobs:
    """The bucket and prefix a ``gs://`` URI names, as a
    :class:`~feedkv.changefeed.sinks.cloud_storage.BlobStore`."""

    def __init__(self, uri: SinkURI) -> None:
        from google.api_core import exceptions
        from google.auth import exceptions as auth_exceptions
        from google.cloud import storage

        if not uri.host:
            raise option_error(f"sink URI {uri.uri!r} needs a bucket: gs://bucket/prefix")
        auth = (uri.param("AUTH") or "specified").lower()
        if auth not in ("specified", "implicit"):
            raise option_error(f"sink parameter AUTH={uri.param('AUTH')!r}: specified or implicit")
        endpoint = uri.param("GS_ENDPOINT")
        if endpoint is not None and not endpoint.startswith(("http://", "https://")):
            raise option_error(f"sink parameter GS_ENDPOINT={endpoint!r} is not an http(s) URL")
        chain = role_chain(uri.param("ASSUME_ROLE"))
        credentials = _credentials(uri, auth, endpoint, chain)
        self.bucket = uri.host
        self.prefix = uri.path.strip("/")
        self._not_found = exceptions.NotFound
        self._errors: tuple[type[BaseException], ...] = (
            exceptions.GoogleAPIError,
            auth_exceptions.GoogleAuthError,
            OSError,  # a connection refused or dropped (requests' errors are OSErrors)
        )
        options = {"api_endpoint": endpoint} if endpoint else None
        try:
            self._client = storage.Client(
                project=_project(credentials), credentials=credentials, client_options=options
            )
        except auth_exceptions.GoogleAuthError as exc:
            raise option_error(f"the gs:// sink has no credentials: {exc}") from None
        self._bucket = self._client.bucket(self.bucket)

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def put(self, name: str, data: bytes) -> None:
        key = self._key(name)
        try:
            self._bucket.blob(key).upload_from_string(data)
        except self._errors as exc:
            raise self._error(f"cannot write gs://{self.bucket}/{key}", exc) from exc

    def get(self, name: str) -> bytes | None:
        key = self._key(name)
        try:
            data: bytes = self._bucket.blob(key).download_as_bytes()
        except self._not_found:
            return None
        except self._errors as exc:
            raise self._error(f"cannot read gs://{self.bucket}/{key}", exc) from exc
        return data

    def rename(self, name: str, new_name: str) -> None:
        src, dst = self._key(name), self._key(new_name)
        try:
            self._bucket.copy_blob(self._bucket.blob(src), self._bucket, dst)
        except self._not_found:
            if self.get(new_name) is None:
                raise SinkError(f"cannot publish gs://{self.bucket}/{src}: it is gone") from None
            return  # a retried rename: done before
        except self._errors as exc:
            raise self._error(f"cannot publish gs://{self.bucket}/{dst}", exc) from exc
        self.delete(name)

    def delete(self, name: str) -> None:
        key = self._key(name)
        try:
            self._bucket.blob(key).delete()
        except self._not_found:
            pass
        except self._errors as exc:
            raise self._error(f"cannot remove gs://{self.bucket}/{key}", exc) from exc

    def list(self, prefix: str) -> list[str]:
        start = self._key(prefix)
        cut = len(self._key(""))
        try:
            return [b.name[cut:] for b in self._client.list_blobs(self.bucket, prefix=start)]
        except self._errors as exc:
            raise self._error(f"cannot list gs://{self.bucket}/{start}", exc) from exc

    def close(self) -> None:
        self._client.close()

    def _error(self, what: str, exc: BaseException) -> SinkError:
        """``exc`` from the client as a sink error: terminal when no retry can change it."""
        from google.auth import exceptions as auth_exceptions

        status = getattr(exc, "code", None)
        # NB: a token server out of reach (TransportError) is worth a retry
        unreachable = isinstance(exc, auth_exceptions.TransportError)
        refused = isinstance(exc, auth_exceptions.GoogleAuthError) and not unreachable
        if status in _TERMINAL_STATUS or refused:
            return TerminalSinkError(
                f"{what}: {_first_line(exc)}; check the bucket and the credentials "
                "(CREDENTIALS, AUTH, ASSUME_ROLE) of the sink URI"
            )
        return SinkError(f"{what}: {_first_line(exc)}")


def _credentials(uri: SinkURI, auth: str, endpoint: str | None, chain: list[str]) -> Any:
    """The credentials the URI gives: a service account's key (``CREDENTIALS``), none
    for an emulator, or ``None`` (the client finds the machine's: ``AUTH=implicit``);
    with ``ASSUME_ROLE`` (``chain``), the last account of the chain impersonated with
    them."""
    from google.auth.credentials import AnonymousCredentials

    given = uri.param("CREDENTIALS")
    if auth == "implicit" and given:
        raise option_error("sink parameter CREDENTIALS is not used with AUTH=implicit")
    if auth == "specified" and not given:
        if chain:
            raise option_error(
                "sink parameter ASSUME_ROLE needs credentials to impersonate the account "
                "with: CREDENTIALS (a service account's JSON key, base64-encoded) or "
                "AUTH=implicit"
            )
        if endpoint:
            return AnonymousCredentials()  # type: ignore[no-untyped-call]
        raise option_error(
            "sink parameter CREDENTIALS is needed with AUTH=specified (the default): a "
            "service account's JSON key, base64-encoded; or give AUTH=implicit"
        )
    scopes = [CLOUD_PLATFORM_SCOPE] if chain else None
    if given:
        source = service_account(given, scopes)
    elif not chain:
        return None
    else:
        source = _machine_credentials(scopes)
    if not chain:
        return source
    iam = uri.param("GS_IAM_ENDPOINT") or IAM_CREDENTIALS
    if not iam.startswith(("http://", "https://")):
        raise option_error(f"sink parameter GS_IAM_ENDPOINT={iam!r} is not an http(s) URL")
    return impersonating(source, chain, [READ_WRITE_SCOPE], generate_access_token_url(iam, "{}"))


def _machine_credentials(scopes: list[str] | None) -> Any:
    """Application Default Credentials (``AUTH=implicit``), found now: impersonation
    needs them in hand."""
    import google.auth
    from google.auth import exceptions as auth_exceptions

    try:
        credentials, _ = google.auth.default(scopes=scopes)
    except auth_exceptions.GoogleAuthError as exc:
        raise option_error(f"the gs:// sink has no credentials (AUTH=implicit): {exc}") from None
    return credentials


def _project(credentials: Any) -> str | None:
    """The project the client names (none is needed to read and write a bucket's
    objects): the key's, or a placeholder without one."""
    return getattr(credentials, "project_id", None) or "feedkv"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
