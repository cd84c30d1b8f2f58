"""asyncpg, unchanged, against the SQL port: it prepares every statement and encodes
its arguments in binary by the parameter types Describe reports, so typed parameters,
typed (even all-NULL) result columns, transactions and errors are tested here."""

from __future__ import annotations

import asyncio
import datetime
import decimal
import io
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import asyncpg
import pytest

from feedkv import DB

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coroutine, timeout=60))


async def _connect(url: str) -> asyncpg.Connection:
    return await asyncpg.connect(url)


def test_typed_parameters_and_results_round_trip(pg_url: str) -> None:
    async def scenario() -> None:
        conn = await _connect(pg_url)
        try:
            await conn.execute(
                "CREATE TABLE t (id INT PRIMARY KEY, s STRING, d DECIMAL, ok BOOL, "
                "day DATE, ts TIMESTAMPTZ, u UUID, n INT)"
            )
            row = (
                1,
                "héllo",
                decimal.Decimal("-1.25"),
                True,
                datetime.date(2024, 2, 29),
                datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.UTC),
                uuid.UUID("12345678-1234-5678-1234-567812345678"),
                None,
            )
            await conn.execute("INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", *row)
            found = await conn.fetchrow("SELECT * FROM t WHERE id = $1", 1)
            assert tuple(found) == row
            # an all-NULL column keeps its declared type: asyncpg decodes by it
            statement = await conn.prepare("SELECT n, d FROM t WHERE id > $1")
            assert [a.type.name for a in statement.get_attributes()] == ["int8", "numeric"]
            assert [p.name for p in statement.get_parameters()] == ["int8"]
            assert await statement.fetch(0) == [(None, decimal.Decimal("-1.25"))]
        finally:
            await conn.close()

    run(scenario())


def test_executemany_a_transaction_and_a_rollback(pg_url: str) -> None:
    async def scenario() -> None:
        conn = await _connect(pg_url)
        try:
            await conn.execute("CREATE TABLE kv (k INT PRIMARY KEY, v STRING)")
            await conn.executemany(
                "INSERT INTO kv VALUES ($1, $2)", [(i, f"v{i}") for i in range(5)]
            )
            async with conn.transaction():
                await conn.execute("UPDATE kv SET v = $1 WHERE k = $2", "changed", 2)
            with pytest.raises(RuntimeError):
                async with conn.transaction():
                    await conn.execute("DELETE FROM kv")
                    raise RuntimeError("roll it back")
            assert await conn.fetchval("SELECT count(*) FROM kv") == 5
            assert await conn.fetchval("SELECT v FROM kv WHERE k = $1", 2) == "changed"
        finally:
            await conn.close()

    run(scenario())


def test_errors_arrive_with_their_sqlstate_and_the_connection_goes_on(pg_url: str) -> None:
    async def scenario() -> None:
        conn = await _connect(pg_url)
        try:
            await conn.execute("CREATE TABLE u (k INT PRIMARY KEY)")
            await conn.execute("INSERT INTO u VALUES ($1)", 1)
            with pytest.raises(asyncpg.UniqueViolationError):
                await conn.execute("INSERT INTO u VALUES ($1)", 1)
            with pytest.raises(asyncpg.UndefinedTableError):
                await conn.fetch("SELECT * FROM missing WHERE k = $1", 1)
            assert await conn.fetchval("SELECT count(*) FROM u") == 1
        finally:
            await conn.close()

    run(scenario())


def test_array_parameters_and_results_go_through_its_type_introspection(pg_url: str) -> None:
    """asyncpg has no built-in codec for int8[] or float8[]: it asks the catalog for the
    type with its introspection query (``WHERE ti.oid = any($1::oid[])``), then encodes
    the list in binary and decodes the array it gets back."""

    async def scenario() -> None:
        conn = await _connect(pg_url)
        try:
            assert await conn.fetchval("SELECT $1::INT[]", [1, None, 3]) == [1, None, 3]
            assert await conn.fetchval("SELECT $1::FLOAT8[]", [1.5]) == [1.5]
            assert await conn.fetchval("SELECT $1::DATE[]", []) == []
            await conn.execute("CREATE TABLE a (k INT PRIMARY KEY, xs INT[], ds DECIMAL[])")
            await conn.execute(
                "INSERT INTO a VALUES ($1, $2, $3)", 1, [4, 5], [decimal.Decimal("0.5")]
            )
            assert tuple(await conn.fetchrow("SELECT xs, ds FROM a")) == (
                [4, 5],
                [decimal.Decimal("0.5")],
            )
            # what the driver asked: the array types and their element types, deepest
            # first (as PostgreSQL names them: regtype's text is format_type's, 0's "-")
            rows = await conn.fetch(asyncpg.introspection.INTRO_LOOKUP_TYPES_13, [1016, 1231])
            found = sorted(
                (-int(r["depth"]), r["oid"], r["name"], r["elemtype"], r["elemtype_name"])
                for r in rows
            )
            assert found == [
                (-1, 20, "int8", 0, "-"),
                (-1, 1700, "numeric", 0, "-"),
                (0, 1016, "_int8", 20, "bigint"),
                (0, 1231, "_numeric", 1700, "numeric"),
            ]
            assert [-int(r["depth"]) for r in rows] == [-1, -1, 0, 0]
        finally:
            await conn.close()

    run(scenario())


