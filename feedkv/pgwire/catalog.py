"""The system catalogs PostgreSQL tools read: enough of ``pg_catalog`` and
``information_schema`` for psql's ``\\d``, ``\\dt``, ``\\l``, ``\\du`` and ``\\dp`` and
for SQLAlchemy's dialect introspection (``has_table``, ``get_columns``, ``get_table_names``).

A query that names a catalog relation or function (:func:`reads_catalog`) is answered
here, not by the SQL layer: the catalog of the session's current database is built
from its descriptors (:meth:`feedkv.sql.session.Session.schema`) into an in-memory
SQLite database, and the query, translated from PostgreSQL's dialect by sqlglot with a
few rewrites (casts to ``regclass`` and ``bool``, ``= ANY(ARRAY[...])``,
``OPERATOR(pg_catalog.~)``, ``COLLATE pg_catalog.default``), runs there, with the
catalog functions tools call (``format_type``, ``pg_table_is_visible``,
``pg_get_expr``, ...) defined in Python. Read-only, and built per query: the cost is
a catalog scan, which tools pay once per command.

A result column is named and typed as the SQL layer names and types the same
expression (:func:`_column_name`, :func:`_static_oid`: a comparison is a bool, an
operator ``?column?``, an integer's quotient a DECIMAL), else as the catalog column it
reads is declared (PostgreSQL's ``oid``, ``name``, ``"char"``, ``regproc``, and ``int2``
or ``int4`` where PostgreSQL's column is one: ``attnum``, ``atttypmod``; an
information_schema ``cardinal_number`` as its base type, int4), else by its values; a
regclass or regtype goes out as its type, its text the relation's or type's name.
Catalogs feedkv keeps empty (``pg_trigger``, ``pg_policy``, ...) read as empty tables
of the columns a query names.

OIDs follow CockroachDB where it matters: a table's OID is its descriptor id, a
database's its id; its primary key index is ``<table>_pkey`` (OID ``1_000_000 +
id``); schemas are ``public`` (2200), ``pg_catalog`` (11) and ``information_schema``.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import json
import re
import sqlite3
import zlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres

from feedkv.errors import SQLError
from feedkv.pgwire.acl import acl_items
from feedkv.pgwire.regclass import regclass_name, regclass_oid
from feedkv.pgwire.types import ENUM_OID_BASE, OID, OidName, WireType, column_oid, wire_type
from feedkv.sql.arrays import Array, parse_array_text
from feedkv.sql.catalog import ADMIN_ROLE, NODE_USER, ROOT, User, database_owner
from feedkv.sql.descriptor import (
    PRIMARY_INDEX_ID,
    RESERVED_WORDS,
    Column,
    DatabaseDescriptor,
    SequenceDescriptor,
    TableDescriptor,
    TypeDescriptor,
    ViewDescriptor,
)
from feedkv.sql.execution import Result
from feedkv.sql.expr import expression_name
from feedkv.sql.parser import column_type
from feedkv.sql.regexp import compiled
from feedkv.sql.sequences import shown_default
from feedkv.sql.types import DECIMAL_QUOTIENT, ColumnType, Kind, format_value

__all__ = [
    "CatalogResult",
    "CursorRow",
    "PreparedRow",
    "catalog_param_oids",
    "reads_catalog",
    "run_catalog_query",
]

# A pg_cursors row: name, statement, is_holdable, is_binary, is_scrollable, creation_time.
CursorRow = tuple[str, str, bool, bool, bool, datetime.datetime]
# A prepared statement of the session: name, text, prepare time, parameter type OIDs
# (0: not known), and whether SQL's PREPARE made it (else the protocol's Parse).
PreparedRow = tuple[str, str, datetime.datetime, tuple[int, ...], bool]

_CATALOG_NAMES = re.compile(
    r"\b(?:pg_catalog|information_schema|pg_class|pg_namespace|pg_attribute|pg_type|"
    r"pg_database|pg_index|pg_constraint|pg_roles|pg_user|pg_auth_members|pg_attrdef|"
    r"pg_description|obj_description|col_description|shobj_description|"
    r"pg_am|pg_tables|pg_settings|pg_inherits|pg_collation|pg_proc|pg_tablespace|"
    r"pg_extension|pg_table_is_visible|format_type|pg_get_userbyid|current_catalog|pg_enum|"
    r"pg_cursors|to_regtype|pg_indexes|pg_sequence|pg_prepared_statements|pg_get_viewdef)\b",
    re.IGNORECASE,
)


_PARAM_CAST = re.compile(
    r'\$(\d+)\s*::\s*(?:"?pg_catalog"?\s*\.\s*)?"?(\w+|"char")"?(\s*\[\s*\])?', re.IGNORECASE
)


def catalog_param_oids(text: str, count: int) -> tuple[int, ...]:
    """The types of a catalog query's ``count`` parameters, as its casts of them tell
    (``$1::oid[]``: oid[]); 0 (unspecified) for one not cast to a type named here."""
    oids = [0] * count
    for match in _PARAM_CAST.finditer(text):
        n, name, array = int(match.group(1)), match.group(2).lower(), match.group(3)
        # NB: an array type is also named for its pg_type row (asyncpg: "_int8")
        oid = _TYPE_OIDS.get(name + ("[]" if array else ""), 0)
        if 0 < n <= count and not oids[n - 1]:
            oids[n - 1] = oid
    return tuple(oids)


# A query that casts to regclass (or calls to_regclass), but not a sequence function's
# argument, which the SQL layer reads as the sequence's name: answered here.
_REGCLASS = re.compile(r"::\s*(?:pg_catalog\s*\.\s*)?regclass\b|\bto_regclass\s*\(", re.I)
_SELECT = re.compile(r"\s*\(*\s*SELECT\b", re.I)
_SEQUENCE_CALL = re.compile(r"\b(?:nextval|currval|setval)\s*\(", re.I)


def reads_catalog(text: str) -> bool:
    """Whether ``text`` reads a system catalog or a relation's OID (and so runs here)."""
    if _CATALOG_NAMES.search(text) is not None or _EMPTY_NAMES.search(text) is not None:
        return True
    return (
        _REGCLASS.search(text) is not None
        and _SELECT.match(text) is not None
        and _SEQUENCE_CALL.search(text) is None
    )


PG_CATALOG_OID = 11
PUBLIC_OID = 2200
INFORMATION_SCHEMA_OID = 13000
_INDEX_OID_BASE = 1_000_000
ROOT_OID = 1
ADMIN_OID = 2
_DEFAULT_TABLESPACE = 1663  # pg_default, as PostgreSQL numbers it

# pg_type rows: oid, name, length, category, and the name format_type gives.
_TYPES: list[tuple[int, str, int, str, str]] = [
    (OID.BOOL, "bool", 1, "B", "boolean"),
    (OID.BYTEA, "bytea", -1, "U", "bytea"),
    (OID.NAME, "name", 64, "S", "name"),
    (OID.INT8, "int8", 8, "N", "bigint"),
    (OID.INT2, "int2", 2, "N", "smallint"),
    (OID.INT4, "int4", 4, "N", "integer"),
    (OID.TEXT, "text", -1, "S", "text"),
    (OID.OID, "oid", 4, "N", "oid"),
    (OID.JSON, "json", -1, "U", "json"),
    (OID.FLOAT4, "float4", 4, "N", "real"),
    (OID.FLOAT8, "float8", 8, "N", "double precision"),
    (OID.VARCHAR, "varchar", -1, "S", "character varying"),
    (OID.BPCHAR, "bpchar", -1, "S", "character"),
    (OID.DATE, "date", 4, "D", "date"),
    (OID.TIMESTAMP, "timestamp", 8, "D", "timestamp without time zone"),
    (OID.TIMESTAMPTZ, "timestamptz", 8, "D", "timestamp with time zone"),
    (OID.NUMERIC, "numeric", -1, "N", "numeric"),
    (OID.UUID, "uuid", 16, "U", "uuid"),
    (OID.JSONB, "jsonb", -1, "U", "jsonb"),
    (OID.TIME, "time", 8, "D", "time without time zone"),
    (OID.INTERVAL, "interval", 16, "T", "interval"),
    (OID.INET, "inet", -1, "I", "inet"),
    (OID.BIT, "bit", -1, "V", "bit"),
    (OID.VARBIT, "varbit", -1, "V", "bit varying"),
    (OID.CHAR, "char", 1, "Z", '"char"'),
    (OID.REGPROC, "regproc", 4, "N", "regproc"),
    (OID.REGCLASS, "regclass", 4, "N", "regclass"),
    (OID.REGTYPE, "regtype", 4, "N", "regtype"),
]
# pg_type rows of the one-dimensional arrays (typcategory A): oid, element oid.
_ARRAY_TYPES: list[tuple[int, int]] = [
    (1000, OID.BOOL), (1001, OID.BYTEA), (1005, OID.INT2), (1007, OID.INT4),
    (1009, OID.TEXT), (1014, OID.BPCHAR), (1015, OID.VARCHAR), (1016, OID.INT8),
    (1021, OID.FLOAT4), (1022, OID.FLOAT8), (1041, OID.INET), (1115, OID.TIMESTAMP),
    (1182, OID.DATE), (1183, OID.TIME), (1185, OID.TIMESTAMPTZ), (1187, OID.INTERVAL),
    (1231, OID.NUMERIC), (2951, OID.UUID), (1561, OID.BIT), (1563, OID.VARBIT),
    (1028, OID.OID),
]  # fmt: skip
# pg_index's vectors, arrays of their own names (0-based, as PostgreSQL's): oid, name, element.
_VECTOR_TYPES: list[tuple[int, str, int]] = [
    (OID.INT2VECTOR, "int2vector", OID.INT2),
    (OID.OIDVECTOR, "oidvector", OID.OID),
]
_ARRAY_OF = {element: oid for oid, element in _ARRAY_TYPES}
_FORMATTED = {oid: formatted for oid, _, _, _, formatted in _TYPES}
_TYPE_NAMES = {oid: name for oid, name, _, _, _ in _TYPES}
for _oid, _element in _ARRAY_TYPES:
    _FORMATTED[_oid] = _FORMATTED[_element] + "[]"
    _TYPE_NAMES[_oid] = "_" + _TYPE_NAMES[_element]
for _oid, _name, _element in _VECTOR_TYPES:
    _FORMATTED[_oid] = _TYPE_NAMES[_oid] = _name
# to_regtype's names: pg_type's, format_type's (``bigint``, ``timestamp with time zone``)
# and an array's as ``int8[]``
_TYPE_OIDS = {name: oid for oid, name in _TYPE_NAMES.items()} | {
    name: oid for oid, name in _FORMATTED.items()
}
for _oid, _element in _ARRAY_TYPES:
    _TYPE_OIDS[_TYPE_NAMES[_element] + "[]"] = _oid
# NB: char unquoted is SQL's character (bpchar); "char" the one-byte type
_TYPE_OIDS["char"] = OID.BPCHAR


def _regtype_oid(value: Any, types: Mapping[str, int]) -> int | None:
    """The OID of the type ``value`` names (an OID as is); 42704 for a name of none."""
    if value is None or isinstance(value, int):
        return value
    if str(value).strip().isdigit():
        return int(value)
    oid = types.get(_bare_type_name(value) or "")
    if oid is None:
        raise SQLError("42704", f'type "{value}" does not exist')
    return oid


def _regproc(value: Any, procs: Collection[str]) -> Any:
    """A regproc of ``value``: an OID as is, the name of one of ``procs`` as is; 42883
    for a name of none (feedkv has no other functions to name)."""
    if value is None or isinstance(value, int) or str(value).strip().isdigit():
        return value
    name = str(value).strip().removeprefix("pg_catalog.")
    if name not in procs:
        raise SQLError("42883", f'function "{value}" does not exist')
    return name


def _setting(settings: Mapping[str, str], name: str | None, missing_ok: Any) -> str | None:
    """``current_setting(name [, missing_ok])`` of the settings pg_settings shows."""
    if name is None:
        return None
    found = settings.get(str(name).lower())
    if found is None and not missing_ok:
        raise SQLError("42704", f'unrecognized configuration parameter "{name}"')
    return found


def _regtype_name(oid: int | None, enums: Mapping[int, str]) -> str | None:
    """How the regtype ``oid`` prints: format_type's name (``bigint``, ``bigint[]``), an
    enum's own, the number for an unknown type, ``-`` for 0 (none), as PostgreSQL's."""
    if oid is None:
        return None
    if int(oid) == 0:
        return "-"
    return enums.get(oid) or _FORMATTED.get(oid, str(oid))


def _bare_type_name(name: str | None) -> str | None:
    """A type name as to_regtype reads it: without its schema, quotes and case."""
    if name is None:
        return None
    bare = str(name).strip().removeprefix("pg_catalog.").removeprefix("public.")
    return bare[1:-1] if bare.startswith('"') and bare.endswith('"') else bare.lower()


def _pg_type(ctype: ColumnType, enums: dict[str, int]) -> tuple[int, int]:
    """A column type as ``(atttypid, atttypmod)``; ``enums``: the enum types' OIDs by
    name."""
    if ctype.kind is Kind.ENUM and ctype.type_name in enums:
        return enums[ctype.type_name], -1
    return wire_type(ctype)


def _format_type(oid: int | None, typmod: int | None) -> str | None:
    if oid is None:
        return None
    name = _FORMATTED.get(int(oid), "unknown")
    if oid in (OID.BIT, OID.VARBIT) and typmod is not None and typmod > 0:
        return f"{name}({typmod})"
    if typmod is not None and typmod >= 4:
        if oid in (OID.VARCHAR, OID.BPCHAR):
            return f"{name}({typmod - 4})"
        if oid == OID.NUMERIC:
            precision, scale = (typmod - 4) >> 16, (typmod - 4) & 0xFFFF
            return f"{name}({precision},{scale})"
    return name


