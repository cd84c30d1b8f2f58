"""The Kafka sink's ``sasl_mechanism=AWS_MSK_IAM``, as CockroachDB 26.1 takes it (its
"Changefeed Sinks" page, "Amazon MSK", and "Stream a Changefeed to Amazon MSK"):
``sasl_aws_region``, ``sasl_aws_iam_role_arn`` and ``sasl_aws_iam_session_name``, all
three required (CockroachDB's ``kafkaauth/sasl_msk.go``), the role assumed through STS
and the token a SigV4-presigned ``kafka-cluster:Connect`` URL.

STS is moto's, on loopback, in this process (so the test can play IAM and look up the
secret of the key a token was signed with). The broker is librdkafka's mock cluster
behind :class:`~feedkv.testing.kafka_sasl.SaslFront`, which checks each token as MSK
does (:class:`~feedkv.testing.kafka_sasl.MSKIAMCheck`, SigV4 computed from AWS's
specification, not botocore's code)."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import boto3
import pytest
from botocore.exceptions import ClientError

from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.sink import Message, SinkError, TerminalSinkError, parse_sink_uri
from feedkv.changefeed.sinks import kafka
from feedkv.changefeed.sinks.kafka_msk_iam import TOKEN_LIFETIME_S, MSKTokenSource
from feedkv.errors import SQLError
from feedkv.testing.kafka_mock import read_topic
from feedkv.testing.kafka_sasl import MSKIAMCheck, SaslFront
from feedkv.util.hlc import Timestamp

REGION = "eu-west-3"
ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/msk-role"
SESSION = "feedkv-changefeed"
MSK = (
    f"&sasl_enabled=true&sasl_mechanism=AWS_MSK_IAM&sasl_aws_region={REGION}"
    f"&sasl_aws_iam_role_arn={quote(ROLE, safe='')}&sasl_aws_iam_session_name={SESSION}"
)


class STS:
    """moto's STS on loopback; :meth:`secret_for` is IAM's answer for a role's key."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"

    def client(self) -> Any:
        return boto3.client(
            "sts",
            region_name=REGION,
            endpoint_url=self.url,
            aws_access_key_id="node-key",
            aws_secret_access_key="node-secret",
        )

    def roles(self) -> list[Any]:
        from moto.sts.models import sts_backends

        return list(sts_backends[ACCOUNT]["aws"].assumed_roles)

    def secret_for(self, key_id: str, session_token: str | None) -> str | None:
        for role in self.roles():
            if (role.access_key_id, role.session_token) == (key_id, session_token):
                return str(role.secret_access_key)
        return None

    def close(self) -> None:
        self._server.stop()


@pytest.fixture
def sts() -> Iterator[STS]:
    server = STS()
    yield server
    server.close()


