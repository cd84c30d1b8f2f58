"""``sasl_mechanism=AWS_MSK_IAM``: Amazon MSK's IAM authentication, as CockroachDB's Kafka
sink does it (``sasl_aws_region``, ``sasl_aws_iam_role_arn``, ``sasl_aws_iam_session_name``,
all three required).

MSK's IAM access control is SASL ``OAUTHBEARER`` whose token is a SigV4-presigned URL:
``GET https://kafka.<region>.amazonaws.com/?Action=kafka-cluster:Connect`` signed for the
service ``kafka-cluster`` in the cluster's region, valid 900 seconds, with a ``User-Agent``
parameter after the signature, base64url-encoded without padding. The broker checks the
signature against IAM and the principal's ``kafka-cluster:Connect`` permission. This is the
token AWS's signers (``aws-msk-iam-sasl-signer-go``, which CockroachDB calls, and its Python
twin) make; botocore signs it here, so no extra dependency is needed.

The credentials are the role's: :class:`MSKTokenSource` assumes ``sasl_aws_iam_role_arn``
through STS with the node's own AWS credentials (botocore's default chain: environment,
shared config, instance or container role; ``AWS_ENDPOINT_URL_STS`` is honoured too) and
keeps them until shortly before they expire, as ``GenerateAuthTokenFromRole`` does.

librdkafka has no ``AWS_MSK_IAM`` of its own: the Kafka sink hands it an ``oauth_cb``
(:meth:`MSKTokenSource.oauth_cb`), which librdkafka calls on a background thread when it
needs a token and again before the token expires. A failure (STS refusing the role, no
AWS credentials) is kept in :attr:`MSKTokenSource.failure` so that the sink's errors can
say why no broker accepted it. NB: confluent-kafka's ``Producer`` calls the callback while
it is built and waits up to 10 s for a token, so the sink fetches the first token itself
first (:meth:`MSKTokenSource.token`), failing at once and saying why.
"""

from __future__ import annotations

import base64
import calendar
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from feedkv.changefeed.sink import SinkError, TerminalSinkError

__all__ = [
    "MSK_IAM_PARAMS",
    "TOKEN_LIFETIME_S",
    "MSKTokenSource",
    "check_params",
    "presigned_token",
]

MSK_IAM_PARAMS = ("sasl_aws_region", "sasl_aws_iam_role_arn", "sasl_aws_iam_session_name")
TOKEN_LIFETIME_S = 900  # AWS's signers' X-Amz-Expires
SIGNING_SERVICE = "kafka-cluster"
ACTION = "kafka-cluster:Connect"
USER_AGENT = "feedkv-msk-iam/1.0"
# Credentials closer than this to their end are renewed before signing: a token must
# not outlive the credentials that signed it.
_RENEW_BEFORE_S = TOKEN_LIFETIME_S + 60

_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d+")
_ROLE_ARN = re.compile(r"arn:aws(-[a-z]+)*:iam::\d{12}:role/[\w+=,.@/-]{1,512}")
_SESSION_NAME = re.compile(r"[\w+=,.@-]{2,64}")  # STS's RoleSessionName


def check_params(params: dict[str, str | None]) -> tuple[str, str, str]:
    """``(region, role_arn, session_name)`` from the sink URI's parameters; raises
    ``ValueError`` naming the parameter that is missing or malformed."""
    for name in MSK_IAM_PARAMS:
        if not params.get(name):
            raise ValueError(f"sink parameter {name} is needed with sasl_mechanism=AWS_MSK_IAM")
    region = params["sasl_aws_region"] or ""
    role_arn = params["sasl_aws_iam_role_arn"] or ""
    session = params["sasl_aws_iam_session_name"] or ""
    if not _REGION.fullmatch(region):
        raise ValueError(
            f"sink parameter sasl_aws_region={region!r} is not an AWS region such as "
            "'us-east-1' (the MSK cluster's region)"
        )
    if not _ROLE_ARN.fullmatch(role_arn):
        raise ValueError(
            f"sink parameter sasl_aws_iam_role_arn={role_arn!r} is not an IAM role ARN such "
            "as 'arn:aws:iam::123456789012:role/msk-role'"
        )
    if not _SESSION_NAME.fullmatch(session):
        raise ValueError(
            f"sink parameter sasl_aws_iam_session_name={session!r} is not an STS session "
            "name: 2 to 64 letters, digits or any of +=,.@_-"
        )
    return region, role_arn, session


