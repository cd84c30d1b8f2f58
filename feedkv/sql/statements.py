"""The statements feedkv's SQL dialect understands, as the parser produces them.

Expressions stay sqlglot expression trees (:mod:`feedkv.sql.expr` compiles them); the
statement around them is one of the frozen dataclasses below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sqlglot import exp

from feedkv.sql.types import ColumnType

__all__ = [
    "ROW_ASSIGNMENT",
    "CancelActivity",
    "Explain",
    "ShowSessions",
    "DeclareCursor",
    "FetchCursor",
    "FetchKind",
    "CloseCursor",
    "RowLock",
    "AddPrimaryKey",
    "AddColumn",
    "AlterColumn",
    "AlterTableActions",
    "AddConstraint",
    "AlterChangefeed",
    "AlterUserPassword",
    "Begin",
    "ChangefeedTarget",
    "ConfigureZone",
    "PartitionSpec",
    "Partitioning",
    "ColumnSpec",
    "Cte",
    "Commit",
    "CopyRows",
    "ControlJob",
    "CreateChangefeed",
    "CreateDatabase",
    "CreateTable",
    "CreateSequence",
    "CheckSpec",
    "AlterSequence",
    "AlterTypeAddValue",
    "AlterTypeRenameValue",
    "CreateEnum",
    "CreateIndex",
    "CreateTableAs",
    "CreateUser",
    "CreateView",
    "Delete",
    "Derived",
    "DropColumn",
    "DropConstraint",
    "DropDatabase",
    "DropTable",
    "DropIndex",
    "DropType",
    "DropUser",
    "DropSequence",
    "DropView",
    "FamilySpec",
    "ForeignKeySpec",
    "REFERENTIAL_ACTIONS",
    "IndexSpec",
    "GrantRole",
    "ImportInto",
    "GrantPrivileges",
    "DATABASE_PRIVILEGES",
    "PRIVILEGES",
    "Insert",
    "Join",
    "Maintenance",
    "Query",
    "RenameColumn",
    "RenameTable",
    "Rollback",
    "Savepoint",
    "Select",
    "RowsFrom",
    "Series",
    "Unnest",
    "SetOperation",
    "SessionVariable",
    "SetTransaction",
    "ShowChangefeedJobs",
    "ShowCreateChangefeed",
    "ShowCreateAllTables",
    "ShowCreateTable",
    "ShowDatabases",
    "ShowRegions",
    "ShowSchemas",
    "ShowStatistics",
    "ShowUsers",
    "ShowGrants",
    "ShowIndexes",
    "ShowColumns",
    "ShowPartitions",
    "ShowDatabaseRanges",
    "ShowRanges",
    "ShowZoneConfiguration",
    "ShowTables",
    "Source",
    "SourceShow",
    "SplitAt",
    "Relocate",
    "Statement",
    "StatementSource",
    "TableName",
    "Truncate",
    "CommentOn",
    "Update",
    "Values",
    "modifying_cte",
]


# The name of the derived table a multiple-column UPDATE item reads its subquery's row
# from: it names exactly as many columns as the subquery gives, else 42601.
ROW_ASSIGNMENT = "__row_assignment"


@dataclass(frozen=True, slots=True)
class TableName:
    """A table as written: ``t``, ``db.t`` or ``db.public.t`` (``database`` is ``None``
    for the session's current database)."""

    name: str
    database: str | None = None

    def __str__(self) -> str:
        return f"{self.database}.{self.name}" if self.database else self.name


@dataclass(frozen=True, slots=True)
class Statement:
    """Base of every statement; ``text`` is the statement as written."""

    text: str


@dataclass(frozen=True, slots=True)
class Begin(Statement):
    """``BEGIN [TRANSACTION] [mode, ...]`` (or ``START TRANSACTION``): ``priority`` is
    LOW, NORMAL or HIGH when given; ``isolation`` the level named (upgraded to
    serializable, as CockroachDB); ``read_only`` READ ONLY (True) or READ WRITE
    (False), else the session's default_transaction_read_only; ``as_of`` AS OF SYSTEM
    TIME's expression: a read-only transaction reading at that time."""

    priority: str | None = None
    isolation: str | None = None
    read_only: bool | None = None
    as_of: exp.Expr | None = None


@dataclass(frozen=True, slots=True)
class SetTransaction(Statement):
    """``SET TRANSACTION mode, ...`` in an open transaction: as BEGIN's modes."""

    priority: str | None = None
    isolation: str | None = None
    read_only: bool | None = None
    as_of: exp.Expr | None = None


@dataclass(frozen=True, slots=True)
class Commit(Statement):
    pass


@dataclass(frozen=True, slots=True)
class Rollback(Statement):
    pass


@dataclass(frozen=True, slots=True)
class Savepoint(Statement):
    """``SAVEPOINT name`` (``action`` savepoint), ``RELEASE [SAVEPOINT] name`` (release)
    or ``ROLLBACK TO [SAVEPOINT] name`` (rollback); ``name`` lower-cased unless quoted."""

    action: Literal["savepoint", "release", "rollback"]
    name: str


@dataclass(frozen=True, slots=True)
class CreateDatabase(Statement):
    name: str
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropDatabase(Statement):
    name: str
    if_exists: bool = False
    cascade: bool = False


@dataclass(frozen=True, slots=True)
class ShowDatabases(Statement):
    pass


@dataclass(frozen=True, slots=True)
class ShowUsers(Statement):
    """``SHOW USERS`` or ``SHOW ROLES``."""


@dataclass(frozen=True, slots=True)
class SequenceSettings:
    """A sequence's options as written (``None``: the default, which depends on the
    increment's sign)."""

    increment: int = 1
    min_value: int | None = None
    max_value: int | None = None
    start: int | None = None


@dataclass(frozen=True, slots=True)
class Identity:
    """``GENERATED {ALWAYS | BY DEFAULT} AS IDENTITY [(options)]``: the column takes
    the values of a sequence of its own; ``options`` is the options' text as written."""

    always: bool
    options: str = ""
    sequence: SequenceSettings = SequenceSettings()


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    name: str
    type: ColumnType
    nullable: bool = True
    default: exp.Expr | None = None
    primary_key: bool = False
    family: str | None = None
    create_family: bool = False
    computed: exp.Expr | None = None  # AS (expression) STORED | VIRTUAL
    virtual: bool = False
    hidden: bool = False  # NOT VISIBLE: left out of SELECT *
    family_if_not_exists: bool = False  # CREATE IF NOT EXISTS FAMILY: join it if it exists
    identity: Identity | None = None


@dataclass(frozen=True, slots=True)
class FamilySpec:
    name: str | None
    columns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """An index (``unique``: a UNIQUE constraint or index) on ``columns``; ``name``
    None: named for the table and columns. ``constraint``: made by a UNIQUE
    constraint, not as an index."""

    name: str | None
    columns: tuple[str, ...]
    unique: bool = False
    storing: tuple[str, ...] = ()
    constraint: bool = False
    descending: tuple[bool, ...] = ()  # per column (empty: all ascending)
    predicate: exp.Expr | None = None  # a partial index's WHERE
    # per column (empty: none): an expression index's expression, its column's name ""
    expressions: tuple[exp.Expr | None, ...] = ()


@dataclass(frozen=True, slots=True)
class CheckSpec:
    name: str | None
    expression: exp.Expr
    column: str | None = None  # a column's own CHECK (names the constraint)


REFERENTIAL_ACTIONS = ("NO ACTION", "RESTRICT", "CASCADE", "SET NULL", "SET DEFAULT")


@dataclass(frozen=True, slots=True)
class ForeignKeySpec:
    """``FOREIGN KEY (columns) REFERENCES table [(referenced)] [ON DELETE action] [ON
    UPDATE action]`` (no ``referenced``: the table's primary key)."""

    name: str | None
    columns: tuple[str, ...]
    table: TableName
    referenced: tuple[str, ...] = ()
    on_delete: str = "NO ACTION"
    on_update: str = "NO ACTION"


@dataclass(frozen=True, slots=True)
class CreateTable(Statement):
    table: TableName
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...] | None
    families: tuple[FamilySpec, ...]
    if_not_exists: bool = False
    indexes: tuple[IndexSpec, ...] = ()
    checks: tuple[CheckSpec, ...] = ()
    foreign_keys: tuple[ForeignKeySpec, ...] = ()
    partitioning: Partitioning | None = None
    # ``WITH (name = value, ...)``: PostgreSQL's storage parameters, by name (lower case).
    storage_params: tuple[str, ...] = ()
    primary_descending: tuple[bool, ...] = ()  # per primary key column: DESC


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    """One partition of ``PARTITION BY LIST``: ``VALUES IN (...)`` (``values``, a
    tuple per value; ``default`` for ``VALUES IN (DEFAULT)``), or of ``PARTITION BY
    RANGE``: ``VALUES FROM (start) TO (end)`` (``()``: MINVALUE / MAXVALUE)."""

    name: str
    values: tuple[tuple[exp.Expr, ...], ...] = ()
    default: bool = False
    start: tuple[exp.Expr, ...] | None = None
    end: tuple[exp.Expr, ...] | None = None


