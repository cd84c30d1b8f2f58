"""The statements about schema and the cluster: databases, tables and their columns,
what SHOW shows of them, ranges (SPLIT AT, SHOW RANGES) and users. Each handler takes
the statement's :class:`~feedkv.sql.execution.Execution` and returns its result.

A change to a table's schema waits for the leases on its current version and publishes
the next one (:meth:`Execution.changing`, :meth:`Execution.publish`; see
:mod:`feedkv.sql.leases`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from sqlglot import exp

from feedkv.errors import (
    InvalidArgumentError,
    InvariantViolation,
    SQLError,
)
from feedkv.kv.db import RangeInfo
from feedkv.security.scram import make_verifier
from feedkv.sql import (
    catalog,
    comments,
    ddl_constraints,
    schema_jobs,
    schema_listing,
    sequences,
    views,
)
from feedkv.sql import statements as st
from feedkv.sql.arrays import Array
from feedkv.sql.computed import check_computed, fill_computed, referencing, renamed_in
from feedkv.sql.describe import describe, type_of
from feedkv.sql.descriptor import (
    PRIMARY_FAMILY,
    ROWID,
    Column,
    DatabaseDescriptor,
    Family,
    Index,
    NamedRelation,
    SequenceDescriptor,
    TableDescriptor,
    TypeDescriptor,
    ViewDescriptor,
)
from feedkv.sql.enums import first_codes
from feedkv.sql.execution import ROW_IDS, Execution, Result
from feedkv.sql.expr import Scope, compile_expr
from feedkv.sql.indexes import index_span, table_indexes_span
from feedkv.sql.parser import parse_expression, unannotated_default
from feedkv.sql.partitions import SHOW_COLUMNS as PARTITION_COLUMNS
from feedkv.sql.partitions import partitions_of, show_rows
from feedkv.sql.plan import column_default, table_scope
from feedkv.sql.primary_key_change import add_primary_key
from feedkv.sql.query import query
from feedkv.sql.relation import column_types
from feedkv.sql.row_codec import (
    encode_family_value,
    family_key,
    index_prefix,
    row_kvs,
    row_prefix,
    table_prefix,
    table_span,
)
from feedkv.sql.type_conversion import Conversion, automatic, conversion
from feedkv.sql.types import (
    TYPE_NAMES,
    ColumnType,
    Kind,
    coerce,
    format_value,
    from_key,
)
from feedkv.sql.volatility import refuse_zoned_casts
from feedkv.storage.gc import DEFAULT_GC_TTL_NS
from feedkv.util.encoding import Direction, decode_value
from feedkv.util.keys import check_key
from feedkv.util.units import counted, parse_duration_ns

__all__ = ["HANDLERS"]


def create_database(ex: Execution, s: st.CreateDatabase) -> Result:
    ex.require_admin("CREATE DATABASE")
    txn = ex.write_txn
    try:
        catalog.database_by_name(txn, s.name)
    except SQLError:
        catalog.put_database(txn, DatabaseDescriptor(catalog.allocate_id(txn), s.name))
        return Result(tag="CREATE DATABASE")
    if s.if_not_exists:
        return Result(tag="CREATE DATABASE")
    raise SQLError("42P04", f'database "{s.name}" already exists')


def drop_database(ex: Execution, s: st.DropDatabase) -> Result:
    txn = ex.write_txn
    try:
        database = catalog.database_by_name(txn, s.name)
    except SQLError:
        if s.if_exists:
            return Result(tag="DROP DATABASE")
        raise
    ex.require_privilege(database, "DROP")
    tables = catalog.list_tables(txn, database)
    if tables and not s.cascade:
        raise SQLError(
            "2BP01",
            f"database {s.name!r} is not empty and CASCADE was not specified "
            f"({len(tables)} tables)",
        )
    for view in catalog.list_views(txn, database):
        _drop_relation(ex, view, cascade=True)
    for sequence in catalog.list_sequences(txn, database):
        _drop_sequence(ex, sequence)
    for table in tables:
        _drop_relation(ex, table, cascade=True)
    catalog.remove_name(txn, 0, database.name)
    catalog.remove_descriptor(txn, database.id)
    comments.forget(txn, database.id)
    ex.session.forget(database=database.name)
    return Result(tag="DROP DATABASE")


_SHOW_DATABASES_COLUMNS = (
    "database_name",
    "owner",
    "primary_region",
    "secondary_region",
    "regions",
    "survival_goal",
)


def show_databases(ex: Execution, s: st.ShowDatabases) -> Result:
    """Every database, with CockroachDB's columns: feedkv has no regions, so the
    region columns are NULL and ``regions`` empty."""
    no_regions = Array((), ColumnType(Kind.STRING))
    rows = [
        (d.name, catalog.database_owner(d), None, None, no_regions, None)
        for d in catalog.list_databases(ex.read_source)
    ]
    rows.sort()
    return Result(_SHOW_DATABASES_COLUMNS, rows, f"SHOW {len(rows)}")


def show_users(ex: Execution, s: st.ShowUsers) -> Result:
    """``SHOW USERS`` (``SHOW ROLES``), as CockroachDB lists them: the ``admin`` role
    and every user, with the roles each is a member of directly (an admin: ``admin``);
    the only option feedkv keeps is ``NOLOGIN`` (a role made by CREATE ROLE)."""

    def roles(*names: str) -> Array:
        return Array(names, ColumnType(Kind.STRING))

    member_of: dict[str, list[str]] = {}
    for role, member in catalog.list_memberships(ex.read_source):
        member_of.setdefault(member, []).append(role)
    rows = [(catalog.ADMIN_ROLE, "", roles())]
    for user in catalog.list_users(ex.read_source):
        if user.name != catalog.ADMIN_ROLE:
            direct = [catalog.ADMIN_ROLE] if user.admin else []
            options = "" if user.can_login else "NOLOGIN"
            member_roles = roles(*sorted(direct + member_of.get(user.name, [])))
            rows.append((user.name, options, member_roles))
    rows.sort(key=lambda row: row[0])
    return Result(("username", "options", "member_of"), rows, f"SHOW {len(rows)}")


def create_table(ex: Execution, s: st.CreateTable) -> Result:
    database = ex.database(s.table.database)
    ex.require_privilege(database, "CREATE")
    notices = _storage_param_notices(s.storage_params)
    txn = ex.write_txn
    if catalog.name_taken(txn, database, s.table.name):
        if s.if_not_exists:
            return Result(tag="CREATE TABLE")
        raise SQLError("42P07", f'relation "{s.table.name}" already exists')
    identities = [spec for spec in s.columns if spec.identity is not None]
    if identities:
        columns = [_with_identity_sequence(ex, s.table, spec) for spec in s.columns]
        s = replace(s, columns=tuple(columns))
    desc = _table_descriptor(ex, s, catalog.allocate_id(txn), database)
    desc = ddl_constraints.with_constraints(ex, desc, s.indexes, s.checks, s.foreign_keys)
    catalog.put_table(txn, desc)
    ex.grant_creator(desc.id)
    ex.on_commit(lambda: ex.session.db.split(table_prefix(desc.id)))
    return Result(tag="CREATE TABLE", notices=notices)


# PostgreSQL's storage parameters of a table, which mean nothing to feedkv's storage: as
# CockroachDB does, they are accepted with a notice; any other name is refused.
_IGNORED_STORAGE_PARAMS = frozenset(
    {
        "fillfactor",
        "autovacuum_enabled",
        "autovacuum_vacuum_threshold",
        "autovacuum_vacuum_scale_factor",
        "autovacuum_analyze_threshold",
        "autovacuum_analyze_scale_factor",
        "toast_tuple_target",
        "parallel_workers",
        "user_catalog_table",
    }
)


def _with_identity_sequence(
    ex: Execution, table: st.TableName, spec: st.ColumnSpec
) -> st.ColumnSpec:
    """``spec``, if an identity column, with its sequence made (``<table>_<column>_seq``,
    as CockroachDB names it) and its DEFAULT the sequence's next value; NOT NULL."""
    identity = spec.identity
    if identity is None:
        return spec
    if spec.type.kind is not Kind.INT:
        raise SQLError(
            "22023",
            f"identity column type must be INT, INT2, INT4 or INT8, not {spec.type.sql()} "
            f'(column "{spec.name}")',
        )
    if spec.default is not None:
        raise SQLError(
            "42601",
            f'multiple default values specified for column "{spec.name}" of table "{table.name}"',
        )
    if spec.computed is not None:
        raise SQLError("42601", f'both generated and identity specified for column "{spec.name}"')
    name = f"{table.name}_{spec.name}_seq"
    # NB: the DEFAULT names the sequence's database, which a session in another one
    # would not find by the bare name (or find another sequence by it)
    database = ex.database(table.database).name
    settings = identity.sequence
    sequence = st.CreateSequence(
        "",
        st.TableName(name, database),
        settings.increment,
        settings.min_value,
        settings.max_value,
        settings.start,
    )
    create_sequence(ex, sequence)
    text = sequences.sequence_reference(database, name).replace("'", "''")
    return replace(spec, default=parse_expression(f"nextval('{text}')"), nullable=False)


def _storage_param_notices(names: tuple[str, ...]) -> tuple[str, ...]:
    for name in names:
        if name not in _IGNORED_STORAGE_PARAMS:
            raise SQLError("22023", f'invalid storage parameter "{name}"')
    return tuple(f'storage parameter "{name}" is ignored' for name in names)


def maintenance(ex: Execution, s: st.Maintenance) -> Result:
    """VACUUM and ANALYZE: nothing to do, once the tables are known to exist."""
    if s.action == "VACUUM" and not ex.autocommit:
        raise SQLError("25001", "VACUUM cannot run inside a transaction block")
    for name in s.tables:
        ex.table(name)
    why = (
        "MVCC garbage collection reclaims space"
        if s.action == "VACUUM"
        else "no table statistics are kept"
    )
    return Result(tag=s.action, notices=(f"{s.action} does nothing in feedkv: {why}",))


