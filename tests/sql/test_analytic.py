"""The vectorized path (feedkv.sql.analytic over feedkv.sql.columnar) answers exactly as
the row-at-a-time engine, the reference (``SET vectorize = off``), or leaves the query
to it."""

from __future__ import annotations

import threading
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.kv.api import BatchRequest, Header, Put
from feedkv.sql.analytic import load_engine
from feedkv.sql.columnar import (
    cache_for,
)
from feedkv.sql.row_codec import row_kvs
from feedkv.sql.session import Session
from feedkv.util.hlc import Timestamp

INTS = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.sampled_from([2**62, -(2**62), 2**63 - 1, -(2**63)]),
)
STRINGS = st.one_of(st.none(), st.sampled_from(["", "a", "B", "b", "é", "z", "ab", "Ω", "a b"]))
BOOLS = st.one_of(st.none(), st.booleans())
ROW = st.tuples(st.integers(0, 30), st.integers(-2, 3) | st.none(), INTS, STRINGS, BOOLS)

GROUP_COLUMNS = ["t.g", "t.s", "t.b"]
AGGREGATES = [
    "count(*)",
    "count(t.a)",
    "sum(t.a)",
    "min(t.a)",
    "max(t.a)",
    "min(t.s)",
    "max(t.s)",
    "count(t.s)",
    "avg(t.a)",
]


@st.composite
def conditions(draw: st.DrawFn, depth: int = 0) -> str:
    choice = draw(st.integers(0, 5 if depth < 2 else 2))
    if choice == 0:
        op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
        value = draw(st.integers(-6, 6) | st.sampled_from([2**63 - 1, -(2**63)]))
        column = draw(st.sampled_from(["t.a", "t.g"]))
        return f"{column} {op} {value}"
    if choice == 1:
        op = draw(st.sampled_from(["=", "<>", "<", ">="]))
        value = draw(st.sampled_from(["", "a", "b", "é", "Z"]))
        return f"t.s {op} '{value}'"
    if choice == 2:
        column = draw(st.sampled_from(["t.a", "t.s", "t.b", "t.g"]))
        return f"{column} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if choice == 3:
        return f"NOT ({draw(conditions(depth + 1))})"
    op = "AND" if choice == 4 else "OR"
    return f"({draw(conditions(depth + 1))}) {op} ({draw(conditions(depth + 1))})"


# an equality of a column of each, or of INT columns plus or minus constants
JOINS = [
    "t JOIN u ON t.g = u.id",
    "t JOIN u ON t.g = u.id + 1",
    "t JOIN u ON t.g - 2 = u.id",
    "t JOIN u ON (1 + u.id) = t.g",
]


@st.composite
def queries(draw: st.DrawFn) -> str:
    join = draw(st.booleans())
    columns = GROUP_COLUMNS + (["u.r"] if join else [])
    group = draw(st.lists(st.sampled_from(columns), max_size=2, unique=True))
    aggregates = draw(st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=4))
    items = ", ".join([*group, *aggregates])
    source = draw(st.sampled_from(JOINS)) if join else "t"
    where = f" WHERE {draw(conditions())}" if draw(st.booleans()) else ""
    grouping = f" GROUP BY {', '.join(group)}" if group else ""
    order = ""
    if group and draw(st.booleans()):
        # every grouped column, by name or position, each way: a total order
        keys = [
            (str(group.index(column) + 1) if draw(st.booleans()) else column)
            + draw(st.sampled_from(["", " ASC", " DESC"]))
            for column in draw(st.permutations(group))
        ]
        order = f" ORDER BY {', '.join(keys)}"
        if draw(st.booleans()):
            order += f" LIMIT {draw(st.integers(0, 4))}"
    return f"SELECT {items} FROM {source}{where}{grouping}{order}"


WRITES = st.one_of(
    st.tuples(st.just("upsert"), ROW),
    # a transaction that reads through the vectorized path, then writes where it read
    st.tuples(st.just("read, then upsert"), queries(), ROW),
    st.tuples(st.just("delete"), st.integers(0, 30)),
    st.tuples(st.just("update"), st.integers(-2, 3), INTS),
)


