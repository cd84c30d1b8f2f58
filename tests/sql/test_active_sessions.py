"""A session's active query (feedkv.sql.active_sessions): its id, drawn when the query
is first asked for, is the same at every ask while the query runs and differs from any
other query's."""

from __future__ import annotations

import itertools

from feedkv.sql.active_sessions import SessionRegistry


def test_a_query_keeps_its_id_while_it_runs_and_the_next_gets_another() -> None:
    wall = itertools.count(1_000)
    registry = SessionRegistry(lambda: next(wall), lambda: 7)
    session = registry.register("root", lambda: None, lambda: "")
    assert session.query is None
    session.begin("SELECT 1")
    first = session.query
    assert first is not None and first.text == "SELECT 1"
    again = session.query
    assert again is not None and again.id == first.id
    session.finish()
    assert session.query is None and session.last_query == "SELECT 1"
    session.begin("SELECT 1")
    second = session.query
    assert second is not None and second.id != first.id
    assert second.id > first.id  # later start, so it sorts after
    assert int(second.id[16:], 16) & 0xFFFFFFFF == 7  # the node id in the low half
