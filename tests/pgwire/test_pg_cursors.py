"""SQL cursors over the SQL port with real clients: psycopg 3's named (server-side)
cursors, SQLAlchemy 2's ``stream_results`` and ``yield_per``, and psql running DECLARE
and FETCH; with the errors CockroachDB answers."""

from __future__ import annotations

import asyncio
import datetime
import struct
from typing import Any

import asyncpg
import psycopg
import pytest
import sqlalchemy as sa
from psycopg import errors
from sqlalchemy import orm
from test_connection import SYNC, Wire, describe, execute, query
from test_psql import psql

from feedkv import DB
from feedkv.testing.pgwire_client import bind, error_fields, parse, startup


def _table(conn: psycopg.Connection[Any], rows: int) -> None:
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING, at TIMESTAMPTZ)")
    conn.execute(
        "INSERT INTO t SELECT i, 'v' || i::STRING, '2024-05-01 12:00:00+00' "
        "FROM generate_series(1, %s) AS g(i)",
        (rows,),
    )


def test_a_psycopg_named_cursor_fetches_in_pages(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=False) as conn:
        _table(conn, 250)
        conn.commit()
        with conn.cursor(name="pages") as cur:
            cur.itersize = 40
            cur.execute("SELECT id, v, at FROM t WHERE id > %s", (10,))
            assert [d.name for d in cur.description or []] == ["id", "v", "at"]
            first = cur.fetchone()
            assert first == (11, "v11", datetime.datetime(2024, 5, 1, 12, tzinfo=datetime.UTC))
            assert [r[0] for r in cur.fetchmany(3)] == [12, 13, 14]
            rest = [r[0] for r in cur]  # itersize rows a FETCH
            assert rest == list(range(15, 251))
            assert cur.fetchall() == []
        conn.commit()
        with conn.cursor(name="binary", binary=True) as cur:  # rows in the binary format
            cur.execute("SELECT id, v, at FROM t WHERE id > 248")
            assert [r[:2] for r in cur.fetchmany(5)] == [(249, "v249"), (250, "v250")]
        conn.commit()


def test_a_psycopg_named_cursor_scrolls_forward_and_refuses_backward(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=False) as conn:
        _table(conn, 20)
        conn.commit()
        with conn.cursor(name="moving") as cur:
            cur.execute("SELECT id FROM t")
            cur.scroll(5)
            assert cur.fetchone() == (6,)
            cur.scroll(10, mode="absolute")
            assert cur.fetchone() == (11,)
            with pytest.raises(errors.ObjectNotInPrerequisiteState, match="scan forward"):
                cur.scroll(-1)
        conn.rollback()
        scrolling = conn.cursor(name="scrolling", scrollable=True)
        with pytest.raises(errors.FeatureNotSupported, match="SCROLL"):
            scrolling.execute("SELECT id FROM t")
        conn.rollback()


def test_a_psycopg_held_cursor_outlives_its_commit(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=False) as conn:
        _table(conn, 10)
        conn.commit()
        cur = conn.cursor(name="held", withhold=True)
        cur.execute("SELECT id FROM t")
        assert cur.fetchmany(2) == [(1,), (2,)]
        conn.commit()
        conn.execute("INSERT INTO t VALUES (11, 'late', NULL)")
        conn.commit()
        assert [r[0] for r in cur.fetchall()] == list(range(3, 11))  # not the late row
        rows = conn.execute("SELECT name, statement, is_holdable FROM pg_cursors").fetchall()
        assert rows == [("held", "SELECT id FROM t", True)]
        cur.close()
        conn.commit()
        assert conn.execute("SELECT count(*) FROM pg_catalog.pg_cursors").fetchone() == (0,)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # outside a transaction
        alone = conn.cursor(name="alone", withhold=True)
        alone.execute("SELECT id FROM t WHERE id > 8")
        assert alone.fetchall() == [(9,), (10,), (11,)]
        alone.close()