@dataclass(frozen=True, slots=True)
class Partitioning:
    """``PARTITION BY LIST | RANGE (columns) (partitions)`` of a CREATE TABLE, on a
    prefix of its primary key (CockroachDB's table partitions)."""

    kind: Literal["list", "range"]
    columns: tuple[str, ...]
    partitions: tuple[PartitionSpec, ...]


@dataclass(frozen=True, slots=True)
class DropTable(Statement):
    tables: tuple[TableName, ...]
    if_exists: bool = False
    cascade: bool = False  # drop the views that read them too


@dataclass(frozen=True, slots=True)
class AddColumn(Statement):
    table: TableName
    column: ColumnSpec
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class AlterTableActions(Statement):
    """``ALTER TABLE t action, action, ...``: each of ``actions`` (ADD, DROP and ALTER
    COLUMN, RENAME COLUMN; an added column's UNIQUE, CHECK and REFERENCES as the ADD
    CONSTRAINT after it) in order, in the statement's transaction. None: ``ALTER TABLE
    t SET (schema_locked = false)``, what every feedkv table is."""

    table: TableName
    actions: tuple[AddColumn | AddConstraint | DropColumn | AlterColumn | RenameColumn, ...]


@dataclass(frozen=True, slots=True)
class AlterColumn(Statement):
    """``ALTER TABLE t ALTER [COLUMN] c`` and one change: ``SET DEFAULT e`` (``default``),
    ``DROP DEFAULT`` (``drop_default``), ``SET NOT NULL`` / ``DROP NOT NULL``
    (``not_null``), ``[SET DATA] TYPE type [USING e]`` (``new_type``, ``using``), or
    ``DROP STORED`` (``drop_stored``)."""

    table: TableName
    column: str
    default: exp.Expr | None = None
    drop_default: bool = False
    not_null: bool | None = None
    new_type: ColumnType | None = None
    using: exp.Expr | None = None
    drop_stored: bool = False  # DROP STORED: a stored computed column becomes a plain one


