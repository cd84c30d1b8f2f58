"""psycopg 3, unchanged, against the SQL port: the simple and extended protocols, text
and binary formats, transactions, errors and prepared statements."""

from __future__ import annotations

import datetime
import decimal
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import errors

from feedkv.pgwire.types import OID

ROW = (
    1,
    "héllo",
    1.5,
    decimal.Decimal("-12345.678900"),
    b"\x00\xffbytes",
    True,
    datetime.date(2024, 2, 29),
    datetime.datetime(2024, 5, 1, 12, 30, 45, 123456),
    datetime.datetime(2024, 5, 1, 12, 30, 45, 500000, tzinfo=datetime.UTC),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    {"a": [1, 2, {"b": None}], "c": "d"},
)
COLUMNS = "id, s, f, d, b, ok, day, ts, tstz, u, j"
OIDS = [
    OID.INT8,
    OID.TEXT,
    OID.FLOAT8,
    OID.NUMERIC,
    OID.BYTEA,
    OID.BOOL,
    OID.DATE,
    OID.TIMESTAMP,
    OID.TIMESTAMPTZ,
    OID.UUID,
    OID.JSONB,
]


def make_table(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, s STRING, f FLOAT, d DECIMAL, b BYTES, ok BOOL, "
        "day DATE, ts TIMESTAMP, tstz TIMESTAMPTZ, u UUID, j JSONB)"
    )


def test_the_cockroachdb_connection_string_works_and_reports_a_postgresql_server(
    pg_url: str,
) -> None:
    assert pg_url.startswith("postgresql://root@127.0.0.1:")
    assert "/defaultdb?sslmode=verify-full&sslrootcert=" in pg_url
    with psycopg.connect(pg_url) as conn:
        assert conn.info.pgconn.ssl_in_use
        assert conn.info.server_version == 130000
        assert conn.info.parameter_status("client_encoding") == "UTF8"
        assert conn.info.parameter_status("integer_datetimes") == "on"
        assert conn.info.parameter_status("standard_conforming_strings") == "on"
        assert conn.info.parameter_status("DateStyle") == "ISO, MDY"
        assert conn.info.backend_pid > 0
        assert conn.execute("SELECT 1 + 1").fetchone() == (2,)


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_every_type_goes_in_as_a_parameter_and_comes_back_equal(pg_url: str, binary: bool) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        make_table(conn)
        marks = ", ".join(["%s"] * len(ROW))
        cur = conn.cursor(binary=binary)
        cur.execute(
            f"INSERT INTO t ({COLUMNS}) VALUES ({marks})",
            [*ROW[:-1], psycopg.types.json.Jsonb(ROW[-1])],
        )
        assert (cur.rowcount, cur.statusmessage) == (1, "INSERT 0 1")
        cur.execute(f"SELECT {COLUMNS} FROM t WHERE id = %s", [1])
        assert cur.fetchall() == [ROW]
        assert cur.description is not None
        assert [c.type_code for c in cur.description] == OIDS
        assert [c.name for c in cur.description] == COLUMNS.split(", ")


