"""An UPSERT (or ON CONFLICT on the primary key DO UPDATE setting every column to its
``excluded`` value) writes whole rows without reading them: the row it writes is the
same whether or not one held the key, as CockroachDB's UPSERT fast path."""

from __future__ import annotations

import threading

import pytest

from feedkv import DB
from feedkv.sql import catalog
from feedkv.sql.plan import InsertPlan
from feedkv.sql.session import prepare
from feedkv.sql.statements import Insert
from feedkv.testing.waiting import wait_until

TABLES = {
    "kv": "CREATE TABLE kv (k INT PRIMARY KEY, v STRING, n INT)",
    "indexed": "CREATE TABLE indexed (k INT PRIMARY KEY, v STRING, INDEX (v))",
    "checked": "CREATE TABLE checked (k INT PRIMARY KEY, v INT CHECK (v > 0))",
    "dec": "CREATE TABLE dec (k DECIMAL PRIMARY KEY, v STRING)",
    "pair": "CREATE TABLE pair (a INT, b INT, v STRING, PRIMARY KEY (a, b))",
    "bag": "CREATE TABLE bag (s STRING)",  # keyed by the hidden rowid
    "defk": "CREATE TABLE defk (k INT PRIMARY KEY DEFAULT 7, v STRING, n INT)",
}

BLIND = [
    ("UPSERT INTO kv VALUES ($1, $2, $3)", True),
    ("UPSERT INTO kv (n, k, v) VALUES (1, 2, 'x')", True),
    ("UPSERT INTO kv (k, v) VALUES (1, 'x')", False),  # n stays as it was
    ("UPSERT INTO kv VALUES (1, 'x')", True),  # n takes its default
    (
        "INSERT INTO kv VALUES (1, 'x', 2) ON CONFLICT (k) DO UPDATE "
        "SET v = excluded.v, n = excluded.n",
        True,
    ),
    (
        "INSERT INTO kv VALUES (1, 'x', 2) ON CONFLICT (k) DO UPDATE "
        "SET n = excluded.n, v = excluded.v",
        True,
    ),
    ("INSERT INTO kv VALUES (1, 'x', 2) ON CONFLICT (k) DO UPDATE SET v = excluded.v", False),
    (
        "INSERT INTO kv VALUES (1, 'x', 2) ON CONFLICT (k) DO UPDATE "
        "SET v = excluded.v, n = excluded.k",
        False,
    ),
    (
        "INSERT INTO kv VALUES (1, 'x', 2) ON CONFLICT (k) DO UPDATE "
        "SET v = excluded.v, n = kv.n + 1",
        False,
    ),
    (
        "INSERT INTO kv VALUES (1, 'x', 2) ON CONFLICT (k) DO UPDATE "
        "SET v = excluded.v, n = excluded.n WHERE kv.n < 5",
        False,
    ),
    ("INSERT INTO kv VALUES (1, 'x', 2) ON CONFLICT (k) DO NOTHING", False),
    ("INSERT INTO kv VALUES (1, 'x', 2)", False),
    ("UPSERT INTO indexed VALUES (1, 'x')", False),
    ("UPSERT INTO checked VALUES (1, 2)", False),
    ("UPSERT INTO dec VALUES (1.0, 'x')", False),
    (
        "INSERT INTO pair VALUES (1, 2, 'x') ON CONFLICT (b, a) DO UPDATE SET v = excluded.v",
        True,
    ),
    ("UPSERT INTO bag (s) VALUES ('x')", True),  # a new rowid: the key left to DEFAULT
    ("UPSERT INTO defk (v, n) VALUES ('x', 1)", True),
    ("UPSERT INTO defk (v) VALUES ('x')", False),  # n stays as it was
    (
        "INSERT INTO defk (v, n) VALUES ('x', 1) ON CONFLICT (k) DO UPDATE "
        "SET v = excluded.v, n = excluded.n",
        True,
    ),
]


@pytest.fixture
def tables(db: DB) -> DB:
    for statement in TABLES.values():
        db.sql(statement)
    return db


@pytest.mark.parametrize(("text", "blind"), BLIND)
def test_only_statements_that_write_whole_rows_are_blind(
    tables: DB, text: str, blind: bool
) -> None:
    ((statement, _placeholders),) = prepare(text)
    assert isinstance(statement, Insert)
    session = tables.session()
    reader = catalog.Snapshot(tables, tables.now())
    desc = session.resolve_table(reader, None, statement.table.name)
    assert InsertPlan.of(desc, statement, "defaultdb").blind is blind