_SCHEMA = """
CREATE TABLE pg_namespace (oid OID, nspname TEXT NAME, nspowner OID, nspacl TEXT);
CREATE TABLE pg_database (oid OID, datname TEXT NAME, datdba OID, encoding INT4,
  datcollate TEXT, datctype TEXT, datistemplate BOOLEAN, datallowconn BOOLEAN,
  datconnlimit INT4, dattablespace OID, datacl TEXT, daticulocale TEXT,
  datlocprovider CHAR);
CREATE TABLE pg_class (oid OID, relname TEXT NAME, relnamespace OID, reltype OID,
  relowner OID, relam OID, reltablespace OID, reltuples REAL,
  relhasindex BOOLEAN, relisshared BOOLEAN, relpersistence CHAR, relkind CHAR,
  relnatts INT2, relchecks INT2, relhasrules BOOLEAN, relhastriggers BOOLEAN,
  relhassubclass BOOLEAN, relrowsecurity BOOLEAN, relforcerowsecurity BOOLEAN,
  relispopulated BOOLEAN, relreplident CHAR, relispartition BOOLEAN, reloftype OID,
  reloptions TEXT, relacl TEXT, relpartbound TEXT, relhasoids BOOLEAN, relpages INT4,
  reltoastrelid OID DEFAULT 0, relfilenode OID DEFAULT 0,
  relallvisible INT4 DEFAULT 0, relfrozenxid INTEGER DEFAULT 0);
CREATE TABLE pg_attribute (attrelid OID, attname TEXT NAME, atttypid OID,
  attlen INT2, attnum INT2, atttypmod INT4, attndims INT4,
  attnotnull BOOLEAN, atthasdef BOOLEAN, attidentity CHAR, attgenerated CHAR,
  attisdropped BOOLEAN, attcollation OID, attstattarget INT4, attstorage CHAR,
  attislocal BOOLEAN, attinhcount INT4, attacl TEXT, attoptions TEXT,
  attfdwoptions TEXT, atthasmissing BOOLEAN, attcompression CHAR);
CREATE TABLE pg_attrdef (oid OID, adrelid OID, adnum INT2, adbin TEXT);
CREATE TABLE pg_type (oid OID, typname TEXT NAME, typnamespace OID, typowner OID,
  typlen INT2, typbyval BOOLEAN, typtype CHAR, typcategory CHAR, typisdefined BOOLEAN,
  typdelim CHAR, typrelid OID, typelem OID, typarray OID,
  typnotnull BOOLEAN, typbasetype OID, typtypmod INT4, typndims INT4,
  typcollation OID, typdefault TEXT, typacl TEXT,
  typinput TEXT REGPROC GENERATED ALWAYS AS (CASE WHEN typcategory = 'A' THEN 'array_in'
    WHEN typtype = 'e' THEN 'enum_in' ELSE typname || 'in' END));
CREATE TABLE pg_enum (oid OID, enumtypid OID, enumsortorder REAL,
  enumlabel TEXT);
CREATE TABLE pg_index (indexrelid OID, indrelid OID, indnatts INT2,
  indnkeyatts INT2, indisunique BOOLEAN, indisprimary BOOLEAN, indisexclusion BOOLEAN,
  indimmediate BOOLEAN, indisclustered BOOLEAN, indisvalid BOOLEAN, indisready BOOLEAN,
  indislive BOOLEAN, indisreplident BOOLEAN, indkey TEXT INT2VECTOR,
  indcollation TEXT OIDVECTOR, indclass TEXT OIDVECTOR, indoption TEXT INT2VECTOR,
  indexprs TEXT, indpred TEXT,
  indnullsnotdistinct BOOLEAN);
CREATE TABLE pg_index_keys (indexrelid INTEGER, attnum INTEGER, ord INTEGER,
  opclass INTEGER DEFAULT 0);
CREATE TABLE pg_opclass (oid OID, opcname TEXT NAME, opcdefault BOOLEAN, opcmethod OID,
  opcnamespace OID, opcfamily OID, opcintype OID);
CREATE TABLE pg_constraint (oid OID, conname TEXT NAME, connamespace OID,
  contype CHAR, condeferrable BOOLEAN, condeferred BOOLEAN, convalidated BOOLEAN,
  conrelid OID, contypid OID, conindid OID, confrelid OID,
  conkey TEXT, confkey TEXT, conislocal BOOLEAN, coninhcount INT4,
  connoinherit BOOLEAN, conparentid OID, confupdtype CHAR DEFAULT ' ',
  confdeltype CHAR DEFAULT ' ', confmatchtype CHAR DEFAULT ' ');
CREATE TABLE pg_am (oid OID, amname TEXT NAME, amtype CHAR, amhandler TEXT REGPROC);
CREATE TABLE feedkv_constraint_defs (oid INTEGER, def TEXT);
CREATE TABLE pg_roles (oid OID, rolname TEXT NAME, rolsuper BOOLEAN, rolinherit BOOLEAN,
  rolcreaterole BOOLEAN, rolcreatedb BOOLEAN, rolcanlogin BOOLEAN,
  rolreplication BOOLEAN, rolconnlimit INT4, rolvaliduntil TEXT,
  rolbypassrls BOOLEAN, rolconfig TEXT);
CREATE TABLE pg_auth_members (oid OID, roleid OID, member OID,
  grantor OID, admin_option BOOLEAN, inherit_option BOOLEAN, set_option BOOLEAN);
CREATE TABLE pg_user (usename TEXT NAME, usesysid OID, usecreatedb BOOLEAN,
  usesuper BOOLEAN, userepl BOOLEAN, usebypassrls BOOLEAN, passwd TEXT, valuntil TEXT,
  useconfig TEXT);
CREATE TABLE pg_description (objoid OID, classoid OID, objsubid INT4,
  description TEXT);
CREATE TABLE pg_inherits (inhrelid OID, inhparent OID, inhseqno INT4);
CREATE TABLE pg_collation (oid OID, collname TEXT NAME, collnamespace OID,
  collowner OID, collprovider CHAR, collisdeterministic BOOLEAN, collencoding INT4,
  collcollate TEXT, collctype TEXT, colliculocale TEXT, collversion TEXT);
CREATE TABLE pg_tablespace (oid OID, spcname TEXT NAME, spcowner OID, spcacl TEXT,
  spcoptions TEXT);
CREATE TABLE pg_extension (oid OID, extname TEXT NAME, extowner OID,
  extnamespace OID, extrelocatable BOOLEAN, extversion TEXT, extconfig TEXT,
  extcondition TEXT);
CREATE TABLE pg_settings (name TEXT, setting TEXT, source TEXT, boot_val TEXT,
  vartype TEXT, context TEXT);
INSERT INTO pg_settings VALUES ('max_index_keys', '32', 'default', '32', 'integer',
  'internal');
CREATE TABLE pg_proc (oid OID, proname TEXT NAME, pronamespace OID, proowner OID,
  prokind CHAR, prorettype OID, proargtypes TEXT, proretset BOOLEAN);
CREATE TABLE pg_get_keywords (word TEXT, catcode TEXT, catdesc TEXT);
CREATE TABLE pg_range (rngtypid INTEGER, rngsubtype INTEGER, rngmultitypid INTEGER,
  rngcollation INTEGER, rngsubopc INTEGER, rngcanonical TEXT, rngsubdiff TEXT);
CREATE TABLE pg_cursors (name TEXT, statement TEXT, is_holdable BOOLEAN, is_binary BOOLEAN,
  is_scrollable BOOLEAN, creation_time TIMESTAMPTZ);
CREATE TABLE pg_sequence (seqrelid OID, seqtypid OID, seqstart INTEGER,
  seqincrement INTEGER, seqmax INTEGER, seqmin INTEGER, seqcache INTEGER,
  seqcycle BOOLEAN);
CREATE TABLE pg_prepared_statements (name TEXT, statement TEXT,
  prepare_time TIMESTAMPTZ, parameter_types TEXT, from_sql BOOLEAN);
CREATE TABLE pg_tables (schemaname TEXT NAME, tablename TEXT NAME, tableowner TEXT NAME,
  tablespace TEXT NAME, hasindexes BOOLEAN, hasrules BOOLEAN, hastriggers BOOLEAN,
  rowsecurity BOOLEAN);
CREATE VIEW pg_indexes AS SELECT n.nspname AS schemaname, t.relname AS tablename,
  i.relname AS indexname, NULL AS tablespace, pg_get_indexdef(i.oid) AS indexdef
  FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
  JOIN pg_class t ON t.oid = x.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace;
CREATE TABLE information_schema.schemata (catalog_name TEXT, schema_name TEXT,
  schema_owner TEXT);
CREATE TABLE information_schema.tables (table_catalog TEXT, table_schema TEXT,
  table_name TEXT, table_type TEXT, is_insertable_into TEXT);
CREATE TABLE information_schema.columns (table_catalog TEXT, table_schema TEXT,
  table_name TEXT, column_name TEXT, ordinal_position INT4, column_default TEXT,
  is_nullable TEXT, data_type TEXT, character_maximum_length INT4,
  numeric_precision INT4, numeric_scale INT4, udt_name TEXT, is_generated TEXT,
  generation_expression TEXT, is_hidden TEXT, crdb_sql_type TEXT, column_comment TEXT,
  is_identity TEXT);
CREATE TABLE information_schema.table_constraints (constraint_catalog TEXT,
  constraint_schema TEXT, constraint_name TEXT, table_catalog TEXT, table_schema TEXT,
  table_name TEXT, constraint_type TEXT);
CREATE TABLE information_schema.key_column_usage (constraint_catalog TEXT,
  constraint_schema TEXT, constraint_name TEXT, table_catalog TEXT, table_schema TEXT,
  table_name TEXT, column_name TEXT, ordinal_position INT4);
CREATE TABLE information_schema.statistics (table_catalog TEXT, table_schema TEXT,
  table_name TEXT, non_unique TEXT, index_schema TEXT, index_name TEXT,
  seq_in_index INTEGER, column_name TEXT, implicit TEXT);
"""


def _insert(db: sqlite3.Connection, table: str, rows: Sequence[Sequence[Any]]) -> None:
    """Rows of their leading columns (the rest take their defaults)."""
    if rows:
        db.executemany(_insert_statement(table, len(rows[0])), rows)


def _empty_catalog() -> sqlite3.Connection:
    """The catalog's tables, empty (what each holds, not what is in it)."""
    db = sqlite3.connect(":memory:")
    db.execute("ATTACH DATABASE ':memory:' AS information_schema")
    db.executescript(_SCHEMA)
    # NB: a view's columns are known once its query compiles, which needs the functions
    # it calls
    db.create_function("pg_get_indexdef", -1, lambda *args: None)
    return db


@functools.cache
def _catalog_columns() -> dict[str, frozenset[str]]:
    """The columns of each of the catalog's relations (of pg_catalog) by name."""
    db = _empty_catalog()
    names = [name for (name,) in db.execute("SELECT name FROM sqlite_master")]
    found = {
        name: frozenset(row[1] for row in db.execute(f"PRAGMA table_xinfo({name})"))
        for name in names
    }
    db.close()
    return found


@functools.cache
def _insert_statement(table: str, width: int) -> str:
    """The INSERT of the first ``width`` columns of the catalog's ``table``."""
    db = _empty_catalog()
    schema, _, name = table.rpartition(".")
    pragma = f"PRAGMA {schema}.table_info({name})" if schema else f"PRAGMA table_info({name})"
    names = [row[1] for row in db.execute(pragma)]
    db.close()
    marks = ", ".join("?" * width)
    return f"INSERT INTO {table} ({', '.join(names[:width])}) VALUES ({marks})"


def _role_oid(name: str) -> int:
    """A role's OID: root's 1 (the owner of every object), admin's 2, another's a hash
    of its name, so that it stays put as other roles come and go."""
    fixed = {ROOT: ROOT_OID, ADMIN_ROLE: ADMIN_OID}.get(name)
    return fixed if fixed is not None else 0x4000_0000 | zlib.crc32(name.encode()) & 0x3FFF_FFFF


def _add_roles(
    db: sqlite3.Connection, users: Sequence[User], memberships: Sequence[tuple[str, str]]
) -> None:
    """``pg_roles``, ``pg_user`` and ``pg_auth_members`` as CockroachDB fills them: the
    ``admin`` role (which cannot log in), every user, each admin user a member of
    ``admin`` and each ``(role, member)`` of ``memberships``; an admin is a superuser
    that may create roles and databases."""
    roles = [(_role_oid(ADMIN_ROLE), ADMIN_ROLE, True, True, True, True, False, False, -1,
              None, False, None)]  # fmt: skip
    logins, members = [], []
    for u in users:
        if u.name == ADMIN_ROLE:
            continue
        oid = _role_oid(u.name)
        roles.append(
            (oid, u.name, u.admin, True, u.admin, u.admin, u.can_login, False, -1, None,
             u.name == ROOT, None)
        )  # fmt: skip
        logins.append(
            (u.name, oid, u.admin, u.admin, False, u.name == ROOT,
             None if u.password_verifier is None else "********")
        )  # fmt: skip
        if u.admin:
            members.append((oid, ADMIN_OID, oid, ROOT_OID, u.name == ROOT, True, True))
    # NB: a membership's own OID hashes both names, as a role's hashes its name
    members += [
        (_role_oid(f"{role}\x00{member}"), _role_oid(role), _role_oid(member), ROOT_OID,
         False, True, True)
        for role, member in memberships
    ]  # fmt: skip
    _insert(db, "pg_roles", roles)
    _insert(db, "pg_user", logins)
    _insert(db, "pg_auth_members", members)