@dataclass(frozen=True, slots=True)
class DropColumn(Statement):
    table: TableName
    column: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class RenameTable(Statement):
    """``ALTER TABLE t RENAME TO u`` (``view``: ``ALTER VIEW v RENAME TO w``)."""

    table: TableName
    new_name: TableName
    if_exists: bool = False
    view: bool = False


@dataclass(frozen=True, slots=True)
class RenameColumn(Statement):
    """``ALTER TABLE t RENAME COLUMN a TO b``."""

    table: TableName
    column: str
    new_name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class Truncate(Statement):
    tables: tuple[TableName, ...]
    cascade: bool = False  # the tables whose foreign keys reference them go empty too


@dataclass(frozen=True, slots=True)
class ShowTables(Statement):
    database: str | None = None


@dataclass(frozen=True, slots=True)
class ShowCreateTable(Statement):
    table: TableName


@dataclass(frozen=True, slots=True)
class ShowCreateAllTables(Statement):
    """``SHOW CREATE ALL TABLES``: the statements that make every relation of the
    session's database."""


@dataclass(frozen=True, slots=True)
class ShowSchemas(Statement):
    """``SHOW SCHEMAS [FROM database]`` (``None``: the session's database)."""

    database: str | None = None


@dataclass(frozen=True, slots=True)
class ShowStatistics(Statement):
    """``SHOW STATISTICS FOR TABLE t``."""

    table: TableName


@dataclass(frozen=True, slots=True)
class ShowRegions(Statement):
    """``SHOW REGIONS [FROM CLUSTER]`` (``cluster``: the shorter shape)."""

    cluster: bool = False


@dataclass(frozen=True, slots=True)
class ShowRanges(Statement):
    table: TableName


@dataclass(frozen=True, slots=True)
class ShowDatabaseRanges(Statement):
    """``SHOW RANGES [FROM DATABASE d]``: the ranges of each table of the database
    (``None``: the session's current one)."""

    database: str | None = None


@dataclass(frozen=True, slots=True)
class ConfigureZone(Statement):
    """``ALTER TABLE t CONFIGURE ZONE USING name = value, ...`` (or ``ALTER RANGE default
    ...``: ``table`` is ``None``): the zone configuration's settings as written, values
    as text; ``discard``: ``CONFIGURE ZONE DISCARD`` (back to the default zone's)."""

    table: TableName | None
    settings: tuple[tuple[str, str | None], ...]
    discard: bool = False


@dataclass(frozen=True, slots=True)
class ShowZoneConfiguration(Statement):
    """``SHOW ZONE CONFIGURATION FOR RANGE default`` / ``FOR TABLE t`` (``table``), or
    ``SHOW ZONE CONFIGURATIONS`` (``every``: the default zone and each table's own)."""

    table: TableName | None = None
    every: bool = False


@dataclass(frozen=True, slots=True)
class ShowPartitions(Statement):
    """``SHOW PARTITIONS FROM TABLE t``."""

    table: TableName


@dataclass(frozen=True, slots=True)
class SplitAt(Statement):
    table: TableName
    rows: tuple[tuple[exp.Expr, ...], ...]


@dataclass(frozen=True, slots=True)
class Relocate(Statement):
    """``ALTER TABLE t RELOCATE [LEASE] VALUES (target, key...), ...``: each row names
    where the range holding a primary key goes (``ARRAY[node ids]``, or a node id for
    ``LEASE``) and the key's leading values."""

    table: TableName
    rows: tuple[tuple[exp.Expr, ...], ...]
    lease: bool = False


@dataclass(frozen=True, slots=True)
class CreateUser(Statement):
    name: str
    if_not_exists: bool = False
    password: str | None = None  # in clear: only its SCRAM verifier is stored
    login: bool = True  # CREATE ROLE: False unless LOGIN is given


@dataclass(frozen=True, slots=True)
class AlterUserPassword(Statement):
    """``ALTER USER | ROLE name [WITH] [PASSWORD 'p' | NULL] [LOGIN | NOLOGIN]``."""

    name: str
    password: str | None  # None: no password (certificates only)
    set_password: bool = True  # False: PASSWORD was not given (it stays)
    login: bool | None = None  # LOGIN | NOLOGIN (None: neither given, it stays)


@dataclass(frozen=True, slots=True)
class DropUser(Statement):
    names: tuple[str, ...]
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class GrantRole(Statement):
    """``GRANT role, ... TO u, ...`` (``revoke``: ``REVOKE role, ... FROM u, ...``):
    the users become (or stop being) members of the roles, whose privileges they
    then hold; ``admin``'s members are admins."""

    roles: tuple[str, ...]
    users: tuple[str, ...]
    revoke: bool = False


@dataclass(frozen=True, slots=True)
class ShowGrants(Statement):
    """``SHOW GRANTS [ON [TABLE] t | ON DATABASE d] [FOR u]``, or ``SHOW GRANTS ON ROLE
    [r, ...] [FOR u]`` (``on_role``; ``roles`` empty: every role)."""

    table: TableName | None = None
    user: str | None = None
    on_role: bool = False
    roles: tuple[str, ...] = ()
    database: str | None = None  # ON DATABASE d


