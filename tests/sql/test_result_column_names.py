"""Result columns are named as CockroachDB names them (its GetRenderColName, PostgreSQL's
FigureColname): a function by its name as written (``pow``, ``power``, ``substr``,
``char_length``, ``bool_and``), a cast by its operand when that names a column or a
function, else by its type (``1::STRING`` is ``text``); an operator, sqlglot's
function-like ones too (``2 ^ 3``, ``j -> 'a'``), is ``?column?``. feedkv named
``bool_and`` 'logical_and', every cast 'cast' and ``2 ^ 3`` 'power'."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.sql.session import Session


@pytest.fixture
def session(db: DB) -> Session:
    s = db.session()
    s.execute("CREATE TABLE kv (k INT PRIMARY KEY, v INT, b BOOL, s STRING, f FLOAT, j JSONB)")
    s.execute("""INSERT INTO kv VALUES (1, 2, true, 'a', 1.5, '{"a": 1}')""")
    return s


@pytest.mark.parametrize(
    ("expression", "name"),
    [
        ("bool_and(b)", "bool_and"),
        ("bool_or(b)", "bool_or"),
        ("var_samp(v)", "var_samp"),
        ("count(*)", "count"),
        ("char_length(s)", "char_length"),
        ("substr(s, 1)", "substr"),
        ("substring(s, 1)", "substring"),
        ("trim(s)", "btrim"),
        ("position('a' in s)", "strpos"),
        ("pow(v, 2)", "pow"),
        ("power(v, 2)", "power"),
        ("ceiling(f)", "ceiling"),
        ("lower(s)", "lower"),
        ("greatest(1, 2)", "greatest"),
        ("ifnull(v, 1)", "coalesce"),
        ("nullif(v, 1)", "nullif"),
        ("count(*) OVER ()", "count"),
        ("json_agg(v)", "json_agg"),
        ("json_agg(v ORDER BY k)", "json_agg"),
        ("jsonb_agg(v)", "jsonb_agg"),
        ("v ^ 2", "?column?"),
        ("j -> 'a'", "?column?"),
        ("j ->> 'a'", "?column?"),
        ("1 + 1", "?column?"),
        ("b AND true", "?column?"),
        ("b OR false", "?column?"),
        ("-v", "?column?"),
        ("v::STRING", "v"),
        ("CAST(s AS STRING)", "s"),
        ("lower(s)::BYTES", "lower"),
        ("1::STRING", "text"),
        ("1::INT", "int8"),
        ("1.5::FLOAT4", "float4"),
        ("1.5::FLOAT", "float8"),
        ("'a'::CHAR(2)", "bpchar"),
        ("(v + 1)::DECIMAL", "numeric"),
        ("true", "bool"),
        ("false::STRING", "text"),
        ("ARRAY[1]", "array"),
        ("(SELECT k FROM kv)", "k"),
        ("(SELECT k AS z FROM kv)", "z"),
        ("EXISTS (SELECT 1)", "exists"),
        ("CASE WHEN true THEN 1 ELSE v END", "v"),
        ("CASE WHEN true THEN 1 END", "case"),
        ("(v)", "v"),
    ],
)
def test_a_result_column_is_named_as_cockroachdb_names_it(
    session: Session, expression: str, name: str
) -> None:
    assert session.execute(f"SELECT {expression} FROM kv").columns == (name,)


def test_an_unquoted_alias_folds_to_lower_case_and_a_quoted_one_keeps_its_case(
    session: Session,
) -> None:
    # As CockroachDB and PostgreSQL fold unquoted names: feedkv kept 'Total' as written,
    # so ORDER BY total and s.x of a subquery's AS X found no column.
    result = session.execute('SELECT v AS Total, k AS "Key" FROM kv AS T ORDER BY total')
    assert result.columns == ("total", "Key")
    assert session.execute("SELECT t.k FROM kv AS T").rows == [(1,)]
    assert session.execute("SELECT s.x FROM (SELECT k AS X FROM kv) AS s").rows == [(1,)]
    returned = session.execute("INSERT INTO kv (k) VALUES (2) RETURNING k AS NewKey")
    assert returned.columns == ("newkey",)
