"""The common INSERT (one row of VALUES, no ON CONFLICT, by a statement alone, into a
table with nothing a write must also check or index) has a path of its own
(``InsertPlan.single``, feedkv.sql.dml._insert_one): it gives the rows, results and
errors the general path gives, which a statement inside BEGIN takes."""

from __future__ import annotations

from typing import Any

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql import catalog
from feedkv.sql.plan import InsertPlan
from feedkv.sql.session import prepare
from feedkv.sql.statements import Insert

TABLES = (
    "CREATE TABLE kv (k INT PRIMARY KEY, v STRING NOT NULL DEFAULT 'd', n INT)",
    "CREATE TABLE calc (k INT PRIMARY KEY, a INT, b INT AS (a * 2) STORED)",
    "CREATE TABLE short (k INT PRIMARY KEY, s VARCHAR(3))",
    "CREATE TABLE indexed (k INT PRIMARY KEY, v STRING UNIQUE)",
    "CREATE TABLE bag (s STRING)",  # keyed by the hidden rowid
)

SINGLE = [
    ("INSERT INTO kv (k, v) VALUES ($1, $2)", True),
    ("INSERT INTO kv VALUES (1, 'x', 2) RETURNING k, n", True),
    ("INSERT INTO kv (k) VALUES (1)", True),
    ("INSERT INTO kv VALUES (1, 'x', 2), (2, 'y', 3)", False),
    ("INSERT INTO kv VALUES (1, 'x', 2) ON CONFLICT DO NOTHING", False),
    ("INSERT INTO kv VALUES (1, 'x', 2) ON CONFLICT (k) DO UPDATE SET n = 3", False),
    ("UPSERT INTO kv VALUES (1, 'x', 2)", False),
    ("INSERT INTO kv SELECT 1, 'x', 2", False),
    ("INSERT INTO kv VALUES ((SELECT 1), 'x', 2)", False),
]

# Statements with their parameters, each run on tables holding kv's row 1 and indexed's
# row (1, 'u'); what each does is compared between the two paths.
RUNS: list[tuple[str, tuple[Any, ...]]] = [
    ("INSERT INTO kv (k, v) VALUES ($1, $2)", (2, "two")),
    ("INSERT INTO kv (k, v) VALUES ($1, $2)", (1, "again")),  # 23505
    ("INSERT INTO kv (k, v) VALUES ($1, $2)", (3, None)),  # 23502
    ("INSERT INTO kv (k, v) VALUES ($1, $2)", ("x", "v")),  # not an integer
    ("INSERT INTO kv (k) VALUES ($1)", (4,)),  # v's DEFAULT, n NULL
    ("INSERT INTO kv VALUES (5, 'five', 5) RETURNING n, k, v", ()),
    ("INSERT INTO kv VALUES (1, 'five', 5) RETURNING k", ()),  # 23505
    ("INSERT INTO calc (k, a) VALUES ($1, $2) RETURNING b", (1, 21)),
    ("INSERT INTO short VALUES ($1, $2)", (1, "abcd")),  # 22001
    ("INSERT INTO indexed VALUES ($1, $2)", (2, "u")),  # 23505 on the unique index
    ("INSERT INTO indexed VALUES ($1, $2)", (2, "w")),
    ("INSERT INTO bag VALUES ($1)", ("s",)),
    # each value a bare placeholder: picked from the parameters (InsertPlan.picked)
    ("INSERT INTO kv (v, k) VALUES ($2, $1)", (6, "six")),
    ("INSERT INTO kv (k, n) VALUES ($1, $1)", (7,)),
    ("INSERT INTO kv (k, v, n) VALUES ($3, $1, $2)", ("eight", "8", "8")),
    ("INSERT INTO kv (k, v) VALUES ($1, $2)", (9.5, "nine")),  # 9.5 rounds to 10
]


@pytest.fixture
def tables(db: DB) -> DB:
    for statement in TABLES:
        db.sql(statement)
    return db


@pytest.mark.parametrize(("text", "single"), SINGLE)
def test_only_one_row_of_values_without_conflict_clauses_is_single(
    tables: DB, text: str, single: bool
) -> None:
    ((statement, _placeholders),) = prepare(text)
    assert isinstance(statement, Insert)
    session = tables.session()
    reader = catalog.Snapshot(tables, tables.now())
    desc = session.resolve_table(reader, None, statement.table.name)
    assert InsertPlan.of(desc, statement, "defaultdb").single is single


