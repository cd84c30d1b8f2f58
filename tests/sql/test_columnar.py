"""Columnar copies of tables (feedkv.sql.columnar): made by a transaction's scan, kept
per gateway within a bound, brought up to each reader with the changes since, and made
anew when that cannot be done (a new descriptor version, a reader below the copy, a
delta past its limit, history collected)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.kv.api import GC, BatchRequest, Header
from feedkv.sql.columnar import (
    DEFAULT_MAX_BYTES,
    LIVE,
    MAX_BYTES_SETTING,
    ColumnarCache,
    cache_for,
    max_bytes_setting,
)
from feedkv.sql.row_codec import table_span


@pytest.fixture
def tables(db: DB) -> DB:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, g INT, a INT, s STRING, b BOOL)")
    db.sql("CREATE TABLE u (id INT PRIMARY KEY, r STRING)")
    db.sql("INSERT INTO u VALUES (0, 'zero')")
    return db


def test_deleted_and_replaced_rows_are_compacted_away(tables: DB) -> None:
    """Once most rows of a copy are dead (replaced or deleted), it is rebuilt from its
    live rows, renumbered; queries before and after agree with the reference."""
    for n in range(10):
        tables.sql("INSERT INTO t VALUES ($1, $2, $1, 'x', true)", n, n % 2)
    query = "SELECT g, count(*), sum(a), max(s) FROM t GROUP BY g ORDER BY g"
    assert tables.sql(query).rows == [(0, 5, Decimal(20), "x"), (1, 5, Decimal(25), "x")]
    desc = tables.session().resolve_table(tables.transaction(), None, "t")
    tables.sql("DELETE FROM t WHERE id < 7")
    assert tables.sql(query).rows == [(0, 1, Decimal(8), "x"), (1, 2, Decimal(16), "x")]
    copy = cache_for(tables).get(desc)
    assert copy is not None and not copy.dead and copy.table.num_rows == 3
    assert not copy.added and len(copy.keys) == 3
    tables.sql("UPDATE t SET s = 'y' WHERE id = 9")
    tables.sql("INSERT INTO t VALUES (20, 0, 1, 'z', false)")
    expected = [(0, 2, Decimal(9), "z"), (1, 2, Decimal(16), "y")]
    assert tables.sql(query).rows == expected
    tables.sql("SET vectorize = off")
    assert tables.sql(query).rows == expected


def test_a_schema_change_makes_a_new_copy(tables: DB) -> None:
    tables.sql("INSERT INTO t VALUES (1, 1, 3, 'x', true)")
    assert tables.sql("SELECT g, sum(a) FROM t GROUP BY g").rows == [(1, Decimal(3))]
    tables.sql("ALTER TABLE t ADD COLUMN c INT DEFAULT 5")
    built = cache_for(tables).built
    assert tables.sql("SELECT g, sum(c) FROM t GROUP BY g").rows == [(1, Decimal(5))]
    assert cache_for(tables).built == built + 1


def test_the_cache_holds_no_more_than_its_bound(tables: DB) -> None:
    for n in range(50):
        tables.sql("INSERT INTO t VALUES ($1, 1, $1, 'some text', true)", n)
    cache = ColumnarCache(max_bytes=0)
    session = tables.session()
    try:
        with tables.transaction() as txn:
            desc = session.resolve_table(txn, None, "t")
            rows = cache.rows_for(txn, desc)
            assert rows is not None and rows.num_rows == 50
            assert cache.get(desc) is None and cache.held_bytes() == 0
        bounded = ColumnarCache(max_bytes=1 << 20)
        with tables.transaction() as txn:
            rows = bounded.rows_for(txn, desc)
            assert rows is not None and rows.num_rows == 50
            held = bounded.get(desc)
            assert held is not None and 0 < bounded.held_bytes() == held.size <= 1 << 20
    finally:
        session.close()


def test_a_transaction_reading_below_the_copy_reads_its_own_snapshot(tables: DB) -> None:
    """A copy newer than the transaction's read is not used for it (nor replaced)."""
    tables.sql("INSERT INTO t VALUES (1, 1, 3, 'x', true)")
    query = "SELECT g, count(*), sum(a) FROM t GROUP BY g"
    early = tables.session()
    try:
        early.execute("BEGIN")
        assert early.execute("SELECT r FROM u WHERE id = 0").rows == [("zero",)]
        tables.sql("INSERT INTO t VALUES (2, 1, 4, 'y', true)")
        assert tables.sql(query).rows == [(1, 2, Decimal(7))]  # a copy above early's read
        copy = cache_for(tables).get(early.resolve_table(tables.transaction(), None, "t"))
        assert copy is not None
        assert early.execute(query).rows == [(1, 1, Decimal(3))]
        again = cache_for(tables).get(early.resolve_table(tables.transaction(), None, "t"))
        assert again is not None and again.as_of >= copy.as_of
        early.execute("COMMIT")
    finally:
        early.close()