def test_a_blind_upsert_replaces_inserts_and_returns_the_rows_it_wrote(tables: DB) -> None:
    tables.sql("INSERT INTO kv VALUES (1, 'one', 1), (2, 'two', 2)")
    result = tables.sql(
        "INSERT INTO kv VALUES (2, 'deux', 20), (3, 'trois', 30) ON CONFLICT (k) DO UPDATE "
        "SET v = excluded.v, n = excluded.n RETURNING k, v, n"
    )
    assert result.tag == "INSERT 0 2"
    assert result.rows == [(2, "deux", 20), (3, "trois", 30)]
    assert tables.sql("UPSERT INTO kv VALUES (1, NULL, 10)").tag == "INSERT 0 1"
    assert tables.sql("SELECT k, v, n FROM kv ORDER BY k").rows == [
        (1, None, 10),
        (2, "deux", 20),
        (3, "trois", 30),
    ]


def test_a_blind_upsert_that_leaves_the_key_to_its_default_replaces_the_row_there(
    tables: DB,
) -> None:
    tables.sql("INSERT INTO defk VALUES (7, 'seven', 1)")
    result = tables.sql("UPSERT INTO defk (v, n) VALUES ('sept', 2) RETURNING k, v, n")
    assert result.rows == [(7, "sept", 2)]
    assert tables.sql("SELECT k, v, n FROM defk").rows == [(7, "sept", 2)]
    tables.sql("UPSERT INTO bag (s) VALUES ('a'), ('a')")
    assert tables.sql("UPSERT INTO bag (s) VALUES ('b') RETURNING s").rows == [("b",)]
    assert tables.sql("SELECT s, count(*) FROM bag GROUP BY s ORDER BY s").rows == [
        ("a", 2),
        ("b", 1),
    ]
    # NB: both rows take the key's default: the later one stays, as CockroachDB's UPSERT
    tables.sql("UPSERT INTO defk (v, n) VALUES ('x', 1), ('y', 2)")
    assert tables.sql("SELECT k, v, n FROM defk").rows == [(7, "y", 2)]


def test_a_blind_upsert_of_a_key_proposed_twice_keeps_the_later_row(tables: DB) -> None:
    # CockroachDB's logic test upsert: UPSERT INTO kv VALUES (10, 11), (10, 12) counts 2
    result = tables.sql("UPSERT INTO kv VALUES (7, 'a', 1), (7, 'b', 2)")
    assert result.tag.endswith(" 2")
    assert tables.sql("SELECT k, v, n FROM kv").rows == [(7, "b", 2)]


def test_a_blind_upsert_in_a_transaction_is_seen_by_it_and_undone_by_rollback(
    tables: DB,
) -> None:
    tables.sql("INSERT INTO kv VALUES (1, 'one', 1)")
    session = tables.session()
    session.execute("BEGIN")
    session.execute("UPSERT INTO kv VALUES (1, 'uno', 11)")
    assert session.execute("SELECT v, n FROM kv WHERE k = 1").rows == [("uno", 11)]
    session.execute("ROLLBACK")
    assert tables.sql("SELECT v, n FROM kv WHERE k = 1").rows == [("one", 1)]


def test_a_blind_upsert_commits_over_a_newer_write_where_a_reading_one_holds_the_row(
    tables: DB,
) -> None:
    """Having read nothing, a blind upsert's transaction may move above a write that
    lands after it began. One that read the row locked it (CockroachDB's implicit FOR
    UPDATE): the other write waits for its commit, however long, and lands on top."""
    tables.sql("INSERT INTO kv VALUES (1, 'one', 1)")
    blind = tables.session()
    blind.execute("BEGIN")
    blind.execute(
        "INSERT INTO kv VALUES (1, 'mine', 2) ON CONFLICT (k) DO UPDATE "
        "SET v = excluded.v, n = excluded.n"
    )
    tables.sql("UPDATE kv SET v = 'theirs' WHERE k = 1")  # commits after the upsert
    blind.execute("COMMIT")
    assert tables.sql("SELECT v, n FROM kv WHERE k = 1").rows == [("mine", 2)]

    reading = tables.session()
    reading.execute("BEGIN")
    reading.execute(
        "INSERT INTO kv VALUES (1, 'mine', 2) ON CONFLICT (k) DO UPDATE "
        "SET v = excluded.v, n = kv.n + 1"
    )
    writer = threading.Thread(target=tables.sql, args=("UPDATE kv SET v = 'theirs' WHERE k = 1",))
    writer.start()
    try:
        assert tables.node is not None
        locks = tables.node.store.locks
        wait_until(lambda: locks.waiters() == 1, timeout_s=60.0, what="the UPDATE's wait")
        assert writer.is_alive()
        reading.execute("COMMIT")
    finally:
        writer.join(60.0)
    assert not writer.is_alive()
    assert tables.sql("SELECT v, n FROM kv WHERE k = 1").rows == [("theirs", 3)]