def _table_descriptor(
    ex: Execution, s: st.CreateTable, table_id: int, database: DatabaseDescriptor
) -> TableDescriptor:
    columns: list[Column] = []
    seen: set[str] = set()
    key_names = list(s.primary_key or ())
    for spec in s.columns:
        if spec.name in seen:
            raise SQLError("42701", f'column "{spec.name}" specified more than once')
        seen.add(spec.name)
        if spec.primary_key:
            if s.primary_key is not None or key_names:
                raise SQLError("42P16", f'multiple primary keys for table "{s.table.name}"')
            key_names = [spec.name]
    for spec in s.columns:
        columns.append(_column(ex, spec, len(columns) + 1, key=spec.name in key_names))
    if not key_names:
        columns.append(
            Column(
                len(columns) + 1,
                ROWID,
                ColumnType(Kind.INT),
                nullable=False,
                default="unique_rowid()",
                hidden=True,
            )
        )
        key_names = [ROWID]
    by_name = {c.name: c for c in columns}
    for name in key_names:
        column = by_name.get(name)
        if column is None:
            raise SQLError("42703", f'column "{name}" named in the primary key does not exist')
        if column.type.kind in (Kind.JSONB, Kind.INTERVAL, Kind.ARRAY):
            raise SQLError(
                "0A000",
                f'column "{name}" of type {column.type.kind.value} cannot be in a primary key '
                "(JSONB, INTERVAL and ARRAY values cannot be part of a key)",
            )
    if len(set(key_names)) != len(key_names):
        raise SQLError("42701", "a column appears twice in the primary key")
    families = _families(ex, s, columns, by_name)
    desc = TableDescriptor(
        id=table_id,
        name=s.table.name,
        database_id=database.id,
        columns=tuple(columns),
        primary_key=tuple(by_name[n].id for n in key_names),
        families=tuple(families),
        next_column_id=len(columns) + 1,
        next_family_id=len(families),
        primary_descending=s.primary_descending if s.primary_key is not None else (),
    )
    _check_computed_types(desc)
    if s.partitioning is not None and desc.primary_descending:
        raise SQLError("0A000", "PARTITION BY a primary key with DESC columns is not supported")
    if s.partitioning is not None:
        desc = replace(desc, partitions=partitions_of(desc, s.partitioning, ex.constant))
    return desc


def _column(ex: Execution, spec: st.ColumnSpec, column_id: int, *, key: bool) -> Column:
    if spec.type.kind is Kind.ENUM:
        spec = replace(spec, type=_enum_type(ex, spec.type))
    element = spec.type.element
    if spec.type.kind is Kind.ARRAY and element is not None and element.kind is Kind.ENUM:
        spec = replace(spec, type=replace(spec.type, element=_enum_type(ex, element)))
    default = None
    if spec.default is not None:
        if any(True for _ in spec.default.find_all(exp.Column)):
            raise SQLError("0A000", f'default of column "{spec.name}" cannot refer to columns')
        # NB: 0:::INT8, as SHOW CREATE TABLE shows it, is stored 0 (annotated_default)
        tree = unannotated_default(spec.default, spec.type)
        calls = _sequence_calls(tree)
        if calls:  # NB: a copy: the statement's tree may be cached
            tree = tree.copy()
            for call in _sequence_calls(tree):
                _resolve_sequence_default(ex, call, spec)
        else:  # NB: evaluating nextval() would hand out a value
            value = ex.constant(tree)
            coerce(value, spec.type, spec.name)  # a default of the wrong type fails now
        # NB: function names as CockroachDB's SHOW CREATE TABLE prints them: unique_rowid()
        default = tree.sql(dialect="postgres", normalize_functions="lower")
    computed = (
        None
        if spec.computed is None
        # NB: function names as CockroachDB's SHOW CREATE TABLE prints them: lower(s)
        else spec.computed.sql(dialect="postgres", normalize_functions="lower")
    )
    identity = spec.identity
    return Column(
        column_id,
        spec.name,
        spec.type,
        spec.nullable and not key,
        default,
        hidden=spec.hidden,
        computed=computed,
        virtual=spec.virtual,
        identity=None if identity is None else ("ALWAYS" if identity.always else "BY DEFAULT"),
        identity_options="" if identity is None else identity.options,
    )


def _enum_type(ex: Execution, ctype: ColumnType) -> ColumnType:
    """A column type naming a user-defined type, with that enum's labels (a column
    keeps them: the type cannot change while a column uses it)."""
    name = ctype.type_name or ""
    found = catalog.type_by_name(ex.read_source, ex.database(None), name)
    if found is None:
        raise SQLError("42704", f'type "{name}" does not exist')
    return found.column_type()


def create_enum(ex: Execution, s: st.CreateEnum) -> Result:
    database = ex.database(s.name.database)
    ex.require_privilege(database, "CREATE")
    txn = ex.write_txn
    if catalog.name_taken(txn, database, s.name.name):
        if s.if_not_exists:
            return Result(tag="CREATE TYPE")
        raise SQLError("42710", f'type "{s.name.name}" already exists')
    if s.name.name.upper() in TYPE_NAMES:
        raise SQLError("42710", f'type "{s.name.name}" already exists (a built-in type)')
    codes = first_codes(len(s.labels))
    catalog.put_type(
        txn, TypeDescriptor(catalog.allocate_id(txn), s.name.name, database.id, s.labels, codes)
    )
    return Result(tag="CREATE TYPE")


def drop_type(ex: Execution, s: st.DropType) -> Result:
    txn = ex.write_txn
    for name in s.names:
        database = ex.database(name.database)
        found = catalog.type_by_name(txn, database, name.name)
        if found is None:
            if s.if_exists:
                continue
            raise SQLError("42704", f'type "{name.name}" does not exist')
        ex.require_privilege(database, "CREATE")
        for table in catalog.list_tables(txn, database):
            for column in table.columns:
                if column.type.kind is Kind.ENUM and column.type.type_name == found.name:
                    raise SQLError(
                        "2BP01",
                        f'cannot drop type "{found.name}": column "{column.name}" of table '
                        f'"{table.name}" uses it',
                    )
        catalog.remove_name(txn, database.id, found.name)
        catalog.remove_descriptor(txn, found.id)
    return Result(tag="DROP TYPE")


def _sequence_calls(node: exp.Expr) -> list[exp.Anonymous]:
    return [
        call
        for call in node.find_all(exp.Anonymous)
        if str(call.this).lower() in sequences.FUNCTIONS
    ]


_SEQUENCE_NAME_TYPES = frozenset({"REGCLASS", "TEXT", "VARCHAR"})


def _resolve_sequence_default(ex: Execution, call: exp.Anonymous, spec: st.ColumnSpec) -> None:
    """A DEFAULT nextval('s') (or CockroachDB's ``nextval('public.s'::REGCLASS)``) names
    a sequence that exists, with a string constant; ``call`` is rewritten to name it by
    :func:`~feedkv.sql.sequences.sequence_reference`, resolved now, as CockroachDB
    keeps a reference to the sequence: an INSERT from a session in another database
    takes its values from the same sequence."""
    args = call.expressions
    if str(call.this).lower() != "nextval" or len(args) != 1:
        raise SQLError(
            "0A000", f"default of column \"{spec.name}\" may call only nextval('sequence')"
        )
    # NB: the name typed (CockroachDB's 'public.s'::REGCLASS, or 's':::STRING as its
    # dumps annotate it) is the name
    if isinstance(args[0], exp.Cast) and args[0].to.sql().upper() in _SEQUENCE_NAME_TYPES:
        args[0].replace(args[0].this)
        args = call.expressions
    if not isinstance(args[0], exp.Literal) or not args[0].is_string:
        raise SQLError(
            "0A000", f'default of column "{spec.name}": nextval() takes the sequence\'s name'
        )
    if spec.type.kind not in (Kind.INT, Kind.DECIMAL, Kind.FLOAT):
        raise SQLError(
            "42804",
            f'default of column "{spec.name}" is an INT8 (nextval) but the column is '
            f"{spec.type.sql()}",
        )
    found = sequences.sequence_named(ex.session, ex.read_source, args[0].name)
    home = catalog.get_descriptor(ex.read_source, found.database_id)
    if not isinstance(home, DatabaseDescriptor):
        raise InvariantViolation(f"sequence {found.name!r} has no database {found.database_id}")
    args[0].replace(exp.Literal.string(sequences.sequence_reference(home.name, found.name)))


def _default_sequence_ids(ex: Execution, column: Column, database: DatabaseDescriptor) -> list[int]:
    """The sequences a column's DEFAULT calls nextval() on; a name without a database
    is one of ``database`` (its table's)."""
    if column.default is None or "nextval" not in column.default.lower():
        return []
    found = []
    for call in _sequence_calls(parse_expression(column.default)):
        try:
            named, name = sequences.parse_sequence_name(
                call.expressions[0].name if call.expressions else ""
            )
            home = database if named is None else ex.session.resolve_database(ex.read_source, named)
            found.append(catalog.sequence_by_name(ex.read_source, home, name).id)
        except SQLError:
            continue
    return found


def _default_user(
    ex: Execution,
    sequence: SequenceDescriptor,
    *,
    besides: int = 0,
    besides_column: tuple[int, int] | None = None,
) -> tuple[TableDescriptor, Column] | None:
    """A column, of any table but ``besides`` in any database and other than
    ``besides_column`` (table id, column id), whose DEFAULT calls nextval() on
    ``sequence``, and its table; None if there is none."""
    txn = ex.write_txn
    for database in catalog.list_databases(txn):
        for table in catalog.list_tables(txn, database):
            if table.id == besides:
                continue
            for column in table.columns:
                if (table.id, column.id) == besides_column:
                    continue
                if sequence.id in _default_sequence_ids(ex, column, database):
                    return table, column
    return None


def _owned_sequences(
    ex: Execution, desc: TableDescriptor, column_id: int | None = None
) -> list[SequenceDescriptor]:
    """The sequences ``desc``'s identity columns own and those OWNED BY a column of it
    (which go with the table), or only those OWNED BY its column ``column_id``."""
    txn = ex.write_txn
    database = catalog.get_descriptor(txn, desc.database_id)
    if not isinstance(database, DatabaseDescriptor):
        return []
    owned = [
        sequence
        for sequence in catalog.list_sequences(txn, database)
        if sequence.owner is not None
        and sequence.owner[0] == desc.id
        and column_id in (None, sequence.owner[1])
    ]
    if column_id is not None:
        return owned
    identities = [
        sequence
        for column in desc.columns
        if column.identity is not None
        for sequence_id in _default_sequence_ids(ex, column, database)
        if isinstance(sequence := catalog.get_descriptor(txn, sequence_id), SequenceDescriptor)
    ]
    return identities + [s for s in owned if s.id not in {i.id for i in identities}]


