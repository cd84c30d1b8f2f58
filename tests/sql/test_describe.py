"""Describing a statement without running it: result columns with their types, and the
types of its placeholders from where they stand."""

from __future__ import annotations

from typing import Any

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.describe import Description
from feedkv.sql.types import ColumnType, Kind

INT, STRING, FLOAT, DECIMAL, JSONB, BOOL = (
    Kind.INT,
    Kind.STRING,
    Kind.FLOAT,
    Kind.DECIMAL,
    Kind.JSONB,
    Kind.BOOL,
)


@pytest.fixture
def session(db: DB) -> Any:
    s = db.session()
    s.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING, f FLOAT, d DECIMAL, j JSONB)")
    s.execute("CREATE TABLE u (id INT PRIMARY KEY, t_id INT, name STRING)")
    return s


def kinds(types: tuple[ColumnType | None, ...]) -> list[Kind | None]:
    return [None if t is None else t.kind for t in types]


def columns(description: Description) -> list[tuple[str, Kind | None]]:
    assert description.columns is not None
    return [(name, None if t is None else t.kind) for name, t in description.columns]


@pytest.mark.parametrize(
    ("text", "expected_columns", "expected_params"),
    [
        (
            "SELECT * FROM t WHERE id = $1",
            [("id", INT), ("s", STRING), ("f", FLOAT), ("d", DECIMAL), ("j", JSONB)],
            [INT],
        ),
        (
            "SELECT id, s || 'x', count(*) FROM t WHERE s LIKE $1 GROUP BY id, s LIMIT $2",
            [("id", INT), ("?column?", STRING), ("count", INT)],
            [STRING, INT],
        ),
        (
            "SELECT sum(id), avg(f), max(d), NULL, 1.5, id > 1 FROM t GROUP BY id",
            [
                ("sum", DECIMAL),
                ("avg", FLOAT),
                ("max", DECIMAL),
                ("?column?", None),
                ("?column?", DECIMAL),
                ("?column?", BOOL),
            ],
            [],
        ),
        (
            "SELECT t.s, u.name FROM t JOIN u ON u.t_id = t.id WHERE u.name = $1",
            [("s", STRING), ("name", STRING)],
            [STRING],
        ),
        ("SELECT $1::INT, $2", [("int8", INT), ("?column?", None)], [INT, None]),
        (
            "SELECT j -> 'a', j ->> 'a', j #>> '{a}' FROM t",
            [("?column?", JSONB), ("?column?", STRING), ("?column?", STRING)],
            [],
        ),
        (
            "INSERT INTO t (id, j) VALUES ($1, $2) RETURNING id, j",
            [("id", INT), ("j", JSONB)],
            [INT, JSONB],
        ),
        ("UPDATE t SET f = $1 WHERE id IN ($2, $3)", [], [FLOAT, INT, INT]),
        ("DELETE FROM t WHERE d BETWEEN $1 AND $2 RETURNING *", None, [DECIMAL, DECIMAL]),
        ("SHOW server_version", [("server_version", STRING)], []),
        # queries over queries: their columns' types where every side agrees
        ("SELECT id, s FROM t UNION SELECT id, name FROM u", [("id", INT), ("s", STRING)], []),
        ("SELECT id FROM t UNION ALL SELECT f FROM t LIMIT $1", [("id", None)], [INT]),
        ("SELECT x FROM (SELECT id AS x FROM t) AS d WHERE x > $1", [("x", INT)], [INT]),
        ("SELECT * FROM (SELECT s FROM t) AS d (y)", [("y", STRING)], []),
        ("SELECT g FROM generate_series(1, $1) AS g", [("g", INT)], [INT]),
        (
            "VALUES (1, 'a', 1), (2, 'b', 2.5)",
            [("column1", INT), ("column2", STRING), ("column3", None)],
            [],
        ),
        (
            "WITH w AS (SELECT id, j FROM t) SELECT w.j, u.name FROM w JOIN u ON u.t_id = w.id "
            "WHERE u.id = $1",
            [("j", JSONB), ("name", STRING)],
            [INT],
        ),
        (
            "SELECT id FROM t WHERE id IN (SELECT x FROM (SELECT id AS x FROM u) AS d)",
            [("id", INT)],
            [],
        ),
        (
            "SELECT ARRAY[id, 2], array_agg(s) FROM t WHERE id = ANY($1) AND s <> ALL($2) "
            "GROUP BY id",
            [("array", Kind.ARRAY), ("array_agg", Kind.ARRAY)],
            [Kind.ARRAY, Kind.ARRAY],
        ),
        # a string constant beside a number is of its type; ROWS FROM's columns in order
        (
            "SELECT '3' + 5, f * '2', '1.5' - d FROM t",
            [("?column?", INT), ("?column?", FLOAT), ("?column?", DECIMAL)],
            [],
        ),
        (
            "SELECT * FROM ROWS FROM (generate_series(1, 2), unnest(ARRAY['a'])) AS r (n, s)",
            [("n", INT), ("s", STRING)],
            [],
        ),
        # a value of one kind whichever branch gives it; of two kinds, known as it runs
        (
            "SELECT extract(year FROM now()), CASE WHEN id > $1 THEN id ELSE NULL END, "
            "greatest(d, 1.5), nullif(s, 'x'), CASE WHEN id > 1 THEN id ELSE f END, "
            "gen_random_uuid() FROM t",
            [
                ("extract", FLOAT),
                ("case", INT),
                ("greatest", DECIMAL),
                ("nullif", STRING),
                ("f", None),  # NB: named for its ELSE, as PostgreSQL names it
                ("gen_random_uuid", Kind.UUID),
            ],
            [INT],
        ),
        # numbers of two kinds: as they are evaluated
        (
            "SELECT id / 2, id // 2, id * d, f - id, d + f, id + $1 FROM t",
            [
                ("?column?", DECIMAL),
                ("?column?", INT),
                ("?column?", DECIMAL),
                ("?column?", FLOAT),
                ("?column?", FLOAT),
                ("?column?", INT),
            ],
            [INT],
        ),
        (
            "SELECT round(d, 1), floor(id), sqrt(f), id % 3, id ^ 2, d ^ 2, power(f, 2) FROM t "
            "WHERE id = $1",
            [
                ("round", DECIMAL),
                ("floor", FLOAT),
                ("sqrt", FLOAT),
                ("?column?", INT),
                ("?column?", INT),
                ("?column?", DECIMAL),
                ("power", FLOAT),
            ],
            [INT],
        ),
        # date and time arithmetic: of the kinds it gives as it runs
        (
            "SELECT current_date + 1, current_date - DATE '2020-01-01', now() - INTERVAL "
            "'1 hour', current_date + INTERVAL '1 day', INTERVAL '1 day' * 2.5, "
            "localtimestamp - localtimestamp, random(), now() - current_date, current_date - "
            "localtimestamp FROM t WHERE id = $1",
            [
                ("?column?", Kind.DATE),
                ("?column?", INT),
                ("?column?", Kind.TIMESTAMPTZ),
                ("?column?", Kind.TIMESTAMP),
                ("?column?", Kind.INTERVAL),
                ("?column?", Kind.INTERVAL),
                ("random", FLOAT),
                ("?column?", Kind.INTERVAL),
                ("?column?", Kind.INTERVAL),
            ],
            [INT],
        ),
        # logarithms: of DECIMALs a DECIMAL, else a FLOAT
        (
            "SELECT ln(d), exp(2.0), log(d), log(2, d), ln(id), log(f, 2) FROM t",
            [
                ("ln", DECIMAL),
                ("exp", DECIMAL),
                ("log", DECIMAL),
                ("log", DECIMAL),
                ("ln", FLOAT),
                ("log", FLOAT),
            ],
            [],
        ),
        # the array functions: of their array's type, or the one they make
        (
            "SELECT array_append(ARRAY[id], $1), array_prepend(f, ARRAY[f]), array_position("
            "ARRAY[s], 'a'), array_positions(ARRAY[s], 'a'), array_to_string(ARRAY[s], ','), "
            "string_to_array(s, ',') FROM t",
            [
                ("array_append", Kind.ARRAY),
                ("array_prepend", Kind.ARRAY),
                ("array_position", INT),
                ("array_positions", Kind.ARRAY),
                ("array_to_string", STRING),
                ("string_to_array", Kind.ARRAY),
            ],
            [None],
        ),
        # JSONB's set-returning functions: JSONB or STRING rows; j ? k is a BOOL
        (
            "SELECT jsonb_array_elements(j), id, j ? 'a' FROM t",
            [("jsonb_array_elements", Kind.JSONB), ("id", INT), ("?column?", Kind.BOOL)],
            [],
        ),
        (
            "SELECT * FROM jsonb_array_elements_text('[1]')",
            [("value", STRING)],
            [],
        ),
        (
            "SELECT * FROM jsonb_each('{}'), jsonb_each_text('{}') AS t",
            [("key", STRING), ("value", Kind.JSONB), ("key", STRING), ("value", STRING)],
            [],
        ),
        # a placeholder among a CASE's results or COALESCE's arguments: of the others' type
        (
            "SELECT CASE WHEN id > 0 THEN $1 ELSE 1 END, COALESCE(s, $2), CASE WHEN true "
            "THEN $3 ELSE NULL END FROM t",
            [("case", INT), ("coalesce", STRING), ("case", None)],
            [INT, STRING, None],
        ),
        # AT TIME ZONE: a TIMESTAMPTZ's wall clock time is a TIMESTAMP, and the reverse
        (
            "SELECT now() AT TIME ZONE 'UTC', localtimestamp AT TIME ZONE 'UTC', "
            "justify_hours(INTERVAL '1 hour'), s SIMILAR TO $1 FROM t",
            [
                ("timezone", Kind.TIMESTAMP),
                ("timezone", Kind.TIMESTAMPTZ),
                ("justify_hours", Kind.INTERVAL),
                ("?column?", Kind.BOOL),
            ],
            [STRING],
        ),
        # an untyped string and a DATE are shifted as the TIMESTAMPTZ they are read as
        (
            "SELECT '2020-01-01 12:00' AT TIME ZONE 'UTC', timezone('UTC', DATE '2020-01-01')",
            [("timezone", Kind.TIMESTAMP), ("timezone", Kind.TIMESTAMP)],
            [],
        ),
        ("BEGIN", [], []),
    ],
)
def test_statements_are_described_with_column_and_placeholder_types(
    session: Any,
    text: str,
    expected_columns: list[tuple[str, Kind | None]] | None,
    expected_params: list[Kind | None],
) -> None:
    description = session.describe(text)
    if expected_columns is not None:
        assert columns(description) == expected_columns
    assert kinds(description.params) == expected_params


