"""Sessions and transactions through SQL: implicit and explicit transactions, serializable
conflicts and retries, AS OF SYSTEM TIME, placeholders, users, ranges and databases.

Most tests take ``any_db`` so they run against an embedded node and over gRPC alike.
"""

from __future__ import annotations

import datetime
import decimal
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import SerializationFailure, SQLError
from feedkv.kv.store import StoreConfig
from feedkv.server.node import Node
from feedkv.sql.session import Session
from feedkv.testing.waiting import run_threads
from feedkv.util.hlc import ManualClock


def sql_error(fn: Callable[[], object]) -> SQLError:
    with pytest.raises(SQLError) as info:
        fn()
    return info.value


@pytest.fixture
def session(any_db: DB) -> Iterator[Callable[..., Session]]:
    """A factory of sessions on ``any_db``, all closed at the end of the test."""
    opened: list[Session] = []

    def make(**kwargs: Any) -> Session:
        s = any_db.session(**kwargs)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=["embedded", "grpc"])
def manual_db(
    request: pytest.FixtureRequest, tmp_path: Path, store_config: StoreConfig, clock: ManualClock
) -> Iterator[DB]:
    """Like ``any_db``, but the node's clock only moves when the test advances ``clock``."""
    if request.param == "embedded":
        database = feedkv.connect(tmp_path / "store", config=store_config, clock=clock)
        yield database
        database.close()
        return
    with Node(tmp_path / "store", listen="127.0.0.1:0", config=store_config, clock=clock) as node:
        database = feedkv.connect(node.url)
        yield database
        database.close()


def logical_now(db: DB) -> decimal.Decimal:
    value = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]
    assert isinstance(value, decimal.Decimal)
    return value


# Implicit transactions.