def _families(
    ex: Execution, s: st.CreateTable, columns: list[Column], by_name: dict[str, Column]
) -> list[Family]:
    members: dict[str, list[int]] = {}
    placed: dict[int, str] = {}
    for n, family in enumerate(s.families):
        name = family.name or f"fam_{n}_" + "_".join(family.columns)
        if name in members:
            raise SQLError("42701", f'family "{name}" specified more than once')
        members[name] = []
        for column_name in family.columns:
            column = by_name.get(column_name)
            if column is None:
                raise SQLError("42703", f'column "{column_name}" in family "{name}" does not exist')
            if column.id in placed:
                raise SQLError(
                    "42P16",
                    f'column "{column_name}" is in both family "{placed[column.id]}" and "{name}"',
                )
            placed[column.id] = name
            members[name].append(column.id)

    def place(spec: st.ColumnSpec, family: str) -> None:
        column = by_name[spec.name]
        if column.id in placed:
            raise SQLError("42P16", f'column "{spec.name}" is in more than one family')
        placed[column.id] = family
        members.setdefault(family, []).append(column.id)

    for spec in s.columns:
        if spec.family is not None:
            place(spec, spec.family)
    if not members:
        members[PRIMARY_FAMILY] = []
    first = next(iter(members))
    for spec in s.columns:
        if spec.family is None and spec.create_family:  # a family of its own
            place(spec, f"fam_{len(members)}_{spec.name}")
    for column in columns:
        if column.id not in placed and not column.virtual:  # NB: nothing of it is stored
            members[first].append(column.id)
    return [Family(i, name, tuple(ids)) for i, (name, ids) in enumerate(members.items())]


def drop_table(ex: Execution, s: st.DropTable) -> Result:
    for name in s.tables:
        try:
            # NB: an offline table may be dropped: one whose import died stays offline
            desc = ex.table(name, "DROP", offline_ok=True)
        except SQLError as exc:
            if s.if_exists and exc.code in ("42P01", "3D000"):
                continue
            raise
        _drop_relation(ex, desc, cascade=s.cascade)
        if isinstance(desc, TableDescriptor):
            _record_jobs(ex, "DROP TABLE", desc, s.text)
    return Result(tag="DROP TABLE")


def _record_jobs(ex: Execution, verb: str, desc: TableDescriptor, text: str) -> None:
    """The SCHEMA CHANGE and SCHEMA CHANGE GC jobs SHOW JOBS lists for ``verb`` (DROP
    TABLE, TRUNCATE TABLE) on ``desc``, as CockroachDB's (:mod:`schema_jobs`)."""
    database = catalog.get_descriptor(ex.write_txn, desc.database_id)
    qualified = f"{database.name}.public.{desc.name}" if database is not None else desc.name
    schema_jobs.record_drop(
        ex.write_txn,
        (ROW_IDS.next(), ROW_IDS.next()),
        f"{verb} {qualified}",
        text,
        ex.session.user,
        now_ns=ex.session.db.now().wall,
        gc_ttl_ns=catalog.gc_ttl_of(ex.write_txn, desc.id),
    )


def _drop_relation(ex: Execution, desc: TableDescriptor | ViewDescriptor, *, cascade: bool) -> None:
    """Drop a table or a view; with ``cascade`` the views that read it first, else
    2BP01 if there are any."""
    for dependent in _dependents(ex, desc.id):
        if not cascade:
            raise SQLError(
                "2BP01",
                f'cannot drop relation "{desc.name}" because view "{dependent.name}" '
                "depends on it (drop it first, or use CASCADE)",
            )
        if catalog.get_descriptor(ex.write_txn, dependent.id) is not None:
            _drop_relation(ex, dependent, cascade=True)
    if isinstance(desc, ViewDescriptor):
        catalog.remove_name(ex.write_txn, desc.database_id, desc.name)
        catalog.remove_descriptor(ex.write_txn, desc.id)
        return
    _drop_table(ex, desc, cascade=cascade)


def drop_index(ex: Execution, s: st.DropIndex) -> Result:
    """DROP INDEX (:func:`~feedkv.sql.ddl_constraints.index_to_drop`), but not while a
    view names the index (``t@i``): 2BP01, or with CASCADE those views dropped first, as
    CockroachDB (the view would read an index that is gone)."""
    found = ddl_constraints.index_to_drop(ex, s)
    if found is None:
        return Result(tag="DROP INDEX")
    desc, index = found
    for view in _index_readers(ex, desc, index):
        if not s.cascade:
            raise SQLError(
                "2BP01",
                f'cannot drop index "{index.name}" because view "{view.name}" depends on it',
            )
        if catalog.get_descriptor(ex.write_txn, view.id) is not None:
            _drop_relation(ex, view, cascade=True)
    return ddl_constraints.drop_found_index(ex, desc, index)


def _index_readers(ex: Execution, desc: TableDescriptor, index: Index) -> list[ViewDescriptor]:
    """The views reading table ``desc`` that name its ``index``."""
    home = catalog.get_descriptor(ex.write_txn, desc.database_id)
    readers = []
    for view in _dependents(ex, desc.id):
        database = catalog.get_descriptor(ex.write_txn, view.database_id)
        if home is None or database is None:
            continue
        named = views.indexes_read(views.view_query(view.query, database.name))
        if any(
            (table.name, table.database, name) == (desc.name, home.name, index.name)
            for table, name in named
        ):
            readers.append(view)
    return readers


def _dependents(ex: Execution, descriptor_id: int) -> list[ViewDescriptor]:
    """The views (of any database) that read the table or view ``descriptor_id``."""
    reader = ex.write_txn
    return [
        view
        for database in catalog.list_databases(reader)
        for view in catalog.list_views(reader, database)
        if descriptor_id in view.depends_on
    ]


def _refuse_if_read_by_views(
    ex: Execution, desc: TableDescriptor | ViewDescriptor, what: str
) -> None:
    dependents = _dependents(ex, desc.id)
    if dependents:
        raise SQLError("2BP01", f'cannot {what} because view "{dependents[0].name}" depends on it')


def _drop_table(ex: Execution, desc: TableDescriptor, *, cascade: bool = False) -> None:
    owned = _owned_sequences(ex, desc)
    for sequence in owned:
        user = _default_user(ex, sequence, besides=desc.id)
        if user is None:
            continue
        table, column = user
        detail = (
            f'The default of column "{column.name}" of table "{table.name}" uses sequence '
            f'"{sequence.name}".'
        )
        if cascade:  # NB: CockroachDB's CASCADE would drop that DEFAULT; feedkv's does not
            raise SQLError(
                "0A000", f"DROP TABLE {desc.name} CASCADE is not supported", detail=detail
            )
        raise SQLError(
            "2BP01",
            f"cannot drop table {desc.name} because other objects depend on it",
            detail=detail,
        )
    if cascade:
        ddl_constraints.drop_inbound(ex, desc)
    else:
        ddl_constraints.refuse_if_referenced(ex, desc, "drop table")
    ddl_constraints.forget_references(ex, desc)
    indexes = table_indexes_span(desc.id)
    ex.write_txn.delete_range(indexes.start, indexes.end)
    ex.changing(desc)
    ex.publish(desc.bumped(dropped=True))
    txn = ex.write_txn
    span = table_span(desc.id)
    txn.delete_range(span.start, span.end)
    catalog.remove_name(txn, desc.database_id, desc.name)
    comments.forget(txn, desc.id)
    ex.session.forget(table=desc.id)
    for sequence in owned:  # NB: an identity column's sequence goes with it
        _drop_sequence(ex, sequence)


def truncate(ex: Execution, s: st.Truncate) -> Result:
    """``TRUNCATE``: every row goes, and the table's next descriptor version counts the
    truncation, which fails the changefeeds watching it at the truncation's timestamp
    (CockroachDB's TRUNCATE makes a new table under the old name, and its docs say the
    changefeeds watching it fail and a new one must be started); what they emitted
    before stays valid. It needs DROP on each table, as CockroachDB's. A table another
    table's foreign key references goes empty only with that table: listed too, or
    brought in by CASCADE."""
    tables = {}
    for name in s.tables:
        desc = ex.table(name, "DROP")  # NB: as CockroachDB's: it empties the table
        tables[desc.id] = desc
    pending = list(tables.values())
    while pending:
        desc = pending.pop()
        for child_id, _name in desc.referenced_by:
            child = catalog.table_by_id(ex.write_txn, child_id)
            if child_id in tables or child is None or child.dropped:
                continue
            if not s.cascade:
                raise SQLError(
                    "0A000",
                    f'cannot truncate "{desc.name}": it is referenced by foreign key from '
                    f'table "{child.name}" (truncate both, or use CASCADE)',
                )
            ex.require_privilege(child, "DROP")
            tables[child_id] = child
            pending.append(child)
    for desc in tables.values():
        ex.changing(desc)
        ex.publish(desc.bumped(truncations=desc.truncations + 1))
        span = table_span(desc.id)
        ex.write_txn.delete_range(span.start, span.end)
        indexes = table_indexes_span(desc.id)
        ex.write_txn.delete_range(indexes.start, indexes.end)
        _record_jobs(ex, "TRUNCATE TABLE", desc, s.text)
    return Result(tag="TRUNCATE")


def add_column(ex: Execution, s: st.AddColumn) -> Result:
    desc = ex.table(s.table, "CREATE")
    spec = s.column
    if any(c.name == spec.name for c in desc.columns):
        if s.if_not_exists:
            return Result(tag="ALTER TABLE")
        raise SQLError("42701", f'column "{spec.name}" of relation "{desc.name}" already exists')
    # NB: as CockroachDB's: an identity column's sequence is made with it, and the
    # backfill gives each row the sequence's next value
    spec = _with_identity_sequence(ex, s.table, spec)
    column = _column(ex, spec, desc.next_column_id, key=False)
    if not ex.autocommit:
        # NB: as CockroachDB's column mutation: the rest of the transaction writes it but
        # cannot name it; its commit makes it public (Execution.adding)
        column = replace(column, adding=True)
        ex.adding |= {desc.id}
    families = list(desc.families)
    next_family_id = desc.next_family_id
    if spec.family is None:
        target = 0
    else:
        matches = [i for i, f in enumerate(families) if f.name == spec.family]
        if matches and spec.create_family and not spec.family_if_not_exists:
            raise SQLError("42701", f'family "{spec.family}" already exists')
        if not matches and not spec.create_family:
            raise SQLError("42704", f'unknown family "{spec.family}"')  # CockroachDB's text
        if matches:
            target = matches[0]
        else:
            families.append(Family(next_family_id, spec.family, ()))
            next_family_id += 1
            target = len(families) - 1
    if spec.create_family and spec.family is None:
        name = f"fam_{next_family_id}_{spec.name}"
        families.append(Family(next_family_id, name, ()))
        next_family_id += 1
        target = len(families) - 1
    family = families[target]
    if not column.virtual:
        families[target] = replace(family, column_ids=(*family.column_ids, column.id))
    elif spec.family is not None or spec.create_family:
        raise SQLError(
            "42P16", f'virtual computed column "{column.name}" cannot be part of a family'
        )
    new = desc.bumped(
        columns=(*desc.columns, column),
        families=tuple(families),
        next_column_id=desc.next_column_id + 1,
        next_family_id=next_family_id,
    )
    _check_computed_types(new)
    default = column_default(column)
    ex.changing(desc)
    ex.publish(new)
    if column.virtual:  # NB: nothing to write: reads compute it
        if not column.nullable:
            for row, _pairs in ex.rows(desc, table_span(desc.id)):
                computed = {**row, column.id: None}
                fill_computed(new, computed, ex.context)
                if computed[column.id] is None:
                    raise SQLError("23502", f'column "{column.name}" contains null values')
        ex.session.forget(table=desc.id)
        return Result(tag="ALTER TABLE")
    txn = ex.write_txn
    for row, _pairs in ex.rows(desc, table_span(desc.id)):
        if column.computed is not None:
            # NB: the backfill, as CockroachDB's: every row gets its value now
            computed = {**row, column.id: None}
            fill_computed(new, computed, ex.context)
            value = computed[column.id]
        else:
            value = coerce(default((), ex.context), column.type, column.name) if default else None
        if value is None and not column.nullable:
            raise SQLError("23502", f'column "{column.name}" contains null values')
        if value is None:
            continue
        row[column.id] = value
        prefix = row_prefix(new, [row[i] for i in new.primary_key])
        txn.put(
            family_key(prefix, families[target].id),
            encode_family_value(new, families[target], row),
        )
    ex.session.forget(table=desc.id)
    return Result(tag="ALTER TABLE")