def test_pg_cursors_lists_the_sessions_cursors(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("BEGIN")
        conn.execute("DECLARE a CURSOR FOR SELECT 1")
        conn.execute('DECLARE "B" NO SCROLL CURSOR WITHOUT HOLD FOR VALUES (1), (2)')
        rows = conn.execute(
            "SELECT name, statement, is_holdable, is_binary, is_scrollable, creation_time "
            "FROM pg_catalog.pg_cursors ORDER BY name"
        ).fetchall()
        assert [r[:5] for r in rows] == [
            ("B", "VALUES (1), (2)", False, False, False),
            ("a", "SELECT 1", False, False, False),
        ]
        assert all(isinstance(r[5], datetime.datetime) and r[5].tzinfo for r in rows)
        conn.execute("COMMIT")
        assert conn.execute("SELECT * FROM pg_cursors").fetchall() == []


def test_the_cursor_errors_are_cockroachdbs(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with pytest.raises(errors.NoActiveSqlTransaction, match="transaction blocks"):
            conn.execute("DECLARE c CURSOR FOR SELECT 1")
        with pytest.raises(errors.InvalidCursorName, match='"nope" does not exist'):
            conn.execute("FETCH 1 FROM nope")
        with pytest.raises(errors.SyntaxError):
            conn.execute("FETCH SIDEWAYS 3 FROM c")
        with conn.transaction(force_rollback=True):
            conn.execute("DECLARE c CURSOR FOR SELECT 1")
            with pytest.raises(errors.DuplicateCursor, match='"c" already exists'):
                conn.execute("DECLARE c CURSOR FOR SELECT 2")
        with pytest.raises(errors.InFailedSqlTransaction), conn.transaction():
            conn.execute("DECLARE c CURSOR FOR SELECT 1")
            with pytest.raises(errors.ObjectNotInPrerequisiteState):
                conn.execute("FETCH BACKWARD 1 FROM c")
            conn.execute("FETCH 1 FROM c")
        with pytest.raises(errors.FeatureNotSupported, match="BINARY"), conn.transaction():
            conn.execute("DECLARE c BINARY CURSOR FOR SELECT 1")


def test_fetch_and_move_answer_their_tags_in_both_protocols(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        _table(conn, 5)
        conn.execute("BEGIN")
        for prepare in (False, True):
            conn.execute("DECLARE c CURSOR FOR SELECT id, v FROM t")
            cur = conn.execute("MOVE 2 IN c", prepare=prepare)
            assert cur.statusmessage == "MOVE 2"
            cur = conn.execute("FETCH FORWARD 2 FROM c", prepare=prepare)
            assert cur.statusmessage == "FETCH 2"
            assert [d.name for d in cur.description or []] == ["id", "v"]
            assert cur.fetchall() == [(3, "v3"), (4, "v4")]
            assert conn.execute("CLOSE c").statusmessage == "CLOSE"
        conn.execute("ROLLBACK")


def test_sqlalchemy_streams_results_through_a_cursor(pg_url: str) -> None:
    url = pg_url.replace("postgresql://", "cockroachdb+psycopg://")
    engine = sa.create_engine(url)
    fill = "INSERT INTO t SELECT i, 'v' || i::STRING FROM generate_series(1, 300) AS g(i)"
    table = sa.table("t", sa.column("id"), sa.column("v"))
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE t (id INT PRIMARY KEY, v STRING)"))
            conn.execute(sa.text(fill))
        with engine.connect() as conn:
            streamed = conn.execution_options(stream_results=True, max_row_buffer=50)
            result = streamed.execute(sa.text("SELECT id, v FROM t WHERE id <= :n"), {"n": 120})
            first = result.fetchmany(10)
            # the rows come through a server-side cursor, still open mid-way
            cursors = conn.exec_driver_sql("SELECT statement FROM pg_cursors").all()
            assert cursors == [("SELECT id, v FROM t WHERE id <= $1",)]
            assert [row.id for row in [*first, *result]] == list(range(1, 121))
            paged = conn.execution_options(yield_per=25).execute(sa.text("SELECT id FROM t"))
            parts = list(paged.partitions(25))
            assert [len(part) for part in parts] == [25] * 12
            assert [row.id for part in parts for row in part] == list(range(1, 301))
        with orm.Session(engine) as session:  # the ORM's yield_per, in key order
            query = sa.select(table.c.id, table.c.v).order_by(table.c.id)
            streamed_rows = session.execute(query.execution_options(yield_per=40))
            assert [row.id for row in streamed_rows] == list(range(1, 301))
    finally:
        engine.dispose()


def test_psql_declares_and_fetches(pg_url: str) -> None:
    done = psql(
        pg_url,
        stdin=(
            "CREATE TABLE t (id INT PRIMARY KEY, v STRING);\n"
            "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c');\n"
            "BEGIN;\n"
            "DECLARE c CURSOR FOR SELECT id, v FROM t;\n"
            "FETCH 2 FROM c;\n"
            "MOVE NEXT IN c;\n"
            "FETCH ALL c;\n"
            "CLOSE c;\n"
            "COMMIT;\n"
            "BEGIN;\n"
            "DECLARE d CURSOR FOR SELECT v FROM t;\n"
            "FETCH PRIOR FROM d;\n"
        ),
    )
    assert done.returncode != 0
    assert done.stdout.splitlines() == [
        "CREATE TABLE",
        "INSERT 0 3",
        "BEGIN",
        "DECLARE CURSOR",
        "1|a",
        "2|b",
        "MOVE 1",
        "CLOSE",
        "COMMIT",
        "BEGIN",
        "DECLARE CURSOR",
    ]
    assert "55000" in done.stderr and "cursor can only scan forward" in done.stderr


def test_a_cursor_over_a_catalog_query_reads_its_rows_at_once(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        _table(conn, 1)
        conn.execute("BEGIN")
        conn.execute(
            "DECLARE k CURSOR FOR SELECT relname FROM pg_catalog.pg_class WHERE relname = %s",
            ("t",),
        )
        assert conn.execute("FETCH ALL FROM k").fetchall() == [("t",)]
        conn.execute("SAVEPOINT s")
        conn.execute("DECLARE later CURSOR FOR SELECT relname FROM pg_class")
        conn.execute("ROLLBACK TO SAVEPOINT s")
        with pytest.raises(errors.InvalidCursorName):
            conn.execute("FETCH 1 FROM later")
        conn.execute("ROLLBACK")
        conn.execute("BEGIN")
        conn.execute("DECLARE k CURSOR FOR SELECT 1 FROM pg_catalog.pg_class")
        with pytest.raises(errors.DuplicateCursor):
            conn.execute("DECLARE k CURSOR FOR SELECT 1 FROM pg_catalog.pg_class")
        conn.execute("ROLLBACK")
        with pytest.raises(errors.NoActiveSqlTransaction):
            conn.execute("DECLARE k CURSOR FOR SELECT relname FROM pg_catalog.pg_class")
        with conn.cursor(name="tables") as cur:  # a named cursor, as SQLAlchemy's reflection
            conn.execute("BEGIN")
            cur.execute("SELECT relname FROM pg_class WHERE relname = 't'")
            assert cur.fetchall() == [("t",)]
        conn.execute("COMMIT")


def test_a_cursor_is_a_portal_to_describe_and_its_name_is_taken(db: DB) -> None:
    wire = Wire(db)
    wire.send(startup())
    wire.send(query("CREATE TABLE t (id INT PRIMARY KEY, s STRING)"))
    wire.send(query("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')"))
    wire.send(query("BEGIN"), query("DECLARE c CURSOR FOR SELECT s, id FROM t"))
    described = wire.send(describe("P", "c"), SYNC)
    assert [kind for kind, _ in described] == [b"T", b"Z"]
    assert b"s\x00" in described[0][1] and b"id\x00" in described[0][1]
    answer = wire.send(parse("", "SELECT 1"), bind("c", ""), SYNC)
    assert [kind for kind, _ in answer] == [b"1", b"E", b"Z"]
    assert b"42P03" in answer[1][1]
    wire.send(query("ROLLBACK"), query("BEGIN"), query("DECLARE c CURSOR FOR SELECT id FROM t"))
    fetched = wire.send(parse("", "FETCH ALL FROM c"), bind("", ""), describe("P"), execute("", 2))
    assert [kind for kind, _ in fetched] == [b"1", b"2", b"T", b"D", b"D", b"s"]
    rest = wire.send(execute("", 2), SYNC)
    assert [kind for kind, _ in rest] == [b"D", b"C", b"Z"]
    assert rest[1][1] == b"FETCH 3\x00"
    missing = wire.send(describe("P", "nope"), SYNC)
    assert [kind for kind, _ in missing] == [b"E", b"Z"] and b"34000" in missing[0][1]


def test_asyncpg_prepares_declare_and_fetch(pg_url: str) -> None:
    async def scenario() -> list[tuple[int, str]]:
        conn = await asyncpg.connect(pg_url)
        try:
            await conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
            await conn.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
            async with conn.transaction():
                # NB: prepared, with its parameter typed as the query's column
                await conn.execute("DECLARE c CURSOR FOR SELECT id, v FROM t WHERE id > $1", 1)
                rows = await conn.fetch("FETCH 5 FROM c")
            return [(row["id"], row["v"]) for row in rows]
        finally:
            await conn.close()

    assert asyncio.run(asyncio.wait_for(scenario(), timeout=60)) == [(2, "b"), (3, "c")]


def test_declare_refuses_a_portals_name(db: DB) -> None:
    """Cursors and portals share one namespace: DECLARE of a name a portal has fails
    as CockroachDB's does (42P03), and so does a Bind of a cursor's name."""
    wire = Wire(db)
    wire.send(startup())
    wire.send(query("CREATE TABLE t (id INT PRIMARY KEY)"), query("BEGIN"))
    assert wire.send(parse("", "SELECT 1"), bind("p", ""), SYNC)[1][0] == b"2"
    refused = wire.send(query("DECLARE p CURSOR FOR SELECT id FROM t"))
    assert refused[0][0] == b"E"
    fields = error_fields(refused[0][1])
    assert (fields["C"], fields["M"]) == ("42P03", 'cursor "p" already exists as portal')
    wire.send(query("ROLLBACK"), query("BEGIN"), query("DECLARE c CURSOR FOR SELECT id FROM t"))
    answer = wire.send(parse("", "SELECT 1"), bind("c", ""), SYNC)
    fields = error_fields(answer[1][1])
    assert (fields["C"], fields["M"]) == ("42P03", 'portal "c" already exists as cursor')


def _redeclare(wire: Wire, columns: str) -> None:
    """Cursor c anew, over ``columns`` of t, in a transaction of its own."""
    wire.send(query("ROLLBACK"), query("BEGIN"))
    declared = wire.send(query(f"DECLARE c CURSOR FOR SELECT {columns} FROM t ORDER BY id"))
    assert declared[0] == (b"C", b"DECLARE CURSOR\x00")


def test_a_prepared_fetch_follows_its_cursors_columns_or_refuses_a_kept_description(
    db: DB,
) -> None:
    """A named FETCH prepared over cursor c, then run over a later c of other columns:
    described only as a portal, it sends the new columns; described as a statement
    (the client may keep that RowDescription), it is refused as PostgreSQL refuses a
    cached plan whose result type changed (0A000), not answered with rows that
    description does not fit."""
    wire = Wire(db)
    wire.send(startup())
    wire.send(query("CREATE TABLE t (id INT PRIMARY KEY, s STRING)"))
    wire.send(query("INSERT INTO t VALUES (1, 'a'), (2, 'b')"))
    _redeclare(wire, "id")
    prepared = wire.send(parse("f", "FETCH 1 FROM c"), parse("g", "FETCH 1 FROM c"), SYNC)
    assert [kind for kind, _ in prepared] == [b"1", b"1", b"Z"]
    kept = wire.send(describe("S", "g"), SYNC)
    assert [kind for kind, _ in kept] == [b"t", b"T", b"Z"]
    assert struct.unpack_from("!h", kept[1][1])[0] == 1
    _redeclare(wire, "s, id")
    fetched = wire.send(bind("", "f"), describe("P"), execute(), SYNC)
    assert [kind for kind, _ in fetched] == [b"2", b"T", b"D", b"C", b"Z"]
    assert struct.unpack_from("!h", fetched[1][1])[0] == 2
    assert fetched[2][1] == b"\x00\x02\x00\x00\x00\x01a\x00\x00\x00\x011"
    refused = wire.send(bind("", "g"), execute(), SYNC)
    assert [kind for kind, _ in refused] == [b"E", b"Z"]
    fields = error_fields(refused[0][1])
    assert (fields["C"], fields["M"]) == ("0A000", "cached plan must not change result type")
    _redeclare(wire, "id")
    again = wire.send(bind("", "g"), execute(), SYNC)
    assert [kind for kind, _ in again] == [b"2", b"D", b"C", b"Z"]


def test_a_named_cursors_computed_columns_keep_their_types(pg_url: str) -> None:
    # its FETCH is described before a value is read: a computed column's type was text
    with psycopg.connect(pg_url) as conn, conn.cursor(name="nc") as cur:
        cur.execute("SELECT 1 + 1 AS two, DATE '2024-01-02' + 1 AS d, lower('A') AS s")
        assert cur.fetchall() == [(2, datetime.date(2024, 1, 3), "a")]
        assert cur.description is not None
        assert [c.type_code for c in cur.description] == [20, 1082, 25]
