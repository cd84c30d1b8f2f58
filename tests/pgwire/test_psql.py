"""Debian's ``psql``, unchanged, against the SQL port: ``-c`` statements, ``-f``
scripts with transactions, errors with their SQLSTATE, and a node started by
``feedkv start`` reached with a CockroachDB connection string."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from feedkv.cli.main import DEFAULT_NODE_URL, _parser
from feedkv.testing.node_process import NodeProcess

PSQL = shutil.which("psql")
MISSING = "psql is missing: `make` installs Debian's postgresql-client"


def psql(url: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """psql with unaligned, tuples-only output that stops at the first error."""
    assert PSQL is not None, MISSING
    return subprocess.run(
        [PSQL, url, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_psql_runs_statements_given_with_c(pg_url: str) -> None:
    done = psql(
        pg_url,
        "-c",
        "CREATE TABLE kv (k INT PRIMARY KEY, v STRING, at TIMESTAMPTZ)",
        "-c",
        "INSERT INTO kv VALUES (1, 'one', '2024-05-01 12:00:00+00'), (2, NULL, NULL)",
        "-c",
        "SELECT k, v, at FROM kv ORDER BY k",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "CREATE TABLE",
        "INSERT 0 2",
        "1|one|2024-05-01 12:00:00+00",
        "2||",
    ]


def test_psql_runs_a_script_with_a_transaction(pg_url: str, tmp_path: Path) -> None:
    script = tmp_path / "script.sql"
    script.write_text(
        "CREATE TABLE accounts (id INT PRIMARY KEY, balance DECIMAL);\n"
        "INSERT INTO accounts VALUES (1, 100.50), (2, 0);\n"
        "BEGIN;\n"
        "UPDATE accounts SET balance = balance - 10 WHERE id = 1;\n"
        "UPDATE accounts SET balance = balance + 10 WHERE id = 2;\n"
        "COMMIT;\n"
        "SELECT id, balance FROM accounts ORDER BY id;\n"
    )
    done = psql(pg_url, "-f", str(script))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["1|90.50", "2|10"]


def test_an_error_stops_a_psql_script_with_its_sqlstate_and_what_ran_stays(
    pg_url: str, tmp_path: Path
) -> None:
    script = tmp_path / "script.sql"
    script.write_text(
        "CREATE TABLE t (id INT PRIMARY KEY);\n"
        "INSERT INTO t VALUES (1);\n"
        "INSERT INTO t VALUES (1);\n"
        "INSERT INTO t VALUES (2);\n"
    )
    done = psql(pg_url, "-f", str(script))
    assert done.returncode == 3  # psql's code for a script stopped by an error
    assert "ERROR:  23505:" in done.stderr
    assert psql(pg_url, "-c", "SELECT id FROM t").stdout.split() == ["1"]


def test_psql_reads_statements_from_stdin_and_goes_on_after_an_error(pg_url: str) -> None:
    assert PSQL is not None, MISSING
    done = subprocess.run(
        [PSQL, pg_url, "-X", "-A", "-t"],
        input="SELECT * FROM nowhere;\nSELECT 40 + 2;\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "ERROR:" in done.stderr and "nowhere" in done.stderr
    assert done.stdout.split() == ["42"]


def test_feedkv_start_serves_psql_on_its_sql_address(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "store", "--changefeed-runner", "thread")
    try:
        assert node.sql_url.startswith("postgresql://root@127.0.0.1:")
        assert "/defaultdb?sslmode=verify-full&sslrootcert=" in node.sql_url  # secure
        done = psql(node.sql_url, "-c", "SELECT 'hello from feedkv'")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "hello from feedkv"
    finally:
        assert node.terminate() == 0


def test_sql_takes_cockroachdbs_port_and_grpc_the_next_one() -> None:
    args = _parser().parse_args(["start", "--store", "s"])
    assert (args.sql_addr, args.listen) == ("127.0.0.1:26257", "127.0.0.1:26258")
    assert DEFAULT_NODE_URL == "feedkv://127.0.0.1:26258"  # feedkv sql's, unless --insecure


def test_psql_shows_a_sinkless_changefeed_that_ends(pg_url: str) -> None:
    """psql prints a result once it is complete: a changefeed that ends (an initial
    scan alone) shows whole; live rows are for drivers that stream (psycopg)."""
    psql(pg_url, "-c", "CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    psql(pg_url, "-c", "INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    done = psql(pg_url, "-c", "EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan = 'only'")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        't|[1]|{"after": {"id": 1, "s": "a"}}',
        't|[2]|{"after": {"id": 2, "s": "b"}}',
    ]


def test_psql_shows_a_changefeed_jobs_tables_as_an_array(pg_url: str, tmp_path: Path) -> None:
    """``full_table_names`` is CockroachDB's STRING[] (``{defaultdb.public.t}``), which
    psql showed as JSON (``["defaultdb.public.t"]``)."""
    psql(pg_url, "-c", "CREATE TABLE t (id INT PRIMARY KEY)")
    made = psql(pg_url, "-c", f"CREATE CHANGEFEED FOR t INTO 'file://{tmp_path / 'out'}'")
    assert made.returncode == 0, made.stderr
    done = psql(pg_url, "-c", "SELECT full_table_names FROM [SHOW CHANGEFEED JOBS]")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["{defaultdb.public.t}"]


def test_psql_shows_a_foreign_key_violations_key_on_its_detail_line(pg_url: str) -> None:
    done = psql(
        pg_url,
        "-c",
        "CREATE TABLE parent (id INT PRIMARY KEY)",
        "-c",
        "CREATE TABLE child (k INT PRIMARY KEY, p INT REFERENCES parent (id))",
        "-c",
        "INSERT INTO child VALUES (1, 3)",
    )
    assert done.returncode == 1
    assert done.stderr.splitlines()[:2] == [
        'ERROR:  23503: insert on table "child" violates foreign key constraint "child_p_fkey"',
        'DETAIL:  Key (p)=(3) is not present in table "parent".',
    ]
