"""pg_catalog and information_schema as PostgreSQL tools read them: psql's \\d, \\dt and
\\l, catalog queries over the wire, and the version and session functions drivers
and dialects ask for at connect time."""

from __future__ import annotations

import shutil
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from psql_helpers import psql
from psycopg.types import TypeInfo
from psycopg.types.enum import EnumInfo

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.pgwire.catalog import catalog_param_oids, reads_catalog, run_catalog_query


@pytest.fixture
def url(pg_url: str) -> str:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(20) NOT NULL DEFAULT 'x', "
            "d DECIMAL(10,2))"
        )
        conn.execute("CREATE TABLE two (a STRING, b INT, PRIMARY KEY (b, a))")
    return pg_url


def query(db: DB, text: str, *params: Any) -> list[tuple[Any, ...]]:
    session = db.session()
    result = run_catalog_query(
        text, params, session.schema(), database="defaultdb", user="root", version="v"
    )
    return result.rows


def test_catalog_queries_are_recognized_by_the_names_they_read() -> None:
    assert reads_catalog("SELECT relname FROM pg_catalog.pg_class")
    assert reads_catalog("select * from information_schema.columns")
    assert reads_catalog("SELECT pg_catalog.version()")
    assert not reads_catalog("SELECT * FROM pages WHERE pg = 1")


def test_pg_class_attribute_and_index_describe_a_table(db: DB, url: str) -> None:
    rows = query(
        db,
        "SELECT c.relname, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), "
        "a.attnotnull FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute a "
        "ON a.attrelid = c.oid WHERE c.relname = $1 AND a.attnum > 0 ORDER BY a.attnum",
        "t",
    )
    assert rows == [
        ("t", "id", "bigint", True),
        ("t", "s", "character varying(20)", True),
        ("t", "d", "numeric(10,2)", False),
    ]
    keys = query(
        db,
        "SELECT unnest(i.indkey) AS attnum, generate_subscripts(i.indkey, 1) AS ord "
        "FROM pg_catalog.pg_index i WHERE i.indrelid = 'two'::regclass ORDER BY ord",
    )
    assert keys == [(2, 0), (1, 1)]  # b, then a; an int2vector's subscripts start at 0
    expanded = query(
        db,
        "SELECT (information_schema._pg_expandarray(i.indkey)).n AS n FROM pg_catalog.pg_index i "
        "WHERE i.indrelid = 'two'::regclass ORDER BY n",
    )
    assert expanded == [(1,), (2,)]  # pgjdbc's KEY_SEQ: _pg_expandarray counts from 1


def test_information_schema_lists_tables_and_columns(db: DB, url: str) -> None:
    tables = query(
        db,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 "
        "ORDER BY table_name",
        "public",
    )
    assert tables == [("t",), ("two",)]
    columns = query(
        db,
        "SELECT column_name, data_type, is_nullable::bool, column_default "
        "FROM information_schema.columns WHERE table_name = 't' ORDER BY ordinal_position",
    )
    assert columns == [
        ("id", "bigint", False, None),
        ("s", "character varying", False, "'x'"),
        ("d", "numeric", True, None),
    ]


def test_queries_of_catalogs_feedkv_keeps_empty_have_no_rows(db: DB, url: str) -> None:
    assert query(db, "SELECT t.tgname FROM pg_catalog.pg_trigger t WHERE t.tgrelid = 1") == []


def test_a_catalog_query_sqlite_cannot_run_is_refused_with_0a000(db: DB, url: str) -> None:
    with pytest.raises(SQLError) as caught:
        query(db, "SELECT pg_catalog.pg_stat_get_numscans(oid) FROM pg_catalog.pg_class")
    assert caught.value.code == "0A000"