def test_nulls_come_back_as_none_in_both_formats(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        make_table(conn)
        conn.execute("INSERT INTO t (id) VALUES (7)")
        for binary in (False, True):
            row = conn.cursor(binary=binary).execute("SELECT * FROM t").fetchone()
            assert row == (7,) + (None,) * 10


def test_a_string_parameter_compares_with_an_int_column_as_a_literal_would(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        make_table(conn)
        conn.execute("INSERT INTO t (id, s) VALUES (3, 'x')")
        assert conn.execute("SELECT s FROM t WHERE id = %s", ["3"]).fetchall() == [("x",)]


def test_the_simple_protocol_runs_several_statements_each_with_its_result(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        make_table(conn)
        cur = psycopg.ClientCursor(conn)
        cur.execute(
            "INSERT INTO t (id, s) VALUES (1, 'a'), (2, 'b'); UPDATE t SET s = 'c' WHERE id > 0; "
            "SELECT id, s FROM t ORDER BY id; DELETE FROM t WHERE id = 1"
        )
        results = [(cur.statusmessage, cur.fetchall() if cur.description else None)]
        while cur.nextset():
            results.append((cur.statusmessage, cur.fetchall() if cur.description else None))
        assert results == [
            ("INSERT 0 2", None),
            ("UPDATE 2", None),
            ("SELECT 2", [(1, "c"), (2, "c")]),
            ("DELETE 1", None),
        ]


def test_an_error_in_a_multi_statement_string_takes_back_all_of_it(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        make_table(conn)
        cur = psycopg.ClientCursor(conn)
        with pytest.raises(errors.UniqueViolation):
            cur.execute("INSERT INTO t (id) VALUES (1); INSERT INTO t (id) VALUES (1)")
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_errors_carry_their_sqlstate_and_leave_the_connection_usable(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        make_table(conn)
        conn.execute("INSERT INTO t (id) VALUES (1)")
        with pytest.raises(errors.UniqueViolation) as duplicate:
            conn.execute("INSERT INTO t (id) VALUES (%s)", [1])
        assert duplicate.value.sqlstate == "23505"
        with pytest.raises(errors.UndefinedTable):
            conn.execute("SELECT * FROM nowhere")
        with pytest.raises(errors.SyntaxError) as syntax:
            conn.execute("SELECT * FROM t WHERE")
        assert syntax.value.diag.severity == "ERROR"
        assert syntax.value.diag.message_primary
        assert conn.execute("SELECT id FROM t").fetchall() == [(1,)]


def test_a_duplicate_key_names_the_key_in_the_detail_field(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE u (k INT PRIMARY KEY, e STRING UNIQUE)")
        conn.execute("INSERT INTO u VALUES (1, 'a@x')")
        with pytest.raises(errors.UniqueViolation) as on_key:
            conn.execute("INSERT INTO u VALUES (%s, 'b@x')", [1])
        diag = on_key.value.diag
        assert diag.message_primary == 'duplicate key value violates unique constraint "u_pkey"'
        assert diag.message_detail == "Key (k)=(1) already exists."
        with pytest.raises(errors.UniqueViolation) as on_index:
            conn.execute("INSERT INTO u VALUES (2, 'a@x')")
        diag = on_index.value.diag
        assert diag.message_primary == 'duplicate key value violates unique constraint "u_e_key"'
        assert diag.message_detail == "Key (e)=('a@x') already exists."


def test_transaction_status_follows_begin_failure_and_rollback(pg_url: str) -> None:
    Status = psycopg.pq.TransactionStatus
    with psycopg.connect(pg_url) as conn:  # psycopg sends BEGIN itself
        make_table(conn)
        conn.commit()
        assert conn.info.transaction_status == Status.IDLE
        conn.execute("INSERT INTO t (id) VALUES (1)")
        assert conn.info.transaction_status == Status.INTRANS
        with pytest.raises(errors.UndefinedTable):
            conn.execute("SELECT * FROM nowhere")
        assert conn.info.transaction_status == Status.INERROR
        with pytest.raises(errors.InFailedSqlTransaction) as failed:
            conn.execute("SELECT 1")
        assert failed.value.sqlstate == "25P02"
        conn.rollback()
        assert conn.info.transaction_status == Status.IDLE
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)  # rolled back


def test_a_committed_transaction_is_seen_by_another_connection(pg_url: str) -> None:
    with psycopg.connect(pg_url) as writer, psycopg.connect(pg_url, autocommit=True) as reader:
        make_table(writer)
        writer.commit()
        with writer.transaction():
            writer.execute("INSERT INTO t (id, s) VALUES (%s, %s)", [1, "one"])
            writer.execute("UPDATE t SET s = %s WHERE id = %s", ["uno", 1])
            assert reader.execute("SELECT count(*) FROM t").fetchone() == (0,)
        assert reader.execute("SELECT s FROM t").fetchall() == [("uno",)]


def test_prepared_statements_run_many_times_with_new_parameters(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True, prepare_threshold=0) as conn:
        make_table(conn)
        for i in range(5):
            conn.execute("INSERT INTO t (id, s) VALUES (%s, %s)", [i, f"s{i}"], prepare=True)
        got = [
            conn.execute("SELECT s FROM t WHERE id = %s", [i], prepare=True).fetchone()
            for i in range(5)
        ]
        assert got == [(f"s{i}",) for i in range(5)]
        cur = conn.execute("UPDATE t SET s = 'x' WHERE id >= %s", [2], prepare=True)
        assert cur.rowcount == 3


def test_executemany_inserts_every_row_with_placeholders_written_without_spaces(
    pg_url: str,
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        make_table(conn)
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO t (id,s) VALUES (%s,%s)", [(i, f"s{i}") for i in range(4)])
        rows = conn.execute("SELECT id,s FROM t WHERE id>=%s ORDER BY id", [0]).fetchall()
        assert rows == [(i, f"s{i}") for i in range(4)]


def test_a_pipeline_after_an_error_does_nothing_until_sync(pg_url: str) -> None:
    """As in PostgreSQL, the statements before a Sync are one implicit transaction: the
    error rolls back the INSERT before it too, and the one after it is skipped."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        make_table(conn)
        with pytest.raises(errors.UniqueViolation), conn.pipeline():
            conn.execute("INSERT INTO t (id) VALUES (%s)", [1])
            conn.execute("INSERT INTO t (id) VALUES (%s)", [1])
            conn.execute("INSERT INTO t (id) VALUES (%s)", [2])  # skipped: after the error
        assert conn.execute("SELECT id FROM t").fetchall() == []
        with conn.pipeline() as pipeline:
            conn.execute("INSERT INTO t (id) VALUES (%s)", [1])
            pipeline.sync()  # NB: a transaction ends here
            conn.execute("INSERT INTO t (id) VALUES (%s)", [1])
            with pytest.raises(errors.UniqueViolation):
                pipeline.sync()
        assert conn.execute("SELECT id FROM t").fetchall() == [(1,)]


def test_returning_gives_rows_and_the_insert_tag(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        make_table(conn)
        cur = conn.execute("INSERT INTO t (id, s) VALUES (%s, 'a') RETURNING id, s", [4])
        assert cur.fetchall() == [(4, "a")]
        assert cur.statusmessage == "INSERT 0 1"


# NB: an insecure node's answer: a secure one tells an unknown user only that the login
# failed, as it tells a wrong password (tests/security/test_secure_node.py)
@pytest.mark.insecure
def test_an_unknown_user_or_database_is_refused_at_connect(pg_url: str) -> None:
    with pytest.raises(psycopg.OperationalError, match='role "nobody" does not exist'):
        psycopg.connect(pg_url.replace("root@", "nobody@"))
    with pytest.raises(psycopg.OperationalError, match='database "nowhere" does not exist'):
        psycopg.connect(pg_url.replace("/defaultdb", "/nowhere"))


def test_parameterized_reads_of_a_view_and_of_a_using_join(pg_url: str) -> None:
    """Parse describes the statement: a view's columns from its query, those of ``*``
    over a USING join once it runs; a merged USING column is named bare."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE a (id INT PRIMARY KEY, x STRING)")
        conn.execute("CREATE TABLE b (id INT PRIMARY KEY, y STRING)")
        conn.execute("INSERT INTO a VALUES (1, 'x1'), (2, 'x2')")
        conn.execute("INSERT INTO b VALUES (1, 'y1')")
        conn.execute("CREATE VIEW v AS SELECT id, x FROM a")
        assert conn.execute("SELECT * FROM v WHERE id = %s", [2]).fetchall() == [(2, "x2")]
        joined = conn.execute("SELECT id, x, y FROM a JOIN b USING (id) WHERE id = %s", [1])
        assert joined.fetchall() == [(1, "x1", "y1")]
        assert conn.execute("SELECT * FROM a NATURAL JOIN b WHERE id = %s", [1]).fetchall() == [
            (1, "x1", "y1")
        ]


def test_a_prepared_read_of_a_view_is_typed_from_the_views_query(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE m (id INT PRIMARY KEY, x STRING, f FLOAT)")
        conn.execute("INSERT INTO m VALUES (1, 'x1', 0.5), (2, 'x2', 1.5)")
        conn.execute("CREATE VIEW mv (n, label, f) AS SELECT id, x, f FROM m")
        expected = {0: [("x1", 0.5), ("x2", 1.5)], 1: [("x2", 1.5)], 2: []}
        for n, rows in expected.items():  # NB: prepared once, then run prepared
            cur = conn.execute("SELECT label, f FROM mv WHERE n > %s", [n], prepare=True)
            assert cur.fetchall() == rows
            assert cur.description is not None
            assert [(c.name, c.type_code) for c in cur.description] == [
                ("label", 25),  # text
                ("f", 701),  # float8
            ]
