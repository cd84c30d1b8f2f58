"""TableHistory answers a validator's questions as the SQL readers do, from one export."""

from __future__ import annotations

from pathlib import Path

import feedkv
from feedkv.testing.changefeed_validator import sql_row_reader, sql_table_reader
from feedkv.testing.table_history import TableHistory


def test_every_row_and_table_as_of_every_version_match_the_sql_readers(tmp_path: Path) -> None:
    db = feedkv.connect(tmp_path / "store")
    try:
        since = db.now()
        db.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING, price DECIMAL(10,2), ok BOOL)")
        stamps = [db.now()]
        for statement in (
            "INSERT INTO t VALUES (1, 'tea', 1.50, true), (2, 'cake', 3.00, NULL)",
            "UPDATE t SET price = 2.25 WHERE id = 1",
            "DELETE FROM t WHERE id = 2",
            "INSERT INTO t VALUES (2, 'jam', NULL, false), (3, NULL, 0.10, true)",
            "UPSERT INTO t VALUES (3, 'bun', 0.20, true)",
        ):
            db.sql(statement)
            stamps.append(db.now())
        history = TableHistory(db, "t", since, stamps[-1])
        rows, tables = sql_row_reader(db, "t"), sql_table_reader(db, "t")
        seen = []
        for ts in stamps:
            assert history.table_at("t", ts) == tables("t", ts)
            for key in (1, 2, 3, 4):
                assert history.row_at("t", [key], ts) == rows("t", [key], ts)
            seen.append(history.table_at("t", ts))
        assert seen[0] == {} and seen[3].keys() == {(1,)}  # the deletion is seen
        assert seen[-1][(3,)]["name"] == "bun"
    finally:
        db.close()
