"""Descriptor leases: statements use a leased descriptor, and a schema change commits
strictly above every commit that used the old version (see feedkv.sql.leases)."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import SQLError
from feedkv.kv.store import StoreConfig
from feedkv.server.node import Node
from feedkv.sql import catalog
from feedkv.sql.leases import Leases, prepare_change
from feedkv.testing.waiting import run_threads, wait_until
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import key_next


@pytest.fixture
def node(tmp_path: Path, store_config: StoreConfig) -> Iterator[Node]:
    with Node(tmp_path / "store", listen="127.0.0.1:0", config=store_config) as serving:
        yield serving


@pytest.fixture
def clients(node: Node) -> Iterator[tuple[DB, DB]]:
    """Two clients of one node over gRPC, each with its own leases."""
    first, second = feedkv.connect(node.url), feedkv.connect(node.url)
    yield first, second
    first.close()
    second.close()


def _descriptor_ts(db: DB, name: str) -> Timestamp:
    """When the current version of table ``name`` was written."""
    key = catalog.descriptor_key(_table_id(db, name))
    [kv] = db.scan(key, key_next(key))
    return kv.ts


def _table_id(db: DB, name: str) -> int:
    snapshot = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(snapshot, catalog.DEFAULT_DATABASE)
    return catalog.table_by_name(snapshot, database, name).id


def test_a_statement_on_a_leased_table_sends_only_its_own_batch(
    any_db: DB, count_batches: Callable[[DB], list[int]]
) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    session = any_db.session()
    session.execute("INSERT INTO t VALUES (1, 'a')")  # resolves the table's name
    session.execute("INSERT INTO t VALUES (2, 'b')")  # takes a lease
    batches = count_batches(any_db)
    session.execute("INSERT INTO t VALUES (3, 'c')")
    assert batches[0] == 1  # the commit alone: no descriptor read
    assert session.execute("SELECT v FROM t WHERE k = 3").rows == [("c",)]
    assert batches[0] == 2


def test_a_schema_change_here_drains_this_clients_own_lease(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    for k in range(3):
        any_db.sql("INSERT INTO t VALUES ($1, 'x')", k)
    any_db.sql("ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 5")
    any_db.sql("INSERT INTO t (k, v) VALUES (3, 'y')")  # the new version's default applies
    assert any_db.sql("SELECT k, c FROM t ORDER BY k").rows == [(k, 5) for k in range(4)]


def test_a_schema_change_waits_for_statements_of_another_client(
    clients: tuple[DB, DB],
) -> None:
    """Writers on one client insert while the other adds a NOT NULL column: a row written
    with the old version after the new one committed would have no value in it."""
    writer_db, changer_db = clients
    writer_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    keys = itertools.count()

    def write() -> None:
        session = writer_db.session()
        for _ in range(150):
            session.execute("INSERT INTO t (k, v) VALUES ($1, 'x')", next(keys))

    def change() -> None:
        table_id = _table_id(writer_db, "t")
        while (lease := writer_db.leases.use(table_id)) is None:
            pass  # until the writers' client holds a lease
        writer_db.leases.release(lease)
        changer_db.sql("ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 5")

    run_threads([write, write, write, change])
    rows = writer_db.sql("SELECT k, c FROM t").rows
    assert len(rows) == 450
    assert [k for k, c in rows if c != 5] == []


def test_schema_changes_finish_under_a_steady_stream_of_writers(any_db: DB) -> None:
    """Each change rewrites every row in one transaction. Writers that kept updating rows
    under it made its refresh fail on every retry, for ever; now they wait for it."""
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    any_db.sql("INSERT INTO t VALUES " + ", ".join(f"({k}, 0)" for k in range(200)))
    changed = threading.Event()
    updates: list[int] = []

    def write(first: int) -> None:
        session = any_db.session()
        keys = itertools.cycle(range(first, 200, 4))
        while not changed.is_set():
            session.execute("UPDATE t SET v = v + 1 WHERE k = $1", next(keys))
            updates.append(1)

    def change() -> None:
        while len(updates) < 20:
            pass  # until the writers are going
        try:
            any_db.sql("ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 7")
            assert any_db.sql("SELECT count(*), min(c), max(c) FROM t").rows == [(200, 7, 7)]
            any_db.sql("ALTER TABLE t DROP COLUMN c")
        finally:
            changed.set()

    run_threads([functools.partial(write, w) for w in range(4)] + [change])
    assert any_db.sql("SELECT count(*), sum(v) FROM t").rows == [(200, len(updates))]
    assert [c.name for c in catalog.table_by_id(any_db, _table_id(any_db, "t")).columns] == [
        "k",
        "v",
    ]


def test_a_holder_that_stopped_answering_delays_a_schema_change_until_its_lease_expires(
    clients: tuple[DB, DB],
) -> None:
    holder_db, changer_db = clients
    holder_db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    table_id = _table_id(holder_db, "t")
    silent = Leases(holder_db, duration_s=1.0, watch=False)  # never sees the marker
    lease = silent.use(table_id)
    assert lease is not None
    changer_db.sql("ALTER TABLE t ADD COLUMN c INT")
    assert _descriptor_ts(changer_db, "t") >= lease.expires
    silent.release(lease)
    silent.close()


def test_a_failed_schema_change_takes_back_its_marker(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    any_db.sql("INSERT INTO t VALUES (1, NULL)")
    with pytest.raises(SQLError) as raised:  # the backfill meets a NULL after the wait
        any_db.sql("ALTER TABLE t ADD COLUMN c INT NOT NULL")
    assert raised.value.code == "23502"
    _wait_for_a_lease(any_db, "t")


def test_a_rolled_back_schema_change_takes_back_its_marker(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    session = any_db.session()
    session.execute("BEGIN")
    session.execute("ALTER TABLE t ADD COLUMN c INT")
    session.execute("ROLLBACK")
    _wait_for_a_lease(any_db, "t")


def _wait_for_a_lease(db: DB, name: str) -> None:
    """No marker was left behind: the table is leased again well before a marker would
    have expired (40 s)."""
    table_id = _table_id(db, name)

    def leased() -> bool:
        lease = db.leases.use(table_id)
        if lease is None:
            return False
        db.leases.release(lease)
        return True

    wait_until(leased, timeout_s=20, what=f"a lease on {name}")


def test_statements_of_an_explicit_transaction_use_leased_descriptors(
    any_db: DB, count_batches: Callable[[DB], list[int]]
) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    session = any_db.session()
    session.execute("INSERT INTO t VALUES (1, 'a')")  # resolves the table's name
    session.execute("INSERT INTO t VALUES (2, 'b')")  # takes a lease
    batches = count_batches(any_db)
    session.execute("BEGIN")
    assert session.execute("SELECT v FROM t WHERE k = 1").rows == [("a",)]
    assert batches[0] == 1  # the row alone: no descriptor read
    session.execute("UPDATE t SET v = 'c' WHERE k = 2")
    assert batches[0] == 2
    assert session.execute("COMMIT").tag == "COMMIT"
    assert any_db.sql("SELECT v FROM t ORDER BY k").rows == [("a",), ("c",)]


def test_a_transaction_reading_below_a_leased_version_reads_the_descriptor_itself(
    any_db: DB,
) -> None:
    """The lease is of a version newer than the transaction's snapshot: its rows are of
    the version before, which the transaction reads in itself."""
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    any_db.sql("CREATE TABLE u (k INT PRIMARY KEY)")
    any_db.sql("INSERT INTO t VALUES (1, 'a')")
    old = any_db.session()
    old.execute("SELECT v FROM t WHERE k = 1")  # knows the table's id
    old.execute("BEGIN")
    old.execute("SELECT k FROM u")  # its snapshot is now
    any_db.sql("ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 5")
    table_id = _table_id(any_db, "t")
    # the new version leased (once the change's marker is gone)
    lease = wait_until(lambda: any_db.leases.use(table_id), what="a lease on t")
    any_db.leases.release(lease)
    assert lease.desc.version == 2
    result = old.execute("SELECT * FROM t")
    assert (result.columns, result.rows) == (("k", "v"), [(1, "a")])
    old.execute("COMMIT")
    assert any_db.sql("SELECT * FROM t").rows == [(1, "a", 5)]


def test_a_schema_change_after_leased_statements_of_its_transaction_commits_with_them(
    any_db: DB,
) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    session = any_db.session()
    session.execute("INSERT INTO t VALUES (1, 'a')")
    session.execute("INSERT INTO t VALUES (2, 'b')")  # takes a lease
    session.execute("BEGIN")
    session.execute("INSERT INTO t VALUES (3, 'c')")  # on the lease
    session.execute("ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 5")  # not waiting for it
    # on the new version, in the txn (c is not public until the commit, as CockroachDB's)
    session.execute("INSERT INTO t VALUES (4, 'd')")
    assert session.execute("COMMIT").tag == "COMMIT"
    assert any_db.sql("SELECT k, c FROM t ORDER BY k").rows == [(1, 5), (2, 5), (3, 5), (4, 5)]


def test_a_schema_change_does_not_wait_for_the_leases_its_own_transaction_holds(
    any_db: DB,
) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    table_id = _table_id(any_db, "t")
    leases = Leases(any_db, watch=False)
    lease = leases.use(table_id)
    assert lease is not None
    txn = any_db.transaction()
    try:
        keys = prepare_change(any_db, txn, table_id, local=leases, own={lease.key})
        assert lease.key in keys  # deleted with the new version
    finally:
        txn.rollback()
        leases.release(lease)
        leases.close()


def test_a_transaction_whose_lease_nears_its_expiry_commits_on_the_current_one(
    any_db: DB,
) -> None:
    """As if it had been open for most of its lease's duration: its deadline is the
    lease's expiry, at its own timestamp; the commit moves it to the client's current
    lease on the same version instead of failing with 40001."""
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    session = any_db.session()
    session.execute("INSERT INTO t VALUES (1, 'a')")
    session.execute("INSERT INTO t VALUES (2, 'b')")  # takes a lease
    session.execute("BEGIN")
    session.execute("UPDATE t SET v = 'c' WHERE k = 1")
    [execution] = session._executions
    [lease] = execution.leases
    stale = execution.write_txn.read_ts  # the commit cannot land below its reads
    assert stale is not None
    aged = dataclasses.replace(lease, expires=stale, refs=1, current=False)
    execution.leases = [aged]  # the old lease stays with the client, unused now
    any_db.leases.release(lease)
    txn = execution.write_txn
    txn.deadline = aged.expires
    assert session.execute("COMMIT").tag == "COMMIT"
    assert any_db.sql("SELECT v FROM t WHERE k = 1").rows == [("c",)]


def test_a_transaction_past_its_lease_on_a_replaced_version_is_refused(any_db: DB) -> None:
    """No current lease of the version it used: its deadline stays, and it retries."""
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    session = any_db.session()
    session.execute("INSERT INTO t VALUES (1, 'a')")
    session.execute("INSERT INTO t VALUES (2, 'b')")  # takes a lease
    session.execute("BEGIN")
    session.execute("UPDATE t SET v = 'c' WHERE k = 1")
    [execution] = session._executions
    [lease] = execution.leases
    older = dataclasses.replace(lease.desc, version=lease.desc.version - 1)
    stale = execution.write_txn.read_ts
    assert stale is not None
    aged = dataclasses.replace(lease, desc=older, expires=stale, refs=1, current=False)
    execution.leases = [aged]
    any_db.leases.release(lease)
    execution.write_txn.deadline = aged.expires
    with pytest.raises(SQLError) as refused:
        session.execute("COMMIT")
    assert refused.value.code == "40001"
    assert any_db.sql("SELECT v FROM t WHERE k = 1").rows == [("a",)]
