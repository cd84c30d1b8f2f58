"""Descending key columns in the KV layer: a PRIMARY KEY (a DESC) table's rows and a
(a DESC, b) index's entries are stored in descending order of ``a`` (the key bytes
sort that way), decode back to their values (a changefeed's too), and EXPLAIN writes
their spans in key order, as CockroachDB does."""

from __future__ import annotations

from feedkv import DB
from feedkv.changefeed.sinkless import FeedResult
from feedkv.sql import catalog
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.indexes import index_span, primary_key_of
from feedkv.sql.row_codec import decode_row_key, row_split_key, table_span


def _table(db: DB, name: str) -> TableDescriptor:
    reader = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(reader, "defaultdb")
    return catalog.table_by_name(reader, database, name)


def test_primary_key_rows_are_stored_from_the_largest_value(db: DB) -> None:
    db.sql("CREATE TABLE t (a INT, s STRING, v INT, PRIMARY KEY (a DESC, s DESC))")
    db.sql("INSERT INTO t VALUES (1, 'a', 0), (-7, 'b', 0), (300, 'c', 0), (1, 'ab', 0)")
    desc = _table(db, "t")
    span = table_span(desc.id)
    keys = [kv.key for kv in db.scan(span.start, span.end)]
    assert keys == sorted(keys)
    assert [decode_row_key(desc, key)[0] for key in keys] == [
        (300, "c"),
        (1, "ab"),
        (1, "a"),
        (-7, "b"),
    ]
    # a split point found inside a row still falls on its start
    assert all(row_split_key(key) == decode_row_key(desc, key)[2] for key in keys)


def test_a_descending_index_stores_its_entries_from_the_largest_value(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, a INT, b STRING)")
    db.sql("CREATE INDEX t_ab ON t (a DESC, b)")
    db.sql("INSERT INTO t VALUES (1, 10, 'x'), (2, 20, 'b'), (3, NULL, 'z'), (4, 20, 'a')")
    desc = _table(db, "t")
    index = desc.index("t_ab")
    assert index is not None and index.descending == (True, False)
    span = index_span(desc.id, index.id)
    entries = db.scan(span.start, span.end)
    # a from the largest (b ascending within), NULL last, as ORDER BY a DESC, b gives
    assert [primary_key_of(desc, kv.value) for kv in entries] == [[4], [2], [1], [3]]
    assert [tuple(r) for r in db.sql("SELECT k FROM t@t_ab WHERE a >= 20").rows] == [(2,), (4,)]


def test_explain_writes_a_descending_columns_span_in_key_order(db: DB) -> None:
    db.sql("CREATE TABLE t (a INT, PRIMARY KEY (a DESC))")
    db.sql("CREATE TABLE s (k INT PRIMARY KEY, a INT, INDEX s_a (a DESC))")
    spans = [
        line.strip()
        for sql in ("SELECT a FROM t WHERE a > 1", "SELECT k FROM s WHERE a > 5 AND a <= 9")
        for (line,) in db.sql(f"EXPLAIN {sql}").rows
        if "spans" in line
    ]
    assert spans == ["spans: [ - /2]", "spans: [/9 - /6]"]


def test_a_changefeed_decodes_descending_and_enum_keys(db: DB) -> None:
    db.sql("CREATE TYPE size AS ENUM ('s', 'l')")
    db.sql("ALTER TYPE size ADD VALUE 'm' BEFORE 'l'")
    db.sql("CREATE TABLE shirts (sz size, n INT, PRIMARY KEY (sz DESC, n))")
    db.sql("INSERT INTO shirts VALUES ('m', 2), ('l', 1), ('s', 3)")
    result = db.sql("EXPERIMENTAL CHANGEFEED FOR shirts")
    assert isinstance(result, FeedResult)
    keys = []
    try:
        while len(keys) < 3:
            row = result.poll(30)
            assert row is not None, "the changefeed ended"
            if row[0] is not None:
                keys.append(row[1])
    finally:
        result.close()
    # the initial scan reads the rows in key order: the largest label first
    assert keys == ['["l", 1]', '["m", 2]', '["s", 3]']