def _build(
    schema: Sequence[tuple[DatabaseDescriptor, list[TableDescriptor]]],
    database: str,
    users: Sequence[User],
    memberships: Sequence[tuple[str, str]] = (),
    types: Sequence[TypeDescriptor] = (),
) -> tuple[sqlite3.Connection, dict[str, int], dict[str, int]]:
    """The catalog of ``database`` as SQLite tables, the OIDs of its relations by name
    (for ``regclass``) and of its enum types by name."""
    db = sqlite3.connect(":memory:", detect_types=sqlite3.PARSE_DECLTYPES)
    db.execute("ATTACH DATABASE ':memory:' AS information_schema")
    db.executescript(_SCHEMA)
    _insert(db, "pg_get_keywords", [(w.lower(), "R", "reserved") for w in sorted(RESERVED_WORDS)])
    _insert(
        db,
        "pg_namespace",
        [
            (PG_CATALOG_OID, "pg_catalog", 1, None),
            (PUBLIC_OID, "public", 1, None),
            (INFORMATION_SCHEMA_OID, "information_schema", 1, None),
        ],
    )
    _insert(
        db,
        "pg_database",
        [
            (d.id, d.name, _role_oid(database_owner(d)), 6, "C.UTF-8", "C.UTF-8", False, True,
             -1, _DEFAULT_TABLESPACE, None, None, "c")
            for d, _ in schema
        ],
    )  # fmt: skip
    _insert(
        db,
        "pg_type",
        [
            (oid, name, PG_CATALOG_OID, 1, length, length > 0, "b", category, True, ",", 0, 0,
             _ARRAY_OF.get(oid, 0), False, 0, -1, 0, 100 if category == "S" else 0, None)
            for oid, name, length, category, _ in _TYPES
        ]
        + [
            (oid, _TYPE_NAMES[oid], PG_CATALOG_OID, 1, -1, False, "b", "A", True, ",", 0,
             element, 0, False, 0, -1, 0, 100 if element in (OID.TEXT, OID.VARCHAR,
             OID.BPCHAR) else 0, None)
            for oid, element in _ARRAY_TYPES
        ]
        + [
            (oid, name, PG_CATALOG_OID, 1, -1, False, "b", "A", True, ",", 0, element, 0,
             False, 0, -1, 0, 0, None)
            for oid, name, element in _VECTOR_TYPES
        ],
    )  # fmt: skip
    enums = _add_enums(db, types)
    _add_catalog_relations(db)
    _insert(
        db, "pg_am", [(2, "heap", "t", "heap_tableam_handler"), (403, "btree", "i", "bthandler")]
    )
    _insert(db, "pg_tablespace", [(_DEFAULT_TABLESPACE, "pg_default", ROOT_OID)])
    _add_roles(db, users, memberships)
    names: dict[str, int] = {}
    tables = next((t for d, t in schema if d.name == database), [])
    for desc in tables:
        _add_table(db, database, desc, enums)
        names[desc.name] = names[f"public.{desc.name}"] = desc.id
        names[f"{desc.name}_pkey"] = _INDEX_OID_BASE + desc.id
    by_id = {desc.id: desc for desc in tables}
    for desc in tables:
        for index in desc.indexes:
            names[index.name] = _secondary_oid(desc, index.id)
        _add_secondary(db, database, desc, by_id)
    db.commit()
    return db, names, enums


# The pg_catalog views the catalog answers (the rest of its relations are tables), with
# OIDs of their own (PostgreSQL's vary by release).
_CATALOG_VIEWS = {
    "pg_roles": 12001, "pg_user": 12002, "pg_tables": 12003, "pg_settings": 12004,
    "pg_indexes": 12005, "pg_cursors": 12006, "pg_prepared_statements": 12007,
}  # fmt: skip
# feedkv's own tables beside the catalogs, which are none of PostgreSQL's
_INTERNAL = frozenset({"pg_index_keys", "feedkv_constraint_defs", "pg_get_keywords"})


def _add_catalog_relations(db: sqlite3.Connection) -> None:
    """The relations of ``pg_catalog`` the catalog answers, in ``pg_class`` (as
    PostgreSQL lists them: psql's ``\\dS``) with their columns in ``pg_attribute``."""
    classes, attributes = _catalog_relation_rows()
    _insert(db, "pg_class", classes)
    _insert(db, "pg_attribute", attributes)


@functools.cache
def _catalog_relation_rows() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The pg_class and pg_attribute rows of :func:`_add_catalog_relations`, read once
    from the catalog's own tables."""
    db = _empty_catalog()
    found = db.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall()
    classes, attributes = [], []
    for (name,) in found:
        oid = _CATALOG_VIEWS.get(name) or _CATALOG_RELATIONS.get(name)
        if name in _INTERNAL or oid is None:
            continue
        view = name in _CATALOG_VIEWS
        columns = db.execute(f"PRAGMA table_info({name})").fetchall()
        classes.append(
            (oid, name, PG_CATALOG_OID, 0, ROOT_OID, 0 if view else 2, 0, -1, False, False,
             "p", "v" if view else "r", len(columns), 0, False, False, False, False, False,
             True, "n", False, 0, None, None, None, False, 0)
        )  # fmt: skip
        for n, (_, column, declared, *_) in enumerate(columns, start=1):
            typid = _DECLARED_OIDS.get(declared.upper(), OID.TEXT)
            attributes.append(
                (oid, column, typid, _length(typid), n, -1, 0, False, False, "", "", False,
                 0, -1, "p", True, 0, None, None, None, False, "")
            )  # fmt: skip
    db.close()
    return classes, attributes


def _is_admin(user: str, users: Sequence[User], memberships: Sequence[tuple[str, str]]) -> bool:
    """Whether ``user`` is a member of ``admin``, directly or through roles (as
    :func:`feedkv.sql.catalog.is_admin` reads it from the store)."""
    admins = {u.name for u in users if u.admin}
    seen, pending = {user}, [user]
    while pending:
        name = pending.pop()
        if name in admins:
            return True
        for role, member in memberships:
            if member == name and role not in seen:
                seen.add(role)
                pending.append(role)
    return False


def _add_acls(
    db: sqlite3.Connection,
    schema: Sequence[tuple[DatabaseDescriptor, list[TableDescriptor]]],
    grants: Sequence[tuple[int, str, frozenset[str]]],
) -> None:
    """``relacl`` and ``datacl`` from ``grants`` (those a user who is no admin may see
    with SHOW GRANTS: their own), NULL on an object with none, as PostgreSQL's own
    before its first GRANT. Relations are owned by root, databases by their owner."""
    by_object: dict[int, list[tuple[str, frozenset[str]]]] = {}
    for object_id, grantee, privileges in grants:
        by_object.setdefault(object_id, []).append((grantee, privileges))
    owners = {d.id: database_owner(d) for d, _ in schema}
    for object_id, held in by_object.items():
        owner = owners.get(object_id)
        items = acl_items(held, ROOT if owner is None else owner)
        value = _TEXT_ARRAY + json.dumps(items) if items else None
        table = "pg_class SET relacl" if owner is None else "pg_database SET datacl"
        db.execute(f"UPDATE {table} = ? WHERE oid = ?", (value, object_id))


def _add_enums(db: sqlite3.Connection, types: Sequence[TypeDescriptor]) -> dict[str, int]:
    """``pg_type`` (typtype e) and ``pg_enum`` rows of the database's enums, as
    CockroachDB shows them; their OIDs by name."""
    oids = {t.name: ENUM_OID_BASE + t.id for t in types}
    _insert(
        db,
        "pg_type",
        [(oids[t.name], t.name, PUBLIC_OID, ROOT_OID, -1, False, "e", "E", True, ",", 0, 0,
          0, False, 0, -1, 0, 0, None) for t in types],
    )  # fmt: skip
    _insert(
        db,
        "pg_enum",
        [
            (_role_oid(f"{t.id}\x00{label}"), oids[t.name], float(n), label)
            for t in types
            for n, label in enumerate(t.labels, start=1)
        ],
    )
    return oids


