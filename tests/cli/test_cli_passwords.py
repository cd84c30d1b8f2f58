"""The ``feedkv`` commands that dial a node log a password user in, as ``cockroach sql``
does: the password from the URL, from ``FEEDKV_PASSWORD``, or typed at a prompt that does
not echo it; a wrong or missing password is a clear error and a failed exit; the password
shows nowhere in what the command prints. Each test runs the real CLI in a subprocess
against a real secure node (``feedkv start --certs-dir``) on loopback."""

from __future__ import annotations

import csv
import io
import os
import pty
import select
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

import feedkv
from feedkv.cli.credentials import PASSWORD_ENV, resolve_login, split_userinfo, without_password
from feedkv.errors import InvalidArgumentError, InvalidURLError
from feedkv.testing.certs import make_certs_dir
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.waiting import wait_until

PASSWORD = "p@m s3cret:/x"  # NB: characters a URL must percent-encode


@dataclass(frozen=True)
class Cluster:
    node: NodeProcess
    address: str  # the node's gRPC HOST:PORT
    sql_address: str  # its SQL port's HOST:PORT
    certs: Path  # the operator's: the CA and root's client certificate
    ca_only: Path  # the password user's: the cluster's ca.crt, nothing else


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("cli-passwords")
    certs = make_certs_dir(base / "pki", users=("root",))
    ca_only = base / "pam-certs"
    ca_only.mkdir()
    shutil.copy(certs / "ca.crt", ca_only / "ca.crt")
    node = NodeProcess(base / "store", "--certs-dir", str(certs), "--changefeed-runner", "thread")
    try:
        with feedkv.connect(node.url) as root:
            root.sql("CREATE TABLE rides (id INT PRIMARY KEY, city STRING)")
            root.sql("INSERT INTO rides VALUES (1, 'rome')")
            root.sql(f"CREATE USER pam WITH PASSWORD '{PASSWORD}'")
            root.sql("GRANT SELECT ON rides TO pam")
        sql_address = node.sql_url.removeprefix("postgresql://").partition("@")[2]
        yield Cluster(node, node.address, sql_address.partition("/")[0], certs, ca_only)
    finally:
        node.terminate()


