"""Database and table descriptors: the schema of each table, versioned.

A descriptor is stored as JSON under its id in the catalog (:mod:`feedkv.sql.catalog`).
Every schema change writes a new version of it in the same transaction as the change
itself, so the descriptor of table T as of timestamp X is an MVCC read at X, which is
how changefeeds decode a row with the schema it was written under.

Column ids and family ids are never reused within a table: a dropped column's id stays
retired, so a value written under an old version never decodes as a new column.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql.types import ColumnType, Kind

__all__ = [
    "PRIMARY_FAMILY",
    "PRIMARY_INDEX_ID",
    "ROWID",
    "Column",
    "DatabaseDescriptor",
    "Descriptor",
    "Check",
    "Family",
    "ForeignKey",
    "Index",
    "Partition",
    "RESERVED_WORDS",
    "NamedRelation",
    "SequenceDescriptor",
    "TableDescriptor",
    "TypeDescriptor",
    "ViewDescriptor",
    "decode_descriptor",
    "quote_name",
]

PRIMARY_INDEX_ID = 1
PRIMARY_FAMILY = "primary"
ROWID = "rowid"


@dataclass(frozen=True, slots=True)
class Column:
    """A column. ``default`` is the SQL text of its DEFAULT expression; ``hidden``
    columns (the implicit ``rowid``) are left out of ``SELECT *``. ``computed`` is the
    SQL text of a computed column's expression (:mod:`feedkv.sql.computed`): a STORED
    one is written with the row, a ``virtual`` one is in no family and is computed
    when read.

    An ``adding`` column is one an explicit transaction added (ALTER TABLE ... ADD
    COLUMN) and has not committed: as CockroachDB's column mutation, it is written
    (every row holds its default or computed value) but no statement of that
    transaction can name it, and ``*`` leaves it out. The commit makes it public.

    An ``identity`` column (``ALWAYS`` or ``BY DEFAULT``, as GENERATED ... AS IDENTITY
    says) takes its DEFAULT from a sequence of its own, made with it and dropped with
    its table, as CockroachDB's; ``identity_options`` is its sequence options' text as
    written, for SHOW CREATE TABLE.

    An ``inaccessible`` column is the hidden virtual column an expression index keys
    on (CockroachDB's ``crdb_internal_idx_expr``): SHOW CREATE TABLE shows its index
    with its expression instead of it, and it goes with the last index on it."""

    id: int
    name: str
    type: ColumnType
    nullable: bool = True
    default: str | None = None
    hidden: bool = False
    computed: str | None = None
    virtual: bool = False
    adding: bool = False
    identity: str | None = None
    identity_options: str = ""
    inaccessible: bool = False

    @property
    def shown(self) -> bool:
        """Whether ``SELECT *`` selects it."""
        return not self.hidden and not self.adding

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "type": self.type.to_json()}
        if not self.nullable:
            out["not_null"] = True
        if self.default is not None:
            out["default"] = self.default
        if self.hidden:
            out["hidden"] = True
        if self.computed is not None:
            out["computed"] = self.computed
        if self.virtual:
            out["virtual"] = True
        if self.adding:
            out["adding"] = True
        if self.identity is not None:
            out["identity"] = self.identity
        if self.identity_options:
            out["identity_options"] = self.identity_options
        if self.inaccessible:
            out["inaccessible"] = True
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Column:
        return cls(
            id=data["id"],
            name=data["name"],
            type=ColumnType.from_json(data["type"]),
            nullable=not data.get("not_null", False),
            default=data.get("default"),
            hidden=data.get("hidden", False),
            computed=data.get("computed"),
            virtual=data.get("virtual", False),
            adding=data.get("adding", False),
            identity=data.get("identity"),
            identity_options=data.get("identity_options", ""),
            inaccessible=data.get("inaccessible", False),
        )


@dataclass(frozen=True, slots=True)
class Family:
    """A column family: the non-key columns stored together in one KV pair per row."""

    id: int
    name: str
    column_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Index:
    """A secondary index on ``column_ids`` (in key order), each ascending unless
    ``descending`` says otherwise (one flag per column; empty: all ascending), its
    keys then sorting the other way (CockroachDB's descending key encoding); ``storing``
    columns are kept in its entries too. Its entries live apart from the table's rows
    (:mod:`feedkv.sql.indexes`). ``constraint``: the index of a UNIQUE constraint (not
    one made as an index), which DROP INDEX drops only with CASCADE, as CockroachDB.

    A partial index (``predicate``: the SQL text of its WHERE, over the table's columns)
    holds entries of the rows the predicate holds for only (:mod:`feedkv.sql.constraints`
    writes them; a unique one is unique among those rows), so a read uses it only when
    its WHERE has the predicate's conjuncts among its own (``plan._usable_indexes``);
    what reads by other columns' values uses :attr:`TableDescriptor.readable_indexes`."""

    id: int
    name: str
    column_ids: tuple[int, ...]
    unique: bool = False
    storing: tuple[int, ...] = ()
    constraint: bool = False
    descending: tuple[bool, ...] = ()
    predicate: str | None = None

    def __post_init__(self) -> None:
        if not any(self.descending):  # NB: one form for all-ascending: () (equality)
            object.__setattr__(self, "descending", ())

    def is_descending(self, n: int) -> bool:
        """Whether the index's ``n``-th column (from 0) sorts descending."""
        return n < len(self.descending) and self.descending[n]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "columns": list(self.column_ids),
            "unique": self.unique,
            "storing": list(self.storing),
        }
        if self.constraint:  # NB: only when set, so other descriptors keep their bytes
            out["constraint"] = True
        if self.descending:
            out["descending"] = list(self.descending)
        if self.predicate is not None:
            out["predicate"] = self.predicate
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Index:
        return cls(
            data["id"],
            data["name"],
            tuple(data["columns"]),
            data.get("unique", False),
            tuple(data.get("storing", ())),
            data.get("constraint", False),
            tuple(data.get("descending", ())),
            data.get("predicate"),
        )


@dataclass(frozen=True, slots=True)
class Check:
    """A CHECK constraint: ``expression`` is its SQL text over the table's columns."""

    name: str
    expression: str


@dataclass(frozen=True, slots=True)
class ForeignKey:
    """``FOREIGN KEY (column_ids) REFERENCES table (referenced)``: a row's values of
    ``column_ids``, when none is NULL, are those of a row of the referenced table (whose
    columns ``referenced`` are its primary key or a unique index's). ``on_delete`` and
    ``on_update`` say what a referencing row undergoes when its referenced row goes or
    changes those values (:data:`REFERENTIAL_ACTIONS`)."""

    name: str
    column_ids: tuple[int, ...]
    table_id: int
    table_name: str  # as created (shown by SHOW CREATE; the table cannot be renamed)
    referenced: tuple[int, ...]
    referenced_names: tuple[str, ...] = ()  # as created, for SHOW CREATE
    on_delete: str = "NO ACTION"
    on_update: str = "NO ACTION"

    def actions_sql(self) -> str:
        """Its actions as a definition ends with them (none for NO ACTION)."""
        return (f" ON DELETE {self.on_delete}" if self.on_delete != "NO ACTION" else "") + (
            f" ON UPDATE {self.on_update}" if self.on_update != "NO ACTION" else ""
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "columns": list(self.column_ids),
            "table_id": self.table_id,
            "table_name": self.table_name,
            "referenced": list(self.referenced),
            "referenced_names": list(self.referenced_names),
            "on_delete": self.on_delete,
            "on_update": self.on_update,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ForeignKey:
        return cls(
            data["name"],
            tuple(data["columns"]),
            data["table_id"],
            data["table_name"],
            tuple(data["referenced"]),
            tuple(data.get("referenced_names", ())),
            data.get("on_delete", "NO ACTION"),
            data.get("on_update", "NO ACTION"),
        )


@dataclass(frozen=True, slots=True)
class DatabaseDescriptor:
    id: int
    name: str

    def to_json(self) -> bytes:
        return json.dumps({"database": {"id": self.id, "name": self.name}}).encode()


@dataclass(frozen=True, slots=True)
class Partition:
    """A partition of a table (``PARTITION BY LIST | RANGE`` on a primary key prefix):
    its ``name``, the key spans its rows lie in (``[start, end)`` each), its ``values``
    as written (``VALUES IN (...)``, ``VALUES FROM (...) TO (...)``) and ``columns``."""

    name: str
    spans: tuple[tuple[bytes, bytes], ...]
    values: str
    columns: str = ""  # the partitioning's columns, as SHOW PARTITIONS names them

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "spans": [[start.hex(), end.hex()] for start, end in self.spans],
            "values": self.values,
            "columns": self.columns,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Partition:
        spans = tuple((bytes.fromhex(s), bytes.fromhex(e)) for s, e in data["spans"])
        return cls(data["name"], spans, data["values"], data.get("columns", ""))


@dataclass(frozen=True)
class TableDescriptor:
    """A table's schema at one version.

    ``primary_key`` lists column ids in key order. Family 0 (``primary`` unless named)
    always exists: every row has a KV pair for it, even when all its columns are NULL,
    so a row is never invisible.
    """

    id: int
    name: str
    database_id: int
    columns: tuple[Column, ...]
    primary_key: tuple[int, ...]
    families: tuple[Family, ...]
    version: int = 1
    next_column_id: int = 1
    next_family_id: int = 1
    dropped: bool = False
    # Taken offline by an IMPORT INTO that is writing its rows: statements refuse the
    # table (55000) and changefeeds watching it end, as in CockroachDB.
    offline: bool = False
    # How many times TRUNCATE emptied the table: each ends the changefeeds watching it,
    # as CockroachDB's TRUNCATE (a new table under the old name) fails them.
    truncations: int = 0
    indexes: tuple[Index, ...] = ()
    next_index_id: int = PRIMARY_INDEX_ID + 1
    checks: tuple[Check, ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()
    # The foreign keys that reference this table: (table id, constraint name).
    referenced_by: tuple[tuple[int, str], ...] = ()
    partitions: tuple[Partition, ...] = ()  # PARTITION BY, on a primary key prefix
    # Per primary key column, whether it sorts descending (empty: all ascending), as
    # ``PRIMARY KEY (a DESC)``: its keys are encoded descending (see Index).
    primary_descending: tuple[bool, ...] = ()
    _by_name: dict[str, Column] = field(init=False, repr=False, compare=False)
    _by_id: dict[int, Column] = field(init=False, repr=False, compare=False)
    _computed_columns: tuple[Column, ...] = field(init=False, repr=False, compare=False)
    _not_null_columns: tuple[Column, ...] = field(init=False, repr=False, compare=False)
    _constrained: bool = field(init=False, repr=False, compare=False)
    # NB: the row codec keeps its per-version decoding plan here (row_codec._layout).
    _codec: Any = field(default=None, init=False, repr=False, compare=False)
    # NB: feedkv.sql.constraints keeps its compiled checks here.
    _constraints: Any = field(default=None, init=False, repr=False, compare=False)
    # NB: feedkv.sql.computed keeps its compiled expressions here.
    _computed: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not any(self.primary_descending):  # NB: one form for all-ascending: ()
            object.__setattr__(self, "primary_descending", ())
        # NB: an adding or inaccessible column has no name a statement can use (see Column)
        by_name = {c.name: c for c in self.columns if not (c.adding or c.inaccessible)}
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_by_id", {c.id: c for c in self.columns})
        computed = tuple(c for c in self.columns if c.computed is not None)
        object.__setattr__(self, "_computed_columns", computed)
        not_null = tuple(c for c in self.columns if not c.nullable)
        object.__setattr__(self, "_not_null_columns", not_null)
        constrained = bool(self.indexes or self.checks or self.foreign_keys or self.referenced_by)
        object.__setattr__(self, "_constrained", constrained)

    # Lookups.

    def column(self, name: str) -> Column:
        """The column called ``name``; SQLSTATE 42703 names it if there is none."""
        found = self._by_name.get(name)
        if found is None:
            raise SQLError("42703", f'column "{name}" does not exist')
        return found

    def partition(self, name: str) -> Partition:
        """The partition called ``name``; SQLSTATE 42704 names it if there is none."""
        for partition in self.partitions:
            if partition.name == name:
                return partition
        known = ", ".join(p.name for p in self.partitions) or "none"
        raise SQLError(
            "42704", f"partition {name!r} does not exist in table {self.name!r} (it has {known})"
        )

    def find_column(self, name: str) -> Column | None:
        return self._by_name.get(name)

    def column_by_id(self, column_id: int) -> Column | None:
        return self._by_id.get(column_id)

    @property
    def readable_indexes(self) -> tuple[Index, ...]:
        """The indexes a read may use: those that hold an entry for every row (no
        partial index, see Index)."""
        return tuple(i for i in self.indexes if i.predicate is None)

    @property
    def visible_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.shown)

    @property
    def computed_columns(self) -> tuple[Column, ...]:
        """The computed columns, in column order (:mod:`feedkv.sql.computed`)."""
        return self._computed_columns

    @property
    def not_null_columns(self) -> tuple[Column, ...]:
        """The NOT NULL columns (the primary key's among them), in column order: what a
        write checks of each row, kept with the version."""
        return self._not_null_columns

    def without_virtual(self) -> TableDescriptor:
        """This version as a changefeed that leaves VIRTUAL columns out sees it
        (CockroachDB's default, ``virtual_columns='omitted'``): it decodes the same
        rows, since no family holds a virtual column."""
        if not any(c.virtual for c in self.columns):
            return self
        return replace(self, columns=tuple(c for c in self.columns if not c.virtual))

    @property
    def key_columns(self) -> tuple[Column, ...]:
        return tuple(self._by_id[i] for i in self.primary_key)

    def key_descending(self, n: int) -> bool:
        """Whether the primary key's ``n``-th column (from 0) sorts descending."""
        return n < len(self.primary_descending) and self.primary_descending[n]

    def family(self, name: str) -> Family:
        for family in self.families:
            if family.name == name:
                return family
        raise SQLError("42704", f"column family {name!r} does not exist in table {self.name!r}")

    @property
    def constrained(self) -> bool:
        """Whether a write must do more than write its row: index entries, CHECKs,
        foreign keys (see :mod:`feedkv.sql.constraints`)."""
        return self._constrained

    def index(self, name: str) -> Index | None:
        return next((i for i in self.indexes if i.name == name), None)

    def family_of(self, column_id: int) -> Family:
        for family in self.families:
            if column_id in family.column_ids:
                return family
        return self.families[0]

    # Changes (each returns the next version).

    def bumped(self, **changes: Any) -> TableDescriptor:
        return replace(self, version=self.version + 1, **changes)

    # Text.

    def index_key_sql(self, column_id: int) -> str:
        """An index key column as CREATE INDEX names it: its name, or an expression
        index's expression (its inaccessible column's)."""
        column = self._by_id[column_id]
        if not column.inaccessible or column.computed is None:
            return quote_name(column.name)
        # NB: imported here: a Spark worker reads descriptors, never the SQL parser
        import sqlglot
        from sqlglot import exp

        # NB: as CockroachDB shows it: a function call bare, any other in parentheses
        node = sqlglot.parse_one(column.computed, dialect="postgres")
        return column.computed if isinstance(node, exp.Func) else f"({column.computed})"

    def create_statement(
        self,
        qualified_name: str | None = None,
        *,
        shown_default: Callable[[str, ColumnType], str] | None = None,
        foreign_keys: bool = True,
    ) -> str:
        """The CREATE TABLE statement that makes this table, in CockroachDB's shape:
        the name in its schema (``public.t``); each column with its type, ``NOT
        VISIBLE``, ``NULL`` or ``NOT NULL``, its DEFAULT (GENERATED ... AS IDENTITY for
        an identity column) or computed expression (the implicit ``rowid`` key too);
        the primary key as ``CONSTRAINT t_pkey PRIMARY KEY (a ASC)``; foreign keys,
        then indexes (``(c ASC)``, ``STORING``), then the families (unless there is
        only one, called ``primary``), then CHECKs. feedkv's parser reads it back into
        the same table. A column an open transaction is adding is not shown (see
        Column). ``shown_default`` gives a DEFAULT's text as shown, from its text and
        its column's type (by default, as stored); ``foreign_keys`` False leaves the
        foreign keys out (SHOW CREATE ALL TABLES adds them after every table, see
        :meth:`foreign_key_sql`)."""
        lines = []
        for column in self.columns:
            if column.adding or column.inaccessible:
                continue
            line = f"{quote_name(column.name)} {column.type.sql()}"
            if column.hidden:
                line += " NOT VISIBLE"
            line += " NULL" if column.nullable else " NOT NULL"
            if column.identity is not None:
                line += f" GENERATED {column.identity} AS IDENTITY"
                if column.identity_options:
                    line += f" ({column.identity_options})"
            elif column.default is not None:
                shown = (
                    column.default
                    if shown_default is None
                    else shown_default(column.default, column.type)
                )
                line += f" DEFAULT {shown}"
            if column.computed is not None:
                line += f" AS ({column.computed}) {'VIRTUAL' if column.virtual else 'STORED'}"
            lines.append(line)
        key = ", ".join(
            quote_name(c.name) + (" DESC" if self.key_descending(n) else " ASC")
            for n, c in enumerate(self.key_columns)
        )
        lines.append(f"CONSTRAINT {quote_name(self.name + '_pkey')} PRIMARY KEY ({key})")

        def listed(ids: tuple[int, ...], order: str = "") -> str:
            return ", ".join(quote_name(self._by_id[i].name) + order for i in ids)

        if foreign_keys:
            lines.extend(self.foreign_key_sql(fk) for fk in self.foreign_keys)
        for index in self.indexes:
            kind = "UNIQUE INDEX" if index.unique else "INDEX"
            keys = ", ".join(
                self.index_key_sql(i) + (" DESC" if index.is_descending(n) else " ASC")
                for n, i in enumerate(index.column_ids)
            )
            line = f"{kind} {quote_name(index.name)} ({keys})"
            if index.storing:
                line += f" STORING ({listed(index.storing)})"
            if index.predicate is not None:
                line += f" WHERE {index.predicate}"
            lines.append(line)
        if len(self.families) > 1 or self.families[0].name != PRIMARY_FAMILY:
            for family in self.families:
                names = ", ".join(
                    quote_name(self._by_id[i].name)
                    for i in family.column_ids
                    if i in self._by_id and not self._by_id[i].adding
                )
                lines.append(f"FAMILY {quote_name(family.name)} ({names})")
        for check in self.checks:
            lines.append(f"CONSTRAINT {quote_name(check.name)} CHECK ({check.expression})")
        body = ",\n\t".join(lines)
        text = f"CREATE TABLE {qualified_name or 'public.' + quote_name(self.name)} (\n\t{body}\n)"
        if self.partitions:
            first = self.partitions[0]
            kind = "LIST" if first.values.startswith("VALUES IN") else "RANGE"
            parts = ",\n\t".join(
                f"PARTITION {quote_name(p.name)} {p.values}" for p in self.partitions
            )
            text += f" PARTITION BY {kind} ({first.columns}) (\n\t{parts}\n)"
        return text

    def foreign_key_sql(self, fk: ForeignKey) -> str:
        """``CONSTRAINT name FOREIGN KEY (...) REFERENCES public.t(...)`` and its
        actions, as CREATE TABLE and ALTER TABLE ... ADD write it."""
        columns = ", ".join(quote_name(self._by_id[i].name) for i in fk.column_ids)
        referenced = ", ".join(map(quote_name, fk.referenced_names))
        return (
            f"CONSTRAINT {quote_name(fk.name)} FOREIGN KEY ({columns}) "
            f"REFERENCES public.{quote_name(fk.table_name)}({referenced}){fk.actions_sql()}"
        )

    # Storage.

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "table": {
                    "id": self.id,
                    "name": self.name,
                    "database_id": self.database_id,
                    "version": self.version,
                    "columns": [c.to_json() for c in self.columns],
                    "primary_key": list(self.primary_key),
                    "families": [
                        {"id": f.id, "name": f.name, "columns": list(f.column_ids)}
                        for f in self.families
                    ],
                    "next_column_id": self.next_column_id,
                    "next_family_id": self.next_family_id,
                    "dropped": self.dropped,
                    # NB: only when set, so every other descriptor keeps its bytes
                    **({"offline": True} if self.offline else {}),
                    **({"truncations": self.truncations} if self.truncations else {}),
                    **(
                        {"primary_descending": list(self.primary_descending)}
                        if self.primary_descending
                        else {}
                    ),
                    **self._constraints_json(),
                    **(
                        {"partitions": [p.to_json() for p in self.partitions]}
                        if self.partitions
                        else {}
                    ),
                }
            },
            separators=(",", ":"),
        ).encode()

    def _constraints_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.indexes or self.next_index_id != PRIMARY_INDEX_ID + 1:
            out["indexes"] = [i.to_json() for i in self.indexes]
            out["next_index_id"] = self.next_index_id
        if self.checks:
            out["checks"] = [{"name": c.name, "expression": c.expression} for c in self.checks]
        if self.foreign_keys:
            out["foreign_keys"] = [fk.to_json() for fk in self.foreign_keys]
        if self.referenced_by:
            out["referenced_by"] = [list(r) for r in self.referenced_by]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TableDescriptor:
        return cls(
            id=data["id"],
            name=data["name"],
            database_id=data["database_id"],
            columns=tuple(Column.from_json(c) for c in data["columns"]),
            primary_key=tuple(data["primary_key"]),
            families=tuple(
                Family(f["id"], f["name"], tuple(f["columns"])) for f in data["families"]
            ),
            version=data["version"],
            next_column_id=data["next_column_id"],
            next_family_id=data["next_family_id"],
            dropped=data.get("dropped", False),
            offline=data.get("offline", False),
            truncations=data.get("truncations", 0),
            indexes=tuple(Index.from_json(i) for i in data.get("indexes", ())),
            next_index_id=data.get("next_index_id", PRIMARY_INDEX_ID + 1),
            checks=tuple(Check(c["name"], c["expression"]) for c in data.get("checks", ())),
            foreign_keys=tuple(ForeignKey.from_json(f) for f in data.get("foreign_keys", ())),
            referenced_by=tuple((r[0], r[1]) for r in data.get("referenced_by", ())),
            partitions=tuple(Partition.from_json(p) for p in data.get("partitions", ())),
            primary_descending=tuple(data.get("primary_descending", ())),
        )


@dataclass(frozen=True, slots=True)
class ViewDescriptor:
    """A view: a named query, read as a table. ``query`` is its text as written; its
    table names resolve in the view's database (:mod:`feedkv.sql.views`), whatever the
    database of the session reading it. ``columns`` are its column names, fixed when it
    was created; ``depends_on`` the ids of the tables and views it reads, which cannot
    be dropped or renamed while it stands."""

    id: int
    name: str
    database_id: int
    query: str
    columns: tuple[str, ...]
    depends_on: tuple[int, ...] = ()

    def create_statement(self, qualified_name: str | None = None) -> str:
        names = ", ".join(quote_name(c) for c in self.columns)
        return f"CREATE VIEW {qualified_name or quote_name(self.name)} ({names}) AS {self.query}"

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "view": {
                    "id": self.id,
                    "name": self.name,
                    "database_id": self.database_id,
                    "query": self.query,
                    "columns": list(self.columns),
                    "depends_on": list(self.depends_on),
                }
            },
            separators=(",", ":"),
        ).encode()