# Privileges a user without the admin role may be granted on a table (GRANT ... ON
# TABLE) and on a database (GRANT ... ON DATABASE: CREATE its tables, DROP it)
PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "CHANGEFEED", "DROP", "CREATE")
DATABASE_PRIVILEGES = ("CREATE", "DROP")


@dataclass(frozen=True, slots=True)
class GrantPrivileges(Statement):
    """``GRANT privileges ON [TABLE] t, ... TO u, ...`` or ``... ON DATABASE d, ...``
    (``revoke``: ``REVOKE ... FROM``)."""

    privileges: tuple[str, ...]
    tables: tuple[TableName, ...]
    users: tuple[str, ...]
    revoke: bool = False
    databases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Insert(Statement):
    """INSERT or UPSERT. ``on_conflict`` is ``None`` (a duplicate key is an error),
    ``"nothing"`` or ``"update"`` (with ``conflict_sets``, which may refer to
    ``excluded.col``); ``conflict_target`` names the columns of ``ON CONFLICT (...)``,
    ``conflict_constraint`` the constraint of ``ON CONFLICT ON CONSTRAINT name`` (the
    plan takes its columns as the target). UPSERT is INSERT ... ON CONFLICT DO UPDATE of
    the given columns."""

    table: TableName
    columns: tuple[str, ...] | None
    rows: tuple[tuple[exp.Expr, ...], ...]
    on_conflict: str | None = None
    conflict_sets: tuple[tuple[str, exp.Expr], ...] = ()
    returning: tuple[exp.Expr, ...] | None = None
    upsert: bool = False
    conflict_target: tuple[str, ...] = ()
    conflict_where: exp.Expr | None = None  # DO UPDATE ... WHERE: rows it refuses stay
    query: Query | None = None  # INSERT ... SELECT (then ``rows`` is empty)
    subqueries: tuple[tuple[exp.Expr, Query], ...] = ()  # those of ``rows``, as Select's
    conflict_constraint: str | None = None
    # those of ON CONFLICT DO UPDATE's SET and WHERE, which may name the row and excluded
    conflict_subqueries: tuple[tuple[exp.Expr, Query], ...] = ()
    overriding: str | None = None  # OVERRIDING SYSTEM VALUE ("SYSTEM") or USER VALUE
    alias: str | None = None  # INSERT INTO t AS a: ON CONFLICT and RETURNING name it a


@dataclass(frozen=True, slots=True)
class CopyRows(Statement):
    """The rows of a ``COPY ... FROM STDIN``, column by column (never parsed from text:
    the wire protocol hands them over): ``columns[i]`` holds the values of the column
    ``names[i]`` (text, or what a binary COPY decoded), every column as long. ``text``
    is the one-row INSERT the rows would otherwise run as."""

    table: TableName
    names: tuple[str, ...]
    columns: tuple[list[Any], ...]


@dataclass(frozen=True, slots=True)
class Update(Statement):
    """UPDATE; with ``limit``, only the first rows in ``order_by``'s order (the primary
    key's without it) are written, one after the other in that order."""

    table: TableName
    sets: tuple[tuple[str, exp.Expr], ...]
    where: exp.Expr | None = None
    returning: tuple[exp.Expr, ...] | None = None
    order_by: tuple[tuple[exp.Expr, bool], ...] = ()  # (expression, descending)
    limit: exp.Expr | None = None
    alias: str | None = None
    # UPDATE ... FROM: the sources joined to the table (a comma is a CROSS JOIN); SET,
    # WHERE and RETURNING name their columns, and each row is written once.
    joins: tuple[Join, ...] = ()
    subqueries: tuple[tuple[exp.Expr, Query], ...] = ()  # as Select's


@dataclass(frozen=True, slots=True)
class Delete(Statement):
    """DELETE; ``order_by`` and ``limit`` as in :class:`Update`."""

    table: TableName
    where: exp.Expr | None = None
    returning: tuple[exp.Expr, ...] | None = None
    order_by: tuple[tuple[exp.Expr, bool], ...] = ()  # (expression, descending)
    limit: exp.Expr | None = None
    alias: str | None = None
    joins: tuple[Join, ...] = ()  # DELETE ... USING, as UPDATE ... FROM's
    subqueries: tuple[tuple[exp.Expr, Query], ...] = ()  # as Select's


@dataclass(frozen=True, slots=True)
class Derived:
    """A query read as a table: ``FROM (SELECT ...) AS alias (columns)``; ``columns``
    renames the query's leading columns. A ``lateral`` one (``LATERAL (SELECT ...)``)
    may name the columns of the sources to its left, and runs again for each of their
    rows (:class:`~feedkv.sql.join.JoinStep`)."""

    query: Query
    alias: str
    columns: tuple[str, ...] = ()
    lateral: bool = False


@dataclass(frozen=True, slots=True)
class ShowSource:
    """The rows of a job statement read as a table: ``FROM [SHOW CHANGEFEED JOBS]``,
    ``FROM crdb_internal.jobs``; ``alias`` qualifies its columns."""

    statement: ShowChangefeedJobs
    alias: str


@dataclass(frozen=True, slots=True)
class StatementSource:
    """The rows of a statement read as a table (CockroachDB's syntax): the RETURNING rows
    of a write, ``FROM [INSERT ... RETURNING a]``, or a SHOW's, ``FROM [SHOW CREATE t]``.
    The statement runs, in the reading statement's transaction, when the source is read;
    ``alias`` qualifies its columns."""

    statement: Insert | Update | Delete | SourceShow
    alias: str


