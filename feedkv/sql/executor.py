"""Running one statement against the catalog and the rows of a table.

An :class:`Execution` holds what one statement runs with: the reader (a transaction,
or a snapshot for AS OF SYSTEM TIME), the placeholders and the statement's clock. Its
``run`` dispatches on the statement type; every handler returns a :class:`Result`.

Rows are read by scanning the narrowest key span the WHERE clause allows: equality on
every primary key column is a point lookup; equality on a leading part plus a range on
the next column is a key range; anything else scans the table. The full WHERE clause is
then applied to every row read.
"""

from __future__ import annotations

import decimal
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from feedkv.errors import (
    ConditionFailedError,
    InvalidArgumentError,
    InvalidKeyError,
    InvariantViolation,
    SQLError,
    ValueTooLargeError,
)
from feedkv.kv.txn import Txn
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.descriptor import (
    PRIMARY_FAMILY,
    ROWID,
    Column,
    DatabaseDescriptor,
    Family,
    TableDescriptor,
)
from feedkv.sql.expr import (
    AGGREGATES,
    Compiled,
    Context,
    Scope,
    compile_expr,
    contains_aggregate,
    expression_name,
    is_constant,
    qualifier_of,
)
from feedkv.sql.leases import Lease, prepare_change, withdraw_change
from feedkv.sql.parser import parse_expression
from feedkv.sql.row_codec import (
    RowAssembler,
    encode_family_value,
    family_key,
    index_prefix,
    row_kvs,
    row_prefix,
    row_span,
    table_prefix,
    table_span,
)
from feedkv.sql.types import (
    ColumnType,
    Kind,
    coerce,
    format_value,
    from_key_primitive,
    logical_decimal,
    timestamp_of,
)
from feedkv.util.encoding import decode_value
from feedkv.util.keys import Span, check_key, prefix_end

if TYPE_CHECKING:
    from feedkv.kv.db import KVClient
    from feedkv.sql.session_context import SessionContext

__all__ = ["Execution", "Result", "duplicate_key"]


@dataclass(frozen=True)
class Result:
    """What a statement returns: column names, rows (tuples) and a command tag such as
    ``INSERT 0 3``. Iterating a result iterates its rows."""

    columns: tuple[str, ...] = ()
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    tag: str = ""

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        return self.rows[index]