def test_a_delta_past_its_limit_copies_the_table_anew(tables: DB) -> None:
    tables.sql("INSERT INTO t VALUES (1, 1, 3, 'x', true)")
    query = "SELECT count(*), sum(a) FROM t"
    assert tables.sql(query).rows == [(1, Decimal(3))]
    cache = cache_for(tables)
    built, advanced = cache.built, cache.advanced
    # NB: statements of fewer than BULK_ROWS rows each: no background build
    tables.sql("BEGIN")
    tables.sql("INSERT INTO t SELECT i, 2, 1, 'y', false FROM generate_series(2, 600) AS g(i)")
    tables.sql("INSERT INTO t SELECT i, 2, 1, 'y', false FROM generate_series(601, 1200) AS g(i)")
    tables.sql("COMMIT")
    assert tables.sql(query).rows == [(1200, Decimal(3 + 1199))]
    assert (cache.built, cache.advanced) == (built + 1, advanced)


def test_history_gone_below_the_copy_copies_the_table_anew(tables: DB) -> None:
    tables.sql("INSERT INTO t VALUES (1, 1, 3, 'x', true)")
    query = "SELECT count(*), sum(a) FROM t"
    assert tables.sql(query).rows == [(1, Decimal(3))]
    tables.sql("UPDATE t SET a = 4 WHERE id = 1")
    desc = tables.session().resolve_table(tables.transaction(), None, "t")
    span = table_span(desc.id)
    tables.transport.send(BatchRequest(Header(), (GC(span, tables.now()),)))
    cache = cache_for(tables)
    built = cache.built
    assert tables.sql(query).rows == [(1, Decimal(4))]
    assert cache.built == built + 1


def test_rows_a_transaction_writes_where_its_copy_read_are_seen_after(tables: DB) -> None:
    """A transaction that made or moved a copy may commit its writes at the very
    timestamp it read at: the next reader sees them (the copy is as of just below)."""
    session = tables.session()
    try:
        for n in range(3):
            session.execute("BEGIN")
            session.execute("SELECT count(*) FROM t")
            session.execute("INSERT INTO t VALUES ($1, 1, 1, 'x', true)", n)
            session.execute("COMMIT")
        assert tables.sql("SELECT count(*), sum(a) FROM t").rows == [(3, Decimal(3))]
    finally:
        session.close()


def test_the_cluster_setting_bounds_the_cache(tables: DB) -> None:
    assert max_bytes_setting(tables) == DEFAULT_MAX_BYTES
    shown = tables.sql(f"SHOW CLUSTER SETTING {MAX_BYTES_SETTING}").rows
    assert shown == [(f"{DEFAULT_MAX_BYTES >> 20}MiB",)]
    tables.sql(f"SET CLUSTER SETTING {MAX_BYTES_SETTING} = '1KiB'")
    assert max_bytes_setting(tables) == 1024
    with pytest.raises(SQLError) as caught:
        tables.sql(f"SET CLUSTER SETTING {MAX_BYTES_SETTING} = 'lots'")
    assert caught.value.code == "22023"
    tables.sql("INSERT INTO t VALUES (1, 1, 3, 'x', true)")
    tables.sql("SELECT count(*) FROM t")
    cache = cache_for(tables)
    assert cache.held_bytes() > 0
    cache.bound(max_bytes_setting(tables))  # what the gateway does within 10 s
    assert cache.held_bytes() <= 1024
    cache.bound(0)
    assert cache.held_bytes() == 0
    tables.sql(f"RESET CLUSTER SETTING {MAX_BYTES_SETTING}")
    assert max_bytes_setting(tables) == DEFAULT_MAX_BYTES


