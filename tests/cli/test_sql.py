"""``feedkv sql``: statements from ``-e``, a script on stdin, a node's URL, and the
interactive shell on a pseudo-terminal."""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import select
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

import feedkv
from feedkv.cli.main import main
from feedkv.cli.pg_session import _is_sinkless_changefeed
from feedkv.cli.sql import client_command, parse_client_command
from feedkv.errors import SQLError
from feedkv.kv.store import StoreConfig
from feedkv.server.node import Node

DEADLINE_S = 30.0
PROMPT = "root@defaultdb> "


class Run(NamedTuple):
    code: int
    out: str
    err: str


Sql = Callable[..., Run]


@pytest.fixture
def sql(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Sql:
    """``feedkv sql --store STORE ARGS`` run in this process, one store per test."""
    store = tmp_path / "store"

    def run(*args: str) -> Run:
        code = main(["sql", "--store", str(store), *args])
        out, err = capsys.readouterr()
        return Run(code, out, err)

    return run


def sql_process(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``feedkv sql ARGS`` as a subprocess reading ``stdin`` from a pipe."""
    return subprocess.run(
        [sys.executable, "-m", "feedkv.cli.main", "sql", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )


def rows_of(sql: Sql, query: str) -> list[list[str]]:
    """The rows ``query`` returns, as CSV cells without the header."""
    run = sql("--format", "csv", "-e", query)
    assert run.code == 0, run.err
    return list(csv.reader(io.StringIO(run.out)))[1:]


# Statements from -e.


def test_ddl_prints_its_tag_and_a_select_prints_an_aligned_table(sql: Sql) -> None:
    assert sql("-e", "CREATE TABLE t (k INT PRIMARY KEY, v STRING)") == (0, "CREATE TABLE\n", "")

    run = sql("-e", "INSERT INTO t VALUES (1, 'apple'), (20, NULL)", "-e", "SELECT k, v FROM t")

    assert run.code == 0
    assert run.out.splitlines() == [
        "INSERT 0 2",
        " k  |   v",
        "----+-------",
        " 1  | apple",
        " 20 | NULL",
        "(2 rows)",
    ]


def test_a_statements_notices_print_after_its_result_on_stderr(sql: Sql) -> None:
    """As ``cockroach sql`` and psql print them (CREATE CHANGEFEED's ``changefeed will
    emit to topic ...`` among them): ``NOTICE: <message>``, the result on stdout."""
    run = sql("-e", "CREATE TABLE t (k INT PRIMARY KEY) WITH (fillfactor = 70)")
    assert run == (0, "CREATE TABLE\n", 'NOTICE: storage parameter "fillfactor" is ignored\n')


def test_row_counts_say_one_row_in_the_singular_and_zero_rows_in_the_plural(sql: Sql) -> None:
    run = sql(
        "-e",
        "CREATE TABLE t (k INT PRIMARY KEY)",
        "-e",
        "SELECT k FROM t",
        "-e",
        "INSERT INTO t VALUES (1); SELECT k FROM t",
    )

    assert run.code == 0
    assert run.out.splitlines() == [
        "CREATE TABLE",
        " k",
        "---",
        "(0 rows)",
        "INSERT 0 1",
        " k",
        "---",
        " 1",
        "(1 row)",
    ]


def test_statements_run_in_order_within_one_execute_and_across_executes(sql: Sql) -> None:
    run = sql(
        "-e",
        "CREATE TABLE t (k INT PRIMARY KEY, v STRING); INSERT INTO t VALUES (1, 'a')",
        "-e",
        "UPDATE t SET v = 'b' WHERE k = 1; SELECT v FROM t",
        "-e",
        "DELETE FROM t WHERE k = 1; SELECT k FROM t",
    )

    assert run.code == 0
    assert run.out.splitlines() == [
        "CREATE TABLE",
        "INSERT 0 1",
        "UPDATE 1",
        " v",
        "---",
        " b",
        "(1 row)",
        "DELETE 1",
        " k",
        "---",
        "(0 rows)",
    ]


def test_a_cell_spanning_lines_keeps_the_table_columns_aligned(sql: Sql) -> None:
    sql("-e", "CREATE TABLE t (k INT PRIMARY KEY, v STRING, w STRING)")

    run = sql(
        "-e",
        "INSERT INTO t VALUES (1, 'first line\nsecond', 'x'), (2, 'short', 'y')",
        "-e",
        "SELECT k, v, w FROM t",
    )

    assert run.code == 0
    header, separator, *body = run.out.splitlines()[1:]
    assert header.split() == ["k", "|", "v", "|", "w"]
    columns = {i for i, char in enumerate(header) if char == "|"}
    assert {i for i, char in enumerate(separator) if char == "+"} == columns
    assert body[-1] == "(2 rows)"
    assert "first line" in run.out and "second" in run.out
    for line in body[:-1]:
        bars = {i for i, char in enumerate(line) if char == "|"}
        assert bars and bars <= columns, f"misaligned row {line!r} in\n{run.out}"


def test_csv_prints_a_header_then_one_record_per_row_with_null_as_empty(sql: Sql) -> None:
    setup = sql(
        "--format",
        "csv",
        "-e",
        "CREATE TABLE t (k INT PRIMARY KEY, name STRING, price DECIMAL, tags JSONB)",
        "-e",
        """INSERT INTO t VALUES (1, 'a, "quoted" b', 1.50, '{"x": [1, 2]}'), """
        "(2, NULL, NULL, NULL)",
    )
    assert setup == (0, "", "")  # NB: tags would make the output unparseable as CSV

    run = sql("--format", "csv", "-e", "SELECT k, name, price, tags FROM t")

    assert run.code == 0
    assert list(csv.reader(io.StringIO(run.out))) == [
        ["k", "name", "price", "tags"],
        ["1", 'a, "quoted" b', "1.50", '{"x": [1, 2]}'],
        ["2", "", "", ""],
    ]


def test_json_prints_one_object_per_row_with_jsonb_as_json(sql: Sql) -> None:
    sql(
        "-e",
        "CREATE TABLE t (k INT PRIMARY KEY, name STRING, price DECIMAL, ok BOOL, tags JSONB)",
        "-e",
        """INSERT INTO t VALUES (1, 'a "b"', 1.50, true, '{"x": [1, null], "y": "z"}'), """
        "(2, NULL, NULL, NULL, NULL)",
    )

    run = sql("--format", "json", "-e", "SELECT k, name, price, ok, tags FROM t")

    assert run.code == 0
    records = [json.loads(line) for line in run.out.splitlines()]
    assert records == [
        {"k": 1, "name": 'a "b"', "price": "1.50", "ok": True, "tags": {"x": [1, None], "y": "z"}},
        {"k": 2, "name": None, "price": None, "ok": None, "tags": None},
    ]
    assert [type(value) for value in records[0].values()] == [int, str, str, bool, dict]


def test_json_output_stays_valid_json_for_nan_and_infinite_floats(sql: Sql) -> None:
    sql(
        "-e",
        "CREATE TABLE m (k INT PRIMARY KEY, x FLOAT)",
        "-e",
        "INSERT INTO m VALUES (1, 'NaN'::FLOAT), (2, 'Infinity'::FLOAT), (3, 1.5)",
    )

    run = sql("--format", "json", "-e", "SELECT k, x FROM m")

    def not_json(constant: str) -> object:
        raise AssertionError(f"{constant} is not JSON (RFC 8259); the line was unparseable")

    assert run.code == 0
    records = [json.loads(line, parse_constant=not_json) for line in run.out.splitlines()]
    assert records == [{"k": 1, "x": "NaN"}, {"k": 2, "x": "Infinity"}, {"k": 3, "x": 1.5}]


# Errors.


def test_a_syntax_error_shows_its_sqlstate_and_a_caret_and_stops_the_run(sql: Sql) -> None:
    sql("-e", "CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    bad = "SELECT k FROM t WHERE k = = 1"

    run = sql(
        "-e",
        "INSERT INTO t VALUES (1, 'a')",
        "-e",
        bad,
        "-e",
        "INSERT INTO t VALUES (2, 'b')",
    )

    assert run.code == 1
    assert run.out == "INSERT 0 1\n"
    message, sqlstate, statement, caret = run.err.splitlines()
    assert message.startswith("ERROR: ") and '"="' in message
    assert sqlstate == "SQLSTATE: 42601"
    assert statement == bad
    assert caret == " " * bad.index("= 1") + "^"
    assert rows_of(sql, "SELECT k, v FROM t") == [["1", "a"]]


def test_an_unknown_table_is_sqlstate_42P01_and_stops_the_run(sql: Sql) -> None:
    sql("-e", "CREATE TABLE t (k INT PRIMARY KEY)", "-e", "INSERT INTO t VALUES (1)")

    run = sql("-e", "SELECT * FROM nope", "-e", "INSERT INTO t VALUES (2)")

    assert run.code == 1
    assert run.out == ""
    assert run.err.splitlines()[:2] == [
        'ERROR: relation "nope" does not exist',
        "SQLSTATE: 42P01",
    ]
    assert rows_of(sql, "SELECT k FROM t") == [["1"]]


def test_the_statements_of_one_e_take_effect_together_or_not_at_all(sql: Sql) -> None:
    sql("-e", "CREATE TABLE t (k INT PRIMARY KEY)")

    run = sql("-e", "INSERT INTO t VALUES (1); SELECT * FROM nope")

    assert run.code == 1
    assert "SQLSTATE: 42P01" in run.err
    assert run.out == ""  # nothing took effect, so nothing is reported as done
    assert rows_of(sql, "SELECT k FROM t") == []


def test_a_script_keeps_what_ran_before_its_first_error(sql: Sql, tmp_path: Path) -> None:
    sql("-e", "CREATE TABLE t (k INT PRIMARY KEY)")
    script = "INSERT INTO t VALUES (1);\nSELECT * FROM nope;\nINSERT INTO t VALUES (2);\n"

    run = sql_process("--store", str(tmp_path / "store"), stdin=script)

    assert run.returncode == 1
    assert run.stdout == "INSERT 0 1\n"
    assert "SQLSTATE: 42P01" in run.stderr
    assert rows_of(sql, "SELECT k FROM t") == [["1"]]


# A script on stdin.


def test_a_script_on_stdin_runs_every_statement_including_multi_line_ones(
    tmp_path: Path,
) -> None:
    script = """
CREATE TABLE t (
    k INT PRIMARY KEY,
    v STRING
);
INSERT INTO t VALUES (1, 'one'),
                     (2, 'two');

SELECT v
  FROM t
 WHERE k = 2;
"""

    run = sql_process("--store", str(tmp_path / "store"), stdin=script)

    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout.splitlines() == [
        "CREATE TABLE",
        "INSERT 0 2",
        "  v",
        "-----",
        " two",
        "(1 row)",
    ]


def test_a_script_runs_the_shells_own_commands_and_stops_at_backslash_q(
    tmp_path: Path,
) -> None:
    """``cockroach sql`` scripts use ``\\dt``, ``\\d t`` and ``\\q``; feedkv read them as
    SQL and failed with a syntax error at the backslash."""
    script = (
        "CREATE TABLE t (k INT PRIMARY KEY);\n"
        "\\dt\n"
        "\\d t\n"
        "SELECT 1 AS one;\n"
        "\\q\n"
        "SELECT 2 AS two;\n"
    )

    run = sql_process("--store", str(tmp_path / "store"), "--format", "csv", stdin=script)

    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout.splitlines() == [
        "schema_name,table_name,type,owner,estimated_row_count,locality",
        "public,t,table,root,0,",
        "column_name,data_type,is_nullable,column_default,generation_expression,indices,is_hidden",
        "k,INT8,false,,,{t_pkey},false",
        "one",
        "1",
    ]


def test_an_unknown_backslash_command_stops_a_script_naming_its_line(tmp_path: Path) -> None:
    run = sql_process("--store", str(tmp_path / "store"), stdin="SELECT 1;\n\n\\bogus\nSELECT 2;\n")

    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        "<stdin>:3: ERROR: invalid command \\bogus: \\? lists the shell's own commands",
        "SQLSTATE: 42601",
    ]
    assert "2" not in run.stdout.split()


def test_backslash_d_takes_a_tables_name_and_ignores_the_rest_of_its_line() -> None:
    """As psql: the rest of a backslash command's line is its arguments; a trailing
    semicolon is dropped, and the arguments past those it takes are ignored, each with a
    warning."""
    assert client_command('\\d db.public."My T";') == 'SHOW COLUMNS FROM db.public."My T"'
    assert parse_client_command("\\d t; DROP TABLE t") == (
        "SHOW COLUMNS FROM t",
        [
            '\\d: extra argument "DROP" ignored',
            '\\d: extra argument "TABLE" ignored',
            '\\d: extra argument "t" ignored',
        ],
    )
    with pytest.raises(SQLError, match="takes a table's name") as refused:
        client_command("\\d 'x'")
    assert refused.value.code == "42601"


def test_a_piped_backslash_line_runs_no_statement_after_a_semicolon(tmp_path: Path) -> None:
    script = "CREATE TABLE u (k INT PRIMARY KEY);\n\\d u; DROP TABLE u\nSELECT count(*) FROM u;\n"

    run = sql_process("--store", str(tmp_path / "store"), "--format", "csv", stdin=script)

    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines() == [
        '<stdin>:2: \\d: extra argument "DROP" ignored',
        '<stdin>:2: \\d: extra argument "TABLE" ignored',
        '<stdin>:2: \\d: extra argument "u" ignored',
    ]
    assert run.stdout.splitlines()[-2:] == ["count", "0"]  # u is still there


def test_only_a_changefeed_statement_is_parsed_on_the_client() -> None:
    assert _is_sinkless_changefeed("-- follow t\nEXPERIMENTAL CHANGEFEED FOR t")
    assert _is_sinkless_changefeed("/* a */ create changefeed for t")
    assert not _is_sinkless_changefeed("CREATE CHANGEFEED FOR t INTO 'null://'")
    assert not _is_sinkless_changefeed("SELECT 'CREATE CHANGEFEED FOR t'")


def test_an_error_in_a_script_points_at_its_line_and_column(sql: Sql, tmp_path: Path) -> None:
    sql("-e", "CREATE TABLE t (k INT PRIMARY KEY)")
    script = "SELECT k\n  FROM t\n WHERE k = = 1;\nINSERT INTO t VALUES (3);\n"

    run = sql_process("--store", str(tmp_path / "store"), stdin=script)

    assert run.returncode == 1
    assert run.stderr.splitlines()[0].startswith("<stdin>:1: ERROR: ")
    assert run.stderr.splitlines()[1:] == [
        "SQLSTATE: 42601",
        " WHERE k = = 1",
        "           ^",
    ]
    assert rows_of(sql, "SELECT k FROM t") == []


def test_a_script_runs_its_statements_until_a_syntax_error_and_names_its_line(
    sql: Sql, tmp_path: Path
) -> None:
    """As psql and cockroach sql: the statements before a syntax error run, those after
    it do not, and the error names the line it is on (comments and blank lines count)."""
    sql("-e", "CREATE TABLE t (k INT PRIMARY KEY)")
    script = (
        "INSERT INTO t VALUES (1);\n\n-- a comment; with a semicolon\n"
        "SELEC 2;\nINSERT INTO t VALUES (2);\n"
    )

    run = sql_process("--store", str(tmp_path / "store"), stdin=script)

    assert run.returncode == 1
    assert run.stdout == "INSERT 0 1\n"
    assert run.stderr.startswith("<stdin>:4: ERROR: ")
    assert "SQLSTATE: 42601" in run.stderr
    assert rows_of(sql, "SELECT k FROM t") == [["1"]]


# Users and databases.


def test_a_user_without_the_admin_role_cannot_create_a_table(sql: Sql) -> None:
    sql("-e", "CREATE TABLE t (k INT PRIMARY KEY)", "-e", "CREATE USER bob")
    sql("-e", "GRANT INSERT ON t TO bob")

    run = sql(
        "--user",
        "bob",
        "-e",
        "INSERT INTO t VALUES (1)",
        "-e",
        "CREATE TABLE mine (k INT PRIMARY KEY)",
    )

    assert run.code == 1
    assert run.out == "INSERT 0 1\n"
    assert "SQLSTATE: 42501" in run.err.splitlines()
    assert "bob" in run.err
    assert [row[1] for row in rows_of(sql, "SHOW TABLES")] == ["t"]


def test_the_database_flag_selects_the_current_database(sql: Sql) -> None:
    sql("-e", "CREATE DATABASE shop")

    run = sql(
        "--database",
        "shop",
        "-e",
        "CREATE TABLE items (k INT PRIMARY KEY)",
        "-e",
        "INSERT INTO items VALUES (7)",
    )

    assert run == (0, "CREATE TABLE\nINSERT 0 1\n", "")
    assert [row[1] for row in rows_of(sql, "SHOW TABLES")] == []
    assert rows_of(sql, "SELECT k FROM shop.items") == [["7"]]
    shop = sql("-d", "shop", "--format", "csv", "-e", "SELECT k FROM items")
    assert shop == (0, "k\n7\n", "")


# A running node.


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    """A node in this process serving gRPC on a free loopback port."""
    with Node(tmp_path / "node", listen="127.0.0.1:0", config=StoreConfig(sync=False)) as node:
        yield node


def test_url_runs_statements_on_a_running_node_and_reports_its_errors(node: Node) -> None:
    run = sql_process(
        "--url",
        node.url,
        "-e",
        "CREATE TABLE t (k INT PRIMARY KEY, v STRING)",
        "-e",
        "INSERT INTO t VALUES (1, 'over the wire'); SELECT v FROM t",
    )

    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout.splitlines() == [
        "CREATE TABLE",
        "INSERT 0 1",
        "       v",
        "---------------",
        " over the wire",
        "(1 row)",
    ]
    with feedkv.connect(node.url) as db:
        assert db.sql("SELECT k, v FROM t").rows == [(1, "over the wire")]

    bad = "SELECT v FROM t WHERE k = = 1"
    failed = sql_process("--url", node.url, "-e", bad)
    assert failed.returncode == 1
    assert failed.stderr.splitlines()[1:] == ["SQLSTATE: 42601", bad, " " * bad.index("= 1") + "^"]


# The interactive shell.


def _take_terminal() -> None:
    # NB: runs in the child after setsid(): the pty becomes its controlling terminal, so
    # Ctrl-C typed at it raises SIGINT in the shell as at a real terminal.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class ScreenTimeout(AssertionError):
    """What the test waited for did not appear on the terminal in time."""


class Terminal:
    """``feedkv sql`` on a pseudo-terminal: type at it, read its screen with a deadline."""

    def __init__(self, store: Path, home: Path) -> None:
        master, slave = os.openpty()
        # NB: PYTHONFAULTHANDLER: a shell that stops answering is sent SIGABRT and
        # prints every thread's stack (see interrupt)
        env = {**os.environ, "HOME": str(home), "TERM": "dumb", "PYTHONFAULTHANDLER": "1"}
        env.pop("INPUTRC", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "feedkv.cli.main", "sql", "--store", str(store)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
            preexec_fn=_take_terminal,
        )
        os.close(slave)
        self._master = master
        self._screen = b""

    def type(self, text: str) -> None:
        os.write(self._master, text.encode())

    def read_until(self, marker: str, timeout_s: float = DEADLINE_S) -> str:
        """Everything printed up to and including the next ``marker`` (newlines as
        ``\\n``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            screen = self._screen.replace(b"\r\n", b"\n")
            at = screen.find(marker.encode())
            if at != -1:
                end = at + len(marker.encode())
                self._screen = screen[end:]
                return screen[:end].decode()
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._master], [], [], max(0.0, left))
            if not ready:
                raise ScreenTimeout(f"timed out waiting for {marker!r}; screen: {screen!r}")
            try:
                chunk = os.read(self._master, 4096)
            except OSError:  # EIO: the shell exited and closed the terminal
                chunk = b""
            if not chunk:
                raise AssertionError(f"the shell ended before {marker!r}; screen: {screen!r}")
            self._screen += chunk

    def interrupt(self) -> str:
        """Type Ctrl-C until the shell answers with ``^C`` and a fresh prompt.

        NB: CPython's readline only notices SIGINT when it interrupts its ``select()``; one
        that lands between the prompt being printed and that call waits for the next key.
        A person never types that fast, a test does, so a lost Ctrl-C is typed again."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            self.type("\x03")
            try:
                return self.read_until("^C\n" + PROMPT, timeout_s=0.5)
            except ScreenTimeout as exc:
                if time.monotonic() > deadline:
                    raise ScreenTimeout(f"{exc}; its threads then: {self._stacks()!r}") from None

    def _stacks(self) -> bytes:
        """What the shell prints as SIGABRT ends it: every thread's stack."""
        self.process.send_signal(signal.SIGABRT)
        self.process.wait(timeout=DEADLINE_S)
        out = b""
        while select.select([self._master], [], [], 0.5)[0]:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        return out

    def wait(self) -> int:
        return self.process.wait(timeout=DEADLINE_S)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=DEADLINE_S)
        os.close(self._master)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    (tmp_path / "home").mkdir()
    shell = Terminal(tmp_path / "store", tmp_path / "home")
    yield shell
    shell.close()


