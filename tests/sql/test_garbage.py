"""Statements leave no reference cycles behind, so running them never wakes CPython's
cyclic GC: under 32 sessions its collections cost INSERT and UPDATE 13-14 us a statement
(a tenth of their time), and a conflict or a failed condition left a cycle through the
frames of its traceback. Every node thread counts: a cycle made anywhere shows here."""

from __future__ import annotations

import gc
import itertools
import threading
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql import session as session_module
from feedkv.sql import views
from feedkv.sql.session import Session


@pytest.fixture
def gc_off() -> Iterator[None]:
    """The cyclic GC runs only when a test asks, and the process's statement caches start
    empty: full of earlier tests' statements, they would evict one (a sqlglot tree, whose
    children link to their parents) whenever a node thread prepares a new text, and
    that cycle is the cache's, not the statement's under test."""
    session_module._prepare_cached.cache_clear()
    session_module._prepare_long.cache_clear()
    views.view_query.cache_clear()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def cycles_left(run: Callable[[int], object], times: int = 20) -> Counter[str]:
    """The objects that only the cyclic GC frees after ``run(i)`` ran ``times`` times,
    once it has run once (a statement's first run parses it, and sqlglot's trees link
    children to parents)."""
    run(times)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for i in range(times):
            run(i)
        gc.collect()
        return Counter(type(o).__qualname__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()


@pytest.mark.slow(10)
@pytest.mark.isolated  # NB: a thread an earlier test left running SQL makes cycles too
@pytest.mark.usefixtures("gc_off")
def test_statements_and_their_failures_leave_no_cycles(any_db: DB) -> None:
    # NB: two columns, so an UPDATE of v rewrites a row blind, failing at commit if it is missing
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    session = any_db.session()
    keys = itertools.count()

    def duplicate(i: int) -> None:
        with pytest.raises(SQLError, match="duplicate key"):
            session.execute("INSERT INTO t (k, v) VALUES (0, 'again')")

    sessions = [any_db.session() for _ in range(4)]

    def fail_missing_rows(session: Session, first: int) -> None:
        for k in range(first, first + 5):
            session.execute("UPDATE t SET v = 'w' WHERE k = $1", k)

    def failing_at_once(i: int) -> None:
        """Missing-row UPDATEs from four sessions at once: over gRPC, calls that overlap
        share the client's stream, which the node answers on another path."""
        threads = [
            threading.Thread(target=fail_missing_rows, args=(session, 2_000 + 100 * i + 5 * n))
            for n, session in enumerate(sessions)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def in_transaction(i: int) -> None:
        session.execute("BEGIN")
        session.execute("UPDATE t SET v = v || 'x' WHERE k = $1", i)
        session.execute("COMMIT")

    runs: dict[str, Callable[[int], object]] = {
        "insert": lambda i: session.execute("INSERT INTO t (k, v) VALUES ($1, 'v')", next(keys)),
        "update": lambda i: session.execute("UPDATE t SET v = 'w' WHERE k = $1", i),
        "update of a missing row": lambda i: session.execute(
            "UPDATE t SET v = 'w' WHERE k = $1", 1_000 + i
        ),
        "duplicate insert": duplicate,
        "failures at once": failing_at_once,
        "select": lambda i: session.execute("SELECT v FROM t WHERE k = $1", i),
        "transaction": in_transaction,
        "kv put and get": lambda i: any_db.get(b"k%d" % i) or any_db.put(b"k%d" % i, b"v"),
    }
    for name, run in runs.items():
        assert cycles_left(run) == Counter(), name