def write(session: Session, step: tuple[Any, ...]) -> None:
    if step[0] == "upsert":
        session.execute("UPSERT INTO t VALUES ($1, $2, $3, $4, $5)", *step[1])
    elif step[0] == "read, then upsert":
        session.execute("BEGIN")
        session.execute(step[1])
        session.execute("UPSERT INTO t VALUES ($1, $2, $3, $4, $5)", *step[2])
        session.execute("COMMIT")
    elif step[0] == "delete":
        session.execute("DELETE FROM t WHERE id = $1", step[1])
    else:
        session.execute("UPDATE t SET a = $2 WHERE g = $1", step[1], step[2])


def both(session: Session, query: str) -> tuple[list[Any], list[Any]]:
    """The query's rows from the vectorized path (which must answer it) and from the
    reference, read in one transaction (one snapshot), each sorted."""
    session.execute("BEGIN")
    try:
        session.execute("SET vectorize = on")
        before = used(session.db)
        fast = session.execute(query)
        assert used(session.db) == before + 1 + (" JOIN " in query), query
        session.execute("SET vectorize = off")
        reference = session.execute(query)
    finally:
        session.execute("SET vectorize = on")
        session.execute("COMMIT")
    assert fast.columns == reference.columns
    assert fast.types == reference.types
    if " ORDER BY " in query:
        return fast.rows, reference.rows
    return sorted(fast.rows, key=repr), sorted(reference.rows, key=repr)


def used(db: DB) -> int:
    cache = cache_for(db)
    return cache.built + cache.advanced


@pytest.fixture
def tables(db: DB) -> DB:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, g INT, a INT, s STRING, b BOOL)")
    db.sql("CREATE TABLE u (id INT PRIMARY KEY, r STRING)")
    db.sql("INSERT INTO u VALUES (-1, 'minus one'), (0, 'zero'), (1, 'one'), (2, 'one')")
    db.sql("INSERT INTO u VALUES (3, NULL)")
    return db


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=st.lists(ROW, max_size=25, unique_by=lambda r: r[0]),
    steps=st.lists(st.one_of(queries(), WRITES), min_size=1, max_size=8),
)
def test_the_vectorized_path_answers_as_the_reference(
    tables: DB, rows: list[tuple[Any, ...]], steps: list[Any]
) -> None:
    session = tables.session()
    try:
        session.execute("DELETE FROM t WHERE true")
        for row in rows:
            session.execute("INSERT INTO t VALUES ($1, $2, $3, $4, $5)", *row)
        for step in steps:
            if isinstance(step, str):
                fast, reference = both(session, step)
                # NB: repr, not ==: Decimal('5') == Decimal('5.0'), which a client sees apart
                assert repr(fast) == repr(reference), step
            else:
                write(session, step)
    finally:
        session.close()


def test_the_bench_shapes_take_the_vectorized_path_and_follow_writes(tables: DB) -> None:
    tables.sql("INSERT INTO t VALUES (1, 1, 10, 'x', true), (2, 1, 5, 'y', NULL)")
    tables.sql("INSERT INTO t VALUES (3, 2, NULL, NULL, false), (4, NULL, 7, 'x', true)")
    group_by = "SELECT g, count(*), sum(a) FROM t GROUP BY g"
    join = "SELECT u.r, count(*), sum(t.a) FROM t JOIN u ON t.g = u.id GROUP BY u.r"
    cache = cache_for(tables)
    before = (cache.built, cache.advanced)
    assert sorted(tables.sql(group_by).rows, key=repr) == sorted(
        [(1, 2, Decimal(15)), (2, 1, None), (None, 1, Decimal(7))], key=repr
    )
    assert (cache.built, cache.advanced) == (before[0] + 1, before[1])
    assert sorted(tables.sql(join).rows) == [("one", 3, Decimal(15))]
    tables.sql("UPDATE t SET a = 100 WHERE id = 1")
    tables.sql("DELETE FROM t WHERE id = 2")
    tables.sql("INSERT INTO t VALUES (5, 0, -1, 'z', NULL)")
    assert sorted(tables.sql(group_by).rows, key=repr) == sorted(
        [(0, 1, Decimal(-1)), (1, 1, Decimal(100)), (2, 1, None), (None, 1, Decimal(7))],
        key=repr,
    )
    assert cache.advanced > before[1]  # brought up to date with the changes, not copied
    assert sorted(tables.sql(join).rows) == [("one", 2, Decimal(100)), ("zero", 1, Decimal(-1))]


