"""Large INSERTs pay per batch: a loader's statement text is parsed and planned once."""

from __future__ import annotations

from feedkv import DB
from feedkv.sql.session import prepare

BATCH = 1000
INSERT = "INSERT INTO t VALUES " + ", ".join(f"(${2 * j + 1}, ${2 * j + 2})" for j in range(BATCH))


def test_a_long_insert_with_placeholders_is_parsed_once() -> None:
    assert len(INSERT) > 2000
    assert prepare(INSERT) is prepare(INSERT)


def test_a_long_insert_of_literal_rows_is_not_kept() -> None:
    literal = "INSERT INTO t VALUES " + ", ".join(f"({j}, 'v{j}')" for j in range(BATCH))
    assert prepare(literal) is not prepare(literal)
    assert prepare(literal)[0][1] == 0  # no placeholders


def test_the_same_long_insert_run_again_with_new_values_writes_them(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    session = db.session()
    try:
        for lo in (0, BATCH):
            params = [p for k in range(lo, lo + BATCH) for p in (k, f"v{k}")]
            assert session.execute(INSERT, *params).tag == f"INSERT 0 {BATCH}"
    finally:
        session.close()
    rows = db.sql("SELECT count(*), min(k), max(k), max(v) FROM t").rows
    assert rows == [(2 * BATCH, 0, 2 * BATCH - 1, "v999")]