def alter_table_actions(ex: Execution, s: st.AlterTableActions) -> Result:
    """Each change in turn, in the statement's transaction: a later one sees what the
    earlier ones did (a computed column may read a column added before it). None:
    ``SET (schema_locked = false)``, which every feedkv table is already."""
    if not s.actions:
        ex.table(s.table, "CREATE")
    handlers: dict[type[st.Statement], Callable[[Execution, Any], Result]] = {
        st.AddColumn: add_column,
        st.AddConstraint: ddl_constraints.add_constraint,
        st.DropColumn: drop_column,
        st.AlterColumn: alter_column,
        st.RenameColumn: rename_column,
    }
    for action in s.actions:
        handlers[type(action)](ex, action)
    return Result(tag="ALTER TABLE")


def drop_column(ex: Execution, s: st.DropColumn) -> Result:
    desc = ex.table(s.table, "CREATE")
    column = desc.find_column(s.column)
    if column is None:
        if s.if_exists:
            return Result(tag="ALTER TABLE")
        raise SQLError("42703", f'column "{s.column}" does not exist in table "{desc.name}"')
    if column.id in desc.primary_key:
        raise SQLError("0A000", f'column "{column.name}" is referenced by the primary key')
    _refuse_if_read_by_views(ex, desc, f'drop column "{column.name}"')
    # As CockroachDB's DROP COLUMN (since v20.2): the indexes that hold the column (in
    # their key or STORING), UNIQUE ones included, and the CHECKs that read it go with
    # it; a UNIQUE index of a table other tables' foreign keys reference still refuses
    # it (one of them may need it)
    referenced = any(child_id != desc.id for child_id, _ in desc.referenced_by)
    gone = [
        i
        for i in desc.indexes
        if not (i.unique and referenced) and (column.id in i.column_ids or column.id in i.storing)
    ]
    kept_checks = tuple(
        c
        for c in desc.checks
        if not any(
            n.name == column.name for n in parse_expression(c.expression).find_all(exp.Column)
        )
    )
    kept_indexes = tuple(i for i in desc.indexes if i not in gone)
    ddl_constraints.refuse_column_use(
        replace(desc, indexes=kept_indexes, checks=kept_checks), column.id, "drop"
    )
    _refuse_if_computed_from(desc, column)
    for sequence in _owned_sequences(ex, desc, column.id):  # OWNED BY it: they go with it
        user = _default_user(ex, sequence, besides_column=(desc.id, column.id))
        if user is not None:
            raise SQLError(
                "2BP01",
                f'cannot drop column "{column.name}" because other objects depend on it',
                detail=f'The default of column "{user[1].name}" of table "{user[0].name}" '
                f'uses sequence "{sequence.name}", which the column owns.',
            )
        _drop_sequence(ex, sequence)
    comments.forget(ex.write_txn, desc.id, "column", column.id)
    if column.virtual:  # NB: nothing of it is stored
        ex.changing(desc)
        ex.publish(
            desc.bumped(
                columns=tuple(c for c in desc.columns if c.id != column.id),
                indexes=kept_indexes,
                checks=kept_checks,
            )
        )
        _drop_index_entries(ex, desc, gone)
        ex.session.forget(table=desc.id)
        return Result(tag="ALTER TABLE")
    family = desc.family_of(column.id)
    remaining = tuple(i for i in family.column_ids if i != column.id)
    families = tuple(
        replace(f, column_ids=remaining) if f.id == family.id else f
        for f in desc.families
        if f.id != family.id or remaining or f.id == 0
    )
    new = desc.bumped(
        columns=tuple(c for c in desc.columns if c.id != column.id),
        families=families,
        indexes=kept_indexes,
        checks=kept_checks,
    )
    ex.changing(desc)
    ex.publish(new)
    _drop_index_entries(ex, desc, gone)
    txn = ex.write_txn
    for row, pairs in ex.rows(desc, table_span(desc.id)):
        prefix = row_prefix(desc, [row[i] for i in desc.primary_key])
        key = family_key(prefix, family.id)
        if key not in pairs:
            continue
        if remaining or family.id == 0:
            value = encode_family_value(new, replace(family, column_ids=remaining), row)
            if value or family.id == 0:
                txn.put(key, value)
            else:
                txn.delete(key)
        else:
            txn.delete(key)
    ex.session.forget(table=desc.id)
    return Result(tag="ALTER TABLE")


def _drop_index_entries(ex: Execution, desc: TableDescriptor, indexes: list[Index]) -> None:
    """Delete the entries of ``indexes`` of ``desc`` (dropped with a column)."""
    for index in indexes:
        span = index_span(desc.id, index.id)
        ex.write_txn.delete_range(span.start, span.end)
        comments.forget(ex.write_txn, desc.id, "index", index.id)


# Kinds whose values convert to one another on assignment: a computed column's
# expression must give a kind of its column's group.
_KIND_GROUPS = {Kind.INT: "number", Kind.FLOAT: "number", Kind.DECIMAL: "number"}


def _check_computed_types(desc: TableDescriptor) -> None:
    """:func:`check_computed`, then CockroachDB's 42804 for a computed column whose
    expression's type (where it follows from the expression) is not its column's."""
    check_computed(desc)
    # NB: every column, those an open transaction is adding too (table_scope leaves
    # them out): one ALTER TABLE may add a column and another computed from it
    scope = Scope(table_name=desc.name)
    for index, column in enumerate(desc.columns):
        scope.add(["", desc.name], column.name, index, column.type)
    for column in desc.computed_columns:
        node = parse_expression(column.computed or "")
        refuse_zoned_casts(node, lambda e: type_of(e, scope), "computed column")
        found = type_of(node, scope)
        if found is None:
            continue
        if _KIND_GROUPS.get(found.kind, found.kind) != _KIND_GROUPS.get(
            column.type.kind, column.type.kind
        ):
            raise SQLError(
                "42804",
                "expected computed column expression to have type "
                f"{_type_name(column.type.kind)}, but '{column.computed}' has type "
                f"{_type_name(found.kind)}",
            )


def _type_name(kind: Kind) -> str:
    """A type as CockroachDB's type-check errors name it (``int``, ``string``)."""
    return {Kind.INT: "int", Kind.STRING: "string"}.get(kind, kind.value.lower())


def _refuse_if_computed_from(desc: TableDescriptor, column: Column) -> None:
    """CockroachDB's error for a change to a column a computed column reads."""
    user = referencing(desc, column)
    if user is not None:
        raise SQLError(
            "42P10", f'column "{column.name}" is referenced by computed column "{user.name}"'
        )


def alter_column(ex: Execution, s: st.AlterColumn) -> Result:
    """ALTER COLUMN: SET / DROP DEFAULT and DROP NOT NULL change the descriptor alone;
    SET NOT NULL first checks every row; TYPE is a change of the kind
    :func:`~feedkv.sql.type_conversion.conversion` names."""
    desc = ex.table(s.table, "CREATE")
    column = desc.find_column(s.column)
    if column is None:
        raise SQLError("42703", f'column "{s.column}" does not exist in table "{desc.name}"')
    if s.new_type is not None:
        _refuse_if_computed_from(desc, column)
        if column.computed is not None:
            raise SQLError("0A000", f'cannot change the type of computed column "{column.name}"')
        return _alter_column_type(ex, desc, column, s.new_type, s.using)
    if s.drop_stored:
        # NB: as CockroachDB: the column keeps its values and becomes a plain one
        if column.computed is None or column.virtual:
            kind = "a stored computed" if column.virtual else "a computed"
            raise SQLError("42611", f'column "{column.name}" is not {kind} column')
        ex.changing(desc)
        changed = replace(column, computed=None)
        ex.publish(
            desc.bumped(columns=tuple(changed if c.id == column.id else c for c in desc.columns))
        )
        ex.session.forget(table=desc.id)
        return Result(tag="ALTER TABLE")
    if column.computed is not None and s.default is not None:
        raise SQLError(  # NB: 42601 here, as CockroachDB's ALTER COLUMN says it
            "42601", f'computed column "{column.name}" cannot also have a DEFAULT expression'
        )
    changed = column
    if s.default is not None or s.drop_default:
        spec = st.ColumnSpec(column.name, column.type, column.nullable, s.default)
        changed = replace(column, default=_column(ex, spec, column.id, key=False).default)
    elif s.not_null is False:
        if column.id in desc.primary_key:
            raise SQLError("42P16", f'column "{column.name}" is in a primary key')
        changed = replace(column, nullable=True)
    elif s.not_null:
        for row, _pairs in ex.rows(desc, table_span(desc.id)):
            if row.get(column.id) is None:
                raise SQLError(
                    "23502",
                    f'column "{column.name}" of relation "{desc.name}" contains null values',
                )
        changed = replace(column, nullable=False)
    ex.changing(desc)
    ex.publish(
        desc.bumped(columns=tuple(changed if c.id == column.id else c for c in desc.columns))
    )
    ex.session.forget(table=desc.id)
    return Result(tag="ALTER TABLE")