def test_a_sum_past_int8_is_an_exact_decimal(tables: DB) -> None:
    big = 2**63 - 1
    tables.sql(f"INSERT INTO t VALUES (1, 1, {big}, 'x', true), (2, 1, {big}, 'y', true)")
    rows = tables.sql("SELECT g, sum(a) FROM t GROUP BY g").rows
    assert rows == [(1, Decimal(2 * big))]
    tables.sql("SET vectorize = off")
    assert tables.sql("SELECT g, sum(a) FROM t GROUP BY g").rows == rows


def test_null_groups_and_counts_of_nulls(tables: DB) -> None:
    tables.sql("INSERT INTO t VALUES (1, NULL, NULL, NULL, NULL), (2, NULL, 3, 'x', NULL)")
    rows = tables.sql("SELECT g, count(*), count(a), count(s), sum(a), min(s) FROM t GROUP BY g")
    assert rows.rows == [(None, 2, 1, 1, Decimal(3), "x")]


def test_aggregates_over_no_rows_give_one_row_of_zero_and_nulls(tables: DB) -> None:
    before = used(tables)
    rows = tables.sql("SELECT count(*), sum(a), min(s), max(a) FROM t").rows
    assert rows == [(0, None, None, None)]
    assert used(tables) == before + 1


def test_strings_compare_by_their_utf8_bytes(tables: DB) -> None:
    for n, text in enumerate(["Z", "a", "é", "Ω", "", "ab"]):
        tables.sql("INSERT INTO t VALUES ($1, 1, 0, $2, true)", n, text)
    assert tables.sql("SELECT min(s), max(s) FROM t").rows == [("", "Ω")]
    assert tables.sql("SELECT count(*) FROM t WHERE s > 'a'").rows == [(3,)]
    tables.sql("SET vectorize = off")
    assert tables.sql("SELECT min(s), max(s) FROM t").rows == [("", "Ω")]
    assert tables.sql("SELECT count(*) FROM t WHERE s > 'a'").rows == [(3,)]


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("SELECT count(*) FROM t WHERE a + 1 > 0", "22003"),  # integer out of range
        ("SELECT g, sum(a / 0) FROM t GROUP BY g", "22012"),  # division by zero
        ("SELECT count(*) FROM t WHERE a / (g - g) > 0", "22012"),
    ],
)
def test_an_error_of_the_reference_is_raised_as_it_raises_it(
    tables: DB, query: str, code: str
) -> None:
    tables.sql(f"INSERT INTO t VALUES (1, 1, {2**63 - 1}, 'x', true)")
    before = used(tables)
    with pytest.raises(SQLError) as caught:
        tables.sql(query)
    assert caught.value.code == code
    assert used(tables) == before  # left to the reference


@pytest.mark.parametrize(
    "query",
    [
        "SELECT g, s, count(*) FROM t GROUP BY g, s ORDER BY g",
        "SELECT g, count(*) FROM t GROUP BY g ORDER BY count(*)",
        "SELECT g AS s, count(*) FROM t GROUP BY g, s ORDER BY s",
        "SELECT g, count(*) FROM t GROUP BY g ORDER BY g LIMIT 1 OFFSET 1",
        "SELECT g, count(*) FROM t GROUP BY g HAVING count(*) > 1",
        "SELECT g, count(*) FROM t GROUP BY g LIMIT 1",
        "SELECT g, count(DISTINCT a) FROM t GROUP BY g",
        "SELECT g, sum(a) FILTER (WHERE a > 0) FROM t GROUP BY g",
        "SELECT g, avg(a::FLOAT) FROM t GROUP BY g",
        "SELECT g + 1, count(*) FROM t GROUP BY g + 1",
        "SELECT g, count(*) FROM t AS OF SYSTEM TIME '-1us' GROUP BY g",
        "SELECT t.g, count(*) FROM t LEFT JOIN u ON t.g = u.id GROUP BY t.g",
        # the reference reads a point, a span or an index: no copy of the whole table
        "SELECT count(*) FROM t WHERE id = 1",
        "SELECT sum(a) FROM t WHERE id >= 1 AND id < 5",
        "SELECT g, count(*) FROM t JOIN u ON t.g = u.id WHERE u.id = 1 GROUP BY g",
    ],
)
def test_other_queries_are_left_to_the_reference(tables: DB, query: str) -> None:
    tables.sql("INSERT INTO t VALUES (1, 1, 3, 'x', true), (2, 1, -1, 'y', false)")
    before = used(tables)
    tables.sql(query)
    assert used(tables) == before