def history_entries(home: Path) -> list[str]:
    lines = (home / ".feedkv_sql_history").read_text().splitlines()
    if lines[:1] == ["_HiStOrY_V2_"]:  # libedit's format escapes spaces
        return [line.replace("\\040", " ") for line in lines[1:]]
    return lines


def test_the_shell_runs_statements_spanning_lines_reports_errors_and_quits(
    terminal: Terminal, tmp_path: Path
) -> None:
    terminal.read_until(PROMPT)
    terminal.type("CREATE TABLE t (k INT PRIMARY KEY, v STRING);\n")
    assert "CREATE TABLE\n" in terminal.read_until(PROMPT)

    terminal.type("INSERT INTO t VALUES (1, 'a');\n")
    terminal.read_until(PROMPT)
    terminal.type("SELECT k, v\n")
    terminal.read_until(" " * (len(PROMPT) - 3) + "-> ")
    terminal.type("FROM t;\n")
    screen = terminal.read_until(PROMPT)
    assert " k | v\n---+---\n 1 | a\n(1 row)\n" in screen

    terminal.type("SELECT * FROM nope;\n")
    screen = terminal.read_until(PROMPT)
    assert 'ERROR: relation "nope" does not exist\nSQLSTATE: 42P01\n' in screen

    terminal.type("\\q\n")
    assert terminal.wait() == 0
    history = history_entries(tmp_path / "home")
    assert "SELECT k, v FROM t;" in history
    assert "SELECT * FROM nope;" in history