class RowIds:
    """``unique_rowid()``: increasing 64-bit ids, time in units of 10 us in the high bits
    (as CockroachDB does) and a per-process random salt in the low 15, counted up when
    two ids fall in the same tick."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0
        self._salt = random.getrandbits(15)

    def next(self) -> int:
        with self._lock:
            candidate = (time.time_ns() // 10_000) << 15 | self._salt
            self._last = max(self._last + 1, candidate)
            return self._last


ROW_IDS = RowIds()


@dataclass
class _Bound:
    value: Compiled
    inclusive: bool


@dataclass
class _KeyPlan:
    """Constraints on the primary key columns found in WHERE; ``complete`` when WHERE is
    nothing but them (then a span built from exact values needs no filter after it)."""

    equal: list[Compiled]
    low: _Bound | None = None
    high: _Bound | None = None
    complete: bool = False


def _logical_timestamp(txn: Txn | None, db: KVClient) -> decimal.Decimal:
    """``cluster_logical_timestamp()`` of a statement in ``txn``: its read timestamp,
    fixed now if it has none yet (``db.now()`` without a transaction)."""
    if txn is not None:
        if txn.read_ts is None:
            txn.get(catalog.descriptor_key(0))  # fixes the read timestamp
        if txn.read_ts is not None:
            return logical_decimal(txn.read_ts)
    return logical_decimal(db.now())


class Execution:
    """One statement's run (see the module docstring)."""

    def __init__(
        self,
        session: SessionContext,
        txn: Txn | None,
        params: Sequence[Any],
        *,
        autocommit: bool = False,  # the statement's transaction commits right after it
    ) -> None:
        self.session = session
        self.txn = txn
        self.autocommit = autocommit
        self.reader: catalog.Reader | None = txn
        self.after_commit: list[Callable[[], object]] = []
        self.leases: list[Lease] = []  # held until the transaction ends
        self._leasing = False
        self._lease_keys: dict[int, list[bytes]] = {}  # table id -> keys to delete
        self._changed: set[int] = set()  # tables whose leases :meth:`_changing` waited for
        # Rows written blind, by their first key: a failed check at commit is a duplicate.
        self.inserted: dict[bytes, tuple[TableDescriptor, dict[int, Any]]] = {}
        # Rows updated blind, by key: the tag of the result had the row been missing at
        # commit (a tag, not a Result: one is made per UPDATE, and hardly ever used).
        self.missing: dict[bytes, str] = {}
        self.context = Context(
            params=params,
            # NB: not a bound method: the context would hold this execution in a cycle,
            # and every statement would leave its garbage to the cyclic GC.
            logical_timestamp=partial(_logical_timestamp, txn, session.db),
            unique_rowid=ROW_IDS.next,
        )

    def run(self, statement: st.Statement) -> Result:
        handler: Callable[[Execution, Any], Result] | None = _HANDLERS.get(type(statement))
        if handler is None:
            raise SQLError("0A000", f"unsupported statement: {statement.text[:60]}")
        self._leasing = self.autocommit and isinstance(statement, _LEASED)
        try:
            return handler(self, statement)
        except InvalidKeyError as exc:
            raise SQLError("54000", f"primary key too long: {exc}") from None
        except ValueTooLargeError as exc:
            raise SQLError("54000", f"row too large: {exc}") from None
        except InvalidArgumentError as exc:
            code = "22021" if "Unicode" in str(exc) else "22023"
            raise SQLError(code, str(exc)) from None
        except RecursionError:
            raise SQLError("54001", "statement too complex: it nests too deeply") from None
        except decimal.DecimalException:
            raise SQLError("22003", "numeric value out of range") from None
        except TypeError as exc:  # ordering values that have no order (JSONB)
            raise SQLError("42883", f"values cannot be compared: {exc}") from None

    # Plumbing.

    @property
    def _txn(self) -> Txn:
        if self.txn is None:
            raise SQLError("0A000", "this statement needs a transaction")
        return self.txn

    @property
    def _reader(self) -> catalog.Reader:
        if self.reader is None:
            raise SQLError("0A000", "this statement needs a transaction")
        return self.reader

    def _database(self, name: str | None) -> DatabaseDescriptor:
        return self.session.resolve_database(self._reader, name or self.session.database)

    def _table(self, name: st.TableName) -> TableDescriptor:
        if self._leasing and self.reader is self.txn:
            lease = self.session.leased_table(name.database, name.name)
            if lease is not None:
                self.leases.append(lease)
                self._txn.limit_commit(lease.expires)
                return lease.desc
        return self.session.resolve_table(self._reader, name.database, name.name)

    def release_leases(self) -> None:
        leases, self.leases = self.leases, []
        owner = self.session.leases
        if owner is not None:
            for lease in leases:
                owner.release(lease)

    def _changing(self, desc: TableDescriptor) -> None:
        """A new version of ``desc`` will be written: wait for the leases on this one
        (before the rows it rewrites are read, so they are read above every statement
        that used it)."""
        self._changed.add(desc.id)
        self._lease_keys[desc.id] = prepare_change(
            self.session.db, self._txn, desc.id, local=self.session.leases
        )

    def withdraw_changes(self) -> None:
        """The statement's transaction did not commit: take back its pending markers."""
        changed, self._changed = self._changed, set()
        for table_id in changed:
            withdraw_change(self.session.db, table_id)

    def _publish(self, new: TableDescriptor) -> None:
        """Write ``new``, the next version of a table :meth:`_changing` prepared, before
        any row the change rewrites, and move the transaction up to now.

        While the change is pending no lease is granted, so statements read the
        descriptor in their transactions. The new version goes out as an intent at
        once, and the statements that meet it wait (a schema change outranks writers,
        see ``Session``). The rows are read after that, above every statement that read
        the old version: none can write under the rewrite and fail its refresh, which a
        steady stream of writers otherwise did on every retry."""
        txn = self._txn
        # NB: the record goes with the rows, which then resolve with the commit: a
        # changefeed sees the rewrite before the writes that follow it.
        catalog.put_table(txn, new, name_entry=False, anchor=table_span(new.id).start)
        for key in self._lease_keys.pop(new.id):
            txn.delete(key)
        txn.advance_to(self.session.db.now())

    def _require_admin(self, what: str) -> None:
        user = catalog.get_user(self._reader, self.session.user)
        if user is None or not user.admin:
            raise SQLError(
                "42501", f"user {self.session.user} does not have the admin role needed to {what}"
            )

    def _constant(self, node: exp.Expr) -> Any:
        return compile_expr(node, Scope())((), self.context)

    # Databases.

    def create_database(self, s: st.CreateDatabase) -> Result:
        self._require_admin("CREATE DATABASE")
        txn = self._txn
        try:
            catalog.database_by_name(txn, s.name)
        except SQLError:
            catalog.put_database(txn, DatabaseDescriptor(catalog.allocate_id(txn), s.name))
            return Result(tag="CREATE DATABASE")
        if s.if_not_exists:
            return Result(tag="CREATE DATABASE")
        raise SQLError("42P04", f"database {s.name!r} already exists")

    def drop_database(self, s: st.DropDatabase) -> Result:
        self._require_admin("DROP DATABASE")
        txn = self._txn
        try:
            database = catalog.database_by_name(txn, s.name)
        except SQLError:
            if s.if_exists:
                return Result(tag="DROP DATABASE")
            raise
        tables = catalog.list_tables(txn, database)
        if tables and not s.cascade:
            raise SQLError(
                "2BP01",
                f"database {s.name!r} is not empty and CASCADE was not specified "
                f"({len(tables)} tables)",
            )
        for table in tables:
            self._drop_table(table)
        catalog.remove_name(txn, 0, database.name)
        catalog.remove_descriptor(txn, database.id)
        self.session.forget(database=database.name)
        return Result(tag="DROP DATABASE")

    def show_databases(self, s: st.ShowDatabases) -> Result:
        rows = [(d.name, "root") for d in catalog.list_databases(self._reader)]
        rows.sort()
        return Result(("database_name", "owner"), rows, f"SHOW {len(rows)}")

    # Tables.

    def create_table(self, s: st.CreateTable) -> Result:
        self._require_admin("CREATE TABLE")
        txn = self._txn
        database = self._database(s.table.database)
        try:
            catalog.table_by_name(txn, database, s.table.name)
        except SQLError:
            pass
        else:
            if s.if_not_exists:
                return Result(tag="CREATE TABLE")
            raise SQLError("42P07", f'relation "{s.table.name}" already exists')
        desc = self._table_descriptor(s, catalog.allocate_id(txn), database)
        catalog.put_table(txn, desc)
        self.after_commit.append(lambda: self.session.db.split(table_prefix(desc.id)))
        return Result(tag="CREATE TABLE")

    def _table_descriptor(
        self, s: st.CreateTable, table_id: int, database: DatabaseDescriptor
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
            columns.append(self._column(spec, len(columns) + 1, key=spec.name in key_names))
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
            if column.type.kind is Kind.JSONB:
                raise SQLError("0A000", f'column "{name}" of type JSONB cannot be in a primary key')
        if len(set(key_names)) != len(key_names):
            raise SQLError("42701", "a column appears twice in the primary key")
        families = self._families(s, columns, by_name)
        return TableDescriptor(
            id=table_id,
            name=s.table.name,
            database_id=database.id,
            columns=tuple(columns),
            primary_key=tuple(by_name[n].id for n in key_names),
            families=tuple(families),
            next_column_id=len(columns) + 1,
            next_family_id=len(families),
        )

    def _column(self, spec: st.ColumnSpec, column_id: int, *, key: bool) -> Column:
        default = None
        if spec.default is not None:
            if any(True for _ in spec.default.find_all(exp.Column)):
                raise SQLError("0A000", f'default of column "{spec.name}" cannot refer to columns')
            value = self._constant(spec.default)
            coerce(value, spec.type, spec.name)  # a default of the wrong type fails now
            default = spec.default.sql(dialect="postgres")
        return Column(column_id, spec.name, spec.type, spec.nullable and not key, default)

    def _families(
        self, s: st.CreateTable, columns: list[Column], by_name: dict[str, Column]
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
                    raise SQLError(
                        "42703", f'column "{column_name}" in family "{name}" does not exist'
                    )
                if column.id in placed:
                    raise SQLError(
                        "42P16",
                        f'column "{column_name}" is in both family "{placed[column.id]}" '
                        f'and "{name}"',
                    )
                placed[column.id] = name
                members[name].append(column.id)
        for spec in s.columns:
            if spec.family is None:
                continue
            column = by_name[spec.name]
            if column.id in placed:
                raise SQLError("42P16", f'column "{spec.name}" is in more than one family')
            if spec.family not in members:
                members[spec.family] = []
            placed[column.id] = spec.family
            members[spec.family].append(column.id)
        if not members:
            members[PRIMARY_FAMILY] = []
        first = next(iter(members))
        for column in columns:
            if column.id not in placed:
                members[first].append(column.id)
        return [Family(i, name, tuple(ids)) for i, (name, ids) in enumerate(members.items())]

    def drop_table(self, s: st.DropTable) -> Result:
        self._require_admin("DROP TABLE")
        for name in s.tables:
            try:
                desc = self._table(name)
            except SQLError as exc:
                if s.if_exists and exc.code in ("42P01", "3D000"):
                    continue
                raise
            self._drop_table(desc)
        return Result(tag="DROP TABLE")

    def _drop_table(self, desc: TableDescriptor) -> None:
        self._changing(desc)
        self._publish(desc.bumped(dropped=True))
        txn = self._txn
        span = table_span(desc.id)
        txn.delete_range(span.start, span.end)
        catalog.remove_name(txn, desc.database_id, desc.name)
        self.session.forget(table=desc.id)

    def truncate(self, s: st.Truncate) -> Result:
        for name in s.tables:
            desc = self._table(name)
            watchers = catalog.changefeed_watchers(self._reader, desc.id)
            if watchers:
                raise SQLError(
                    "55006",
                    f"cannot TRUNCATE {desc.name!r}: changefeed job {watchers[0]} watches it; "
                    "cancel the changefeed first (or DELETE FROM the table)",
                )
            span = table_span(desc.id)
            self._txn.delete_range(span.start, span.end)
        return Result(tag="TRUNCATE")

    def add_column(self, s: st.AddColumn) -> Result:
        self._require_admin("ALTER TABLE")
        desc = self._table(s.table)
        spec = s.column
        if desc.find_column(spec.name) is not None:
            if s.if_not_exists:
                return Result(tag="ALTER TABLE")
            raise SQLError(
                "42701", f'column "{spec.name}" of relation "{desc.name}" already exists'
            )
        column = self._column(spec, desc.next_column_id, key=False)
        families = list(desc.families)
        next_family_id = desc.next_family_id
        if spec.family is None:
            target = 0
        else:
            matches = [i for i, f in enumerate(families) if f.name == spec.family]
            if matches and spec.create_family:
                raise SQLError("42701", f'family "{spec.family}" already exists')
            if not matches and not spec.create_family:
                raise SQLError("42704", f'family "{spec.family}" does not exist')
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
        families[target] = replace(family, column_ids=(*family.column_ids, column.id))
        new = desc.bumped(
            columns=(*desc.columns, column),
            families=tuple(families),
            next_column_id=desc.next_column_id + 1,
            next_family_id=next_family_id,
        )
        default = _default(column)
        self._changing(desc)
        self._publish(new)
        txn = self._txn
        for row, _pairs in self._rows(desc, table_span(desc.id)):
            value = coerce(default((), self.context), column.type, column.name) if default else None
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
        self.session.forget(table=desc.id)
        return Result(tag="ALTER TABLE")

    def drop_column(self, s: st.DropColumn) -> Result:
        self._require_admin("ALTER TABLE")
        desc = self._table(s.table)
        column = desc.find_column(s.column)
        if column is None:
            if s.if_exists:
                return Result(tag="ALTER TABLE")
            raise SQLError("42703", f'column "{s.column}" does not exist in table "{desc.name}"')
        if column.id in desc.primary_key:
            raise SQLError("0A000", f'column "{column.name}" is referenced by the primary key')
        family = desc.family_of(column.id)
        remaining = tuple(i for i in family.column_ids if i != column.id)
        families = tuple(
            replace(f, column_ids=remaining) if f.id == family.id else f
            for f in desc.families
            if f.id != family.id or remaining or f.id == 0
        )
        new = desc.bumped(
            columns=tuple(c for c in desc.columns if c.id != column.id), families=families
        )
        self._changing(desc)
        self._publish(new)
        txn = self._txn
        for row, pairs in self._rows(desc, table_span(desc.id)):
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
        self.session.forget(table=desc.id)
        return Result(tag="ALTER TABLE")

    def show_tables(self, s: st.ShowTables) -> Result:
        database = self._database(s.database)
        rows = [
            ("public", t.name, "table", "root") for t in catalog.list_tables(self._reader, database)
        ]
        rows.sort()
        return Result(("schema_name", "table_name", "type", "owner"), rows, f"SHOW {len(rows)}")

    def show_create_table(self, s: st.ShowCreateTable) -> Result:
        desc = self._table(s.table)
        database = self._database(s.table.database)
        name = f"{database.name}.public.{desc.name}"
        return Result(
            ("table_name", "create_statement"), [(name, desc.create_statement())], "SHOW 1"
        )

    def show_ranges(self, s: st.ShowRanges) -> Result:
        desc = self._table(s.table)
        span = table_span(desc.id)
        rows = []
        for info in self.session.db.ranges():
            if info.span.overlaps(span):
                rows.append(
                    (
                        self._pretty(desc, max(info.span.start, span.start)),
                        self._pretty(desc, min(info.span.end, span.end)),
                        info.range_id,
                        info.generation,
                    )
                )
        return Result(("start_key", "end_key", "range_id", "generation"), rows, f"SHOW {len(rows)}")

    def _pretty(self, desc: TableDescriptor, key: bytes) -> str:
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
            for column in desc.key_columns:
                if pos >= len(key):
                    break
                raw, pos = decode_value(key, pos)
                values.append(from_key_primitive(column.type.kind, raw))
        except (InvalidArgumentError, SQLError):
            return base + "/" + key.hex()
        return base + "/1/" + "/".join(str(v) for v in values)

    def split_at(self, s: st.SplitAt) -> Result:
        self._require_admin("SPLIT AT")
        desc = self._table(s.table)
        rows = []
        keys = desc.key_columns
        for values in s.rows:
            if len(values) > len(keys):
                raise SQLError(
                    "42601",
                    f"too many columns in SPLIT AT: the primary key has {len(keys)} columns",
                )
            coerced = [
                coerce(self._constant(v), c.type, c.name)
                for v, c in zip(values, keys, strict=False)
            ]
            if any(v is None for v in coerced):
                raise SQLError("22004", "SPLIT AT values cannot be NULL")
            key = check_key(row_prefix(desc, coerced))  # too long: 54000 now, not at commit
            self.after_commit.append(lambda key=key: self.session.db.split(key))  # type: ignore[misc]
            rows.append((key, "/" + "/".join(str(v) for v in coerced), None))
        return Result(("key", "pretty", "split_enforced_until"), rows, f"SPLIT {len(rows)}")

    # Users.

    def create_user(self, s: st.CreateUser) -> Result:
        self._require_admin("CREATE USER")
        if catalog.get_user(self._txn, s.name) is not None:
            if s.if_not_exists:
                return Result(tag="CREATE ROLE")
            raise SQLError("42710", f"a role/user named {s.name} already exists")
        catalog.put_user(self._txn, catalog.User(s.name, admin=False))
        return Result(tag="CREATE ROLE")

    def grant_admin(self, s: st.GrantAdmin) -> Result:
        self._require_admin("GRANT admin")
        for name in s.users:
            if catalog.get_user(self._txn, name) is None:
                raise SQLError("42704", f'role/user "{name}" does not exist')
            catalog.put_user(self._txn, catalog.User(name, admin=True))
        return Result(tag="GRANT")

    # Rows.

    def _rows(
        self, desc: TableDescriptor, span: Span
    ) -> Iterator[tuple[dict[int, Any], dict[bytes, bytes]]]:
        kvs = self._reader.scan(span.start, span.end)
        return RowAssembler(desc).rows(kvs)

    def _matching(
        self, desc: TableDescriptor, selection: _Selection
    ) -> Iterator[tuple[dict[int, Any], dict[bytes, bytes], tuple[Any, ...]]]:
        context = self.context
        span, exact = selection.span(context)
        test = None if exact else selection.test
        ids = [c.id for c in desc.columns]
        for row, pairs in self._rows(desc, span):
            env = tuple(row[i] for i in ids)
            if test is not None:
                verdict = test(env, context)
                if verdict is None:
                    continue
                if not isinstance(verdict, bool):
                    raise SQLError("42804", "argument of WHERE must be type bool")
                if not verdict:
                    continue
            yield row, pairs, env

    def select(self, s: st.Select) -> Result:
        if s.as_of is not None:
            if self.session.in_transaction:
                raise SQLError(
                    "0A000",
                    "AS OF SYSTEM TIME cannot be used inside BEGIN ... COMMIT: a transaction "
                    "reads at its own timestamp",
                )
            ts = timestamp_of(self._constant(s.as_of), self.session.db.now())
            if ts > self.session.db.now():
                raise SQLError("22007", f"AS OF SYSTEM TIME: {ts} is in the future")
            self.reader = catalog.Snapshot(self.session.db, ts)
            self.context.logical_timestamp = partial(logical_decimal, ts)
        if s.table is None:
            scope = Scope()
            items = [(expression_name(i), compile_expr(_unalias(i), scope)) for i in s.items]
            if s.where is not None:
                verdict = compile_expr(s.where, scope)((), self.context)
                if verdict is not True:
                    return Result(tuple(n for n, _ in items), [], "SELECT 0")
            row = tuple(f((), self.context) for _, f in items)
            return Result(tuple(n for n, _ in items), [row], "SELECT 1")
        desc = self._table(s.table)
        plan = self.session.plan(s, desc, lambda: _SelectPlan.of(desc, s))
        names, projections = plan.names, plan.projections
        matching = (env for _row, _pairs, env in self._matching(desc, plan.selection))
        if plan.aggregate:
            row = _aggregate(s.items, plan.scope, matching, self.context)
            rows = [row]
        else:
            envs = list(matching)
            if s.order_by:
                envs = self._sorted(envs, s.order_by, plan.scope, names, projections)
            rows = [tuple(f(env, self.context) for f in projections) for env in envs]
        rows = self._limited(rows, s)
        return Result(names, rows, f"SELECT {len(rows)}")

    def _sorted(
        self,
        envs: list[tuple[Any, ...]],
        order_by: Sequence[tuple[exp.Expr, bool]],
        scope: Scope,
        names: Sequence[str],
        projections: Sequence[Compiled],
    ) -> list[tuple[Any, ...]]:
        keys: list[tuple[Compiled, bool]] = []
        for node, descending in order_by:
            if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
                position = int(node.this)
                if not 1 <= position <= len(projections):
                    raise SQLError("42P10", f"ORDER BY position {position} is not in select list")
                keys.append((projections[position - 1], descending))
                continue
            if (
                isinstance(node, exp.Column)
                and node.name in names
                and ("", node.name) not in scope.columns
            ):
                keys.append((projections[names.index(node.name)], descending))
                continue
            keys.append((compile_expr(node, scope), descending))
        # Stable sorts from the last key to the first give a multi-key order; NULLs sort
        # first ascending (as in CockroachDB), so last descending.
        context = self.context
        for key, descending in reversed(keys):
            envs.sort(key=_sort_by(key, context), reverse=descending)
        return envs

    def _limited(self, rows: list[tuple[Any, ...]], s: st.Select) -> list[tuple[Any, ...]]:
        offset = self._count(s.offset, "OFFSET") if s.offset is not None else 0
        if offset:
            rows = rows[offset:]
        if s.limit is not None:
            rows = rows[: self._count(s.limit, "LIMIT")]
        return rows

    def _count(self, node: exp.Expr, what: str) -> int:
        value = self._constant(node)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SQLError(
                "2201W", f"{what} must be a non-negative integer, got {format_value(value)}"
            )
        return value

    # Writes.

    def insert(self, s: st.Insert) -> Result:
        desc = self._table(s.table)
        txn = self._txn
        plan = self.session.plan(s, desc, lambda: _InsertPlan.of(desc, s))
        targets, sets, returning = plan.targets, plan.sets, plan.returning
        assigned = plan.assigned
        out_rows = []
        count = 0
        touched: set[bytes] = set()  # rows this statement wrote, for ON CONFLICT DO UPDATE
        for compiled in plan.rows:
            row: dict[int, Any] = {}
            for column, make_value in zip(targets, compiled, strict=True):
                row[column.id] = coerce(make_value((), self.context), column.type, column.name)
            for column, make in plan.filled:
                row[column.id] = (
                    coerce(make((), self.context), column.type, column.name) if make else None
                )
            _check_not_null(desc, row)
            kvs = row_kvs(desc, row)
            first_key = next(iter(kvs))
            if s.on_conflict == "update":
                if first_key in touched:
                    raise SQLError(
                        "21000",
                        "ON CONFLICT DO UPDATE command cannot affect row a second time: "
                        "two proposed rows have the same primary key",
                    )
                touched.add(first_key)
            if s.on_conflict is None and not s.upsert and self._insert_blind(desc, row, kvs):
                final = row
            elif txn.get(first_key) is None:
                for key, encoded in kvs.items():
                    if encoded is not None:
                        txn.put(key, encoded)
                final = row
            elif s.on_conflict is None and not s.upsert:
                raise duplicate_key(desc, row)
            elif s.on_conflict == "nothing":
                continue
            else:
                old, pairs = self._read_row(desc, row)
                both = tuple(old[c.id] for c in desc.columns) + tuple(
                    row[c.id] for c in desc.columns
                )
                final = dict(old)
                for column, value in sets:
                    final[column.id] = coerce(value(both, self.context), column.type, column.name)
                _check_not_null(desc, final)
                if any(final[i] != old[i] for i in desc.primary_key):
                    touched.add(self._move_row(desc, pairs, final))
                else:
                    self._write_changes(desc, pairs, final, assigned)
            count += 1
            if returning is not None:
                env = tuple(final[c.id] for c in desc.columns)
                out_rows.append(tuple(f(env, self.context) for f in returning[1]))
        if returning is not None:
            return Result(returning[0], out_rows, f"INSERT 0 {count}")
        return Result(tag=f"INSERT 0 {count}")

    def _insert_blind(
        self, desc: TableDescriptor, row: dict[int, Any], kvs: dict[bytes, bytes | None]
    ) -> bool:
        """Write a new row without reading first, when the statement commits on its own:
        the row's first key must be absent at commit (:meth:`Txn.put_if_absent`), and the
        session turns a failed check into the duplicate-key error. ``False``: read first
        (an explicit transaction reports a duplicate at the statement, as PostgreSQL)."""
        first_key, first = next(iter(kvs.items()))
        if not self.autocommit or first is None:
            return False
        assert self.txn is not None
        try:
            self.txn.put_if_absent(first_key, first)
        except ConditionFailedError:
            raise duplicate_key(desc, row) from None
        for key, encoded in kvs.items():
            if key != first_key and encoded is not None:
                self.txn.put(key, encoded)
        self.inserted[first_key] = (desc, row)
        return True

    def _read_row(
        self, desc: TableDescriptor, row: dict[int, Any]
    ) -> tuple[dict[int, Any], dict[bytes, bytes]]:
        span = row_span(desc, [row[i] for i in desc.primary_key])
        for found in self._rows(desc, span):
            return found
        raise SQLError("XX000", "a row vanished while it was being updated")

    def _write_changes(
        self,
        desc: TableDescriptor,
        pairs: dict[bytes, bytes],
        row: dict[int, Any],
        assigned: frozenset[int],
    ) -> None:
        """Write the families of ``row`` that have an ``assigned`` column or whose value
        differs from ``pairs`` (the row's KV pairs as read), deleting pairs that no longer
        exist. An assignment is a write even when it changes nothing, as in CockroachDB
        and PostgreSQL: it makes a new version, which a changefeed emits."""
        txn = self._txn
        for family, (key, value) in zip(desc.families, row_kvs(desc, row).items(), strict=True):
            old = pairs.get(key)
            if value is None:
                if old is not None:
                    txn.delete(key)
            elif value != old or not assigned.isdisjoint(family.column_ids):
                txn.put(key, value)

    def update(self, s: st.Update) -> Result:
        desc = self._table(s.table)
        plan = self.session.plan(s, desc, lambda: _UpdatePlan.of(desc, s))
        if plan.blind is not None and self.autocommit:
            key = plan.blind(self.context)
            pair = self._whole_row(desc, plan, key) if key is not None else None
            if pair is not None:
                # Written without reading: the row must exist at commit, and when it
                # does not the session reports UPDATE 0 (nothing was written).
                self._txn.put_if_present(*pair)
                self.missing[pair[0]] = "UPDATE 0"
                return Result(tag="UPDATE 1")
        sets, returning, assigned = plan.sets, plan.returning, plan.assigned
        key_ids = set(desc.primary_key)
        out_rows = []
        count = 0
        for old, pairs, env in list(self._matching(desc, plan.selection)):
            new = dict(old)
            for column, value in sets:
                new[column.id] = coerce(value(env, self.context), column.type, column.name)
            _check_not_null(desc, new)
            if any(new[i] != old[i] for i in key_ids):
                self._move_row(desc, pairs, new)
            else:
                self._write_changes(desc, pairs, new, assigned)
            count += 1
            if returning is not None:
                new_env = tuple(new[c.id] for c in desc.columns)
                out_rows.append(tuple(f(new_env, self.context) for f in returning[1]))
        if returning is not None:
            return Result(returning[0], out_rows, f"UPDATE {count}")
        return Result(tag=f"UPDATE {count}")

    def _whole_row(
        self, desc: TableDescriptor, plan: _UpdatePlan, key: list[Any]
    ) -> tuple[bytes, bytes] | None:
        """The KV pair of the row with primary key ``key`` as a blind UPDATE rewrites it;
        ``None`` when making it fails: the statement then reads the row, and the error
        comes only if there is a row (a missing row is ``UPDATE 0``, whatever the SET)."""
        row = dict(zip(desc.primary_key, key, strict=True))
        try:
            for column, value in plan.sets:
                row[column.id] = coerce(value((), self.context), column.type, column.name)
            _check_not_null(desc, row)
            ((first_key, encoded),) = row_kvs(desc, row).items()
        except Exception:  # NB: the read path raises it again, if there is a row
            return None
        if encoded is None:
            raise InvariantViolation(f"the primary family of {desc.name!r} encoded no value")
        return first_key, encoded

    def _move_row(
        self, desc: TableDescriptor, pairs: Iterable[bytes], new: dict[int, Any]
    ) -> bytes:
        """Replace the row at ``pairs`` by ``new``, whose primary key differs: 23505 if
        that key holds a row. Returns the new row's first key."""
        txn = self._txn
        for key in pairs:
            txn.delete(key)
        new_pairs = row_kvs(desc, new)
        first = next(iter(new_pairs))
        if txn.get(first) is not None:
            raise duplicate_key(desc, new)
        for key, encoded in new_pairs.items():
            if encoded is not None:
                txn.put(key, encoded)
        return first

    def delete(self, s: st.Delete) -> Result:
        desc = self._table(s.table)
        plan = self.session.plan(s, desc, lambda: _DeletePlan.of(desc, s))
        returning = plan.returning
        out_rows = []
        count = 0
        txn = self._txn
        for _old, pairs, env in list(self._matching(desc, plan.selection)):
            for key in pairs:
                txn.delete(key)
            count += 1
            if returning is not None:
                out_rows.append(tuple(f(env, self.context) for f in returning[1]))
        if returning is not None:
            return Result(returning[0], out_rows, f"DELETE {count}")
        return Result(tag=f"DELETE {count}")


def _scope(desc: TableDescriptor, alias: str | None = None) -> Scope:
    scope = Scope(table_name=desc.name)
    qualifiers = ["", desc.name] + ([alias] if alias else [])
    for index, column in enumerate(desc.columns):
        scope.add(qualifiers, column.name, index, column.type)
    return scope


Projections = tuple[tuple[str, ...], list[Compiled]]  # result column names, their values


def _projections(desc: TableDescriptor, items: Sequence[exp.Expr], scope: Scope) -> Projections:
    names: list[str] = []
    projections: list[Compiled] = []
    for item in items:
        if isinstance(item, exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        ):
            if isinstance(item, exp.Column):
                scope.check_qualifier(qualifier_of(item))
            for index, column in enumerate(desc.columns):
                if column.hidden:
                    continue
                names.append(column.name)
                projections.append(lambda env, ctx, index=index: env[index])  # type: ignore[misc]
            continue
        if contains_aggregate(item):
            names.append(expression_name(item))
            projections.append(lambda env, ctx: None)
            continue
        names.append(expression_name(item))
        projections.append(compile_expr(_unalias(item), scope))
    return tuple(names), projections


def _returning(
    desc: TableDescriptor, items: tuple[exp.Expr, ...] | None, scope: Scope
) -> Projections | None:
    if items is None:
        return None
    if any(contains_aggregate(i) for i in items):
        raise SQLError("42803", "aggregate functions are not allowed in RETURNING")
    return _projections(desc, items, scope)


# Plans: what a statement compiles to against one version of its table, made once per
# session (Session.plan), so a statement run again goes straight to its rows.


@dataclass(frozen=True, slots=True)
class _Selection:
    """The rows a WHERE clause selects: ``span(context)`` is the key span to read and
    whether it holds exactly those rows (it depends on the run's placeholders); else
    ``test``, the whole WHERE clause, filters the rows read."""

    span: Callable[[Context], tuple[Span, bool]]
    test: Compiled | None
    # The primary key of the one row WHERE selects, when it is nothing but the whole
    # key's equality to values that keep their type; else None (then, or when a run's
    # values change type or are NULL, it returns None).
    point: Callable[[Context], list[Any] | None] | None

    @classmethod
    def of(cls, desc: TableDescriptor, where: exp.Expr | None, scope: Scope) -> _Selection:
        test = compile_expr(where, scope) if where is not None else None  # NB: checks it too
        plan = _key_plan(desc, where, scope) if where is not None else None
        point = None
        if plan is not None and plan.complete and len(plan.equal) == len(desc.key_columns):
            point = _point(desc, plan)
        return cls(_span_plan(desc, where, plan), test, point)


def _bound(compiled: Compiled, column: Column, context: Context) -> tuple[Any, bool]:
    """A constant as the column's type, and whether it kept its value."""
    raw = compiled((), context)
    value = coerce(raw, column.type, column.name)
    return value, type(value) is type(raw) and value == raw


def _point(desc: TableDescriptor, plan: _KeyPlan) -> Callable[[Context], list[Any] | None]:
    keys = desc.key_columns

    def point(context: Context) -> list[Any] | None:
        values = []
        for compiled, column in zip(plan.equal, keys, strict=True):
            try:
                value, kept = _bound(compiled, column, context)
            except SQLError:
                return None
            if value is None or not kept:
                return None
            values.append(value)
        return values

    return point


def _span_plan(
    desc: TableDescriptor, where: exp.Expr | None, plan: _KeyPlan | None
) -> Callable[[Context], tuple[Span, bool]]:
    whole = table_span(desc.id)
    if where is None:
        return lambda context: (whole, True)
    if plan is None:
        return lambda context: (whole, False)
    keys = desc.key_columns
    nothing = Span(whole.start, whole.start + b"\x00")

    def span(context: Context) -> tuple[Span, bool]:
        exact = plan.complete
        try:
            equal = []
            for i, compiled in enumerate(plan.equal):
                value, kept = _bound(compiled, keys[i], context)
                equal.append(value)
                exact = exact and kept
        except SQLError:
            return whole, False  # let the WHERE clause report (or filter) it
        if any(v is None for v in equal):
            return nothing, exact  # = NULL matches nothing
        if len(equal) == len(keys) or (plan.low is None and plan.high is None):
            return row_span(desc, equal), exact
        column = keys[len(equal)]
        prefix = row_prefix(desc, equal)
        start, end = prefix, prefix_end(prefix)
        # NB: a bound the column's type changed (1.5 for an INT) says nothing exact
        # about the keys (k > 1.5 wants 2, which k > 2 would miss): it is left to the
        # filter.
        try:
            for limit, is_low in ((plan.low, True), (plan.high, False)):
                if limit is None:
                    continue
                value, kept = _bound(limit.value, column, context)
                if value is None:
                    return nothing, exact
                exact = exact and kept
                if not kept:
                    continue
                key = row_prefix(desc, [*equal, value])
                if is_low:
                    start = max(start, key if limit.inclusive else prefix_end(key))
                else:
                    end = min(end, prefix_end(key) if limit.inclusive else key)
        except SQLError:
            return (row_span(desc, equal) if equal else whole), False
        if end <= start:
            return Span(start, start + b"\x00"), exact
        return Span(start, end), exact

    return span


@dataclass(frozen=True, slots=True)
class _SelectPlan:
    scope: Scope
    names: tuple[str, ...]
    projections: list[Compiled]
    aggregate: bool
    selection: _Selection

    @classmethod
    def of(cls, desc: TableDescriptor, s: st.Select) -> _SelectPlan:
        scope = _scope(desc, s.alias)
        names, projections = _projections(desc, s.items, scope)
        aggregate = any(contains_aggregate(i) for i in s.items)
        return cls(scope, names, projections, aggregate, _Selection.of(desc, s.where, scope))


@dataclass(frozen=True, slots=True)
class _InsertPlan:
    """``rows``: each proposed row's values for ``targets``; ``sets``: the new values
    of the columns ON CONFLICT DO UPDATE (or UPSERT) assigns, over the existing row
    followed by the proposed one."""

    targets: list[Column]
    rows: list[list[Compiled]]
    sets: list[tuple[Column, Compiled]]
    returning: Projections | None
    assigned: frozenset[int]  # the ids of ``sets``' columns
    filled: list[tuple[Column, Compiled | None]]  # the other columns, with their DEFAULT

    @classmethod
    def of(cls, desc: TableDescriptor, s: st.Insert) -> _InsertPlan:
        if s.columns is None:
            # As in PostgreSQL: VALUES shorter than the table fill its leading columns and
            # the rest take their defaults.
            targets = list(desc.visible_columns)
            if s.rows and len({len(r) for r in s.rows}) > 1:
                raise SQLError("42601", "VALUES lists must all be the same length")
            if s.rows and len(s.rows[0]) < len(targets):
                targets = targets[: len(s.rows[0])]
        else:
            targets = [desc.column(name) for name in s.columns]
            if len({c.id for c in targets}) != len(targets):
                raise SQLError("42701", "a column is listed more than once in INSERT")
        empty = Scope()
        rows = []
        for values in s.rows:
            if len(values) > len(targets):
                raise SQLError(
                    "42601", f"INSERT has more expressions than target columns ({len(targets)})"
                )
            if len(values) < len(targets):
                raise SQLError(
                    "42601", f"INSERT has more target columns than expressions ({len(values)})"
                )
            rows.append([compile_expr(v, empty) for v in values])
        scope = _scope(desc)
        # ON CONFLICT DO UPDATE sees the existing row, then the proposed one as excluded.*
        conflict_scope = _scope(desc)
        width = len(desc.columns)
        for index, column in enumerate(desc.columns):
            conflict_scope.add(["excluded"], column.name, width + index, column.type)
        sets = [(desc.column(n), compile_expr(e, conflict_scope)) for n, e in s.conflict_sets]
        _check_conflict_target(desc, s.conflict_target)
        if s.upsert:
            key_ids = set(desc.primary_key)
            sets = [
                (c, _proposed(width + desc.columns.index(c)))
                for c in targets
                if c.id not in key_ids
            ]
        return cls(
            targets,
            rows,
            sets,
            _returning(desc, s.returning, scope),
            frozenset(column.id for column, _ in sets),
            [(c, _default(c)) for c in desc.columns if c not in targets],
        )


def _default(column: Column) -> Compiled | None:
    """``column``'s DEFAULT expression, compiled (``None``: it has none)."""
    if column.default is None:
        return None
    return compile_expr(parse_expression(column.default), Scope())


@dataclass(frozen=True, slots=True)
class _UpdatePlan:
    """``blind``, when the statement rewrites one whole row it names by its primary key
    and so may write without reading (:meth:`Execution.update`): its selection's
    ``point``. Every column but the key's is set to a value that reads no column, the
    table has one column family (so the row is one KV pair), and there is no RETURNING."""

    selection: _Selection
    sets: list[tuple[Column, Compiled]]
    returning: Projections | None
    assigned: frozenset[int]  # the ids of ``sets``' columns
    blind: Callable[[Context], list[Any] | None] | None

    @classmethod
    def of(cls, desc: TableDescriptor, s: st.Update) -> _UpdatePlan:
        scope = _scope(desc)
        sets = [(desc.column(name), compile_expr(e, scope)) for name, e in s.sets]
        returning = _returning(desc, s.returning, scope)
        selection = _Selection.of(desc, s.where, scope)
        assigned = frozenset(column.id for column, _ in sets)
        whole = (
            returning is None
            and len(desc.families) == 1
            and assigned == {c.id for c in desc.columns} - set(desc.primary_key)
            and all(_is_constant(e) for _, e in s.sets)
        )
        return cls(selection, sets, returning, assigned, selection.point if whole else None)


@dataclass(frozen=True, slots=True)
class _DeletePlan:
    selection: _Selection
    returning: Projections | None

    @classmethod
    def of(cls, desc: TableDescriptor, s: st.Delete) -> _DeletePlan:
        scope = _scope(desc)
        returning = _returning(desc, s.returning, scope)
        return cls(_Selection.of(desc, s.where, scope), returning)


def _unalias(node: exp.Expr) -> exp.Expr:
    return node.this if isinstance(node, exp.Alias) else node


def _proposed(index: int) -> Compiled:
    return lambda env, ctx: env[index]


def _check_conflict_target(desc: TableDescriptor, target: Sequence[str]) -> None:
    """ON CONFLICT (cols): the columns must exist and be the primary key, the only
    unique constraint a feedkv table has."""
    if not target:
        return
    ids = [desc.column(name).id for name in target]  # 42703 names an unknown one
    if sorted(ids) != sorted(desc.primary_key):
        raise SQLError(
            "42P10",
            "there is no unique or exclusion constraint matching the ON CONFLICT "
            f"specification ({', '.join(target)}); the primary key is "
            f"({', '.join(c.name for c in desc.key_columns)})",
        )


def _check_not_null(desc: TableDescriptor, row: dict[int, Any]) -> None:
    for column in desc.columns:
        if row.get(column.id) is None and not column.nullable:
            raise SQLError(
                "23502", f'null value in column "{column.name}" violates not-null constraint'
            )


def duplicate_key(desc: TableDescriptor, row: dict[int, Any]) -> SQLError:
    names = ", ".join(c.name for c in desc.key_columns)
    values = ", ".join(str(row[i]) for i in desc.primary_key)
    return SQLError(
        "23505",
        f'duplicate key value violates unique constraint "{desc.name}_pkey": '
        f"Key ({names})=({values}) already exists.",
    )


def _sort_by(key: Compiled, context: Context) -> Callable[[tuple[Any, ...]], tuple[int, Any]]:
    def sort_key(env: tuple[Any, ...]) -> tuple[int, Any]:
        value = key(env, context)
        if value is None:
            return (0, 0)
        return (2, 0) if isinstance(value, float) and value != value else (1, value)

    return sort_key


def _flatten_and(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.And):
        return _flatten_and(node.this) + _flatten_and(node.expression)
    if isinstance(node, exp.Paren):
        return _flatten_and(node.this)
    return [node]


_FLIP: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
    exp.EQ: exp.EQ,
}


def _key_plan(desc: TableDescriptor, where: exp.Expr, scope: Scope) -> _KeyPlan | None:
    """Equality and range constraints on primary key columns with constant sides."""
    empty = Scope()
    equal: dict[str, Compiled] = {}
    lows: dict[str, _Bound] = {}
    highs: dict[str, _Bound] = {}
    conjuncts = list(_flatten_and(where))
    source: dict[int, exp.Expr] = {}  # id of each constraint -> the conjunct it came from
    for conjunct in conjuncts:
        if isinstance(conjunct, exp.Between) and isinstance(conjunct.this, exp.Column):
            name = conjunct.this.name.lower()
            low, high = conjunct.args["low"], conjunct.args["high"]
            if _is_constant(low) and _is_constant(high):
                lows[name] = _Bound(compile_expr(low, empty), True)
                highs[name] = _Bound(compile_expr(high, empty), True)
                source[id(lows[name])] = source[id(highs[name])] = conjunct
            continue
        op: type[exp.Expr] = type(conjunct)
        if op not in _FLIP:
            continue
        left, right = conjunct.this, conjunct.expression
        if isinstance(right, exp.Column) and _is_constant(left):
            left, right, op = right, left, _FLIP[op]
        if not isinstance(left, exp.Column) or not _is_constant(right):
            continue
        name = left.name.lower()
        value = compile_expr(right, empty)
        constraint: Compiled | _Bound
        if op is exp.EQ:
            constraint = equal[name] = value
        elif op in (exp.GT, exp.GTE):
            constraint = lows[name] = _Bound(value, op is exp.GTE)
        else:
            constraint = highs[name] = _Bound(value, op is exp.LTE)
        source[id(constraint)] = conjunct
    plan = _KeyPlan([])
    for column in desc.key_columns:
        if column.name in equal:
            plan.equal.append(equal[column.name])
            continue
        plan.low = lows.get(column.name)
        plan.high = highs.get(column.name)
        break
    if not plan.equal and plan.low is None and plan.high is None:
        return None
    used = [*plan.equal, *(b for b in (plan.low, plan.high) if b is not None)]
    plan.complete = {id(source[id(c)]) for c in used} == {id(c) for c in conjuncts}
    return plan


def _is_constant(node: exp.Expr) -> bool:
    return is_constant(node) and not contains_aggregate(node)


def _aggregate(
    items: Sequence[exp.Expr], scope: Scope, envs: Iterator[tuple[Any, ...]], context: Context
) -> tuple[Any, ...]:
    """One row of aggregates over ``envs`` (SELECT with aggregates and no GROUP BY)."""
    states: list[_Aggregate] = []
    finals: list[Callable[[], Any]] = []
    for item in items:
        node = _unalias(item)
        if not isinstance(node, AGGREGATES):
            if any(True for _ in node.find_all(exp.Column)):
                raise SQLError(
                    "42803",
                    f'column "{expression_name(node)}" must appear in an aggregate function '
                    "(GROUP BY is not supported)",
                )
            constant = compile_expr(node, scope)
            finals.append(lambda constant=constant: constant((), context))  # type: ignore[misc]
            continue
        state = _Aggregate(node, scope)
        states.append(state)
        finals.append(state.result)
    for env in envs:
        for state in states:
            state.add(env, context)
    return tuple(final() for final in finals)


class _Aggregate:
    def __init__(self, node: exp.Expr, scope: Scope) -> None:
        self.kind = type(node)
        argument = node.this
        name = self.kind.__name__.lower()
        if argument is None or node.expressions:
            raise SQLError("42883", f"unknown signature: {name}() takes exactly one argument")
        if isinstance(argument, exp.Distinct):
            raise SQLError("0A000", "DISTINCT in aggregates is not supported")
        self.star = isinstance(argument, exp.Star)
        if self.star and self.kind is not exp.Count:
            raise SQLError("42883", f"unknown signature: {name}(*); only count(*) takes *")
        self.value = None if self.star else compile_expr(argument, scope)
        self.count = 0
        self.total: Any = None
        self.best: Any = None

    def add(self, env: tuple[Any, ...], context: Context) -> None:
        if self.star:
            self.count += 1
            return
        assert self.value is not None
        value = self.value(env, context)
        if value is None:
            return
        self.count += 1
        if self.kind in (exp.Sum, exp.Avg):
            if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
                raise SQLError("42883", f"unknown signature: {self.kind.__name__.lower()}()")
            self.total = value if self.total is None else self.total + value
        elif self.kind is exp.Min:
            self.best = value if self.best is None or value < self.best else self.best
        elif self.kind is exp.Max:
            self.best = value if self.best is None or value > self.best else self.best

    def result(self) -> Any:
        if self.kind is exp.Count:
            return self.count
        if self.kind is exp.Sum:
            return decimal.Decimal(self.total) if isinstance(self.total, int) else self.total
        if self.kind is exp.Avg:
            if not self.count:
                return None
            if isinstance(self.total, float):
                return self.total / self.count
            return decimal.Decimal(self.total) / self.count
        return self.best


_LEASED = st.Select | st.Insert | st.Update | st.Delete  # may run on leased descriptors

_HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {
    st.CreateDatabase: Execution.create_database,
    st.DropDatabase: Execution.drop_database,
    st.ShowDatabases: Execution.show_databases,
    st.CreateTable: Execution.create_table,
    st.DropTable: Execution.drop_table,
    st.Truncate: Execution.truncate,
    st.AddColumn: Execution.add_column,
    st.DropColumn: Execution.drop_column,
    st.ShowTables: Execution.show_tables,
    st.ShowCreateTable: Execution.show_create_table,
    st.ShowRanges: Execution.show_ranges,
    st.SplitAt: Execution.split_at,
    st.CreateUser: Execution.create_user,
    st.GrantAdmin: Execution.grant_admin,
    st.Select: Execution.select,
    st.Insert: Execution.insert,
    st.Update: Execution.update,
    st.Delete: Execution.delete,
}
