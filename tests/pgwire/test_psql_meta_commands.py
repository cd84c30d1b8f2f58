"""psql's describe commands (``\\d`` and its kin), each run by Debian's psql against a
secure node, answer as PostgreSQL's do on the same schema: an empty list where feedkv
has no such objects (functions, extensions, comments on constraints, partitioned
relations), and a clear error (never a Python one) for what there is none of. ``\\dd``
failed on pg_trigger; ``\\dP+`` on its LATERAL subquery (0A000)."""

from __future__ import annotations

import psycopg
import pytest
from psql_helpers import psql, psql_failure


@pytest.fixture
def schema_url(pg_url: str) -> str:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(20) NOT NULL DEFAULT 'x', "
            "d DECIMAL(10,2))"
        )
        conn.execute("CREATE TABLE u (a INT PRIMARY KEY)")
        conn.execute("CREATE INDEX t_s_idx ON t (s)")
        conn.execute("CREATE VIEW v AS SELECT id, s FROM t")
        conn.execute("CREATE SEQUENCE sq")
        conn.execute("CREATE TYPE mood AS ENUM ('sad', 'ok')")
        conn.execute("COMMENT ON TABLE t IS 'the t'")
        conn.execute("COMMENT ON COLUMN t.d IS 'amount'")
    return pg_url


TABLE_T = [
    'Table "public.t"',
    "Column|Type|Collation|Nullable|Default",
    "id|bigint||not null|",
    "s|character varying(20)||not null|'x'",
    "d|numeric(10,2)|||",
    "Indexes:",
    '    "t_pkey" PRIMARY KEY, btree (id)',
    '    "t_s_idx" btree (s)',
]
RELATIONS = ["public|sq|sequence|root", "public|t|table|root", "public|u|table|root",
             "public|v|view|root"]  # fmt: skip
# Each command and what psql prints for it (unaligned: -A), as PostgreSQL's would be
# on this schema with root the owner of everything.
ANSWERS = {
    "\\d": ["List of relations", "Schema|Name|Type|Owner", *RELATIONS, "(4 rows)"],
    "\\d t": TABLE_T,
    "\\dt": ["List of relations", "Schema|Name|Type|Owner", RELATIONS[1], RELATIONS[2],
             "(2 rows)"],
    "\\di": ["List of relations", "Schema|Name|Type|Owner|Table", "public|t_pkey|index|root|t",
             "public|t_s_idx|index|root|t", "public|u_pkey|index|root|u", "(3 rows)"],
    "\\dv": ["List of relations", "Schema|Name|Type|Owner", RELATIONS[3], "(1 row)"],
    "\\ds": ["List of relations", "Schema|Name|Type|Owner", RELATIONS[0], "(1 row)"],
    "\\dn": ["List of schemas", "Name|Owner", "public|root", "(1 row)"],
    "\\df": ["List of functions", "Schema|Name|Result data type|Argument data types|Type",
             "(0 rows)"],
    "\\du": ["List of roles", "Role name|Attributes|Member of",
             "admin|Superuser, Create role, Create DB, Cannot login|{}",
             "root|Superuser, Create role, Create DB, Bypass RLS|{admin}"],
    "\\dd": ["Object descriptions", "Schema|Name|Object|Description", "(0 rows)"],
    "\\dT": ["List of data types", "Schema|Name|Description", "public|mood|", "(1 row)"],
    "\\dx": ["List of installed extensions", "Name|Version|Schema|Description", "(0 rows)"],
    "\\d+ t": [
        'Table "public.t"',
        "Column|Type|Collation|Nullable|Default|Storage|Stats target|Description",
        "id|bigint||not null||plain||",
        "s|character varying(20)||not null|'x'|plain||",
        "d|numeric(10,2)||||plain||amount",
        *TABLE_T[5:],
        "Access method: heap",
    ],
    "\\dt+": [
        "List of relations",
        "Schema|Name|Type|Owner|Persistence|Access method|Size|Description",
        "public|t|table|root|permanent|heap||the t",
        "public|u|table|root|permanent|heap||",
        "(2 rows)",
    ],
    "\\dd t": ["Object descriptions", "Schema|Name|Object|Description", "(0 rows)"],
    "\\dconfig": ["List of non-default configuration parameters", "Parameter|Value",
                  "(0 rows)"],
    "\\db+": ["List of tablespaces",
              "Name|Owner|Location|Access privileges|Options|Size|Description",
              "pg_default|root|||||", "(1 row)"],
    "\\dA+": ["List of access methods", "Name|Type|Handler|Description", "btree|Index|bthandler|",
              "heap|Table|heap_tableam_handler|", "(2 rows)"],
    "\\dconfig+ max*": ["List of configuration parameters",
                        "Parameter|Value|Type|Context|Access privileges",
                        "max_index_keys|32|integer|internal|", "(1 row)"],
    "\\dO": ["List of collations",
             "Schema|Name|Collate|Ctype|ICU Locale|Provider|Deterministic?", "(0 rows)"],
    # NB: the + forms join a LATERAL sum over pg_partition_tree
    "\\dP": ["List of partitioned relations", "Schema|Name|Owner|Type|Table", "(0 rows)"],
    "\\dP+": ["List of partitioned relations",
              "Schema|Name|Owner|Type|Table|Total size|Description", "(0 rows)"],
    "\\dPi+": ["List of partitioned indexes", "Schema|Name|Owner|Table|Total size|Description",
               "(0 rows)"],
    "\\dPtn+": ["List of partitioned tables",
                "Schema|Name|Owner|Parent name|Leaf partition size|Total size|Description",
                "(0 rows)"],
}  # fmt: skip


