"""Integer literals lifted into placeholders (feedkv.sql.literal_lifting): what the lexer
lifts, and where a template is taken."""

from __future__ import annotations

import pytest

from feedkv.sql.descriptor import Column, Family, TableDescriptor
from feedkv.sql.literal_lifting import MAX_LIFTED, lift, lifted, lifts_into, table_of
from feedkv.sql.session import prepare
from feedkv.sql.statements import TableName
from feedkv.sql.types import ColumnType, Kind


def test_pgbench_tpcb_statements_lift_their_values() -> None:
    assert lift("UPDATE a SET b = b + -1234 WHERE aid = 5678;") == (
        "UPDATE a SET b = b + $1 WHERE aid = $2;",
        (-1234, 5678),
    )
    assert lift("INSERT INTO h (t, b, a, d, m) VALUES (1, 2, 3, -4, CURRENT_TIMESTAMP)") == (
        "INSERT INTO h (t, b, a, d, m) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)",
        (1, 2, 3, -4),
    )


@pytest.mark.parametrize(
    "text",
    [
        "SELECT a FROM t WHERE s = '12' AND t2.c = 1.5 AND d = 1e3",
        'SELECT "x1" FROM t1 WHERE c = 007',
        f"SELECT a FROM t WHERE b = {MAX_LIFTED + 1}",
        "SELECT a FROM t WHERE b = \u0663 AND c = \u06635",  # Arabic-Indic digits
        "BEGIN",
    ],
)
def test_strings_identifiers_decimals_and_large_or_padded_numbers_stay(text: str) -> None:
    assert lift(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "SELECT a FROM t WHERE b = $1 AND c = 2",
        "SELECT a FROM t WHERE b = 2 -- two",
        "SELECT a FROM t WHERE b = 2 /* two */",
        "SELECT a FROM t WHERE b = E'\\'' AND c = 2",
        "SELECT a FROM t WHERE b = $$x$$ AND c = 2",
    ],
)
def test_texts_with_placeholders_comments_or_prefixed_strings_are_left_alone(text: str) -> None:
    assert lift(text) is None


def test_a_minus_sign_is_the_literals_only_after_an_operator_and_right_before_it() -> None:
    assert lift("SELECT a FROM t WHERE b = c - 2 AND d = -3 AND e = - 4") == (
        "SELECT a FROM t WHERE b = c - $1 AND d = $2 AND e = - $3",
        (2, -3, 4),
    )


@pytest.mark.parametrize(
    "text",
    [
        "SELECT a FROM t WHERE b = 1 AND 2 < c",
        "UPDATE t SET a = 5, b = b - 1 WHERE k = 3",
        "DELETE FROM t WHERE k >= 3",
        "INSERT INTO t (k, v) VALUES (1, 'x') ON CONFLICT (k) DO UPDATE SET v = excluded.v",
    ],
)
def test_a_template_is_taken_where_literals_and_parameters_are_alike(text: str) -> None:
    found = lifted(text, prepare)
    assert found is not None and found == lift(text)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 1",  # the literal types the column
        "SELECT a FROM t ORDER BY 1",  # a position
        "SELECT a FROM t LIMIT 5",
        "SELECT a FROM t WHERE b = c + 1",  # a constant beside a column's value
        "SELECT a FROM t WHERE b IN (1, 2)",
        "UPDATE t SET a = 2 * a WHERE k = 1",
        "INSERT INTO t VALUES (1), (2)",  # several rows: their kinds are checked alike
        "UPDATE t SET a = 1 WHERE k = 2; SELECT 3",
        "SELECT a FROM t WHERE b = 1 AND",  # does not parse: fails as written
        "CREATE TABLE t (k INT PRIMARY KEY, b INT AS (k * 2) STORED)",
        "CREATE TABLE t (k INT) WITH (fillfactor = 90)",
    ],
)
def test_other_places_keep_their_literals(text: str) -> None:
    assert lift(text) is not None
    assert lifted(text, prepare) is None


def test_a_template_reads_one_table_named_as_such() -> None:
    [(select, _count)] = prepare("SELECT a FROM db.t WHERE b = $1")
    assert table_of(select) == TableName("t", "db")
    for text in (
        "SELECT a FROM t JOIN u ON t.k = u.k WHERE b = 1",
        "SELECT a FROM (SELECT a, b FROM t) AS d WHERE b = 1",
        "WITH w AS (SELECT 1) SELECT a FROM t WHERE b = 1",
        "UPDATE t SET a = 1 FROM u WHERE t.k = 2",
    ):
        assert lift(text) is not None
        assert lifted(text, prepare) is None, text


def test_a_table_with_jsonb_anywhere_in_its_columns_takes_no_template() -> None:
    def table(*types: ColumnType) -> TableDescriptor:
        columns = tuple(Column(i, f"c{i}", t) for i, t in enumerate(types, start=1))
        family = Family(0, "primary", tuple(c.id for c in columns))
        return TableDescriptor(52, "t", 1, columns, primary_key=(1,), families=(family,))

    integer = ColumnType(Kind.INT)
    assert lifts_into(table(integer, ColumnType(Kind.STRING)))
    assert not lifts_into(table(integer, ColumnType(Kind.JSONB)))
    assert not lifts_into(table(integer, ColumnType(Kind.ARRAY, element=ColumnType(Kind.JSONB))))