def test_a_where_on_an_indexed_column_is_left_to_the_index(tables: DB) -> None:
    tables.sql("CREATE INDEX t_g ON t (g)")
    tables.sql("INSERT INTO t VALUES (1, 1, 3, 'x', true), (2, 2, -1, 'y', false)")
    before = used(tables)
    assert tables.sql("SELECT sum(a) FROM t WHERE g = 1").rows == [(3,)]
    assert used(tables) == before
    tables.sql("SELECT sum(a) FROM t WHERE a = 3")  # no index on a: the copy
    assert used(tables) == before + 1


def test_a_transaction_that_wrote_in_the_table_reads_its_own_writes(tables: DB) -> None:
    tables.sql("INSERT INTO t VALUES (1, 1, 3, 'x', true)")
    assert tables.sql("SELECT count(*) FROM t").rows == [(1,)]
    tables.sql("BEGIN")
    tables.sql("INSERT INTO t VALUES (2, 1, 4, 'y', true)")
    before = used(tables)
    assert tables.sql("SELECT g, count(*), sum(a) FROM t GROUP BY g").rows == [(1, 2, Decimal(7))]
    assert used(tables) == before
    tables.sql("ROLLBACK")
    assert tables.sql("SELECT g, count(*), sum(a) FROM t GROUP BY g").rows == [(1, 1, Decimal(3))]


def test_a_transaction_reads_one_snapshot_while_another_writes(tables: DB) -> None:
    tables.sql("INSERT INTO t VALUES (1, 1, 3, 'x', true)")
    query = "SELECT g, count(*), sum(a) FROM t GROUP BY g"
    reader = tables.session()
    writer = tables.session()
    try:
        reader.execute("BEGIN")
        first = reader.execute(query).rows
        writer.execute("INSERT INTO t VALUES (2, 1, 4, 'y', true)")
        assert reader.execute(query).rows == first == [(1, 1, Decimal(3))]
        reader.execute("COMMIT")
        assert reader.execute(query).rows == [(1, 2, Decimal(7))]
    finally:
        reader.close()
        writer.close()


def test_sessions_on_many_threads_answer_alike(tables: DB) -> None:
    for n in range(40):
        tables.sql("INSERT INTO t VALUES ($1, $2, $1, 'x', true)", n, n % 3)
    query = "SELECT g, count(*), sum(a) FROM t GROUP BY g"
    expected = sorted(tables.sql(query).rows)
    answers: list[list[Any]] = []
    errors: list[BaseException] = []

    def run() -> None:
        session = tables.session()
        try:
            for _ in range(5):
                answers.append(sorted(session.execute(query).rows))
        except BaseException as exc:
            errors.append(exc)
        finally:
            session.close()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert answers == [expected] * 15


def test_char_columns_are_left_to_the_reference(db: DB) -> None:
    db.sql("CREATE TABLE f (id INT PRIMARY KEY, c CHAR(3))")
    db.sql("INSERT INTO f VALUES (1, 'a'), (2, 'a  '), (3, 'b')")
    before = used(db)
    rows = db.sql("SELECT c, count(*) FROM f WHERE c = 'a ' GROUP BY c").rows
    assert used(db) == before
    db.sql("SET vectorize = off")
    assert db.sql("SELECT c, count(*) FROM f WHERE c = 'a ' GROUP BY c").rows == rows


