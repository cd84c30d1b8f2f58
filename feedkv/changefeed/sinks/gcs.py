"""``gs://bucket/prefix``: changefeed files in a Google Cloud Storage bucket
(google-cloud-storage).

URI parameters follow CockroachDB's: ``AUTH=specified`` (the default) with
``CREDENTIALS``, a service account's JSON key base64-encoded, or ``AUTH=implicit``, the
machine's own credentials (Application Default Credentials). ``GS_ENDPOINT`` is
feedkv's own, as ``AWS_ENDPOINT`` is for S3: a Cloud Storage-compatible server given
whole (an emulator in the tests), reached without credentials unless ``CREDENTIALS``
names some. CockroachDB's ``ASSUME_ROLE`` (service account impersonation) is refused
with a message saying so.

An upload is atomic (a blob appears when its upload finalizes), so a file is seen whole
or not at all. Cloud Storage has no rename: :meth:`GCSBlobs.rename` copies and deletes.

Errors no retry can change (credentials refused, access denied, no such bucket) are
:class:`TerminalSinkError`; the rest (a throttle, a 5xx, a dropped connection) are
retryable :class:`SinkError`.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from feedkv.changefeed.options import option_error
from feedkv.changefeed.sink import SinkError, SinkURI, TerminalSinkError

__all__ = ["GCSBlobs"]

_TERMINAL_STATUS = frozenset({401, 403, 404})


class GCSBlobs:
    """The bucket and prefix a ``gs://`` URI names, as a
    :class:`~feedkv.changefeed.sinks.cloud_storage.BlobStore`."""

    def __init__(self, uri: SinkURI) -> None:
        from google.api_core import exceptions
        from google.auth import exceptions as auth_exceptions
        from google.cloud import storage

        if not uri.host:
            raise option_error(f"sink URI {uri.uri!r} needs a bucket: gs://bucket/prefix")
        if uri.param("ASSUME_ROLE"):
            raise option_error(
                "sink parameter ASSUME_ROLE: impersonating a service account is not supported; "
                "give the account's key in CREDENTIALS"
            )
        auth = (uri.param("AUTH") or "specified").lower()
        if auth not in ("specified", "implicit"):
            raise option_error(f"sink parameter AUTH={uri.param('AUTH')!r}: specified or implicit")
        endpoint = uri.param("GS_ENDPOINT")
        if endpoint is not None and not endpoint.startswith(("http://", "https://")):
            raise option_error(f"sink parameter GS_ENDPOINT={endpoint!r} is not an http(s) URL")
        credentials = _credentials(uri, auth, endpoint)
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
        if status in _TERMINAL_STATUS or isinstance(exc, auth_exceptions.GoogleAuthError):
            return TerminalSinkError(
                f"{what}: {_first_line(exc)}; check the bucket and the credentials "
                "(CREDENTIALS, AUTH) of the sink URI"
            )
        return SinkError(f"{what}: {_first_line(exc)}")


def _credentials(uri: SinkURI, auth: str, endpoint: str | None) -> Any:
    """The credentials the URI gives: a service account's key (``CREDENTIALS``), none
    for an emulator, or ``None`` (the client finds the machine's: ``AUTH=implicit``)."""
    from google.auth.credentials import AnonymousCredentials
    from google.oauth2 import service_account

    given = uri.param("CREDENTIALS")
    if auth == "implicit":
        if given:
            raise option_error("sink parameter CREDENTIALS is not used with AUTH=implicit")
        return None
    if not given:
        if endpoint:
            return AnonymousCredentials()  # type: ignore[no-untyped-call]
        raise option_error(
            "sink parameter CREDENTIALS is needed with AUTH=specified (the default): a "
            "service account's JSON key, base64-encoded; or give AUTH=implicit"
        )
    text = given.strip().replace(" ", "+")
    try:
        info = json.loads(base64.b64decode(text + "=" * (-len(text) % 4), validate=True))
        return service_account.Credentials.from_service_account_info(info)  # type: ignore[no-untyped-call]
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise option_error(
            "sink parameter CREDENTIALS is not a base64-encoded service account key "
            f"(`base64 -w0 key.json`): {exc}"
        ) from None


def _project(credentials: Any) -> str | None:
    """The project the client names (none is needed to read and write a bucket's
    objects): the key's, or a placeholder without one."""
    return getattr(credentials, "project_id", None) or "feedkv"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
