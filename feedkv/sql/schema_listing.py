"""The SHOW statements that list a database's schema as CockroachDB's do: ``SHOW
TABLES``, ``SHOW SCHEMAS``, ``SHOW CREATE [ALL TABLES]``, ``SHOW STATISTICS`` and
``SHOW REGIONS``, with CockroachDB's columns, so that the tools and ORMs that read
them find what they expect.

feedkv keeps no table statistics and has no regions: SHOW STATISTICS and SHOW REGIONS
answer with no rows (the columns still as CockroachDB's), and ``estimated_row_count``
is 0, as CockroachDB's is for a table it has no statistics of. NB: not a count of the
rows: SHOW TABLES would then read every table, and a transaction that ran it would
conflict with every write to any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from feedkv.errors import InvariantViolation
from feedkv.sql import catalog, comments, sequences
from feedkv.sql import statements as st
from feedkv.sql.descriptor import (
    DatabaseDescriptor,
    NamedRelation,
    SequenceDescriptor,
    TableDescriptor,
    ViewDescriptor,
    quote_name,
)
from feedkv.sql.execution import Execution, Result
from feedkv.sql.parser import annotated_default
from feedkv.sql.types import ColumnType, Kind

__all__ = [
    "HANDLERS",
    "create_statements",
    "home_database",
]

_SHOW_TABLES_COLUMNS = (
    "schema_name",
    "table_name",
    "type",
    "owner",
    "estimated_row_count",
    "locality",
)

# NB: the schemas CockroachDB lists in every database: its virtual ones (no owner)
# and ``public``, owned by the admin role; feedkv has no CREATE SCHEMA.
_SCHEMAS = (
    ("crdb_internal", None),
    ("information_schema", None),
    ("pg_catalog", None),
    ("pg_extension", None),
    ("public", catalog.ADMIN_ROLE),
)

_STRING = ColumnType(Kind.STRING)
_INT = ColumnType(Kind.INT)
_STRINGS = ColumnType(Kind.ARRAY, element=_STRING)

_STATISTICS_COLUMNS = (
    ("statistics_name", _STRING),
    ("column_names", _STRINGS),
    ("created", ColumnType(Kind.TIMESTAMP)),
    ("row_count", _INT),
    ("distinct_count", _INT),
    ("null_count", _INT),
    ("avg_size", _INT),
    ("partial_predicate", _STRING),
    ("histogram_id", _INT),
    ("full_histogram_id", _INT),
)

_REGIONS_COLUMNS = (
    ("region", _STRING),
    ("zones", _STRINGS),
    ("database_names", _STRINGS),
    ("primary_region_of", _STRINGS),
    ("secondary_region_of", _STRINGS),
)

# NB: CockroachDB's own words before the VALIDATE statements of SHOW CREATE ALL TABLES
_VALIDATE_NOTE = (
    "-- Validate foreign key constraints. These can fail if there was unvalidated data "
    "during the SHOW CREATE ALL TABLES"
)


def show_tables(ex: Execution, s: st.ShowTables) -> Result:
    """The database's tables, views and sequences, with CockroachDB's columns. It has no
    regions, so ``locality`` is NULL; it has no statistics, so ``estimated_row_count`` is
    0 (see the module docstring)."""
    database = ex.database(s.database)
    source = ex.read_source
    relations = [(t.name, "table") for t in catalog.list_tables(source, database)]
    relations += [(v.name, "view") for v in catalog.list_views(source, database)]
    relations += [(q.name, "sequence") for q in catalog.list_sequences(source, database)]
    rows = [("public", name, kind, "root", 0, None) for name, kind in sorted(relations)]
    return Result(_SHOW_TABLES_COLUMNS, rows, f"SHOW {len(rows)}")


def show_schemas(ex: Execution, s: st.ShowSchemas) -> Result:
    """The database's schemas, as CockroachDB lists them (``schema_name``, ``owner``)."""
    ex.database(s.database)  # NB: an unknown database fails, as CockroachDB's 3D000
    return Result(("schema_name", "owner"), list(_SCHEMAS), f"SHOW {len(_SCHEMAS)}", (_STRING,) * 2)


def show_statistics(ex: Execution, s: st.ShowStatistics) -> Result:
    """No rows: feedkv collects no table statistics (the table must still exist)."""
    ex.table(s.table)
    names, types = zip(*_STATISTICS_COLUMNS, strict=True)
    return Result(names, [], "SHOW 0", types)


