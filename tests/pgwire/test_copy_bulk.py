"""COPY FROM STDIN outside a transaction writes its rows in bulk (feedkv.sql.copy_rows):
one command of committed values for a table in one range, all rows or none, rows that
feeds see as ordinary writes; whatever the bulk path declines runs as INSERTs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors

from feedkv import DB
from feedkv.rangefeed.event import Value
from feedkv.sql import catalog
from feedkv.sql.row_codec import family_key, row_prefix, table_span
from feedkv.testing.feed_validator import read_until_resolved
from feedkv.util.keys import Span

DEADLINE_S = 30.0


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE b (k INT PRIMARY KEY, v STRING NOT NULL, n INT NOT NULL)")
        yield c


def span_of(db: DB, name: str) -> Span:
    snapshot = catalog.Snapshot(db, db.now())
    desc = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), name)
    return table_span(desc.id)


def copy(conn: psycopg.Connection[Any], text: str) -> str:
    with conn.cursor() as cur:
        with cur.copy("COPY b FROM STDIN") as out:
            out.write(text)
        return cur.statusmessage or ""


def test_a_copy_writes_its_rows_as_one_command_that_a_feed_sees(
    db: DB, conn: psycopg.Connection[Any]
) -> None:
    span = span_of(db, "b")
    since = db.now()
    with db.rangefeed([span], since) as feed:
        assert copy(conn, "".join(f"{k}\tv{k}\t{k % 7}\n" for k in range(2500, 0, -1))) == (
            "COPY 2500"
        )
        written = db.scan(span.start, span.end)
        events = read_until_resolved(feed, max(kv.ts for kv in written), timeout_s=DEADLINE_S)
    assert len(written) == 2500
    assert len({kv.ts for kv in written}) == 1  # one Ingest command: one timestamp
    values = {e.key: e.value for e in events if isinstance(e, Value)}
    assert values == {kv.key: kv.value for kv in written}
    assert conn.execute("SELECT count(*), min(k), max(k), sum(n) FROM b").fetchone() == (
        2500,
        1,
        2500,
        sum(k % 7 for k in range(1, 2501)),
    )


def test_a_copy_meeting_an_existing_row_fails_whole_and_keeps_it(
    conn: psycopg.Connection[Any],
) -> None:
    conn.execute("INSERT INTO b VALUES (1500, 'old', 0)")
    with pytest.raises(errors.UniqueViolation) as caught:
        copy(conn, "".join(f"{k}\tnew\t1\n" for k in range(2000)))
    assert "(k)=(1500)" in str(caught.value)
    assert conn.execute("SELECT k, v FROM b").fetchall() == [(1500, "old")]


def test_a_copy_across_ranges_is_one_transaction_all_or_nothing(
    db: DB, conn: psycopg.Connection[Any]
) -> None:
    """Two ranges: no Ingest of committed values per range (a reader could see one
    range's rows without the other's), but a transaction's two phases, with an Ingest of
    intents per range (tests/pgwire/test_copy_ranges.py)."""
    snapshot = catalog.Snapshot(db, db.now())
    desc = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), "b")
    left, right = db.split(row_prefix(desc, (1000,)))
    assert left.span.end == right.span.start == row_prefix(desc, (1000,))
    conn.execute("INSERT INTO b VALUES (1500, 'old', 0)")
    with pytest.raises(errors.UniqueViolation):
        copy(conn, "".join(f"{k}\tnew\t1\n" for k in range(2000)))
    assert conn.execute("SELECT count(*) FROM b").fetchone() == (1,)
    rows = "".join(f"{k}\tnew\t1\n" for k in range(2000) if k != 1500)
    assert copy(conn, rows) == "COPY 1999"
    span = span_of(db, "b")
    old = family_key(row_prefix(desc, (1500,)), 0)
    written = [kv for kv in db.scan(span.start, span.end) if kv.key != old]
    assert len(written) == 1999
    assert len({kv.ts for kv in written}) == 1  # one commit timestamp on both ranges


@pytest.mark.parametrize(
    ("text", "error", "where"),
    [
        ("1\ta\t1\n2\tb\tx\n", errors.InvalidTextRepresentation, "line 2"),
        ("1\ta\t1\n2\t\\N\t2\n", errors.NotNullViolation, "v"),
        ("1\ta\t1\n1\tb\t2\n", errors.UniqueViolation, "(k)=(1)"),
        ("1\ta\t1\n2\tb\n", errors.BadCopyFileFormat, "line 2"),
    ],
)
def test_bad_rows_are_named_and_nothing_is_written(
    conn: psycopg.Connection[Any], text: str, error: type[Exception], where: str
) -> None:
    with pytest.raises(error) as caught:
        copy(conn, text)
    assert where in str(caught.value)
    assert conn.execute("SELECT count(*) FROM b").fetchone() == (0,)


def test_rows_the_bulk_path_declines_load_as_inserts(db: DB, pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE m (k INT PRIMARY KEY, v STRING, d DECIMAL)")
        with conn.cursor().copy("COPY m FROM STDIN") as out:
            out.write("1\t\\N\t1.50\n2\ttwo\t\\N\n")
        assert conn.execute("SELECT k, v, d::STRING FROM m ORDER BY k").fetchall() == [
            (1, None, "1.50"),
            (2, "two", None),
        ]