def test_arrays_are_described_with_their_elements_kind(session: Any) -> None:
    described = session.describe("SELECT ARRAY[f], ARRAY[id, f] FROM t WHERE s = ANY($1)")
    assert described.columns is not None
    assert [t.element if t else None for _name, t in described.columns] == [
        ColumnType(FLOAT),
        None,  # NB: of two kinds: its type follows its values
    ]
    assert described.params == (ColumnType(Kind.ARRAY, element=ColumnType(STRING)),)


@pytest.mark.parametrize(
    "text",
    [
        # a column whose type follows its values as it runs
        "SELECT * FROM (SELECT NULL AS n) AS d",
        "WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
        "SELECT n FROM r",
        "SELECT * FROM crdb_internal.jobs",
        # a view of a column whose type follows its values, and what ``*`` shows of a
        # USING join
        "SELECT * FROM vw WHERE n = $1",
        "SELECT * FROM t JOIN u USING (id)",
        "SELECT * FROM t NATURAL JOIN u",
        # a LATERAL subquery's columns are found by running it
        "SELECT t.id, x.n FROM t, LATERAL (SELECT count(*) AS n FROM u WHERE u.t_id = t.id) AS x",
    ],
)
def test_queries_known_only_when_they_run_have_no_columns(session: Any, text: str) -> None:
    session.execute("CREATE VIEW vw (n, x) AS SELECT id, NULL FROM t")
    assert session.describe(text).columns is None