@pytest.fixture
def node_aws_env(sts: STS, monkeypatch: pytest.MonkeyPatch) -> STS:
    """This node's AWS configuration, as an operator sets it: its own key and STS's
    endpoint (botocore's ``AWS_ENDPOINT_URL_STS``)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "node-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "node-secret")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", sts.url)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return sts


def decoded(token: str) -> tuple[Any, dict[str, list[str]]]:
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    return urlsplit(url), parse_qs(urlsplit(url).query)


# The token.


def test_the_token_is_a_presigned_kafka_cluster_connect_url_signed_by_the_role(sts: STS) -> None:
    """What MSK checks: ``kafka-cluster:Connect`` at ``kafka.<region>.amazonaws.com``,
    SigV4 for ``kafka-cluster`` in the cluster's region, with the assumed role's key and
    session token (not the node's own key), valid 900 s."""
    before = time.time()
    token, expires = MSKTokenSource(REGION, ROLE, SESSION, sts=sts.client).token()
    url, params = decoded(token)
    [role] = [r for r in sts.roles() if r.session_name == SESSION]
    assert role.role_arn == ROLE
    assert (url.scheme, url.netloc, url.path) == ("https", f"kafka.{REGION}.amazonaws.com", "/")
    assert params["Action"] == ["kafka-cluster:Connect"]
    key_id, _day, region, service, terminal = params["X-Amz-Credential"][0].split("/")
    assert (key_id, region, service, terminal) == (
        role.access_key_id,
        REGION,
        "kafka-cluster",
        "aws4_request",
    )
    assert key_id != "node-key"
    assert params["X-Amz-Security-Token"] == [role.session_token]
    assert params["X-Amz-Expires"] == [str(TOKEN_LIFETIME_S)]
    assert before - 1 <= expires - TOKEN_LIFETIME_S <= time.time() + 1
    check = MSKIAMCheck(REGION, sts.secret_for)
    assert check(token) is None
    assert check.principals == [role.access_key_id]


def test_the_msk_check_refuses_another_region_a_forged_signature_and_an_unknown_key(
    sts: STS,
) -> None:
    """The broker's check is not vacuous: each of these is refused."""
    token, _ = MSKTokenSource(REGION, ROLE, SESSION, sts=sts.client).token()
    assert "not for kafka.us-east-1" in (MSKIAMCheck("us-east-1", sts.secret_for)(token) or "")
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    signature = parse_qs(urlsplit(url).query)["X-Amz-Signature"][0]
    forged = url.replace(signature, ("0" if signature[0] != "0" else "1") + signature[1:])
    forged_token = base64.urlsafe_b64encode(forged.encode()).decode().rstrip("=")
    check = MSKIAMCheck(REGION, sts.secret_for)
    assert check(forged_token) == "the token's signature does not verify"
    assert "IAM does not know" in (MSKIAMCheck(REGION, lambda k, t: None)(token) or "")
    late = MSKIAMCheck(REGION, sts.secret_for, clock=lambda: time.time() + TOKEN_LIFETIME_S + 5)
    assert late(token) == "the token has expired"


def test_the_role_is_assumed_again_only_near_the_end_of_its_credentials(sts: STS) -> None:
    now = [time.time()]
    source = MSKTokenSource(REGION, ROLE, "renewing-session", sts=sts.client, clock=lambda: now[0])

    def assumed() -> int:
        return sum(r.session_name == "renewing-session" for r in sts.roles())

    source.token()
    source.token()
    assert assumed() == 1
    [role] = [r for r in sts.roles() if r.session_name == "renewing-session"]
    now[0] = role.expiration.replace(tzinfo=UTC).timestamp() - TOKEN_LIFETIME_S
    token, expires = source.token()
    assert assumed() == 2
    assert MSKIAMCheck(REGION, sts.secret_for)(token) is None
    assert expires <= role.expiration.replace(tzinfo=UTC).timestamp() + TOKEN_LIFETIME_S


class RefusingSTS:
    """STS answering AccessDenied, as it does to a role whose trust policy leaves this
    node out."""

    def assume_role(self, **_: Any) -> Any:
        raise ClientError(
            {"Error": {"Code": "AccessDenied", "Message": "not authorized to assume"}},
            "AssumeRole",
        )


def test_sts_refusing_the_role_is_terminal_and_says_why() -> None:
    source = MSKTokenSource(REGION, ROLE, SESSION, sts=RefusingSTS)
    with pytest.raises(TerminalSinkError, match="STS refused to let this node assume") as raised:
        source.token()
    assert "AccessDenied" in str(raised.value)
    assert source.failure is not None and "AccessDenied" in source.failure


# Through a broker that checks the tokens.


def make_sink(uri: str) -> kafka.KafkaSink:
    options = ChangefeedOptions()
    return kafka.make(parse_sink_uri(uri, options), options, flush_timeout=30.0)


def test_a_sink_delivers_through_a_broker_that_checks_msk_tokens(node_aws_env: STS) -> None:
    check = MSKIAMCheck(REGION, node_aws_env.secret_for)
    front = SaslFront(check)
    try:
        sink = make_sink(f"kafka://{front.bootstrap}?topic_prefix=msk_" + MSK)
        try:
            sink.dial(30.0)
            sink.emit_row(
                Message("rides", b'["a"]', b'{"after": 1}', Timestamp(5, 0), Timestamp(5, 0))
            )
            sink.flush()
        finally:
            sink.close()
        reader = MSKTokenSource(REGION, ROLE, "reader", sts=node_aws_env.client)
        sasl = {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": reader.oauth_cb,
        }
        records = read_topic(front.bootstrap, "msk_rides", 60.0, config=sasl)
    finally:
        front.close()
    assert [(r.key, r.value) for rs in records.values() for r in rs] == [
        (b'["a"]', b'{"after": 1}')
    ]
    by_key = {r.access_key_id: r for r in node_aws_env.roles()}
    signers = {(by_key[k].role_arn, by_key[k].session_name) for k in check.principals}
    assert signers == {(ROLE, SESSION), (ROLE, "reader")}  # the sink's and the reader's
    assert front.refused == []


def test_create_changefeed_fails_when_the_broker_refuses_the_token(node_aws_env: STS) -> None:
    """A broker whose clock is past the token's 900 s refuses it: CREATE CHANGEFEED
    fails with the broker's reason, as a terminal error (22023), not as unreachable."""
    late = MSKIAMCheck(
        REGION, node_aws_env.secret_for, clock=lambda: time.time() + 2 * TOKEN_LIFETIME_S
    )
    front = SaslFront(late)
    options = ChangefeedOptions()
    try:
        with pytest.raises(SQLError) as raised:
            kafka.check(
                parse_sink_uri(f"kafka://{front.bootstrap}?" + MSK[1:], options),
                options,
                timeout=6.0,
            )
    finally:
        front.close()
    assert raised.value.code == "22023"
    assert "refuse this client" in raised.value.message
    assert "the token has expired" in raised.value.message
    assert front.refused and front.accepted == 0


def test_an_unreachable_sts_fails_create_changefeed_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "node-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "node-secret")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:9")  # nothing listens
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    options = ChangefeedOptions()
    uri = parse_sink_uri("kafka://127.0.0.1:9?" + MSK[1:], options)
    with pytest.raises(SinkError, match="could not ask STS to assume"):
        kafka.make(uri, options)
    with pytest.raises(SQLError) as raised:
        kafka.check(uri, options)
    assert raised.value.code == "08000"
    assert "could not ask STS" in raised.value.message