def _column_rows(
    database: str, relid: int, relname: str, columns: Sequence[Column], enums: dict[str, int]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The pg_attribute, pg_attrdef and information_schema.columns rows of the columns
    of relation ``relid`` (a table's or a view's), numbered from 1. An expression
    index's inaccessible column is left out of information_schema.columns and is a
    dropped attribute in pg_attribute, which psql, JDBC and ORMs skip (as CockroachDB
    lists only accessible columns); its row stays for the index's attribute copied from
    it (:func:`_add_secondary`)."""
    attributes: list[tuple[Any, ...]] = []
    defaults: list[tuple[Any, ...]] = []
    info: list[tuple[Any, ...]] = []
    for n, column in enumerate(columns, start=1):
        typid, typmod = _pg_type(column.type, enums)
        # NB: as PostgreSQL shows a generated column: attgenerated 's' and its
        # expression in pg_attrdef. A virtual one is 's' too, as CockroachDB shows it:
        # psql before 18 reads another letter as a plain DEFAULT
        generated = "" if column.computed is None else "s"
        default = None if column.default is None else shown_default(column.default, database)
        expression = default if column.computed is None else column.computed
        attributes.append(
            (relid, column.name, typid, _length(typid), n, typmod, 0, not column.nullable,
             expression is not None, "", generated, column.inaccessible,
             100 if typid in (OID.TEXT, OID.VARCHAR, OID.BPCHAR) else 0, -1, "p", True, 0,
             None, None, None, False, "")
        )  # fmt: skip
        if column.inaccessible:
            continue
        if expression is not None:
            defaults.append((_INDEX_OID_BASE * 2 + relid * 1000 + n, relid, n, expression))
        formatted = _format_type(typid, typmod) or "unknown"
        data_type = re.sub(r"\(.*", "", formatted)
        udt_name = _TYPE_NAMES.get(typid, "unknown")
        if column.type.kind is Kind.ARRAY:
            data_type = "ARRAY"
        elif typid in enums.values():
            data_type, udt_name = "USER-DEFINED", str(column.type.type_name)
        info.append(
            (database, "public", relname, column.name, n, default,
             "YES" if column.nullable else "NO", data_type,
             column.type.width if column.type.kind is Kind.STRING else None,
             _precision(column.type), column.type.scale, udt_name,
             "NEVER" if column.computed is None else "ALWAYS", column.computed or "",
             "YES" if column.hidden else "NO", column.type.sql(), None, "NO")
        )  # fmt: skip
    return attributes, defaults, info


def _add_table(
    db: sqlite3.Connection, database: str, desc: TableDescriptor, enums: dict[str, int]
) -> None:
    index_oid = _INDEX_OID_BASE + desc.id
    columns = [c for c in desc.columns if not c.adding]  # NB: not public until commit
    key_ids = list(desc.primary_key)
    position = {c.id: n for n, c in enumerate(columns, start=1)}
    indkey = " ".join(str(position[i]) for i in key_ids)
    # NB: PostgreSQL's foreign keys are triggers on both tables, and psql's \d asks for
    # a table's foreign keys, and those referencing it, only when relhastriggers says so
    triggers = bool(desc.foreign_keys or desc.referenced_by)
    _insert(
        db,
        "pg_class",
        [
            (desc.id, desc.name, PUBLIC_OID, 0, 1, 2, 0, -1, True, False, "p", "r",
             len(columns), len(desc.checks), False, triggers, False, False, False, True, "d",
             False, 0, None, None, None, False, 0),
            (index_oid, f"{desc.name}_pkey", PUBLIC_OID, 0, 1, 403, 0, 0, False, False,
             "p", "i", len(key_ids), 0, False, False, False, False, False, True, "n", False,
             0, None, None, None, False, 0),
        ],
    )  # fmt: skip
    attributes, defaults, info = _column_rows(database, desc.id, desc.name, columns, enums)
    _insert(db, "pg_attribute", attributes)
    for n, key_id in enumerate(key_ids, start=1):
        db.execute(
            "INSERT INTO pg_attribute SELECT ?, attname, atttypid, attlen, ?, atttypmod, 0, "
            "attnotnull, 0, '', '', 0, attcollation, -1, 'p', 1, 0, NULL, NULL, NULL, 0, '' "
            "FROM pg_attribute WHERE attrelid = ? AND attnum = ?",
            (index_oid, n, desc.id, position[key_id]),
        )
    _insert(db, "pg_attrdef", defaults)
    _insert(
        db,
        "pg_index",
        [(index_oid, desc.id, len(key_ids), len(key_ids), True, True, False, True, False,
          True, True, True, False, indkey, "", "",
          " ".join(str(int(desc.key_descending(n))) for n in range(len(key_ids))), None, None,
          False)],
    )  # fmt: skip
    _insert(
        db,
        "pg_index_keys",
        [(index_oid, position[key_id], n) for n, key_id in enumerate(key_ids, start=1)],
    )
    _insert(
        db,
        "pg_constraint",
        [(index_oid, f"{desc.name}_pkey", PUBLIC_OID, "p", False, False, True, desc.id, 0,
          index_oid, 0, "{" + indkey.replace(" ", ",") + "}", None, True, 0, True, 0)],
    )  # fmt: skip
    _insert(db, "pg_tables", [("public", desc.name, "root", None, True, False, False, False)])
    _insert(db, "information_schema.columns", info)
    _insert(
        db,
        "information_schema.tables",
        [(database, "public", desc.name, "BASE TABLE", "YES")],
    )
    constraint = f"{desc.name}_pkey"
    _insert(
        db,
        "information_schema.table_constraints",
        [(database, "public", constraint, database, "public", desc.name, "PRIMARY KEY")],
    )
    key_names = [columns[position[i] - 1].name for i in key_ids]
    _insert(
        db,
        "information_schema.key_column_usage",
        [
            (database, "public", constraint, database, "public", desc.name, name, n)
            for n, name in enumerate(key_names, start=1)
        ],
    )
    _insert(
        db,
        "information_schema.statistics",
        [
            (database, "public", desc.name, "NO", "public", constraint, n, name, "NO")
            for n, name in enumerate(key_names, start=1)
        ],
    )


def _add_other(
    db: sqlite3.Connection,
    database: str,
    other: ViewDescriptor | SequenceDescriptor,
    view_types: Sequence[ColumnType | None],
    enums: dict[str, int],
) -> None:
    """A view (``relkind`` v, information_schema VIEW, its columns of ``view_types``)
    or a sequence (``relkind`` S)."""
    view = isinstance(other, ViewDescriptor)
    width = len(other.columns) if isinstance(other, ViewDescriptor) else 3
    _insert(
        db,
        "pg_class",
        [(other.id, other.name, PUBLIC_OID, 0, 1, 0, 0, -1, False, False, "p",
          "v" if view else "S", width, 0, False, False, False, False, False, True, "n",
          False, 0, None, None, None, False, 0)],
    )  # fmt: skip
    if isinstance(other, ViewDescriptor):
        _insert(db, "information_schema.tables", [(database, "public", other.name, "VIEW", "NO")])
        # NB: as CockroachDB's view descriptor keeps them: each column's type, nullable;
        # a type the view's description does not give is read as its text
        known = [*view_types, *[None] * len(other.columns)]
        columns = [
            Column(n, name, known[n - 1] or ColumnType(Kind.STRING))
            for n, name in enumerate(other.columns, start=1)
        ]
        attributes, _, info = _column_rows(database, other.id, other.name, columns, enums)
        _insert(db, "pg_attribute", attributes)
        _insert(db, "information_schema.columns", info)
    else:  # NB: as CockroachDB's: INT8, a cache of 1, no CYCLE
        _insert(
            db,
            "pg_sequence",
            [(other.id, OID.INT8, other.start, other.increment, other.max_value,
              other.min_value, 1, False)],
        )  # fmt: skip


def _prepared_row(row: PreparedRow) -> tuple[Any, ...]:
    """A pg_prepared_statements row, as CockroachDB's: the statement as ``PREPARE name
    (types) AS text``, the types (regtype[]) as format_type names them."""
    name, text, created, oids, from_sql = row
    types = ", ".join(_TYPE_NAMES.get(oid, "unknown") for oid in oids)
    statement = f"PREPARE {name}{f' ({types})' if oids else ''} AS {text}"
    names = [_FORMATTED.get(oid, "unknown") for oid in oids]
    return name, statement, created.isoformat(), _TEXT_ARRAY + json.dumps(names), from_sql


_SECONDARY_OID_BASE = 3_000_000  # + table id * 1000 + index id (a constraint's: + 500)


_PG_CLASS = 1259  # the OID of pg_class (pg_description's classoid of a relation's comment)
_PG_DATABASE = 1262
_CATALOG_OIDS = {"pg_class": _PG_CLASS, "pg_database": _PG_DATABASE}
# The catalog relations ``'pg_constraint'::regclass`` names (SQLAlchemy reads comments
# so: ``pg_description.classoid = 'pg_catalog.pg_constraint'::regclass``): PostgreSQL's
# OIDs of them.
_CATALOG_RELATIONS = _CATALOG_OIDS | {
    "pg_type": 1247, "pg_attribute": 1249, "pg_proc": 1255, "pg_authid": 1260,
    "pg_auth_members": 1261, "pg_tablespace": 1213, "pg_am": 2601, "pg_attrdef": 2604,
    "pg_constraint": 2606, "pg_depend": 2608, "pg_description": 2609, "pg_index": 2610,
    "pg_inherits": 2611, "pg_namespace": 2615, "pg_rewrite": 2618, "pg_trigger": 2620,
    "pg_sequence": 2224, "pg_shdescription": 2396, "pg_extension": 3079,
    "pg_collation": 3456, "pg_enum": 3501, "pg_opclass": 2616, "pg_range": 3541,
    "pg_aggregate": 2600, "pg_cast": 2605, "pg_conversion": 2607, "pg_language": 2612,
    "pg_largeobject": 2613, "pg_operator": 2617, "pg_statistic": 2619, "pg_opfamily": 2753,
    "pg_default_acl": 826, "pg_shdepend": 1214, "pg_foreign_server": 1417,
    "pg_foreign_data_wrapper": 2328, "pg_db_role_setting": 2964, "pg_foreign_table": 3118,
    "pg_policy": 3256, "pg_partitioned_table": 3350, "pg_statistic_ext": 3381,
    "pg_event_trigger": 3466, "pg_ts_dict": 3600, "pg_ts_config": 3602,
    "pg_subscription": 6100, "pg_publication": 6104,
}  # fmt: skip


def _descriptions(
    schema: Sequence[tuple[DatabaseDescriptor, list[TableDescriptor]]],
    comments: Sequence[tuple[int, str, int, str]],
) -> dict[tuple[int, int, int], str]:
    """The comments as PostgreSQL keys them, ``(objoid, classoid, objsubid)``: a
    table's and its index's under pg_class (a column's by its attnum), a database's
    under pg_database (pg_shdescription's)."""
    tables = {desc.id: desc for _, descs in schema for desc in descs}
    out: dict[tuple[int, int, int], str] = {}
    for object_id, kind, sub_id, text in comments:
        desc = tables.get(object_id)
        if kind == "database":
            out[(object_id, _PG_DATABASE, 0)] = text
        elif desc is None:
            continue
        elif kind == "table":
            out[(object_id, _PG_CLASS, 0)] = text
        elif kind == "column":
            columns = [c.id for c in desc.columns if not c.adding]
            if sub_id in columns:
                out[(object_id, _PG_CLASS, columns.index(sub_id) + 1)] = text
        elif kind == "index":
            oid = (
                _INDEX_OID_BASE + desc.id
                if sub_id == PRIMARY_INDEX_ID
                else _secondary_oid(desc, sub_id)
            )
            out[(oid, _PG_CLASS, 0)] = text
    return out


def _comment_functions(db: sqlite3.Connection, described: dict[tuple[int, int, int], str]) -> None:
    """``obj_description(oid [, catalog])``, ``col_description(table, column)`` and
    ``shobj_description(oid, catalog)``, as PostgreSQL's (a database's comment is
    shared: shobj_description's, not obj_description's)."""

    def obj(oid: int | None, catalog_name: str | None = None) -> str | None:
        if oid is None:
            return None
        if catalog_name is None:
            return described.get((int(oid), _PG_CLASS, 0))
        classoid = _CATALOG_OIDS.get(str(catalog_name))
        if classoid is None or classoid == _PG_DATABASE:
            return None
        return described.get((int(oid), classoid, 0))

    def shared(oid: int | None, catalog_name: str | None) -> str | None:
        if oid is None or _CATALOG_OIDS.get(str(catalog_name)) != _PG_DATABASE:
            return None
        return described.get((int(oid), _PG_DATABASE, 0))

    def column(table: int | None, number: int | None) -> str | None:
        if table is None or number is None:
            return None
        return described.get((int(table), _PG_CLASS, int(number)))

    for name, fn, counts in (
        ("obj_description", obj, (1, 2)),
        ("col_description", column, (2,)),
        ("shobj_description", shared, (2,)),
    ):
        for count in counts:
            db.create_function(name, count, fn, deterministic=True)


def _secondary_oid(desc: TableDescriptor, number: int) -> int:
    return _SECONDARY_OID_BASE + desc.id * 1000 + number


def _referenced_index(parent: TableDescriptor, referenced: tuple[int, ...]) -> int:
    """The OID of the unique index of ``parent`` a foreign key's ``referenced`` columns
    are the keys of (``pg_constraint.conindid``, which pgjdbc's getImportedKeys joins
    on); 0 if none is."""
    if tuple(referenced) == tuple(parent.primary_key):
        return _INDEX_OID_BASE + parent.id
    unique = (i for i in parent.indexes if i.unique and tuple(i.column_ids) == tuple(referenced))
    return next((_secondary_oid(parent, i.id) for i in unique), 0)


def _add_secondary(
    db: sqlite3.Connection,
    database: str,
    desc: TableDescriptor,
    tables: dict[int, TableDescriptor],
) -> None:
    """``desc``'s secondary indexes (pg_class, pg_index, information_schema.statistics;
    a unique one is also a UNIQUE constraint), its foreign keys and CHECKs
    (pg_constraint, information_schema.table_constraints)."""
    position = {c.id: n for n, c in enumerate(desc.columns, start=1)}
    name_of = {c.id: c.name for c in desc.columns}
    # NB: an expression index's key is its expression: attnum 0 in indkey, as PostgreSQL
    expressions = {c.id: c.computed for c in desc.columns if c.inaccessible and c.computed}
    for index in desc.indexes:
        oid = _secondary_oid(desc, index.id)
        keys = [*index.column_ids, *index.storing]
        indkey = " ".join("0" if i in expressions else str(position[i]) for i in keys)
        zeros = " ".join("0" for _ in keys)  # collations, operator classes
        # NB: PostgreSQL's indoption per key column: bit 1 for DESC
        options = " ".join(str(int(index.is_descending(n))) for n in range(len(keys)))
        _insert(
            db,
            "pg_class",
            [(oid, index.name, PUBLIC_OID, 0, 1, 403, 0, 0, False, False, "p", "i",
              len(keys), 0, False, False, False, False, False, True, "n", False, 0, None,
              None, None, False, 0)],
        )  # fmt: skip
        for n, column_id in enumerate(keys, start=1):
            db.execute(
                "INSERT INTO pg_attribute SELECT ?, attname, atttypid, attlen, ?, atttypmod, "
                "0, attnotnull, 0, '', '', 0, attcollation, -1, 'p', 1, 0, NULL, NULL, NULL, "
                "0, '' FROM pg_attribute WHERE attrelid = ? AND attnum = ?",
                (oid, n, desc.id, position[column_id]),
            )
            if column_id in expressions:
                db.execute(
                    "UPDATE pg_attribute SET attname = ? WHERE attrelid = ? AND attnum = ?",
                    (expressions[column_id], oid, n),
                )
        _insert(
            db,
            "pg_index",
            [(oid, desc.id, len(keys), len(index.column_ids), index.unique, False, False,
              True, False, True, True, True, False, indkey, zeros, zeros, options, None,
              index.predicate, False)],
        )  # fmt: skip
        _insert(
            db,
            "pg_index_keys",
            [
                (oid, 0 if i in expressions else position[i], n)
                for n, i in enumerate(index.column_ids, start=1)
            ],
        )
        _insert(
            db,
            "information_schema.statistics",
            [
                (database, "public", desc.name, "NO" if index.unique else "YES", "public",
                 index.name, n, expressions.get(i, name_of[i]), "NO")
                for n, i in enumerate(index.column_ids, start=1)
            ],
        )  # fmt: skip
        if index.unique:
            columns = ", ".join(expressions.get(i, name_of[i]) for i in index.column_ids)
            keys_at = [position[i] for i in index.column_ids]
            _constraint(
                db, database, desc, oid, index.name, "u", oid, 0, keys_at, [],
                f"UNIQUE ({columns})",
            )  # fmt: skip
    for n, fk in enumerate(desc.foreign_keys, start=1):
        parent = tables.get(fk.table_id)
        if parent is None:
            continue
        theirs = {c.id: i for i, c in enumerate(parent.columns, start=1)}
        mine = ", ".join(name_of[i] for i in fk.column_ids)
        referenced = ", ".join(c.name for i in fk.referenced if (c := parent.column_by_id(i)))
        _constraint(db, database, desc, _secondary_oid(desc, 500 + n), fk.name, "f",
                    _referenced_index(parent, fk.referenced), parent.id,
                    [position[i] for i in fk.column_ids], [theirs[i] for i in fk.referenced],
                    f"FOREIGN KEY ({mine}) REFERENCES {parent.name}({referenced})"
                    + fk.actions_sql(),
                    (_ACTION_CODES[fk.on_update], _ACTION_CODES[fk.on_delete], "s"))  # fmt: skip
    for n, check in enumerate(desc.checks, start=1):
        _constraint(db, database, desc, _secondary_oid(desc, 800 + n), check.name, "c", 0, 0,
                    [], [], f"CHECK ({check.expression})")  # fmt: skip


# pg_constraint's codes of a foreign key's referential actions
_ACTION_CODES = {"NO ACTION": "a", "RESTRICT": "r", "CASCADE": "c", "SET NULL": "n",
                 "SET DEFAULT": "d"}  # fmt: skip


def _constraint(
    db: sqlite3.Connection,
    database: str,
    desc: TableDescriptor,
    oid: int,
    name: str,
    kind: str,
    index_oid: int,
    referenced: int,
    keys: list[int],
    referenced_keys: list[int],
    definition: str,
    actions: tuple[str, str, str] = (" ", " ", " "),
) -> None:
    """A pg_constraint row; ``actions``: a foreign key's confupdtype, confdeltype and
    confmatchtype."""

    def array(values: list[int]) -> str | None:
        return "{" + ",".join(map(str, values)) + "}" if values else None

    _insert(
        db,
        "pg_constraint",
        [(oid, name, PUBLIC_OID, kind, False, False, True, desc.id, 0, index_oid, referenced,
          array(keys), array(referenced_keys), True, 0, True, 0, *actions)],
    )  # fmt: skip
    _insert(db, "feedkv_constraint_defs", [(oid, definition)])
    kinds = {"u": "UNIQUE", "f": "FOREIGN KEY", "c": "CHECK"}
    _insert(
        db,
        "information_schema.table_constraints",
        [(database, "public", name, database, "public", desc.name, kinds[kind])],
    )


def _length(typid: int) -> int:
    return next((length for oid, _, length, _, _ in _TYPES if oid == typid), -1)


def _precision(ctype: ColumnType) -> int | None:
    if ctype.kind is Kind.INT:
        return ctype.width or 64
    if ctype.kind is Kind.FLOAT:
        return 24 if ctype.width == 32 else 53
    if ctype.kind is Kind.DECIMAL:
        return ctype.precision
    return None


# Rewriting PostgreSQL's catalog queries for SQLite.

_OPERATOR = re.compile(r"OPERATOR\s*\(\s*pg_catalog\s*\.\s*([~!=<>]+)\s*\)", re.IGNORECASE)
_COLLATE = re.compile(r"\s+COLLATE\s+(?:pg_catalog\s*\.\s*)?\"?(?:default|C)\"?", re.IGNORECASE)
_QUALIFIED = re.compile(r'(?:\bpg_catalog|"pg_catalog")\s*\.\s*', re.IGNORECASE)
_ESCAPE_STRING = re.compile(r"\b[eE]'((?:[^'\\]|\\.|'')*)'")
# ``::oid[]`` and its kin, which sqlglot reads as a subscript: an array is not cast in
# SQLite (its parameter's type is taken from it before, by catalog_param_oids)
_ARRAY_CAST = re.compile(r'::\s*(?:pg_catalog\s*\.\s*)?(?:\w+|"char")\s*\[\s*\]', re.IGNORECASE)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def _plain_string(match: re.Match[str]) -> str:
    """``E'...'`` as a standard string literal."""
    body = re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), match.group(1))
    return "'" + body.replace("''", "'").replace("'", "''") + "'"


# Catalogs that hold nothing for feedkv (no policies, triggers, publications, extended
# statistics, inheritance, rules, sequences, enums, foreign or partitioned tables): a
# query that reads one of them (not through an outer join) has no rows, whatever its
# clauses, which need not even translate.
_EMPTY_TABLES = frozenset(
    {
        "pg_policy", "pg_trigger", "pg_publication", "pg_publication_rel",
        "pg_publication_namespace", "pg_statistic_ext", "pg_rewrite", "pg_foreign_table",
        "pg_partitioned_table", "pg_event_trigger",
        "pg_shdescription", "pg_inherits", "pg_foreign_server",
        "pg_foreign_data_wrapper", "pg_depend", "pg_cast", "pg_operator",
        "pg_aggregate", "pg_conversion", "pg_language", "pg_range", "pg_ts_config",
        "pg_proc", "pg_db_role_setting", "pg_opfamily", "pg_amop", "pg_amproc",
        "pg_ts_dict", "pg_ts_parser", "pg_ts_template", "pg_largeobject_metadata",
        "pg_subscription", "pg_default_acl", "pg_init_privs", "pg_seclabel",
        "pg_transform", "pg_user_mapping", "pg_user_mappings", "pg_statistic_ext_data",
        "pg_policies", "pg_partition_tree",
    }
)  # fmt: skip


_EMPTY_NAMES = re.compile(r"\b(?:" + "|".join(sorted(_EMPTY_TABLES)) + r")\b", re.IGNORECASE)


def _empty_tables(tree: exp.Expr) -> exp.Expr:
    """``tree`` with each empty catalog it reads where :func:`_empty_answer` cannot tell
    the answer (a branch of a set operation, an outer join) as an empty subquery of the
    columns the query reads of it (psql's ``\\dd`` reads pg_trigger so)."""
    for table in list(tree.find_all(exp.Table)):
        if table.name.lower() not in _EMPTY_TABLES or not isinstance(
            table.parent, exp.From | exp.Join
        ):
            continue
        alias = table.alias_or_name
        read = {c.name for c in tree.find_all(exp.Column) if c.table == alias}
        read |= _unqualified_columns(table)
        columns = [exp.alias_(exp.Null(), name, quoted=True) for name in sorted(read | {"oid"})]
        empty = exp.select(*columns).where(exp.false())
        table.replace(exp.Subquery(this=empty, alias=exp.TableAlias(this=exp.to_identifier(alias))))
    return tree


def _unqualified_columns(table: exp.Table) -> set[str]:
    """The columns the SELECT that reads ``table`` names without a table that none of
    its other sources has (when they are all catalog tables, whose columns are known)."""
    select = table.find_ancestor(exp.Select)
    if select is None:
        return set()
    source = select.args.get("from_") or select.args.get("from")
    sources = [source.this] if source is not None else []
    sources += [join.this for join in select.args.get("joins") or []]
    known = _catalog_columns()
    others = [t for t in sources if t is not table]
    if not all(isinstance(t, exp.Table) and t.name.lower() in known for t in others):
        return set()
    taken = set().union(*(known[t.name.lower()] for t in others))
    return {c.name for c in select.find_all(exp.Column) if not c.table and c.name not in taken}


def _catalog_table_oids(tree: exp.Expr) -> exp.Expr:
    """``tree`` with each catalog row's ``tableoid`` (a system column: the OID of the
    catalog it is in) as that OID."""
    for select in tree.find_all(exp.Select):
        tables = {
            t.alias_or_name: t.name.lower()
            for t in select.find_all(exp.Table)
            if t.find_ancestor(exp.Select) is select
        }
        for column in list(select.find_all(exp.Column)):
            if column.name.lower() != "tableoid" or column.find_ancestor(exp.Select) is not select:
                continue
            table = tables.get(column.table) if column.table else next(iter(tables.values()), None)
            oid = _CATALOG_RELATIONS.get(table or "")
            column.replace(exp.Literal.number(oid) if oid is not None else exp.Null())
    return tree


def _empty_answer(tree: exp.Expr) -> list[str] | None:
    """The column names of ``tree`` if it reads one of the empty catalogs in its FROM
    or an inner join (it then has no rows), else None."""
    if isinstance(tree, exp.Union):
        left, right = _empty_answer(tree.this), _empty_answer(tree.expression)
        return left if left is not None and right is not None else None
    if not isinstance(tree, exp.Select):
        return None
    sources = []
    source = tree.args.get("from_") or tree.args.get("from")
    if source is not None:
        sources.append(source.this)
    for join in tree.args.get("joins") or []:
        if not join.side:
            sources.append(join.this)
    if not any(isinstance(t, exp.Table) and t.name.lower() in _EMPTY_TABLES for t in sources):
        return None
    aggregates = (
        call
        for e in tree.expressions
        for call in e.find_all(exp.AggFunc)
        if call.find_ancestor(exp.Select) is tree
    )
    if not tree.args.get("group") and any(aggregates):
        return None  # NB: an aggregate over no rows has a row (count(*) is 0)
    if any(_is_star(e) for e in tree.expressions):
        raise SQLError(
            "0A000", "SELECT * of a catalog feedkv keeps empty is not supported: name its columns"
        )
    return [_column_name(e) for e in tree.expressions]


def _is_star(node: exp.Expr) -> bool:
    return isinstance(node, exp.Star) or (
        isinstance(node, exp.Column) and isinstance(node.this, exp.Star)
    )


# pgjdbc's getPrimaryKeys reads information_schema._pg_expandarray(indkey), a record of
# (x: the element, n: its position from 1): as unnest of indkey and its position.
_EXPAND_N = re.compile(
    r"\(\s*information_schema\s*\.\s*_pg_expandarray\s*\(([^()]*)\)\s*\)\s*\.\s*n\b", re.I
)
_EXPAND = re.compile(r"information_schema\s*\.\s*_pg_expandarray\s*\(([^()]*)\)", re.I)
_FIELD_X = re.compile(r"\(\s*(\w+\s*\.\s*\w+)\s*\)\s*\.\s*x\b", re.I)


class _CatalogPostgres(Postgres):
    """PostgreSQL's dialect with its array subscripts left as written (sqlglot makes some
    0-based, by the types it guesses): :func:`_subscript` reads them 1-based."""

    INDEX_OFFSET = 0


def _parse(text: str) -> exp.Expr:
    text = _EXPAND_N.sub(r"feedkv_expand_n(\1)", text)
    text = _EXPAND.sub(r"unnest(\1)", text)
    text = _FIELD_X.sub(r"\1", text)
    text = _OPERATOR.sub(lambda m: f" {m.group(1)} ", text)
    text = _COLLATE.sub("", text)
    text = _ESCAPE_STRING.sub(_plain_string, text)
    text = _ARRAY_CAST.sub("", text)
    text = _QUALIFIED.sub("", text)
    try:
        trees = sqlglot.parse(text, read=_CatalogPostgres)
    except sqlglot.errors.ParseError as exc:
        raise SQLError("42601", f"cannot read this catalog query: {exc}") from None
    if len(trees) != 1 or trees[0] is None:
        raise SQLError("42601", "a catalog query must be one statement")
    return trees[0]


@dataclass(frozen=True, slots=True)
class _Translated:
    """A catalog query made ready for SQLite (see :func:`_translated`)."""

    empty: tuple[str, ...] | None  # its columns, when it reads a catalog feedkv keeps empty
    sql: str  # in SQLite's dialect
    # its result columns' types where their expressions tell (:func:`_static_oid`)
    oids: tuple[int | None, ...]
    probe: str  # ``sql`` over NULL parameters, as a view tells its columns' types
    arrays: frozenset[int]  # its result columns that aggregate into arrays (array_agg)
    # the type of the elements of those of them whose expression tells it
    elements: Mapping[int, int] = field(default_factory=dict)


def _derived_arrays(tree: exp.Expr) -> dict[int, int | None]:
    """The places of ``tree``'s result columns that read an array_agg of a derived
    table (SQLAlchemy's index reflection: ``idx_cols.elements``), through derived
    tables of derived tables, each with the type of its elements where their expression
    tells it (``None``: only values tell): arrays, which a Describe, made before any
    row is read, could not tell from their values."""
    found: dict[int, int | None] = {}
    if isinstance(tree, exp.Select):
        for n, item in enumerate(tree.expressions):
            aggregate = _derived(tree, item.this if isinstance(item, exp.Alias) else item)
            if aggregate is not None:
                found[n] = _derived_oid(*aggregate)
    return found


def _derived(select: exp.Select, node: exp.Expr) -> tuple[exp.Select, exp.Expr] | None:
    """``(the select it is in, the argument)`` of the array_agg ``node`` is, or reads
    through a derived table's column; ``None`` if it is none."""
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "pg_array_agg":
        return select, node.expressions[0]
    resolved = _column_source(select, node)
    return _derived(*resolved) if resolved is not None else None


def _column_source(select: exp.Select, node: exp.Expr) -> tuple[exp.Select, exp.Expr] | None:
    """The expression a derived table's column ``node`` (``alias.name``) names, with the
    select it is in; ``None`` for anything else."""
    if not isinstance(node, exp.Column) or not node.table:
        return None
    for source in (select.args.get("from_"), *select.args.get("joins", ())):
        derived = source.this if source is not None else None
        if not isinstance(derived, exp.Subquery) or derived.alias_or_name != node.table:
            continue
        inner = derived.this
        for item in inner.expressions if isinstance(inner, exp.Select) else ():
            if item.alias_or_name == node.name:
                return inner, item.this if isinstance(item, exp.Alias) else item
    return None


def _derived_oid(select: exp.Select, node: exp.Expr) -> int | None:
    """The type of ``node``'s values where its expression tells it, through derived
    tables' columns."""
    while (resolved := _column_source(select, node)) is not None:
        select, node = resolved
    return _static_oid(node)


def _first_select(tree: exp.Expr) -> exp.Select | None:
    """The SELECT that names a query's result columns (a set operation's first)."""
    while isinstance(tree, exp.SetOperation):
        tree = tree.this
    return tree if isinstance(tree, exp.Select) else None


@functools.lru_cache(maxsize=256)
def _translated(text: str, database: str, user: str, version: str) -> _Translated:
    """``text`` translated (parsed, rewritten and written by sqlglot, which costs
    tens of milliseconds): kept per text, as tools send the same few queries again
    (asyncpg its type introspection at each connection's first array)."""
    tree = _parse(text)
    first = _first_select(tree)
    oids = tuple(_static_oid(e) for e in first.expressions) if first is not None else ()
    empty = _empty_answer(tree)
    if empty is not None:
        return _Translated(tuple(empty), "", oids, "", frozenset())
    values = {"database": database, "user": user, "version": version}
    for select in list(tree.find_all(exp.Select)):
        top = select is first
        select.set("expressions", [_named(e, top=top) for e in select.expressions])
        _unnest_index_keys(select)
    tree = _empty_tables(_catalog_table_oids(_rewritten(_lateral_aggregates(tree), values)))
    probe = tree.transform(
        lambda node: exp.Null() if isinstance(node, exp.Var) and node.name[:1] == "?" else node
    )
    derived = _derived_arrays(probe)
    arrays = set(derived)
    if isinstance(probe, exp.Select):
        # NB: an aggregate's type is its argument's (an array_agg's, an array of it),
        # which a view tells where it does not tell the aggregate's
        items = []
        for n, item in enumerate(probe.expressions):
            inner = item.this if isinstance(item, exp.Alias) else item
            if isinstance(inner, exp.Anonymous) and str(inner.this).lower() == "pg_array_agg":
                arrays.add(n)
                argument = inner.expressions[0]
            elif isinstance(inner, exp.Min | exp.Max):
                argument = inner.this
            else:
                items.append(item)
                continue
            items.append(exp.alias_(argument, item.alias_or_name, quoted=True))
        probe.set("expressions", items)
    return _Translated(
        None,
        tree.sql(dialect="sqlite"),
        oids,
        probe.sql(dialect="sqlite"),
        frozenset(arrays),
        {n: oid for n, oid in derived.items() if oid is not None and oid in _ARRAY_OF},
    )


# The type OIDs of the catalog's columns as SQLite declares them (an expression's: none).
_DECLARED_OIDS = {
    "INTEGER": OID.INT8, "INT2": OID.INT2, "INT4": OID.INT4, "TEXT": OID.TEXT,
    "BOOLEAN": OID.BOOL, "OID": OID.OID, "TEXT NAME": OID.NAME, "REAL": OID.FLOAT4,
    "TIMESTAMPTZ": OID.TIMESTAMPTZ, "CHAR": OID.CHAR, "TEXT REGPROC": OID.REGPROC,
    "TEXT INT2VECTOR": OID.INT2VECTOR, "TEXT OIDVECTOR": OID.OIDVECTOR,
}  # fmt: skip
# The types of a column of NULLs as a cursor over a catalog query keeps them.
# NB: a BOOLEAN column's values are bools (its converter), as a view's column of one
_DECLARED = {
    OID.INT8: ColumnType(Kind.INT),
    OID.INT2: ColumnType(Kind.INT, width=16),
    OID.INT4: ColumnType(Kind.INT, width=32),
    OID.OID: ColumnType(Kind.INT),
    OID.TEXT: ColumnType(Kind.STRING),
    OID.NAME: ColumnType(Kind.STRING),
    OID.CHAR: ColumnType(Kind.STRING),
    OID.REGPROC: ColumnType(Kind.STRING),
    OID.BOOL: ColumnType(Kind.BOOL),
}
# The declared types a column's values cannot tell (an int is an int8 to them).
_ONLY_DECLARED = frozenset(
    {OID.OID, OID.INT2, OID.INT4, OID.NAME, OID.FLOAT4, OID.BOOL, OID.CHAR, OID.REGPROC,
     OID.INT2VECTOR, OID.OIDVECTOR}
)  # fmt: skip


def _declared_types(db: sqlite3.Connection, query: _Translated) -> tuple[int | None, ...]:
    """The type OIDs of the catalog columns the translated query reads as its result
    columns (SQLite keeps a declared type through subqueries and CTEs), as a view of it
    over NULL parameters (its ``probe``) has them (None: an expression's); kept per
    query, as the catalog's tables are always the same."""
    found = _DECLARED_BY_PROBE.get(query.probe)
    if found is None:
        found = _DECLARED_BY_PROBE[query.probe] = _probe_types(db, query)
        while len(_DECLARED_BY_PROBE) > 256:
            del _DECLARED_BY_PROBE[next(iter(_DECLARED_BY_PROBE))]
    return found


_DECLARED_BY_PROBE: dict[str, tuple[int | None, ...]] = {}


def _probe_types(db: sqlite3.Connection, query: _Translated) -> tuple[int | None, ...]:
    try:
        db.execute(f"CREATE TEMP VIEW pg_result_types AS {query.probe}")
        declared = [row[2] for row in db.execute("PRAGMA temp.table_info(pg_result_types)")]
    except sqlite3.Error:
        return ()
    return tuple(_DECLARED_OIDS.get(name.upper()) for name in declared)


def _declared_column_type(oid: int | None, array: bool) -> ColumnType | None:
    """The type a cursor keeps for a result column of the catalog type ``oid``
    (``array``: an array_agg of it)."""
    element = None if oid is None else _DECLARED.get(oid)
    return ColumnType(Kind.ARRAY, element=element) if array and element is not None else element


def _wire_types(
    rows: Sequence[tuple[Any, ...]],
    static: Sequence[int | None],
    declared: Sequence[int | None],
    arrays: frozenset[int],
    elements: Mapping[int, int],
) -> tuple[WireType, ...]:
    """The result columns' types: their expressions' (``static``; an array_agg's of an
    expression that tells its type, ``elements``), else the catalog column's each reads
    (``declared``) where its values cannot tell it or are all NULL, else their values'
    (an array_agg's: an array of its values' type)."""
    declared = declared if len(declared) == len(static) else [None] * len(static)
    out = []
    for n, (fixed, column) in enumerate(zip(static, declared, strict=True)):
        values = [row[n] for row in rows]
        if fixed is not None:
            out.append(WireType(fixed))
        elif n in elements:
            out.append(WireType(_ARRAY_OF[elements[n]]))
        elif n in arrays and all(v is None for v in values):
            # NB: an array of what its declared column holds; of an expression, text[]
            element = _DECLARED.get(column) if column is not None else None
            out.append(
                wire_type(ColumnType(Kind.ARRAY, element=element or ColumnType(Kind.STRING)))
            )
        elif (
            column is not None
            and n not in arrays
            and (column in _ONLY_DECLARED or all(v is None for v in values))
        ):
            out.append(WireType(column))
        else:
            out.append(WireType(column_oid(values)))
    return tuple(out)


def _bool_arrays(row: tuple[Any, ...], elements: Mapping[int, int]) -> tuple[Any, ...]:
    """``row`` with each array of bools SQLite gave as 0s and 1s made of bools."""
    return tuple(
        Array(tuple(None if x is None else bool(x) for x in v.values), ColumnType(Kind.BOOL))
        if elements.get(n) == OID.BOOL and isinstance(v, Array)
        else v
        for n, v in enumerate(row)
    )


def _typed_value(
    value: Any, oid: int | None, printers: Mapping[int, Callable[[int], str | None]]
) -> Any:
    """A value SQLite gives as its result column's type (``oid``) holds it: a bool for
    a bool (SQLite's 0 or 1), an int for an oid (a number's text cast to oid), a
    Decimal for a numeric (a constant's float, a quotient), a regclass's or regtype's
    OID as its name (``printers``: how each prints)."""
    if oid == OID.BOOL:
        return _bool(value)
    if oid is not None and oid in printers and isinstance(value, int):
        return OidName(printers[oid](value) or str(value), value)
    if oid == OID.OID and isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if oid == OID.NUMERIC and isinstance(value, int | float | str):
        return decimal.Decimal(str(value))  # NB: a float's shortest text: 3.0, not 3
    return _value(value)


@dataclass(frozen=True, slots=True)
class CatalogResult(Result):
    """A catalog query's result, with the type of each of its columns as it goes out."""

    wire_types: tuple[WireType, ...] = ()


def _unnest_index_keys(select: exp.Select) -> None:
    """``unnest(i.indkey)`` (or ``i.indclass``) and ``generate_subscripts(i.indkey, 1)``
    in ``select``'s
    columns, which SQLite has no set-returning functions for, as a join with
    ``pg_index_keys`` (one row per key column of an index, with its position)."""
    found: list[exp.Column] = []

    def keys(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Explode) and _is_indkey(node.this):
            found.append(node.this)
            column = "opclass" if node.this.name.lower() == "indclass" else "attnum"
            return exp.column(column, table="__k")
        if (
            isinstance(node, exp.Anonymous)
            and str(node.this).lower() in ("generate_subscripts", "feedkv_expand_n")
            and node.expressions
            and _is_indkey(node.expressions[0])
        ):
            found.append(node.expressions[0])
            ordinal = exp.column("ord", table="__k")
            if str(node.this).lower() == "feedkv_expand_n":
                return ordinal  # _pg_expandarray's n: from 1
            if node.expressions[0].name.lower() == "conkey":
                return ordinal  # an int2[]: from 1
            # NB: indkey and indclass are int2vector and oidvector, whose subscripts
            # start at 0 (SQLAlchemy asks pg_get_indexdef(indexrelid, ord + 1) of an
            # expression key)
            return exp.Paren(this=exp.Sub(this=ordinal, expression=exp.Literal.number(1)))
        return node

    select.set("expressions", [e.transform(keys) for e in select.expressions])
    if found:
        # NB: an index's keys are also its constraint's (pg_constraint.conindid)
        key = "conindid" if found[0].name.lower() == "conkey" else "indexrelid"
        table = found[0].table
        select.join(
            exp.alias_(exp.to_table("pg_index_keys"), "__k"),
            on=f"__k.indexrelid = {table + '.' if table else ''}{key}",
            copy=False,
        )


def _reg_kind(node: exp.Expr) -> str | None:
    """``regclass`` or ``regtype`` if ``node``'s value is one (a cast to it, or
    ``to_regclass(...)``, ``to_regtype(...)``), else None."""
    if isinstance(node, exp.Cast):
        target = _cast_target(node)
        return target if target in _SHOWN else None
    if isinstance(node, exp.Anonymous) and str(node.this).lower() in ("to_regclass", "to_regtype"):
        return str(node.this).lower()[3:]
    return None


# The function that prints a regclass (regtype) cast to text: the catalog computes with
# its OID (a result column of one is printed after the query: :func:`_typed_value`).
_SHOWN = {"regclass": "pg_regclass_name", "regtype": "pg_regtype_name"}


def _is_indkey(node: exp.Expr) -> bool:
    return isinstance(node, exp.Column) and node.name.lower() in ("indkey", "indclass", "conkey")


def _named(node: exp.Expr, *, top: bool = False) -> exp.Expr:
    """A result column aliased with the name PostgreSQL gives it (:func:`_column_name`),
    which SQLite would not (it names an expression by its rewritten text); a column of
    the outermost query that has none is ``?column?``, as in the SQL layer."""
    if isinstance(node, exp.Alias) or _is_star(node):
        return node
    name = _column_name(node)
    if name == "?column?" and not top:
        return node
    return exp.alias_(node, name, quoted=True)


def _column_name(node: exp.Expr) -> str:
    """The name of result column ``node``, as the SQL layer names one
    (:func:`feedkv.sql.expr.expression_name`), and a cast to a catalog type (``oid``,
    ``regclass``, ...) of an operand without a name of its own named for that type."""
    if isinstance(node, exp.Alias):
        return node.alias
    inner = node
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Cast) and _cast_target(inner) in _CATALOG_TYPES:
        operand = inner.this
        while isinstance(operand, exp.Paren):
            operand = operand.this
        named = isinstance(operand, exp.Column) or (
            isinstance(operand, exp.Func) and not isinstance(operand, exp.Cast)
        )
        name = _column_name(operand)
        return name if named and name != "?column?" else _cast_target(inner).strip('"')
    if isinstance(inner, exp.Anonymous):
        return str(inner.this).lower()  # NB: a catalog function, as written
    return expression_name(node)