@pytest.mark.parametrize("command", list(ANSWERS))
def test_describe_commands_answer_as_postgresql(schema_url: str, command: str) -> None:
    assert psql(schema_url, command, "-A").splitlines() == ANSWERS[command]


def test_l_lists_the_databases(schema_url: str) -> None:
    lines = psql(schema_url, "\\l", "-A").splitlines()
    assert lines[:2] == [
        "List of databases",
        "Name|Owner|Encoding|Collate|Ctype|ICU Locale|Locale Provider|Access privileges",
    ]
    assert "defaultdb|root|UTF8|C.UTF-8|C.UTF-8||libc|" in lines
    assert lines[-1] == f"({len(lines) - 3} rows)"


def test_ds_lists_pg_catalogs_relations_too(schema_url: str) -> None:
    lines = psql(schema_url, "\\dS", "-A").splitlines()
    assert lines[:2] == ["List of relations", "Schema|Name|Type|Owner"]
    assert {"pg_catalog|pg_class|table|root", "pg_catalog|pg_roles|view|root"} <= set(lines)
    assert lines[-5:] == [*RELATIONS, f"({len(lines) - 3} rows)"]
    described = psql(schema_url, "\\d pg_catalog.pg_namespace", "-A").splitlines()
    assert described[:3] == [
        'Table "pg_catalog.pg_namespace"',
        "Column|Type|Collation|Nullable|Default",
        "oid|oid|||",
    ]
    assert "nspname|name|||" in described


def test_what_there_is_none_of_is_a_clear_error(schema_url: str) -> None:
    assert psql_failure(schema_url, "\\d nope").strip() == 'Did not find any relation named "nope".'
    assert psql_failure(schema_url, "\\sf nope").strip() == (
        'ERROR:  function "nope" does not exist'
    )


def test_d_shows_foreign_keys_both_ways(pg_url: str) -> None:
    # psql asks for them only when pg_class.relhastriggers says so, as PostgreSQL's
    # foreign keys are triggers
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE p1 (id INT PRIMARY KEY)")
        conn.execute(
            "CREATE TABLE c1 (id INT PRIMARY KEY, pid INT REFERENCES p1 (id) ON DELETE CASCADE)"
        )
    child = psql(pg_url, "\\d c1").strip().splitlines()
    assert child[-2:] == [
        "Foreign-key constraints:",
        '    "c1_pid_fkey" FOREIGN KEY (pid) REFERENCES p1(id) ON DELETE CASCADE',
    ]
    parent = psql(pg_url, "\\d p1").strip().splitlines()
    assert parent[-2:] == [
        "Referenced by:",
        '    TABLE "c1" CONSTRAINT "c1_pid_fkey" FOREIGN KEY (pid) REFERENCES p1(id) '
        "ON DELETE CASCADE",
    ]