def test_the_shell_runs_its_own_backslash_commands(terminal: Terminal) -> None:
    terminal.read_until(PROMPT)
    terminal.type("CREATE TABLE t (k INT PRIMARY KEY);\n")
    terminal.read_until(PROMPT)
    terminal.type("\\dt\n")
    listed = terminal.read_until(PROMPT)
    assert " public      | t          | table | root  | 0                   | NULL\n" in listed
    terminal.type("\\x\n")
    assert "invalid command \\x" in terminal.read_until(PROMPT)
    terminal.type("\\q\n")
    assert terminal.wait() == 0


def test_the_shell_prompt_marks_an_open_transaction(terminal: Terminal) -> None:
    terminal.read_until(PROMPT)

    terminal.type("BEGIN;\n")
    assert "BEGIN\n" in terminal.read_until("root@defaultdb*> ")
    terminal.type("SELECT 1 AS one;\n")
    assert " one\n-----\n 1\n(1 row)\n" in terminal.read_until("root@defaultdb*> ")
    terminal.type("COMMIT;\n")
    assert "COMMIT\n" in terminal.read_until(PROMPT)

    terminal.type("\\q\n")
    assert terminal.wait() == 0


def test_ctrl_c_in_the_shell_drops_the_unfinished_statement(terminal: Terminal) -> None:
    terminal.read_until(PROMPT)
    terminal.type("SELECT 1 AS dropped,\n")
    terminal.read_until("-> ")

    terminal.interrupt()
    terminal.type("SELECT 2 AS kept;\n")
    screen = terminal.read_until("(1 row)\n" + PROMPT)

    assert " kept\n------\n 2\n(1 row)\n" in screen
    assert "dropped" not in screen
    terminal.type("\x04")  # Ctrl-D on an empty line ends the shell too
    assert terminal.wait() == 0