def _cast_target(node: exp.Cast) -> str:
    """The name of the type ``node`` casts to, lower-cased (``"char"`` quoted)."""
    return (node.args["to"].sql(dialect="postgres") or "").lower()


# The catalog's own types, which the SQL layer has no ColumnType for: their OIDs.
_CATALOG_TYPES = {
    "oid": OID.OID, "regclass": OID.REGCLASS, "regtype": OID.REGTYPE, "regproc": OID.REGPROC,
    "name": OID.NAME, '"char"': OID.CHAR,
}  # fmt: skip
# The result types of the catalog functions (:func:`_functions`) by name.
_FUNCTION_TYPES = {
    **dict.fromkeys(
        ("pg_table_is_visible", "pg_type_is_visible", "pg_opclass_is_visible",
         "pg_opfamily_is_visible", "pg_function_is_visible", "has_table_privilege",
         "has_schema_privilege", "has_database_privilege", "pg_is_other_temp_schema",
         "pg_collation_is_visible"),
        OID.BOOL,
    ),
    **dict.fromkeys(
        ("pg_get_userbyid", "current_database", "current_schema", "current_user",
         "session_user", "pg_encoding_to_char", "current_catalog", "getdatabaseencoding"),
        OID.NAME,
    ),
    **dict.fromkeys(
        ("format_type", "current_setting", "pg_get_expr", "pg_get_indexdef", "pg_get_constraintdef",
         "pg_get_viewdef", "obj_description", "col_description", "shobj_description",
         "version", "pg_size_pretty", "quote_ident", "quote_literal", "array_to_string",
         "pg_tablespace_location", "pg_get_serial_sequence", "pg_get_partkeydef"),
        OID.TEXT,
    ),
    **dict.fromkeys(
        ("pg_database_size", "pg_table_size", "pg_relation_size", "pg_total_relation_size",
         "pg_indexes_size", "pg_tablespace_size"),
        OID.INT8,
    ),
    "to_regclass": OID.REGCLASS,
    "to_regtype": OID.REGTYPE,
}  # fmt: skip
_FUNCTION_NODE_NAMES: dict[type[exp.Expr], str] = {
    exp.CurrentDatabase: "current_database", exp.CurrentCatalog: "current_catalog",
    exp.CurrentSchema: "current_schema", exp.CurrentUser: "current_user",
    exp.SessionUser: "session_user", exp.CurrentVersion: "version",
}  # fmt: skip