def test_an_array_literal_is_typed_when_prepared(pg_url: str) -> None:
    """A column asyncpg was told is text arrives as text: ARRAY[1, 2] is described as
    int8[], not sent as int8[] to a client that decodes text."""

    async def scenario() -> None:
        conn = await _connect(pg_url)
        try:
            statement = await conn.prepare("SELECT ARRAY[1, 2] AS xs, ARRAY['a'] AS ys")
            assert [a.type.name for a in statement.get_attributes()] == ["int8[]", "text[]"]
            assert tuple(await statement.fetchrow()) == ([1, 2], ["a"])
        finally:
            await conn.close()

    run(scenario())


def test_a_list_matches_through_any_and_all(pg_url: str) -> None:
    """``WHERE id = ANY($1)`` with a list, asyncpg's way of ``IN``: the placeholder is
    described as an array of the column's type, so the driver can encode the list."""

    async def scenario() -> None:
        conn = await _connect(pg_url)
        try:
            await conn.execute("CREATE TABLE m (id INT PRIMARY KEY, s STRING, n INT4)")
            await conn.executemany(
                "INSERT INTO m VALUES ($1, $2, $3)", [(i, f"s{i}", i * 10) for i in range(4)]
            )
            assert await conn.fetch("SELECT id FROM m WHERE id = ANY($1) ORDER BY id", [3, 1]) == [
                (1,),
                (3,),
            ]
            assert await conn.fetchval("SELECT count(*) FROM m WHERE s = ANY($1)", []) == 0
            assert await conn.fetch("SELECT id FROM m WHERE n = ANY($1)", [20]) == [(2,)]
            found = await conn.fetch("SELECT id FROM m WHERE s <> ALL($1) ORDER BY id", ["s0"])
            assert found == [(1,), (2,), (3,)]
            assert await conn.execute("DELETE FROM m WHERE id = ANY($1)", [0, 1]) == "DELETE 2"
        finally:
            await conn.close()

    run(scenario())


def test_a_bulk_insert_reads_its_columns_from_unnest(pg_url: str) -> None:
    """asyncpg's bulk-insert pattern: ``INSERT ... SELECT * FROM unnest($1::INT[],
    $2::STRING[])``, one array per column (the placeholders are described as arrays of
    their casts' types, so the driver encodes the lists)."""

    async def scenario() -> None:
        conn = await _connect(pg_url)
        try:
            await conn.execute("CREATE TABLE bulk (id INT PRIMARY KEY, name STRING)")
            status = await conn.execute(
                "INSERT INTO bulk SELECT * FROM unnest($1::INT[], $2::STRING[])",
                [1, 2, 3],
                ["a", "b", None],
            )
            assert status == "INSERT 0 3"
            rows = await conn.fetch("SELECT id, name FROM bulk ORDER BY id")
            assert [tuple(r) for r in rows] == [(1, "a"), (2, "b"), (3, None)]
            assert await conn.fetch("SELECT unnest($1::INT[]) AS v", [5, 6]) == [(5,), (6,)]
        finally:
            await conn.close()

    run(scenario())