@dataclass(frozen=True, slots=True)
class Series:
    """``FROM generate_series(start, stop [, step]) [AS alias [(column)]]``: one column
    (named ``column``) of the numbers from ``start`` to ``stop``, both included, ``step``
    apart; its arguments are constants of the statement. ``ordinality``: the name of
    the column WITH ORDINALITY adds (each row's number, from 1), if asked."""

    args: tuple[exp.Expr, ...]
    alias: str
    column: str
    ordinality: str | None = None


@dataclass(frozen=True, slots=True)
class Unnest:
    """``FROM unnest(array [, array...]) [AS alias [(columns)]]``: a column per array
    (named by ``columns``), a row per element, the shorter arrays padded with NULLs, as
    PostgreSQL's; its arguments are constants of the statement. ``ordinality``: as
    :class:`Series`'s."""

    args: tuple[exp.Expr, ...]
    alias: str
    columns: tuple[str, ...]
    ordinality: str | None = None


@dataclass(frozen=True, slots=True)
class RowsFrom:
    """``FROM ROWS FROM (f(...), g(...)) [AS alias [(columns)]]``: the functions' rows
    side by side, the n-th row of each together, a function with fewer rows padded
    with NULLs (as PostgreSQL's); ``columns`` renames the leading columns. Several
    set-returning functions in a SELECT list are read as one of these, as PostgreSQL
    10 and CockroachDB run them: in lockstep."""

    functions: tuple[Series | Unnest, ...]
    alias: str
    columns: tuple[str, ...] = ()


# What FROM and JOIN read
Source = TableName | Derived | ShowSource | StatementSource | Series | Unnest | RowsFrom


@dataclass(frozen=True, slots=True)
class Cte:
    """``WITH name (columns) AS (query)``: ``query`` runs once, before the statement,
    and ``name`` reads its rows. A ``recursive`` one (WITH RECURSIVE, naming itself)
    is a UNION [ALL] whose right side runs again over the rows the last run added. A
    data-modifying one (an INSERT, UPDATE or DELETE) makes its change once, and ``name``
    reads the rows its RETURNING gives. NB: unlike PostgreSQL's, the statement's other
    reads of the table it changed see the change (they run after it, in its transaction,
    where PostgreSQL's all read one snapshot taken before)."""

    name: str
    query: Query | Insert | Update | Delete
    columns: tuple[str, ...] = ()
    recursive: bool = False


def modifying_cte(statement: Statement) -> Insert | Update | Delete | None:
    """The first data-modifying CTE's statement of a query (``None``: it has none)."""
    for cte in getattr(statement, "ctes", ()):
        if isinstance(cte.query, Insert | Update | Delete):
            return cte.query
    return None


@dataclass(frozen=True, slots=True)
class Join:
    """``<side> JOIN table [AS alias] ON on`` after a SELECT's first table; ``side`` is
    ``inner``, ``left``, ``right``, ``full`` or ``cross`` (no ``on``). ``using`` names the
    columns of ``USING (...)``, ``natural`` is NATURAL JOIN (the columns both sides have):
    each pair is equal, and the two become one column."""

    table: Source
    alias: str | None
    index: str | None
    side: Literal["inner", "left", "right", "full", "cross"]
    on: exp.Expr | None = None
    using: tuple[str, ...] = ()
    natural: bool = False


@dataclass(frozen=True, slots=True)
class RowLock:
    """A SELECT's locking clause: ``FOR UPDATE``, ``FOR NO KEY UPDATE`` (both
    ``exclusive``), ``FOR SHARE`` or ``FOR KEY SHARE``; ``of``: the tables (their names
    or aliases) of ``OF t, ...``, empty for every table the SELECT reads; ``nowait``:
    fail at once (55P03) on a row another transaction holds, rather than wait;
    ``skip_locked``: leave such rows out of the result (``SKIP LOCKED``)."""

    strength: str  # as written: "FOR UPDATE", "FOR NO KEY UPDATE", "FOR SHARE", ...
    exclusive: bool
    of: tuple[str, ...] = ()
    nowait: bool = False
    skip_locked: bool = False


@dataclass(frozen=True, slots=True)
class Select(Statement):
    """A SELECT over one source (a table, a CTE's or a subquery's rows), the sources it
    joins, or none. ``as_of`` is the AS OF SYSTEM TIME expression, if any;
    ``distinct_on`` the expressions of DISTINCT ON (...)."""

    table: Source | None
    alias: str | None
    items: tuple[exp.Expr, ...]
    where: exp.Expr | None = None
    order_by: tuple[tuple[exp.Expr, bool], ...] = ()  # (expression, descending)
    limit: exp.Expr | None = None
    offset: exp.Expr | None = None
    as_of: exp.Expr | None = None
    index: str | None = None  # the index named by ``t@index``
    group_by: tuple[exp.Expr, ...] = ()
    having: exp.Expr | None = None
    distinct: bool = False
    distinct_on: tuple[exp.Expr, ...] = ()
    joins: tuple[Join, ...] = ()
    # Its subqueries (not theirs): the node each stands at (a scalar or IN's Subquery,
    # an Exists) and the query it runs, before the statement's rows are read.
    subqueries: tuple[tuple[exp.Expr, Query], ...] = ()
    ctes: tuple[Cte, ...] = ()
    locks: tuple[RowLock, ...] = ()  # FOR UPDATE and the like, in the order written