def _alter_column_type(
    ex: Execution,
    desc: TableDescriptor,
    column: Column,
    new_type: ColumnType,
    using: exp.Expr | None,
) -> Result:
    """ALTER COLUMN ... TYPE: a trivial change writes the descriptor; a validating one
    also checks every stored value fits; a rewrite computes each row's new value (the
    USING expression over the row, else the assignment cast) and rewrites the rows in
    the change's transaction, so changefeeds see them at the change's timestamp."""
    if new_type.kind is Kind.ENUM or (
        new_type.kind is Kind.ARRAY and new_type.element and new_type.element.kind is Kind.ENUM
    ):
        new_type = _column(ex, st.ColumnSpec(column.name, new_type), column.id, key=False).type
    kind = conversion(column.type, new_type, using=using is not None)
    if kind is Conversion.REWRITE:
        what = f'alter type of column "{column.name}"'
        if column.id in desc.primary_key or any(
            column.id in i.column_ids or column.id in i.storing for i in desc.indexes
        ):
            raise SQLError(
                "0A000",
                "ALTER COLUMN TYPE requiring rewrite of on-disk data is currently not "
                f'supported for columns that are part of an index (column "{column.name}")',
            )
        ddl_constraints.refuse_column_use(desc, column.id, "alter type of")
        _refuse_if_read_by_views(ex, desc, what)
        if using is None and not automatic(column.type.kind, new_type.kind):
            raise SQLError(
                "42804",
                f'column "{column.name}" cannot be cast automatically to type {new_type.sql()}'
                f' (you might need to specify "USING {column.name}::{new_type.sql()}")',
            )
    changed = replace(column, type=new_type)
    if column.default is not None:
        try:
            spec = st.ColumnSpec(
                column.name, new_type, column.nullable, parse_expression(column.default)
            )
            _column(ex, spec, column.id, key=False)
        except SQLError as exc:
            raise SQLError(
                "42804",
                f'default for column "{column.name}" cannot be cast automatically to type '
                f"{new_type.sql()}: {exc.message}",
            ) from exc
    new = desc.bumped(columns=tuple(changed if c.id == column.id else c for c in desc.columns))
    ex.changing(desc)
    ex.publish(new)
    if kind is not Conversion.TRIVIAL:
        _convert_rows(ex, desc, new, column, new_type, using, rewrite=kind is Conversion.REWRITE)
    ex.session.forget(table=desc.id)
    return Result(tag="ALTER TABLE")


def _convert_rows(
    ex: Execution,
    desc: TableDescriptor,
    new: TableDescriptor,
    column: Column,
    new_type: ColumnType,
    using: exp.Expr | None,
    *,
    rewrite: bool,
) -> None:
    """Each row's value of ``column`` as a value of ``new_type`` (22001, 22003, 22P02 ...
    when one does not convert); written back when ``rewrite``."""
    value_of = compile_expr(using, table_scope(desc, ex.session.database)) if using else None
    family = new.family_of(column.id)
    txn = ex.write_txn
    for row, pairs in ex.rows(desc, table_span(desc.id)):
        if value_of is not None:
            value = value_of(tuple(row.get(c.id) for c in desc.columns), ex.context)
        else:
            value = row.get(column.id)
            if value is not None and new_type.kind is Kind.STRING and not isinstance(value, str):
                value = format_value(value)
        converted = coerce(value, new_type, column.name)
        if converted is None and not column.nullable:
            raise SQLError(
                "23502", f'null value in column "{column.name}" violates not-null constraint'
            )
        if not rewrite:
            continue
        row[column.id] = converted
        key = family_key(row_prefix(new, [row[i] for i in new.primary_key]), family.id)
        encoded = encode_family_value(new, family, row)
        if encoded or family.id == 0:
            txn.put(key, encoded)
        elif key in pairs:
            txn.delete(key)


def show_create_table(ex: Execution, s: st.ShowCreateTable) -> Result:
    desc = ex.relation(s.table)
    # NB: as CockroachDB, the table named as the statement names it
    name = f"{s.table.database}.public.{desc.name}" if s.table.database else desc.name
    if isinstance(desc, TableDescriptor):
        home = schema_listing.home_database(ex.read_source, desc)
        text = schema_listing.create_statements(ex, desc, home)
    else:
        text = desc.create_statement()
    return Result(("table_name", "create_statement"), [(name, text)], "SHOW 1")


ZONE_SETTINGS = ("gc.ttlseconds", "num_replicas", "closed_timestamp_target")
DEFAULT_GC_TTL_SECONDS = DEFAULT_GC_TTL_NS // 1_000_000_000  # a zone without gc.ttlseconds
_LONGEST_CLOSED_TARGET_NS = 3600 * 1_000_000_000
MAX_REPLICAS = 7


def configure_zone(ex: Execution, s: st.ConfigureZone) -> Result:
    """A zone configuration: the default zone's (``ALTER RANGE default``) or a table's.
    ``num_replicas`` is how many replicas each of its ranges keeps, on distinct nodes
    (the lease holders add or remove them, one at a time); a table's
    ``closed_timestamp_target`` is how far behind now its ranges close their timestamps
    (so how fast its changefeeds resolve), in place of the node's default. Settings not
    named keep their values, as CockroachDB's do; ``DISCARD`` drops a table's own."""
    ex.require_admin("CONFIGURE ZONE")
    if s.table is None:
        key, zone = catalog.default_zone_key(), catalog.get_zone(ex.read_source, None)
    else:
        desc = ex.table(s.table)
        key, zone = catalog.zone_key(desc.id), catalog.get_zone(ex.read_source, desc.id)
    if s.discard:
        ex.write_txn.delete(key)  # NB: the table's split boundaries stay, as CockroachDB's
        return Result(tag="CONFIGURE ZONE 1")
    for name, value in s.settings:
        if name not in ZONE_SETTINGS:
            raise SQLError(
                "22023",
                f"unknown zone setting {name!r}; feedkv supports {', '.join(ZONE_SETTINGS)}",
            )
        if name == "num_replicas":
            zone["num_replicas"] = _num_replicas(value)
        elif name == "gc.ttlseconds":
            zone["gc_ttl_seconds"] = _gc_ttl_seconds(value)
        elif s.table is None:
            raise SQLError(
                "22023",
                f"{name} is set per table (or by the nodes' --closed-ts-target), "
                "not on the default zone",
            )
        else:
            zone["closed_timestamp_target_ns"] = _closed_target(name, value)
    ex.write_txn.put(key, json.dumps(zone).encode())
    if s.table is not None and ("num_replicas" in zone or "gc_ttl_seconds" in zone):
        # NB: the table's ranges must hold its keys alone for its factor (or its GC TTL)
        # to apply to them
        span = table_span(desc.id)
        for boundary in (span.start, span.end):
            ex.on_commit(lambda key=boundary: ex.session.db.split(key))  # type: ignore[misc]
    return Result(tag="CONFIGURE ZONE 1")


def _num_replicas(value: str | None) -> int:
    try:
        n = int(value or "")
    except ValueError:
        raise SQLError("22023", f"num_replicas: {value!r} is not a whole number") from None
    if not 1 <= n <= MAX_REPLICAS:
        raise SQLError(
            "22023",
            f"num_replicas: {n} is not between 1 and {MAX_REPLICAS} "
            "(3 replicas survive the loss of 1 node, 5 of 2)",
        )
    return n


def _gc_ttl_seconds(value: str | None) -> int:
    try:
        seconds = int(value or "")
    except ValueError:
        raise SQLError("22023", f"gc.ttlseconds: {value!r} is not a whole number") from None
    if seconds < 1:
        raise SQLError("22023", f"gc.ttlseconds: {seconds} is below the least allowed, 1 (second)")
    return seconds


def _closed_target(name: str, value: str | None) -> int:
    try:
        ns = parse_duration_ns(value or "")
    except InvalidArgumentError:
        raise SQLError(
            "22023", f"zone setting {name}: {value!r} is not a duration such as '200ms'"
        ) from None
    if not 0 < ns <= _LONGEST_CLOSED_TARGET_NS:
        raise SQLError("22023", f"zone setting {name}: {value!r} must be above 0 and at most 1h")
    return ns


ZONE_COLUMNS = ("target", "raw_config_sql")


def show_zone_configuration(ex: Execution, s: st.ShowZoneConfiguration) -> Result:
    """``SHOW ZONE CONFIGURATION``, as CockroachDB shows it: the zone that applies
    (a table without its own shows the default zone) and the statement that would set
    it. ``SHOW ZONE CONFIGURATIONS``: the default zone and every table's own."""
    reader = ex.read_source
    default = catalog.get_zone(reader, None)
    default.setdefault("num_replicas", ex.session.default_replicas)
    if s.every:
        rows = [_zone_row("RANGE default", default)]
        for database in catalog.list_databases(reader):
            for table in catalog.list_tables(reader, database):
                own = catalog.get_zone(reader, table.id)
                if own:
                    name = f"TABLE {database.name}.public.{table.name}"
                    rows.append(_zone_row(name, {**default, **own}))
        return Result(ZONE_COLUMNS, rows, f"SHOW {len(rows)}")
    if s.table is None:
        return Result(ZONE_COLUMNS, [_zone_row("RANGE default", default)], "SHOW 1")
    desc = ex.table(s.table)
    own = catalog.get_zone(reader, desc.id)
    if not own:
        return Result(ZONE_COLUMNS, [_zone_row("RANGE default", default)], "SHOW 1")
    database = ex.database(s.table.database)
    name = f"TABLE {database.name}.public.{desc.name}"
    return Result(ZONE_COLUMNS, [_zone_row(name, {**default, **own})], "SHOW 1")


def _duration_text(ns: int) -> str:
    """``ns`` in the largest unit that holds it whole (``200ms``, ``1s``, ``90s``)."""
    for unit, size in (("h", 3600 * 10**9), ("m", 60 * 10**9), ("s", 10**9), ("ms", 10**6)):
        if ns % size == 0:
            return f"{ns // size}{unit}"
    return f"{ns // 1000}us" if ns % 1000 == 0 else f"{ns}ns"


def _zone_row(target: str, zone: dict[str, Any]) -> tuple[str, str]:
    # NB: in CockroachDB's order: gc.ttlseconds before num_replicas
    ttl = zone.get("gc_ttl_seconds", DEFAULT_GC_TTL_SECONDS)
    settings = [f"gc.ttlseconds = {ttl}", f"num_replicas = {zone['num_replicas']}"]
    target_ns = zone.get("closed_timestamp_target_ns")
    if isinstance(target_ns, int):
        settings.append(f"closed_timestamp_target = '{_duration_text(target_ns)}'")
    sql = f"ALTER {target} CONFIGURE ZONE USING\n\t" + ",\n\t".join(settings)
    return target, sql


def show_partitions(ex: Execution, s: st.ShowPartitions) -> Result:
    desc = ex.table(s.table)
    database = catalog.get_descriptor(ex.read_source, desc.database_id)
    name = database.name if database is not None else ""
    rows = show_rows(name, desc)
    return Result(PARTITION_COLUMNS, rows, f"SHOW {len(rows)}")