def test_a_cursor_moves_forward_over_its_portal(pg_url: str) -> None:
    """asyncpg's ``Cursor.forward`` sends ``MOVE FORWARD n <portal>`` for the portal its
    Bind made: PostgreSQL's portals and SQL cursors share one namespace."""

    async def scenario() -> None:
        conn = await _connect(pg_url)
        try:
            await conn.execute("CREATE TABLE c (id INT PRIMARY KEY)")
            await conn.executemany("INSERT INTO c VALUES ($1)", [(i,) for i in range(10)])
            async with conn.transaction():
                cursor = await conn.cursor("SELECT id FROM c WHERE id >= $1 ORDER BY id", 1)
                assert await cursor.fetch(2) == [(1,), (2,)]
                assert await cursor.forward(3) == 3
                assert await cursor.fetchrow() == (6,)
                assert await cursor.forward(10) == 3
                assert await cursor.fetchrow() is None
                with pytest.raises(asyncpg.InvalidCursorNameError):
                    await conn.execute("MOVE FORWARD 1 no_such_portal")
            async with conn.transaction():
                cursor = await conn.cursor("SELECT id FROM c ORDER BY id")
                portal = cursor._portal_name  # NB: what forward() names, as it does
                with pytest.raises(asyncpg.ObjectNotInPrerequisiteStateError):
                    await conn.execute(f"MOVE BACKWARD 1 {portal}")
        finally:
            await conn.close()

    run(scenario())


def test_queries_over_queries_are_prepared(pg_url: str) -> None:
    """asyncpg prepares every statement and needs its columns' types before it runs:
    UNION, a derived table, a CTE, VALUES and generate_series are described."""

    async def scenario() -> None:
        conn = await _connect(pg_url)
        try:
            await conn.execute("CREATE TABLE q (id INT PRIMARY KEY, s STRING)")
            await conn.executemany("INSERT INTO q VALUES ($1, $2)", [(1, "a"), (2, "b")])
            union = "SELECT id FROM q UNION SELECT $1::INT ORDER BY id"
            assert await conn.fetch(union, 7) == [(1,), (2,), (7,)]
            derived = "SELECT x, s FROM (SELECT id AS x, s FROM q) AS d WHERE x > $1"
            assert await conn.fetch(derived, 1) == [(2, "b")]
            cte = "WITH w AS (SELECT id FROM q WHERE s = $1) SELECT id + 1 AS n FROM w"
            assert await conn.fetch(cte, "a") == [(2,)]
            assert await conn.fetch("VALUES (1, 'x')") == [(1, "x")]
            series = "SELECT g FROM generate_series(1, $1) AS g"
            assert [r["g"] for r in await conn.fetch(series, 3)] == [1, 2, 3]
            statement = await conn.prepare(derived)
            assert [a.type.name for a in statement.get_attributes()] == ["int8", "text"]
        finally:
            await conn.close()

    run(scenario())


def test_a_view_or_a_sequence_read_with_a_placeholder_is_prepared(pg_url: str) -> None:
    """asyncpg describes the statement before it binds: a view's columns and the
    placeholders compared with them are known from the view's query; a sequence's are
    those of the table of one row it reads as."""

    async def scenario() -> None:
        conn = await _connect(pg_url)
        try:
            await conn.execute("CREATE TABLE kv (k INT PRIMARY KEY, v STRING, d DECIMAL)")
            await conn.execute("INSERT INTO kv VALUES (1, 'a', 1.5), (2, 'b', 2.5)")
            await conn.execute("CREATE VIEW v AS SELECT k, v, d FROM kv WHERE k > 0")
            await conn.execute("CREATE VIEW w (key, doubled) AS SELECT k, k * 2 FROM v")
            found = await conn.fetch("SELECT * FROM v WHERE k > $1", 1)
            assert [tuple(r) for r in found] == [(2, "b", decimal.Decimal("2.5"))]
            statement = await conn.prepare("SELECT doubled, key FROM w WHERE key = $1")
            assert [p.name for p in statement.get_parameters()] == ["int8"]
            attributes = statement.get_attributes()
            assert [(a.name, a.type.name) for a in attributes] == [
                ("doubled", "int8"),
                ("key", "int8"),
            ]
            assert [tuple(r) for r in await statement.fetch(2)] == [(4, 2)]
            await conn.execute("CREATE SEQUENCE sq START 5")
            unread = "SELECT last_value FROM sq WHERE is_called = $1"
            assert await conn.fetchval(unread, False) == 5
        finally:
            await conn.close()

    run(scenario())