_FLOATS = frozenset({OID.FLOAT4, OID.FLOAT8})


def _static_oid(node: exp.Expr) -> int | None:
    """The type OID of result column ``node`` where its expression tells it (a
    comparison's bool, a cast's type, a catalog function's result), as the SQL layer
    types the same expression; ``None`` where only its values (or the catalog column it
    reads) tell."""
    while isinstance(node, exp.Alias | exp.Paren):
        node = node.this
    if isinstance(node, exp.Predicate | exp.Connector | exp.Not | exp.Boolean | exp.Exists):
        return OID.BOOL
    if isinstance(node, exp.Count):
        return OID.INT8
    if isinstance(node, exp.Literal) and not node.is_string:
        # NB: as the SQL layer reads a constant: with a point or an exponent a DECIMAL
        return OID.NUMERIC if any(c in node.this for c in ".eE") else OID.INT8
    if isinstance(node, exp.Div):
        # NB: an integer's quotient is a DECIMAL (:func:`_divide`), as CockroachDB's
        quotient = {_static_oid(node.this), _static_oid(node.expression)}
        return None if _FLOATS & quotient else OID.NUMERIC
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Mod):
        operands: set[int | None] = {_static_oid(node.this), _static_oid(node.expression)}
        if None in operands:
            return None
        if _FLOATS & operands:
            return OID.FLOAT8
        return OID.NUMERIC if OID.NUMERIC in operands else OID.INT8
    if isinstance(node, exp.Cast):
        target = _cast_target(node)
        if target in _CATALOG_TYPES:
            return _CATALOG_TYPES[target]
        try:
            return wire_type(column_type(node.args["to"])).oid
        except SQLError:
            return None
    if isinstance(node, exp.Anonymous):
        return _FUNCTION_TYPES.get(str(node.this).lower())
    name = _FUNCTION_NODE_NAMES.get(type(node))
    if name is not None:
        return _FUNCTION_TYPES.get(name, OID.TEXT)
    if isinstance(node, exp.Coalesce):
        return next(filter(None, map(_static_oid, [node.this, *node.expressions])), None)
    if isinstance(node, exp.Case):
        branches = [i.args["true"] for i in node.args.get("ifs") or []]
        return next(filter(None, map(_static_oid, [*branches, node.args.get("default")])), None)
    return None


# The types whose casts SQLite makes as PostgreSQL does (of a number's text).
_NUMBERS = frozenset(
    {exp.DataType.Type.INT, exp.DataType.Type.BIGINT, exp.DataType.Type.SMALLINT,
     exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT, exp.DataType.Type.DECIMAL}
)  # fmt: skip
_CASTS = {"regclass": "pg_regclass", "regtype": "pg_regtype", "regproc": "pg_regproc"}


def _rewritten(tree: exp.Expr, values: dict[str, str]) -> exp.Expr:
    """``tree`` with every rewrite of :func:`_rewrite` made: sqlglot's transform does not
    look inside what a rewrite returns (a cast's operand, a parameter in an array), so
    this goes over the tree again until nothing changes (a rewrite's result is never
    rewritten again: a pass or two)."""
    while True:
        changed = False

        def rewrite(node: exp.Expr) -> exp.Expr:
            nonlocal changed
            new = _rewrite(node, values)
            changed = changed or new is not node
            return new

        tree = tree.transform(rewrite)
        if not changed:
            return tree


