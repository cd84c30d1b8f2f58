"""A node started with ``--certs-dir``: every port speaks TLS, real clients get in
with certificates or SCRAM passwords, and everyone else is refused with a clear error."""

from __future__ import annotations

import base64
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import boto3
import grpc
import httpx
import psycopg
import pytest

import feedkv
from feedkv.cli.main import main
from feedkv.errors import NodeUnavailableError, PermissionDeniedError
from feedkv.kv.address import parse_node_url
from feedkv.kv.grpc_transport import GrpcTransport
from feedkv.kv.wire import SERVICE
from feedkv.security.call_auth import CertClaims
from feedkv.security.secrets import KEY_FILE, load_key
from feedkv.security.tls import ClientTLS, node_audience
from feedkv.testing.certs import make_certs_dir
from feedkv.testing.kafka_sasl import SaslFront
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.s3_server import moto_s3_server
from feedkv.testing.waiting import wait_until

PSQL = shutil.which("psql")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs_dir(tmp_path_factory.mktemp("pki"), users=("root", "alice"))


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[NodeProcess]:
    store = tmp_path_factory.mktemp("secure") / "store"
    process = NodeProcess(
        store,
        "--certs-dir",
        str(certs),
        "--changefeed-runner",
        "thread",
        "--external-io-dir",
        str(store / "extern"),  # the default, given: NodeProcess's own is the temp dir
    )
    try:
        with feedkv.connect(process.url, certs_dir=certs) as db:
            db.sql("CREATE USER IF NOT EXISTS alice WITH PASSWORD 'alice-pw'")
            db.sql("CREATE USER IF NOT EXISTS bob")
        yield process
    finally:
        assert process.terminate() == 0


