"""The databases a cluster starts with (:func:`feedkv.sql.catalog.bootstrap`):
``defaultdb``, ``postgres`` and ``system``, as in CockroachDB, also given to a
catalog made before the last two existed."""

from __future__ import annotations

from feedkv import DB
from feedkv.kv.txn import Txn
from feedkv.sql import catalog
from feedkv.sql.descriptor import DatabaseDescriptor


def names(db: DB) -> list[tuple[str, str]]:
    """SHOW DATABASES's names and owners (a new session: it runs bootstrap first)."""
    return [(row[0], row[1]) for row in db.session().execute("SHOW DATABASES").rows]


def stored(db: DB) -> list[str]:
    """The databases in the catalog now, read without a session."""
    snapshot = catalog.Snapshot(db, db.now())
    return sorted(d.name for d in catalog.list_databases(snapshot))


def test_a_new_cluster_has_defaultdb_postgres_and_system(db: DB) -> None:
    assert names(db) == [("defaultdb", "root"), ("postgres", "root"), ("system", "node")]
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    snapshot = catalog.Snapshot(db, db.now())
    defaultdb = catalog.database_by_name(snapshot, catalog.DEFAULT_DATABASE)
    # the two take no id from the tables'
    assert (defaultdb.id, catalog.table_by_name(snapshot, defaultdb, "t").id) == (
        catalog.FIRST_ID,
        catalog.FIRST_ID + 1,
    )


def test_a_catalog_made_before_system_and_postgres_gets_them_once(db: DB) -> None:
    db.sql("CREATE DATABASE shop")

    def as_made_before(txn: Txn) -> None:
        for database in (catalog.SYSTEM_DATABASE, catalog.POSTGRES_DATABASE):
            found = catalog.database_by_name(txn, database)
            catalog.remove_name(txn, 0, found.name)
            catalog.remove_descriptor(txn, found.id)

    db.run_transaction(as_made_before)
    assert stored(db) == ["defaultdb", "shop"]
    catalog.bootstrap(db)
    assert names(db) == [
        ("defaultdb", "root"), ("postgres", "root"), ("shop", "root"), ("system", "node")
    ]  # fmt: skip
    db.sql("DROP DATABASE postgres")
    catalog.bootstrap(db)  # each session's first statement runs it: postgres stays dropped
    assert names(db) == [("defaultdb", "root"), ("shop", "root"), ("system", "node")]


def test_a_users_database_called_postgres_is_kept(db: DB) -> None:
    def as_made_before(txn: Txn) -> None:
        for database in (catalog.SYSTEM_DATABASE, catalog.POSTGRES_DATABASE):
            found = catalog.database_by_name(txn, database)
            catalog.remove_name(txn, 0, found.name)
            catalog.remove_descriptor(txn, found.id)
        catalog.put_database(txn, DatabaseDescriptor(catalog.allocate_id(txn), "postgres"))

    db.sql("SELECT 1")
    db.run_transaction(as_made_before)
    assert stored(db) == ["defaultdb", "postgres"]
    db.sql("CREATE TABLE postgres.kept (k INT PRIMARY KEY)")
    catalog.bootstrap(db)
    assert names(db) == [("defaultdb", "root"), ("postgres", "root"), ("system", "node")]
    assert db.sql("SELECT count(*) FROM postgres.kept").rows == [(0,)]
