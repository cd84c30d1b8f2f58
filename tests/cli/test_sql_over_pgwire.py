"""``feedkv sql --url postgresql://...``: the same shell and output, over the
PostgreSQL wire protocol (psycopg) instead of feedkv's own client."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import feedkv
from feedkv import DB
from feedkv.cli import main as cli_main
from feedkv.cli.main import main
from feedkv.cli.sql import format_result
from feedkv.kv.store import StoreConfig
from feedkv.testing.waiting import wait_until


@pytest.fixture
def db(tmp_path: Path) -> Iterator[DB]:
    config = StoreConfig(closed_ts_interval_s=0.01, push_poll_s=0.01, sync=False)
    database = feedkv.connect(tmp_path / "store", config=config, changefeed_runner="thread")
    yield database
    database.close()


@pytest.fixture
def url(db: DB) -> str:
    return db.serve_sql()


def test_statements_run_over_the_wire_and_print_as_with_a_feedkv_url(
    url: str, db: DB, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "sql",
            "--url",
            url,
            "--format",
            "csv",
            "-e",
            "CREATE TABLE t (id INT PRIMARY KEY, s STRING)",
            "-e",
            "INSERT INTO t VALUES (1, 'a'), (2, NULL); SELECT id, s FROM t ORDER BY id",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines()[-3:] == ["id,s", "1,a", "2,"]
    assert db.sql("SELECT count(*) FROM t").rows == [(2,)]  # it really went to the node


def test_arrays_print_as_over_a_feedkv_url_and_json_stays_json(
    url: str, db: DB, capsys: pytest.CaptureFixture[str]
) -> None:
    """psycopg loads an array as a list: the shell printed ``["a", "b c"]``, JSON's text,
    where psql and a ``feedkv://`` URL show ``{a,"b c"}``; a JSONB array is still JSON."""
    query = "SELECT ARRAY['a', 'b c'] AS a, ARRAY[1, NULL] AS b, '[1, 2]'::JSONB AS j"
    code = main(["sql", "--url", url, "-e", query])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines()[2].split(" | ") == [' {a,"b c"}', "{1,NULL}", "[1, 2]"]
    assert out == format_result(db.sql(query), "table")  # as the embedded shell prints it


def test_an_error_prints_its_sqlstate_message_and_stops(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["sql", "--url", url, "-e", "SELECT * FROM missing", "-e", "SELECT 1"])
    out, err = capsys.readouterr()
    assert code == 1
    assert 'relation "missing" does not exist' in err
    assert "42P01" in err
    assert out == ""


def test_the_servers_notices_print_after_the_result_as_over_a_feedkv_url(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A NOTICE the server sends (psql prints it; so does ``cockroach sql``) is printed
    on stderr after the statement's result, not dropped."""
    code = main(
        ["sql", "--url", url, "-e", "CREATE TABLE t (k INT PRIMARY KEY) WITH (fillfactor=70)"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert (out, err) == ("CREATE TABLE\n", 'NOTICE: storage parameter "fillfactor" is ignored\n')


def test_the_command_reads_a_script_from_stdin_over_the_wire(url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "feedkv.cli.main", "sql", "--url", url],
        input="CREATE TABLE k (v INT PRIMARY KEY);\nINSERT INTO k VALUES (7);\nSELECT v FROM k;\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "7" in done.stdout.split()


def test_an_unreachable_server_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sql", "--url", "postgresql://root@127.0.0.1:1/defaultdb?connect_timeout=5"])
    _out, err = capsys.readouterr()
    assert code != 0
    assert "cannot connect to postgresql://root@127.0.0.1:1/defaultdb" in err


def _sinkless_feeds_running() -> int:
    return sum(t.name == "sinkless-changefeed" and t.is_alive() for t in threading.enumerate())


def test_a_sinkless_changefeed_prints_each_row_as_it_happens_until_ctrl_c(url: str, db: DB) -> None:
    """Over a ``postgresql://`` URL the shell fetched a statement's result whole, so a
    sinkless changefeed (which ends only when asked) printed nothing, ever. Its rows now
    print as the server sends them, and Ctrl-C cancels it on the server, which frees it."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a')")
    feed = "EXPERIMENTAL CHANGEFEED FOR t"
    shell = subprocess.Popen(
        [sys.executable, "-m", "feedkv", "sql", "--url", url, "-e", feed],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    assert shell.stdout is not None
    stdout = shell.stdout
    reader = threading.Thread(target=lambda: lines.extend(iter(stdout.readline, "")))
    reader.start()
    try:
        wait_until(lambda: any("[1]" in line for line in lines), timeout_s=60, what="row 1")
        db.sql("INSERT INTO t VALUES (2, 'b')")  # after the first row was printed
        wait_until(lambda: any("[2]" in line for line in lines), timeout_s=60, what="row 2")
        shell.send_signal(signal.SIGINT)
        assert shell.wait(timeout=60) == 0, shell.stderr.read() if shell.stderr else ""
    finally:
        if shell.poll() is None:
            shell.kill()
        reader.join(timeout=60)
    assert lines[0] == 't | [1] | {"after": {"id": 1, "s": "a"}}\n'
    assert lines[-1] == "changefeed stopped\n"
    wait_until(lambda: _sinkless_feeds_running() == 0, timeout_s=60, what="the feed to stop")


def test_host_and_insecure_connect_as_cockroach_sql_does(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cockroach sql --insecure --host HOST:PORT``, the form CockroachDB's docs use:
    the flags were unknown to feedkv sql."""
    address = urlsplit(url).netloc.rpartition("@")[2]
    code = main(
        ["sql", "--insecure", "--host", address, "--format", "csv", "-e", "SELECT 1 AS one"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines() == ["one", "1"]


def test_insecure_alone_dials_the_local_nodes_sql_port_and_takes_a_url(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cockroach sql --insecure``, the first command of CockroachDB's docs, dials
    localhost's SQL port; with a ``postgresql://`` URL it asks for no TLS (the flag was
    refused without --host, with an error about a --url no one gave)."""
    plain = url.replace("sslmode=disable", "application_name=shell")
    code = main(["sql", "--insecure", "--url", plain, "--format", "csv", "-e", "SELECT 1 AS one"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines() == ["one", "1"]
    # NB: this node's port stands for 26257, which another process may hold here
    monkeypatch.setattr(cli_main, "DEFAULT_SQL_PORT", urlsplit(url).port)
    code = main(["sql", "--insecure", "--format", "csv", "-e", "SELECT 2 AS two"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines() == ["two", "2"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "127.0.0.1:26257"], "--host needs --certs-dir DIR"),
        (["--insecure", "--certs-dir", "certs"], "--insecure and --certs-dir"),
        (["--insecure", "--url", "postgresql://root@h:1/d?sslmode=require"], "sslmode=require"),
        (["--insecure", "--store", "s"], "--store opens a store"),
        (["--host", "::1", "--insecure"], "expected HOST[:PORT]"),
    ],
)
def test_host_without_its_security_is_a_clear_error(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["sql", *args, "-e", "SELECT 1"])
    _out, err = capsys.readouterr()
    assert code == 1
    assert err.startswith("feedkv: error: ") and message in err
