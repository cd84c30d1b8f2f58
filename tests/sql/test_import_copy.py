"""IMPORT INTO hands the gateway's columnar cache the copy of what it wrote
(feedkv.sql.columnar.rows_imported): made from the parsed columns, it equals the copy a
scan of the table makes, the first query reads it instead of copying the table, and
later writes advance it by deltas. A table the copy cannot stand for alone (rows there
before, or one it cannot hold) gets none, and its queries read the table as before."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.columnar import ColumnarCache, TableCopy, cache_for
from feedkv.sql.descriptor import TableDescriptor
from feedkv.testing.node_process import NodeProcess


def table(db: DB, name: str = "t") -> TableDescriptor:
    return db.session().resolve_table(db.transaction(), None, name)


def csv_file(path: Path, lines: list[str]) -> str:
    path.write_text("".join(f"{line}\n" for line in lines))
    return f"file://{path}"


def scanned(db: DB, desc: TableDescriptor) -> TableCopy:
    """The copy a scan of the table makes now (a cache of its own)."""
    copy = ColumnarCache().copy_for(db.transaction(), desc)
    assert copy is not None
    return copy


def both_ways(db: DB, query: str) -> list[tuple[object, ...]]:
    """The query's rows from the vectorized path, checked against the row engine's."""
    rows = db.sql(query).rows
    db.sql("SET vectorize = off")
    try:
        assert db.sql(query).rows == rows
    finally:
        db.sql("SET vectorize = on")
    return rows


# (CREATE TABLE, IMPORT's column list, CSV lines, a query over the table); the lines are
# out of key order, NULLs are written NULL
SHAPES = {
    "ints strings bools and columns not copied": (
        "CREATE TABLE t (id INT PRIMARY KEY, g INT, s STRING, b BOOL, d DECIMAL, f FLOAT)",
        "",
        [
            f"{(i * 37) % 500},{i % 7},{'NULL' if i % 11 == 0 else f's{i % 3}'},"
            f"{'true' if i % 2 else 'NULL'},{i}.5,1e{i % 5}"
            for i in range(500)
        ],
        "SELECT g, count(*), count(s), count(b), sum(id) FROM t GROUP BY g ORDER BY g",
    ),
    "a key of a string and an int": (
        "CREATE TABLE t (a STRING, b INT, v INT, PRIMARY KEY (a, b))",
        "",
        [f"k{(i * 13) % 40},{-i},{i}" for i in range(400)],
        "SELECT a, count(*), sum(v), min(b) FROM t GROUP BY a ORDER BY a",
    ),
    "no primary key (rowid)": (
        "CREATE TABLE t (x INT, s STRING)",
        "",
        [f"{i % 9},s{i % 4}" for i in range(300)],
        "SELECT s, count(*), sum(x) FROM t GROUP BY s ORDER BY s",
    ),
    "a descending key": (
        "CREATE TABLE t (a INT, b STRING, v INT, PRIMARY KEY (a DESC, b))",
        "",
        [f"{(i * 7) % 30},b{i % 4},{i}" for i in range(60)],
        "SELECT a, count(*), sum(v), max(b) FROM t GROUP BY a ORDER BY a",
    ),
    "defaults, narrow ints and CHAR": (
        "CREATE TABLE t (id INT2 PRIMARY KEY, c CHAR(3), n INT NOT NULL DEFAULT 7, v VARCHAR(4))",
        " (id, c, v)",
        [f"{300 - i},{'ab' if i % 2 else 'xyz'},v{i % 10}" for i in range(300)],
        "SELECT c, count(*), sum(n), max(v) FROM t GROUP BY c ORDER BY c",
    ),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_the_copy_an_import_hands_over_equals_a_scan_of_the_table(
    db: DB, tmp_path: Path, shape: str
) -> None:
    create, columns, lines, query = SHAPES[shape]
    db.sql(create)
    uri = csv_file(tmp_path / "t.csv", lines)
    db.sql(f"IMPORT INTO t{columns} CSV DATA ('{uri}') WITH nullif = 'NULL'")
    desc = table(db)
    cache = cache_for(db)
    imported = cache.get(desc)
    assert imported is not None and cache.offered == 1
    scan = scanned(db, desc)
    assert imported.keys == scan.keys
    assert imported.table.equals(scan.table)
    assert imported.live == len(lines)
    assert imported.as_of <= scan.as_of
    built = cache.built
    assert len(both_ways(db, query)) > 1
    assert cache.built == built  # the query read the copy the import made


def test_writes_after_an_import_advance_its_copy(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, g INT, a INT)")
    uri = csv_file(tmp_path / "t.csv", [f"{i},{i % 3},{i}" for i in range(3000)])
    db.sql(f"IMPORT INTO t CSV DATA ('{uri}')")
    query = "SELECT g, count(*), sum(a) FROM t GROUP BY g ORDER BY g"
    cache = cache_for(db)
    assert cache.offered == 1
    expected = [(g, 1000, Decimal(sum(range(g, 3000, 3)))) for g in range(3)]
    assert both_ways(db, query) == expected
    db.sql("UPDATE t SET a = a + 1 WHERE id < 3")
    db.sql("DELETE FROM t WHERE id = 5")
    db.sql("INSERT INTO t VALUES (5000, 0, 1)")
    rows = both_ways(db, query)
    assert rows == [
        (0, 1001, expected[0][2] + 2),
        (1, 1000, expected[1][2] + 1),
        (2, 999, expected[2][2] + 1 - 5),
    ]
    assert cache.built == 0 and cache.advanced >= 2  # only deltas, never a scan


def test_an_import_into_a_table_with_rows_and_no_copy_held_leaves_the_copy_to_a_scan(
    db: DB, tmp_path: Path
) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, g INT, a INT)")
    db.sql("INSERT INTO t VALUES (-1, 0, 100), (-2, 1, 200)")
    db.sql("DELETE FROM t WHERE id = -2")
    uri = csv_file(tmp_path / "t.csv", [f"{i},{i % 2},{i}" for i in range(10)])
    db.sql(f"IMPORT INTO t CSV DATA ('{uri}')")
    cache = cache_for(db)
    assert cache.offered == 0
    assert both_ways(db, "SELECT g, count(*), sum(a) FROM t GROUP BY g ORDER BY g") == [
        (0, 6, Decimal(120)),
        (1, 5, Decimal(25)),
    ]
    copy = cache.get(table(db))
    assert copy is not None and copy.live == 11


@pytest.mark.parametrize(
    "imported",
    [range(100, 150), range(-50, 0), range(-25, 125, 3)],
    ids=["above", "below", "interleaved"],
)
def test_an_import_into_a_table_whose_copy_is_held_hands_over_the_two_merged(
    db: DB, tmp_path: Path, imported: range
) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, g INT, a INT)")
    db.sql("INSERT INTO t SELECT i * 2, i % 2, i FROM generate_series(0, 49) AS s(i)")
    query = "SELECT g, count(*), sum(a), min(id), max(id) FROM t GROUP BY g ORDER BY g"
    db.sql(query)  # the copy is held now
    db.sql("UPDATE t SET a = a + 1000 WHERE id < 10")  # changes after it: dead rows
    db.sql("DELETE FROM t WHERE id = 20")
    lines = [f"{i},{i % 2},{i}" for i in imported if i % 2 or not 0 <= i < 100 or i == 20]
    uri = csv_file(tmp_path / "t.csv", lines[::-1])
    db.sql(f"IMPORT INTO t CSV DATA ('{uri}')")
    desc = table(db)
    cache = cache_for(db)
    merged = cache.get(desc)
    assert merged is not None and cache.offered == 1
    scan = scanned(db, desc)
    assert merged.keys == scan.keys
    assert merged.table.equals(scan.table)
    assert merged.live == 49 + len(lines)
    built = cache.built
    assert len(both_ways(db, query)) == 2
    assert cache.built == built


def test_an_import_after_every_row_was_deleted_hands_over_its_copy(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, g INT, a INT)")
    db.sql("INSERT INTO t VALUES (1, 0, 100), (2, 1, 200)")
    db.sql("DELETE FROM t WHERE true")
    uri = csv_file(tmp_path / "t.csv", [f"{i},{i % 2},{i}" for i in range(10)])
    db.sql(f"IMPORT INTO t CSV DATA ('{uri}')")
    desc = table(db)
    copy = cache_for(db).get(desc)
    assert copy is not None and cache_for(db).offered == 1
    assert copy.table.equals(scanned(db, desc).table)


@pytest.mark.parametrize(
    ("create", "query"),
    [
        (
            "CREATE TABLE t (id INT PRIMARY KEY, g INT, a INT, FAMILY f1 (id, g), FAMILY f2 (a))",
            "SELECT g, count(*), sum(a) FROM t GROUP BY g ORDER BY g",
        ),
        (
            "CREATE TABLE t (id INT PRIMARY KEY, g INT, a INT, d INT AS (a * 2) STORED)",
            "SELECT g, count(*), sum(d) FROM t GROUP BY g ORDER BY g",
        ),
        (
            "CREATE TABLE t (id INT PRIMARY KEY, g INT, a INT, d INT AS (a * 2) VIRTUAL)",
            "SELECT g, count(*), sum(d) FROM t GROUP BY g ORDER BY g",
        ),
    ],
    ids=["families", "stored computed", "virtual computed"],
)
def test_tables_the_import_cannot_copy_are_read_as_before(
    db: DB, tmp_path: Path, create: str, query: str
) -> None:
    db.sql(create)
    uri = csv_file(tmp_path / "t.csv", [f"{i},{i % 2},{i}" for i in range(20)])
    db.sql(f"IMPORT INTO t (id, g, a) CSV DATA ('{uri}')")
    assert cache_for(db).offered == 0
    assert both_ways(db, query) == [
        (g, 10, Decimal(sum(range(g, 20, 2)) * (2 if "d" in query else 1))) for g in range(2)
    ]


def test_a_failed_import_hands_over_no_copy(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, g INT, a INT)")
    good = csv_file(tmp_path / "a.csv", [f"{i},0,{i}" for i in range(10)])
    bad = csv_file(tmp_path / "b.csv", ["3,1,1"])  # a key twice
    with pytest.raises(SQLError) as caught:
        db.sql(f"IMPORT INTO t CSV DATA ('{good}', '{bad}')")
    assert caught.value.code == "23505"
    assert cache_for(db).offered == 0 and cache_for(db).get(table(db)) is None
    assert both_ways(db, "SELECT count(*) FROM t") == [(0,)]


def test_a_copy_of_an_older_version_never_replaces_a_newer_one(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, g INT)")
    uri = csv_file(tmp_path / "t.csv", ["1,2", "3,4"])
    db.sql(f"IMPORT INTO t CSV DATA ('{uri}')")
    desc = table(db)
    cache = cache_for(db)
    held = cache.get(desc)
    assert held is not None
    older = replace(held, version=desc.version - 1)
    assert not cache.offer(older)  # e.g. a background build that read the old version
    assert cache.get(desc) is held
    assert cache.get(replace(desc, version=desc.version - 1)) is None
    assert held.merged(held) is None  # a key in both: no copy of one table


def test_queries_after_imports_into_a_server_answer_as_the_reference(tmp_path: Path) -> None:
    """Through a node's SQL port: the copies the imports hand over (one of an empty
    table, one merged with the copy held) answer a GROUP BY and a join as the row
    engine does, before and after writes."""
    extern = tmp_path / "extern"
    extern.mkdir()
    customers = csv_file(extern / "c.csv", [f"{i},r{i % 3}" for i in range(50)])
    first = csv_file(extern / "o1.csv", [f"{i},{i % 50},{i % 7}" for i in range(0, 2000, 2)])
    second = csv_file(extern / "o2.csv", [f"{i},{i % 50},{i % 5}" for i in range(1, 2000, 2)])
    queries = (
        "SELECT customer_id, count(*), sum(amount) FROM orders GROUP BY customer_id",
        "SELECT c.region, count(*), sum(o.amount) FROM orders o "
        "JOIN customers c ON o.customer_id = c.id GROUP BY c.region",
    )
    node = NodeProcess(tmp_path / "store", "--external-io-dir", str(extern))
    try:
        with psycopg.connect(node.sql_url, autocommit=True) as conn:

            def answers() -> list[list[tuple[object, ...]]]:
                conn.execute("SET vectorize = on")
                fast = [sorted(conn.execute(q).fetchall()) for q in queries]
                conn.execute("SET vectorize = off")
                reference = [sorted(conn.execute(q).fetchall()) for q in queries]
                assert fast == reference
                return fast

            conn.execute("CREATE TABLE customers (id INT PRIMARY KEY, region STRING)")
            conn.execute("CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT, amount INT)")
            conn.execute(f"IMPORT INTO customers CSV DATA ('{customers}')")
            conn.execute(f"IMPORT INTO orders CSV DATA ('{first}')")
            grouped, joined = answers()
            assert len(grouped) == 25 and sum(n for _c, n, _s in grouped) == 1000
            conn.execute(f"IMPORT INTO orders CSV DATA ('{second}')")
            grouped, joined = answers()
            assert len(grouped) == 50 and sum(n for _r, n, _s in joined) == 2000
            conn.execute("UPDATE orders SET amount = amount + 1 WHERE id < 100")
            conn.execute("DELETE FROM orders WHERE id >= 1990")
            grouped, joined = answers()
            assert sum(n for _r, n, _s in joined) == 1990
    finally:
        node.terminate()