def test_a_lateral_subquery_of_aggregates_reads_its_one_row(db: DB, url: str) -> None:
    text = (
        "SELECT c.relname, x.n, x.top FROM pg_class c, LATERAL (SELECT count(*) AS n, "
        "max(a.attname) AS top FROM pg_attribute a WHERE a.attrelid = c.oid) x "
        "WHERE c.relname IN ('t', 'two') ORDER BY x.n DESC"
    )
    assert query(db, text) == [("t", 3, "s"), ("two", 2, "b")]
    # pg_partition_tree has rows only for partitioned tables, which feedkv has none of
    assert query(db, "SELECT relid, level FROM pg_partition_tree('t')") == []
    with pytest.raises(SQLError) as caught:
        query(db, "SELECT x.n FROM pg_class c, LATERAL (SELECT c.relnatts AS n) x")
    assert caught.value.code == "0A000"
    assert "LATERAL" in caught.value.message


def test_drivers_get_the_version_database_and_schema(url: str) -> None:
    with psycopg.connect(url) as conn:
        (version,) = conn.execute("SELECT pg_catalog.version()").fetchone() or ("",)
        assert version.startswith("CockroachDB OSS v23.1.0 (feedkv ")
        assert "PostgreSQL 13.0" in version
        assert conn.execute("SELECT version()").fetchone() == (version,)
        row = conn.execute("SELECT current_database(), current_schema()").fetchone()
        assert row == ("defaultdb", "public")
        assert conn.execute("SHOW server_version").fetchone() == ("13.0.0",)
        # extended protocol, typed parameters
        found = conn.execute(
            "SELECT relname FROM pg_catalog.pg_class WHERE relname = %s AND relkind = %s",
            ["t", "r"],
        ).fetchall()
        assert found == [("t",)]


def test_psycopg_type_info_finds_types_and_enums_by_name(url: str) -> None:
    # what SQLAlchemy's postgresql+psycopg dialect asks at connect (hstore: absent) and
    # psycopg's EnumInfo reads
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TYPE mood AS ENUM ('sad', 'happy')")
        assert TypeInfo.fetch(conn, "hstore") is None
        for name in ("int8", "bigint", "pg_catalog.int8", "timestamp with time zone"):
            info = TypeInfo.fetch(conn, name)
            assert info is not None, name
            assert (info.name, info.oid) in (("int8", 20), ("timestamptz", 1184))
        array = TypeInfo.fetch(conn, "int8[]")
        assert array is not None
        assert array.oid == 1016
        mood = EnumInfo.fetch(conn, "public.mood")
        assert mood is not None
        assert mood.labels == ["sad", "happy"]
        assert conn.execute("SELECT oid FROM pg_type WHERE typname = 'mood'").fetchone() == (
            mood.oid,
        )


def test_sqlalchemys_postgresql_dialect_connects_and_runs_a_query(url: str) -> None:
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT id FROM t")).all() == []
    finally:
        engine.dispose()


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_describes_tables_and_lists_databases(url: str) -> None:
    listed = psql(url, "\\dt")
    assert " public | t    | table | root" in listed
    assert " public | two  | table | root" in listed
    described = psql(url, "\\d t")
    assert 'Table "public.t"' in described
    assert " s      | character varying(20) |           | not null | 'x'" in described
    assert '"t_pkey" PRIMARY KEY, btree (id)' in described
    assert '"two_pkey" PRIMARY KEY, btree (b, a)' in psql(url, "\\d two")
    assert " defaultdb | root " in psql(url, "\\l")


