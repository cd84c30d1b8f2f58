"""Secondary indexes: kept in the row's transaction under their own prefix, read by the
planner for equality and range lookups, and never seen by a changefeed."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql import catalog
from feedkv.sql.indexes import table_indexes_span
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

QUERIES = [
    "SELECT k FROM t WHERE a = {x} ORDER BY k",
    "SELECT k FROM t WHERE a = {x} AND b = '{s}' ORDER BY k",
    "SELECT k FROM t WHERE a > {x} ORDER BY k",
    "SELECT k FROM t WHERE a >= {x} AND a < {y} ORDER BY k",
    "SELECT k FROM t WHERE a BETWEEN {x} AND {y} ORDER BY k",
    "SELECT k FROM t WHERE a = {x} OR a IS NULL ORDER BY k",
    "SELECT k FROM t WHERE a = NULL",
    "SELECT k FROM t WHERE a = 1.5",
    "SELECT count(*) FROM t WHERE b = '{s}'",
    "SELECT k FROM t WHERE b > '{s}' AND a < {y} ORDER BY k",
]


def _table_id(db: DB, name: str) -> int:
    reader = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(reader, "defaultdb")
    return catalog.table_by_name(reader, database, name).id


def _rows(db: DB, sql: str) -> list[tuple[object, ...]]:
    return [tuple(r) for r in db.sql(sql)]


def _answers(db: DB, rng: random.Random) -> list[list[tuple[object, ...]]]:
    out = []
    for _ in range(3):
        x, y = sorted(rng.randrange(-2, 12) for _ in range(2))
        s = rng.choice("pqrs")
        out.extend(_rows(db, q.format(x=x, y=y, s=s)) for q in QUERIES)
    return out


def test_lookups_through_an_index_give_the_rows_a_scan_gives(db: DB) -> None:
    rng = random.Random(46)
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, a INT, b STRING, c INT)")
    for k in range(120):
        a = rng.choice([None, *range(10)])
        db.sql("INSERT INTO t VALUES ($1, $2, $3, $4)", k, a, rng.choice("pqrs"), k % 3)
    scanned = _answers(db, random.Random(1))
    db.sql("CREATE INDEX t_a ON t (a)")
    db.sql("CREATE INDEX t_b_a ON t (b, a) STORING (c)")
    assert _answers(db, random.Random(1)) == scanned
    # Writes keep the entries right: what a scan of the table says, the index says.
    db.sql("UPDATE t SET a = a + 1 WHERE a = 3")
    db.sql("DELETE FROM t WHERE a = 5")
    db.sql("UPDATE t SET k = k + 1000 WHERE a = 7")
    db.sql("UPSERT INTO t VALUES (1, 9, 'p', 0), (500, 9, 'q', 1)")
    indexed = _answers(db, random.Random(2))
    db.sql("DROP INDEX t@t_a")
    db.sql("DROP INDEX t_b_a")
    assert _answers(db, random.Random(2)) == indexed
    span = table_indexes_span(_table_id(db, "t"))
    assert db.scan(span.start, span.end) == []  # DROP INDEX left no entry behind


def test_the_planner_reads_rows_through_the_index(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, a INT)")
    db.sql("INSERT INTO t VALUES (1, 10), (2, 20), (3, 20)")
    db.sql("CREATE INDEX t_a ON t (a)")
    assert _rows(db, "SELECT k FROM t WHERE a = 20") == [(2,), (3,)]
    # NB: take one entry out behind SQL's back: a lookup by the index no longer finds
    # its row, a scan of the table (no constraint on a) still does
    span = table_indexes_span(_table_id(db, "t"))
    entries = db.scan(span.start, span.end)
    assert len(entries) == 3
    db.delete(entries[-1].key)  # a = 20, k = 3
    assert _rows(db, "SELECT k FROM t WHERE a = 20") == [(2,)]
    assert _rows(db, "SELECT k FROM t WHERE a + 0 = 20") == [(2,), (3,)]
    assert _rows(db, "SELECT k FROM t@t_a WHERE a > 15") == [(2,)]
    with pytest.raises(SQLError) as caught:
        db.sql("SELECT k FROM t@nosuch")
    assert caught.value.code == "42704"


def test_entries_are_written_in_the_rows_transaction(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, u STRING UNIQUE)")
    span = table_indexes_span(_table_id(db, "t"))
    session = db.session()
    session.execute("BEGIN")
    session.execute("INSERT INTO t VALUES (1, 'x'), (2, 'y')")
    session.execute("ROLLBACK")
    assert db.scan(span.start, span.end) == []
    session.execute("BEGIN")
    session.execute("INSERT INTO t VALUES (1, 'x'), (2, 'y')")
    with pytest.raises(SQLError) as caught:
        session.execute("INSERT INTO t VALUES (3, 'x')")
    assert caught.value.code == "23505"
    session.execute("ROLLBACK")
    db.sql("INSERT INTO t VALUES (1, 'x'), (2, 'y')")
    assert len(db.scan(span.start, span.end)) == 2
    db.sql("ALTER TABLE t ADD COLUMN n INT DEFAULT 7")
    with pytest.raises(SQLError) as caught:
        db.sql("CREATE UNIQUE INDEX t_n ON t (n)")  # two rows have n = 7
    assert caught.value.code == "23505"
    assert "t_n" in str(caught.value)
    assert len(db.scan(span.start, span.end)) == 2  # the failed backfill wrote nothing
    assert {r[1] for r in db.sql("SHOW INDEXES FROM t")} == {"t_pkey", "t_u_key"}


def test_a_changefeed_on_an_indexed_table_emits_only_its_rows(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, a INT UNIQUE, b STRING, INDEX t_b (b))")
    db.sql("INSERT INTO t VALUES (1, 10, 'x'), (2, 20, 'y')")
    out = tmp_path / "out"
    db.sql(
        f"CREATE CHANGEFEED FOR t INTO 'file://{out}' WITH updated, "
        "resolved='0s', min_checkpoint_frequency='0s'"
    )
    db.sql("UPDATE t SET a = 11, b = 'z' WHERE k = 1")
    db.sql("INSERT INTO t VALUES (3, 30, 'w')")
    db.sql("DELETE FROM t WHERE k = 2")
    last = db.now()

    def resolved_past() -> bool:
        marks = sorted(p for p in out.rglob("*.RESOLVED"))
        return (
            bool(marks) and Timestamp.parse(json.loads(marks[-1].read_text())["resolved"]) >= last
        )

    wait_until(resolved_past, timeout_s=30, what="a resolved marker past the last write")
    rows = [
        json.loads(line)
        for path in sorted(out.rglob("*.ndjson"))
        for line in path.read_text().splitlines()
    ]
    assert rows
    assert {tuple(r["key"]) for r in rows} == {(1,), (2,), (3,)}
    for row in rows:
        assert row["after"] is None or set(row["after"]) == {"k", "a", "b"}
    final = {r["key"][0]: r["after"] for r in sorted(rows, key=lambda r: r["updated"])}
    assert final == {1: {"k": 1, "a": 11, "b": "z"}, 2: None, 3: {"k": 3, "a": 30, "b": "w"}}


def test_concurrent_inserts_of_one_unique_value_leave_one_row(any_db: DB) -> None:
    any_db.sql("CREATE TABLE u (k INT PRIMARY KEY, email STRING UNIQUE)")
    outcomes: list[str] = []
    lock = threading.Lock()

    def insert(k: int) -> None:
        session = any_db.session()
        try:
            session.execute("INSERT INTO u VALUES ($1, 'same@x')", k)
            outcome = "ok"
        except SQLError as exc:
            outcome = exc.code
        with lock:
            outcomes.append(outcome)

    workers = [threading.Thread(target=insert, args=(k,)) for k in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert not worker.is_alive(), "an INSERT never returned"
    assert outcomes.count("ok") == 1, outcomes
    assert set(outcomes) <= {"ok", "23505", "40001"}, outcomes
    assert _rows(any_db, "SELECT count(*) FROM u") == [(1,)]
    span = table_indexes_span(_table_id(any_db, "u"))
    assert len(any_db.scan(span.start, span.end)) == 1


JOINS = [
    "SELECT o.id, c.name FROM o JOIN c ON o.cust {eq} c.id ORDER BY o.id",
    "SELECT o.id, c.name FROM o LEFT JOIN c ON c.id {eq} o.cust ORDER BY o.id",
    "SELECT o.id, c.id FROM o JOIN c ON o.code {eq} c.code WHERE o.id < 40 ORDER BY 1, 2",
    "SELECT c.name, count(o.id) FROM o JOIN c ON o.cust {eq} c.id GROUP BY c.name ORDER BY 1",
    "SELECT o.id, c.name FROM (SELECT * FROM o WHERE id % 3 = 0) AS o "
    "JOIN c ON o.cust {eq} c.id ORDER BY o.id",
]


def test_a_join_on_a_key_or_an_index_looks_up_the_rows_a_full_read_would_join(db: DB) -> None:
    rng = random.Random(7)
    db.sql("CREATE TABLE c (id INT PRIMARY KEY, code INT, name STRING, INDEX c_code (code))")
    db.sql("CREATE TABLE o (id INT PRIMARY KEY, cust INT, code INT)")
    for i in range(1, 41):
        db.sql("INSERT INTO c VALUES ($1, $2, $3)", i, i % 7, f"n{i % 5}")
    for i in range(1, 81):
        cust = rng.choice([None, 99, *range(1, 41)])
        db.sql("INSERT INTO o VALUES ($1, $2, $3)", i, cust, rng.choice([None, *range(9)]))
    for query in JOINS:
        # NB: "+ 0" hides the key from the lookup: the join reads the table whole
        assert _rows(db, query.format(eq="=")) == _rows(db, query.format(eq="+ 0 =")), query
    # The lookup reads through the index: an entry taken out behind SQL's back hides its
    # row from the join, not from a whole read.
    span = table_indexes_span(_table_id(db, "c"))
    db.delete(db.scan(span.start, span.end)[-1].key)  # the last entry of code 6
    query = "SELECT c.id FROM o JOIN c ON o.code {eq} c.code WHERE o.code = 6 ORDER BY 1"
    looked_up, scanned = _rows(db, query.format(eq="=")), _rows(db, query.format(eq="+ 0 ="))
    assert len(looked_up) < len(scanned) and set(looked_up) < set(scanned)