def test_order_by_puts_nulls_first_ascending_and_last_descending(tables: DB) -> None:
    tables.sql("INSERT INTO t VALUES (1, NULL, 1, 'x', true), (2, 2, 1, 'y', true)")
    tables.sql("INSERT INTO t VALUES (3, -1, 1, NULL, false), (4, 2, 1, 'x', NULL)")
    before = used(tables)
    up = tables.sql("SELECT g, count(*) FROM t GROUP BY g ORDER BY g").rows
    down = tables.sql("SELECT g, count(*) FROM t GROUP BY g ORDER BY 1 DESC LIMIT 2").rows
    assert used(tables) == before + 2
    assert up == [(None, 1), (-1, 1), (2, 2)]
    assert down == [(2, 2), (-1, 1)]


def test_a_row_written_below_a_vectorized_read_lands_above_it(tables: DB) -> None:
    """Serializability, as with a scan: once a transaction has read the table through
    the vectorized path at T, a write into the table sent at a timestamp below T is
    moved above T, so the transaction's answer stays true at its timestamp."""
    tables.sql("INSERT INTO t VALUES (1, 1, 3, 'x', true)")
    query = "SELECT g, count(*), sum(a) FROM t GROUP BY g"
    tables.sql(query)  # a copy to bring up to date
    reader = tables.session()
    try:
        reader.execute("BEGIN")
        before = used(tables)
        assert reader.execute(query).rows == [(1, 1, Decimal(3))]
        assert used(tables) == before + 1
        [(logical,)] = reader.execute("SELECT cluster_logical_timestamp()").rows
        read_ts = Timestamp.parse_decimal(str(logical))
        desc = reader.resolve_table(tables.transaction(), None, "t")
        ids = {c.name: c.id for c in desc.columns}
        row = {ids["id"]: 2, ids["g"]: 1, ids["a"]: 4, ids["s"]: "late", ids["b"]: True}
        [(key, value)] = row_kvs(desc, row).items()
        assert value is not None
        below = Timestamp(read_ts.wall - 1, 0)
        written = tables.transport.send(BatchRequest(Header(timestamp=below), (Put(key, value),)))
        assert written.timestamp > read_ts
        assert reader.execute(query).rows == [(1, 1, Decimal(3))]
        reader.execute("COMMIT")
    finally:
        reader.close()
    assert tables.sql(query).rows == [(1, 2, Decimal(7))]


def test_avg_of_ints_is_the_references_decimal_quotient(tables: DB) -> None:
    for n, a in enumerate([1, 1, 2, None, 2**63 - 1, 2**63 - 1]):
        tables.sql("INSERT INTO t VALUES ($1, $2, $3, 'x', true)", n, n // 3, a)
    query = "SELECT g, avg(a) FROM t GROUP BY g ORDER BY g"
    before = used(tables)
    fast = tables.sql(query).rows
    assert used(tables) == before + 1
    assert repr(fast) == repr(
        [(0, Decimal("1.3333333333333333333")), (1, Decimal("9223372036854775807"))]
    )
    tables.sql("SET vectorize = off")
    assert repr(tables.sql(query).rows) == repr(fast)


def test_sessions_on_threads_of_their_own_query_one_duckdb_database_apart(tables: DB) -> None:
    """Each thread reads through its own cursor of the process's DuckDB database (and
    loading the engine ahead of the first query changes none of it): sessions querying
    at once each get their own tables' rows."""
    tables.sql("CREATE TABLE v (id INT PRIMARY KEY, g INT)")
    tables.sql("INSERT INTO v SELECT i, i % 2 FROM generate_series(1, 50) AS s(i)")
    load_engine()
    load_engine()  # once per process
    queries = {
        "SELECT g, count(*) FROM t GROUP BY g ORDER BY g": [],
        "SELECT g, count(*) FROM v GROUP BY g ORDER BY g": [(0, 25), (1, 25)],
        "SELECT r, count(*) FROM u GROUP BY r ORDER BY r": [
            (None, 1),
            ("minus one", 1),
            ("one", 2),
            ("zero", 1),
        ],
    }
    answers: dict[str, list[Any]] = {}
    barrier = threading.Barrier(len(queries))

    def run(query: str) -> None:
        session = tables.session()
        barrier.wait()
        for _ in range(5):
            answers.setdefault(query, []).append(session.execute(query).rows)

    threads = [threading.Thread(target=run, args=(q,)) for q in queries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == {query: [rows] * 5 for query, rows in queries.items()}
