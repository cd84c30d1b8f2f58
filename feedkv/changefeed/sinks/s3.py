"""``s3://bucket/prefix``: changefeed files in an S3 bucket (boto3).

URI parameters follow CockroachDB's: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_REGION`` and ``AWS_ENDPOINT`` (an S3-compatible server,
such as moto in the tests). Without keys, boto3's usual credential chain applies. A
``PutObject`` is atomic, so a file is seen whole or not at all.

Errors no retry can change (no credentials, keys S3 does not know or a signature it
refuses, access denied, no such bucket) are :class:`TerminalSinkError`; the rest (a
throttle, a 5xx, a dropped connection) are retryable :class:`SinkError`.
"""

from __future__ import annotations

from typing import Any

from feedkv.changefeed.options import option_error
from feedkv.changefeed.sink import SinkError, SinkURI, TerminalSinkError

__all__ = ["TERMINAL_CODES", "S3Blobs"]

# S3 error codes that mean the sink's settings are wrong, not that S3 is in trouble.
TERMINAL_CODES = frozenset(
    {
        "AccessDenied",
        "AllAccessDisabled",
        "AccountProblem",
        "InvalidAccessKeyId",
        "InvalidBucketName",
        "InvalidToken",
        "ExpiredToken",
        "NoSuchBucket",
        "SignatureDoesNotMatch",
        "InvalidSecurity",
    }
)


class S3Blobs:
    def __init__(self, uri: SinkURI) -> None:
        import boto3
        import botocore.config
        import botocore.exceptions

        if not uri.host:
            raise option_error(f"sink URI {uri.uri!r} needs a bucket: s3://bucket/prefix")
        self.bucket = uri.host
        self.prefix = uri.path.strip("/")
        self._errors: tuple[type[BaseException], ...] = (
            botocore.exceptions.BotoCoreError,
            botocore.exceptions.ClientError,
        )
        self._no_credentials = botocore.exceptions.NoCredentialsError
        kwargs: dict[str, Any] = {
            "config": botocore.config.Config(retries={"max_attempts": 3, "mode": "standard"})
        }
        for param, arg in (
            ("AWS_ACCESS_KEY_ID", "aws_access_key_id"),
            ("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
            ("AWS_SESSION_TOKEN", "aws_session_token"),
            ("AWS_REGION", "region_name"),
            ("AWS_ENDPOINT", "endpoint_url"),
        ):
            value = uri.param(param)
            if value:
                kwargs[arg] = value
        kwargs.setdefault("region_name", "us-east-1")
        self._client = boto3.client("s3", **kwargs)

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def put(self, name: str, data: bytes) -> None:
        key = self._key(name)
        try:
            self._client.put_object(Bucket=self.bucket, Key=key, Body=data)
        except self._errors as exc:
            raise self._error(f"cannot write s3://{self.bucket}/{key}", exc) from exc

    def get(self, name: str) -> bytes | None:
        key = self._key(name)
        try:
            body: bytes = self._client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except self._client.exceptions.NoSuchKey:
            return None
        except self._errors as exc:
            raise self._error(f"cannot read s3://{self.bucket}/{key}", exc) from exc
        return body

    def rename(self, name: str, new_name: str) -> None:
        src, dst = self._key(name), self._key(new_name)
        try:
            self._client.copy_object(
                Bucket=self.bucket, Key=dst, CopySource={"Bucket": self.bucket, "Key": src}
            )
        except self._client.exceptions.NoSuchKey:
            if self.get(new_name) is None:
                raise SinkError(f"cannot publish s3://{self.bucket}/{src}: it is gone") from None
            return
        except self._errors as exc:
            raise self._error(f"cannot publish s3://{self.bucket}/{dst}", exc) from exc
        self.delete(name)

    def delete(self, name: str) -> None:
        key = self._key(name)
        try:
            self._client.delete_object(Bucket=self.bucket, Key=key)
        except self._errors as exc:
            raise self._error(f"cannot remove s3://{self.bucket}/{key}", exc) from exc

    def list(self, prefix: str) -> list[str]:
        start = self._key(prefix)
        cut = len(self._key(""))
        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=start
            )
            return [item["Key"][cut:] for page in pages for item in page.get("Contents", [])]
        except self._errors as exc:
            raise self._error(f"cannot list s3://{self.bucket}/{start}", exc) from exc

    def close(self) -> None:
        self._client.close()

    def _error(self, what: str, exc: BaseException) -> SinkError:
        """``exc`` from boto3 as a sink error: terminal when no retry can change it."""
        code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
        if isinstance(exc, self._no_credentials) or code in TERMINAL_CODES:
            return TerminalSinkError(
                f"{what}: {exc}; check the bucket and the credentials (AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY) of the sink URI"
            )
        return SinkError(f"{what}: {exc}")
