"""An ARRAY in an embedded ``db.sql`` result is what a Python user expects: a sequence of
its values that iterates, indexes, equals a list and shows as one; SQL keeps its array
semantics (comparisons, text) and pgwire its encoding (tests/pgwire/test_pg_arrays.py)."""

from __future__ import annotations

from collections.abc import Sequence

from feedkv import DB
from feedkv.sql.arrays import Array


def test_an_array_value_reads_as_a_python_sequence(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, a STRING[])")
    db.sql("INSERT INTO t VALUES (1, ARRAY['x', 'y z', NULL])")
    ((value,),) = db.sql("SELECT a FROM t").rows
    assert isinstance(value, Array) and isinstance(value, Sequence)
    assert list(value) == ["x", "y z", None]
    assert value[0] == "x" and value[-1] is None and len(value) == 3
    assert value[1:] == ["y z", None] and "x" in value
    assert value == ["x", "y z", None] and value != ["x"]
    assert repr(value) == "['x', 'y z', None]"  # the values, not the element type
    # SQL's view is unchanged: its text form and comparisons
    assert db.sql("SELECT a::STRING, a = ARRAY['x', 'y z', NULL] FROM t").rows == [
        ('{x,"y z",NULL}', True)
    ]


def test_show_changefeed_jobs_full_table_names_is_a_list_of_names(db: DB) -> None:
    db.sql("CREATE TABLE u (k INT PRIMARY KEY)")
    db.sql("CREATE CHANGEFEED FOR u INTO 'null://'")
    result = db.sql("SHOW CHANGEFEED JOBS")
    names = result.rows[0][result.columns.index("full_table_names")]
    assert list(names) == ["defaultdb.public.u"] and names[0] == "defaultdb.public.u"
    assert repr(names) == "['defaultdb.public.u']"