def test_copy_from_query_inlines_its_arguments(pg_url: str) -> None:
    """copy_from_query with arguments has the server quote them first: it prepares the
    query for their types, then runs ``SELECT quote_literal($1::"pg_catalog"."int8"::text)``
    and sends COPY (query) with the literals in place."""

    async def scenario() -> None:
        conn = await _connect(pg_url)
        try:
            await conn.execute("CREATE TABLE cq (id INT PRIMARY KEY, s STRING, ts TIMESTAMPTZ)")
            await conn.execute(
                "INSERT INTO cq VALUES (1, 'it''s', '2024-01-01 00:00:00+00'), (2, 'b\\c', NULL)"
            )
            out = io.BytesIO()
            query = "SELECT id, s FROM cq WHERE s = $1 OR id = ANY($2) OR ts = $3 ORDER BY id"
            when = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
            status = await conn.copy_from_query(query, "b\\c", [7], when, output=out, format="csv")
            assert status == "COPY 2"
            assert out.getvalue() == b"1,it's\n2,b\\c\n"
        finally:
            await conn.close()

    run(scenario())


def test_narrow_integer_columns_are_int4_and_int2(pg_url: str) -> None:
    """An INT4 or INT2 column is int4 or int2 on the wire, as CockroachDB sends it: the
    driver encodes and decodes 4 and 2 bytes (and refuses a value past their range)."""

    async def scenario() -> None:
        conn = await _connect(pg_url)
        try:
            await conn.execute("CREATE TABLE w (k INT PRIMARY KEY, a INT4, b INT2)")
            await conn.execute("INSERT INTO w VALUES ($1, $2, $3)", 1, 2**31 - 1, -(2**15))
            statement = await conn.prepare("SELECT a, b, a + 1 AS c FROM w WHERE a = $1")
            assert [a.type.name for a in statement.get_attributes()] == ["int4", "int2", "int8"]
            assert [p.name for p in statement.get_parameters()] == ["int4"]
            assert tuple(await statement.fetchrow(2**31 - 1)) == (2**31 - 1, -(2**15), 2**31)
            with pytest.raises(asyncpg.DataError):
                await conn.execute("UPDATE w SET b = $1", 2**15)
        finally:
            await conn.close()

    run(scenario())


def test_executemany_is_one_transaction(pg_url: str) -> None:
    """asyncpg's executemany sends every Bind and Execute before one Sync, so that, as
    in PostgreSQL's implicit transaction, all of them take effect or none does."""

    async def scenario() -> None:
        conn = await _connect(pg_url)
        try:
            await conn.execute("CREATE TABLE e (id INT PRIMARY KEY, v STRING)")
            with pytest.raises(asyncpg.UniqueViolationError):
                await conn.executemany(
                    "INSERT INTO e VALUES ($1, $2)", [(1, "a"), (2, "b"), (1, "c"), (3, "d")]
                )
            assert await conn.fetchval("SELECT count(*) FROM e") == 0
            rows = [(i, f"v{i}") for i in range(300)]
            await conn.executemany("INSERT INTO e VALUES ($1, $2)", rows)
            assert await conn.fetchval("SELECT count(*) FROM e") == 300
            await conn.executemany("UPDATE e SET v = $2 WHERE id = $1", [(1, "x"), (2, "y")])
            assert await conn.fetch("SELECT v FROM e WHERE id < 3 ORDER BY id") == [
                ("v0",),
                ("x",),
                ("y",),
            ]
            # the connection is idle after it: a transaction of its own may begin
            async with conn.transaction():
                await conn.execute("DELETE FROM e WHERE id >= $1", 100)
            assert await conn.fetchval("SELECT count(*) FROM e") == 100
        finally:
            await conn.close()

    run(scenario())


def test_a_statement_whose_columns_changed_is_prepared_again_without_the_caller_seeing_it(
    db: DB, pg_url: str
) -> None:
    # asyncpg knows PostgreSQL's refusal of such a cached plan by its routine field and
    # prepares the statement again
    async def go() -> list[list[tuple[Any, ...]]]:
        conn = await _connect(pg_url)
        try:
            await conn.execute("CREATE TABLE c (id INT PRIMARY KEY, x INT)")
            await conn.execute("INSERT INTO c VALUES (1, 1)")
            seen = [[tuple(r) for r in await conn.fetch("SELECT * FROM c")]]
            db.sql("ALTER TABLE c ADD COLUMN y STRING DEFAULT 'yy'")
            seen.append([tuple(r) for r in await conn.fetch("SELECT * FROM c")])
            db.sql("ALTER TABLE c DROP COLUMN x")
            seen.append([tuple(r) for r in await conn.fetch("SELECT * FROM c")])
            return seen
        finally:
            await conn.close()

    assert run(go()) == [[(1, 1)], [(1, 1, "yy")], [(1, "yy")]]