@dataclass(frozen=True, slots=True)
class SetOperation(Statement):
    """``left UNION | INTERSECT | EXCEPT [ALL] right``; ``order_by``, ``limit`` and
    ``offset`` apply to the whole (ORDER BY names a result column or its position)."""

    op: Literal["union", "intersect", "except"]
    all: bool
    left: Query
    right: Query
    order_by: tuple[tuple[exp.Expr, bool], ...] = ()
    limit: exp.Expr | None = None
    offset: exp.Expr | None = None
    ctes: tuple[Cte, ...] = ()


@dataclass(frozen=True, slots=True)
class Values(Statement):
    """``VALUES (a, b), (c, d)`` as a query (a statement, or read as a table): its
    columns are ``column1``, ``column2``, ... of the types the rows share."""

    rows: tuple[tuple[exp.Expr, ...], ...]
    ctes: tuple[Cte, ...] = ()


Query = Select | SetOperation | Values


@dataclass(frozen=True, slots=True)
class Explain(Statement):
    """``EXPLAIN [ANALYZE] statement``: the plan of a query, INSERT, UPDATE or DELETE
    (:mod:`feedkv.sql.explain`); with ``analyze``, the statement runs and the plan says
    what it read and how long it took."""

    statement: Query | Insert | Update | Delete
    analyze: bool = False


@dataclass(frozen=True, slots=True)
class DeclareCursor(Statement):
    """``DECLARE name [BINARY] [ASENSITIVE | INSENSITIVE] [[NO] SCROLL] CURSOR
    [{WITH | WITHOUT} HOLD] FOR query`` (:mod:`feedkv.sql.cursors`); ``name``
    lower-cased unless quoted; ``scroll`` None when neither SCROLL nor NO SCROLL."""

    name: str
    query: Query
    binary: bool = False
    scroll: bool | None = None
    hold: bool = False


FetchKind = Literal["count", "all", "backward_all", "first", "last", "absolute", "relative"]


@dataclass(frozen=True, slots=True)
class FetchCursor(Statement):
    """``FETCH`` or (``move``) ``MOVE`` ``[direction] [FROM | IN] name``: ``kind`` is
    ``count`` (NEXT, PRIOR, n, FORWARD [n], BACKWARD [n]: ``count`` rows, negative
    backwards), ``all`` (ALL, FORWARD ALL), ``backward_all``, ``first``, ``last``,
    ``absolute`` or ``relative`` (with ``count``)."""

    name: str
    kind: FetchKind
    count: int = 1
    move: bool = False


@dataclass(frozen=True, slots=True)
class CloseCursor(Statement):
    """``CLOSE name`` or (``name`` None) ``CLOSE ALL``."""

    name: str | None


@dataclass(frozen=True, slots=True)
class ChangefeedTarget:
    """``TABLE t`` or ``TABLE t FAMILY f`` in a changefeed's target list, and with
    ``VALUES FROM (start) TO (end)`` only the rows whose primary key is in
    ``[start, end)`` (each a tuple of a prefix of the key's columns)."""

    table: TableName
    family: str | None = None
    start: tuple[exp.Expr, ...] | None = None
    end: tuple[exp.Expr, ...] | None = None
    partition: str | None = None  # PARTITION p: the rows of that partition of the table


@dataclass(frozen=True, slots=True)
class ImportInto(Statement):
    """``IMPORT INTO t [(columns)] CSV DATA ('uri', ...) [WITH option = 'value', ...]``:
    ``columns`` ``None`` for all visible columns in order; ``options`` keep the order
    written (``None`` for a bare option)."""

    table: TableName
    columns: tuple[str, ...] | None
    uris: tuple[str, ...]
    options: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class CreateChangefeed(Statement):
    """``CREATE CHANGEFEED FOR ... [INTO 'uri'] [WITH ...]``, the sinkless
    ``EXPERIMENTAL CHANGEFEED FOR ...``, or the CDC query form ``CREATE CHANGEFEED
    [INTO ...] [WITH ...] AS SELECT ...`` (``query``; its single table is the target).

    ``options`` keep the order written; a value is ``None`` for a bare option
    (``WITH updated``), else its text."""

    targets: tuple[ChangefeedTarget, ...]
    sink: str | None
    options: tuple[tuple[str, str | None], ...] = ()
    query: Select | None = None
    name: TableName | None = None  # CREATE CHANGEFEED <name> FOR ...: a named changefeed
    database: str | None = None  # FOR DATABASE db: every table of it (then no targets)


@dataclass(frozen=True, slots=True)
class ShowChangefeedJobs(Statement):
    """``SHOW CHANGEFEED JOBS``, or ``SHOW CHANGEFEED JOB <id>`` (``job_id``) or
    ``SHOW CHANGEFEED JOB <name>`` (``name``); with ``shape`` ``jobs``, ``SHOW JOBS``
    (``SHOW JOB <id>``): CockroachDB's jobs columns; ``crdb_internal``: the rows of
    ``crdb_internal.jobs``."""

    job_id: int | None = None
    shape: Literal["changefeed", "jobs", "crdb_internal"] = "changefeed"
    name: TableName | None = None
    # SHOW JOBS (<query>): the jobs whose ids the query's first column gives
    query: str | None = None
    # SHOW JOB[S] WHEN COMPLETE: the rows once every job shown is succeeded, failed or
    # canceled
    wait: bool = False
    # SHOW JOB [WHEN COMPLETE] $n: the placeholder whose value is the job id, bound
    # before the statement runs (job_id then)
    job_param: exp.Expr | None = None