@dataclass(frozen=True, slots=True)
class SequenceDescriptor:
    """A sequence: its settings. Its value lives apart, at its own key, and changes
    outside transactions (:mod:`feedkv.sql.sequences`)."""

    id: int
    name: str
    database_id: int
    increment: int = 1
    start: int = 1
    min_value: int = 1
    max_value: int = 2**63 - 1
    instance: int = 0  # unique to this sequence (see catalog.sequence_value_key)
    # OWNED BY: (table id, column id) of the column it goes with when that is dropped
    owner: tuple[int, int] | None = None

    def create_statement(self, qualified_name: str | None = None) -> str:
        return (
            f"CREATE SEQUENCE {qualified_name or quote_name(self.name)} "
            f"MINVALUE {self.min_value} MAXVALUE {self.max_value} "
            f"INCREMENT {self.increment} START {self.start}"
        )

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "sequence": {
                    "id": self.id,
                    "name": self.name,
                    "database_id": self.database_id,
                    "increment": self.increment,
                    "start": self.start,
                    "min_value": self.min_value,
                    "max_value": self.max_value,
                    "instance": self.instance,
                    **({"owner": list(self.owner)} if self.owner is not None else {}),
                }
            },
            separators=(",", ":"),
        ).encode()


@dataclass(frozen=True, slots=True)
class TypeDescriptor:
    """A user-defined type: an enum of ``labels``, in their order, and each label's code
    (ascending with them; see :mod:`feedkv.sql.enums`).

    ``adding``: the labels (with their codes) an explicit transaction added (ALTER TYPE
    ... ADD VALUE) and has not committed: as CockroachDB's, no statement of that
    transaction can use them (22023, "not yet public"); the commit makes them public
    (:meth:`made_public`)."""

    id: int
    name: str
    database_id: int
    labels: tuple[str, ...]
    codes: tuple[bytes, ...] = ()
    adding: tuple[tuple[str, bytes], ...] = ()

    def column_type(self) -> ColumnType:
        """The type of a column of this enum (a column keeps its labels and codes, and
        ALTER TYPE rewrites the columns that use it)."""
        return ColumnType(
            Kind.ENUM,
            type_name=self.name,
            labels=self.labels,
            codes=self.codes,
            type_id=self.id,
            pending=tuple(label for label, _code in self.adding),
        )

    def made_public(self) -> TypeDescriptor:
        """This type with its ``adding`` labels public, each in its code's place."""
        merged = sorted([*zip(self.labels, self.codes, strict=True), *self.adding], key=_code)
        return replace(
            self,
            labels=tuple(label for label, _code in merged),
            codes=tuple(code for _label, code in merged),
            adding=(),
        )

    def retyped(self, columns: tuple[Column, ...]) -> tuple[Column, ...]:
        """``columns`` with those of this type (or arrays of it) of this version of it."""
        ctype = self.column_type()

        def retyped(column: Column) -> Column:
            if self._is_of(column.type):
                return replace(column, type=ctype)
            element = column.type.element
            if column.type.kind is Kind.ARRAY and element is not None and self._is_of(element):
                return replace(column, type=replace(column.type, element=ctype))
            return column

        return tuple(retyped(c) for c in columns)

    def _is_of(self, ctype: ColumnType) -> bool:
        return ctype.kind is Kind.ENUM and ctype.type_name == self.name

    def to_json(self) -> bytes:
        found: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "database_id": self.database_id,
            "labels": list(self.labels),
            "codes": [code.hex() for code in self.codes],
        }
        if self.adding:
            found["adding"] = [[label, code.hex()] for label, code in self.adding]
        return json.dumps({"type": found}, separators=(",", ":")).encode()