def test_a_copy_marks_its_dead_rows_for_a_reader_that_filters_as_it_reads(tables: DB) -> None:
    """After writes, a copy holds replaced and deleted rows as dead ones: ``marked``
    flags them (``LIVE``) without copying the rows, and a join over two such copies,
    which DuckDB filters as it reads, answers as the reference."""
    for n in range(20):
        tables.sql("INSERT INTO t VALUES ($1, $2, $1, 'x', true)", n, n % 4)
    tables.sql("INSERT INTO u SELECT i, 'r' || (i % 2)::STRING FROM generate_series(1, 3) AS s(i)")
    query = "SELECT u.r, count(*), sum(t.a) FROM t JOIN u ON t.g = u.id GROUP BY u.r ORDER BY u.r"
    assert tables.sql(query).rows == [
        ("r0", 5, Decimal(50)),
        ("r1", 10, Decimal(100)),
        ("zero", 5, Decimal(40)),
    ]
    tables.sql("UPDATE t SET a = a + 100 WHERE id < 4")
    tables.sql("DELETE FROM t WHERE id = 6")
    tables.sql("UPDATE u SET r = 'r9' WHERE id = 3")
    rows = tables.sql(query).rows
    assert rows == [
        ("r0", 4, Decimal(144)),
        ("r1", 5, Decimal(145)),
        ("r9", 5, Decimal(155)),
        ("zero", 5, Decimal(140)),
    ]
    copy = cache_for(tables).get(tables.session().resolve_table(tables.transaction(), None, "t"))
    assert copy is not None and len(copy.dead) == 5
    marked = copy.marked()
    assert marked.num_rows == copy.table.num_rows == 24
    live = marked[LIVE].to_pylist()
    assert [n for n, flag in enumerate(live) if not flag] == sorted(copy.dead)
    assert copy.rows().equals(marked.filter(marked[LIVE]).drop_columns([LIVE]))
    tables.sql("SET vectorize = off")
    assert tables.sql(query).rows == rows


def test_rows_changed_one_by_one_are_kept_in_few_chunks(tables: DB) -> None:
    """Each delta appends the rows it changed; many small deltas do not leave the copy
    in as many small chunks (which DuckDB reads slowly): the appended rows are joined
    into one chunk now and then, and the answers stay the reference's."""
    tables.sql("INSERT INTO t SELECT i, i % 3, i, 'x', true FROM generate_series(0, 99) AS s(i)")
    query = "SELECT g, count(*), sum(a) FROM t GROUP BY g ORDER BY g"
    tables.sql(query)
    desc = tables.session().resolve_table(tables.transaction(), None, "t")
    cache = cache_for(tables)
    chunks = []
    for n in range(40):
        tables.sql("UPDATE t SET a = a + 1000 WHERE id = $1", n)
        tables.sql(query)
        copy = cache.get(desc)
        assert copy is not None
        chunks.append(copy.table.column(0).num_chunks)
    assert copy.table.num_rows == 140 and len(copy.dead) == 40
    assert max(chunks) <= len(copy.table.slice(0, 100).column(0).chunks) + 17
    assert chunks[-1] < chunks[15]  # joined meanwhile
    rows = tables.sql(query).rows
    assert rows == [
        (g, len(of_g), Decimal(sum(of_g) + 1000 * len([i for i in of_g if i < 40])))
        for g in range(3)
        if (of_g := list(range(g, 100, 3)))
    ]
    tables.sql("SET vectorize = off")
    assert tables.sql(query).rows == rows
