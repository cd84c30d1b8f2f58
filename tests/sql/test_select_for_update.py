"""SELECT ... FOR UPDATE and its kin (CockroachDB's explicit row locking, as ORMs send it:
Django's ``select_for_update()``, SQLAlchemy's ``with_for_update()``): the rows a SELECT
of one table reads are locked until its transaction ends, so another transaction's
write of them waits instead of one of the two failing with 40001."""

from __future__ import annotations

import threading

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.kv.store import Store
from feedkv.sql.session import Session
from feedkv.testing.waiting import release_when, wait_until


def _store(db: DB) -> Store:
    node = db.node
    assert node is not None
    return node.store


def _table(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT, INDEX (w))")
    db.sql("INSERT INTO t VALUES (1, 0, 10), (2, 0, 20)")


def _code(session: Session, statement: str) -> str:
    try:
        session.execute(statement)
    except SQLError as exc:
        return exc.code
    return "ok"


def _update_waits_for(db: DB, first: Session, update: str) -> None:
    """``update`` (autocommitted in a second session) waits while ``first`` holds its
    lock, and goes on once ``first`` commits."""
    second = db.session()
    done = threading.Event()

    def run() -> None:
        second.execute(update)
        done.set()

    writer = threading.Thread(target=run)
    writer.start()
    try:
        wait_until(lambda: _store(db).locks.waiters() == 1, what="the UPDATE's lock wait")
        assert not done.is_set()
        first.execute("COMMIT")
    finally:
        writer.join(timeout=60)
    assert not writer.is_alive()
    assert done.is_set()


@pytest.mark.parametrize(
    "select",
    [
        "SELECT v FROM t WHERE k = 1 FOR UPDATE",
        "SELECT v FROM t WHERE k = 1 FOR NO KEY UPDATE",
        "SELECT * FROM t AS x WHERE x.k = 1 FOR UPDATE OF x",
        "SELECT k FROM t WHERE w = 10 FOR UPDATE",  # read through the index on w
        "SELECT v FROM t FOR UPDATE",  # the whole table
    ],
)
def test_update_of_a_row_selected_for_update_waits_for_the_commit(db: DB, select: str) -> None:
    _table(db)
    first = db.session()
    first.execute("BEGIN")
    first.execute(select)
    first.execute("UPDATE t SET v = v + 1 WHERE k = 1")
    _update_waits_for(db, first, "UPDATE t SET v = v * 10 WHERE k = 1")
    # the first's increment, then the second's product: no lost update, no 40001
    assert db.sql("SELECT v FROM t WHERE k = 1").rows == [(10,)]
    assert len(_store(db).locks) == 0


def test_read_modify_write_under_for_update_loses_no_increment(db: DB) -> None:
    _table(db)
    first = db.session()
    first.execute("BEGIN")
    (value,) = first.execute("SELECT v FROM t WHERE k = 2 FOR UPDATE").rows[0]
    assert value == 0
    second = db.session()
    second.execute("BEGIN")
    outcome: list[int] = []

    def increment_second() -> None:
        (seen,) = second.execute("SELECT v FROM t WHERE k = 2 FOR UPDATE").rows[0]
        second.execute("UPDATE t SET v = $1 WHERE k = 2", seen + 1)
        second.execute("COMMIT")
        outcome.append(seen)

    def commit_first() -> None:
        first.execute("UPDATE t SET v = $1 WHERE k = 2", value + 1)
        first.execute("COMMIT")

    release_when(
        increment_second,
        until=lambda: _store(db).locks.waiters() == 1,
        then=commit_first,
        what="the second's lock wait",
    )
    assert outcome == [1]  # the second read the first's committed write
    assert db.sql("SELECT v FROM t WHERE k = 2").rows == [(2,)]


def test_select_for_update_outside_a_transaction_runs_and_holds_nothing(db: DB) -> None:
    _table(db)
    session = db.session()
    assert session.execute("SELECT k, v FROM t ORDER BY k FOR UPDATE").rows == [(1, 0), (2, 0)]
    assert len(_store(db).locks) == 0
    session.execute("UPDATE t SET v = 3 WHERE k = 1")  # nothing left held
    assert db.sql("SELECT v FROM t WHERE k = 1").rows == [(3,)]


