"""Table partitions survive their own SHOW CREATE TABLE: running its output on another
database makes a table with the same partitions (and the same spans)."""

from __future__ import annotations

from feedkv import DB
from feedkv.sql import catalog


def test_show_create_table_recreates_the_partitions(db: DB) -> None:
    db.sql(
        "CREATE TABLE e (day INT, seq INT, PRIMARY KEY (day, seq)) PARTITION BY RANGE (day) "
        "(PARTITION old VALUES FROM (MINVALUE) TO (100), PARTITION mid VALUES FROM (100) TO "
        "(200), PARTITION recent VALUES FROM (200) TO (MAXVALUE))"
    )
    ((_name, statement),) = db.sql("SHOW CREATE TABLE e").rows
    db.sql("CREATE DATABASE copy")
    db.sql(statement.replace("CREATE TABLE public.e", "CREATE TABLE copy.e", 1))

    snapshot = catalog.Snapshot(db, db.now())
    original = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), "e")
    copied = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "copy"), "e")
    assert [(p.name, p.values, p.columns) for p in copied.partitions] == [
        (p.name, p.values, p.columns) for p in original.partitions
    ]
    assert db.sql("SHOW PARTITIONS FROM TABLE copy.e").rows == [
        ("copy", "e", "old", "day", "VALUES FROM (MINVALUE) TO (100)"),
        ("copy", "e", "mid", "day", "VALUES FROM (100) TO (200)"),
        ("copy", "e", "recent", "day", "VALUES FROM (200) TO (MAXVALUE)"),
    ]
