"""What PostgreSQL tools send and CockroachDB accepts: ALTER TABLE ... ADD PRIMARY KEY on
a table keyed by its hidden rowid, VACUUM and ANALYZE as no-ops with a notice, and
PostgreSQL's storage parameters (ignored with a notice)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from feedkv import DB
from feedkv.errors import SQLError


def sql_error(fn: Callable[[], object]) -> SQLError:
    with pytest.raises(SQLError) as info:
        fn()
    return info.value


def test_add_primary_key_moves_the_rows_under_the_new_key(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (id INT NOT NULL, grp INT, v STRING)")
    any_db.sql("INSERT INTO t VALUES (3, 1, 'c'), (1, 1, 'a'), (2, 2, NULL)")
    assert any_db.sql("ALTER TABLE t ADD PRIMARY KEY (id)").tag == "ALTER TABLE"
    assert any_db.sql("SELECT * FROM t").rows == [(1, 1, "a"), (2, 2, None), (3, 1, "c")]
    assert sql_error(lambda: any_db.sql("INSERT INTO t VALUES (2, 0, 'x')")).code == "23505"
    assert any_db.sql("SELECT v FROM t WHERE id = 3").rows == [("c",)]
    any_db.sql("UPDATE t SET v = 'z' WHERE id = 1")
    any_db.sql("DELETE FROM t WHERE id = 2")
    assert any_db.sql("SELECT id, v FROM t").rows == [(1, "z"), (3, "c")]
    assert "rowid" not in any_db.sql("SHOW CREATE TABLE t").rows[0][1]
    assert sql_error(lambda: any_db.sql("ALTER TABLE t ADD PRIMARY KEY (grp)")).code == "42P16"


def test_add_primary_key_on_two_columns_with_a_constraint_name(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (a INT, b STRING, n INT)")
    any_db.sql("INSERT INTO t VALUES (1, 'x', 10), (1, 'y', 20)")
    any_db.sql("ALTER TABLE t ADD CONSTRAINT t_pkey PRIMARY KEY (a, b)")
    assert any_db.sql("SELECT n FROM t WHERE a = 1 AND b = 'y'").rows == [(20,)]
    assert sql_error(lambda: any_db.sql("INSERT INTO t VALUES (NULL, 'z', 0)")).code == "23502"


@pytest.mark.parametrize(
    ("rows", "columns", "code"),
    [
        ("(1, 'a'), (1, 'b')", "k", "23505"),
        ("(1, 'a'), (NULL, 'b')", "k", "23502"),
        ("(1, 'a')", "nosuch", "42703"),
        ("(1, 'a')", "k, k", "42701"),
    ],
)
def test_a_primary_key_the_rows_do_not_allow_is_refused_and_changes_nothing(
    any_db: DB, rows: str, columns: str, code: str
) -> None:
    any_db.sql("CREATE TABLE t (k INT, v STRING)")
    any_db.sql(f"INSERT INTO t VALUES {rows}")
    before = any_db.sql("SELECT k, v FROM t ORDER BY v").rows
    assert sql_error(lambda: any_db.sql(f"ALTER TABLE t ADD PRIMARY KEY ({columns})")).code == code
    assert any_db.sql("SELECT k, v FROM t ORDER BY v").rows == before
    any_db.sql("INSERT INTO t VALUES (1, 'again')")  # still keyed by rowid


def test_a_table_with_a_primary_key_or_an_index_keeps_it(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    assert sql_error(lambda: any_db.sql("ALTER TABLE t ADD PRIMARY KEY (v)")).code == "42P16"
    any_db.sql("CREATE TABLE u (k INT, v INT)")
    any_db.sql("CREATE INDEX u_v ON u (v)")
    assert sql_error(lambda: any_db.sql("ALTER TABLE u ADD PRIMARY KEY (k)")).code == "0A000"


def test_vacuum_and_analyze_do_nothing_but_check_their_tables(any_db: DB) -> None:
    any_db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    for text in ("VACUUM", "VACUUM t", "vacuum analyze t", "VACUUM (VERBOSE, ANALYZE) t (k)"):
        result = any_db.sql(text)
        assert result.tag == "VACUUM"
        assert result.notices and "does nothing" in result.notices[0]
    assert any_db.sql("ANALYZE t").tag == "ANALYZE"
    assert sql_error(lambda: any_db.sql("VACUUM nosuch")).code == "42P01"
    assert sql_error(lambda: any_db.sql("VACUUM t t")).code == "42601"
    session = any_db.session()
    session.execute("BEGIN")
    assert sql_error(lambda: session.execute("VACUUM t")).code == "25001"
    session.execute("ROLLBACK")


def test_storage_parameters_are_ignored_with_a_notice_or_refused(any_db: DB) -> None:
    result = any_db.sql("CREATE TABLE t (k INT) WITH (fillfactor = 100)")
    assert result.notices == ('storage parameter "fillfactor" is ignored',)
    error = sql_error(lambda: any_db.sql("CREATE TABLE u (k INT) WITH (bogus = 1)"))
    assert error.code == "22023" and "bogus" in str(error)
    assert sql_error(lambda: any_db.sql("SELECT * FROM u")).code == "42P01"


def test_schema_locked_false_is_what_every_table_is_and_true_is_refused(any_db: DB) -> None:
    # CockroachDB's storage parameter: feedkv never locks a table's schema.
    result = any_db.sql("CREATE TABLE t (k INT PRIMARY KEY) WITH (schema_locked = false)")
    assert result.notices == ()
    any_db.sql("ALTER TABLE t ADD COLUMN v INT")
    error = sql_error(lambda: any_db.sql("CREATE TABLE u (k INT) WITH (schema_locked = true)"))
    assert error.code == "0A000" and "schema_locked" in error.message
    assert sql_error(lambda: any_db.sql("SELECT * FROM u")).code == "42P01"
    # ALTER TABLE ... SET (schema_locked = false) is accepted (the table is unlocked
    # already), and so is RESET (schema_locked): back to the default of a table created
    # as feedkv creates them (as CockroachDB's create_table_with_schema_locked = off
    # does), unlocked; true is refused, and so is RESET of another parameter
    any_db.sql("INSERT INTO t VALUES (1, 2)")
    any_db.sql("ALTER TABLE t SET (schema_locked = false)")
    any_db.sql("TRUNCATE t")
    any_db.sql("ALTER TABLE t RESET (schema_locked)")
    any_db.sql("ALTER TABLE t ADD COLUMN w INT")  # not locked
    assert any_db.sql("SELECT * FROM t").rows == []
    for statement in (
        "ALTER TABLE t SET (schema_locked = true)",
        "ALTER TABLE t RESET (fillfactor)",
    ):
        assert sql_error(lambda text=statement: any_db.sql(text)).code in ("0A000", "42601")
    assert sql_error(lambda: any_db.sql("ALTER TABLE nope RESET (schema_locked)")).code == ("42P01")
    assert sql_error(lambda: any_db.sql("ALTER TABLE nope SET (schema_locked = false)")).code == (
        "42P01"
    )


def test_rows_keyed_by_a_new_rowid_go_in_without_reads_also_in_a_transaction(
    db: DB, count_batches: Callable[[DB], list[int]]
) -> None:
    db.sql("CREATE TABLE t (v INT)")
    session = db.session()
    sent = []
    # NB: the first round's INSERT takes the table's descriptor lease (its own batches)
    for rows in (1, 1, 200):
        session.execute("BEGIN")
        session.execute("SELECT count(*) FROM t")  # the table's id resolved
        count = count_batches(db)
        session.execute("INSERT INTO t VALUES " + ", ".join(f"({i})" for i in range(rows)))
        sent.append(count[0])
        session.execute("COMMIT")
    assert sent[2] == sent[1]  # no read per row: as many batches for 200 rows as for 1
    assert db.sql("SELECT count(*) FROM t").rows == [(202,)]