@pytest.mark.parametrize("strength", ["FOR SHARE", "FOR KEY SHARE"])
def test_shared_locks_parse_and_take_no_lock_under_serializable(db: DB, strength: str) -> None:
    _table(db)
    first = db.session()
    first.execute("BEGIN")
    assert first.execute(f"SELECT k FROM t WHERE k = 1 {strength}").rows == [(1,)]
    assert len(_store(db).locks) == 0  # as CockroachDB's serializable: no shared lock
    first.execute("COMMIT")
    joined = "SELECT x.k FROM t AS x JOIN t AS y ON x.k = y.k ORDER BY x.k FOR SHARE"
    assert db.sql(joined).rows == [(1,), (2,)]


def test_rows_a_subquery_reads_are_not_locked(db: DB) -> None:
    _table(db)
    db.sql("CREATE TABLE u (k INT PRIMARY KEY)")
    db.sql("INSERT INTO u VALUES (1), (5), (6)")
    first = db.session()
    first.execute("BEGIN")
    rows = first.execute("SELECT k FROM t WHERE k IN (SELECT k FROM u) FOR UPDATE").rows
    assert rows == [(1,)]
    held = len(_store(db).locks)
    first.execute("COMMIT")
    assert held == 2  # t's two rows (its scan reads the table whole), none of u's three


@pytest.mark.parametrize(
    ("statement", "code"),
    [
        ("SELECT count(*) FROM t FOR UPDATE", "0A000"),
        ("SELECT w FROM t GROUP BY w FOR UPDATE", "0A000"),
        ("SELECT DISTINCT v FROM t FOR UPDATE", "0A000"),
        ("SELECT k, row_number() OVER () FROM t FOR UPDATE", "0A000"),
        ("SELECT * FROM t LEFT JOIN u ON t.k = u.k FOR UPDATE", "0A000"),  # u: nullable
        ("SELECT * FROM t LEFT JOIN u ON t.k = u.k FOR UPDATE OF u", "0A000"),
        ("WITH c AS (SELECT k FROM t) SELECT * FROM c FOR UPDATE", "0A000"),
        ("SELECT 1 FOR UPDATE OF t", "42P01"),
        ("SELECT count(*) FROM t FOR SHARE", "0A000"),
        ("SELECT * FROM (SELECT k FROM t) AS s FOR UPDATE", "0A000"),
        ("SELECT k FROM t UNION SELECT k FROM t FOR UPDATE", "0A000"),
        ("SELECT k FROM t FOR UPDATE OF u", "42P01"),
        ("SELECT k FROM t AS OF SYSTEM TIME '-1us' FOR UPDATE", "0A000"),
    ],
)
def test_locking_clauses_it_cannot_honour_are_refused(db: DB, statement: str, code: str) -> None:
    _table(db)
    db.sql("CREATE TABLE u (k INT PRIMARY KEY)")
    assert _code(db.session(), statement) == code


def test_for_update_in_a_read_only_transaction_is_refused(db: DB) -> None:
    _table(db)
    session = db.session()
    session.execute("BEGIN READ ONLY")
    assert _code(session, "SELECT k FROM t FOR UPDATE") == "25006"
    session.execute("ROLLBACK")


@pytest.mark.parametrize(
    "holder",
    [
        "SELECT v FROM t WHERE k = 1 FOR UPDATE",  # a lock
        "UPDATE t SET v = 5 WHERE k = 1",  # a lock and a buffered write
        "INSERT INTO t VALUES (3, 0, 30)",  # no row read: a different row, never met
    ],
)
def test_nowait_fails_at_once_on_a_row_another_transaction_holds(any_db: DB, holder: str) -> None:
    db = any_db  # NB: over gRPC too, where NOWAIT and its error cross the wire
    _table(db)
    first, second = db.session(), db.session()
    first.execute("BEGIN")
    first.execute(holder)
    second.execute("BEGIN")
    meets = not holder.startswith("INSERT")
    try:
        second.execute("SELECT v FROM t WHERE k = 1 FOR UPDATE NOWAIT")
        code, message = "ok", ""
    except SQLError as exc:
        code, message = exc.code, exc.message
    second.execute("ROLLBACK")
    first.execute("COMMIT")
    if meets:
        assert code == "55P03"
        assert message == "could not obtain lock on row (k)=(1) in t@t_pkey"
    else:
        assert code == "ok"
    if db.node is not None:
        assert len(_store(db).locks) == 0