def show_regions(ex: Execution, s: st.ShowRegions) -> Result:
    """No rows: a feedkv cluster has no regions. ``FROM CLUSTER`` has CockroachDB's two
    columns, plain ``SHOW REGIONS`` its five."""
    ex.require_admin("SHOW REGIONS")
    columns = _REGIONS_COLUMNS[:2] if s.cluster else _REGIONS_COLUMNS
    names, types = zip(*columns, strict=True)
    return Result(names, [], "SHOW 0", types)


def show_create_all_tables(ex: Execution, s: st.ShowCreateAllTables) -> Result:
    """One ``create_statement`` row per statement that remakes the session's database,
    in CockroachDB's order: each relation after those it depends on (the sequences its
    DEFAULTs call, the relations a view reads), else in the order they were made; the
    tables without their foreign keys, which follow as ALTER TABLE ... ADD CONSTRAINT
    statements once every table is made, then as VALIDATE CONSTRAINT ones."""
    database = ex.database(None)
    rows: list[tuple[Any, ...]] = []
    added, validated = [], []
    for desc in _dependency_order(ex, database):
        qualified = f"public.{quote_name(desc.name)}"
        if isinstance(desc, TableDescriptor):
            rows.append((create_statements(ex, desc, database, foreign_keys=False),))
            for fk in desc.foreign_keys:
                added.append(f"ALTER TABLE {qualified} ADD {desc.foreign_key_sql(fk)};")
                validated.append(
                    f"ALTER TABLE {qualified} VALIDATE CONSTRAINT {quote_name(fk.name)};"
                )
        else:
            rows.append((f"{desc.create_statement(qualified)};",))
    rows += [(text,) for text in added]
    if validated:
        rows += [(_VALIDATE_NOTE,), *((text,) for text in validated)]
    return Result(("create_statement",), rows, f"SHOW {len(rows)}", (_STRING,))


def create_statements(
    ex: Execution, desc: TableDescriptor, home: DatabaseDescriptor, *, foreign_keys: bool = True
) -> str:
    """The statements that make ``desc``, a table of the database ``home``, as SHOW
    CREATE writes them (CockroachDB 25.3 on): its CREATE TABLE, then the COMMENT ON
    statements of its comments, each ending with ``;``."""
    text = desc.create_statement(
        shown_default=lambda d, ctype: annotated_default(
            sequences.shown_default(d, home.name), ctype
        ),
        foreign_keys=foreign_keys,
    )
    qualified = f"public.{quote_name(desc.name)}"
    statements = [text, *comments.comment_statements(ex.read_source, desc, qualified)]
    return "\n".join(f"{statement};" for statement in statements)


def home_database(reader: catalog.Reader, desc: TableDescriptor) -> DatabaseDescriptor:
    """The database ``desc`` is a table of, as ``reader`` sees it. NB: a table outlives
    no database (DROP DATABASE drops its tables first), so a missing one is a broken
    catalog, not a user's mistake."""
    home = catalog.get_descriptor(reader, desc.database_id)
    if not isinstance(home, DatabaseDescriptor):
        raise InvariantViolation(f"table {desc.name!r} has no database {desc.database_id}")
    return home


def _dependency_order(ex: Execution, database: DatabaseDescriptor) -> list[NamedRelation]:
    """The database's relations, each after the ones it depends on, else by id (the
    order they were made in). A table's foreign keys are no dependency here: they are
    added once every table is made."""
    source = ex.read_source
    relations: list[NamedRelation] = [
        *catalog.list_tables(source, database),
        *catalog.list_views(source, database),
        *catalog.list_sequences(source, database),
    ]
    by_id = {r.id: r for r in relations}
    sequence_ids = {r.name: r.id for r in relations if isinstance(r, SequenceDescriptor)}

    def depends_on(relation: NamedRelation) -> list[int]:
        if isinstance(relation, ViewDescriptor):
            return list(relation.depends_on)
        if isinstance(relation, TableDescriptor):
            return [
                sequence_ids[name]
                for column in relation.columns
                if column.default is not None
                for named, name in sequences.sequences_called(column.default)
                if named in (None, database.name) and name in sequence_ids
            ]
        return []

    ordered: list[NamedRelation] = []
    placed: set[int] = set()

    def visit(relation: NamedRelation) -> None:
        if relation.id in placed:
            return
        placed.add(relation.id)  # NB: before its dependencies, so a cycle cannot recur
        for dependency in sorted(depends_on(relation)):
            if dependency in by_id:
                visit(by_id[dependency])
        ordered.append(relation)

    for relation in sorted(relations, key=lambda r: r.id):
        visit(relation)
    return ordered


HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {
    st.ShowTables: show_tables,
    st.ShowSchemas: show_schemas,
    st.ShowStatistics: show_statistics,
    st.ShowRegions: show_regions,
    st.ShowCreateAllTables: show_create_all_tables,
}