def presigned_token(region: str, credentials: Any) -> tuple[str, float]:
    """The MSK IAM token for ``credentials`` (botocore ``Credentials``, with a session
    token for a role's) and its expiry in seconds since the epoch: see the module
    docstring. Signed at the current time."""
    from botocore.auth import SigV4QueryAuth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(
        method="GET", url=f"https://kafka.{region}.amazonaws.com/", params={"Action": ACTION}
    )
    SigV4QueryAuth(credentials, SIGNING_SERVICE, region, expires=TOKEN_LIFETIME_S).add_auth(request)
    signed: str = request.url
    stamp = re.search(r"[?&]X-Amz-Date=(\d{8}T\d{6}Z)", signed)
    if stamp is None:  # botocore always sets it; a change there must not pass silently
        raise RuntimeError(f"botocore presigned an MSK URL without X-Amz-Date: {signed}")
    signed_at = calendar.timegm(time.strptime(stamp[1], "%Y%m%dT%H%M%SZ"))
    url = f"{signed}&User-Agent={USER_AGENT}"
    token = base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
    return token, float(signed_at + TOKEN_LIFETIME_S)


class MSKTokenSource:
    """MSK IAM tokens signed with the credentials of an assumed role; see the module
    docstring. ``sts`` makes the STS client (a test knob; by default botocore's, from
    the default credential chain, in ``region``); ``clock`` gives seconds since the
    epoch. Thread-safe: librdkafka calls :meth:`oauth_cb` on a thread of its own."""

    def __init__(
        self,
        region: str,
        role_arn: str,
        session_name: str,
        *,
        sts: Callable[[], Any] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.region = region
        self.role_arn = role_arn
        self.session_name = session_name
        self._sts_factory = sts or self._default_sts
        self._clock = clock
        self._lock = threading.Lock()
        self._credentials: Any = None
        self._expires = 0.0  # of the credentials, seconds since the epoch
        self.failure: str | None = None  # why the last token could not be made

    def token(self) -> tuple[str, float]:
        """A fresh token and its expiry (seconds since the epoch); assumes the role
        again when its credentials are near their end. Raises TerminalSinkError when STS
        refuses the role (no retry changes that), SinkError when STS cannot be asked (not
        reachable, or this node has no AWS credentials), each saying why."""
        with self._lock:
            try:
                credentials = self._role_credentials()
            except SinkError as exc:
                self.failure = str(exc)
                raise
            token, expires = presigned_token(self.region, credentials)
            self.failure = None
            return token, min(expires, self._expires)

    def oauth_cb(self, _config: str | None) -> tuple[str, float]:
        """confluent-kafka's ``oauth_cb``: the token and its expiry in seconds."""
        return self.token()

    def _role_credentials(self) -> Any:
        if self._credentials is not None and self._clock() < self._expires - _RENEW_BEFORE_S:
            return self._credentials
        from botocore.credentials import Credentials
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self._sts_factory().assume_role(
                RoleArn=self.role_arn, RoleSessionName=self.session_name
            )
        except ClientError as exc:
            raise TerminalSinkError(
                f"STS refused to let this node assume {self.role_arn} in {self.region}: {exc}"
            ) from exc
        except BotoCoreError as exc:
            raise SinkError(
                f"could not ask STS to assume {self.role_arn} in {self.region}: {exc}"
            ) from exc
        given = answer["Credentials"]
        self._credentials = Credentials(
            given["AccessKeyId"], given["SecretAccessKey"], given["SessionToken"]
        )
        self._expires = given["Expiration"].timestamp()
        return self._credentials

    def _default_sts(self) -> Any:
        import boto3

        return boto3.session.Session().client("sts", region_name=self.region)
