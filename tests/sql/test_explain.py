"""EXPLAIN in CockroachDB's shape (one column, ``info``; ``distribution: local``,
``vectorized: true``, a blank line, then the tree of operators), showing what feedkv's
plan does: the span read (``FULL SCAN``, a point, a range), a secondary index read as an
index join, a filter where the span does not hold the WHERE clause exactly, the
operators above the read in the order they run, joins and writes."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.explain import Node, render

HEADER = ["distribution: local", "vectorized: true", ""]


@pytest.fixture
def tables(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT, s STRING, INDEX (v))")
    db.sql("CREATE TABLE u (id INT PRIMARY KEY, k INT)")
    db.sql("INSERT INTO t VALUES (1, 10, 'a'), (2, 20, 'b')")
    return db


def plan(db: DB, statement: str) -> list[str]:
    result = db.sql(f"EXPLAIN {statement}")
    assert result.columns == ("info",)
    lines = [line for (line,) in result.rows]
    assert lines[:3] == HEADER
    return lines[3:]


def scan(table: str, spans: str, indent: str = "  ") -> list[str]:
    return [f"{indent}missing stats", f"{indent}table: {table}", f"{indent}spans: {spans}"]


@pytest.mark.parametrize(
    ("where", "spans"),
    [
        ("", "FULL SCAN"),
        (" WHERE k = 1", "[/1 - /1]"),
        (" WHERE k > 1 AND k <= 10", "[/2 - /10]"),
        (" WHERE k < 10", "[ - /9]"),
        (" WHERE k >= 3", "[/3 - ]"),
    ],
)
def test_a_primary_key_read_shows_its_span_and_no_filter(
    tables: DB, where: str, spans: str
) -> None:
    assert plan(tables, f"SELECT * FROM t{where}") == ["• scan", *scan("t@t_pkey", spans)]


def test_a_where_clause_the_span_does_not_hold_is_a_filter(tables: DB) -> None:
    assert plan(tables, "SELECT * FROM t WHERE s = 'a' AND k > 1") == [
        "• filter",
        "│ filter: s = 'a' AND k > 1",
        "│",
        "└── • scan",
        *scan("t@t_pkey", "[/2 - ]", "      "),
    ]


def test_a_secondary_index_read_is_an_index_join(tables: DB) -> None:
    assert plan(tables, "SELECT * FROM t WHERE v = 10") == [
        "• filter",
        "│ filter: v = 10",
        "│",
        "└── • index join",
        "    │ table: t@t_pkey",
        "    │",
        "    └── • scan",
        *scan("t@t_v_idx", "[/10 - /10]", "          "),
    ]


def test_a_partial_index_where_implies_is_read_whole(db: DB) -> None:
    # CockroachDB reads the index that holds only the rows WHERE can select: no full
    # table scan (so disallow_full_table_scans lets it run)
    db.sql("CREATE TABLE p (k INT PRIMARY KEY, a INT, b INT, INDEX pos_b (b) WHERE a > 0)")
    db.sql("INSERT INTO p VALUES (1, 1, 10), (2, -1, 20), (3, 5, NULL)")
    assert plan(db, "SELECT k FROM p WHERE a > 0") == [
        "• filter",
        "│ filter: a > 0",
        "│",
        "└── • index join",
        "    │ table: p@p_pkey",
        "    │",
        "    └── • scan",
        *scan("p@pos_b (partial index)", "FULL SCAN", "          "),
    ]
    assert db.sql("SELECT k FROM p WHERE a > 0").rows == [(1,), (3,)]
    assert db.sql("DELETE FROM p WHERE a > 0 AND a < 3 RETURNING k").rows == [(1,)]
    assert db.sql("SELECT k FROM p WHERE a > 0").rows == [(3,)]


def test_grouping_sorting_and_limit_stack_in_the_order_they_run(tables: DB) -> None:
    assert plan(tables, "SELECT v, count(*) FROM t GROUP BY v ORDER BY v LIMIT 5") == [
        "• limit",
        "│ count: 5",
        "│",
        "└── • sort",
        "    │ order: +v",
        "    │",
        "    └── • group (hash)",
        "        │ group by: v",
        "        │",
        "        └── • scan",
        *scan("t@t_pkey", "FULL SCAN", "              "),
    ]
    assert plan(tables, "SELECT count(*) FROM t")[:3] == ["• group (scalar)", "│", "└── • scan"]


def test_joins_show_how_the_right_side_is_read(tables: DB) -> None:
    assert plan(tables, "SELECT * FROM t JOIN u ON t.k = u.k") == [
        "• hash join",
        "│ equality: (t.k) = (u.k)",
        "│",
        "├── • scan",
        *scan("t@t_pkey", "FULL SCAN", "│     "),
        "│",
        "└── • scan",
        *scan("u@u_pkey", "FULL SCAN", "      "),
    ]
    assert plan(tables, "SELECT * FROM u JOIN t ON u.k = t.k") == [
        "• lookup join",
        "│ table: t@t_pkey",
        "│ equality: (k) = (k)",
        "│",
        "└── • scan",
        *scan("u@u_pkey", "FULL SCAN", "      "),
    ]
    assert plan(tables, "SELECT * FROM t LEFT JOIN u ON t.v < u.k")[:2] == [
        "• cross join (left outer)",
        "│ pred: t.v < u.k",
    ]


def test_a_lateral_subquery_is_an_apply_join_over_the_left_side(tables: DB) -> None:
    lateral = "SELECT * FROM t LEFT JOIN LATERAL (SELECT id FROM u WHERE u.k = t.k) AS s ON true"
    assert plan(tables, lateral) == [
        "• apply join (left outer)",
        "│ pred: TRUE",
        "│",
        "└── • scan",
        *scan("t@t_pkey", "FULL SCAN", "      "),
    ]


def test_writes_show_their_table_and_what_they_read(tables: DB) -> None:
    assert plan(tables, "INSERT INTO t VALUES (3, 30, 'c'), (4, 40, 'd')") == [
        "• insert",
        "│ into: t(k, v, s)",
        "│ auto commit",
        "│",
        "└── • values",
        "      size: 3 columns, 2 rows",
    ]
    assert plan(tables, "UPDATE t SET v = 1 WHERE k = 2") == [
        "• update",
        "│ table: t",
        "│ set: v",
        "│ auto commit",
        "│",
        "└── • scan",
        *scan("t@t_pkey", "[/2 - /2]", "      "),
    ]
    assert plan(tables, "DELETE FROM t")[:4] == ["• delete", "│ from: t", "│ auto commit", "│"]
    assert tables.sql("SELECT count(*) FROM t").rows == [(2,)]  # EXPLAIN wrote nothing


def test_explain_analyze_runs_the_statement(tables: DB) -> None:
    lines = [line for (line,) in tables.sql("EXPLAIN ANALYZE INSERT INTO u VALUES (7, 1)").rows]
    assert lines[0].startswith("execution time: ")
    assert lines[1:5] == [*HEADER[:2], "", "• insert"]
    assert lines[5] == "│ actual row count: 1"
    assert tables.sql("SELECT id FROM u").rows == [(7,)]


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("EXPLAIN (OPT) SELECT 1", r"EXPLAIN \(OPT\) is not supported"),
        ("EXPLAIN CREATE TABLE x (a INT)", "EXPLAIN of CreateTable is not supported"),
    ],
)
def test_forms_feedkv_does_not_explain_are_refused(
    tables: DB, statement: str, message: str
) -> None:
    with pytest.raises(SQLError, match=message) as caught:
        tables.sql(statement)
    assert caught.value.code == "0A000"


def test_a_tree_with_two_children_draws_both_branches() -> None:
    leaf = Node("scan", ["a: 1"])
    assert render(Node("union", [], [leaf, Node("values", ["size: 1"])])) == [
        "• union",
        "│",
        "├── • scan",
        "│     a: 1",
        "│",
        "└── • values",
        "      size: 1",
    ]