def test_nowait_reads_a_free_row_and_locks_it(db: DB) -> None:
    _table(db)
    first = db.session()
    first.execute("BEGIN")
    assert first.execute("SELECT v FROM t WHERE k = 1 FOR UPDATE NOWAIT").rows == [(0,)]
    assert len(_store(db).locks) == 1
    first.execute("UPDATE t SET v = 7 WHERE k = 1")
    _update_waits_for(db, first, "UPDATE t SET v = v + 1 WHERE k = 1")
    assert db.sql("SELECT v FROM t WHERE k = 1").rows == [(8,)]


def _join_tables(db: DB) -> None:
    _table(db)
    db.sql("CREATE TABLE u (k INT PRIMARY KEY, n INT)")
    db.sql("INSERT INTO u VALUES (1, 0), (2, 0)")


@pytest.mark.parametrize(
    ("select", "held"),
    [
        ("SELECT t.v, u.n FROM t JOIN u ON t.k = u.k WHERE t.k = 1 FOR UPDATE", 4),
        ("SELECT t.v FROM t JOIN u ON t.k = u.k WHERE t.k = 1 FOR UPDATE OF u", 2),
        ("SELECT t.v FROM t LEFT JOIN u ON t.k = u.k FOR UPDATE OF t", 2),
        ("SELECT t.v FROM t, u WHERE t.k = u.k AND u.k = 1 FOR NO KEY UPDATE OF t", 2),
    ],
)
def test_a_join_locks_the_rows_read_from_the_tables_it_names(
    db: DB, select: str, held: int
) -> None:
    _join_tables(db)
    first = db.session()
    first.execute("BEGIN")
    first.execute(select)
    # NB: a join reads t whole (its two rows), and u by a lookup of both of their keys
    assert len(_store(db).locks) == held
    first.execute("COMMIT")
    assert len(_store(db).locks) == 0


def test_update_of_a_row_a_join_locked_waits_for_the_commit(db: DB) -> None:
    _join_tables(db)
    first = db.session()
    first.execute("BEGIN")
    select = "SELECT t.v, u.n FROM t JOIN u ON t.k = u.k WHERE t.k = 1 FOR UPDATE"
    assert first.execute(select).rows == [(0, 0)]
    first.execute("UPDATE u SET n = n + 1 WHERE k = 1")
    _update_waits_for(db, first, "UPDATE u SET n = n * 10 WHERE k = 1")
    assert db.sql("SELECT n FROM u WHERE k = 1").rows == [(10,)]


def _queue(db: DB) -> None:
    db.sql("CREATE TABLE q (id INT PRIMARY KEY, state STRING, INDEX (state))")
    db.sql(
        "INSERT INTO q VALUES (1, 'done'), (2, 'queued'), (3, 'queued'), (4, 'queued'), "
        "(5, 'queued')"
    )


@pytest.mark.parametrize(
    "holder",
    [
        "SELECT * FROM q WHERE id = 3 FOR UPDATE",  # a lock
        "UPDATE q SET state = 'running' WHERE id = 3",  # a lock and a buffered write
    ],
)
def test_skip_locked_leaves_out_the_rows_another_transaction_holds(any_db: DB, holder: str) -> None:
    db = any_db  # NB: over gRPC too, where SKIP LOCKED crosses the wire
    _queue(db)
    first, second = db.session(), db.session()
    first.execute("BEGIN")
    first.execute(holder)
    second.execute("BEGIN")
    found = second.execute("SELECT id FROM q WHERE state = 'queued' FOR UPDATE SKIP LOCKED")
    assert found.rows == [(2,), (4,), (5,)]
    second.execute("ROLLBACK")
    first.execute("COMMIT")
    if db.node is not None:
        assert len(_store(db).locks) == 0


def test_skip_locked_workers_with_a_limit_each_take_a_different_row(db: DB) -> None:
    _queue(db)
    take = "SELECT id FROM q WHERE state = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
    workers, taken, held = [], [], []
    for _ in range(5):
        worker = db.session()
        worker.execute("BEGIN")
        taken.append(worker.execute(take).rows)
        workers.append(worker)
        held.append(len(_store(db).locks))
    assert taken == [[(2,)], [(3,)], [(4,)], [(5,)], []]
    # each holds the row it took and no further one (read through the index on state)
    assert held == [1, 2, 3, 4, 4]
    assert _store(db).locks.waiters() == 0
    for worker in workers:
        worker.execute("ROLLBACK")
    assert len(_store(db).locks) == 0