def test_a_using_joins_merged_column_is_named_unqualified(session: Any) -> None:
    description = session.describe("SELECT id, name FROM t JOIN u USING (id) WHERE id = $1")
    assert columns(description) == [("id", INT), ("name", STRING)]
    assert kinds(description.params) == [INT]


def test_an_empty_table_still_describes_its_columns_and_nothing_is_run(session: Any) -> None:
    description = session.describe("INSERT INTO t VALUES (1, 'a') RETURNING *")
    assert [name for name, _ in columns(description)] == ["id", "s", "f", "d", "j"]
    assert session.execute("SELECT count(*) FROM t").rows == [(0,)]


def test_the_clients_parameter_types_are_kept_and_type_bare_placeholders(session: Any) -> None:
    description = session.describe("SELECT $1 FROM t WHERE s = $2", [ColumnType(Kind.DATE)])
    assert kinds(description.params) == [Kind.DATE, STRING]
    assert columns(description) == [("?column?", Kind.DATE)]


def test_show_statements_have_a_shape_known_only_when_they_run(session: Any) -> None:
    assert session.describe("SHOW TABLES").columns is None


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("SELECT * FROM nowhere", "42P01"),
        ("SELECT nope FROM t", "42703"),
        ("INSERT INTO t (id, nope) VALUES ($1, $2)", "42703"),
        ("SELECT 1; SELECT 2", "42601"),
    ],
)
def test_a_statement_that_could_not_run_fails_to_describe_with_its_sqlstate(
    session: Any, text: str, code: str
) -> None:
    with pytest.raises(SQLError) as caught:
        session.describe(text)
    assert caught.value.code == code


def test_a_table_created_in_the_open_transaction_is_described(session: Any) -> None:
    session.execute("BEGIN")
    session.execute("CREATE TABLE fresh (k STRING PRIMARY KEY)")
    assert columns(session.describe("SELECT * FROM fresh")) == [("k", STRING)]
    session.execute("ROLLBACK")


