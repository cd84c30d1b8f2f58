"""``WHERE k IN (values...)`` and ``WHERE k = ANY (array)`` on the primary key's first
column read one span per distinct listed key (in key order, as a scan gives the rows)
instead of the whole table; EXPLAIN shows the spans. Values that do not keep their type
as the key's, or a list naming a column, read the table as before."""

from __future__ import annotations

import pytest

from feedkv import DB

HEADER = ["distribution: local", "vectorized: true", ""]


@pytest.fixture
def t(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("CREATE TABLE u (a INT, b INT, c INT, PRIMARY KEY (a DESC, b))")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (5, 'e')")
    db.sql("INSERT INTO u VALUES (1, 1, 1), (1, 2, 2), (2, 1, 3), (3, 3, 3)")
    return db


def spans(db: DB, statement: str, *params: object) -> str:
    lines = [line for (line,) in db.sql(f"EXPLAIN {statement}", *params).rows]
    assert lines[:3] == HEADER
    found = [line.strip() for line in lines if line.strip().startswith("spans: ")]
    assert len(found) == 1, lines
    return found[0].removeprefix("spans: ")


@pytest.mark.parametrize(
    ("where", "expected", "rows"),
    [
        ("k IN (3, 1, 3, NULL, 9)", "[/1 - /1] [/3 - /3] [/9 - /9]", [(1, "a"), (3, "c")]),
        ("k = ANY (ARRAY[5, 2])", "[/2 - /2] [/5 - /5]", [(2, "b"), (5, "e")]),
        ("k IN ('2', 1.0) AND v <> 'a'", "[/1 - /1] [/2 - /2]", [(2, "b")]),
        ("k IN (1.5, 2)", "FULL SCAN", [(2, "b")]),
        ("k IN (1, length(v) + 1)", "FULL SCAN", [(1, "a"), (2, "b")]),
    ],
)
def test_listed_keys_are_read_as_points(
    t: DB, where: str, expected: str, rows: list[tuple[object, ...]]
) -> None:
    assert spans(t, f"SELECT * FROM t WHERE {where}") == expected
    assert t.sql(f"SELECT * FROM t WHERE {where}").rows == rows


def test_a_placeholder_array_is_read_as_points_of_its_run(t: DB) -> None:
    statement = "SELECT k FROM t WHERE k = ANY ($1)"
    assert spans(t, statement, "{5,1}") == "[/1 - /1] [/5 - /5]"
    assert t.sql(statement, "{5,1}").rows == [(1,), (5,)]
    assert t.sql(statement, "{3}").rows == [(3,)]


def test_a_key_prefix_list_reads_prefix_spans_in_key_order(t: DB) -> None:
    statement = "SELECT * FROM u WHERE a IN (1, 3) AND c > 1"
    assert spans(t, statement) == "[/3 - /3] [/1 - /1]"  # NB: a is DESC
    assert t.sql(statement).rows == [(3, 3, 3), (1, 2, 2)]
    assert (
        t.sql("SELECT * FROM u WHERE a IN (1, 3)").rows
        == t.sql("SELECT * FROM u WHERE a = 3 OR a = 1").rows
    )


def test_a_null_array_reads_nothing(t: DB) -> None:
    statement = "SELECT * FROM t WHERE k = ANY (NULL::INT[])"
    lines = [line for (line,) in t.sql(f"EXPLAIN {statement}").rows]
    assert lines[3:] == ["• norows"]
    assert t.sql(statement).rows == []


def test_writes_and_locking_reads_use_the_listed_keys(t: DB) -> None:
    t.sql("UPDATE t SET v = 'x' WHERE k IN (2, 3, 7)")
    t.sql("DELETE FROM u WHERE a = ANY (ARRAY[1])")
    assert t.sql("SELECT * FROM t").rows == [(1, "a"), (2, "x"), (3, "x"), (5, "e")]
    assert t.sql("SELECT * FROM u").rows == [(3, 3, 3), (2, 1, 3)]
    assert t.sql("SELECT k FROM t WHERE k IN (5, 1) FOR UPDATE").rows == [(1,), (5,)]


def test_an_indexed_columns_list_is_read_through_the_index(t: DB) -> None:
    t.sql("CREATE TABLE w (id INT PRIMARY KEY, v INT, n INT, INDEX (v), INDEX (n))")
    t.sql("INSERT INTO w VALUES (1, 30, 1), (2, 10, 2), (3, 30, 3), (4, NULL, 4), (5, 20, 5)")
    statement = "SELECT id FROM w WHERE v IN (30, 10, NULL, 99) AND n > 1"
    lines = [line for (line,) in t.sql(f"EXPLAIN {statement}").rows]
    assert lines[3:] == [
        "• filter",
        f"│ filter: {statement.split('WHERE ')[1]}",
        "│",
        "└── • index join",
        "    │ table: w@w_pkey",
        "    │",
        "    └── • scan",
        "          missing stats",
        "          table: w@w_v_idx",
        "          spans: [/10 - /10] [/30 - /30] [/99 - /99]",
    ]
    assert t.sql(statement).rows == [(2,), (3,)]
    assert t.sql("SELECT id FROM w WHERE v = ANY ($1)", "{20,30}").rows == [(1,), (3,), (5,)]
    t.sql("DELETE FROM w WHERE v IN (30)")
    assert t.sql("SELECT id FROM w").rows == [(2,), (4,), (5,)]


def test_decimal_and_float_keys_are_found_whatever_their_scale_or_zero_sign(t: DB) -> None:
    t.sql("CREATE TABLE d (k DECIMAL PRIMARY KEY)")
    t.sql("CREATE TABLE f (k FLOAT PRIMARY KEY)")
    t.sql("INSERT INTO d VALUES (1.00), (2.5), (-0)")
    t.sql("INSERT INTO f VALUES (1.0), (-0.0), ('NaN')")
    assert (
        spans(t, "SELECT k FROM d WHERE k IN (1, 2.50, 0)") == "[/0 - /0] [/1 - /1] [/2.50 - /2.50]"
    )
    assert [str(k) for (k,) in t.sql("SELECT k FROM d WHERE k IN (1, 2.50, 0)").rows] == [
        "0",
        "1.00",
        "2.5",
    ]
    assert spans(t, "SELECT k FROM f WHERE k IN (1, -0.0)") == "[/0 - /0] [/1 - /1]"
    assert t.sql("SELECT k FROM f WHERE k IN (1, -0.0)").rows == [(0.0,), (1.0,)]
    assert t.sql("SELECT count(*) FROM f WHERE k = ANY ('{1,0,NaN}')").rows == [(3,)]