def test_a_worker_pushed_after_skip_locked_commits_though_a_skipped_row_changed(
    db: DB,
) -> None:
    """A queue worker whose write is pushed past its read refreshes only the row it took
    (as CockroachDB's): the row it skipped, committed meanwhile by the worker holding
    it, does not fail its commit."""
    db.sql("CREATE TABLE jobs (id INT PRIMARY KEY, done BOOL)")
    db.sql("INSERT INTO jobs VALUES (1, false), (2, false), (3, false)")
    take = "SELECT id FROM jobs WHERE NOT done ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
    first, second = db.session(), db.session()
    second.execute("BEGIN")
    second.execute("SELECT * FROM jobs WHERE id = 3")  # its read timestamp, before the 1st's
    first.execute("BEGIN")
    assert first.execute(take).rows == [(1,)]
    first.execute("UPDATE jobs SET done = true WHERE id = 1")
    assert second.execute(take).rows == [(2,)]
    first.execute("COMMIT")
    assert db.sql("SELECT done FROM jobs WHERE id = 2").rows == [(False,)]  # pushes the 2nd
    second.execute("UPDATE jobs SET done = true WHERE id = 2")
    second.execute("COMMIT")
    assert db.sql("SELECT id FROM jobs WHERE done ORDER BY id").rows == [(1,), (2,)]


def test_skip_locked_with_a_limit_locks_no_row_past_it_in_a_scan(db: DB) -> None:
    _queue(db)
    worker = db.session()
    worker.execute("BEGIN")
    found = worker.execute("SELECT id FROM q ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED")
    assert found.rows == [(1,), (2,)]
    assert len(_store(db).locks) == 2  # not the page of rows a scan reads at first
    worker.execute("ROLLBACK")


@pytest.mark.parametrize(
    ("select", "expected"),
    [
        ("SELECT id FROM q WHERE state = 'queued' FOR UPDATE SKIP LOCKED", [2, 4, 5]),
        ("SELECT id FROM q@q_state_idx WHERE state = 'queued' FOR UPDATE SKIP LOCKED", [2, 4, 5]),
        ("SELECT id FROM q WHERE id IN (2, 3, 4) FOR NO KEY UPDATE SKIP LOCKED", [2, 4]),
        ("SELECT id FROM q WHERE id > 1 ORDER BY id DESC FOR UPDATE SKIP LOCKED", [5, 4, 2]),
        ("SELECT id FROM q ORDER BY id LIMIT 2 OFFSET 1 FOR UPDATE SKIP LOCKED", [2, 4]),
    ],
)
def test_skip_locked_reads_skip_a_held_row_however_they_read(
    db: DB, select: str, expected: list[int]
) -> None:
    _queue(db)
    first = db.session()
    first.execute("BEGIN")
    first.execute("SELECT * FROM q WHERE id = 3 FOR UPDATE")
    second = db.session()
    second.execute("BEGIN")
    assert [row[0] for row in second.execute(select).rows] == expected
    second.execute("ROLLBACK")
    first.execute("ROLLBACK")


def test_nowait_wins_over_skip_locked_on_the_same_table(db: DB) -> None:
    _queue(db)
    first = db.session()
    first.execute("BEGIN")
    first.execute("SELECT * FROM q WHERE id = 3 FOR UPDATE")
    second = db.session()
    second.execute("BEGIN")
    assert _code(second, "SELECT id FROM q FOR UPDATE SKIP LOCKED FOR UPDATE NOWAIT") == "55P03"
    second.execute("ROLLBACK")
    first.execute("ROLLBACK")


def test_skip_locked_is_refused_on_a_table_of_several_column_families(db: DB) -> None:
    db.sql("CREATE TABLE f (k INT PRIMARY KEY, a INT, b INT, FAMILY (k, a), FAMILY (b))")
    db.sql("INSERT INTO f VALUES (1, 1, 1)")
    session = db.session()
    session.execute("BEGIN")
    assert _code(session, "SELECT k FROM f FOR UPDATE SKIP LOCKED") == "0A000"
    session.execute("ROLLBACK")
    assert db.sql("SELECT k FROM f FOR SHARE SKIP LOCKED").rows == [(1,)]  # takes no lock
