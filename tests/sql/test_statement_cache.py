"""The parse caches drop statements without leaving garbage cycles: past 2,048 texts
(literal values in the text, an ORM's generated SQL) every new text drops an old one,
whose sqlglot tree (children linked to parents) waited for the cyclic GC; its parent
links are now cut first, unless something still holds it (a session's plan, a prepared
statement, a statement running), which may still read them."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator

import pytest
from sqlglot import exp

from feedkv import DB
from feedkv.sql import session as session_module
from feedkv.sql import statements as st
from feedkv.sql import views
from feedkv.sql.session import prepare

CACHED = 2048


@pytest.fixture
def gc_off() -> Iterator[None]:
    session_module._prepare_cached.cache_clear()
    session_module._prepare_long.cache_clear()
    views.view_query.cache_clear()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def garbage_after(run: Iterator[object] | list[object]) -> Counter[str]:
    """The objects only the cyclic GC frees once ``run`` is consumed."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in run:
            pass
        gc.collect()
        return Counter(type(o).__qualname__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()


@pytest.mark.usefixtures("gc_off")
def test_texts_past_the_cache_leave_no_cycles() -> None:
    for n in range(CACHED):  # fill it
        prepare(f"SELECT k, v FROM t WHERE k = {n} AND v > 'x'")
    assert len(session_module._prepare_cached) == CACHED
    more = (prepare(f"UPDATE t SET v = 'y' WHERE k = {n}") for n in range(500))
    assert garbage_after(more) == Counter()
    assert len(session_module._prepare_cached) == CACHED


@pytest.mark.usefixtures("gc_off")
def test_a_held_statement_is_left_whole_when_dropped() -> None:
    ((held, _count),) = prepare("SELECT k FROM t WHERE k IN (SELECT 1)")
    assert isinstance(held, st.Select)
    for n in range(CACHED):
        prepare(f"SELECT {n}")
    ((again, _count),) = prepare("SELECT k FROM t WHERE k IN (SELECT 1)")
    assert again is not held  # it was dropped, and parsed anew
    assert held.where is not None
    assert all(node.parent is not None for node in held.where.walk() if node is not held.where)
    column = held.where.find(exp.Column)
    assert column is not None and isinstance(column.parent, exp.In)


@pytest.mark.usefixtures("gc_off")
def test_statements_run_past_the_cache_leave_no_cycles(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("CREATE VIEW w AS SELECT k FROM t")
    session = db.session()
    for n in range(CACHED):
        prepare(f"SELECT {n}")
    runs = (
        session.execute(f"INSERT INTO t VALUES ({n}, 'v{n}')").tag
        + session.execute(f"SELECT k FROM w WHERE k = {n}").tag
        for n in range(200)
    )
    assert garbage_after(runs) == Counter()
    assert db.sql("SELECT count(*) FROM t").rows == [(200,)]