def test_a_selects_columns_read_from_tables_have_their_table_and_attnum(session: Any) -> None:
    ids = {desc.name: desc.id for _db, tables in session.schema() for desc in tables}
    t_id, u_id = ids["t"], ids["u"]
    description = session.describe(
        "SELECT u.name, x.s, x.id + 1, u.* FROM t AS x JOIN u ON u.t_id = x.id WHERE x.id = $1"
    )
    assert description.origins == ((u_id, 3), (t_id, 2), (0, 0), (u_id, 1), (u_id, 2), (u_id, 3))
    alone = session.describe("SELECT d, f AS g FROM t")
    assert alone.origins == ((t_id, 4), (t_id, 3))
    # NB: a derived table's, a CTE's and a set operation's columns are not told
    derived = session.describe("WITH c AS (SELECT id FROM t) SELECT id FROM c")
    assert derived.origins == ((0, 0),)
    assert session.describe("SELECT id FROM t UNION SELECT id FROM u").origins == ()


def _ids(session: Any) -> dict[str, int]:
    """The ids (pg_class OIDs) of the tables, views and sequences, by name."""
    tables = [desc for _db, found in session.schema() for desc in found]
    return {desc.name: desc.id for desc in [*tables, *session.views_and_sequences()]}


def test_a_view_is_described_from_its_query_as_a_derived_table(session: Any) -> None:
    """As PostgreSQL: its columns, their types and the placeholders compared with them
    are known at Parse, and each column names the view and its number in it."""
    session.execute("CREATE VIEW vw AS SELECT id, s FROM t")
    session.execute("CREATE VIEW vw2 (a, b) AS SELECT s, id * 2 FROM vw WHERE id > 0")
    ids = _ids(session)
    read = session.describe("SELECT * FROM vw WHERE id > $1 AND s = $2")
    assert columns(read) == [("id", INT), ("s", STRING)]
    assert kinds(read.params) == [INT, STRING]
    assert read.origins == ((ids["vw"], 1), (ids["vw"], 2))
    # a view of a view, its columns renamed
    nested = session.describe("SELECT b, a FROM vw2 WHERE b < $1")
    assert columns(nested) == [("b", INT), ("a", STRING)]
    assert kinds(nested.params) == [INT]
    assert nested.origins == ((ids["vw2"], 2), (ids["vw2"], 1))
    joined = session.describe("SELECT v.s, t.f FROM vw AS v JOIN t ON t.id = v.id WHERE v.id = $1")
    assert columns(joined) == [("s", STRING), ("f", FLOAT)]
    assert kinds(joined.params) == [INT]
    assert joined.origins == ((ids["vw"], 2), (ids["t"], 3))


def test_a_view_of_star_keeps_the_columns_it_was_created_with(session: Any) -> None:
    session.execute("CREATE TABLE w (id INT PRIMARY KEY, s STRING)")
    session.execute("CREATE VIEW ws AS SELECT * FROM w")
    session.execute("ALTER TABLE w ADD COLUMN n INT")
    assert columns(session.describe("SELECT * FROM ws")) == [("id", INT), ("s", STRING)]


def test_a_sequence_is_described_as_the_table_it_reads_as(session: Any) -> None:
    session.execute("CREATE SEQUENCE sq")
    described = session.describe("SELECT is_called, last_value FROM sq WHERE last_value > $1")
    assert columns(described) == [("is_called", BOOL), ("last_value", INT)]
    assert kinds(described.params) == [INT]
    assert described.origins == ((_ids(session)["sq"], 3), (_ids(session)["sq"], 1))


def test_a_view_is_not_written_through(session: Any) -> None:
    session.execute("CREATE VIEW vw AS SELECT id, s FROM t")
    with pytest.raises(SQLError) as caught:
        session.describe("INSERT INTO vw VALUES ($1, $2)")
    assert caught.value.code == "42809"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("INSERT INTO t (id, s) VALUES ($1, $2) RETURNING s, id + 1, id", [2, 0, 1]),
        ("UPDATE t AS x SET s = $1 RETURNING x.*", [1, 2, 3, 4, 5]),
        ("DELETE FROM t WHERE id = $1 RETURNING j", [5]),
    ],
)
def test_returning_columns_name_their_table_and_attnum(
    session: Any, text: str, expected: list[int]
) -> None:
    """As PostgreSQL's RowDescription: a RETURNING column read as is is the table's."""
    t_id = _ids(session)["t"]
    origins = session.describe(text).origins
    assert origins == tuple((t_id, n) if n else (0, 0) for n in expected)
