"""Cutting one range's initial scan into several Spark tasks (no Spark here: a real
node on loopback, as the tasks see it)."""

from __future__ import annotations

import itertools

from feedkv import DB
from feedkv.spark.rows import connection
from feedkv.spark.source import scan_cuts
from feedkv.sql import catalog
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.row_codec import decode_row_key, table_span


def descriptor(db: DB, name: str) -> TableDescriptor:
    snapshot = catalog.Snapshot(db, db.now())
    return catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), name)


def test_a_scan_is_cut_at_row_starts_into_parts_of_similar_size(db: DB) -> None:
    db.sql("CREATE TABLE c (id INT PRIMARY KEY, a STRING, b INT, FAMILY fa (id, a), FAMILY fb (b))")
    for lo in range(0, 3000, 500):
        values = ", ".join(f"({i}, 'v{i}', {i})" for i in range(lo, lo + 500))
        db.sql(f"INSERT INTO c VALUES {values}")
    desc = descriptor(db, "c")
    span, ts = table_span(desc.id), db.now()
    assert len([r for r in db.ranges() if r.span.start < span.end and span.start < r.span.end]) == 1

    cuts = scan_cuts(db.serving_url(), span, ts, 4)

    assert len(cuts) == 3 and cuts == sorted(set(cuts))
    edges = [span.start, *cuts, span.end]
    rows_per_part = []
    for start, end in itertools.pairwise(edges):
        kvs = connection(db.serving_url()).scan(start, end, as_of=ts)
        ids = {decode_row_key(desc, kv.key)[0][0] for kv in kvs}
        assert len(kvs) == 2 * len(ids)  # both families of every row: no row is split
        rows_per_part.append(len(ids))
    assert sum(rows_per_part) == 3000
    assert all(600 <= n <= 900 for n in rows_per_part), rows_per_part


def test_an_empty_table_or_one_part_needs_no_cut(db: DB) -> None:
    db.sql("CREATE TABLE e (id INT PRIMARY KEY)")
    span = table_span(descriptor(db, "e").id)
    assert scan_cuts(db.serving_url(), span, db.now(), 4) == []
    db.sql("INSERT INTO e VALUES (1), (2)")
    assert scan_cuts(db.serving_url(), span, db.now(), 1) == []
