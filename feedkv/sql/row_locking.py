"""A SELECT's locking clauses (``FOR UPDATE``, ``FOR NO KEY UPDATE``, ``FOR SHARE``,
``FOR KEY SHARE``, each with ``OF t, ...`` and ``NOWAIT``): which tables' rows the
statement reads with locks, and the shapes it refuses, as CockroachDB.

- ``FOR UPDATE`` and ``FOR NO KEY UPDATE`` lock every row the scans of the tables they
  name (all the FROM clause's tables without ``OF``) read, exclusively, until the
  transaction ends: the lock UPDATE and DELETE take (:mod:`feedkv.kv.lock_table`). A
  scan locks all the rows it reads, those a filter later drops among them, as
  CockroachDB's does when the filter is not part of the scan's span.
- ``FOR SHARE`` and ``FOR KEY SHARE`` take no lock: CockroachDB's serializable isolation
  takes none unless ``enable_shared_locking_for_serializable`` is on (serializability
  never needs them).
- ``NOWAIT`` fails a read that meets a row another transaction holds with 55P03;
  ``SKIP LOCKED`` leaves such rows out of the result (a job queue's workers each take
  rows no other holds): a row is held by another transaction's lock or its intent,
  which is not pushed, so the intent of a transaction that has finished but whose
  intents are not yet resolved is skipped as well (CockroachDB asks the lock table).
  ``FOR SHARE SKIP LOCKED`` takes no lock and reads as ``FOR SHARE``. Refused (0A000)
  on a table of more than one column family, whose rows' keys are locked apart.
- Refused (0A000), as in CockroachDB and PostgreSQL: a locking clause with GROUP BY,
  HAVING, DISTINCT, aggregates or window functions (no row of the result is a table's
  row), with AS OF SYSTEM TIME (a historical read locks nothing), and on the nullable
  side of an outer join; an ``OF`` naming no FROM table is 42P01; an exclusive lock in a
  READ ONLY transaction is 25006.
- Refused here and not in CockroachDB (0A000, never ignored): an exclusive lock on a
  subquery, CTE or view in FROM (name the tables to lock with ``OF``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.execution import RowLocking
from feedkv.sql.expr import contains_aggregate

__all__ = ["check_locking", "source_name", "table_locking"]


def source_name(source: st.Source | None, alias: str | None) -> str:
    """The name a FROM or JOIN source goes by in ``OF``: its alias, else its table's."""
    if alias:
        return alias
    return source.name if isinstance(source, st.TableName) else ""


def check_locking(s: st.Select, names: Sequence[str], read_only: bool) -> None:
    """Refuse ``s``'s locking clauses where they cannot apply (see the module
    docstring); ``names``: what its FROM sources go by; ``read_only``: whether its
    transaction is READ ONLY. Called before any row is read."""
    if not s.locks:
        return
    strength = s.locks[0].strength
    if s.as_of is not None:
        raise SQLError("0A000", f"{strength} is not allowed with AS OF SYSTEM TIME")
    nodes = [*s.items, *(node for node, _ in s.order_by)]
    for clause, present in (
        ("GROUP BY clause", bool(s.group_by)),
        ("HAVING clause", s.having is not None),
        ("DISTINCT clause", s.distinct or bool(s.distinct_on)),
        ("aggregate functions", any(contains_aggregate(node) for node in nodes)),
        ("window functions", any(node.find(exp.Window) for node in nodes)),
    ):
        if present:
            raise SQLError("0A000", f"{strength} is not allowed with {clause}")
    for lock in s.locks:
        for named in lock.of:
            if named not in names:
                raise SQLError(
                    "42P01",
                    f'relation "{named}" in {lock.strength} clause not found in FROM clause',
                )
    exclusive = next((lock for lock in s.locks if lock.exclusive), None)
    if exclusive is not None and read_only:
        raise SQLError(
            "25006", f"cannot execute SELECT {exclusive.strength} in a read-only transaction"
        )


def table_locking(s: st.Select, name: str) -> RowLocking | None:
    """How ``s`` reads the rows of its source called ``name``: locked by the exclusive
    clauses that name it (or name no table), failing at once if any of them says
    NOWAIT, else skipping the rows others hold if any says SKIP LOCKED (as PostgreSQL);
    ``None``: without a lock."""
    covering = [lock for lock in s.locks if lock.exclusive and (not lock.of or name in lock.of)]
    if not covering:
        return None
    if any(lock.nowait for lock in covering):
        return "nowait"
    return "skip" if any(lock.skip_locked for lock in covering) else "wait"