def _rewrite(node: exp.Expr, values: dict[str, str]) -> exp.Expr:
    if isinstance(node, exp.Cast):
        target = node.args["to"]
        name = (target.sql(dialect="postgres") or "").lower()
        kind = _reg_kind(node.this)
        if name in ("text", "varchar", "name", "string") and kind is not None:
            return exp.Anonymous(this=_SHOWN[kind], expressions=[node.this])
        function = _CASTS.get(name)
        if function is not None:
            return exp.Anonymous(this=function, expressions=[node.this])
        if name in ("bool", "boolean"):
            return exp.Anonymous(this="pg_bool", expressions=[node.this])
        operand: exp.Expr = node.this
        if isinstance(operand, exp.Parameter) and target.this not in _NUMBERS:
            return operand  # NB: read as its type at Bind; SQLite would read a number off it
        if name in ("oid", "name", "text", "char", '"char"', "int2vector", "oidvector"):
            return operand  # NB: the cast it casts (::regtype::text)
    if isinstance(node, exp.Div):
        return exp.Anonymous(this="pg_divide", expressions=[node.this, node.expression])
    if isinstance(node, exp.EQ) and isinstance(node.expression, exp.Any):
        array = node.expression.this
        while isinstance(array, exp.Paren):
            array = array.this
        if isinstance(array, exp.Array):
            return exp.In(this=node.this, expressions=list(array.expressions))
        # NB: an array parameter, or an array column, as a set of its JSON elements
        return exp.In(this=node.this, query=_element_rows(array))
    if (
        isinstance(node, exp.Array)
        and len(node.expressions) == 1
        and isinstance(node.expressions[0], exp.Select)
    ):
        return _array_of(node.expressions[0], values)
    if (
        isinstance(node, exp.Subquery)
        and not isinstance(node.parent, exp.From | exp.Join | exp.In | exp.Exists)
        and _empty_answer(node.this) is not None
    ):
        return exp.Null()  # NB: a scalar subquery of a catalog feedkv keeps empty
    if isinstance(node, exp.ArrayAgg):
        inner, order = node.this, exp.Null()
        if isinstance(inner, exp.Order):
            order = inner.expressions[0].this if inner.expressions else exp.Null()
            inner = inner.this
        return exp.Anonymous(this="pg_array_agg", expressions=[inner, order])
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
        index = node.expressions[0]
        return exp.func("pg_subscript", node.this, index)
    if isinstance(node, exp.Table) and isinstance(node.this, exp.ExplodingGenerateSeries):
        return _series(node)
    if (
        isinstance(node, exp.Table)
        and isinstance(node.this, exp.Anonymous)
        and str(node.this.this).lower() in _TABLE_FUNCTIONS
    ):
        # NB: pg_partition_tree(relation)'s rows are none, whatever relation it is
        # given (it has rows only for a partitioned table or a partition)
        name = str(node.this.this).lower()
        return exp.Table(this=exp.to_identifier(name), alias=node.args.get("alias"))
    if (
        isinstance(node, exp.NEQ)
        and isinstance(node.expression, exp.Anonymous)
        and str(node.expression.this).upper() == "ALL"
        and len(node.expression.expressions) == 1
    ):
        # ``x <> ALL (array)`` (sqlglot reads ALL as a call): x is none of its elements
        array = node.expression.expressions[0]
        return exp.Not(this=exp.In(this=node.this, query=_element_rows(array)))
    if isinstance(node, exp.Parameter):
        text = node.this.name if isinstance(node.this, exp.Expr) else str(node.this)
        return exp.Var(this=f"?{text}")
    if isinstance(node, exp.CurrentDatabase | exp.CurrentCatalog):
        return exp.Literal.string(values["database"])
    if isinstance(node, exp.CurrentSchema):
        return exp.Literal.string("public")
    if isinstance(node, exp.CurrentUser | exp.SessionUser):
        return exp.Literal.string(values["user"])
    if isinstance(node, exp.CurrentVersion):
        return exp.Literal.string(values["version"])
    return node


# Table functions a catalog query calls in FROM, read as the catalog table of their name.
_TABLE_FUNCTIONS = frozenset({"pg_get_keywords", "pg_partition_tree"})


def _lateral_aggregates(tree: exp.Expr) -> exp.Expr:
    """``tree`` with each ``, LATERAL (SELECT aggregates ...) s`` it joins (psql's
    ``\\dP+`` sums pg_partition_tree so), which SQLite has no LATERAL for, as a scalar
    subquery in place of each ``s.column`` it reads: an aggregate over no GROUP BY has
    exactly one row, so the join is the same as the outer row with those values. A
    LATERAL of another query is not supported (0A000)."""
    for join in list(tree.find_all(exp.Join)):
        lateral = join.this
        if not isinstance(lateral, exp.Lateral):
            continue
        inner = lateral.this.this if isinstance(lateral.this, exp.Subquery) else None
        alias = lateral.args.get("alias")
        select = join.find_ancestor(exp.Select)
        if (
            not isinstance(inner, exp.Select)
            or not _one_row(inner)
            or alias is None
            or select is None
        ):
            raise SQLError(
                "0A000",
                "a LATERAL subquery in a catalog query is supported only as a named subquery "
                "of aggregates without GROUP BY (one row)",
            )
        outputs = {e.alias_or_name: e for e in inner.expressions}
        for column in list(select.find_all(exp.Column)):
            if column.table == alias.name and column.name in outputs:
                value = outputs[column.name]
                value = value.this if isinstance(value, exp.Alias) else value
                scalar = inner.copy()
                scalar.set("expressions", [value.copy()])
                column.replace(exp.Subquery(this=scalar))
        join.pop()
    return tree


def _one_row(select: exp.Select) -> bool:
    """Whether ``select`` always has one row: each of its columns an aggregate's value,
    with no GROUP BY, HAVING, LIMIT or OFFSET."""
    if any(select.args.get(k) for k in ("group", "having", "limit", "offset")):
        return False
    return bool(select.expressions) and all(
        any(call.find_ancestor(exp.Select) is select for call in e.find_all(exp.AggFunc))
        for e in select.expressions
    )


def _element_rows(array: exp.Expr) -> exp.Expr:
    """The elements of ``array`` (see :func:`_array_json`) as a one-column subquery."""
    table = exp.Table(this=exp.func("json_each", exp.func("pg_array_json", array)))
    return exp.select("value").from_(table).subquery()


def _series(table: exp.Table) -> exp.Expr:
    """``generate_series(a, b) AS s(r)`` in a FROM clause, which SQLite has no table
    function for, as a recursive CTE of the integers from a to b."""
    series = table.this
    alias = table.args.get("alias")
    name = alias.name if alias is not None and alias.name else "generate_series"
    columns = alias.columns if alias is not None else []
    column = columns[0].name if columns else name
    start, end = (series.args[k] for k in ("start", "end"))
    query = sqlglot.parse_one(
        "WITH RECURSIVE __series(v) AS (SELECT NULL UNION ALL SELECT v + 1 FROM __series "
        "WHERE v < NULL) SELECT v FROM __series",
        read="sqlite",
    )
    anchor, step = query.find_all(exp.Null)
    anchor.replace(start)
    step.replace(end)
    query.set("expressions", [exp.alias_(exp.column("v"), column)])
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(name)))


def _array_of(select: exp.Select, values: dict[str, str]) -> exp.Expr:
    """``ARRAY(SELECT v ...)``, the values of a one-column query as an array, as a
    scalar subquery that aggregates them in the query's order (``pg_array_of``); an
    empty array when it reads a catalog feedkv keeps empty."""
    source = select.args.get("from_") or select.args.get("from")
    # NB: what a catalog query unnests is an array column feedkv leaves NULL
    # (reloptions, an ACL), which has no elements
    unnests = source is not None and isinstance(source.this, exp.Unnest)
    if unnests or _empty_answer(select) is not None:
        return exp.Anonymous(this="pg_empty_array", expressions=[])
    inner = select.transform(lambda node: _rewrite(node, values))
    if len(inner.expressions) != 1:
        raise SQLError("42601", "subquery must return only one column")
    (column,) = inner.expressions
    value = column.this if isinstance(column, exp.Alias) else column
    inner.set("expressions", [exp.alias_(value, "__v")])
    # NB: sqlite3 gives NULL for an aggregate that saw no row, never calling finalize
    aggregate = exp.func(
        "coalesce",
        exp.Anonymous(this="pg_array_of", expressions=[exp.column("__v")]),
        exp.Anonymous(this="pg_empty_array", expressions=[]),
    )
    return exp.Subquery(this=exp.select(aggregate).from_(exp.Subquery(this=inner, alias="__a")))


def _functions(
    db: sqlite3.Connection,
    names: dict[str, int],
    values: dict[str, str],
    raised: list[SQLError],
    views: Mapping[int, str],
) -> dict[int, Callable[[int], str | None]]:
    """The catalog functions (``views``: each view's query by its OID); one that fails
    with an SQLError puts it in ``raised`` (SQLite's error says only that a function
    raised). Returns how a regclass and a regtype print, by their type OIDs."""

    def define(name: str, fn: Callable[..., Any], *counts: int) -> None:
        def call(*args: Any) -> Any:
            try:
                return fn(*args)
            except SQLError as exc:
                raised.append(exc)
                raise

        for count in counts:
            db.create_function(name, count, call, deterministic=True)

    define(
        "regexp",
        lambda pattern, text: text is not None and compiled(pattern).search(text) is not None,
        2,
    )
    define("pg_table_is_visible", lambda oid: 1, 1)
    # NB: a relation's partition ancestors are none, as of any relation that is neither
    # a partition nor partitioned (psql's \d asks so for what references a table)
    define("pg_partition_ancestors", lambda oid: None, 1)
    for visible in ("pg_type_is_visible", "pg_opclass_is_visible", "pg_opfamily_is_visible",
                    "pg_function_is_visible", "pg_collation_is_visible", "pg_conversion_is_visible",
                    "pg_operator_is_visible", "pg_statistics_obj_is_visible",
                    "pg_ts_config_is_visible"):  # fmt: skip
        define(visible, lambda oid: 1, 1)
    # NB: node, the owner of the system database, is no role, as in CockroachDB
    roles = dict(db.execute("SELECT oid, rolname FROM pg_roles").fetchall())
    roles[_role_oid(NODE_USER)] = NODE_USER
    define("pg_get_userbyid", lambda oid: roles.get(oid, f"unknown (OID={oid})"), 1)
    enums = dict(db.execute("SELECT oid, typname FROM pg_type WHERE typtype = 'e'").fetchall())
    define(
        "format_type",
        lambda oid, typmod: enums[oid] if oid in enums else _format_type(oid, typmod),
        2,
    )
    define("pg_get_expr", lambda expr, relid, pretty=False: expr, 2, 3)
    define("pg_encoding_to_char", lambda enc: "UTF8", 1)
    define("pg_tablespace_location", lambda oid: "", 1)
    # NB: sizes are not kept per database or table: unknown (NULL), which psql shows blank
    for size in ("pg_database_size", "pg_table_size", "pg_relation_size",
                 "pg_total_relation_size", "pg_indexes_size", "pg_tablespace_size"):  # fmt: skip
        define(size, lambda *args: None, 1, 2)
    define("pg_size_pretty", _size_pretty, 1)
    define("has_table_privilege", lambda *args: 1, 2, 3)
    define("has_schema_privilege", lambda *args: 1, 2, 3)
    define("has_database_privilege", lambda *args: 1, 2, 3)
    define("pg_is_other_temp_schema", lambda oid: 0, 1)
    define("pg_get_partkeydef", lambda oid: None, 1)
    define("pg_get_indexdef", lambda oid, column=0, pretty=0: _indexdef(db, oid, column), 1, 3)
    define("pg_get_constraintdef", lambda *args: _constraintdef(db, args[0]), 1, 2)
    # NB: a view's query as SHOW CREATE VIEW shows it; NULL for another relation
    define(
        "pg_get_viewdef",
        lambda oid, pretty=False: None if oid is None else views.get(int(oid)),
        1,
        2,
    )
    define("array_to_string", _array_to_string, 2, 3)
    define("pg_empty_array", lambda: _TEXT_ARRAY + "[]", 0)
    define("pg_array_json", _array_json, 1)
    define("pg_subscript", _subscript, 2)
    define("quote_literal", _quote_literal, 1)
    define("array_upper", lambda array, dim: len(_elements(array)) or None, 2)
    define("array_length", lambda array, dim: len(_elements(array)) or None, 2)
    define("pg_get_function_result", lambda oid: None, 1)
    # NB: a column's sequence is none (a SERIAL is unique_rowid(), as CockroachDB's)
    define("pg_get_serial_sequence", lambda table, column: None, 2)
    db.create_function("json_build_object", -1, _json_object, deterministic=True)
    define("pg_bool", _bool, 1)
    define("pg_divide", _divide, 2)
    relations = _CATALOG_RELATIONS | _CATALOG_VIEWS | names
    shown: dict[int, str] = {}
    for name, oid in relations.items():
        shown.setdefault(oid, name)
    database = values["database"]
    define("pg_regclass", lambda value: regclass_oid(value, relations, database), 1)
    define(
        "to_regclass",
        lambda value: regclass_oid(value, relations, database, missing_ok=True),
        1,
    )
    define("pg_regclass_name", lambda oid: regclass_name(oid, shown), 1)
    # NB: the functions a regproc names are the types' input functions and the access
    # methods' handlers; a regproc is its name here (pg_type.typinput is one)
    procs = {
        name
        for (name,) in db.execute("SELECT typinput FROM pg_type UNION SELECT amhandler FROM pg_am")
    }
    define("pg_regproc", lambda value: _regproc(value, procs), 1)
    define("getdatabaseencoding", lambda: "UTF8", 0)
    define("pg_char_to_encoding", lambda name: 6 if str(name).upper() == "UTF8" else -1, 1)
    settings = dict(db.execute("SELECT name, setting FROM pg_settings").fetchall())
    define(
        "current_setting", lambda name, missing_ok=False: _setting(settings, name, missing_ok), 1, 2
    )
    types = {name: oid for oid, name in enums.items()} | _TYPE_OIDS
    define("pg_regtype", lambda value: _regtype_oid(value, types), 1)
    define("to_regtype", lambda name: types.get(_bare_type_name(name)), 1)
    define("pg_regtype_name", lambda oid: _regtype_name(oid, enums), 1)
    define("version", lambda: values["version"], 0)
    define("current_database", lambda: values["database"], 0)
    define("current_schema", lambda: "public", 0)
    # NB: the implicit schema searched first is pg_catalog
    define("current_schemas", lambda implicit: "{pg_catalog,public}" if implicit else "{public}", 1)
    define("quote_ident", lambda name: name, 1)
    db.create_aggregate("pg_array_agg", 2, _ArrayAgg)  # type: ignore[arg-type]
    db.create_aggregate("pg_array_of", 1, _ArrayOf)  # type: ignore[arg-type]
    return {
        OID.REGCLASS: lambda oid: regclass_name(oid, shown),
        OID.REGTYPE: lambda oid: _regtype_name(oid, enums),
    }