# Bad parameters, at CREATE CHANGEFEED.

BASE = "kafka://h:9092?sasl_enabled=true&sasl_mechanism=AWS_MSK_IAM"
ARN = quote(ROLE, safe="")


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        (
            f"{BASE}&sasl_aws_iam_role_arn={ARN}&sasl_aws_iam_session_name=s1",
            "sasl_aws_region is needed with sasl_mechanism=AWS_MSK_IAM",
        ),
        (
            f"{BASE}&sasl_aws_region={REGION}&sasl_aws_iam_session_name=s1",
            "sasl_aws_iam_role_arn is needed",
        ),
        (
            f"{BASE}&sasl_aws_region={REGION}&sasl_aws_iam_role_arn={ARN}",
            "sasl_aws_iam_session_name is needed",
        ),
        (
            f"{BASE}&sasl_aws_region=Paris&sasl_aws_iam_role_arn={ARN}&sasl_aws_iam_session_name=s1",
            "sasl_aws_region='Paris' is not an AWS region",
        ),
        (
            f"{BASE}&sasl_aws_region={REGION}&sasl_aws_iam_role_arn=msk-role"
            "&sasl_aws_iam_session_name=s1",
            "sasl_aws_iam_role_arn='msk-role' is not an IAM role ARN",
        ),
        (
            f"{BASE}&sasl_aws_region={REGION}&sasl_aws_iam_role_arn={ARN}"
            "&sasl_aws_iam_session_name=a%20b",
            "sasl_aws_iam_session_name='a b' is not an STS session name",
        ),
        (f"kafka://h:9092?{MSK[1:]}&sasl_user=u", "sasl_user is not used with sasl_mechanism=AWS"),
        (
            f"kafka://h:9092?sasl_enabled=true&sasl_user=u&sasl_password=p&sasl_aws_region={REGION}",
            "sasl_aws_region is for sasl_mechanism=AWS_MSK_IAM, not PLAIN",
        ),
        (f"kafka://h:9092?sasl_aws_region={REGION}", "sasl_aws_region needs sasl_enabled=true"),
        (
            "kafka://h:9092?sasl_enabled=true&sasl_mechanism=AWS_IAM",
            "OAUTHBEARER, AWS_MSK_IAM",
        ),
        (
            f"confluent-cloud://h:9092?api_key=k&api_secret=s&sasl_aws_region={REGION}",
            "sasl_aws_region is not used by confluent-cloud:// sinks",
        ),
    ],
)
def test_bad_msk_iam_params_are_refused_naming_the_parameter(uri: str, message: str) -> None:
    options = ChangefeedOptions()
    with pytest.raises(SQLError) as raised:
        kafka.make(parse_sink_uri(uri, options), options)
    assert raised.value.code == "22023"
    assert message in raised.value.message


def test_create_changefeed_refuses_a_missing_region_before_dialling(db: Any) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    with pytest.raises(SQLError) as raised:
        db.sql(
            "CREATE CHANGEFEED FOR t INTO 'kafka://127.0.0.1:9?sasl_enabled=true"
            f"&sasl_mechanism=AWS_MSK_IAM&sasl_aws_iam_role_arn={ARN}"
            "&sasl_aws_iam_session_name=s1'"
        )
    assert raised.value.code == "22023"
    assert "sasl_aws_region is needed with sasl_mechanism=AWS_MSK_IAM" in raised.value.message


def test_the_credentials_expiry_bounds_the_token() -> None:
    """A token never outlives the role credentials that signed it."""

    class ShortLived:
        def assume_role(self, **_: Any) -> Any:
            return {
                "Credentials": {
                    "AccessKeyId": "ASIAEXAMPLE",
                    "SecretAccessKey": "secret",
                    "SessionToken": "session",
                    "Expiration": datetime.now(UTC) + timedelta(seconds=120),
                }
            }

    _, expires = MSKTokenSource(REGION, ROLE, SESSION, sts=ShortLived).token()
    assert expires <= time.time() + 121
