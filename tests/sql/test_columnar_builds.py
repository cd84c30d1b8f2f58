"""Background builds of columnar copies (feedkv.sql.columnar.ColumnarCache.prefetch):
a bulk write's commit has the gateway copy the table before an analytic query asks (once
a run of them settled); a query arriving during the build waits for it (cancellably) and
reads the rows at its own timestamp; the builder thread ends with its node."""

from __future__ import annotations

import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import StoreConfig
from feedkv.sql.columnar import BULK_ROWS, ColumnarCache, cache_for
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.interrupt import Interrupt, QueryCanceled
from feedkv.testing.waiting import wait_until

BUILDER = "feedkv-columnar-builder"
QUERY = "SELECT g, count(*), sum(a) FROM t GROUP BY g ORDER BY g"


@pytest.fixture
def tables(db: DB) -> DB:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, g INT, a INT, s STRING)")
    return db


def table(db: DB) -> TableDescriptor:
    return db.session().resolve_table(db.transaction(), None, "t")


def insert(db: DB, low: int, high: int) -> None:
    """Rows ``low..high`` (one statement): ``g`` is id % 3, ``a`` is id."""
    db.sql(f"INSERT INTO t SELECT i, i % 3, i, 'x' FROM generate_series({low}, {high}) AS s(i)")


def expected(ids: range) -> list[tuple[Any, ...]]:
    return [
        (g, len(ids[g::3]), Decimal(sum(ids[g::3])))
        for g in range(3)
        if ids[g::3]  # NB: ids starts at a multiple of 3
    ]


def copied(db: DB) -> bool:
    cache = cache_for(db)
    desc = table(db)
    return cache.get(desc) is not None and not cache.building(desc.id)


def test_a_large_insert_has_its_table_copied_before_the_first_query(tables: DB) -> None:
    insert(tables, 0, BULK_ROWS - 2)  # one row short: no build
    cache = cache_for(tables)
    assert not cache.building(table(tables).id) and cache.prefetched == 0
    insert(tables, BULK_ROWS - 1, 2 * BULK_ROWS + 1)
    wait_until(lambda: copied(tables), what="the background copy")
    built = cache.built
    assert tables.sql(QUERY).rows == expected(range(2 * BULK_ROWS + 2))
    assert cache.built == built  # the query found the copy made
    # a write after the build: the next query brings the copy up to date with it
    advanced = cache.advanced
    tables.sql("UPDATE t SET a = a + 1 WHERE id < 3")
    tables.sql("DELETE FROM t WHERE id = 5")
    rows = tables.sql(QUERY).rows
    ids = [i for i in range(2 * BULK_ROWS + 2) if i != 5]
    assert rows == [
        (g, len(of_g), Decimal(sum(of_g) + 1))
        for g in range(3)
        if (of_g := [i for i in ids if i % 3 == g])
    ]
    assert (cache.built, cache.advanced) == (built, advanced + 1)
    tables.sql("SET vectorize = off")
    assert tables.sql(QUERY).rows == rows


def test_a_run_of_bulk_writes_is_copied_once_after_it(tables: DB) -> None:
    """Each bulk statement asks for the copy, but the build waits for the table to
    settle: a load of many statements is copied once, not once a statement."""
    desc = table(tables)
    cache = ColumnarCache(db=tables)
    try:
        for low in range(0, 5 * BULK_ROWS, BULK_ROWS):
            insert(tables, low, low + BULK_ROWS - 1)
            cache.prefetch(desc.id)  # as each statement's commit does
        wait_until(lambda: cache.prefetched == 1 and not cache.building(desc.id), what="a build")
        assert (cache.built, cache.advanced) == (1, 0)
        copy = cache.get(desc)
        assert copy is not None and copy.live == 5 * BULK_ROWS
    finally:
        cache.close()


def test_a_bulk_write_in_an_explicit_transaction_is_copied_at_commit_only(
    tables: DB,
) -> None:
    cache = cache_for(tables)
    tables.sql("BEGIN")
    insert(tables, 0, BULK_ROWS)
    tables.sql("ROLLBACK")
    assert not cache.building(table(tables).id) and cache.prefetched == 0
    tables.sql("BEGIN")
    insert(tables, 0, BULK_ROWS)
    assert not cache.building(table(tables).id) and cache.prefetched == 0
    tables.sql("COMMIT")
    wait_until(lambda: copied(tables), what="the background copy")
    assert tables.sql(QUERY).rows == expected(range(BULK_ROWS + 1))


def test_a_copy_from_stdin_has_its_table_copied_before_the_first_query(tables: DB) -> None:
    with psycopg.connect(tables.serve_sql(), autocommit=True) as conn:
        with conn.cursor() as cur, cur.copy("COPY t FROM STDIN") as out:
            out.write("".join(f"{i}\t{i % 3}\t{i}\tx\n" for i in range(3 * BULK_ROWS)))
        wait_until(lambda: copied(tables), what="the background copy")
        built = cache_for(tables).built
        assert conn.execute(QUERY).fetchall() == expected(range(3 * BULK_ROWS))
        assert cache_for(tables).built == built