def _feedkv(
    *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in (PASSWORD_ENV, "PGPASSWORD")}
    return subprocess.run(
        [sys.executable, "-m", "feedkv.cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**environment, **(env or {})},
    )


def _read_some(fd: int, into: bytearray) -> bool:
    """Append what the terminal ``fd`` shows within a moment; False once the other side
    has closed it (the command exited)."""
    ready, _, _ = select.select([fd], [], [], 0.2)
    if not ready:
        return True
    try:
        chunk = os.read(fd, 4096)
    except OSError:  # EIO: the command exited and its terminal closed
        return False
    into.extend(chunk)
    return bool(chunk)


def _pam_url(cluster: Cluster, password: str | None = PASSWORD) -> str:
    secret = f":{quote(password, safe='')}" if password is not None else ""
    return f"feedkv://pam{secret}@{cluster.address}"


def _node_status(cluster: Cluster, url: str, **kwargs: str) -> subprocess.CompletedProcess[str]:
    return _feedkv(
        "node",
        "status",
        "--url",
        url,
        "--certs-dir",
        str(cluster.ca_only),
        "--format",
        "csv",
        env=dict(kwargs) or None,
    )


def _listed(out: str) -> list[dict[str, str]]:
    """The nodes ``node status --format csv`` printed, by column name."""
    return list(csv.DictReader(io.StringIO(out.strip())))


def test_a_password_in_the_url_logs_the_user_in(cluster: Cluster) -> None:
    run = _node_status(cluster, _pam_url(cluster))

    assert run.returncode == 0, run.stderr
    assert [(n["id"], n["address"]) for n in _listed(run.stdout)] == [("1", cluster.address)]
    assert PASSWORD not in run.stdout + run.stderr


def test_feedkv_password_logs_in_a_user_without_a_certificate(cluster: Cluster) -> None:
    run = _node_status(cluster, _pam_url(cluster, None), **{PASSWORD_ENV: PASSWORD})

    assert run.returncode == 0, run.stderr
    assert [n["address"] for n in _listed(run.stdout)] == [cluster.address]


def test_a_wrong_password_is_a_clear_error_and_a_failed_exit(cluster: Cluster) -> None:
    for run in (
        _node_status(cluster, _pam_url(cluster, "not-it-7q")),
        _node_status(cluster, _pam_url(cluster, None), **{PASSWORD_ENV: "not-it-7q"}),
    ):
        assert run.returncode == 1
        assert run.stdout == ""
        assert run.stderr.strip() == "feedkv: error: wrong user name or password for 'pam'"


def test_a_certs_dir_of_another_ca_is_one_clear_error_line(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A client whose CA is not the node's fails its TLS handshakes: the command says so
    in one line, and gRPC's own log of each failed handshake stays out of its stderr."""
    other = make_certs_dir(tmp_path / "other-ca", users=("root",))
    env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
    args = ["sql", "--url", f"feedkv://{cluster.address}", "--certs-dir", str(other)]
    run = subprocess.run(
        [sys.executable, "-m", "feedkv", *args, "-e", "SELECT 1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )

    assert run.returncode == 1
    assert run.stdout == ""
    [line] = run.stderr.splitlines()
    assert line.startswith(f"feedkv: error: no feedkv node answered at {cluster.address}")
    assert "does it trust this certificate" in line


def test_no_password_and_no_terminal_is_a_clear_error(cluster: Cluster) -> None:
    run = _node_status(cluster, _pam_url(cluster, None))

    assert run.returncode == 1
    assert f"no client certificate for 'pam' in {cluster.ca_only}" in run.stderr
    assert PASSWORD_ENV in run.stderr
    assert "feedkv://pam:PASSWORD@HOST:PORT" in run.stderr


def _on_a_terminal(args: list[str], prompt: bytes, answer: str) -> tuple[int, str]:
    """Run ``feedkv ARGS`` on a terminal (a pty), type ``answer`` at ``prompt``:
    ``(exit code, what the terminal showed)``."""
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "feedkv.cli.main", *args],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        start_new_session=True,
        env={k: v for k, v in os.environ.items() if k not in (PASSWORD_ENV, "PGPASSWORD")},
    )
    os.close(secondary)
    shown = bytearray()
    try:
        wait_until(
            lambda: _read_some(primary, shown) and prompt in shown,
            timeout_s=60,
            what="the password prompt",
        )
        os.write(primary, answer.encode() + b"\n")
        wait_until(lambda: not _read_some(primary, shown), timeout_s=60, what="the command's end")
        code = process.wait(timeout=60)
    finally:
        os.close(primary)
        if process.poll() is None:
            process.kill()
            process.wait()
    return code, shown.decode()


def test_the_prompt_on_a_terminal_asks_for_the_password_without_echoing_it(
    cluster: Cluster,
) -> None:
    args = ["node", "status", "--url", _pam_url(cluster, None), "--certs-dir"]
    code, shown = _on_a_terminal(
        [*args, str(cluster.ca_only), "--format", "csv"], b"Enter password for pam: ", PASSWORD
    )

    assert code == 0, shown
    listed = _listed(shown.partition("Enter password for pam: ")[2])
    assert [(n["id"], n["address"]) for n in listed] == [("1", cluster.address)]
    assert PASSWORD not in shown  # the terminal did not echo it


def _pg_url(cluster: Cluster) -> str:
    return (
        f"postgresql://pam@{cluster.sql_address}/defaultdb?sslmode=verify-full"
        f"&sslrootcert={quote(str(cluster.ca_only / 'ca.crt'))}"
    )


def test_sql_over_the_sql_port_prompts_when_the_server_asks_for_a_password(
    cluster: Cluster,
) -> None:
    args = ["sql", "--url", _pg_url(cluster), "--format", "csv", "-e", "SELECT city FROM rides"]
    code, shown = _on_a_terminal(args, b"Enter password: ", PASSWORD)

    assert code == 0, shown
    assert "rome" in shown
    assert PASSWORD not in shown


def test_sql_over_the_sql_port_takes_the_password_from_feedkv_password(cluster: Cluster) -> None:
    url = _pg_url(cluster)
    query = ("sql", "--url", url, "--format", "csv", "-e", "SELECT id, city FROM rides")

    run = _feedkv(*query, env={PASSWORD_ENV: PASSWORD})
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["id,city", "1,rome"]

    missing = _feedkv(*query)
    assert missing.returncode == 1
    assert "the server asks for a password" in missing.stderr
    assert PASSWORD_ENV in missing.stderr

    wrong_url = url.replace("pam@", "pam:not-it-7q@")
    wrong = _feedkv("sql", "--url", wrong_url, "-e", "SELECT 1")
    assert wrong.returncode == 1
    assert 'password authentication failed for user "pam"' in wrong.stderr
    assert "not-it-7q" not in wrong.stderr


# Which credentials a command uses (no node needed).


def test_the_url_user_and_password_are_percent_decoded_and_taken_out_of_the_url() -> None:
    url = f"feedkv://pam:{quote(PASSWORD, safe='')}@127.0.0.1:26258?certs_dir=%2Fc"
    assert split_userinfo(url) == ("feedkv://127.0.0.1:26258?certs_dir=%2Fc", "pam", PASSWORD)
    assert without_password(url) == "feedkv://pam@127.0.0.1:26258?certs_dir=%2Fc"
    assert split_userinfo("feedkv://h:1") == ("feedkv://h:1", None, None)
    with pytest.raises(InvalidURLError, match="names a password but no user") as refused:
        split_userinfo(f"feedkv://:{PASSWORD}@h:1")
    assert PASSWORD not in str(refused.value)


def test_a_certs_dir_that_does_not_exist_is_named_as_such(tmp_path: Path) -> None:
    # NB: it was "no client certificate for 'root' in DIR ... and no password"
    url = f"feedkv://pam:{quote(PASSWORD, safe='')}@127.0.0.1:26258"
    for given in ("feedkv://127.0.0.1:26258", url):
        with pytest.raises(InvalidArgumentError, match="does not exist") as refused:
            resolve_login(given, certs_dir=tmp_path / "certz", env={PASSWORD_ENV: PASSWORD})
        assert "certz" in str(refused.value) and PASSWORD not in str(refused.value)


def test_a_client_certificate_is_used_before_the_password_variable(cluster: Cluster) -> None:
    env = {PASSWORD_ENV: "from-env"}
    url = f"feedkv://{cluster.address}"
    root = resolve_login(url, certs_dir=cluster.certs, env=env)
    assert (root.user, root.password) == ("root", None)
    pam = resolve_login(url, certs_dir=cluster.ca_only, user="pam", env=env)
    assert (pam.user, pam.password) == ("pam", "from-env")
    in_url = resolve_login(_pam_url(cluster), certs_dir=cluster.certs, env=env)
    assert (in_url.url, in_url.password) == (url, PASSWORD)
    assert PASSWORD not in repr(in_url)
    insecure = resolve_login(f"feedkv://pam@{cluster.address}", certs_dir=None, env=env)
    assert insecure.password is None  # nothing to prove to an insecure node
    with pytest.raises(InvalidArgumentError, match="'pam' and --user 'bob' differ"):
        resolve_login(_pam_url(cluster), certs_dir=cluster.ca_only, user="bob", env=env)


def test_certs_dir_gives_a_postgresql_url_its_tls_and_client_certificate(cluster: Cluster) -> None:
    # as cockroach sql --url ... --certs-dir: the directory fills what the URL leaves out
    bare = f"postgresql://{cluster.sql_address}/defaultdb"
    query = ("--format", "csv", "-e", "SELECT current_user(), city FROM rides")

    as_root = _feedkv("sql", "--url", bare, "--certs-dir", str(cluster.certs), *query)
    assert as_root.returncode == 0, as_root.stderr
    assert as_root.stdout.splitlines()[1:] == ["root,rome"]

    as_pam = _feedkv(
        "sql",
        "--url",
        bare.replace("//", "//pam@"),
        "--certs-dir",
        str(cluster.ca_only),
        *query,
        env={PASSWORD_ENV: PASSWORD},
    )
    assert as_pam.returncode == 0, as_pam.stderr
    assert as_pam.stdout.splitlines()[1:] == ["pam,rome"]

    refused = _feedkv("sql", "--url", bare + "?sslmode=disable", "--certs-dir", str(cluster.certs))
    assert refused.returncode == 1  # the URL's own sslmode stands: a secure node refuses it


def test_sql_over_the_raw_kv_api_as_another_user_points_to_the_sql_port(cluster: Cluster) -> None:
    # the raw KV API is root's alone on a secure node: the shell says where to go instead
    run = _feedkv(
        "sql", "--url", _pam_url(cluster), "--certs-dir", str(cluster.ca_only), "-e", "SELECT 1"
    )
    assert run.returncode == 1
    assert "connect to the node's SQL port instead" in run.stderr
    assert "postgresql://pam@" in run.stderr
    assert PASSWORD not in run.stderr


def test_sql_over_the_raw_kv_api_as_another_user_without_a_password_points_to_the_sql_port(
    cluster: Cluster,
) -> None:
    # no password anywhere: the refusal comes first, not advice to put one in the URL
    # (which would only lead to the refusal)
    run = _feedkv(
        "sql",
        "--url",
        _pam_url(cluster, None),
        "--certs-dir",
        str(cluster.ca_only),
        "-e",
        "SELECT 1",
    )
    assert run.returncode == 1
    assert "connect to the node's SQL port instead" in run.stderr
    assert "no client certificate" not in run.stderr and "PASSWORD@" not in run.stderr


def test_host_and_certs_dir_connect_to_the_sql_port_as_cockroach_sql_does(
    cluster: Cluster,
) -> None:
    """``cockroach sql --certs-dir DIR --host HOST:PORT``: root by its client
    certificate; a password user with only the CA and its password."""
    root = _feedkv(
        *("sql", "--host", cluster.sql_address, "--certs-dir", str(cluster.certs)),
        *("--format", "csv", "-e", "SELECT current_user"),
    )
    assert root.returncode == 0, root.stderr
    assert root.stdout.splitlines() == ["current_user", "root"]
    pam = _feedkv(
        *("sql", "--host", cluster.sql_address, "--certs-dir", str(cluster.ca_only)),
        *("--user", "pam", "--format", "csv", "-e", "SELECT current_user"),
        env={PASSWORD_ENV: PASSWORD},
    )
    assert pam.returncode == 0, pam.stderr
    assert pam.stdout.splitlines() == ["current_user", "pam"]