_RANGE_COLUMNS = ("start_key", "end_key", "range_id", "generation", "lease_holder", "replicas")


def show_ranges(ex: Execution, s: st.ShowRanges) -> Result:
    rows = _table_ranges(ex, ex.table(s.table), ex.session.db.ranges())
    return Result(_RANGE_COLUMNS, rows, f"SHOW {len(rows)}")


def show_database_ranges(ex: Execution, s: st.ShowDatabaseRanges) -> Result:
    """Each table's ranges, as ``SHOW RANGES FROM TABLE`` shows them, after its name
    (as CockroachDB's ``SHOW RANGES FROM DATABASE`` did before 23.1)."""
    database = ex.database(s.database)
    ranges = ex.session.db.ranges()
    rows = [
        (desc.name, *row)
        for desc in sorted(catalog.list_tables(ex.read_source, database), key=lambda d: d.name)
        for row in _table_ranges(ex, desc, ranges)
    ]
    return Result(("table_name", *_RANGE_COLUMNS), rows, f"SHOW {len(rows)}")


def _table_ranges(
    ex: Execution, desc: TableDescriptor, ranges: Sequence[RangeInfo]
) -> list[tuple[object, ...]]:
    span = table_span(desc.id)
    return [
        (
            _pretty(ex, desc, max(info.span.start, span.start)),
            _pretty(ex, desc, min(info.span.end, span.end)),
            info.range_id,
            info.generation,
            info.lease_holder,
            Array(tuple(sorted(info.replicas)), ColumnType(Kind.INT)),  # INT8[]
        )
        for info in ranges
        if info.span.overlaps(span)
    ]


def _pretty(ex: Execution, desc: TableDescriptor, key: bytes) -> str:
    """A key as ``/Table/<id>/1/<key values...>`` (as many values as it holds)."""
    base = f"/Table/{desc.id}"
    if key == table_prefix(desc.id):
        return base
    if key == table_span(desc.id).end:
        return f"/Table/{desc.id + 1}"
    prefix = index_prefix(desc)
    if not key.startswith(prefix):
        return base + "/" + key.hex()
    values = []
    pos = len(prefix)
    try:
        for n, column in enumerate(desc.key_columns):
            if pos >= len(key):
                break
            direction = Direction.DESC if desc.key_descending(n) else Direction.ASC
            raw, pos = decode_value(key, pos, direction)
            values.append(from_key(column.type, raw))
    except (InvalidArgumentError, SQLError):
        return base + "/" + key.hex()
    return base + "/1/" + "/".join(str(v) for v in values)


def split_at(ex: Execution, s: st.SplitAt) -> Result:
    ex.require_admin("SPLIT AT")
    desc = ex.table(s.table)
    rows = []
    keys = desc.key_columns
    for values in s.rows:
        if len(values) > len(keys):
            raise SQLError(
                "42601",
                f"too many columns in SPLIT AT: the primary key has {len(keys)} columns",
            )
        coerced = [
            coerce(ex.constant(v), c.type, c.name) for v, c in zip(values, keys, strict=False)
        ]
        if any(v is None for v in coerced):
            raise SQLError("22004", "SPLIT AT values cannot be NULL")
        key = check_key(row_prefix(desc, coerced))  # too long: 54000 now, not at commit
        ex.on_commit(lambda key=key: ex.session.db.split(key))  # type: ignore[misc]
        rows.append((key, "/" + "/".join(str(v) for v in coerced), None))
    return Result(("key", "pretty", "split_enforced_until"), rows, f"SPLIT {len(rows)}")


def relocate(ex: Execution, s: st.Relocate) -> Result:
    """Move the range holding each row's key to the node the row names, once the
    statement commits (as CockroachDB's ``RELOCATE``). The target is one node: an
    unreplicated range moves there (with ``LEASE`` too), a replicated range's lease
    moves to its replica there (``LEASE``; its replicas follow its zone configuration)."""
    what = "RELOCATE LEASE" if s.lease else "RELOCATE"
    ex.require_admin(what)
    desc = ex.table(s.table)
    keys = desc.key_columns
    rows = []
    for values in s.rows:
        if len(values) < 2:
            raise SQLError(
                "42601",
                f"{what} takes the target and the key's values: VALUES ("
                + ("node_id" if s.lease else "ARRAY[node_id]")
                + ", key...)",
            )
        node = _relocation_target(ex, values[0], s.lease, what)
        if len(values) - 1 > len(keys):
            raise SQLError(
                "42601", f"too many columns in {what}: the primary key has {len(keys)} columns"
            )
        coerced = [
            coerce(ex.constant(v), c.type, c.name) for v, c in zip(values[1:], keys, strict=False)
        ]
        if any(v is None for v in coerced):
            raise SQLError("22004", f"{what} values cannot be NULL")
        key = check_key(row_prefix(desc, coerced))
        ex.on_commit(
            lambda key=key, node=node: ex.session.db.relocate(key, node),  # type: ignore[misc]
        )
        rows.append((key, "/" + "/".join(str(v) for v in coerced)))
    return Result(("key", "pretty"), rows, f"{what} {len(rows)}")


def _relocation_target(ex: Execution, node: exp.Expr, lease: bool, what: str) -> int:
    """The one node id a RELOCATE row names (``ARRAY[n]``; ``n`` for LEASE)."""
    if isinstance(node, exp.Array):
        elements = list(node.expressions)
    elif lease:
        elements = [node]
    else:
        raise SQLError("42601", f"{what} takes ARRAY[node_id] first, the nodes to hold the range")
    ids = [ex.constant(e) for e in elements]
    for value in ids:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SQLError("22023", f"{what}: {value!r} is not a node id (a positive integer)")
    if len(ids) != 1:
        raise SQLError(
            "0A000",
            f"{what} to {len(ids)} nodes: feedkv moves a range to one node, ARRAY[node_id]; "
            "a replicated range keeps its zone's num_replicas on nodes it picks (ALTER ... "
            "CONFIGURE ZONE USING num_replicas = N), and RELOCATE LEASE moves its lease",
        )
    return int(ids[0])


def create_user(ex: Execution, s: st.CreateUser) -> Result:
    ex.require_admin("CREATE USER")
    if catalog.get_user(ex.write_txn, s.name) is not None:
        if s.if_not_exists:
            return Result(tag="CREATE ROLE")
        raise SQLError("42710", f"a role/user named {s.name} already exists")
    verifier = make_verifier(s.password) if s.password is not None else None
    user = catalog.User(s.name, admin=False, password_verifier=verifier, can_login=s.login)
    catalog.put_user(ex.write_txn, user)
    return Result(tag="CREATE ROLE")


def alter_user_password(ex: Execution, s: st.AlterUserPassword) -> Result:
    """``ALTER USER | ROLE``: a user may change their own password; LOGIN and NOLOGIN
    (whether the role may open a session: a NOLOGIN one is refused when it connects,
    28000, its open sessions go on, as CockroachDB's) need the admin role. root always
    logs in."""
    user = catalog.get_user(ex.write_txn, s.name)
    if s.name != ex.session.user or s.login is not None:
        ex.require_admin("ALTER USER")
    if user is None:
        raise SQLError("42704", f'role/user "{s.name}" does not exist')
    if s.login is False and s.name in (catalog.ROOT, catalog.NODE_USER):
        raise SQLError("42501", f"the {s.name} user must keep its login privilege")
    if s.set_password:
        verifier = make_verifier(s.password) if s.password is not None else None
        user = replace(user, password_verifier=verifier)
    if s.login is not None:
        user = replace(user, can_login=s.login)
    catalog.put_user(ex.write_txn, user)
    return Result(tag="ALTER ROLE")


def drop_user(ex: Execution, s: st.DropUser) -> Result:
    """Drop users and their grants: their password sessions on the gRPC API end and
    their running rangefeeds end with a permission error (see
    :mod:`feedkv.security.call_auth`, :mod:`feedkv.rangefeed.service`)."""
    ex.require_admin("DROP USER")
    for name in s.names:
        if name in ("root", "admin", "node") or name == ex.session.user:
            raise SQLError("42501", f"cannot drop user {name}")
        if catalog.get_user(ex.write_txn, name) is None:
            if s.if_exists:
                continue
            raise SQLError("42704", f'role/user "{name}" does not exist')
        catalog.remove_user(ex.write_txn, name)
    return Result(tag="DROP ROLE")


def grant_role(ex: Execution, s: st.GrantRole) -> Result:
    """Make users members of roles, or no longer members, as CockroachDB: a member
    holds its roles' privileges (through roles of roles too), ``admin``'s members are
    admins (root stays one), and no role may become a member of itself."""
    verb = "REVOKE" if s.revoke else "GRANT"
    ex.require_admin(verb)
    txn = ex.write_txn
    for name in (*s.roles, *s.users):
        if name != catalog.ADMIN_ROLE and catalog.get_user(txn, name) is None:
            raise SQLError("42704", f'role/user "{name}" does not exist')
    for role in s.roles:
        for name in s.users:
            if role == catalog.ADMIN_ROLE:
                _set_admin(ex, name, not s.revoke)
                continue
            if not s.revoke and (name == role or name in catalog.roles_of(txn, role)):
                raise SQLError("0LP01", f"making {name} a member of {role} would create a cycle")
            catalog.put_membership(txn, role, name, member_of=not s.revoke)
    return Result(tag=verb)


def _set_admin(ex: Execution, name: str, admin: bool) -> None:
    if name == catalog.ADMIN_ROLE:
        raise SQLError("0LP01", "making admin a member of admin would create a cycle")
    if name == catalog.ROOT and not admin:
        raise SQLError("42501", "root cannot be removed from role admin")
    user = catalog.get_user(ex.write_txn, name)
    if user is None:
        raise SQLError("42704", f'role/user "{name}" does not exist')
    catalog.put_user(ex.write_txn, replace(user, admin=admin))


def grant_privileges(ex: Execution, s: st.GrantPrivileges) -> Result:
    verb = "REVOKE" if s.revoke else "GRANT"
    ex.require_admin(verb)
    descs: list[NamedRelation | DatabaseDescriptor]
    descs = [ex.relation(name) for name in s.tables]
    descs += [ex.database(name) for name in s.databases]
    for name in s.users:
        if catalog.get_user(ex.write_txn, name) is None:
            raise SQLError("42704", f'role/user "{name}" does not exist')
        for desc in descs:
            held = catalog.granted_to(ex.write_txn, desc.id, name)  # NB: not its roles'
            changed = held - set(s.privileges) if s.revoke else held | set(s.privileges)
            catalog.put_privileges(ex.write_txn, desc.id, name, frozenset(changed))
    return Result(tag=verb)


