"""IMPORT INTO: CSV files into an existing table as committed values at one timestamp,
all rows or none, on a real embedded node and through a server's SQL port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import errors

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.parser import parse
from feedkv.sql.row_codec import table_span
from feedkv.testing.node_process import NodeProcess


def sql_error(db: DB, statement: str) -> SQLError:
    with pytest.raises(SQLError) as caught:
        db.sql(statement)
    return caught.value


@pytest.fixture
def table(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING, n INT NOT NULL DEFAULT 7)")
    return db


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return f"file://{path}"


def test_import_writes_every_row_with_defaults_at_one_timestamp(table: DB, tmp_path: Path) -> None:
    db = table
    a = write(tmp_path / "a.csv", "".join(f"{k},v{k}\n" for k in range(2500)))
    b = write(tmp_path / "b.csv", '2500,"quoted, comma"\n2501,NULL\n')
    result = db.sql(f"IMPORT INTO t (k, v) CSV DATA ('{a}', '{b}') WITH nullif = 'NULL'")
    assert result.tag == "IMPORT 2502"
    assert db.sql("SELECT count(*), min(k), max(k), min(n), max(n) FROM t").rows == [
        (2502, 0, 2501, 7, 7)
    ]
    assert db.sql("SELECT v FROM t WHERE k >= 2500 ORDER BY k").rows == [
        ("quoted, comma",),
        (None,),
    ]
    # one timestamp for all the rows, no transaction: committed values, no intents left
    snapshot = catalog.Snapshot(db, db.now())
    desc = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), "t")
    assert not desc.offline
    span = table_span(desc.id)
    assert len({kv.ts for kv in db.scan(span.start, span.end)}) == 1
    db.sql("INSERT INTO t (k, v) VALUES (-1, 'after')")  # the table is online again
    assert db.sql("SELECT v FROM t WHERE k = -1").rows == [("after",)]


def test_rows_out_of_key_order_are_imported_and_a_key_twice_among_them_is_refused(
    table: DB, tmp_path: Path
) -> None:
    backwards = write(tmp_path / "a.csv", "".join(f"{k},v{k},{k}\n" for k in range(300, -300, -1)))
    assert table.sql(f"IMPORT INTO t CSV DATA ('{backwards}')").tag == "IMPORT 600"
    assert table.sql("SELECT count(*), min(k), max(k), sum(n) FROM t").rows == [
        (600, -299, 300, 300)
    ]
    assert table.sql("SELECT v FROM t WHERE k = -299").rows == [("v-299",)]
    table.sql("CREATE TABLE u (k INT PRIMARY KEY, v STRING)")
    twice = write(tmp_path / "b.csv", "5,a\n1,b\n5,c\n")
    error = sql_error(table, f"IMPORT INTO u CSV DATA ('{twice}')")
    assert error.code == "23505"
    assert "line 3" in error.message
    assert table.sql("SELECT count(*) FROM u").rows == [(0,)]


def test_options_skip_header_lines_and_change_the_delimiter(table: DB, tmp_path: Path) -> None:
    uri = write(tmp_path / "a.csv", "k|v|n\n1|one|1\n2||2\n")
    assert table.sql(f"IMPORT INTO t CSV DATA ('{uri}') WITH delimiter = '|', skip = '1'").tag == (
        "IMPORT 2"
    )
    assert table.sql("SELECT k, v, n FROM t ORDER BY k").rows == [(1, "one", 1), (2, "", 2)]


@pytest.mark.parametrize(
    ("text", "code", "message"),
    [
        ("1,a\n2,b\nthree,c\n", "22P02", "a.csv, line 3"),
        ("1,a\n2\n", "22P04", "line 2: expected 2 fields, got 1"),
        ("1,a\n1,b\n", "23505", "line 2: duplicate key"),
    ],
)
def test_a_bad_row_names_its_file_and_line_and_nothing_is_written(
    table: DB, tmp_path: Path, text: str, code: str, message: str
) -> None:
    uri = write(tmp_path / "a.csv", text)
    error = sql_error(table, f"IMPORT INTO t (k, v) CSV DATA ('{uri}')")
    assert error.code == code
    assert message in error.message
    assert table.sql("SELECT count(*) FROM t").rows == [(0,)]


def test_a_row_already_in_the_table_fails_the_import_and_keeps_the_table_as_it_was(
    table: DB, tmp_path: Path
) -> None:
    db = table
    db.sql("INSERT INTO t (k, v) VALUES (25000, 'old')")
    uri = write(tmp_path / "a.csv", "".join(f"{k},new\n" for k in range(30000)))
    error = sql_error(db, f"IMPORT INTO t (k, v) CSV DATA ('{uri}')")
    assert error.code == "23505"
    assert error.detail == "Key (k)=(25000) already exists."
    # the rows of the commands written before the conflict were deleted again
    assert db.sql("SELECT k, v FROM t").rows == [(25000, "old")]
    db.sql("INSERT INTO t (k, v) VALUES (1, 'online')")
    assert db.sql("SELECT count(*) FROM t").rows == [(2,)]


def test_fields_read_as_the_csv_module_reads_them(db: DB, tmp_path: Path) -> None:
    """The files are parsed column by column (pyarrow): quoting, embedded newlines and
    delimiters, spaces around integers and Unicode read as row by row."""
    db.sql("CREATE TABLE u (k INT PRIMARY KEY, v STRING, n INT)")
    text = (
        '3,"two\nlines",  7\n'
        '-1,"a ""quoted"" word", -9223372036854775808\n'
        "2,,0\n"
        "10,\u00e9t\u00e9 \U0001f600,9223372036854775807\r\n"
    )
    uri = write(tmp_path / "a.csv", text)
    assert db.sql(f"IMPORT INTO u CSV DATA ('{uri}')").tag == "IMPORT 4"
    assert db.sql("SELECT k, v, n FROM u ORDER BY k").rows == [
        (-1, 'a "quoted" word', -(1 << 63)),
        (2, "", 0),
        (3, "two\nlines", 7),
        (10, "\u00e9t\u00e9 \U0001f600", (1 << 63) - 1),
    ]


@pytest.mark.parametrize(
    ("text", "code", "message"),
    [
        ("4,b,1\n5,c,x\n", "22P02", "b.csv, line 2"),
        ("4,b,1\n5,c,99999999999999999999\n", "22003", "b.csv, line 2"),
        ('4,b,1\n5,"unterminated,1\n', "22P04", "b.csv, line 2"),
        ("4,b,1\n2,again,2\n", "23505", "b.csv, line 2: duplicate key"),
        ("4,b,1\n5,c\n", "22P04", "b.csv, line 2: expected 3 fields, got 2"),
        ("4,b,1\n5,c,\xff\n", "58030", "could not read file"),
    ],
)
def test_a_bad_second_file_fails_the_import_and_loses_nothing(
    table: DB, tmp_path: Path, text: str, code: str, message: str
) -> None:
    db = table
    db.sql("INSERT INTO t VALUES (-5, 'kept', 1)")
    a = write(tmp_path / "a.csv", "".join(f"{k},v{k},{k}\n" for k in range(1, 4)))
    (tmp_path / "b.csv").write_bytes(text.encode("latin-1"))
    error = sql_error(db, f"IMPORT INTO t CSV DATA ('{a}', 'file://{tmp_path / 'b.csv'}')")
    assert (error.code, message in error.message) == (code, True), error.message
    assert db.sql("SELECT k, v, n FROM t").rows == [(-5, "kept", 1)]
    db.sql("INSERT INTO t VALUES (6, 'online', 6)")


def test_a_table_with_an_index_is_refused(table: DB, tmp_path: Path) -> None:
    table.sql("CREATE INDEX ON t (v)")
    uri = write(tmp_path / "a.csv", "1,a,1\n")
    error = sql_error(table, f"IMPORT INTO t CSV DATA ('{uri}')")
    assert error.code == "0A000"
    assert "secondary indexes" in error.message
    assert table.sql("SELECT count(*) FROM t").rows == [(0,)]


@pytest.mark.parametrize(
    ("statement", "code", "message"),
    [
        ("IMPORT INTO t CSV DATA ('s3://bucket/a.csv')", "0A000", "nodelocal:// URIs only"),
        ("IMPORT INTO t CSV DATA ('nodelocal://1/a.csv')", "0A000", "use file://"),
        ("IMPORT INTO t CSV DATA ('file:///nonexistent/a.csv')", "58P01", "no such file"),
        (
            "IMPORT INTO t CSV DATA ('file:///x') WITH quote = '\"'",
            "22023",
            "unknown IMPORT option",
        ),
        ("IMPORT INTO t CSV DATA ('file:///x') WITH delimiter = ';;'", "22023", "one character"),
        ("IMPORT INTO t CSV DATA ('file:///x') WITH skip = 'one'", "22023", "number of lines"),
        ("IMPORT INTO nope CSV DATA ('file:///x')", "42P01", "nope"),
        ("IMPORT INTO t (k, k) CSV DATA ('file:///dev/null')", "42701", "more than once"),
        ("IMPORT INTO t AVRO DATA ('file:///x')", "0A000", "CSV DATA only"),
        ("IMPORT TABLE t FROM 'x'", "0A000", "only IMPORT INTO"),
        ("IMPORT INTO t CSV DATA (x)", "42601", "file URI as a string"),
    ],
)
def test_bad_imports_say_what_is_wrong(table: DB, statement: str, code: str, message: str) -> None:
    error = sql_error(table, statement)
    assert error.code == code
    assert message in error.message


def test_import_is_refused_inside_a_transaction(table: DB, tmp_path: Path) -> None:
    uri = write(tmp_path / "a.csv", "1,a\n")
    session = table.session()
    try:
        session.execute("BEGIN")
        with pytest.raises(SQLError) as caught:
            session.execute(f"IMPORT INTO t (k, v) CSV DATA ('{uri}')")
        assert caught.value.code == "25001"
    finally:
        session.close()


def test_the_statement_parses_with_columns_uris_and_options() -> None:
    [s] = parse("IMPORT INTO db.t (a, \"B\") CSV DATA ('file:///a', 'file:///b') WITH skip = '1'")
    assert (s.table.database, s.table.name) == ("db", "t")  # type: ignore[attr-defined]
    assert s.columns == ("a", "B")  # type: ignore[attr-defined]
    assert s.uris == ("file:///a", "file:///b")  # type: ignore[attr-defined]
    assert s.options == (("skip", "1"),)  # type: ignore[attr-defined]


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeProcess]:
    extern = tmp_path / "extern"
    extern.mkdir()
    node = NodeProcess(tmp_path / "store", "--external-io-dir", str(extern))
    yield node
    node.terminate()


def test_a_server_reads_files_only_below_its_external_io_dir(
    node: NodeProcess, tmp_path: Path
) -> None:
    inside = write(tmp_path / "extern" / "a.csv", "1,a\n2,b\n")
    outside = write(tmp_path / "a.csv", "3,c\n")
    with psycopg.connect(node.sql_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
        with conn.cursor() as cur:
            cur.execute(f"IMPORT INTO t CSV DATA ('{inside}')")
            assert cur.statusmessage == "IMPORT 2"
        with pytest.raises(errors.InsufficientPrivilege) as caught:
            conn.execute(f"IMPORT INTO t CSV DATA ('{outside}')")
        assert "external I/O directory" in str(caught.value)
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute(f"IMPORT INTO t CSV DATA ('file://{tmp_path}/extern/../a.csv')")
        assert conn.execute("SELECT k, v FROM t ORDER BY k").fetchall() == [(1, "a"), (2, "b")]


def test_a_server_reads_nodelocal_files_of_its_own_node(node: NodeProcess, tmp_path: Path) -> None:
    """As CockroachDB's examples name an import's files: nodelocal://1/... was refused
    with "IMPORT INTO reads file:// URIs only"."""
    write(tmp_path / "extern" / "a.csv", "1,a\n")
    write(tmp_path / "extern" / "b.csv", "2,b\n")
    with psycopg.connect(node.sql_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
        conn.execute("IMPORT INTO t CSV DATA ('nodelocal://1/a.csv', 'nodelocal://self/b.csv')")
        with pytest.raises(errors.FeatureNotSupported) as caught:
            conn.execute("IMPORT INTO t CSV DATA ('nodelocal://2/a.csv')")
        assert "copy the file there and name it nodelocal://1/..." in str(caught.value)
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("IMPORT INTO t CSV DATA ('nodelocal://1/../a.csv')")
        assert conn.execute("SELECT k, v FROM t ORDER BY k").fetchall() == [(1, "a"), (2, "b")]


def _take_offline(db: DB) -> None:
    """The table as an import that died after step 2 leaves it."""
    session = db.session()
    try:
        session._in_own_transaction(
            lambda ex: (
                ex.changing(desc := ex.table(st.TableName("t"))),
                ex.publish(desc.bumped(offline=True)),
            )
        )
    finally:
        session.close()


def test_an_offline_table_refuses_statements_but_may_be_dropped(table: DB) -> None:
    db = table
    _take_offline(db)
    for statement in ("SELECT * FROM t", "INSERT INTO t (k) VALUES (1)", "DELETE FROM t"):
        error = sql_error(db, statement)
        assert error.code == "55000", statement
        assert 'relation "t" is offline: importing' in error.message
    db.sql("DROP TABLE t")
    assert sql_error(db, "SELECT * FROM t").code == "42P01"


def test_import_needs_the_admin_role(table: DB, tmp_path: Path) -> None:
    db = table
    uri = write(tmp_path / "a.csv", "1,a\n")
    db.sql("CREATE USER bob")
    db.sql("GRANT ALL ON TABLE t TO bob")
    session = db.session(user="bob")
    try:
        with pytest.raises(SQLError) as caught:
            session.execute(f"IMPORT INTO t (k, v) CSV DATA ('{uri}')")
        assert caught.value.code == "42501"
        assert "admin role" in caught.value.message
    finally:
        session.close()
    assert db.sql("SELECT count(*) FROM t").rows == [(0,)]
