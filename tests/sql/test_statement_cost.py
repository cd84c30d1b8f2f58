"""A write's work grows with its rows, no faster: the same statement over twice the
rows makes at most a little over twice the Python function calls (counted with
:func:`sys.setprofile` on the thread that runs it, so the count does not depend on
the machine's speed or load). A pass over every write the transaction holds, made
for each row it reads, doubles that ratio."""

from __future__ import annotations

from typing import Any

import pytest

from feedkv import DB
from feedkv.testing.call_count import count_calls

ROWS = 1000
# NB: linear work gives 1.8 to 2.0; the pass over every buffered write per row read
# (UPSERT or ON CONFLICT DO UPDATE that reads each row) gave 3.4 to 3.6 at these sizes
GROWTH_LIMIT = 2.4

SETUP = {
    "rowid": "CREATE TABLE dest (s STRING)",
    "rowid_indexed": "CREATE TABLE dest (s STRING, INDEX (s))",
    "keyed": "CREATE TABLE dest (s STRING PRIMARY KEY, n INT)",
}

STATEMENTS = [
    ("rowid", "UPSERT INTO dest (s) SELECT s FROM src"),
    ("rowid_indexed", "UPSERT INTO dest (s) SELECT s FROM src"),
    ("rowid", "INSERT INTO dest (s) SELECT s FROM src"),
    (
        "keyed",
        "INSERT INTO dest (s, n) SELECT s, 1 FROM src ON CONFLICT (s) DO UPDATE "
        "SET n = dest.n + 1 WHERE dest.n < 5",
    ),
    ("keyed", "UPDATE dest SET n = n + 1"),
    ("keyed", "DELETE FROM dest WHERE n > 0"),
]


def _statement_calls(db: DB, table: str, text: str, rows: int) -> int:
    db.sql("DROP TABLE IF EXISTS src")
    db.sql("DROP TABLE IF EXISTS dest")
    db.sql("CREATE TABLE src (s STRING)")
    db.sql(SETUP[table])
    db.sql(f"INSERT INTO src (s) SELECT 'v' || i::STRING FROM generate_series(1, {rows}) AS g(i)")
    if not text.startswith(("UPSERT", "INSERT")):
        db.sql("INSERT INTO dest (s, n) SELECT s, 0 FROM src")
    if text.startswith("DELETE"):
        db.sql("UPDATE dest SET n = 1")
    session = db.session()
    # NB: in a transaction, committed after the count: an autocommit's commit may
    # refresh its reads or not, as the closed timestamp happens to move meanwhile
    session.execute("BEGIN")
    result: list[Any] = []
    calls = count_calls(lambda: result.append(session.execute(text)))
    session.execute("COMMIT")
    assert result[0].tag.endswith(f" {rows}")
    return calls


@pytest.mark.parametrize(("table", "text"), STATEMENTS)
def test_a_write_over_twice_the_rows_does_about_twice_the_work(
    db: DB, table: str, text: str
) -> None:
    once = _statement_calls(db, table, text, ROWS)
    twice = _statement_calls(db, table, text, 2 * ROWS)
    assert once > ROWS  # NB: the count saw the statement run
    assert twice <= GROWTH_LIMIT * once, (once, twice)
