"""Sequences under concurrency: nextval never repeats a value, across sessions and
threads, embedded or over gRPC (the KV increment retries a conditional put that lost a
race)."""

from __future__ import annotations

import threading

import pytest

from feedkv import DB
from feedkv.errors import InvalidArgumentError


def test_concurrent_nextval_hands_out_each_value_once(any_db: DB) -> None:
    any_db.session().execute("CREATE SEQUENCE s")
    threads, per_thread = 4, 25
    taken: list[list[int]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []

    def take(out: list[int]) -> None:
        try:
            session = any_db.session()
            for _ in range(per_thread):
                out.append(session.execute("SELECT nextval('s')").rows[0][0])
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=take, args=(out,)) for out in taken]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert not worker.is_alive(), "a nextval never returned"
    assert errors == []
    values = sorted(v for out in taken for v in out)
    assert values == list(range(1, threads * per_thread + 1))
    for out in taken:  # each session sees its own values increase
        assert out == sorted(out)


def test_increment_refuses_a_key_that_holds_no_integer(db: DB) -> None:
    db.put(b"not-a-number", b"abc")
    with pytest.raises(InvalidArgumentError, match="not an integer"):
        db.increment(b"not-a-number", 1)
    assert db.increment(b"counter", 5, initial=10) == 15
    assert db.increment(b"counter", -1) == 14
    assert db.get(b"counter") == b"14"