def test_multi_row_insert_with_duplicate_third_row_writes_nothing(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")

    error = sql_error(lambda: any_db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (1, 'c')"))

    assert error.code == "23505"
    assert any_db.sql("SELECT k FROM t").rows == []


def test_multi_row_insert_conflicting_with_existing_row_writes_nothing(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    any_db.sql("INSERT INTO t VALUES (9, 'old')")

    error = sql_error(lambda: any_db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (9, 'c')"))

    assert error.code == "23505"
    assert any_db.sql("SELECT k, v FROM t").rows == [(9, "old")]


def test_concurrent_implicit_increments_lose_no_update(any_db: DB) -> None:
    any_db.sql("CREATE TABLE counter (k INT PRIMARY KEY, v INT)")
    any_db.sql("INSERT INTO counter VALUES (1, 0)")
    threads, increments = 8, 50

    def work() -> None:
        for _ in range(increments):
            assert any_db.sql("UPDATE counter SET v = v + 1 WHERE k = 1").tag == "UPDATE 1"

    run_threads([work] * threads)

    assert any_db.sql("SELECT v FROM counter WHERE k = 1").rows == [(threads * increments,)]


def test_concurrent_inserts_of_one_key_let_exactly_one_win(any_db: DB) -> None:
    # NB: a statement on its own checks that its row is new when it commits, not by
    # reading first; racing inserts must still see each other.
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    threads, keys = 8, 20
    won: list[tuple[int, int]] = []
    lost: list[str] = []
    lock = threading.Lock()

    def work(me: int) -> Callable[[], None]:
        def run() -> None:
            for k in range(keys):
                try:
                    any_db.sql("INSERT INTO t VALUES ($1, $2)", k, f"by {me}")
                except SQLError as exc:
                    with lock:
                        lost.append(exc.code)
                else:
                    with lock:
                        won.append((k, me))

        return run

    run_threads([work(me) for me in range(threads)])

    assert sorted(k for k, _me in won) == list(range(keys))
    assert lost == ["23505"] * (threads - 1) * keys
    rows = any_db.sql("SELECT k, v FROM t ORDER BY k").rows
    assert rows == [(k, f"by {me}") for k, me in sorted(won)]


def test_update_of_a_whole_row_by_key_writes_it_or_reports_it_missing(any_db: DB) -> None:
    # Such an UPDATE writes without reading; the row must exist when it commits.
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING, n INT NOT NULL)")
    any_db.sql("INSERT INTO t VALUES (1, 'a', 10)")
    update = "UPDATE t SET v = $2, n = $3 WHERE k = $1"

    assert any_db.sql(update, 1, "b", 11).tag == "UPDATE 1"
    assert any_db.sql(update, 2, "c", 12).tag == "UPDATE 0"
    assert any_db.sql(update, "1", "d", 13).tag == "UPDATE 1"  # coerced to the key's type
    assert sql_error(lambda: any_db.sql(update, 1, "e", None)).code == "23502"

    assert any_db.sql("SELECT * FROM t ORDER BY k").rows == [(1, "d", 13)]
    any_db.sql("DELETE FROM t WHERE k = 1")
    assert any_db.sql(update, 1, "f", 14).tag == "UPDATE 0"
    assert any_db.sql("SELECT count(*) FROM t").rows == [(0,)]


@pytest.mark.parametrize(
    "values",
    [("x", None), ("x", "1/0"), ("x", "99999999999999999999")],
    ids=["NULL for NOT NULL", "division by zero", "out of range"],
)
def test_update_of_a_missing_row_evaluates_nothing(
    any_db: DB, values: tuple[str, str | None]
) -> None:
    # As in PostgreSQL: with no row, a SET that would fail is never evaluated.
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING, n INT NOT NULL)")
    n = "NULL" if values[1] is None else values[1]
    statement = f"UPDATE t SET v = '{values[0]}', n = {n} WHERE k = 2"
    assert any_db.sql(statement).tag == "UPDATE 0"
    any_db.sql("INSERT INTO t VALUES (2, 'a', 1)")
    assert sql_error(lambda: any_db.sql(statement)).code in ("23502", "22012", "22003")


def test_update_of_a_whole_row_by_key_sends_one_batch(
    any_db: DB, count_batches: Callable[[DB], list[int]]
) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    session = any_db.session()
    session.execute("INSERT INTO t VALUES (1, 'a')")
    session.execute("UPDATE t SET v = 'b' WHERE k = 1")  # takes a lease
    batches = count_batches(any_db)

    assert session.execute("UPDATE t SET v = 'c' WHERE k = 1").tag == "UPDATE 1"
    assert batches[0] == 1  # the commit, a plain write batch: nothing read before it
    assert session.execute("UPDATE t SET v = v || '!' WHERE k = 1").tag == "UPDATE 1"
    assert batches[0] == 3  # a SET that reads the row reads it first
    assert session.execute("SELECT v FROM t").rows == [("c!",)]


def test_update_of_a_row_deleted_earlier_in_its_batch_updates_nothing(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    any_db.sql("INSERT INTO t VALUES (1, 'a')")
    results = any_db.session().execute_all(
        "DELETE FROM t WHERE k = 1; UPDATE t SET v = 'b' WHERE k = 1; SELECT * FROM t"
    )
    assert [r.tag for r in results] == ["DELETE 1", "UPDATE 0", "SELECT 0"]


def test_db_sql_transaction_belongs_to_the_calling_thread(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    any_db.sql("BEGIN")
    any_db.sql("INSERT INTO t VALUES (1)")
    seen: list[list[tuple[Any, ...]]] = []

    def other_thread() -> None:
        seen.append(any_db.sql("SELECT k FROM t").rows)
        any_db.sql("INSERT INTO t VALUES (2)")  # outside BEGIN: commits at once

    run_threads([other_thread])
    assert any_db.sql("COMMIT").tag == "COMMIT"

    assert seen == [[]]
    assert any_db.sql("SELECT k FROM t ORDER BY k").rows == [(1,), (2,)]


# Explicit transactions.


def test_uncommitted_writes_are_invisible_to_other_sessions_until_commit(
    any_db: DB, session: Callable[..., Session]
) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    any_db.sql("INSERT INTO t VALUES (1, 'old')")
    writer, reader = session(), session()

    assert writer.execute("BEGIN").tag == "BEGIN"
    writer.execute("INSERT INTO t VALUES (2, 'new')")
    writer.execute("UPDATE t SET v = 'changed' WHERE k = 1")

    assert writer.execute("SELECT k, v FROM t ORDER BY k").rows == [(1, "changed"), (2, "new")]
    assert reader.execute("SELECT k, v FROM t ORDER BY k").rows == [(1, "old")]
    assert writer.execute("COMMIT").tag == "COMMIT"
    assert reader.execute("SELECT k, v FROM t ORDER BY k").rows == [(1, "changed"), (2, "new")]


def test_rollback_discards_transaction_writes(any_db: DB, session: Callable[..., Session]) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    any_db.sql("INSERT INTO t VALUES (1, 'kept')")
    s = session()

    s.execute("BEGIN")
    s.execute("INSERT INTO t VALUES (2, 'discarded')")
    s.execute("DELETE FROM t WHERE k = 1")
    assert s.execute("ROLLBACK").tag == "ROLLBACK"

    assert not s.in_transaction
    assert s.execute("SELECT k, v FROM t").rows == [(1, "kept")]
    assert any_db.sql("SELECT k, v FROM t").rows == [(1, "kept")]


def test_error_in_transaction_rejects_later_statements_until_rollback(
    any_db: DB, session: Callable[..., Session]
) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    any_db.sql("INSERT INTO t VALUES (1)")
    s = session()
    s.execute("BEGIN")
    s.execute("INSERT INTO t VALUES (2)")

    assert sql_error(lambda: s.execute("INSERT INTO t VALUES (1)")).code == "23505"
    assert sql_error(lambda: s.execute("SELECT k FROM t")).code == "25P02"
    assert sql_error(lambda: s.execute("INSERT INTO t VALUES (3)")).code == "25P02"
    assert s.execute("ROLLBACK").tag == "ROLLBACK"

    assert s.execute("SELECT k FROM t").rows == [(1,)]
    s.execute("INSERT INTO t VALUES (4)")  # the session works again, outside a transaction
    assert any_db.sql("SELECT k FROM t ORDER BY k").rows == [(1,), (4,)]


@pytest.mark.parametrize(
    "statement",
    [
        "SHOW intervalstyle",
        "SHOW transaction_isolation",
        "SET application_name = 'late'",
        "RESET application_name",
        "SET TRANSACTION READ ONLY",
    ],
)
def test_an_aborted_transaction_refuses_set_and_show_too(
    any_db: DB, session: Callable[..., Session], statement: str
) -> None:
    # As CockroachDB and PostgreSQL: only the end of the block runs, so a SHOW cannot
    # answer as if the statements before it had run.
    s = session()
    s.execute("BEGIN")
    assert sql_error(lambda: s.execute("SELECT * FROM missing")).code == "42P01"
    assert sql_error(lambda: s.execute(statement)).code == "25P02"
    assert s.variable("application_name") == ""
    assert s.execute("ROLLBACK").tag == "ROLLBACK"
    assert s.execute("SHOW intervalstyle").rows == [("postgres",)]


def test_commit_after_error_rolls_back(any_db: DB, session: Callable[..., Session]) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    s = session()
    s.execute("BEGIN")
    s.execute("INSERT INTO t VALUES (1)")
    assert sql_error(lambda: s.execute("SELECT * FROM missing")).code == "42P01"

    assert s.execute("COMMIT").tag == "ROLLBACK"

    assert not s.in_transaction
    assert any_db.sql("SELECT k FROM t").rows == []
    assert s.execute("BEGIN").tag == "BEGIN"  # a new transaction can start
    assert s.execute("ROLLBACK").tag == "ROLLBACK"


def test_begin_inside_a_transaction_fails_with_25001(
    any_db: DB, session: Callable[..., Session]
) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    s = session()
    s.execute("BEGIN")
    s.execute("INSERT INTO t VALUES (1)")

    assert sql_error(lambda: s.execute("BEGIN")).code == "25001"

    # As CockroachDB: the transaction is aborted, and COMMIT only rolls it back
    assert s.in_transaction
    assert sql_error(lambda: s.execute("INSERT INTO t VALUES (2)")).code == "25P02"
    assert s.execute("COMMIT").tag == "ROLLBACK"
    assert any_db.sql("SELECT k FROM t").rows == []
    assert sql_error(lambda: s.execute("ROLLBACK")).code == "25P01"


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT " + "(" * 1000 + "1" + ")" * 1000,
        "SELECT " + "NOT " * 1000 + "true",
        "SELECT " + " + ".join(["1"] * 5000),
        "SELECT " + "upper(" * 500 + "'a'" + ")" * 500,
    ],
    ids=["1000 parentheses", "1000 NOTs", "5000 terms", "500 calls"],
)
def test_deeply_nested_expressions_run_in_any_thread(any_db: DB, statement: str) -> None:
    """CockroachDB takes hundreds of levels of nesting; so does feedkv, also in a thread
    other than the main one (the parser recurses once per level)."""
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(any_db.sql(statement).rows))
    thread.start()
    thread.join()
    assert len(results) == 1
    assert results[0][0][0] in (1, True, 5000, "A")


# Serializable conflicts.


def _commit_or_fail(s: Session) -> bool:
    """COMMIT; True if it committed, False on a serialization failure."""
    try:
        return s.execute("COMMIT").tag == "COMMIT"
    except SerializationFailure as exc:
        assert exc.code == "40001"
        assert not s.in_transaction
        return False


def _run_or_fail(s: Session, statement: str, *params: Any) -> bool:
    """Run a statement inside a transaction; False (and the transaction rolled back) on
    a serialization failure."""
    try:
        s.execute(statement, *params)
    except SerializationFailure as exc:
        assert exc.code == "40001"
        s.execute("ROLLBACK")
        return False
    return True


def test_concurrent_read_modify_write_loses_no_update(
    any_db: DB, session: Callable[..., Session]
) -> None:
    any_db.sql("CREATE TABLE counter (k INT PRIMARY KEY, v INT)")
    any_db.sql("INSERT INTO counter VALUES (1, 10)")
    first, second = session(), session()

    first.execute("BEGIN")
    second.execute("BEGIN")
    seen_first = first.execute("SELECT v FROM counter WHERE k = 1").rows[0][0]
    seen_second = second.execute("SELECT v FROM counter WHERE k = 1").rows[0][0]
    assert seen_first == seen_second == 10
    committed = 0
    for s, seen in ((first, seen_first), (second, seen_second)):
        if _run_or_fail(s, "UPDATE counter SET v = $1 WHERE k = 1", seen + 1):
            committed += _commit_or_fail(s)

    assert committed == 1  # both committing would lose an update
    assert any_db.sql("SELECT v FROM counter WHERE k = 1").rows == [(11,)]


def test_write_skew_between_two_transactions_is_prevented(
    any_db: DB, session: Callable[..., Session]
) -> None:
    # Invariant: at least one doctor stays on call. Each transaction checks it, then takes
    # a different doctor off call; run concurrently without serializability, both commit.
    any_db.sql("CREATE TABLE doctors (id INT PRIMARY KEY, on_call BOOL)")
    any_db.sql("INSERT INTO doctors VALUES (1, true), (2, true)")
    alice, bob = session(), session()

    alice.execute("BEGIN")
    bob.execute("BEGIN")
    for s in (alice, bob):
        assert s.execute("SELECT count(*) FROM doctors WHERE on_call").rows == [(2,)]
    committed = 0
    for s, doctor in ((alice, 1), (bob, 2)):
        if _run_or_fail(s, "UPDATE doctors SET on_call = false WHERE id = $1", doctor):
            committed += _commit_or_fail(s)

    assert committed >= 1
    on_call = any_db.sql("SELECT count(*) FROM doctors WHERE on_call").rows[0][0]
    assert on_call == 2 - committed
    assert on_call >= 1


def test_run_transaction_retries_transfers_until_the_books_balance(any_db: DB) -> None:
    accounts, threads, transfers, start = 4, 4, 25, 100
    any_db.sql("CREATE TABLE accounts (id INT PRIMARY KEY, balance INT)")
    for account in range(accounts):
        any_db.sql("INSERT INTO accounts VALUES ($1, $2)", account, start)
    attempts = [0] * threads

    def transfer(thread: int) -> Callable[[], None]:
        # Thread i moves i + 1 from account i to account i + 1 (mod the account count).
        source, target, amount = thread, (thread + 1) % accounts, thread + 1

        def fn(s: Session) -> None:
            attempts[thread] += 1
            balances = dict(
                s.execute(
                    "SELECT id, balance FROM accounts WHERE id = $1 OR id = $2", source, target
                ).rows
            )
            s.execute(
                "UPDATE accounts SET balance = $1 WHERE id = $2", balances[source] - amount, source
            )
            s.execute(
                "UPDATE accounts SET balance = $1 WHERE id = $2", balances[target] + amount, target
            )

        def run() -> None:
            s = any_db.session()
            try:
                for _ in range(transfers):
                    s.run_transaction(fn)
                assert not s.in_transaction
            finally:
                s.close()

        return run

    run_threads([transfer(i) for i in range(threads)])

    expected = [start] * accounts
    for thread in range(threads):
        expected[thread] -= transfers * (thread + 1)
        expected[(thread + 1) % accounts] += transfers * (thread + 1)
    balances = any_db.sql("SELECT id, balance FROM accounts ORDER BY id").rows
    assert balances == list(enumerate(expected))
    assert sum(b for _, b in balances) == start * accounts
    assert all(n >= transfers for n in attempts)


def test_run_transaction_rolls_back_and_raises_a_non_retryable_error(
    any_db: DB, session: Callable[..., Session]
) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    any_db.sql("INSERT INTO t VALUES (1)")
    s = session()
    calls = 0

    def fn(txn: Session) -> None:
        nonlocal calls
        calls += 1
        txn.execute("INSERT INTO t VALUES (2)")
        txn.execute("INSERT INTO t VALUES (1)")

    assert sql_error(lambda: s.run_transaction(fn)).code == "23505"

    assert calls == 1
    assert not s.in_transaction
    assert any_db.sql("SELECT k FROM t").rows == [(1,)]


def test_run_transaction_does_not_report_success_when_commit_rolled_back(
    any_db: DB, session: Callable[..., Session]
) -> None:
    # fn swallows a statement error, so the transaction is aborted and its COMMIT rolls
    # back: returning fn's result would tell the caller that INSERT (2) committed.
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    any_db.sql("INSERT INTO t VALUES (1)")
    s = session()

    def fn(txn: Session) -> str:
        txn.execute("INSERT INTO t VALUES (2)")
        with pytest.raises(SQLError):
            txn.execute("INSERT INTO t VALUES (1)")
        return "committed"

    with pytest.raises(SQLError):
        s.run_transaction(fn, max_attempts=1)

    assert not s.in_transaction
    assert any_db.sql("SELECT k FROM t").rows == [(1,)]


def test_explicit_transaction_reads_one_snapshot(
    any_db: DB, session: Callable[..., Session]
) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    any_db.sql("INSERT INTO t VALUES (1, 1)")
    reader = session()
    reader.execute("BEGIN")
    first_ts = reader.execute("SELECT cluster_logical_timestamp()").rows
    assert reader.execute("SELECT v FROM t WHERE k = 1").rows == [(1,)]

    any_db.sql("UPDATE t SET v = 2 WHERE k = 1")
    any_db.sql("INSERT INTO t VALUES (2, 2)")

    assert reader.execute("SELECT k, v FROM t ORDER BY k").rows == [(1, 1)]
    assert reader.execute("SELECT cluster_logical_timestamp()").rows == first_ts
    assert reader.execute("COMMIT").tag == "COMMIT"  # read-only: nothing to conflict with
    assert reader.execute("SELECT k, v FROM t ORDER BY k").rows == [(1, 2), (2, 2)]


# AS OF SYSTEM TIME.


def test_as_of_system_time_reads_the_rows_as_they_were(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    any_db.sql("INSERT INTO t VALUES (1, 'one'), (2, 'two')")
    before = logical_now(any_db)
    any_db.sql("UPDATE t SET v = 'uno' WHERE k = 1")
    any_db.sql("DELETE FROM t WHERE k = 2")
    any_db.sql("INSERT INTO t VALUES (3, 'three')")

    old = any_db.sql(f"SELECT k, v FROM t AS OF SYSTEM TIME {before} ORDER BY k")
    point = any_db.sql(f"SELECT v FROM t AS OF SYSTEM TIME {before} WHERE k = 1")

    assert old.rows == [(1, "one"), (2, "two")]
    assert point.rows == [("one",)]
    assert any_db.sql("SELECT k, v FROM t ORDER BY k").rows == [(1, "uno"), (3, "three")]


def test_as_of_system_time_keeps_the_group_by_and_order_by_after_it(any_db: DB) -> None:
    # the clause was cut up to WHERE/LIMIT only: GROUP BY and ORDER BY (one token each
    # to the tokenizer) were cut with it, so an ORDER BY ... DESC was silently ignored
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, city STRING, rev INT)")
    any_db.sql("INSERT INTO t VALUES (1, 'a', 1), (2, 'a', 2), (3, 'b', 5)")
    at = logical_now(any_db)
    ordered = any_db.sql(f"SELECT k FROM t AS OF SYSTEM TIME {at} ORDER BY k DESC")
    grouped = any_db.sql(
        f"SELECT city, sum(rev) FROM t AS OF SYSTEM TIME {at} GROUP BY city ORDER BY city"
    )
    assert ordered.rows == [(3,), (2,), (1,)]
    assert [(city, int(total)) for city, total in grouped.rows] == [("a", 3), ("b", 5)]


def test_as_of_system_time_before_add_column_shows_the_old_schema(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    any_db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    before = logical_now(any_db)
    any_db.sql("ALTER TABLE t ADD COLUMN w INT DEFAULT 7")
    any_db.sql("INSERT INTO t VALUES (3, 'c', 8)")

    old = any_db.sql(f"SELECT * FROM t AS OF SYSTEM TIME {before} ORDER BY k")
    now = any_db.sql("SELECT * FROM t ORDER BY k")

    assert old.columns == ("k", "v")
    assert old.rows == [(1, "a"), (2, "b")]
    assert now.columns == ("k", "v", "w")
    assert now.rows == [(1, "a", 7), (2, "b", 7), (3, "c", 8)]
    error = sql_error(lambda: any_db.sql(f"SELECT w FROM t AS OF SYSTEM TIME {before}"))
    assert error.code == "42703"


def test_a_statement_run_again_follows_the_schema_changes_between_runs(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    any_db.sql("INSERT INTO t VALUES (1, 'a')")
    select, update = "SELECT * FROM t WHERE k = $1", "UPDATE t SET v = $2 WHERE k = $1"
    assert any_db.sql(select, 1).columns == ("k", "v")
    assert any_db.sql(update, 1, "b").tag == "UPDATE 1"

    any_db.sql("ALTER TABLE t ADD COLUMN w INT DEFAULT 7")
    any_db.sql(update, 1, "c")
    assert any_db.sql(select, 1).rows == [(1, "c", 7)]
    any_db.sql("ALTER TABLE t DROP COLUMN v")

    assert any_db.sql(select, 1).rows == [(1, 7)]
    assert sql_error(lambda: any_db.sql(update, 1, "d")).code == "42703"


def test_a_rolled_back_schema_change_leaves_nothing_for_the_next_one(
    any_db: DB, session: Callable[..., Session]
) -> None:
    # The rolled-back change and the next one write the same descriptor version.
    s = session()
    s.execute("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    s.execute("INSERT INTO t VALUES (1, 'a')")
    select = "SELECT * FROM t WHERE k = $1"
    s.execute("BEGIN")
    s.execute("ALTER TABLE t ADD COLUMN a INT DEFAULT 5")
    assert s.execute(select, 1).rows == [(1, "a")]  # a is public at commit
    s.execute("INSERT INTO t (k, v) VALUES (3, 'c')")  # a's default
    s.execute("ROLLBACK")

    s.execute("ALTER TABLE t ADD COLUMN b STRING DEFAULT 'x'")
    again = s.execute(select, 1)
    s.execute("INSERT INTO t (k, v) VALUES (2, 'b')")  # b's default, not a's

    assert again.columns == ("k", "v", "b")
    assert again.rows == [(1, "a", "x")]
    assert s.execute(select, 2).rows == [(2, "b", "x")]


def test_as_of_system_time_reads_a_dropped_table(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    any_db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    before = logical_now(any_db)
    any_db.sql("DROP TABLE t")

    assert sql_error(lambda: any_db.sql("SELECT * FROM t")).code == "42P01"
    old = any_db.sql(f"SELECT k, v FROM t AS OF SYSTEM TIME {before} ORDER BY k")
    assert old.rows == [(1, "a"), (2, "b")]


def test_as_of_system_time_accepts_a_negative_interval(manual_db: DB, clock: ManualClock) -> None:
    manual_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    manual_db.sql("INSERT INTO t VALUES (1, 'old')")
    clock.advance(10_000_000_000)  # 10 s
    manual_db.sql("UPDATE t SET v = 'new' WHERE k = 1")
    manual_db.sql("INSERT INTO t VALUES (2, 'later')")

    five_seconds_ago = manual_db.sql("SELECT k, v FROM t AS OF SYSTEM TIME '-5s' ORDER BY k")
    in_milliseconds = manual_db.sql("SELECT k, v FROM t AS OF SYSTEM TIME '-5000ms' ORDER BY k")

    assert five_seconds_ago.rows == [(1, "old")]
    assert in_milliseconds.rows == [(1, "old")]
    assert manual_db.sql("SELECT k, v FROM t ORDER BY k").rows == [(1, "new"), (2, "later")]


def test_as_of_system_time_in_the_future_is_an_error(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    an_hour_ahead = logical_now(any_db) + 3600 * 10**9

    error = sql_error(lambda: any_db.sql(f"SELECT k FROM t AS OF SYSTEM TIME {an_hour_ahead}"))

    assert not isinstance(error, SerializationFailure)
    assert "future" in error.message


def test_as_of_system_time_inside_an_explicit_transaction_is_rejected(
    any_db: DB, session: Callable[..., Session]
) -> None:
    # An explicit transaction reads at one timestamp; a statement reading at another would
    # break its serializability, so CockroachDB refuses AS OF SYSTEM TIME inside BEGIN.
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    any_db.sql("INSERT INTO t VALUES (1)")
    before = logical_now(any_db)
    any_db.sql("INSERT INTO t VALUES (2)")
    s = session()
    s.execute("BEGIN")

    error = sql_error(lambda: s.execute(f"SELECT k FROM t AS OF SYSTEM TIME {before}"))

    assert not isinstance(error, SerializationFailure)
    assert s.execute("ROLLBACK").tag == "ROLLBACK"


# Placeholders.

PLACEHOLDER_VALUES: list[tuple[str, Any]] = [
    ("INT", -(2**63)),
    ("STRING", "héllo, ☃ 'quoted'"),
    ("BYTES", b"\x00\xff\x01'"),
    ("BOOL", True),
    ("FLOAT", 0.1),
    ("DECIMAL", decimal.Decimal("12345.678901")),
    ("DATE", datetime.date(2024, 2, 29)),
    (
        "TIMESTAMPTZ",
        datetime.datetime(
            2024, 3, 10, 12, 30, 15, 123456, tzinfo=datetime.timezone(datetime.timedelta(hours=5.5))
        ),
    ),
    ("UUID", uuid.UUID("6f1c8f0e-5a3b-4c2d-9e8f-0123456789ab")),
]


@pytest.mark.parametrize(
    ("type_name", "value"), PLACEHOLDER_VALUES, ids=[name for name, _ in PLACEHOLDER_VALUES]
)
def test_placeholder_round_trips_through_insert_and_key_lookup(
    any_db: DB, type_name: str, value: Any
) -> None:
    any_db.sql(f"CREATE TABLE t (k {type_name} PRIMARY KEY, v {type_name})")

    assert any_db.sql("INSERT INTO t VALUES ($1, $2)", value, value).tag == "INSERT 0 1"
    found = any_db.sql("SELECT k, v FROM t WHERE k = $1", value).rows

    assert found == [(value, value)]
    assert [type(x) for x in found[0]] == [type(value), type(value)]


def test_aware_datetime_placeholder_keeps_its_instant(any_db: DB) -> None:
    value = PLACEHOLDER_VALUES[7][1]
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v TIMESTAMPTZ)")
    any_db.sql("INSERT INTO t VALUES (1, $1)", value)

    (found,) = any_db.sql("SELECT v FROM t WHERE k = 1").rows[0]

    assert found.tzinfo is not None
    assert found == value
    assert found.timestamp() == value.timestamp()


def test_nan_float_placeholder_finds_its_row(any_db: DB) -> None:
    # Keys encode NaN as one value equal to itself (as in CockroachDB, where NaN = NaN), so
    # a second NaN row is a duplicate; an equality lookup must then find the first.
    nan = float("nan")
    any_db.sql("CREATE TABLE t (k FLOAT PRIMARY KEY, v STRING)")
    any_db.sql("INSERT INTO t VALUES ($1, 'nan')", nan)
    assert sql_error(lambda: any_db.sql("INSERT INTO t VALUES ($1, 'again')", nan)).code == "23505"

    found = any_db.sql("SELECT v FROM t WHERE k = $1", nan).rows

    assert found == [("nan",)]


def test_null_placeholder_stores_null(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")

    any_db.sql("INSERT INTO t VALUES ($1, $2)", 1, None)

    assert any_db.sql("SELECT v FROM t WHERE k = $1", 1).rows == [(None,)]
    assert any_db.sql("SELECT k FROM t WHERE v IS NULL").rows == [(1,)]


def test_wrong_number_of_placeholder_arguments_fails_with_08P01(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY)")

    too_many = sql_error(lambda: any_db.sql("SELECT k FROM t WHERE k = $1", 1, 2))
    too_few = sql_error(lambda: any_db.sql("SELECT k FROM t WHERE k = $2", 1))

    assert (too_many.code, too_few.code) == ("08P01", "08P01")


def test_dict_placeholder_round_trips_as_jsonb(any_db: DB) -> None:
    document = {"a": [1, 2.5, "x", None, True], "b": {"c": "d"}, "e": ""}
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, doc JSONB)")

    any_db.sql("INSERT INTO t VALUES ($1, $2)", 1, document)
    found = any_db.sql("SELECT doc FROM t WHERE k = $1", 1).rows

    assert found == [(document,)]


# Users.


def test_non_admin_user_can_read_and_write_what_was_granted_but_not_create_tables(
    any_db: DB, session: Callable[..., Session]
) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    assert any_db.sql("CREATE USER bob").tag == "CREATE ROLE"
    bob = session(user="bob")
    assert sql_error(lambda: bob.execute("INSERT INTO t VALUES (1, 'x')")).code == "42501"
    assert any_db.sql("GRANT SELECT, INSERT ON t TO bob").tag == "GRANT"

    bob.execute("INSERT INTO t VALUES (1, 'from bob')")
    assert bob.execute("SELECT k, v FROM t").rows == [(1, "from bob")]
    assert sql_error(lambda: bob.execute("CREATE TABLE u (k INT PRIMARY KEY)")).code == "42501"
    assert sql_error(lambda: bob.execute("CREATE USER eve")).code == "42501"
    assert any_db.sql("SHOW TABLES").rows == [("public", "t", "table", "root", 0, None)]


def test_granting_admin_lets_a_user_create_tables(
    any_db: DB, session: Callable[..., Session]
) -> None:
    any_db.sql("CREATE USER bob")
    bob = session(user="bob")
    assert sql_error(lambda: bob.execute("CREATE TABLE u (k INT PRIMARY KEY)")).code == "42501"

    assert any_db.sql("GRANT admin TO bob").tag == "GRANT"

    assert bob.execute("CREATE TABLE u (k INT PRIMARY KEY)").tag == "CREATE TABLE"
    bob.execute("INSERT INTO u VALUES (1)")
    assert any_db.sql("SELECT k FROM u").rows == [(1,)]


def test_session_for_an_unknown_user_fails_with_28000(
    any_db: DB, session: Callable[..., Session]
) -> None:
    nobody = session(user="nobody")

    assert sql_error(lambda: nobody.execute("SELECT 1")).code == "28000"
    assert sql_error(lambda: nobody.execute("SELECT 1")).code == "28000"


# Ranges.


def test_split_at_adds_a_range_and_rows_on_both_sides_still_read(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    for k in range(1, 11):
        any_db.sql("INSERT INTO t VALUES ($1, $2)", k, k * 10)
    before = any_db.sql("SHOW RANGES FROM TABLE t").rows

    split = any_db.sql("ALTER TABLE t SPLIT AT VALUES (5)")
    after = any_db.sql("SHOW RANGES FROM TABLE t").rows

    assert split.tag == "SPLIT 1"
    assert len(before) == 1
    assert len(after) == 2
    (left_start, left_end, left_id, *_), (right_start, right_end, right_id, *_) = after
    assert left_id != right_id
    assert after[0][4:] == (1, [1])  # lease_holder, replicas (INT8[]): its own node, n1
    assert (left_start, right_end) == (before[0][0], before[0][1])
    assert left_end == right_start
    assert right_start.endswith("/5")
    assert any_db.sql("SELECT k FROM t ORDER BY k").rows == [(k,) for k in range(1, 11)]
    assert any_db.sql("SELECT v FROM t WHERE k = 4").rows == [(40,)]
    assert any_db.sql("SELECT v FROM t WHERE k = 5").rows == [(50,)]
    assert any_db.sql("SELECT k FROM t WHERE k >= 3 AND k <= 7").rows == [(k,) for k in range(3, 8)]
    # One statement writing on both sides of the split commits atomically.
    assert any_db.sql("UPDATE t SET v = v + 1").tag == "UPDATE 10"
    assert any_db.sql("SELECT sum(v) FROM t").rows == [(decimal.Decimal(560),)]


def test_show_ranges_of_a_database_lists_each_tables_ranges(any_db: DB) -> None:
    """As CockroachDB's ``SHOW RANGES`` (the current database) and ``SHOW RANGES FROM
    DATABASE d``; both were refused as unsupported (0A000)."""
    any_db.sql("CREATE TABLE b (k INT PRIMARY KEY)")
    any_db.sql("CREATE TABLE a (k INT PRIMARY KEY)")
    any_db.sql("ALTER TABLE b SPLIT AT VALUES (5)")
    of_b = any_db.sql("SHOW RANGES FROM TABLE b").rows
    of_a = any_db.sql("SHOW RANGES FROM TABLE a").rows

    shown = any_db.sql("SHOW RANGES")
    assert shown.columns[0] == "table_name"
    assert shown.rows == [("a", *row) for row in of_a] + [("b", *row) for row in of_b]
    assert len(shown.rows) == 3
    assert any_db.sql("SHOW RANGES FROM DATABASE defaultdb").rows == shown.rows
    any_db.sql("CREATE DATABASE empty")
    assert any_db.sql("SHOW RANGES FROM DATABASE empty").rows == []
    assert sql_error(lambda: any_db.sql("SHOW RANGES FROM DATABASE nosuchdb")).code == "3D000"


def _composite_table_split_at_prefixes(db: DB) -> list[tuple[Any, ...]]:
    db.sql("CREATE TABLE c (a INT, b STRING, v INT, PRIMARY KEY (a, b))")
    for a in range(4):
        for b in "xyz":
            db.sql("INSERT INTO c VALUES ($1, $2, $3)", a, b, a)
    assert db.sql("ALTER TABLE c SPLIT AT VALUES (2), (3, 'y')").tag == "SPLIT 2"
    rows: list[tuple[Any, ...]] = db.sql("SHOW RANGES FROM TABLE c").rows
    return rows


def test_split_at_several_key_prefixes_keeps_every_row_readable(any_db: DB) -> None:
    ranges = _composite_table_split_at_prefixes(any_db)

    assert len(ranges) == 3
    assert len({r[2] for r in ranges}) == 3
    assert any_db.sql("SELECT count(*) FROM c").rows == [(12,)]
    assert any_db.sql("SELECT b FROM c WHERE a = 3 ORDER BY b").rows == [("x",), ("y",), ("z",)]
    assert any_db.sql("SELECT a, b FROM c WHERE a = 1 AND b = 'z'").rows == [(1, "z")]


def test_show_ranges_prints_a_key_prefix_split_point_as_values(any_db: DB) -> None:
    ranges = _composite_table_split_at_prefixes(any_db)
    table = ranges[0][0]  # /Table/<id>

    boundaries = [(start, end) for start, end, *_ in ranges]

    assert boundaries == [
        (table, f"{table}/1/2"),
        (f"{table}/1/2", f"{table}/1/3/y"),
        (f"{table}/1/3/y", f"/Table/{int(table.removeprefix('/Table/')) + 1}"),
    ]


def test_create_table_gives_the_table_its_own_range(
    any_db: DB, session: Callable[..., Session]
) -> None:
    any_db.sql("CREATE TABLE a (k INT PRIMARY KEY)")
    any_db.sql("CREATE TABLE b (k INT PRIMARY KEY)")
    s = session()
    s.execute("BEGIN")
    s.execute("CREATE TABLE c (k INT PRIMARY KEY)")
    s.execute("COMMIT")

    ranges = {name: any_db.sql(f"SHOW RANGES FROM TABLE {name}").rows for name in "abc"}

    assert all(len(rows) == 1 for rows in ranges.values()), ranges
    ids = {name: rows[0][2] for name, rows in ranges.items()}
    assert len(set(ids.values())) == 3, ids
    owners = {name: [r for r in any_db.ranges() if r.range_id == ids[name]] for name in ids}
    for name, (info,) in owners.items():
        start, end = ranges[name][0][0], ranges[name][0][1]
        assert start.startswith("/Table/") and end.startswith("/Table/")
        assert int(end.removeprefix("/Table/")) == int(start.removeprefix("/Table/")) + 1
        assert info.sticky, f"table {name}'s range did not start at a split"


# Databases.


def test_tables_of_another_database_by_qualified_name_and_by_session_database(
    any_db: DB, session: Callable[..., Session]
) -> None:
    assert any_db.sql("CREATE DATABASE d2").tag == "CREATE DATABASE"
    any_db.sql("CREATE TABLE d2.t (k INT PRIMARY KEY, v STRING)")
    any_db.sql("INSERT INTO d2.t VALUES (1, 'qualified')")
    in_d2 = session(database="d2")

    in_d2.execute("INSERT INTO t VALUES (2, 'unqualified')")
    in_d2.execute("CREATE TABLE u (k INT PRIMARY KEY)")

    assert in_d2.execute("SELECT k, v FROM t ORDER BY k").rows == [
        (1, "qualified"),
        (2, "unqualified"),
    ]
    assert any_db.sql("SELECT count(*) FROM d2.t").rows == [(2,)]
    assert [r[1] for r in any_db.sql("SHOW TABLES FROM d2").rows] == ["t", "u"]
    assert sql_error(lambda: any_db.sql("SELECT * FROM t")).code == "42P01"  # not in defaultdb


def test_drop_database_cascade_removes_its_tables(
    any_db: DB, session: Callable[..., Session]
) -> None:
    any_db.sql("CREATE DATABASE d2")
    any_db.sql("CREATE TABLE d2.t (k INT PRIMARY KEY)")
    any_db.sql("INSERT INTO d2.t VALUES (1)")
    in_d2 = session(database="d2")
    assert in_d2.execute("SELECT k FROM t").rows == [(1,)]

    assert sql_error(lambda: any_db.sql("DROP DATABASE d2")).code == "2BP01"
    assert any_db.sql("DROP DATABASE d2 CASCADE").tag == "DROP DATABASE"

    assert "d2" not in [r[0] for r in any_db.sql("SHOW DATABASES").rows]
    assert sql_error(lambda: any_db.sql("SELECT k FROM d2.t")).code == "3D000"
    assert sql_error(lambda: in_d2.execute("SELECT k FROM t")).code == "3D000"
    # A new database of the same name starts empty.
    any_db.sql("CREATE DATABASE d2")
    assert any_db.sql("SHOW TABLES FROM d2").rows == []
    assert sql_error(lambda: in_d2.execute("SELECT k FROM t")).code == "42P01"
    in_d2.execute("CREATE TABLE t (k INT PRIMARY KEY)")
    assert in_d2.execute("SELECT k FROM t").rows == []


def test_statements_sent_together_commit_together(any_db: DB) -> None:
    results = any_db.session().execute_all(
        "CREATE TABLE t (k INT PRIMARY KEY); INSERT INTO t VALUES (1); SELECT k FROM t"
    )
    assert [r.tag for r in results] == ["CREATE TABLE", "INSERT 0 1", "SELECT 1"]
    assert results[2].rows == [(1,)]
    with pytest.raises(SQLError) as raised:
        any_db.sql("INSERT INTO t VALUES (2); INSERT INTO t VALUES (1)")
    assert raised.value.code == "23505"
    assert any_db.sql("SELECT k FROM t").rows == [(1,)]  # the first INSERT went too


def test_on_conflict_do_update_moves_a_row_to_a_free_key_only(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    any_db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    any_db.sql("INSERT INTO t VALUES (1, 'x') ON CONFLICT (k) DO UPDATE SET k = 5")
    assert any_db.sql("SELECT k, v FROM t ORDER BY k").rows == [(2, "b"), (5, "a")]
    with pytest.raises(SQLError) as raised:
        any_db.sql("INSERT INTO t VALUES (5, 'x') ON CONFLICT (k) DO UPDATE SET k = 2")
    assert raised.value.code == "23505"
    assert any_db.sql("SELECT k, v FROM t ORDER BY k").rows == [(2, "b"), (5, "a")]


def test_rollback_to_the_restart_savepoint_starts_the_transaction_over(db: feedkv.DB) -> None:
    s = db.session()
    s.execute("CREATE TABLE sp (k INT PRIMARY KEY)")
    s.execute("BEGIN")
    assert s.execute("SAVEPOINT cockroach_restart").tag == "SAVEPOINT"
    s.execute("INSERT INTO sp VALUES (1)")
    assert sql_error(lambda: s.execute("INSERT INTO sp VALUES (1)")).code == "23505"
    assert s.failed
    assert s.execute("ROLLBACK TO SAVEPOINT cockroach_restart").tag == "ROLLBACK"
    assert s.in_transaction and not s.failed
    assert s.execute("SELECT count(*) FROM sp").rows == [(0,)]  # the first attempt is gone
    s.execute("INSERT INTO sp VALUES (2)")
    assert s.execute("RELEASE SAVEPOINT cockroach_restart").tag == "RELEASE"
    assert db.sql("SELECT k FROM sp").rows == [(2,)]  # RELEASE committed it
    assert sql_error(lambda: s.execute("SELECT 1")).code == "25000"
    assert s.execute("COMMIT").tag == "COMMIT"
    assert not s.in_transaction


def test_the_restart_savepoint_declared_again_before_anything_ran_is_the_same_one(
    db: feedkv.DB,
) -> None:
    """A retry loop that declares it each time round (sqlalchemy-cockroachdb's
    run_transaction: SAVEPOINT, 40001, ROLLBACK TO, SAVEPOINT again) keeps one marker,
    as CockroachDB's does; once a statement ran, it is 42601."""
    s = db.session()
    s.execute("CREATE TABLE sp2 (k INT PRIMARY KEY)")
    s.execute("BEGIN")
    s.execute("SAVEPOINT cockroach_restart")
    assert s.execute("SAVEPOINT cockroach_restart").tag == "SAVEPOINT"
    s.execute("INSERT INTO sp2 VALUES (1)")
    assert sql_error(lambda: s.execute("INSERT INTO sp2 VALUES (1)")).code == "23505"
    assert s.execute("ROLLBACK TO SAVEPOINT cockroach_restart").tag == "ROLLBACK"
    assert s.execute("SAVEPOINT cockroach_restart").tag == "SAVEPOINT"
    s.execute("INSERT INTO sp2 VALUES (2)")
    error = sql_error(lambda: s.execute("SAVEPOINT cockroach_restart"))
    assert (error.code, str(error)) == ("42601", 'SAVEPOINT "cockroach_restart" cannot be nested')
    assert s.execute("ROLLBACK TO SAVEPOINT cockroach_restart").tag == "ROLLBACK"
    s.execute("INSERT INTO sp2 VALUES (3)")
    assert s.execute("RELEASE SAVEPOINT cockroach_restart").tag == "RELEASE"
    s.execute("COMMIT")
    assert db.sql("SELECT k FROM sp2").rows == [(3,)]


@pytest.mark.parametrize(
    ("statements", "code"),
    [
        (["SAVEPOINT cockroach_restart"], "25P01"),
        (["BEGIN", "RELEASE SAVEPOINT other"], "3B001"),
        (["BEGIN", "ROLLBACK TO SAVEPOINT cockroach_restart"], "3B001"),
        (["BEGIN", "SELECT 1", "SAVEPOINT cockroach_restart"], "42601"),
        (
            ["BEGIN", "SAVEPOINT cockroach_restart", "SELECT 1", "SAVEPOINT cockroach_restart"],
            "42601",
        ),
    ],
)
def test_savepoint_misuse_gets_its_sqlstate(
    db: feedkv.DB, statements: list[str], code: str
) -> None:
    s = db.session()
    *before, last = statements
    for text in before:
        s.execute(text)
    assert sql_error(lambda: s.execute(last)).code == code


def test_user_priority_defaults_from_the_session_and_shows_per_transaction(
    any_db: DB, session: Callable[..., Session]
) -> None:
    s = session()
    assert s.execute("SHOW TRANSACTION PRIORITY").rows == [("normal",)]
    s.execute("SET default_transaction_priority = 'HIGH'")
    assert s.execute("SHOW default_transaction_priority").rows == [("high",)]
    assert s.execute("SHOW TRANSACTION PRIORITY").rows == [("high",)]  # outside: the default
    s.execute("BEGIN")
    assert s.execute("SHOW TRANSACTION PRIORITY").rows == [("high",)]
    s.execute("SET TRANSACTION PRIORITY LOW")  # before its first statement: it may change
    assert s.execute("SHOW TRANSACTION PRIORITY").rows == [("low",)]
    s.execute("COMMIT")
    s.execute("BEGIN PRIORITY LOW")
    assert s.execute("SHOW TRANSACTION PRIORITY").rows == [("low",)]
    s.execute("ROLLBACK")
    s.execute("SET SESSION CHARACTERISTICS AS TRANSACTION PRIORITY LOW")
    assert s.execute("SHOW default_transaction_priority").rows == [("low",)]
    s.execute("RESET default_transaction_priority")
    assert s.execute("SHOW default_transaction_priority").rows == [("normal",)]
    assert sql_error(lambda: s.execute("SET default_transaction_priority = 'urgent'"))


def test_a_running_transaction_keeps_its_user_priority(
    any_db: DB, session: Callable[..., Session]
) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    s = session()
    s.execute("BEGIN")
    s.execute("INSERT INTO t VALUES (1)")
    s.execute("SET TRANSACTION PRIORITY NORMAL")  # the priority it has: nothing changes
    error = sql_error(lambda: s.execute("SET TRANSACTION PRIORITY HIGH"))
    assert "cannot change the user priority of a running transaction" in error.message
    assert s.execute("SHOW TRANSACTION PRIORITY").rows == [("normal",)]
    s.execute("ROLLBACK")


def test_user_priority_may_change_after_savepoint_cockroach_restart(
    any_db: DB, session: Callable[..., Session]
) -> None:
    """SAVEPOINT cockroach_restart runs nothing: a retry loop may set the priority after
    it (as CockroachDB's clients do), and the priority outlives a restart."""
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    s = session()
    s.execute_all("BEGIN; SAVEPOINT cockroach_restart; SET TRANSACTION PRIORITY HIGH")
    assert s.execute("SHOW TRANSACTION PRIORITY").rows == [("high",)]
    s.execute("INSERT INTO t VALUES (1)")
    s.execute("ROLLBACK TO SAVEPOINT cockroach_restart")
    assert s.execute("SHOW TRANSACTION PRIORITY").rows == [("high",)]
    s.execute("INSERT INTO t VALUES (2)")
    s.execute("RELEASE SAVEPOINT cockroach_restart")
    s.execute("COMMIT")
    assert any_db.sql("SELECT k FROM t").rows == [(2,)]
    s.execute_all("BEGIN; SAVEPOINT cockroach_restart; SELECT 1")
    error = sql_error(lambda: s.execute("SET TRANSACTION PRIORITY LOW"))
    assert "cannot change the user priority of a running transaction" in error.message
    s.execute("ROLLBACK")


def test_transaction_status_observes_the_session_even_when_aborted(
    any_db: DB, session: Callable[..., Session]
) -> None:
    s = session()
    assert s.execute("SHOW TRANSACTION STATUS").rows == [("NoTxn",)]
    s.execute("BEGIN")
    assert s.execute("SHOW TRANSACTION STATUS").rows == [("Open",)]
    sql_error(lambda: s.execute("SELECT * FROM missing"))
    assert s.execute("SHOW TRANSACTION STATUS").rows == [("Aborted",)]
    s.execute("ROLLBACK")
    s.execute("BEGIN; SAVEPOINT cockroach_restart")
    s.execute("RELEASE SAVEPOINT cockroach_restart")
    assert s.execute("SHOW TRANSACTION STATUS").rows == [("CommitWait",)]
    s.execute("COMMIT")
    assert s.execute("SHOW transaction_status").rows == [("NoTxn",)]


def test_text_that_does_not_parse_aborts_the_transaction(
    any_db: DB, session: Callable[..., Session]
) -> None:
    # As CockroachDB and PostgreSQL: a syntax error is a failed statement like any
    # other, so COMMIT rolls back what came before it.
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    s = session()
    s.execute("BEGIN")
    s.execute("INSERT INTO t VALUES (1)")
    assert sql_error(lambda: s.execute("INSERT INTO t VALUES (2")).code == "42601"
    assert sql_error(lambda: s.execute("SELECT 1")).code == "25P02"
    assert s.execute("COMMIT").tag == "ROLLBACK"
    assert any_db.sql("SELECT k FROM t").rows == []


def test_schema_changes_run_inside_the_transaction_so_autocommit_before_ddl_is_off(
    any_db: DB, session: Callable[..., Session]
) -> None:
    # CockroachDB's variable: on commits the transaction before a schema change in it,
    # which feedkv does not do; off (what it does) is accepted, on refused.
    s = session()
    assert s.execute("SHOW autocommit_before_ddl").rows == [("off",)]
    s.execute("BEGIN")
    s.execute("SET LOCAL autocommit_before_ddl = false")
    s.execute("CREATE TABLE t (k INT PRIMARY KEY)")
    s.execute("ROLLBACK")
    assert sql_error(lambda: s.execute("SELECT * FROM t")).code == "42P01"
    assert sql_error(lambda: s.execute("SET autocommit_before_ddl = on")).code == "0A000"


def test_follower_reads_are_off_and_cannot_be_turned_on(
    any_db: DB, session: Callable[..., Session]
) -> None:
    # CockroachDB's variable: on reads each transaction at follower_read_timestamp(),
    # in the past; feedkv reads at the transaction's own timestamp: off is accepted,
    # on refused (rather than accepted and not done).
    s = session()
    assert s.execute("SHOW default_transaction_use_follower_reads").rows == [("off",)]
    s.execute("SET default_transaction_use_follower_reads TO FALSE")
    assert s.execute("SHOW default_transaction_use_follower_reads").rows == [("off",)]
    for value in ("TRUE", "on"):
        statement = f"SET default_transaction_use_follower_reads = {value}"
        assert sql_error(lambda text=statement: s.execute(text)).code == "0A000"
    assert s.execute("SHOW default_transaction_use_follower_reads").rows == [("off",)]


def test_statement_timeout_cancels_a_statement_of_an_embedded_session(db: DB) -> None:
    """Set in a session of the Python API, not only over the wire: a statement past it
    fails with 57014, and the session's next statements run."""
    session = db.session()
    session.execute("SET statement_timeout = '100ms'")
    with pytest.raises(SQLError) as raised:
        session.execute("SELECT pg_sleep(600)")
    assert (raised.value.code, raised.value.message) == (
        "57014",
        "query execution canceled due to statement timeout",
    )
    assert session.execute("SELECT 1").rows == [(1,)]
    session.execute("RESET statement_timeout")
    assert session.execute("SHOW statement_timeout").rows == [("0",)]
    assert session.execute("SELECT pg_sleep(0.2)").rows == [(True,)]


def test_a_statement_alone_reads_the_zone_and_read_only_default_set_before_it(db: DB) -> None:
    """SET and RESET of timezone and default_transaction_read_only take effect from the
    next statement (the session keeps what every statement reads as they change)."""
    session = db.session()
    session.execute("CREATE TABLE t (k INT PRIMARY KEY)")
    noon = "SELECT '2024-01-01 12:00:00+00'::TIMESTAMPTZ"
    session.execute("SET timezone = 'Asia/Tokyo'")
    assert session.execute(noon).rows[0][0].utcoffset() == datetime.timedelta(hours=9)
    session.execute("SET default_transaction_read_only = on")
    assert sql_error(lambda: session.execute("INSERT INTO t VALUES (1)")).code == "25006"
    session.execute("RESET ALL")
    assert session.execute(noon).rows[0][0].utcoffset() == datetime.timedelta(0)
    assert session.execute("INSERT INTO t VALUES (1)").tag == "INSERT 0 1"


def test_text_that_is_only_a_comment_runs_as_an_empty_query(
    session: Callable[..., Session],
) -> None:
    """As PostgreSQL and CockroachDB run it: no error (SHOW CREATE ALL TABLES writes a
    comment row among its statements, which a replay runs one by one)."""
    s = session()
    for text in ("-- Validate foreign key constraints", "/* nothing */", " ;;; ", "   "):
        result = s.execute(text)
        assert (result.columns, result.rows, result.tag) == ((), [], ""), text


def test_a_session_s_variables_change_only_through_set(tmp_path: Path) -> None:
    db = feedkv.connect(tmp_path / "s")
    try:
        session = db.session()
        with pytest.raises(TypeError):
            session.variables["timezone"] = "Asia/Tokyo"  # type: ignore[index]
        session.execute("SET TIME ZONE 'Asia/Tokyo'")
        session.execute("SET default_transaction_read_only = on")
        assert session.variables["timezone"] == "Asia/Tokyo"
        (shown,) = session.execute("SELECT '2024-01-01 00:00:00+00'::TIMESTAMPTZ::STRING").rows[0]
        assert shown == "2024-01-01 09:00:00+09"
        with pytest.raises(SQLError) as refused:
            session.execute("CREATE TABLE t (k INT PRIMARY KEY)")
        assert refused.value.code == "25006"
        session.close()
    finally:
        db.close()


def test_pg_backend_pid_is_stable_per_session_and_differs_between_them(db: DB) -> None:
    first, second = db.session(), db.session()
    [(pid, same)] = first.execute("SELECT pg_backend_pid(), pg_backend_pid()").rows
    assert same == pid and isinstance(pid, int)
    assert first.execute("SELECT pg_backend_pid()").rows == [(pid,)]
    assert second.execute("SELECT pg_backend_pid()").rows != [(pid,)]
