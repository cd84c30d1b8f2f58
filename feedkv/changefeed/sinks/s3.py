"""``s3://bucket/prefix``: changefeed files in an S3 bucket (boto3).

URI parameters follow CockroachDB's: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_REGION`` and ``AWS_ENDPOINT`` (an S3-compatible server,
such as moto in the tests). Without keys, boto3's usual credential chain applies. A
``PutObject`` is atomic, so a file is seen whole or not at all.
"""

from __future__ import annotations

from typing import Any

from feedkv.changefeed.options import option_error
from feedkv.changefeed.sink import SinkError, SinkURI

__all__ = ["S3Blobs"]


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

    def put(self, name: str, data: bytes) -> None:
        key = f"{self.prefix}/{name}" if self.prefix else name
        try:
            self._client.put_object(Bucket=self.bucket, Key=key, Body=data)
        except self._errors as exc:
            raise SinkError(f"cannot write s3://{self.bucket}/{key}: {exc}") from exc

    def close(self) -> None:
        self._client.close()