def test_an_import_has_its_table_copied_before_the_first_query(tables: DB, tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("".join(f"{i},{i % 3},{i},x\n" for i in range(2 * BULK_ROWS)))
    assert tables.sql(f"IMPORT INTO t CSV DATA ('file://{csv}')").tag == f"IMPORT {2 * BULK_ROWS}"
    wait_until(lambda: copied(tables), what="the background copy")
    built = cache_for(tables).built
    assert tables.sql(QUERY).rows == expected(range(2 * BULK_ROWS))
    assert cache_for(tables).built == built


def test_a_schema_change_drops_a_background_copy(tables: DB) -> None:
    insert(tables, 0, BULK_ROWS)
    wait_until(lambda: copied(tables), what="the background copy")
    tables.sql("ALTER TABLE t ADD COLUMN c INT DEFAULT 5")
    cache = cache_for(tables)
    assert cache.get(table(tables)) is None
    built = cache.built
    rows = tables.sql("SELECT g, sum(c) FROM t GROUP BY g ORDER BY g").rows
    assert rows == [(g, Decimal(5 * len(range(g, BULK_ROWS + 1, 3)))) for g in range(3)]
    assert cache.built == built + 1


class Paused:
    """A builder knob that holds the build between its pages until released."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> None:
        self.reached.set()
        assert self.release.wait(30), "the test never released the build"


def start_query(
    cache: ColumnarCache, db: DB, desc: TableDescriptor, check: Any
) -> tuple[threading.Thread, list[Any]]:
    """Read the rows of ``desc`` through ``cache`` on a thread of its own, in a new
    transaction (its timestamp above everything written so far)."""
    out: list[Any] = []
    txn = db.transaction()
    db.session().resolve_table(txn, None, "t")  # NB: the transaction's timestamp is now taken

    def run() -> None:
        try:
            out.append(cache.rows_for(txn, desc, check))
        except QueryCanceled as exc:
            out.append(exc)
        finally:
            txn.rollback()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_a_query_during_a_build_waits_for_it_and_reads_at_its_own_timestamp(
    tables: DB,
) -> None:
    insert(tables, 0, 3 * BULK_ROWS - 1)  # more than one page
    paused = Paused()
    cache = ColumnarCache(db=tables, between_pages=paused)
    desc = table(tables)
    try:
        cache.prefetch(desc.id)
        assert paused.reached.wait(30)
        tables.sql("INSERT INTO t VALUES (-3, 0, 100, 'late')")  # above the build's reads
        query, out = start_query(cache, tables, desc, Interrupt().check)
        wait_until(lambda: cache.waited == 1, what="the query to wait for the build")
        paused.release.set()
        query.join(30)
        [rows] = out
        assert rows is not None and rows.num_rows == 3 * BULK_ROWS + 1
        assert (cache.built, cache.advanced) == (1, 1)  # the build, and the late row
        by_id = dict(zip(rows["c1"].to_pylist(), rows["c3"].to_pylist(), strict=True))
        assert by_id[-3] == 100 and by_id[5] == 5
    finally:
        paused.release.set()
        cache.close()


def test_a_query_waiting_for_a_build_is_cancelled_by_its_interrupt(tables: DB) -> None:
    insert(tables, 0, 3 * BULK_ROWS - 1)
    paused = Paused()
    cache = ColumnarCache(db=tables, between_pages=paused)
    desc = table(tables)
    try:
        cache.prefetch(desc.id)
        assert paused.reached.wait(30)
        interrupt = Interrupt()
        query, out = start_query(cache, tables, desc, interrupt.check)
        wait_until(lambda: cache.waited == 1, what="the query to wait for the build")
        interrupt.cancel()
        query.join(30)
        [error] = out
        assert isinstance(error, QueryCanceled) and error.code == "57014"
        paused.release.set()
        wait_until(lambda: cache.get(desc) is not None, what="the build to end")
        assert cache.built == 1
    finally:
        paused.release.set()
        cache.close()


def test_closing_the_cache_stops_a_build_midway(tables: DB) -> None:
    insert(tables, 0, 3 * BULK_ROWS - 1)
    paused = Paused()
    cache = ColumnarCache(db=tables, between_pages=paused)
    desc = table(tables)
    before = set(threading.enumerate())
    cache.prefetch(desc.id)
    assert paused.reached.wait(30)
    [builder] = [t for t in threading.enumerate() if t.name == BUILDER and t not in before]
    closing = threading.Thread(target=cache.close)
    closing.start()
    wait_until(lambda: cache.closed, what="the cache to close")
    paused.release.set()
    closing.join(30)
    assert not closing.is_alive()
    assert not builder.is_alive()
    assert cache.get(desc) is None and cache.built == 0
    cache.prefetch(desc.id)  # closed: nothing starts
    assert not cache.building(desc.id)


def test_a_table_past_the_bound_is_not_built_in_the_background(tables: DB) -> None:
    insert(tables, 0, 3 * BULK_ROWS - 1)
    desc = table(tables)
    small = ColumnarCache(max_bytes=10_000, db=tables)
    nothing = ColumnarCache(max_bytes=0, db=tables)
    try:
        small.prefetch(desc.id)
        wait_until(lambda: small.prefetched == 1, what="the build to give up")
        assert small.get(desc) is None and small.built == 0 and small.held_bytes() == 0
        nothing.prefetch(desc.id)  # a bound of 0 keeps nothing: no build starts
        assert not nothing.building(desc.id) and nothing.prefetched == 0
    finally:
        small.close()
        nothing.close()


def test_a_node_stops_its_builder_thread(tmp_path: Path, store_config: StoreConfig) -> None:
    db = feedkv.connect(tmp_path / "store", config=store_config, changefeed_runner="thread")
    try:
        db.sql("CREATE TABLE t (id INT PRIMARY KEY, g INT, a INT, s STRING)")
        before = {t for t in threading.enumerate() if t.name == BUILDER}
        insert(db, 0, BULK_ROWS)
        wait_until(lambda: copied(db), what="the background copy")
        mine = [t for t in threading.enumerate() if t.name == BUILDER and t not in before]
        assert len(mine) == 1 and mine[0].is_alive()
    finally:
        db.close()
    assert not mine[0].is_alive()
