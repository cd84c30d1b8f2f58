"""A scan reads a table in pages of whole rows: a page that ends inside a row (several
column families) holds that row back for the next page, and a row with more pairs than
a page is read whole."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.changefeed.rows import RowDecoder, Target
from feedkv.sql import catalog


@pytest.mark.parametrize("batch", [1, 2, 3, 4, 5, 7])
def test_pages_cut_inside_a_row_give_the_same_rows(db: DB, batch: int) -> None:
    db.sql(
        "CREATE TABLE t (k INT PRIMARY KEY, a STRING, b STRING, c STRING, "
        "FAMILY f0 (k, a), FAMILY f1 (b), FAMILY f2 (c))"
    )
    db.sql(
        "INSERT INTO t VALUES (1, 'a1', 'b1', 'c1'), (2, 'a2', NULL, 'c2'), "
        "(3, NULL, NULL, NULL), (4, 'a4', 'b4', NULL), (5, 'a5', 'b5', 'c5')"
    )
    ts = db.now()
    snapshot = catalog.Snapshot(db, ts)
    database = catalog.database_by_name(snapshot, "defaultdb")
    target = Target(catalog.table_by_name(snapshot, database, "t").id)

    def rows(page: int) -> list[tuple[object, ...]]:
        decoder = RowDecoder(db, [target], ts)
        return [(e.key, e.after) for e in decoder.scan_rows(target, ts, page)]

    whole = rows(1000)
    assert [key for key, _after in whole] == [(1,), (2,), (3,), (4,), (5,)]
    assert whole[1][1] == {"k": 2, "a": "a2", "b": None, "c": "c2"}
    assert rows(batch) == whole