def _code(entry: tuple[str, bytes]) -> bytes:
    return entry[1]


Descriptor = (
    TableDescriptor | DatabaseDescriptor | ViewDescriptor | SequenceDescriptor | TypeDescriptor
)
NamedRelation = (
    TableDescriptor | ViewDescriptor | SequenceDescriptor
)  # what a name in a database names


@functools.lru_cache(maxsize=1024)
def decode_descriptor(raw: bytes) -> Descriptor:
    """The descriptor stored as ``raw``. Every statement reads its table's descriptor
    (a read, so schema changes and transactions see the version they should), but the
    same bytes decode to the same immutable descriptor: decoding is cached by them, and
    with it the row codec's plan kept on the descriptor."""
    data = json.loads(raw)
    if "table" in data:
        return TableDescriptor.from_dict(data["table"])
    if "view" in data:
        view = data["view"]
        return ViewDescriptor(
            view["id"],
            view["name"],
            view["database_id"],
            view["query"],
            tuple(view["columns"]),
            tuple(view.get("depends_on", ())),
        )
    if "sequence" in data:
        sequence = dict(data["sequence"])
        owner = sequence.pop("owner", None)
        return SequenceDescriptor(**sequence, owner=(owner[0], owner[1]) if owner else None)
    if "type" in data:
        found = data["type"]
        if "codes" not in found:
            # NB: before enum labels had codes, keys and values held label positions;
            # nothing here reads those
            raise SQLError(
                "XX000",
                f"enum type {found['name']!r} was written by an older feedkv, whose "
                "enum values this version cannot read; recreate the type and the "
                "tables that use it",
            )
        return TypeDescriptor(
            found["id"],
            found["name"],
            found["database_id"],
            tuple(found["labels"]),
            tuple(bytes.fromhex(code) for code in found["codes"]),
            tuple((label, bytes.fromhex(code)) for label, code in found.get("adding", ())),
        )
    db = data["database"]
    return DatabaseDescriptor(db["id"], db["name"])