def _sql_address(node: NodeProcess) -> tuple[str, str]:
    host_port = node.sql_url.split("@", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    return host, port


def _dsn(node: NodeProcess, certs: Path, user: str, **extra: str) -> str:
    host, port = _sql_address(node)
    params = {
        "host": host,
        "port": port,
        "user": user,
        "dbname": "defaultdb",
        "sslmode": "verify-full",
        "sslrootcert": str(certs / "ca.crt"),
        **extra,
    }
    return " ".join(f"{k}={v}" for k, v in params.items())


def test_root_uses_the_kv_api_over_tls(node: NodeProcess, certs: Path) -> None:
    assert node.url.startswith("feedkv://")
    with feedkv.connect(node.url, certs_dir=certs) as db:
        db.put(b"tls-key", b"tls-value")
        assert db.get(b"tls-key") == b"tls-value"


def test_a_user_who_is_not_root_cannot_use_the_raw_kv_api(node: NodeProcess, certs: Path) -> None:
    with (
        feedkv.connect(node.url, certs_dir=certs, user="alice") as db,
        pytest.raises(PermissionDeniedError, match=r"user alice: .* only root reads"),
    ):
        db.scan(b"\x01", b"\xff\xff")


def test_plaintext_grpc_is_refused(node: NodeProcess) -> None:
    with pytest.raises(NodeUnavailableError, match=r"a secure node needs its CA: .*certs_dir="):
        GrpcTransport(*parse_node_url(node.url), connect_timeout_s=2)
    # and by the node itself, to a client that skips feedkv's own check
    with grpc.insecure_channel(node.address) as channel:
        now = channel.unary_unary(f"/{SERVICE}/Now")
        with pytest.raises(grpc.RpcError) as refused:
            now(b"", timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_certificate_of_another_ca_is_refused(node: NodeProcess, tmp_path: Path) -> None:
    foreign = make_certs_dir(tmp_path, users=("root",))
    with pytest.raises(NodeUnavailableError, match="does it trust this certificate"):
        GrpcTransport(
            *parse_node_url(node.url), connect_timeout_s=2, tls=ClientTLS.load(foreign, "root")
        )


def test_a_grpc_claim_signed_with_a_certificate_of_another_ca_is_refused(
    node: NodeProcess, certs: Path, tmp_path: Path
) -> None:
    """An attacker who trusts the node (its ca.crt is no secret) and claims to be root
    with a certificate and key of a CA of its own, made for this very node."""
    foreign = make_certs_dir(tmp_path, users=("root",))
    claims = CertClaims("root", foreign / "client.root.crt", foreign / "client.root.key")
    credentials = grpc.ssl_channel_credentials(root_certificates=(certs / "ca.crt").read_bytes())
    with grpc.secure_channel(node.address, credentials) as channel:
        metadata = claims.metadata(node_audience(channel))
        now = channel.unary_unary(f"/{SERVICE}/Now")
        with pytest.raises(grpc.RpcError) as refused:
            now(b"", metadata=metadata, timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "not issued by this cluster's CA" in str(refused.value.details())


def test_a_grpc_call_without_credentials_is_refused(node: NodeProcess, certs: Path) -> None:
    # NB: TLS itself lets a client without a certificate in (a password user logs in
    # over it); every call but Login must then carry credentials
    credentials = grpc.ssl_channel_credentials(root_certificates=(certs / "ca.crt").read_bytes())
    with grpc.secure_channel(node.address, credentials) as channel:
        now = channel.unary_unary(f"/{SERVICE}/Now")
        with pytest.raises(grpc.RpcError) as refused:
            now(b"", timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "needs credentials" in str(refused.value.details())


def test_psycopg_logs_in_with_a_client_certificate(node: NodeProcess, certs: Path) -> None:
    with psycopg.connect(node.sql_url) as conn:
        assert conn.info.pgconn.ssl_in_use
        assert conn.execute("SELECT current_user").fetchone() == ("root",)


def test_psycopg_logs_in_with_a_scram_password(node: NodeProcess, certs: Path) -> None:
    # NB: no client certificate for alice here: a copy of the certs dir with the CA only
    with psycopg.connect(_dsn(node, certs, "alice", password="alice-pw")) as conn:
        assert conn.info.pgconn.ssl_in_use
        assert conn.execute("SELECT current_user").fetchone() == ("alice",)


def test_a_client_certificate_logs_in_only_as_its_own_user(node: NodeProcess, certs: Path) -> None:
    alice = {"sslcert": str(certs / "client.alice.crt"), "sslkey": str(certs / "client.alice.key")}
    with psycopg.connect(_dsn(node, certs, "alice", **alice)) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("alice",)
    with pytest.raises(
        psycopg.OperationalError, match='password authentication failed for user "root"'
    ):
        psycopg.connect(_dsn(node, certs, "root", password="x", **alice))


def test_a_wrong_password_is_refused(node: NodeProcess, certs: Path) -> None:
    with pytest.raises(
        psycopg.OperationalError, match='password authentication failed for user "alice"'
    ):
        psycopg.connect(_dsn(node, certs, "alice", password="not-alice-pw"))
    # a user without a password, and one that does not exist, get the same answer
    for user in ("bob", "nobody"):
        with pytest.raises(psycopg.OperationalError, match=f'failed for user "{user}"'):
            psycopg.connect(_dsn(node, certs, user, password="x"))
    log = node.log.read_text()
    assert "SQL login of 'alice' from 127.0.0.1 refused: wrong password" in log
    assert "not-alice-pw" not in log


def test_alter_user_changes_the_password(node: NodeProcess, certs: Path) -> None:
    with psycopg.connect(node.sql_url, autocommit=True) as conn:
        conn.execute("CREATE USER carol WITH PASSWORD 'first'")
        conn.execute("ALTER USER carol WITH PASSWORD 'second'")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(_dsn(node, certs, "carol", password="first"))
    with psycopg.connect(_dsn(node, certs, "carol", password="second")) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("ALTER USER alice WITH PASSWORD 'taken'")


def test_the_sql_port_refuses_plaintext(node: NodeProcess, certs: Path) -> None:
    with pytest.raises(psycopg.OperationalError, match="takes TLS connections only"):
        psycopg.connect(_dsn(node, certs, "root", sslmode="disable"))


def test_the_sql_port_refuses_a_server_it_cannot_verify(node: NodeProcess, tmp_path: Path) -> None:
    foreign = make_certs_dir(tmp_path)
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        psycopg.connect(_dsn(node, foreign, "alice", password="alice-pw"))


@pytest.mark.skipif(PSQL is None, reason="psql is missing: `make` installs postgresql-client")
def test_psql_connects_with_verify_full(node: NodeProcess, certs: Path) -> None:
    assert PSQL is not None
    done = subprocess.run(
        [PSQL, node.sql_url, "-X", "-A", "-t", "-c", "SELECT current_user"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "root"


def test_the_http_port_serves_https(node: NodeProcess, certs: Path) -> None:
    assert node.http_url.startswith("https://")
    trusted = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    reply = httpx.get(f"{node.http_url}/_status/vars", verify=trusted, timeout=30)
    assert reply.status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{node.http_url}/_status/vars", verify=ssl.create_default_context(), timeout=30)
    plain = node.http_url.replace("https://", "http://")
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{plain}/_status/vars", timeout=30).raise_for_status()


def test_the_http_admin_paths_refuse_every_client_that_does_not_log_in(
    node: NodeProcess, certs: Path, tmp_path: Path
) -> None:
    """No Basic credentials, a wrong password, a client certificate of another CA (the
    port asks for none: only a password logs in), a server it cannot verify and plain
    http: none reaches the admin page's data; each refused login is logged, never its
    password."""
    overview = f"{node.http_url}/_admin/v1/overview"
    trusted = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    foreign = make_certs_dir(tmp_path, users=("root",))
    theirs = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    theirs.load_cert_chain(foreign / "client.root.crt", foreign / "client.root.key")
    password = "PLANTED-HTTP-PW-9"
    refusals = [
        httpx.get(overview, verify=trusted, timeout=30),
        httpx.get(overview, verify=trusted, timeout=30, auth=("alice", password)),
        httpx.get(overview, verify=theirs, timeout=30),
    ]
    assert [r.status_code for r in refusals] == [401, 401, 401]
    assert all(r.headers["www-authenticate"].startswith("Basic") for r in refusals)
    assert "wrong user name or password for 'alice'" in refusals[1].json()["error"]
    untrusted = ssl.create_default_context(cafile=str(foreign / "ca.crt"))
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(overview, verify=untrusted, timeout=30)
    with pytest.raises(httpx.HTTPError):
        httpx.get(overview.replace("https://", "http://"), timeout=30).raise_for_status()
    good = httpx.get(overview, verify=trusted, timeout=30, auth=("alice", "alice-pw"))
    assert good.status_code == 200 and good.json()["user"] == "alice"

    line = "HTTP login of 'alice' from 127.0.0.1 refused: wrong password"

    def logged() -> str:
        text = node.log.read_text()
        return text if line in text else ""

    log = wait_until(logged, timeout_s=30, what="the refused HTTP login in the node's log")
    assert password not in log
    assert password not in "".join(p.read_text() for p in (node.store / "logs").glob("*"))


def test_a_job_planned_by_a_remote_client_cannot_write_outside_the_external_io_dir(
    node: NodeProcess, certs: Path, tmp_path: Path
) -> None:
    """A client of a server plans CREATE CHANGEFEED in its own process, which does not
    know the node's --external-io-dir: the node refuses to run the job instead."""
    outside = tmp_path / "outside"
    with feedkv.connect(node.url, certs_dir=certs) as db:
        db.sql("CREATE TABLE IF NOT EXISTS fs (id INT PRIMARY KEY)")
        job = db.sql(f"CREATE CHANGEFEED FOR fs INTO 'file://{outside}'").rows[0][0]

        def failed() -> str:
            result = db.sql(f"SHOW CHANGEFEED JOB {job}")
            row = dict(zip(result.columns, result.rows[0], strict=True))
            return str(row["error"]) if row["status"] == "failed" else ""

        error = wait_until(failed, timeout_s=60, what="the job to fail")
    assert "outside the node's external I/O directory" in error
    # NB: the client's own check made the directory (with the client's rights, here on
    # the same machine); the node wrote nothing into it
    assert not any(outside.rglob("*"))


def test_no_planted_sink_secret_reaches_the_store_the_logs_or_a_query(
    node: NodeProcess, certs: Path
) -> None:
    """Secrets of each kind a sink takes, planted in running jobs: a webhook's URI
    password and auth header, a Kafka SASL password, AWS keys. None shows in any query's
    result, the admin page or the metrics, nor in any file of the store or the node's
    logs; nor do SQL users' passwords."""
    planted = {
        "uri password": "PLANTED-URI-PW-7",
        "webhook header": "PLANTED-HEADER-8",
        "SASL password": "PLANTED-SASL-PW-10",
        "AWS access key id": "PLANTEDAKID11",
        "AWS secret key": "PLANTED-AWS-SECRET-12",
        "AWS session token": "PLANTED-AWS-TOKEN-13",
    }
    logins: list[str] = []

    def broker_check(login: str) -> None:  # the broker takes any user and password
        logins.append(login)

    with (
        closing(SaslFront(broker_check, mechanism="PLAIN")) as front,
        moto_s3_server() as s3_endpoint,
        feedkv.connect(node.url, certs_dir=certs) as db,
    ):
        s3 = boto3.client(
            "s3",
            endpoint_url=s3_endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        s3.create_bucket(Bucket="planted")
        db.sql("CREATE TABLE IF NOT EXISTS hooked (id INT PRIMARY KEY)")
        db.sql("UPSERT INTO hooked VALUES (1)")
        s3_keys = (
            f"AWS_ACCESS_KEY_ID={planted['AWS access key id']}"
            f"&AWS_SECRET_ACCESS_KEY={planted['AWS secret key']}"
            f"&AWS_SESSION_TOKEN={planted['AWS session token']}"
        )
        jobs = [
            db.sql(
                "CREATE CHANGEFEED FOR hooked INTO "
                f"'webhook-https://u:{planted['uri password']}@127.0.0.1:1/h' "
                f"WITH webhook_auth_header='Bearer {planted['webhook header']}'"
            ).rows[0][0],
            db.sql(
                f"CREATE CHANGEFEED FOR hooked INTO 'kafka://{front.bootstrap}?sasl_enabled=true"
                f"&sasl_mechanism=PLAIN&sasl_user=u&sasl_password={planted['SASL password']}'"
            ).rows[0][0],
            db.sql(
                f"CREATE CHANGEFEED FOR hooked INTO 's3://planted/cdc?{s3_keys}"
                f"&AWS_REGION=us-east-1&AWS_ENDPOINT={s3_endpoint}' WITH resolved = '1s', "
                "min_checkpoint_frequency = '1s'"
            ).rows[0][0],
        ]

        def job_row(job: int) -> dict[str, object]:
            result = db.sql(f"SHOW CHANGEFEED JOB {job}")
            return dict(zip(result.columns, result.rows[0], strict=True))

        # each job ran with its secrets: the webhook's failed, Kafka's broker took the
        # password, S3 took the keys (moto takes any) and holds a resolved file
        wait_until(
            lambda: "retry" in str(job_row(jobs[0])["running_status"]),
            timeout_s=60,
            what="the webhook job to fail and retry",
        )
        wait_until(lambda: logins, timeout_s=60, what="the Kafka job's SASL login")
        assert logins[0] == f"u:{planted['SASL password']}"

        def resolved_files() -> list[str]:
            listed = s3.list_objects_v2(Bucket="planted", Prefix="cdc/").get("Contents", [])
            return [o["Key"] for o in listed if o["Key"].endswith(".RESOLVED")]

        wait_until(resolved_files, timeout_s=60, what="a resolved file in the bucket")
        shown = repr([job_row(job) for job in jobs])
        for query in ("SHOW CHANGEFEED JOBS", "SHOW JOBS", "SELECT * FROM crdb_internal.jobs"):
            shown += repr(db.sql(query).rows)
        for job in jobs:
            shown += repr(db.sql(f"SHOW CREATE CHANGEFEED {job}").rows)
        db.sql("CREATE USER IF NOT EXISTS pagereader WITH PASSWORD 'PLANTED-USER-PW-14'")
        db.sql("GRANT admin TO pagereader")
        admin_page = httpx.get(
            f"{node.http_url}/_admin/v1/overview",
            verify=ssl.create_default_context(cafile=str(certs / "ca.crt")),
            auth=("pagereader", "PLANTED-USER-PW-14"),
            timeout=30,
        )
        assert admin_page.status_code == 200
        assert len(admin_page.json()["changefeeds"]) >= len(jobs)
        shown += admin_page.text
        metrics = httpx.get(
            f"{node.http_url}/_status/vars",
            verify=ssl.create_default_context(cafile=str(certs / "ca.crt")),
            timeout=30,
        )
        assert metrics.status_code == 200 and "changefeed" in metrics.text
        shown += metrics.text
        for job in jobs:
            db.sql(f"CANCEL JOB {job}")
    for kind, secret in planted.items():
        assert secret not in shown, kind
    # nor the key that sealed them, which stays in the certs directory, nor a SQL
    # user's password (only its SCRAM verifier is kept)
    key = load_key(certs / KEY_FILE)
    passwords = [b"alice-pw", b"PLANTED-USER-PW-14"]
    needles = [*(s.encode() for s in planted.values()), key, base64.b64encode(key), *passwords]
    files = [p for p in node.store.rglob("*") if p.is_file()] + [node.log]
    assert any(p.parent.name == "logs" for p in files)
    for path in files:
        data = path.read_bytes()
        for needle in needles:
            assert needle not in data, f"{needle!r} in {path}"


def test_feedkv_sql_takes_a_certs_dir(
    node: NodeProcess, certs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sql", "--url", node.url, "--certs-dir", str(certs), "-e", "SELECT 41 + 1"]) == 0
    assert "42" in capsys.readouterr().out
    assert main(["sql", "--url", f"feedkv://{node.address}", "-e", "SELECT 1"]) == 1
    # the command's own flag, not only the Python argument
    assert "a secure node needs its CA: --certs-dir" in capsys.readouterr().err


def test_the_sql_port_refuses_a_client_without_credentials(node: NodeProcess, certs: Path) -> None:
    with pytest.raises(psycopg.OperationalError, match="no password supplied"):
        psycopg.connect(_dsn(node, certs, "alice"))


def test_the_sql_port_refuses_a_client_certificate_of_another_ca(
    node: NodeProcess, certs: Path, tmp_path: Path
) -> None:
    foreign = make_certs_dir(tmp_path, users=("alice",))
    theirs = {
        "sslcert": str(foreign / "client.alice.crt"),
        "sslkey": str(foreign / "client.alice.key"),
    }
    with pytest.raises(psycopg.OperationalError, match="unknown ca"):
        psycopg.connect(_dsn(node, certs, "alice", **theirs))
