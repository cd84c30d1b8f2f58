"""``regclass`` over the SQL port, as CockroachDB's: ``'t'::regclass`` prints the
relation's name and is its OID (pg_class's) in comparisons and as ``::oid``;
``to_regclass`` gives NULL where the cast fails with 42P01; ``oid::regclass`` prints the
name, or the number when no relation has that OID; a sequence function takes its
sequence as ``'s'::regclass``. feedkv refused the type (42704)."""

from __future__ import annotations

import psycopg
import pytest


@pytest.fixture
def conn(pg_url: str) -> psycopg.Connection:
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        connection.execute('CREATE TABLE "Mixed" (k INT PRIMARY KEY)')
        yield connection


def test_a_name_cast_to_regclass_prints_it_and_compares_as_pg_class_oid(
    conn: psycopg.Connection,
) -> None:
    [(oid,)] = conn.execute("SELECT oid FROM pg_class WHERE relname = 't'").fetchall()
    row = conn.execute(
        "SELECT 't'::regclass, 'public.t'::regclass, ' defaultdb.public.t '::regclass, "
        "'t'::regclass::oid, to_regclass('t'), to_regclass('nope')"
    ).fetchone()
    assert row == ("t", "t", "t", oid, "t", None)
    found = conn.execute("SELECT c.relname FROM pg_class c WHERE c.oid = 't'::regclass")
    assert found.fetchall() == [("t",)]
    shown = conn.execute(
        "SELECT c.oid::regclass, c.oid::regclass::text, 4061301040::regclass "
        "FROM pg_class c WHERE c.relname IN ('t', 'Mixed') ORDER BY c.relname"
    ).fetchall()
    assert shown == [('"Mixed"', '"Mixed"', "4061301040"), ("t", "t", "4061301040")]
    assert conn.execute("""SELECT '"Mixed"'::regclass""").fetchone() == ('"Mixed"',)


@pytest.mark.parametrize(
    ("name", "shown"),
    [("nope", "nope"), ("Mixed", "mixed"), ("other.t", "other.t"), ("x.y.z.t", "x.y.z.t")],
)
def test_an_unknown_relation_is_42p01(conn: psycopg.Connection, name: str, shown: str) -> None:
    with pytest.raises(psycopg.errors.UndefinedTable) as caught:
        conn.execute(f"SELECT '{name}'::regclass")
    assert caught.value.diag.message_primary == f'relation "{shown}" does not exist'
    with pytest.raises(psycopg.errors.UndefinedTable):
        conn.execute(f"SELECT relname FROM pg_class WHERE oid = '{name}'::regclass")


def test_a_parameter_cast_to_regclass(conn: psycopg.Connection) -> None:
    row = conn.execute("SELECT relname FROM pg_class WHERE oid = %s::regclass", ["t"])
    assert row.fetchall() == [("t",)]


def test_sequence_functions_take_a_regclass(conn: psycopg.Connection) -> None:
    conn.execute("CREATE SEQUENCE s")
    assert conn.execute("SELECT nextval('s'::regclass)").fetchone() == (1,)
    assert conn.execute("SELECT setval('public.s'::regclass, 10)").fetchone() == (10,)
    assert conn.execute("SELECT currval('s'::REGCLASS)").fetchone() == (10,)


def test_pg_catalogs_relations_are_relations_too(conn: psycopg.Connection) -> None:
    # NB: SQLAlchemy reads comments where classoid = 'pg_catalog.pg_constraint'::regclass
    row = conn.execute(
        "SELECT 'pg_catalog.pg_constraint'::regclass, 'pg_class'::regclass::oid, %s::regclass::oid",
        ["pg_catalog.pg_policy"],
    ).fetchone()
    assert row == ("pg_constraint", 1259, 3256)
