"""COPY FROM STDIN into a table split into several ranges: each range's rows go as one
batch of the transaction's intents and are resolved as one batch, and the COPY keeps a
transaction's promises: all rows or none, no reader sees part of it, and a feed sees
every row once, at the commit timestamp."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors

from feedkv import DB
from feedkv.kv.api import MAX_PRIORITY
from feedkv.kv.db import LocalTransport
from feedkv.rangefeed.event import Value
from feedkv.sql import catalog
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.row_codec import family_key, row_prefix, table_span
from feedkv.storage import mvcc
from feedkv.storage.intent import Intent
from feedkv.testing.feed_validator import read_until_resolved
from feedkv.testing.waiting import wait_until
from feedkv.util.keys import Span

DEADLINE_S = 30.0
ROWS = 2000
CUTS = (500, 1000, 1500)  # four ranges


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE b (k INT PRIMARY KEY, v STRING NOT NULL, n INT NOT NULL)")
        yield c


def table(db: DB) -> TableDescriptor:
    snapshot = catalog.Snapshot(db, db.now())
    return catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), "b")


def split(db: DB, desc: TableDescriptor) -> None:
    for cut in CUTS:
        db.split(row_prefix(desc, (cut,)))


def row_key(desc: TableDescriptor, k: int) -> bytes:
    return family_key(row_prefix(desc, (k,)), 0)


def rows_text(keys: Iterator[int] | range) -> str:
    return "".join(f"{k}\tv{k}\t{k % 7}\n" for k in keys)


def copy(conn: psycopg.Connection[Any], text: str) -> str:
    with conn.cursor() as cur:
        with cur.copy("COPY b FROM STDIN") as out:
            out.write(text)
        return cur.statusmessage or ""


def intents(db: DB, span: Span) -> list[Intent]:
    transport = db.transport
    assert isinstance(transport, LocalTransport)
    with transport.store.engine.snapshot() as snap:
        return mvcc.scan_intents(snap, span)


@pytest.mark.parametrize("order", ["ascending", "shuffled"])
def test_a_feed_sees_each_row_of_a_copy_across_ranges_once_at_its_commit_timestamp(
    db: DB, conn: psycopg.Connection[Any], order: str
) -> None:
    desc = table(db)
    split(db, desc)
    span = table_span(desc.id)
    keys = list(range(ROWS)) if order == "ascending" else [(k * 7919) % ROWS for k in range(ROWS)]
    since = db.now()
    with db.rangefeed([span], since) as feed:
        assert copy(conn, rows_text(keys)) == f"COPY {ROWS}"
        written = db.scan(span.start, span.end)
        commit_ts = max(kv.ts for kv in written)
        events = read_until_resolved(feed, commit_ts, timeout_s=DEADLINE_S)
    assert len(written) == ROWS
    assert {kv.ts for kv in written} == {commit_ts}  # one transaction, four ranges
    values = [(e.key, e.value, e.ts) for e in events if isinstance(e, Value)]
    assert sorted(values) == [(kv.key, kv.value, commit_ts) for kv in written]  # once each
    assert intents(db, span) == []
    assert conn.execute("SELECT count(*), sum(n) FROM b").fetchone() == (
        ROWS,
        sum(k % 7 for k in range(ROWS)),
    )


def test_a_copy_across_ranges_failing_in_its_last_range_writes_nothing(
    db: DB, conn: psycopg.Connection[Any]
) -> None:
    desc = table(db)
    split(db, desc)
    span = table_span(desc.id)
    conn.execute("INSERT INTO b VALUES (1999, 'old', 0)")
    since = db.now()
    with db.rangefeed([span], since) as feed:
        with pytest.raises(errors.UniqueViolation) as caught:
            copy(conn, rows_text(range(ROWS)))
        assert "(k)=(1999)" in str(caught.value)
        assert conn.execute("SELECT k, v FROM b").fetchall() == [(1999, "old")]
        wait_until(lambda: not intents(db, span), timeout_s=DEADLINE_S, what="intents removed")
        events = read_until_resolved(feed, db.now(), timeout_s=DEADLINE_S)
    assert [e for e in events if isinstance(e, Value)] == []  # no row of it, ever
    assert copy(conn, rows_text(range(ROWS - 1))) == f"COPY {ROWS - 1}"
    assert conn.execute("SELECT count(*) FROM b").fetchone() == (ROWS,)


def test_a_reader_sees_none_of_a_copy_held_up_in_its_last_range_then_all_of_it(
    db: DB, conn: psycopg.Connection[Any], pg_url: str
) -> None:
    """The COPY lays its intents in the first three ranges and then waits on another
    transaction's intent in the fourth; a reader meanwhile sees none of its rows (it
    pushes the COPY above its read), and once the other transaction rolls back, the
    COPY commits every row at one timestamp."""
    desc = table(db)
    split(db, desc)
    span = table_span(desc.id)
    blocker = db.transaction(priority=MAX_PRIORITY)  # NB: the COPY cannot push it away
    blocker.put_now(row_key(desc, ROWS - 1), b"held")
    outcome: list[object] = []

    def run_copy() -> None:
        try:
            with psycopg.connect(pg_url, autocommit=True) as other:
                outcome.append(copy(other, rows_text(range(ROWS))))
        except BaseException as exc:  # shown by the assertion below
            outcome.append(exc)

    loader = threading.Thread(target=run_copy)
    loader.start()
    try:
        first = Span(span.start, row_prefix(desc, (CUTS[-1],)))
        wait_until(
            lambda: len([i for i in intents(db, first) if i.txn.id != blocker.id]) == CUTS[-1],
            timeout_s=DEADLINE_S,
            what="the COPY's intents in the first three ranges",
        )
        reader = db.transaction(priority=MAX_PRIORITY)
        seen = reader.scan(first.start, first.end)
        reader.commit()
        assert seen == []
        assert outcome == []  # still held up
    finally:
        blocker.rollback()
        loader.join(timeout=DEADLINE_S)
    assert outcome == [f"COPY {ROWS}"]
    written = db.scan(span.start, span.end)
    assert len(written) == ROWS
    assert len({kv.ts for kv in written}) == 1
    assert min(kv.ts for kv in written) > (reader.commit_ts or db.now())
    assert intents(db, span) == []
