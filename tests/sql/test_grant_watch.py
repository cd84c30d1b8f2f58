"""The watch on users and grants calls back once it has caught up and after each GRANT,
REVOKE (of privileges or roles), CREATE USER or DROP USER."""

from __future__ import annotations

import queue

from feedkv import DB
from feedkv.sql.grant_watch import GrantWatch

DEADLINE_S = 30.0


def _watch(db: DB) -> tuple[GrantWatch, queue.SimpleQueue[None]]:
    calls: queue.SimpleQueue[None] = queue.SimpleQueue()
    watch = GrantWatch(db, lambda: calls.put(None))
    calls.get(timeout=DEADLINE_S)  # caught up
    return watch, calls


def _drain(calls: queue.SimpleQueue[None]) -> None:
    while not calls.empty():
        calls.get_nowait()


def test_each_change_of_the_grants_or_users_calls_back(db: DB) -> None:
    db.sql("CREATE TABLE notes (id INT PRIMARY KEY)")
    watch, calls = _watch(db)
    try:
        for statement in (
            "CREATE USER alice",
            "GRANT SELECT ON notes TO alice",
            "REVOKE SELECT ON notes FROM alice",
            "CREATE ROLE readers",
            "GRANT readers TO alice",
            "REVOKE readers FROM alice",
            "DROP USER alice",
        ):
            _drain(calls)
            db.sql(statement)
            calls.get(timeout=DEADLINE_S)
    finally:
        watch.close()