@pytest.mark.parametrize(
    ("text", "picked"),
    [
        ("INSERT INTO kv (v, k) VALUES ($2, $1)", ("two", 1)),
        ("INSERT INTO kv (k, n) VALUES ($1, $1)", (1, 1)),
        ("INSERT INTO kv (k) VALUES ($1)", None),
        ("INSERT INTO kv (k, v) VALUES ($1, 'x')", None),
        ("INSERT INTO kv (k, v) VALUES ($1, $2::STRING)", None),
    ],
)
def test_a_single_row_of_placeholders_is_picked_from_the_parameters(
    tables: DB, text: str, picked: tuple[Any, ...] | None
) -> None:
    ((statement, _placeholders),) = prepare(text)
    assert isinstance(statement, Insert)
    reader = catalog.Snapshot(tables, tables.now())
    desc = tables.session().resolve_table(reader, None, "kv")
    plan = InsertPlan.of(desc, statement, "defaultdb")
    assert (plan.picked and plan.picked((1, "two"))) == picked


def _outcome(db: DB, text: str, params: tuple[Any, ...], *, alone: bool) -> tuple[Any, ...]:
    """What ``text`` gives (its tag and rows, or its error) and the tables after it,
    run alone or inside BEGIN ... COMMIT."""
    session = db.session()
    try:
        if not alone:
            session.execute("BEGIN")
        result = session.execute(text, *params)
        if not alone:
            session.execute("COMMIT")
        answer: tuple[Any, ...] = (result.tag, result.rows)
    except SQLError as exc:
        answer = (exc.code, str(exc))
        if not alone:
            session.execute("ROLLBACK")
    tables = [db.sql(f"SELECT * FROM {name} ORDER BY 1").rows for name in ("kv", "calc", "short")]
    tables.append(db.sql("SELECT * FROM indexed ORDER BY k").rows)
    tables.append(db.sql("SELECT s FROM bag").rows)
    return answer, tables


@pytest.mark.parametrize(("text", "params"), RUNS)
def test_alone_and_in_a_transaction_an_insert_gives_the_same_rows_and_errors(
    tables: DB, text: str, params: tuple[Any, ...]
) -> None:
    tables.sql("INSERT INTO kv VALUES (1, 'one', 1)")
    tables.sql("INSERT INTO indexed VALUES (1, 'u')")
    alone = _outcome(tables, text, params, alone=True)
    # NB: the statement again on the tables as they were: what it wrote taken out
    for name in ("kv", "calc", "short", "indexed", "bag"):
        tables.sql(f"DELETE FROM {name} WHERE true")
    tables.sql("INSERT INTO kv VALUES (1, 'one', 1)")
    tables.sql("INSERT INTO indexed VALUES (1, 'u')")
    in_transaction = _outcome(tables, text, params, alone=False)
    assert alone == in_transaction


def test_an_insert_alone_and_repeated_keeps_its_plan_and_sees_a_new_column(tables: DB) -> None:
    session = tables.session()
    insert = "INSERT INTO kv (k, v) VALUES ($1, $2) RETURNING *"
    assert session.execute(insert, 10, "ten").rows == [(10, "ten", None)]
    tables.sql("ALTER TABLE kv ADD COLUMN m INT DEFAULT 7")
    assert session.execute(insert, 11, "eleven").rows == [(11, "eleven", None, 7)]
    with pytest.raises(SQLError) as caught:
        session.execute(insert, 11, "again")
    assert caught.value.code == "23505"
    assert tables.sql("SELECT k, m FROM kv WHERE k >= 10 ORDER BY k").rows == [(10, 7), (11, 7)]


def test_a_text_run_again_by_a_session_runs_as_the_first_time(tables: DB) -> None:
    """A session keeps the text it prepared last (run again, it is not looked up in the
    shared cache): a text that does not parse fails each time, and one run again after
    another text runs as written."""
    session = tables.session()
    insert = "INSERT INTO kv (k, v) VALUES ($1, $2)"
    broken = "INSERT INTO kv VALUES ("
    for k in (20, 21):
        assert session.execute(insert, k, "x").tag == "INSERT 0 1"
        for _ in range(2):
            with pytest.raises(SQLError) as caught:
                session.execute(broken)
            assert caught.value.code == "42601"
    with pytest.raises(SQLError) as caught:
        session.execute(insert, 22)
    assert caught.value.code == "08P01"  # one argument for two placeholders
    long_literal = "INSERT INTO kv (k, v) VALUES (23, '" + "y" * 3000 + "')"
    assert session.execute(long_literal).tag == "INSERT 0 1"
    with pytest.raises(SQLError) as caught:
        session.execute(long_literal)
    assert caught.value.code == "23505"
    assert tables.sql("SELECT k, length(v) FROM kv WHERE k >= 20 ORDER BY k").rows == [
        (20, 1),
        (21, 1),
        (23, 3000),
    ]