def show_grants(ex: Execution, s: st.ShowGrants) -> Result:
    """The grants in the current database, on it and on its tables, as CockroachDB's
    (23.1 on): ``ON [TABLE] t`` lists the grants on ``t`` itself (``table_name``),
    ``ON DATABASE d`` those on ``d`` itself;
    without ``ON``, the database's and its tables' (``object_name``, ``object_type``).
    ``FOR u`` lists what ``u`` holds, through its roles too (the grantee is then the
    role that holds it); without it, every grant as granted. A user without the admin
    role sees only what they hold."""
    if s.on_role:
        return _show_role_grants(ex, s)
    reader = ex.read_source
    database = ex.database(s.table.database if s.table is not None else s.database)
    table = ex._table(s.table) if s.table is not None else None
    table_id = table.id if table is not None else None
    user = s.user
    if not ex.is_admin():
        if user not in (None, ex.session.user):
            raise SQLError("42501", f"user {ex.session.user} may only see their own grants")
        user = ex.session.user
    holders = None if user is None else {user, *catalog.roles_of(reader, user)}
    rows: list[tuple[Any, ...]] = []
    for granted, grantee, privileges in catalog.list_privileges(reader, table_id):
        if holders is not None and grantee not in holders:
            continue
        desc = catalog.get_descriptor(reader, granted)
        if isinstance(desc, DatabaseDescriptor) and desc.id == database.id:
            names: tuple[Any, ...] = (None, None, "database")
        elif (
            isinstance(desc, TableDescriptor)
            and not desc.dropped
            and desc.database_id == database.id
        ):
            names = ("public", desc.name, "table")
        else:
            continue
        if table_id is not None:
            names = names[:2]  # ON TABLE t: no object_type
        rows.extend(
            (database.name, *names, grantee, privilege, False) for privilege in sorted(privileges)
        )
    # NB: as CockroachDB's, every object's own: admin and root hold ALL on it, and may
    # grant it, whatever was granted
    owners = [u for u in (catalog.ADMIN_ROLE, catalog.ROOT) if holders is None or u in holders]
    if owners:
        if table is not None:
            objects: list[tuple[Any, ...]] = [("public", table.name)]
        else:
            objects = [(None, None, "database")] + [
                ("public", t.name, "table") for t in catalog.list_tables(reader, database)
            ]
        rows.extend((database.name, *o, u, "ALL", True) for o in objects for u in owners)
    rows.sort(key=lambda row: tuple("" if v is None else str(v) for v in row))
    if s.database is not None:  # ON DATABASE d: the database's own, CockroachDB's columns
        rows = [(row[0], *row[4:]) for row in rows if row[3] == "database"]
        names = ("database_name", "grantee", "privilege_type", "is_grantable")
        return Result(names, rows, f"SHOW {len(rows)}")
    if table_id is not None:
        columns: tuple[str, ...] = ("database_name", "schema_name", "table_name")
    else:
        columns = ("database_name", "schema_name", "object_name", "object_type")
    columns = (*columns, "grantee", "privilege_type", "is_grantable")
    return Result(columns, rows, f"SHOW {len(rows)}")


def _show_role_grants(ex: Execution, s: st.ShowGrants) -> Result:
    """``SHOW GRANTS ON ROLE``: each direct membership (of ``s.roles``, for ``s.user``),
    as ``(role_name, member, is_admin)``; ``admin``'s members hold its admin option, as
    CockroachDB's root and admins do."""
    reader = ex.read_source
    memberships = [(catalog.ADMIN_ROLE, u.name, True) for u in catalog.list_users(reader)
                   if u.admin and u.name != catalog.ADMIN_ROLE]  # fmt: skip
    memberships += [(role, member, False) for role, member in catalog.list_memberships(reader)]
    rows = [
        (role, member, admin)
        for role, member, admin in memberships
        if (not s.roles or role in s.roles) and s.user in (None, member)
    ]
    rows.sort()
    return Result(("role_name", "member", "is_admin"), rows, f"SHOW {len(rows)}")


def create_view(ex: Execution, s: st.CreateView) -> Result:
    """CREATE [OR REPLACE] VIEW: its query runs once now (a name it cannot resolve, a
    type error, fails the statement), which fixes the view's columns."""
    database = ex.database(s.view.database)
    ex.require_privilege(database, "CREATE")
    txn = ex.write_txn
    replaced: ViewDescriptor | None = None
    if catalog.name_taken(txn, database, s.view.name):
        if s.if_not_exists:
            return Result(tag="CREATE VIEW")
        if not s.replace:
            raise SQLError("42P07", f'relation "{s.view.name}" already exists')
        replaced = catalog.view_by_name(txn, database, s.view.name)  # 42809: a table
    body = views.qualified(s.query, database.name)
    writes = views.writes_in(body)
    if writes:
        # NB: the view's query runs on every read: its rows must not cost a write
        raise SQLError("0A000", f"{writes[0]} cannot be used inside a view definition")
    result = query(ex, body)
    columns = _result_columns("CREATE VIEW", s.columns, result.columns, exact=True)
    depends_on = []
    for name in views.tables_read(body):
        read = ex.relation(name)
        if replaced is not None and read.id == replaced.id:
            raise SQLError("42P17", f'view "{s.view.name}" cannot read itself')
        depends_on.append(read.id)
    if replaced is not None:
        kept = replaced.columns
        if columns[: len(kept)] != kept:
            raise SQLError(
                "42P16",
                f'cannot change the columns of view "{s.view.name}" from '
                f"({', '.join(kept)}) to ({', '.join(columns)}): only new columns may be added "
                "at the end",
            )
        _refuse_type_changes(ex, replaced, body, database.name, result.types)
    view = ViewDescriptor(
        replaced.id if replaced is not None else catalog.allocate_id(txn),
        s.view.name,
        database.id,
        s.query_text,
        columns,
        tuple(depends_on),
    )
    catalog.put_view(txn, view, name_entry=replaced is None)
    if replaced is None:
        ex.grant_creator(view.id)
    return Result(tag="CREATE VIEW")


def _refuse_type_changes(
    ex: Execution,
    view: ViewDescriptor,
    body: st.Query,
    database: str,
    types: tuple[ColumnType | None, ...],
) -> None:
    """42P16 if CREATE OR REPLACE VIEW gives one of ``view``'s columns another type (its
    new query ``body`` ran with result ``types``), as CockroachDB refuses it: what reads
    the view would read values of another type. The types are those the statements'
    descriptions give (:mod:`feedkv.sql.describe`), else those their results carry."""
    old_query = views.view_query(view.query, database)
    old = _described_types(ex, old_query, database) or query(ex, old_query).types
    new = _described_types(ex, body, database) or types
    for name, before, after in zip(view.columns, old, new, strict=False):
        if before is not None and after is not None and before.kind is not after.kind:
            raise SQLError(
                "42P16",
                f'cannot change type of view column "{name}" from {before.kind.name.lower()} '
                f"to {after.kind.name.lower()}",
            )


def _described_types(ex: Execution, body: st.Query, database: str) -> tuple[ColumnType | None, ...]:
    """The types of ``body``'s columns as its description gives them (``()``: it has
    none, as a query over a view)."""
    try:
        columns = describe(body, 0, ex.relation, database).columns
    except SQLError:
        return ()
    return tuple(ctype for _name, ctype in columns or ())


def _result_columns(
    what: str, named: tuple[str, ...], columns: tuple[str, ...], *, exact: bool
) -> tuple[str, ...]:
    """The columns of a view or table made from a query's result: those ``named``, then
    the query's own names; 42701 if one comes twice."""
    if len(named) > len(columns) or (exact and named and len(named) != len(columns)):
        raise SQLError(
            "42601",
            f"{what} specifies {counted(len(named), 'column name')}, but data source has "
            f"{counted(len(columns), 'column')}",
        )
    out = (*named, *columns[len(named) :])
    for i, name in enumerate(out):
        if name in out[:i]:
            raise SQLError("42701", f'column "{name}" specified more than once')
    return out


def drop_view(ex: Execution, s: st.DropView) -> Result:
    for name in s.views:
        try:
            view = catalog.view_by_name(ex.write_txn, ex.database(name.database), name.name)
        except SQLError as exc:
            if s.if_exists and exc.code in ("42P01", "3D000"):
                continue
            raise
        ex.require_privilege(view, "DROP")
        _drop_relation(ex, view, cascade=s.cascade)
    return Result(tag="DROP VIEW")


def create_table_as(ex: Execution, s: st.CreateTableAs) -> Result:
    """CREATE TABLE ... AS: a table of the query's columns, of the types its result
    has, keyed by a hidden ``rowid`` (as CockroachDB), with the query's rows, in one
    transaction."""
    database = ex.database(s.table.database)
    ex.require_privilege(database, "CREATE")
    txn = ex.write_txn
    if catalog.name_taken(txn, database, s.table.name):
        if s.if_not_exists:
            return Result(tag="CREATE TABLE AS")
        raise SQLError("42P07", f'relation "{s.table.name}" already exists')
    result = query(ex, s.query)
    names = _result_columns("CREATE TABLE", s.columns, result.columns, exact=False)
    if ROWID in names:
        raise SQLError("42701", f'column "{ROWID}" specified more than once (it is the hidden key)')
    types = column_types(result.types, result.rows, len(names))
    columns = [
        Column(i + 1, name, ctype) for i, (name, ctype) in enumerate(zip(names, types, strict=True))
    ]
    key = Column(len(columns) + 1, ROWID, ColumnType(Kind.INT), False, "unique_rowid()", True)
    columns.append(key)
    desc = TableDescriptor(
        id=catalog.allocate_id(txn),
        name=s.table.name,
        database_id=database.id,
        columns=tuple(columns),
        primary_key=(key.id,),
        families=(Family(0, PRIMARY_FAMILY, tuple(c.id for c in columns)),),
        next_column_id=len(columns) + 1,
        next_family_id=1,
    )
    catalog.put_table(txn, desc)
    ex.grant_creator(desc.id)
    for values in result.rows:
        row = {c.id: coerce(v, c.type, c.name) for c, v in zip(columns, values, strict=False)}
        row[key.id] = ROW_IDS.next()
        for k, value in row_kvs(desc, row).items():
            if value is not None:
                txn.put(k, value)
    ex.on_commit(lambda: ex.session.db.split(table_prefix(desc.id)))
    return Result(tag="CREATE TABLE AS")