def test_the_shell_saves_each_statement_to_its_history_once(
    terminal: Terminal, tmp_path: Path
) -> None:
    terminal.read_until(PROMPT)
    terminal.type("SELECT 1 AS one;\n")
    terminal.read_until(PROMPT)
    terminal.type("SELECT 2\n")
    terminal.read_until("-> ")
    terminal.type("AS two;\n")
    terminal.read_until(PROMPT)
    terminal.type("\\q\n")
    assert terminal.wait() == 0

    assert history_entries(tmp_path / "home") == ["SELECT 1 AS one;", "SELECT 2 AS two;"]


# Sinkless changefeeds.


def test_a_sinkless_changefeed_prints_each_row_as_a_line_until_it_ends(sql: Sql) -> None:
    setup = sql(
        "-e",
        "CREATE TABLE t (k INT PRIMARY KEY, v STRING)",
        "-e",
        "INSERT INTO t VALUES (1, 'a'), (2, NULL)",
    )
    assert setup.code == 0

    run = sql("-e", "EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan='only'")
    assert run.code == 0, run.err
    assert run.out.splitlines() == [
        't | [1] | {"after": {"k": 1, "v": "a"}}',
        't | [2] | {"after": {"k": 2, "v": null}}',
    ]

    run = sql("--format", "json", "-e", "EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan='only'")
    assert [json.loads(line)["key"] for line in run.out.splitlines()] == ["[1]", "[2]"]


def test_a_failing_changefeed_prints_its_error(sql: Sql) -> None:
    run = sql("-e", "EXPERIMENTAL CHANGEFEED FOR missing")
    assert run.code == 1
    assert "SQLSTATE: 42P01" in run.err