@dataclass(frozen=True, slots=True)
class ShowCreateChangefeed(Statement):
    """``SHOW CREATE CHANGEFEED <name>`` (or ``<job id>``): the statement that would
    create the changefeed as it is now. One of ``job_id`` and ``name`` is set."""

    job_id: int | None = None
    name: TableName | None = None


@dataclass(frozen=True, slots=True)
class ClusterSetting(Statement):
    """``SET CLUSTER SETTING <name> = '<value>'`` (``action`` set), ``RESET CLUSTER
    SETTING <name>`` or ``SET ... = DEFAULT`` (reset), ``SHOW CLUSTER SETTING <name>``
    (show), ``SHOW [ALL | PUBLIC] CLUSTER SETTINGS`` (list, ``name`` empty)."""

    action: Literal["set", "reset", "show", "list"]
    name: str
    value: str | None = None


@dataclass(frozen=True, slots=True)
class SessionVariable(Statement):
    """``SET name = value`` (``USE db`` sets ``database``), ``RESET name`` (``value``
    None; ``name`` None: all), ``SHOW name`` (``name`` None: ``SHOW ALL``), and
    ``SET TRANSACTION ISOLATION LEVEL ...`` (``action`` transaction); ``name`` is
    canonical (:mod:`feedkv.sql.session_vars`)."""

    action: Literal["set", "reset", "show", "transaction"]
    name: str | None
    value: str | None = None
    local: bool = False  # SET LOCAL: until the transaction ends


@dataclass(frozen=True, slots=True)
class ControlJob(Statement):
    """``PAUSE JOB <id>``, ``RESUME JOB <id>`` or ``CANCEL JOB <id>``, or the named
    forms ``PAUSE | RESUME | CANCEL | DROP CHANGEFEED <name or id>``; ``action`` is
    pause, resume, cancel or drop (cancel, then forget the job and its name). One of
    ``job_id``, ``name``, ``query`` (``PAUSE JOBS (SELECT ...)``) and ``every``
    (``PAUSE ALL CHANGEFEED JOBS``) is set."""

    action: str
    job_id: int | None
    name: TableName | None = None
    # PAUSE | RESUME | CANCEL JOBS (<query>): the jobs whose ids its first column gives
    query: str | None = None
    every: bool = False  # PAUSE | RESUME | CANCEL ALL CHANGEFEED JOBS
    job_param: exp.Expr | None = None  # PAUSE JOB $n: bound to job_id before it runs


@dataclass(frozen=True, slots=True)
class AlterChangefeed(Statement):
    """``ALTER CHANGEFEED <id or name>`` followed by ``ADD <targets>``, ``DROP
    <targets>``, ``SET <options>``, ``UNSET <names>`` and ``INTO '<sink>'`` commands, in
    any number and order. One of ``job_id`` and ``name`` is set."""

    job_id: int | None
    add: tuple[ChangefeedTarget, ...] = ()
    drop: tuple[ChangefeedTarget, ...] = ()
    set_options: tuple[tuple[str, str | None], ...] = ()
    unset: tuple[str, ...] = ()
    name: TableName | None = None
    sink: str | None = None  # INTO '<sink>': the paused changefeed moves to this sink
    # ADD ... WITH initial_scan: the added targets scanned when the job resumes
    scanned: tuple[ChangefeedTarget, ...] = ()


@dataclass(frozen=True, slots=True)
class CreateView(Statement):
    """``CREATE [OR REPLACE] VIEW v [(columns)] AS query``; ``query_text`` is the
    query as written (what the view stores), ``query`` it parsed."""

    view: TableName
    columns: tuple[str, ...]
    query: Query
    query_text: str
    if_not_exists: bool = False
    replace: bool = False


@dataclass(frozen=True, slots=True)
class DropView(Statement):
    views: tuple[TableName, ...]
    if_exists: bool = False
    cascade: bool = False


@dataclass(frozen=True, slots=True)
class CreateTableAs(Statement):
    """``CREATE TABLE t [(columns)] AS query``: a table of the query's columns (and an
    implicit ``rowid`` key), holding its rows."""

    table: TableName
    columns: tuple[str, ...]
    query: Query
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class CreateSequence(Statement):
    """``CREATE SEQUENCE s [INCREMENT [BY] n] [MINVALUE n] [MAXVALUE n] [START [WITH] n]
    [OWNED BY table.column]`` (``None``: the default, which depends on the increment's
    sign; owned by nothing)."""

    sequence: TableName
    increment: int = 1
    min_value: int | None = None
    max_value: int | None = None
    start: int | None = None
    if_not_exists: bool = False
    owned_by: tuple[TableName, str] | None = None


@dataclass(frozen=True, slots=True)
class AlterSequence(Statement):
    """``ALTER SEQUENCE [IF EXISTS] s`` with any of ``INCREMENT [BY] n``, ``MINVALUE n``
    or ``NO MINVALUE``, ``MAXVALUE n`` or ``NO MAXVALUE``, ``START [WITH] n`` and
    ``RESTART [[WITH] n]`` (``None``, ``False``: not given)."""

    sequence: TableName
    if_exists: bool = False
    increment: int | None = None
    min_value: int | None = None
    no_min_value: bool = False  # NO MINVALUE: the default for the increment's sign
    max_value: int | None = None
    no_max_value: bool = False
    start: int | None = None
    restart: bool = False
    restart_with: int | None = None  # RESTART alone: at the start
    # OWNED BY table.column: the column (a table name, a column name); OWNED BY NONE
    owned_by: tuple[TableName, str] | None = None
    owned_by_none: bool = False