def rename_table(ex: Execution, s: st.RenameTable) -> Result:
    """ALTER TABLE t RENAME TO u, ALTER VIEW v RENAME TO w (in the same database); a
    table or view that a view reads keeps its name (the view's text names it)."""
    tag = "ALTER VIEW" if s.view else "ALTER TABLE"
    database = ex.database(s.table.database)
    try:
        if s.view:
            desc: TableDescriptor | ViewDescriptor = catalog.view_by_name(
                ex.write_txn, database, s.table.name
            )
        else:
            desc = ex.table(s.table, "DROP")
    except SQLError as exc:
        if s.if_exists and exc.code in ("42P01", "3D000"):
            return Result(tag=tag)
        raise
    ex.require_privilege(desc, "DROP")
    ex.require_privilege(database, "CREATE")
    target = s.new_name
    if target.database is not None and target.database != database.name:
        raise SQLError(
            "0A000",
            f'cannot move "{desc.name}" to database "{target.database}": a rename stays in '
            "its database",
        )
    if target.name == desc.name:
        return Result(tag=tag)
    txn = ex.write_txn
    if catalog.name_taken(txn, database, target.name):
        raise SQLError("42P07", f'relation "{target.name}" already exists')
    _refuse_if_read_by_views(ex, desc, f'rename relation "{desc.name}"')
    if isinstance(desc, TableDescriptor):
        ddl_constraints.refuse_if_referenced(ex, desc, "rename table")
    if isinstance(desc, ViewDescriptor):
        catalog.put_view(txn, replace(desc, name=target.name), name_entry=False)
    else:
        ex.changing(desc)
        ex.publish(desc.bumped(name=target.name))
        ex.session.forget(table=desc.id)
    catalog.remove_name(txn, database.id, desc.name)
    catalog.put_name(txn, database.id, target.name, desc.id)
    return Result(tag=tag)


def rename_column(ex: Execution, s: st.RenameColumn) -> Result:
    """ALTER TABLE t RENAME COLUMN a TO b: a new descriptor version; rows are stored by
    column id, so none is rewritten."""
    desc = ex.table(s.table, "CREATE")
    column = desc.find_column(s.column)
    if column is None or column.hidden:
        if s.if_exists:
            return Result(tag="ALTER TABLE")
        raise SQLError("42703", f'column "{s.column}" does not exist in table "{desc.name}"')
    if s.new_name == column.name:
        return Result(tag="ALTER TABLE")
    if desc.find_column(s.new_name) is not None:
        raise SQLError("42701", f'column "{s.new_name}" of relation "{desc.name}" already exists')
    _refuse_if_read_by_views(ex, desc, f'rename column "{column.name}"')
    ddl_constraints.refuse_column_use(desc, column.id, "rename", checks_only=True)
    renamed = replace(column, name=s.new_name)
    new = desc.bumped(
        columns=tuple(
            renamed if c.id == column.id else renamed_in(c, column.name, s.new_name)
            for c in desc.columns
        )
    )
    ex.changing(desc)
    ex.publish(new)
    ex.session.forget(table=desc.id)
    return Result(tag="ALTER TABLE")


def create_sequence(ex: Execution, s: st.CreateSequence) -> Result:
    """CREATE SEQUENCE with PostgreSQL's defaults: ascending from 1 to the largest
    INT8; descending from -1 to the smallest. OWNED BY as ALTER SEQUENCE's."""
    database = ex.database(s.sequence.database)
    ex.require_privilege(database, "CREATE")
    txn = ex.write_txn
    if catalog.name_taken(txn, database, s.sequence.name):
        if s.if_not_exists:
            return Result(tag="CREATE SEQUENCE")
        raise SQLError("42P07", f'relation "{s.sequence.name}" already exists')
    low = s.min_value if s.min_value is not None else _default_min(s.increment)
    high = s.max_value if s.max_value is not None else _default_max(s.increment)
    start = s.start if s.start is not None else (low if s.increment > 0 else high)
    _check_sequence_bounds(low, high, ("START", start))
    # NB: an id allocated by a transaction that rolled back is handed out again, and a
    # value its sequence's nextval left behind (outside that transaction) stays: the
    # value's key also holds a number of this sequence's own (``instance``)
    sequence = SequenceDescriptor(
        catalog.allocate_id(txn),
        s.sequence.name,
        database.id,
        s.increment,
        start,
        low,
        high,
        ROW_IDS.next(),
    )
    if s.owned_by is not None:
        sequence = replace(sequence, owner=_sequence_owner(ex, sequence, *s.owned_by))
    catalog.put_view(txn, sequence)
    ex.grant_creator(sequence.id)
    return Result(tag="CREATE SEQUENCE")


def _default_min(increment: int) -> int:
    """A sequence's MINVALUE when none is given (or NO MINVALUE), as PostgreSQL's."""
    return 1 if increment > 0 else sequences.INT8_MIN


def _default_max(increment: int) -> int:
    return sequences.INT8_MAX if increment > 0 else -1


def _check_sequence_bounds(low: int, high: int, *values: tuple[str, int]) -> None:
    """22023 unless ``low < high`` and each ``(what, value)`` is within them."""
    if low >= high:
        raise SQLError("22023", f"MINVALUE ({low}) must be less than MAXVALUE ({high})")
    for what, value in values:
        if value < low:
            raise SQLError("22023", f"{what} value ({value}) cannot be less than MINVALUE ({low})")
        if value > high:
            raise SQLError(
                "22023", f"{what} value ({value}) cannot be greater than MAXVALUE ({high})"
            )


def alter_sequence(ex: Execution, s: st.AlterSequence) -> Result:
    """ALTER SEQUENCE, as PostgreSQL's: an option not given keeps its setting (NO
    MINVALUE or NO MAXVALUE: the default for the increment's sign); START changes only
    where RESTART (without a value) restarts; RESTART [WITH n] makes n the next value.
    The value last handed out (or RESTART's) must be within the new bounds. A sequence
    no nextval has used yet keeps its next value (its start as it was). OWNED BY
    table.column: the sequence is dropped with that column or its table (NONE: with
    neither)."""
    tag = Result(tag="ALTER SEQUENCE")
    try:
        database = ex.database(s.sequence.database)
        sequence = catalog.sequence_by_name(ex.write_txn, database, s.sequence.name)
    except SQLError as exc:
        if s.if_exists and exc.code in ("42P01", "3D000"):
            return tag
        raise
    ex.require_privilege(database, "CREATE")  # as CREATE SEQUENCE
    increment = s.increment if s.increment is not None else sequence.increment
    low = _default_min(increment) if s.no_min_value else sequence.min_value
    high = _default_max(increment) if s.no_max_value else sequence.max_value
    low = s.min_value if s.min_value is not None else low
    high = s.max_value if s.max_value is not None else high
    start = s.start if s.start is not None else sequence.start
    txn = ex.write_txn
    key = catalog.sequence_value_key(sequence)
    stored = txn.get(key)
    last = int(stored) if stored is not None else 0  # the value handed out last
    checked = [("START", start)]
    if s.restart:
        restart = s.restart_with if s.restart_with is not None else start
        checked.append(("RESTART", restart))
        last = restart - increment
    elif stored is not None:
        checked.append(("RESTART", last))  # NB: PostgreSQL's word for the current value
    _check_sequence_bounds(low, high, *checked)
    owner = None if s.owned_by_none else sequence.owner
    if s.owned_by is not None:
        owner = _sequence_owner(ex, sequence, *s.owned_by)
    catalog.put_view(
        txn,
        replace(
            sequence,
            increment=increment,
            start=start,
            min_value=low,
            max_value=high,
            owner=owner,
        ),
        name_entry=False,
    )
    if s.restart:
        txn.put(key, str(last).encode())
    elif stored is None and start != sequence.start:
        # NB: nextval would begin at the new start: the old one stays next
        txn.put(key, str(sequence.start - increment).encode())
    return tag


def _sequence_owner(
    ex: Execution, sequence: SequenceDescriptor, table: st.TableName, column: str
) -> tuple[int, int]:
    """The ``(table id, column id)`` of OWNED BY ``table.column``: a column of a table
    in the sequence's database."""
    desc = ex.table(table)
    found = desc.find_column(column)
    if found is None:
        raise SQLError("42703", f'column "{column}" does not exist in table "{desc.name}"')
    if desc.database_id != sequence.database_id:
        raise SQLError(
            "55000", "sequence must be in the same database as the table it is linked to"
        )
    return desc.id, found.id


def drop_sequence(ex: Execution, s: st.DropSequence) -> Result:
    for name in s.sequences:
        try:
            database = ex.database(name.database)
            sequence = catalog.sequence_by_name(ex.write_txn, database, name.name)
        except SQLError as exc:
            if s.if_exists and exc.code in ("42P01", "3D000"):
                continue
            raise
        ex.require_privilege(sequence, "DROP")
        user = _default_user(ex, sequence)
        if user is not None:
            table, column = user
            raise SQLError(
                "2BP01",
                f'cannot drop sequence "{sequence.name}": the default of column '
                f'"{column.name}" of table "{table.name}" uses it',
            )
        _drop_sequence(ex, sequence)
    return Result(tag="DROP SEQUENCE")


def _drop_sequence(ex: Execution, sequence: SequenceDescriptor) -> None:
    txn = ex.write_txn
    catalog.remove_name(txn, sequence.database_id, sequence.name)
    catalog.remove_descriptor(txn, sequence.id)
    txn.delete(catalog.sequence_value_key(sequence))


HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {
    **ddl_constraints.HANDLERS,
    **schema_listing.HANDLERS,
    st.CreateSequence: create_sequence,
    st.AlterSequence: alter_sequence,
    st.CreateEnum: create_enum,
    st.DropType: drop_type,
    st.DropSequence: drop_sequence,
    st.CreateView: create_view,
    st.DropView: drop_view,
    st.DropIndex: drop_index,
    st.CreateTableAs: create_table_as,
    st.RenameTable: rename_table,
    st.RenameColumn: rename_column,
    st.CreateDatabase: create_database,
    st.DropDatabase: drop_database,
    st.ShowDatabases: show_databases,
    st.ShowUsers: show_users,
    st.CreateTable: create_table,
    st.DropTable: drop_table,
    st.Truncate: truncate,
    st.CommentOn: comments.comment_on,
    st.AddColumn: add_column,
    st.AlterTableActions: alter_table_actions,
    st.AlterColumn: alter_column,
    st.AddPrimaryKey: add_primary_key,
    st.DropColumn: drop_column,
    st.Maintenance: maintenance,
    st.ShowCreateTable: show_create_table,
    st.ShowRanges: show_ranges,
    st.ShowDatabaseRanges: show_database_ranges,
    st.ShowPartitions: show_partitions,
    st.ConfigureZone: configure_zone,
    st.ShowZoneConfiguration: show_zone_configuration,
    st.SplitAt: split_at,
    st.Relocate: relocate,
    st.CreateUser: create_user,
    st.AlterUserPassword: alter_user_password,
    st.DropUser: drop_user,
    st.GrantRole: grant_role,
    st.GrantPrivileges: grant_privileges,
    st.ShowGrants: show_grants,
}