_ARRAY = "\x00array:"  # marks an array_agg's result, made a list after the query


class _ArrayAgg:
    """``array_agg(value ORDER BY key)``."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, Any]] = []

    def step(self, value: Any, key: Any) -> None:
        self.items.append((key, value))

    def finalize(self) -> str:
        ordered = sorted(self.items, key=lambda item: (item[0] is None, item[0]))
        return _ARRAY + json.dumps([value for _, value in ordered])


# marks an ARRAY(subquery)'s result, made an Array after the query (NB: no NUL, which
# would end the SQL text of the literal an empty one is spelled as)
_TEXT_ARRAY = "\x01array:"


class _ArrayOf:
    """``ARRAY(SELECT value ...)``: the values in the order they come."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def step(self, value: Any) -> None:
        self.items.append(value)

    def finalize(self) -> str:
        return _TEXT_ARRAY + json.dumps(self.items)


# pg_size_pretty's units: name, the size below which it is used, whether it is shown
# halved and rounded (one more bit kept), its bits
_SIZE_UNITS = [
    ("bytes", 10 * 1024, False, 0),
    *((unit, 20 * 1024 - 1, True, bits) for unit, bits in
      (("kB", 10), ("MB", 20), ("GB", 30), ("TB", 40), ("PB", 50))),
]  # fmt: skip


def _size_pretty(size: int | None) -> str | None:
    """``pg_size_pretty``, computed as PostgreSQL does."""
    if size is None:
        return None
    value = int(size)
    n = 0
    while n + 1 < len(_SIZE_UNITS) and abs(value) >= _SIZE_UNITS[n][1]:
        _, _, rounded, bits = _SIZE_UNITS[n]
        _, _, next_rounded, next_bits = _SIZE_UNITS[n + 1]
        value = _truncated(value, 1 << (next_bits - bits - next_rounded + rounded))
        n += 1
    unit, _, rounded, _ = _SIZE_UNITS[n]
    if rounded:
        value = _truncated(value + (1 if value >= 0 else -1), 2)
    return f"{value} {unit}"


def _truncated(value: int, divisor: int) -> int:
    """``value / divisor`` as C divides (toward zero)."""
    quotient = abs(value) // divisor
    return quotient if value >= 0 else -quotient


def _array_to_string(array: Any, separator: str, null: str | None = None) -> Any:
    """``array_to_string``: an ARRAY(subquery)'s elements joined (NULLs left out, or
    shown as ``null``); any other value (text) unchanged."""
    if not isinstance(array, str) or not array.startswith(_TEXT_ARRAY):
        return array
    items = json.loads(array[len(_TEXT_ARRAY) :])
    shown = [str(v) if v is not None else null for v in items]
    return separator.join(v for v in shown if v is not None)


def _json_object(*pairs: Any) -> str:
    """``json_build_object(k1, v1, ...)``'s text."""
    return json.dumps({str(k): v for k, v in zip(pairs[::2], pairs[1::2], strict=False)})


def _array_json(array: Any) -> str:
    """An array (a parameter bound by :func:`_param`, an array_agg's or an ARRAY
    subquery's result, or PostgreSQL's text of one) as the JSON list json_each reads;
    NULL has no elements."""
    for marker in (_ARRAY, _TEXT_ARRAY):
        if isinstance(array, str) and array.startswith(marker):
            return array[len(marker) :]
    if isinstance(array, str):
        items = [int(v) if v is not None and v.isdigit() else v for v in parse_array_text(array)]
        return json.dumps(items)
    return "[]"


def _elements(array: Any) -> list[Any]:
    """The elements of an array (as :func:`_array_json` reads one) or of an
    ``int2vector``'s text (``indkey``: numbers separated by spaces)."""
    if isinstance(array, str) and array[:1] not in ("{", _ARRAY[0], _TEXT_ARRAY[0]):
        return [int(v) if v.lstrip("-").isdigit() else v for v in array.split()]
    items = json.loads(_array_json(array))
    return items if isinstance(items, list) else []


def _subscript(array: Any, index: Any) -> Any:
    """``array[index]``, 1-based (an ``int2vector``'s 0-based, as in PostgreSQL); NULL
    outside it."""
    if array is None or index is None:
        return None
    items = _elements(array)
    vector = isinstance(array, str) and array[:1] not in ("{", _ARRAY[0], _TEXT_ARRAY[0])
    at = int(index) - (0 if vector else 1)
    return items[at] if 0 <= at < len(items) else None


def _param(value: Any) -> Any:
    """A parameter as SQLite binds it: an array as array_agg's result, a value SQLite has
    no type for as its text."""
    if isinstance(value, Array):
        return _ARRAY + json.dumps([_json_item(v) for v in value])
    if isinstance(value, bool):
        return int(value)
    if value is None or isinstance(value, int | float | str | bytes):
        return value
    return format_value(value)


def _quote_literal(value: Any) -> str | None:
    """``quote_literal``: the value's text as a string literal (asyncpg's copy_from_query
    quotes its arguments so), ``E'...'`` with its backslashes doubled if it has any."""
    if value is None:
        return None
    found = _value(value)
    if isinstance(found, list):
        found = Array(tuple(found), ColumnType(Kind.STRING))
    text = format_value(found).replace("'", "''")
    if "\\" in text:
        return "E'" + text.replace("\\", "\\\\") + "'"
    return f"'{text}'"


def _json_item(value: Any) -> Any:
    return value if value is None or isinstance(value, int | float | str) else str(value)


def _value(value: Any) -> Any:
    for marker in (_ARRAY, _TEXT_ARRAY):
        if isinstance(value, str) and value.startswith(marker):
            items = json.loads(value[len(marker) :])
            kind = Kind.INT if items and all(isinstance(v, int) for v in items) else Kind.STRING
            return Array(tuple(items), ColumnType(kind))
    return value


def _divide(a: Any, b: Any) -> Any:
    """``a / b`` as the SQL layer divides (SQLite's truncates integers and gives NULL
    for a zero divisor): two integers' quotient is not truncated (a DECIMAL, made one
    where it is a result column: :func:`_static_oid`), 22012 for a zero divisor.
    NB: a quotient that is no integer is a float while SQLite computes and compares
    with it (past 16 digits it is not the SQL layer's DECIMAL)."""
    if a is None or b is None:
        return None
    try:
        if isinstance(a, float) or isinstance(b, float):
            return float(a) / float(b)
        quotient = DECIMAL_QUOTIENT.divide(decimal.Decimal(a), decimal.Decimal(b))
        return int(quotient) if quotient == quotient.to_integral_value() else float(quotient)
    except (ZeroDivisionError, decimal.DivisionByZero, decimal.InvalidOperation):
        raise SQLError("22012", "division by zero") from None


def _bool(value: Any) -> bool | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip().lower() in ("t", "true", "yes", "y", "on", "1")
    return bool(value)


def _indexdef(db: sqlite3.Connection, oid: int, column: int = 0) -> str | None:
    """``pg_get_indexdef(oid)``, or with ``column`` > 0 the name of that key column
    (pgjdbc's getIndexInfo asks so)."""
    if column:
        names = _key_names(db, oid).split(", ")
        return names[column - 1] if 0 < column <= len(names) else None
    row = db.execute(
        "SELECT i.relname, t.relname, x.indisunique, x.indnkeyatts, x.indoption, x.indpred "
        "FROM pg_index x "
        "JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
        "WHERE x.indexrelid = ?",
        (oid,),
    ).fetchone()
    if row is None:
        return None
    names = _key_names(db, oid).split(", ")
    options = str(row[4] or "").split()
    for n, option in enumerate(options[: row[3]]):
        if int(option) & 1:
            names[n] += " DESC"
    keys, included = names[: row[3]], names[row[3] :]
    unique = "UNIQUE " if _bool(row[2]) else ""
    text = f"CREATE {unique}INDEX {row[0]} ON public.{row[1]} USING btree ({', '.join(keys)})"
    text += f" INCLUDE ({', '.join(included)})" if included else ""
    return text + (f" WHERE ({row[5]})" if row[5] else "")  # NB: a partial index's predicate


def _constraintdef(db: sqlite3.Connection, oid: int) -> str | None:
    found = db.execute("SELECT def FROM feedkv_constraint_defs WHERE oid = ?", (oid,)).fetchone()
    if found is not None:
        return str(found[0])
    return f"PRIMARY KEY ({_key_names(db, oid)})"


def _key_names(db: sqlite3.Connection, index_oid: int) -> str:
    rows = db.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = ? ORDER BY attnum", (index_oid,)
    )
    return ", ".join(name for (name,) in rows)


sqlite3.register_converter("BOOLEAN", lambda raw: raw not in (b"0", b""))
sqlite3.register_converter("TIMESTAMPTZ", lambda raw: datetime.datetime.fromisoformat(raw.decode()))


def run_catalog_query(
    text: str,
    params: Sequence[Any],
    schema: Sequence[tuple[DatabaseDescriptor, list[TableDescriptor]]],
    *,
    database: str,
    user: str,
    version: str,
    others: Sequence[ViewDescriptor | SequenceDescriptor] = (),
    view_types: Mapping[int, Sequence[ColumnType | None]] | None = None,
    users: Sequence[User] = (),
    grants: Sequence[tuple[int, str, frozenset[str]]] = (),
    memberships: Sequence[tuple[str, str]] = (),
    comments: Sequence[tuple[int, str, int, str]] = (),
    types: Sequence[TypeDescriptor] = (),
    cursors: Sequence[CursorRow] = (),
    prepared: Sequence[PreparedRow] = (),
) -> Result:
    """Run ``text`` (a query that :func:`reads_catalog`) over the catalog of
    ``database`` built from ``schema`` (and ``others``, its views and sequences;
    ``view_types``, its views' column types by view id, as their descriptions give them;
    ``users``, the cluster's users: none given, root and ``user``; ``grants``, every
    ``(object id, grantee, privileges)``, shown as ``relacl`` and ``datacl``;
    ``memberships``, every ``(role, member)`` but admin's; ``comments``, every
    ``(object id, kind, sub id, text)`` of :mod:`feedkv.sql.comments`, shown in
    ``pg_description`` and by ``obj_description`` and its kin; ``types``, its enums, in
    ``pg_type`` and ``pg_enum``; ``cursors``, the session's SQL cursors, in ``pg_cursors``;
    ``prepared``, its prepared statements, in ``pg_prepared_statements``)."""
    translated = _translated(text, database, user, version)
    if translated.empty is not None:
        columns = translated.empty
        static = translated.oids if len(translated.oids) == len(columns) else ()
        wire = tuple(WireType(oid or OID.TEXT) for oid in static)
        return CatalogResult(columns, [], "SELECT 0", wire_types=wire)
    if not users:
        users = [User(ROOT, admin=True)] + ([] if user == ROOT else [User(user, admin=False)])
    db, names, enums = _build(schema, database, users, memberships, types)
    for other in others:
        _add_other(db, database, other, (view_types or {}).get(other.id, ()), enums)
        names[other.name] = names[f"public.{other.name}"] = other.id
    admin = _is_admin(user, users, memberships)
    _add_acls(db, schema, grants if admin else [g for g in grants if g[1] == user])
    described = _descriptions(schema, comments)
    _insert(db, "pg_description", [(*k, v) for k, v in described.items() if k[1] == _PG_CLASS])
    _insert(db, "pg_cursors", [(*row[:5], row[5].isoformat()) for row in cursors])
    _insert(db, "pg_prepared_statements", [_prepared_row(row) for row in prepared])
    db.commit()
    values = {"database": database, "user": user, "version": version}
    try:
        raised: list[SQLError] = []
        views = {o.id: o.query for o in others if isinstance(o, ViewDescriptor)}
        printers = _functions(db, names, values, raised, views)
        _comment_functions(db, described)
        try:
            cursor = db.execute(translated.sql, tuple(_param(p) for p in params))
            fetched = cursor.fetchall()
        except sqlite3.Error as exc:
            if raised:
                raise raised[0] from None
            raise SQLError("0A000", f"this catalog query is not supported: {exc}") from None
        columns = tuple(d[0] for d in cursor.description or ())
        static = translated.oids if len(translated.oids) == len(columns) else (None,) * len(columns)
        rows = [
            tuple(_typed_value(v, static[n], printers) for n, v in enumerate(row))
            for row in fetched
        ]
        declared = _declared_types(db, translated)
    finally:
        db.close()
    if OID.BOOL in translated.elements.values():
        rows = [_bool_arrays(row, translated.elements) for row in rows]
    wire = _wire_types(rows, static, declared, translated.arrays, translated.elements)
    known = tuple(
        _declared_column_type(oid, n in translated.arrays) for n, oid in enumerate(declared)
    )
    verb = text.lstrip().split(None, 1)[0].upper() if text.strip() else "SELECT"
    return CatalogResult(columns, rows, f"{verb} {len(rows)}", types=known, wire_types=wire)