@dataclass(frozen=True, slots=True)
class DropSequence(Statement):
    sequences: tuple[TableName, ...]
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class CreateIndex(Statement):
    table: TableName
    index: IndexSpec
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropIndex(Statement):
    """``DROP INDEX [IF EXISTS] [t@]name [CASCADE]``: ``table`` None: the index is
    looked up by name among the current database's tables."""

    table: TableName | None
    name: str
    if_exists: bool = False
    cascade: bool = False


@dataclass(frozen=True, slots=True)
class ShowIndexes(Statement):
    table: TableName
    with_comment: bool = False  # WITH COMMENT: a comment column (NULL: none)


@dataclass(frozen=True, slots=True)
class ShowColumns(Statement):
    table: TableName
    with_comment: bool = False  # WITH COMMENT: a comment column (NULL: none)


@dataclass(frozen=True, slots=True)
class CommentOn(Statement):
    """``COMMENT ON DATABASE d | TABLE t | COLUMN t.c | INDEX [t@]i IS 'text' | NULL``
    (:mod:`feedkv.sql.comments`): ``database`` names a database's; ``table`` the table
    (of an index: ``None`` when it is looked up by name); ``name`` the column or index;
    ``comment`` ``None`` for ``IS NULL``."""

    kind: Literal["database", "table", "column", "index"]
    comment: str | None
    database: str | None = None
    table: TableName | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class CreateEnum(Statement):
    """``CREATE TYPE name AS ENUM ('label', ...)``."""

    name: TableName
    labels: tuple[str, ...]
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class AlterTypeAddValue(Statement):
    """``ALTER TYPE name ADD VALUE [IF NOT EXISTS] 'label' [BEFORE | AFTER 'existing']``
    (at the end without a placement)."""

    name: TableName
    label: str
    placement: Literal["BEFORE", "AFTER"] | None = None
    existing: str | None = None
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class AlterTypeRenameValue(Statement):
    """``ALTER TYPE name RENAME VALUE 'old' TO 'new'``."""

    name: TableName
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class DropType(Statement):
    names: tuple[TableName, ...]
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class AddConstraint(Statement):
    """``ALTER TABLE t ADD [CONSTRAINT name] UNIQUE (...) | CHECK (...) | FOREIGN KEY
    (...) REFERENCES ...``: the rows already there must satisfy it."""

    table: TableName
    indexes: tuple[IndexSpec, ...] = ()
    checks: tuple[CheckSpec, ...] = ()
    foreign_keys: tuple[ForeignKeySpec, ...] = ()


@dataclass(frozen=True, slots=True)
class AddPrimaryKey(Statement):
    """``ALTER TABLE t ADD [CONSTRAINT name] PRIMARY KEY (columns)`` on a table keyed by
    its hidden ``rowid``: the rows move under the new key."""

    table: TableName
    columns: tuple[str, ...]
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Maintenance(Statement):
    """``VACUUM [options] [tables]`` or ``ANALYZE [tables]``: PostgreSQL's upkeep, which
    feedkv has no use for (MVCC garbage collection reclaims space; no statistics are
    kept); the tables must exist."""

    action: Literal["VACUUM", "ANALYZE"]
    tables: tuple[TableName, ...]


@dataclass(frozen=True, slots=True)
class DropConstraint(Statement):
    table: TableName
    name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class ValidateConstraint(Statement):
    """``ALTER TABLE t VALIDATE CONSTRAINT c`` (SHOW CREATE ALL TABLES writes one per
    foreign key). NB: feedkv checks a constraint's rows when it adds it (it has no NOT
    VALID), so there is nothing left to validate: it only checks that ``c`` is a check
    or foreign key constraint of ``t``."""

    table: TableName
    name: str


@dataclass(frozen=True, slots=True)
class ShowSessions(Statement):
    """``SHOW [ALL] [CLUSTER | LOCAL] SESSIONS``, or ``QUERIES`` (``STATEMENTS``) when
    ``queries`` (:mod:`feedkv.sql.active_sessions`); ``local``: this node's only."""

    queries: bool = False
    local: bool = False


@dataclass(frozen=True, slots=True)
class CancelActivity(Statement):
    """``CANCEL QUERY [IF EXISTS] <id>`` or ``CANCEL SESSION ...`` (``sessions``); the
    plural forms (``CANCEL QUERIES <query>``) take the ids in the first column of
    ``query``'s rows, the singular ones the value of ``id``."""

    sessions: bool
    id: exp.Expr | None
    query: str | None = None
    if_exists: bool = False


# The SHOW statements whose rows a statement may read as a table (see StatementSource).
SourceShow = (
    ShowTables
    | ShowDatabases
    | ShowUsers
    | ShowCreateTable
    | ShowCreateAllTables
    | ShowSchemas
    | ShowStatistics
    | ShowRegions
    | ShowColumns
    | ShowIndexes
    | ShowGrants
    | ShowRanges
    | ShowDatabaseRanges
    | ShowPartitions
    | ShowSessions
)