def quote_name(name: str) -> str:
    """``name`` as an identifier: bare when it is lower-case, plain and not a reserved
    word, else quoted."""
    plain = (
        name
        and (name[0].isalpha() or name[0] == "_")
        and all(ch.isalnum() or ch == "_" for ch in name)
        and name == name.lower()
        and name.isascii()
    )
    if plain and name.upper() not in RESERVED_WORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


# PostgreSQL's reserved key words (and CockroachDB's FAMILY): a name spelled like one
# must be quoted to be read back.
RESERVED_WORDS = frozenset(
    """ALL ANALYSE ANALYZE AND ANY ARRAY AS ASC ASYMMETRIC BOTH CASE CAST CHECK COLLATE
    COLUMN CONSTRAINT CREATE CURRENT_CATALOG CURRENT_DATE CURRENT_ROLE CURRENT_TIME
    CURRENT_TIMESTAMP CURRENT_USER DEFAULT DEFERRABLE DESC DISTINCT DO ELSE END EXCEPT FALSE
    FAMILY FETCH FOR FOREIGN FROM GRANT GROUP HAVING IN INITIALLY INTERSECT INTO LATERAL
    LEADING LIMIT LOCALTIME LOCALTIMESTAMP NOT NULL OFFSET ON ONLY OR ORDER PLACING PRIMARY
    REFERENCES RETURNING SELECT SESSION_USER SOME SYMMETRIC TABLE THEN TO TRAILING TRUE UNION
    UNIQUE USER USING VARIADIC WHEN WHERE WINDOW WITH""".split()  # noqa: SIM905
)