def test_psql_lists_roles_with_their_attributes_and_memberships(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE USER carol")
        conn.execute("CREATE USER dave WITH PASSWORD 'secret'")
        conn.execute("GRANT admin TO dave")
    listed = psql(url, "\\du")
    assert " admin     | Superuser, Create role, Create DB, Cannot login | {}" in listed
    assert " carol     |                                                 | {}" in listed
    assert " dave      | Superuser, Create role, Create DB               | {admin}" in listed
    assert " root      | Superuser, Create role, Create DB, Bypass RLS   | {admin}" in listed
    assert psql(url, "\\dg") == listed
    assert " carol     |            | {}" in psql(url, "\\du carol")
    with psycopg.connect(url) as conn:
        users = conn.execute("SHOW USERS").fetchall()
        assert conn.execute("SHOW ROLES").fetchall() == users
    assert users == [
        ("admin", "", []),
        ("carol", "", []),
        ("dave", "", ["admin"]),
        ("root", "", ["admin"]),
    ]


def test_psql_dp_and_l_show_the_grants_show_grants_lists(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in (
            "CREATE USER alice",
            "CREATE USER bob",
            "GRANT SELECT, INSERT ON t TO alice",
            "GRANT CHANGEFEED ON t TO bob",
            "GRANT UPDATE ON t TO bob",
            "GRANT CREATE ON DATABASE defaultdb TO bob",
        ):
            conn.execute(statement)
        shown = conn.execute("SHOW GRANTS ON t").fetchall()
        assert [(row[3], row[4]) for row in shown] == [
            ("admin", "ALL"),
            ("alice", "INSERT"),
            ("alice", "SELECT"),
            ("bob", "CHANGEFEED"),
            ("bob", "UPDATE"),
            ("root", "ALL"),
        ]
        assert conn.execute(
            "SELECT relacl FROM pg_catalog.pg_class WHERE relname = 'two'"
        ).fetchall() == [(None,)]
    # NB: CHANGEFEED has no PostgreSQL letter and is left out, as CockroachDB does
    assert psql(url, "\\dp t").splitlines()[3:5] == [
        " public | t    | table | alice=ar/root    +|                   | ",
        "        |      |       | bob=w/root        |                   | ",
    ]
    assert psql(url, "\\z t") == psql(url, "\\dp t")
    assert "| libc            | bob=C/root" in psql(url, "\\l defaultdb")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("REVOKE SELECT, INSERT ON t FROM alice")
        relacl = conn.execute("SELECT relacl FROM pg_catalog.pg_class WHERE relname = 't'")
        assert relacl.fetchall() == [(["bob=w/root"],)]


def test_a_user_who_is_no_admin_sees_only_their_own_aclitems(db: DB, url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE USER alice")
        conn.execute("CREATE USER bob")
        conn.execute("GRANT SELECT ON t TO alice")
        conn.execute("GRANT DELETE ON t TO bob")
    session = db.session()
    text = "SELECT relacl FROM pg_catalog.pg_class WHERE relname = 't'"
    seen = {
        user: run_catalog_query(
            text,
            (),
            session.schema(),
            database="defaultdb",
            user=user,
            version="v",
            users=session.users(),
            grants=session.grants(),
        ).rows
        for user in ("root", "alice")
    }
    assert [list(acl.values) for (acl,) in seen["root"]] == [["alice=r/root", "bob=d/root"]]
    assert [list(acl.values) for (acl,) in seen["alice"]] == [["alice=r/root"]]


def test_psql_du_and_pg_auth_members_show_role_memberships(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE ROLE readers")
        conn.execute("CREATE USER erin")
        conn.execute("GRANT readers TO erin")
        members = conn.execute(
            "SELECT r.rolname, m.rolname FROM pg_catalog.pg_auth_members a "
            "JOIN pg_catalog.pg_roles r ON r.oid = a.roleid "
            "JOIN pg_catalog.pg_roles m ON m.oid = a.member ORDER BY 1, 2"
        ).fetchall()
        assert members == [("admin", "root"), ("readers", "erin")]
    assert _du_row(url, "erin") == ["erin", "", "{readers}"]
    assert _du_row(url, "readers") == ["readers", "Cannot login", "{}"]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("REVOKE readers FROM erin")
    assert _du_row(url, "erin") == ["erin", "", "{}"]


def _du_row(url: str, role: str) -> list[str]:
    """The cells of ``role``'s row in psql's ``\\du``."""
    for line in psql(url, "\\du").splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if cells[0] == role:
            return cells
    raise AssertionError(f"{role} is not listed by \\du")


def test_array_of_a_subquery_keeps_its_order_and_is_empty_without_rows(db: DB, url: str) -> None:
    rows = query(
        db,
        "SELECT c.relname, ARRAY(SELECT a.attname FROM pg_catalog.pg_attribute a "
        "WHERE a.attrelid = c.oid ORDER BY a.attnum DESC), "
        "ARRAY(SELECT p.polname FROM pg_catalog.pg_policy p WHERE p.polrelid = c.oid) "
        "FROM pg_catalog.pg_class c WHERE c.relname IN ('t', 'two') ORDER BY 1",
    )
    assert [(name, list(names.values), list(none.values)) for name, names, none in rows] == [
        ("t", ["d", "s", "id"], []),
        ("two", ["b", "a"], []),
    ]


@pytest.mark.parametrize(
    ("command", "shows"),
    [
        ("\\dp t", " public | t    | table |"),
        ("\\l+", "| pg_default |"),
        ("\\dt+", " public | two  | table | root  | permanent   | heap"),
        ("\\d+ t", " id     | bigint                |           | not null |"),
        ("\\di", " public | t_pkey   | index | root  | t"),
        ("\\dn", " public | root"),
        ("\\db", " pg_default | root  |"),
        ("\\dx", "(0 rows)"),
        ("\\df", "(0 rows)"),
    ],
)
def test_psql_describe_commands_answer(url: str, command: str, shows: str) -> None:
    assert shows in psql(url, command)


def test_sizes_are_unknown_and_pretty_printed_as_postgresql_does(db: DB, url: str) -> None:
    rows = query(
        db,
        "SELECT pg_catalog.pg_size_pretty(10239), pg_catalog.pg_size_pretty(123456), "
        "pg_catalog.pg_size_pretty(10000000000), "
        "pg_catalog.pg_size_pretty(pg_catalog.pg_table_size('t'::regclass))",
    )
    assert rows == [("10239 bytes", "121 kB", "9537 MB", None)]


def test_show_databases_and_psqls_list_agree_on_every_database(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE shop")
        shown = conn.execute("SHOW DATABASES").fetchall()
        columns = [c.name for c in conn.execute("SHOW DATABASES").description or []]
        catalog = conn.execute(
            "SELECT d.datname, pg_catalog.pg_get_userbyid(d.datdba) "
            "FROM pg_catalog.pg_database d ORDER BY 1"
        ).fetchall()
    assert columns == [
        "database_name", "owner", "primary_region", "secondary_region", "regions",
        "survival_goal",
    ]  # fmt: skip
    assert shown == [
        ("defaultdb", "root", None, None, [], None),
        ("postgres", "root", None, None, [], None),
        ("shop", "root", None, None, [], None),
        ("system", "node", None, None, [], None),
    ]
    assert catalog == [(name, owner) for name, owner, *_ in shown]
    listed = psql(url, "\\l")
    for name, owner, *_ in shown:
        assert f" {name:<9} | {owner:<5} | UTF8 " in listed


def test_a_catalog_querys_parameters_take_the_types_they_are_cast_to() -> None:
    text = "SELECT 1 FROM pg_type WHERE oid = any($1::oid[]) AND typname = $2::text AND $3"
    assert catalog_param_oids(text, 3) == (1028, 25, 0)


def test_the_key_words_pgjdbc_lists_are_the_reserved_ones(db: DB) -> None:
    """DatabaseMetaData.getSQLKeywords: pg_get_keywords() but a list, by ``<> ALL``."""
    text = (
        "select string_agg(word, ',') from pg_catalog.pg_get_keywords() "
        "where word <> ALL ('{a,abs,all,and,analyse}'::text[])"
    )
    ((words,),) = query(db, text)
    assert "analyze" in words.split(",")
    assert not {"all", "and", "analyse"} & set(words.split(","))


def test_array_subscripts_bounds_and_a_series_read_as_postgresql_reads_them(db: DB) -> None:
    """pgjdbc's type cache finds a schema's place in the search path so."""
    text = (
        "select s.r, (pg_catalog.current_schemas(true))[s.r] as nspname "
        "from generate_series(1, array_upper(current_schemas(true), 1)) as s(r)"
    )
    assert query(db, text) == [(1, "pg_catalog"), (2, "public")]
    assert query(db, "SELECT ('{7,8}'::int[])[2], ('{7}'::int[])[2]") == [(8, None)]


def test_parameters_in_an_array_bind_by_their_numbers(db: DB, url: str) -> None:
    text = (
        "SELECT relname FROM pg_catalog.pg_class WHERE relname = $2 AND relkind = ANY (ARRAY[$1])"
    )
    assert query(db, text, "r", "t") == [("t",)]
