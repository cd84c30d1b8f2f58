"""Scalar expressions: sqlglot trees compiled once into Python closures.

:func:`compile_expr` resolves column names against a :class:`Scope` at compile time,
so evaluating is a call per node with no name lookups. NULL follows SQL's three-valued
logic: arithmetic and comparisons with NULL give NULL; ``AND``/``OR`` treat NULL as
unknown. A constant (literal or placeholder) compared with a column is converted to
the column's type first, so ``d = '2024-01-01'`` works for a DATE column ``d``.

Division of integers gives a DECIMAL, as in CockroachDB; ``//`` is integer division.
DECIMAL arithmetic follows CockroachDB's contexts (:data:`~feedkv.sql.types.EXACT_DECIMAL`,
:data:`~feedkv.sql.types.DECIMAL_QUOTIENT`). :func:`condition` checks WHERE's type from
the tree alone, before any row is read.

NB: over 800 lines, and one concept: a scalar expression compiled to a closure. Most of
its length is the operators and functions themselves, each a few lines, dispatched from
one table (``_HANDLERS``).
"""

from __future__ import annotations

import datetime
import decimal
import functools
import math
import operator
import random
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

from sqlglot import exp

from feedkv.errors import SerializationFailure, SQLError
from feedkv.sql import (
    array_functions,
    datetime_functions,
    jsonb,
    jsonb_functions,
    regexp,
    scalar_functions,
)
from feedkv.sql.aggregate_nodes import (
    AGGREGATES,
    aggregate_name,
    outer_nodes,
    refuse_aggregates,
)
from feedkv.sql.arrays import Array, parse_array_text
from feedkv.sql.as_json import as_json
from feedkv.sql.bits import BitString
from feedkv.sql.enums import EnumValue
from feedkv.sql.interval import Interval
from feedkv.sql.jsonb import JSON_NULL
from feedkv.sql.records import Record
from feedkv.sql.scalar_functions import is_int
from feedkv.sql.session_vars import CLUSTER_VERSION
from feedkv.sql.text_format import format_text
from feedkv.sql.time_zone import current_zone, infinity_of
from feedkv.sql.types import (
    DECIMAL_NAN,
    DECIMAL_QUOTIENT,
    EPOCH_DATE,
    EXACT_DECIMAL,
    INT64_MAX,
    INT64_MIN,
    ColumnType,
    FixedChar,
    Float4,
    Kind,
    coerce,
    enum_type_of,
    float_text,
    format_value,
    is_nan,
    kind_of_value,
    standard_name,
    type_of_value,
)

__all__ = [
    "AGGREGATES",
    "Compiled",
    "Context",
    "Scope",
    "SubqueryRunner",
    "compile_expr",
    "condition",
    "static_kind",
    "subquery_key",
    "contains_aggregate",
    "expression_name",
    "is_constant",
    "is_fixed_value",
    "outer_nodes",
    "placeholder_index",
    "qualifier_of",
    "refuse_aggregates",
]


class Context:
    """What an evaluation may need besides the row: the statement's placeholders and
    its clock. ``logical_timestamp`` and ``unique_rowid`` are supplied by the session.
    ``now`` is read from the clock at its first use (most statements never ask), then
    stays the statement's time."""

    __slots__ = (
        "_now",
        "backend_pid",
        "enum_type",
        "interrupted",
        "logical_timestamp",
        "node_id",
        "outer",
        "params",
        "sequence",
        "sleep",
        "subqueries",
        "transaction_age",
        "unique_rowid",
        "value_sets",
        "variable",
    )

    def __init__(
        self,
        params: Sequence[Any] = (),
        now: datetime.datetime | None = None,
        logical_timestamp: Callable[[], decimal.Decimal] | None = None,
        unique_rowid: Callable[[], int] | None = None,
        variable: Callable[[str], str] | None = None,
        sequence: Callable[[str, Sequence[Any]], Any] | None = None,
        sleep: Callable[[float], None] | None = None,
        node_id: Callable[[], int] | None = None,
        enum_type: Callable[[str], ColumnType] | None = None,
        transaction_age: Callable[[], int] | None = None,
        interrupted: Callable[[], None] = lambda: None,
        backend_pid: int | None = None,
    ) -> None:
        self.params = params
        # the session's number, as pg_backend_pid() gives it (a SQL client's: the process
        # id its BackendKeyData gave)
        self.backend_pid = backend_pid
        # raises 57014 when the statement was cancelled (Interrupt.check): a loop over
        # rows calls it between chunks of them (interrupt.chunked)
        self.interrupted = interrupted
        # the nanoseconds since the SQL transaction began, its retries included
        # (crdb_internal.force_retry())
        self.transaction_age = transaction_age
        # the column type of the user-defined type of a name (a cast to it: 'a'::mood);
        # 42704 when there is none
        self.enum_type = enum_type
        # the id of the node the session's statements enter the cluster through
        # (crdb_internal.node_id())
        self.node_id = node_id
        # waits the seconds given, or raises 57014 when the statement is cancelled
        self.sleep = sleep
        # a sequence function (nextval, ...) on its arguments (feedkv.sql.sequences)
        self.sequence = sequence
        self._now = now
        self.logical_timestamp = logical_timestamp
        self.unique_rowid = unique_rowid
        self.variable = variable  # a session variable's value (current_setting())
        # The statement's subqueries (see subquery_key): each gives its rows for the row
        # of the query around it (which a correlated subquery reads).
        self.subqueries: dict[str, SubqueryRunner] = {}
        # The rows of the queries around the one being evaluated, innermost last: a
        # correlated subquery's reference to a column n levels out reads outer[-n].
        self.outer: list[Env] = []
        # IN (subquery): the last rows each subquery gave, as a set (see _ValueSet);
        # IN (values) and = ANY (array) fixed for the run: their rows, as a set.
        self.value_sets: dict[str, tuple[list[tuple[Any, ...]], _ValueSet | None]] = {}

    @property
    def now(self) -> datetime.datetime:
        if self._now is None:
            self._now = datetime.datetime.now(datetime.UTC)
        return self._now

    @now.setter
    def now(self, when: datetime.datetime) -> None:
        """The statement's time from here on (AS OF SYSTEM TIME reads ``now()`` as of
        the time it reads at)."""
        self._now = when


Env = Sequence[Any]
Compiled = Callable[[Env, Context], Any]


@dataclass
class Scope:
    """The columns an expression may name: ``(qualifier, name) -> (index, type)``. An
    unqualified name is found under qualifier ``""``."""

    columns: dict[tuple[str, str], tuple[int, ColumnType]] = field(default_factory=dict)
    table_name: str = ""
    database: str = ""  # the table's database, which ``db.public.t.c`` must name
    # Unqualified names two sources share, with the qualified names they could mean.
    ambiguous: dict[str, list[str]] = field(default_factory=dict)
    # The scope of the query around this one (a subquery's names not its own are found
    # there), and how often a query inside it found a name in it (a subquery that added
    # none is not correlated to it).
    outer: Scope | None = None
    hits: int = 0
    referenced: set[int] = field(default_factory=set)  # its places a query inside named
    # Each source's name -> its row's visible columns (name, place, type), made when asked:
    # what the name alone means where no column has it (``row_to_json(t)``), as in
    # PostgreSQL
    rows: dict[str, Callable[[], list[tuple[str, int, ColumnType]]]] = field(default_factory=dict)

    def add(self, qualifiers: Sequence[str], name: str, index: int, ctype: ColumnType) -> None:
        """``name`` under each of ``qualifiers`` (``""``: unqualified). Adding an
        unqualified name a second time makes it ambiguous: only its qualified forms
        resolve."""
        named = next((q for q in qualifiers if q), "")
        if "" in qualifiers and ("", name) in self.columns:
            candidates = self.ambiguous.setdefault(name, [])
            if not candidates:
                first = self.columns[("", name)][0]
                candidates.extend(
                    f"{q}.{name}"
                    for (q, n), (i, _) in self.columns.items()
                    if q and n == name and i == first
                )
            candidates.append(f"{named}.{name}")
        for qualifier in qualifiers:
            self.columns.setdefault((qualifier, name), (index, ctype))

    def with_whole_rows(self, node: exp.Expr) -> exp.Expr:
        """``node`` with each unqualified name that is no column but a source's (``t`` in
        ``row_to_json(t)``) as that source's row: a tuple of its visible columns,
        labelled with their names (a record that knows them), as PostgreSQL reads it.
        ``node`` itself when it has none (the common case: nothing is copied)."""
        if not any(self._row_named(c) is not None for c in node.find_all(exp.Column)):
            return node

        def row_of(found: exp.Expr) -> exp.Expr:
            columns = self._row_named(found) if isinstance(found, exp.Column) else None
            if columns is None or not isinstance(found, exp.Column):
                return found
            name = _column_name(found)
            row = exp.Tuple(
                expressions=[exp.column(c, table=name, quoted=True) for c, _i, _t in columns]
            )
            row.meta["labels"] = [c for c, _i, _t in columns]
            return row

        return node.transform(row_of)

    def _row_named(self, node: exp.Column) -> list[tuple[str, int, ColumnType]] | None:
        """The columns of the source whose row ``node`` names, if it names one."""
        if not isinstance(node.this, exp.Identifier) or qualifier_of(node):
            return None
        name = _column_name(node)
        columns = self.rows.get(name)
        scope: Scope | None = self
        while columns is not None and scope is not None:  # NB: a column of the name wins
            if ("", name) in scope.columns or name in scope.ambiguous:
                return None
            scope = scope.outer
        return None if columns is None else columns()

    def rebind(self, name: str, index: int, ctype: ColumnType) -> None:
        """Unqualified ``name`` now means the column at ``index`` alone (the column a
        JOIN ... USING merges from both sides' columns of that name)."""
        self.ambiguous.pop(name, None)
        self.columns[("", name)] = (index, ctype)

    def check_qualifier(self, qualifier: str) -> None:
        """SQLSTATE 42P01 unless ``qualifier`` names the table in scope (``t.*``)."""
        if qualifier and not any(q == qualifier for q, _ in self.columns):
            raise SQLError("42P01", f"missing FROM-clause entry for table {qualifier!r}")

    def lookup(self, node: exp.Column) -> tuple[int, ColumnType]:
        """The column ``node`` names: ``c``, ``t.c``, ``public.t.c`` or ``db.public.t.c``."""
        if not isinstance(node.this, exp.Identifier):
            raise SQLError("42601", f"syntax error at or near {_shown(node)!r}")
        self.check_prefix(node)
        return self.resolve(qualifier_of(node), _column_name(node))

    def find(self, node: exp.Column) -> tuple[int, int, ColumnType]:
        """``(depth, index, type)`` of the column ``node`` names: depth 0 for this
        scope's own, n for one of the n-th query around it (a correlated reference)."""
        try:
            index, ctype = self.lookup(node)
        except SQLError as exc:
            if self.outer is None or exc.code not in ("42703", "42P01"):
                raise
            try:
                depth, index, ctype = self.outer.find(node)
            except SQLError as outer_exc:
                # NB: the error of the query whose table the name's qualifier names
                raise (outer_exc if exc.code == "42P01" else exc) from None
            self.outer.hits += 1
            if not depth:
                self.outer.referenced.add(index)
            return depth + 1, index, ctype
        return 0, index, ctype

    def check_prefix(self, node: exp.Column) -> None:
        """SQLSTATE 42P01 unless the schema and database a column names (if any) are
        ``public`` and the table's database (or, alone, the table's database)."""
        catalog, schema = node.args.get("catalog"), node.args.get("db")
        if catalog is None and schema is None:
            return
        if catalog is None and _part(schema) == self.database:
            return  # NB: ``db.t.c``: as CockroachDB, a prefix no schema has is a database
        if _part(schema) != "public" or (catalog is not None and _part(catalog) != self.database):
            parts = [_part(p) for p in (catalog, schema, node.args.get("table")) if p is not None]
            raise SQLError(
                "42P01", f"no data source matches prefix: {'.'.join(parts)} in this context"
            )

    def resolve(self, qualifier: str, name: str) -> tuple[int, ColumnType]:
        if not qualifier and name in self.ambiguous:
            candidates = ", ".join(sorted(self.ambiguous[name]))
            raise SQLError(
                "42702", f'column reference "{name}" is ambiguous (candidates: {candidates})'
            )
        found = self.columns.get((qualifier, name))
        if found is None:
            shown = f"{qualifier}.{name}" if qualifier else name
            self.check_qualifier(qualifier)
            raise SQLError("42703", f'column "{shown}" does not exist')  # CockroachDB's text
        return found


def contains_aggregate(node: exp.Expr) -> bool:
    """Whether ``node`` calls an aggregate (a window's function is no such call)."""
    return any(
        not (isinstance(call.parent, exp.Window) and call.parent.this is call)
        for call in outer_nodes(node, *AGGREGATES)
    )


def expression_name(node: exp.Expr) -> str:
    """The column name a result column gets, as CockroachDB names it (PostgreSQL's
    FigureColname): a column's name, a function's as written, a cast's operand's or
    else its type's (``1::STRING`` is text), ``?column?`` for an operator."""
    if isinstance(node, exp.Alias):
        return node.alias
    written = node.meta.get("named_for")  # NB: parser._NAMED_FOR (parser cannot import this module)
    if written is not None:
        return expression_name(written)
    return _figured_name(node)[1] or "?column?"


def _figured_name(node: exp.Expr) -> tuple[int, str]:
    """``(strength, name)``: 2 a good name, 1 a second choice, 0 none (where a cast
    around it names the column for its type)."""
    if isinstance(node, exp.Column):
        return 2, node.name if node.this.quoted else node.name.lower()
    if isinstance(node, exp.Paren | exp.Window):
        return _figured_name(node.this)
    if isinstance(node, exp.Cast):
        strength, name = _figured_name(node.this)
        return (strength, name) if strength > 1 else (0, _cast_name(node))
    if isinstance(node, exp.Boolean):
        return 1, "bool"  # NB: PostgreSQL's true is 't'::BOOL
    if isinstance(node, exp.Exists):
        return 2, "exists"
    if isinstance(node, exp.Subquery):
        inner = node.this
        if isinstance(inner, exp.Select) and len(inner.expressions) == 1:
            only = inner.expressions[0]
            return (2, only.alias) if isinstance(only, exp.Alias) else _figured_name(only)
        return 0, ""
    if isinstance(node, exp.Case):
        default = node.args.get("default")
        strength, name = _figured_name(default) if default is not None else (0, "")
        return (strength, name) if strength > 1 else (1, "case")
    if isinstance(node, exp.Coalesce):
        return 2, "coalesce"  # NB: IFNULL too
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Anonymous):
        # NB: CockroachDB names a schema-qualified function's column with its schema
        return 2, f"{node.this.name.lower()}.{str(node.expression.this).lower()}"
    if isinstance(node, exp.Array) and not node.meta.get("spelled"):
        return 2, "array"
    spelled = node.meta.get("spelled")
    if spelled:
        return 2, str(spelled).lower()
    if isinstance(node, _OPERATOR_FUNCTIONS):
        return 0, ""  # an operator that sqlglot reads as a function: 2 ^ 3, j -> 'a', AND
    name = _function_name(node)
    return (2, name) if name else (0, "")


def _function_name(node: exp.Expr) -> str:
    """The name of a function call written in its own syntax (TRIM(... FROM ...),
    POSITION(... IN ...), EXTRACT, CURRENT_TIMESTAMP), or one feedkv's parser builds."""
    if isinstance(node, AGGREGATES):
        return aggregate_name(node)
    if isinstance(node, exp.TimestampTrunc):
        return "date_trunc"
    if isinstance(node, exp.AtTimeZone):  # NB: the call it stands for: timezone(zone, value)
        return "timezone"
    if isinstance(node, exp.Trim):
        position = str(node.args.get("position") or "").upper()
        return {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "btrim")
    if isinstance(node, exp.Pad):
        return "lpad" if node.args.get("is_left") else "rpad"
    if type(node) in _FUNCTION_NODES:
        return _FUNCTION_NODES[type(node)][0]
    if isinstance(node, exp.Func):
        name = node.sql_name() if not isinstance(node, exp.Anonymous) else node.name
        return name.lower()
    return ""


def _cast_name(node: exp.Cast) -> str:
    """A cast's column name when its operand gives none: its type's PostgreSQL name (an
    array's element type's), as CockroachDB's computeCastName."""
    from feedkv.sql.parser import column_type

    try:
        ctype = column_type(node.args["to"])
    except SQLError:
        return ""
    if ctype.kind is Kind.ARRAY and ctype.element is not None:
        ctype = ctype.element
    if ctype.kind is Kind.ENUM:
        return str(ctype.type_name or "")
    if ctype.kind is Kind.INT:
        return {16: "int2", 32: "int4"}.get(ctype.width or 64, "int8")
    if ctype.kind is Kind.FLOAT:
        return "float4" if ctype.width == 32 else "float8"
    if ctype.kind is Kind.STRING and ctype.fixed:
        return "bpchar"
    return _PG_NAMES.get(ctype.kind, "")


_PG_NAMES = {
    Kind.DECIMAL: "numeric",
    Kind.STRING: "text",
    Kind.BYTES: "bytea",
    Kind.BOOL: "bool",
    Kind.DATE: "date",
    Kind.TIMESTAMP: "timestamp",
    Kind.TIMESTAMPTZ: "timestamptz",
    Kind.UUID: "uuid",
    Kind.JSONB: "jsonb",
    Kind.TIME: "time",
    Kind.INTERVAL: "interval",
    Kind.INET: "inet",
    Kind.BIT: "bit",
    Kind.VARBIT: "varbit",
}
# Operators sqlglot reads as function calls: their columns are ?column?, as in CockroachDB.
_OPERATOR_FUNCTIONS = (
    exp.Pow, exp.JSONExtract, exp.JSONExtractScalar, exp.JSONBExtract, exp.JSONBExtractScalar,
    exp.ArrayContainsAll, exp.ArrayContainedBy, exp.JSONBContainsTopKey, exp.ArrayOverlaps,
    exp.RegexpLike, exp.RegexpILike, exp.Sqrt, exp.Connector,
)  # fmt: skip


def compile_expr(node: exp.Expr, scope: Scope) -> Compiled:
    """``node`` as a closure ``(row, context) -> value``. Errors about the expression
    itself (unknown columns or functions, aggregates where they are not allowed) are
    raised here, before any row is read."""
    return _Compiler(scope).compile(node)


def placeholder_index(node: exp.Parameter) -> int:
    """The index among the statement's parameters of the placeholder ``node`` (``$1``:
    0); 42601 for one that names none."""
    text = node.this.name if isinstance(node.this, exp.Expr) else str(node.this)
    if not text.isdigit() or int(text) < 1:
        raise SQLError("42601", f"invalid placeholder ${text}")
    return int(text) - 1


def condition(node: exp.Expr, scope: Scope, clause: str = "WHERE") -> exp.Expr:
    """``node`` checked as a condition, whatever rows it will meet: a string constant
    must read as a bool (``'true'``; it then stands for that bool), and an expression
    whose type is known must be a bool (42804, as CockroachDB)."""
    inner = node.this if isinstance(node, exp.Paren) else node
    if isinstance(inner, exp.Literal) and inner.is_string:
        return exp.Boolean(this=coerce(inner.this, ColumnType(Kind.BOOL), None))
    kind = static_kind(node, scope)
    if kind is not None and kind is not Kind.BOOL:
        name = kind.value.lower()
        raise SQLError("42804", f"argument of {clause} must be type bool, not type {name}")
    return node


# The operators whose left operand is `j -> 'k'` in `j -> 'k' <op> ...` (JSON's own, of
# one precedence, left to right; and those binding looser: comparisons, LIKE, IS, AND, OR,
# containment), as PostgreSQL's and CockroachDB's grammars rank them.
_NO_TIGHTER_THAN_ARROW = (
    exp.JSONExtract, exp.JSONExtractScalar, exp.JSONBExtract, exp.JSONBExtractScalar,
    exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.NullSafeNEQ,
    exp.And, exp.Or, exp.Is, exp.In, exp.Between, exp.Like, exp.ILike, exp.JSONBContains,
    exp.ArrayContainsAll, exp.ArrayContainedBy,
)  # fmt: skip

_BOOLEAN_NODES = (
    exp.Boolean, exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ,
    exp.NullSafeNEQ, exp.And, exp.Or, exp.Not, exp.Is, exp.In, exp.Between, exp.Like,
    exp.ILike, exp.SimilarTo, exp.Escape, exp.JSONBContainsTopKey,
)  # fmt: skip


def static_kind(node: exp.Expr, scope: Scope) -> Kind | None:
    """The kind of value ``node`` gives, where it follows from the tree alone (``None``:
    it does not)."""
    if isinstance(node, exp.Paren):
        return static_kind(node.this, scope)
    if isinstance(node, _BOOLEAN_NODES):
        return Kind.BOOL
    if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
        return scope.find(node)[2].kind
    if isinstance(node, exp.Literal) and not node.is_string:
        return Kind.INT if node.this.isdigit() else Kind.DECIMAL
    if isinstance(node, exp.Cast):
        from feedkv.sql.parser import column_type

        return column_type(node.args["to"]).kind
    if isinstance(node, exp.JSONExtract | exp.JSONBExtract):
        return Kind.JSONB
    if isinstance(node, exp.Anonymous) and str(node.this).lower() in _JSON_FUNCTIONS:
        return Kind.JSONB
    if isinstance(node, exp.DPipe) and _json_concat(node, scope):  # j || '{}' || '{}'
        return Kind.JSONB
    return None


# NB: their results are JSONB whatever they hold: a JSON string ('"2026-01-02"') is a
# Python str, whose text as JSON has its quotes
_JSON_FUNCTIONS = frozenset(
    {
        "to_jsonb", "to_json", "row_to_json", "jsonb_build_object", "json_build_object",
        "jsonb_build_array", "json_build_array", "jsonb_set", "jsonb_insert", "jsonb_strip_nulls",
        "json_strip_nulls",
    }
)  # fmt: skip


def _annotation_fits(found: Kind | None, target: Kind) -> bool:
    """Whether a value of kind ``found`` is of ``target``'s type as ``e:::T`` asks (a
    JSON document's kind is None; BIT and VARBIT values are both bit strings)."""
    if found is None:
        return target is Kind.JSONB
    bits = (Kind.BIT, Kind.VARBIT)
    return found is target or (found in bits and target in bits)


def is_constant(node: exp.Expr) -> bool:
    """Whether ``node`` names no column (a subquery is a constant of its statement)."""
    return not any(True for _ in outer_nodes(node, exp.Column))


class _Compiler:
    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def compile(self, node: exp.Expr) -> Compiled:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise SQLError("0A000", f"unsupported expression: {_shown(node)}")
        return handler(self, node)

    def typed(self, node: exp.Expr) -> ColumnType | None:
        if isinstance(node, exp.Column):
            return self.scope.find(node)[2]
        if isinstance(node, exp.Paren):
            return self.typed(node.this)
        return None

    def _element_typed(self, node: exp.Expr) -> bool:
        """Whether ``node`` is known to be of a type other than an array: a cast to
        one, or a column of one (a bare NULL or parameter is not known)."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Cast):
            return not node.to.is_type(exp.DataType.Type.ARRAY)
        found = self.typed(node) if isinstance(node, exp.Column) else None
        return found is not None and found.kind is not Kind.ARRAY

    # Leaves.

    def literal(self, node: exp.Literal) -> Compiled:
        value: Any
        if node.is_string:
            value = node.this
        else:
            text = node.this
            try:
                value = int(text)
            except ValueError:
                try:
                    value = decimal.Decimal(text)
                except decimal.InvalidOperation:
                    raise SQLError("42601", f"invalid number {text!r}") from None
        return lambda row, ctx: value

    def boolean(self, node: exp.Boolean) -> Compiled:
        value = bool(node.this)
        return lambda row, ctx: value

    def null(self, node: exp.Null) -> Compiled:
        return lambda row, ctx: None

    def hexstring(self, node: exp.HexString) -> Compiled:
        try:
            value = bytes.fromhex(node.this)
        except ValueError:
            raise SQLError("22P02", f"invalid hexadecimal bytes literal x'{node.this}'") from None
        return lambda row, ctx: value

    def bitstring(self, node: exp.BitString) -> Compiled:
        """``B'0101'``: a bit string (a VARBIT of its length)."""
        value = BitString.parse(str(node.this))
        return lambda row, ctx: value

    def bytestring(self, node: exp.ByteString) -> Compiled:
        value = str(node.this)
        return lambda row, ctx: value

    def parameter(self, node: exp.Parameter) -> Compiled:
        index = placeholder_index(node)

        def param(row: Env, ctx: Context) -> Any:
            try:
                return ctx.params[index]
            except IndexError:
                raise SQLError("08P01", f"no value given for placeholder ${index + 1}") from None

        return param

    def column(self, node: exp.Column) -> Compiled:
        depth, index, _ = self.scope.find(node)
        if depth:
            return lambda row, ctx: ctx.outer[-depth][index]
        return lambda row, ctx: row[index]

    def tuple_(self, node: exp.Tuple) -> Compiled:
        """``(a, b)`` or ``ROW(a, b)`` as a value: a record (comparisons and IN of row
        values pair their elements instead, see :meth:`comparison`)."""
        elements = [self.compile(e) for e in node.expressions]
        json_at = frozenset(
            place
            for place, e in enumerate(node.expressions)
            if static_kind(e, self.scope) is Kind.JSONB
        )
        names = tuple(node.meta.get("labels", ()))
        return lambda row, ctx: Record(tuple(e(row, ctx) for e in elements), json_at, names)

    def star(self, node: exp.Star) -> Compiled:
        raise SQLError("42601", "* is only allowed as a whole SELECT item or in count(*)")

    # Operators.

    def paren(self, node: exp.Paren) -> Compiled:
        return self.compile(node.this)

    def neg(self, node: exp.Neg) -> Compiled:
        inner = self.compile(node.this)

        def neg(row: Env, ctx: Context) -> Any:
            value = inner(row, ctx)
            if value is None:
                return None
            if isinstance(value, Interval):
                return -value
            if not _is_number(value):
                raise SQLError("42883", f"unary minus is not defined for {type_of_value(value)}")
            if isinstance(value, int) and value == INT64_MIN:
                raise SQLError("22003", "integer out of range for type INT8")
            return -value

        return neg

    def arithmetic(self, node: exp.Binary) -> Compiled:
        op = type(node)
        if op is exp.Sub and static_kind(node.this, self.scope) is Kind.JSONB:
            return self._jsonb_minus(node)
        left, right = self.compile(node.this), self.compile(node.expression)
        # An untyped string constant beside an operand of another kind takes the type
        # untyped_operand_kind gives it: converted now where that kind follows from the
        # tree (so a bad constant, as in 'x' + 5, fails whatever the rows: 22P02), else
        # for each row, from the other value's kind (the *_untyped flags).
        left_untyped = right_untyped = False
        text_sides = _is_string_constant(node.this), _is_string_constant(node.expression)
        if text_sides[0] != text_sides[1]:
            literal, other = (
                (node.this, node.expression) if text_sides[0] else (node.expression, node.this)
            )
            kind = static_kind(other, self.scope)
            if kind is None:
                left_untyped, right_untyped = text_sides
            else:
                typed = _typed_constant(op, literal, kind, text_sides[0])
                if typed is not None and text_sides[0]:
                    left = typed
                elif typed is not None:
                    right = typed
        if left_untyped or right_untyped:

            def arith_typed_by_row(row: Env, ctx: Context) -> Any:
                a, b = left(row, ctx), right(row, ctx)
                if a is None or b is None:
                    return None
                if left_untyped:
                    return _arithmetic(op, _typed_beside(op, a, b, True), b)
                return _arithmetic(op, a, _typed_beside(op, b, a, False))

            return arith_typed_by_row
        # NB: a numeric constant (or placeholder) beside a FLOAT is a FLOAT, as in a
        # comparison (f + 0.2 is FLOAT arithmetic, not DECIMAL's)
        left_number = _is_number_constant(node.this) or isinstance(node.this, exp.Parameter)
        right_number = _is_number_constant(node.expression) or isinstance(
            node.expression, exp.Parameter
        )

        exact = _INT_ARITHMETIC.get(op)

        def arith(row: Env, ctx: Context) -> Any:
            a, b = left(row, ctx), right(row, ctx)
            if a is None or b is None:
                return None
            if exact is not None and type(a) is int and type(b) is int:
                result = exact(a, b)
                if INT64_MIN <= result <= INT64_MAX:
                    return result
            if right_number and isinstance(a, float) and _is_number(b):
                b = _as_float_like(b, a)
            elif left_number and isinstance(b, float) and _is_number(a):
                a = _as_float_like(a, b)
            return _arithmetic(op, a, b)

        return arith

    def _jsonb_minus(self, node: exp.Binary) -> Compiled:
        """``j - 'k'`` (an object without key ``k``; an array without the string
        elements ``k``), ``j - n`` (an array without its ``n``-th element, counted from
        its end when negative), ``j - ARRAY['k', ...]`` (without each): PostgreSQL's."""
        left, right = self.compile(node.this), self.compile(node.expression)

        def minus(row: Env, ctx: Context) -> Any:
            j, what = left(row, ctx), right(row, ctx)
            if j is None or what is None:
                return None
            document = jsonb.document(j)
            if isinstance(what, Array | str):
                keys = (
                    {str(k) for k in what.values if k is not None}
                    if isinstance(what, Array)
                    else {what}
                )
                if isinstance(document, dict):
                    return {k: v for k, v in document.items() if k not in keys}
                if isinstance(document, list):
                    return [v for v in document if not (isinstance(v, str) and v in keys)]
            elif is_int(what):
                if isinstance(document, list):
                    n = what if what >= 0 else len(document) + what
                    return [v for i, v in enumerate(document) if i != n]
                if isinstance(document, dict):
                    raise SQLError("22023", "cannot delete from object using integer index")
            else:
                raise SQLError(
                    "42883", f"unsupported binary operator: <jsonb> - <{type_of_value(what)}>"
                )
            raise SQLError("22023", "cannot delete from scalar")

        return minus

    def bitwise(self, node: exp.Binary) -> Compiled:
        """``&``, ``|``, ``#``, ``<<`` and ``>>`` of INTs or bit strings."""
        left, right = self.compile(node.this), self.compile(node.expression)
        op = type(node)

        def bitwise(row: Env, ctx: Context) -> Any:
            a, b = left(row, ctx), right(row, ctx)
            if a is None or b is None:
                return None
            return _bitwise(op, a, b)

        return bitwise

    def bitwise_not(self, node: exp.BitwiseNot) -> Compiled:
        inner = self.compile(node.this)

        def invert(row: Env, ctx: Context) -> Any:
            value = inner(row, ctx)
            if value is None:
                return None
            if isinstance(value, BitString):
                return value.inverted()
            if not is_int(value):
                raise SQLError("42883", f"unsupported unary operator: ~<{type_of_value(value)}>")
            return ~value

        return invert

    def dpipe(self, node: exp.DPipe) -> Compiled:
        left, right = self.compile(node.this), self.compile(node.expression)
        if _json_concat(node, self.scope):
            return self._jsonb_concat(left, right)
        # NB: a NULL beside an array is an element (appended or prepended, as PostgreSQL's
        # array_append) when its side is of a type other than an array; else it is an
        # array, and the other array is the answer (array_cat)
        left_element, right_element = (
            self._element_typed(node.this),
            self._element_typed(node.expression),
        )

        def concat(row: Env, ctx: Context) -> Any:
            a, b = left(row, ctx), right(row, ctx)
            if isinstance(a, Array) and b is None:
                return Array((*a.values, None), a.element) if right_element else a
            if isinstance(b, Array) and a is None:
                return Array((None, *b.values), b.element) if left_element else b
            if a is None or b is None:
                return None
            if isinstance(a, bytes) and isinstance(b, bytes):
                return a + b
            if isinstance(a, Array) or isinstance(b, Array):
                return _array_concat(a, b)
            return _text(a, ctx) + _text(b, ctx)

        return concat

    def _jsonb_concat(self, left: Compiled, right: Compiled) -> Compiled:
        """``j || k`` of JSONB values (:func:`jsonb.concat`); a string beside one is its
        JSON text."""

        def as_json(value: Any, ctx: Context) -> Any:
            if type(value) is str:
                return coerce(value, ColumnType(Kind.JSONB), None)
            return value

        def concat(row: Env, ctx: Context) -> Any:
            a, b = left(row, ctx), right(row, ctx)
            if a is None or b is None:
                return None
            return jsonb.concat(as_json(a, ctx), as_json(b, ctx))

        return concat

    def comparison(self, node: exp.Binary) -> Compiled:
        if isinstance(node.expression, exp.Any | exp.All):
            return self._quantified(node, node.expression)
        right = node.expression
        if (
            isinstance(right, exp.Anonymous)
            and str(right.this).upper() == "ALL"
            and len(right.expressions) == 1
        ):
            # NB: sqlglot reads ALL (ARRAY[...]) as a call of a function named ALL
            return self._quantified(node, exp.All(this=right.expressions[0]))
        if isinstance(node.this, exp.Tuple) or isinstance(node.expression, exp.Tuple):
            return self._row_comparison(node)
        left, right, decide = self._comparer(node.this, node.expression, type(node))

        def cmp(row: Env, ctx: Context) -> Any:
            a, b = left(row, ctx), right(row, ctx)
            if a is None or b is None:
                return None
            return decide(a, b)

        return cmp

    def _comparer(
        self, this: exp.Expr, that: exp.Expr, op: type[exp.Binary]
    ) -> tuple[Compiled, Compiled, Callable[[Any, Any], Any]]:
        """``this op that`` as its two operands and what decides it for two non-NULL
        values (a comparison, IS [NOT] DISTINCT FROM): constants typed from the other
        side, strings read as the other side's type."""
        left, right = self._pair(this, that)
        compare = _COMPARE[op]
        symbol = _SYMBOLS[op]
        # A string constant compared with a non-string takes the other side's type.
        left_text = _is_text_constant(this)
        right_text = _is_text_constant(that)
        kinds = {static_kind(this, self.scope), static_kind(that, self.scope)}
        if Kind.JSONB in kinds and kinds <= {Kind.JSONB, None}:
            return left, right, _json_comparer(op, left_text, right_text)
        # A numeric constant compared with a FLOAT is a FLOAT, with a FLOAT4 a FLOAT4
        # (CockroachDB types the constant from the other side): FLOAT column f holding
        # 0.1 has f = 0.1, and REAL column r holding 0.1 has r = 0.1.
        left_number = _is_number_constant(this)
        right_number = _is_number_constant(that)

        def decide(a: Any, b: Any) -> Any:
            if right_number and isinstance(a, float) and _is_number(b):
                b = _as_float_like(b, a)
            elif left_number and isinstance(b, float) and _is_number(a):
                a = _as_float_like(a, b)
            elif right_text and isinstance(a, FixedChar) and isinstance(b, str):
                b = b.rstrip(" ")  # a string constant compared with a CHAR(n) is one
            elif left_text and isinstance(b, FixedChar) and isinstance(a, str):
                a = a.rstrip(" ")
            try:
                return compare(a, b)
            except TypeError:
                if right_text and isinstance(b, str):
                    return compare(a, _as_kind_of(b, a, symbol))
                if left_text and isinstance(a, str):
                    return compare(_as_kind_of(a, b, symbol), b)
                if _day_beside_moment(a, b):
                    return compare(_moment_of(a, b), _moment_of(b, a))
                if isinstance(a, Record):
                    return _row_compare(op, _record_pairs(a, b, op))
                raise _incomparable(symbol, a, b) from None

        return left, right, decide

    def _row_comparison(self, node: exp.Binary) -> Compiled:
        """``(a, b) op (c, d)``: = and <> pair by pair (a NULL pair makes an
        undecided result NULL); <, <=, >, >= by the first pair that differs, NULL if a
        NULL comes first (as PostgreSQL). A side that is not written as a row (a
        subquery's record) is compared with the other's record as it runs."""
        op: type[exp.Binary] = type(node)
        if not isinstance(node.this, exp.Tuple) or not isinstance(node.expression, exp.Tuple):
            left, right = self.compile(node.this), self.compile(node.expression)

            def records(row: Env, ctx: Context) -> Any:
                a, b = left(row, ctx), right(row, ctx)
                if a is None or b is None:
                    return None
                return _row_compare(op, _record_pairs(a, b, op))

            return records
        pairs = self._row_pairs(node.this, node.expression)

        def row(row: Env, ctx: Context) -> Any:
            return _row_compare(op, [(a(row, ctx), b(row, ctx)) for a, b in pairs])

        return row

    def _row_pairs(self, a: exp.Expr, b: exp.Expr) -> list[tuple[Compiled, Compiled]]:
        if not isinstance(a, exp.Tuple) or not isinstance(b, exp.Tuple):
            raise SQLError("0A000", f"a row compares with a row only: {_shown(a.parent or a)}")
        if len(a.expressions) != len(b.expressions):
            raise SQLError("42601", "unequal number of entries in row expressions")
        return [self._pair(x, y) for x, y in zip(a.expressions, b.expressions, strict=True)]

    def _quantified(self, node: exp.Binary, quantifier: exp.Any | exp.All) -> Compiled:
        """``x op ANY (subquery)`` (SOME is ANY) and ``x op ALL (subquery)``: true if
        some (every) row compares true, false if every (some) row compares false, else
        NULL; over no rows ANY is false and ALL true, whatever ``x``."""
        inner = self.compile(node.this)
        if isinstance(quantifier.this, exp.Subquery | exp.Select):
            rows = _subquery_rows(quantifier)
        else:
            rows = self._array_rows(quantifier.this, inner)
        compare, symbol = _COMPARE[type(node)], _SYMBOLS[type(node)]
        every = isinstance(quantifier, exp.All)
        # NB: ARRAY[0.7] of numeric constants beside a FLOAT (FLOAT4) holds FLOATs (FLOAT4s),
        # as a constant compared with one is one
        array = quantifier.this.this if isinstance(quantifier.this, exp.Paren) else quantifier.this
        constants = isinstance(array, exp.Array) and all(
            _is_number_constant(e) for e in array.expressions
        )
        # x = ANY (an array fixed for the statement): a hash set, made at its first row
        # (for each type of x: a string is read as an array of x's type)
        hashed = (
            type(node) is exp.EQ
            and not every
            and not isinstance(quantifier.this, exp.Subquery | exp.Select)
            and is_fixed_value(quantifier.this)
        )
        key = _value_set_key(quantifier.this, None)

        def quantified(row: Env, ctx: Context) -> Any:
            if hashed:
                value = inner(row, ctx)
                kind_key = f"{key}:{kind_of_value(value)}"
                cached = ctx.value_sets.get(kind_key)
                if cached is None:
                    elements = rows(row, ctx)
                    cached = ctx.value_sets[kind_key] = (elements, _ValueSet.of(elements))
                if not cached[0]:
                    return every
                if value is None:
                    return None
                if not (constants and isinstance(value, float)):
                    return _set_member(value, cached)
                return compared(value, cached[0])
            found = rows(row, ctx)
            if not found:
                return every
            return compared(inner(row, ctx), found)

        def compared(value: Any, found: Sequence[tuple[Any, ...]]) -> Any:
            unknown = False
            for (candidate,) in found:
                if value is None or candidate is None:
                    unknown = True
                    continue
                if constants and isinstance(value, float) and _is_number(candidate):
                    candidate = _as_float_like(candidate, value)
                try:
                    verdict = compare(value, candidate)
                except TypeError:
                    raise _incomparable(symbol, value, candidate) from None
                if verdict is not every:
                    return verdict
            return None if unknown else every

        return quantified

    def _array_rows(
        self, node: exp.Expr, value: Compiled
    ) -> Callable[[Env, Context], list[tuple[Any, ...]]]:
        """``x op ANY (array)``: the array's elements as rows (a string is read as an
        array of ``x``'s type, as a literal ``'{1,2}'`` is)."""
        array = self.compile(node)

        def rows(row: Env, ctx: Context) -> list[tuple[Any, ...]]:
            found = array(row, ctx)
            if found is None:
                return [(None,)]  # NB: x = ANY (NULL) is NULL
            if isinstance(found, str):
                kind = kind_of_value(value(row, ctx)) or Kind.STRING
                element = ColumnType(kind)
                found = coerce(found, ColumnType(Kind.ARRAY, element=element), None)
            if not isinstance(found, Array):
                raise SQLError(
                    "42809", f"op ANY/ALL (array) requires an array, not {type_of_value(found)}"
                )
            return [(v,) for v in found.values]

        return rows

    def quantifier(self, node: exp.Any | exp.All) -> Compiled:
        raise SQLError("42601", f"ANY and ALL follow a comparison operator: {_shown(node)}")

    def null_safe(self, node: exp.Binary) -> Compiled:
        """``a IS [NOT] DISTINCT FROM b``: ``=`` (with its typing of constants, and its
        errors for values that do not compare) where NULL equals NULL only."""
        distinct = isinstance(node, exp.NullSafeNEQ)
        if isinstance(node.this, exp.Tuple) and isinstance(node.expression, exp.Tuple):
            return self._row_distinct(node, distinct)
        left, right, equal = self._comparer(node.this, node.expression, exp.EQ)

        def cmp(row: Env, ctx: Context) -> Any:
            a, b = left(row, ctx), right(row, ctx)
            if a is None or b is None:
                return (a is None and b is None) is not distinct
            if isinstance(a, Record) and isinstance(b, Record):
                pairs = _record_pairs(a, b, exp.EQ)
                return all(_not_distinct(x, y) for x, y in pairs) is not distinct
            return bool(equal(a, b)) is not distinct

        return cmp

    def _row_distinct(self, node: exp.Binary, distinct: bool) -> Compiled:
        """``(a, b) IS [NOT] DISTINCT FROM (c, d)``: the rows differ where a pair does,
        NULL equal to NULL only (as PostgreSQL)."""
        pairs = self._row_pairs(node.this, node.expression)

        def row_distinct(row: Env, ctx: Context) -> Any:
            same = all(_not_distinct(a(row, ctx), b(row, ctx)) for a, b in pairs)
            return same is not distinct

        return row_distinct

    def _pair(self, a: exp.Expr, b: exp.Expr) -> tuple[Compiled, Compiled]:
        """Both sides compiled; a constant side is converted to the other side's column
        type."""
        left, right = self.compile(a), self.compile(b)
        left_type, right_type = self.typed(a), self.typed(b)
        if left_type is not None and right_type is None and is_constant(b):
            right = _converted(right, left_type)
        elif right_type is not None and left_type is None and is_constant(a):
            left = _converted(left, right_type)
        return left, right

    def and_(self, node: exp.And) -> Compiled:
        return self._junction(node, decisive=False)

    def or_(self, node: exp.Or) -> Compiled:
        return self._junction(node, decisive=True)

    def _junction(self, node: exp.Binary, decisive: bool) -> Compiled:
        """AND (``decisive`` False) or OR (True): either side equal to ``decisive``
        decides; otherwise NULL on either side gives NULL."""
        left, right = self.compile(node.this), self.compile(node.expression)

        def junction(row: Env, ctx: Context) -> Any:
            a = _truth(left(row, ctx))
            if a is decisive:
                return decisive
            b = _truth(right(row, ctx))
            if b is decisive:
                return decisive
            return None if a is None or b is None else not decisive

        return junction

    def isnan(self, node: exp.IsNan) -> Compiled:
        """``isnan(x)`` of a FLOAT or DECIMAL: whether it is NaN (NULL for NULL)."""
        inner = self.compile(node.this)

        def isnan(row: Env, ctx: Context) -> Any:
            value = inner(row, ctx)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, float | decimal.Decimal):
                raise SQLError("42883", f"unknown signature: isnan({type_of_value(value)})")
            return is_nan(value)

        return isnan

    def not_(self, node: exp.Not) -> Compiled:
        inner = self.compile(node.this)

        def not_(row: Env, ctx: Context) -> Any:
            value = _truth(inner(row, ctx))
            return None if value is None else not value

        return not_

    def is_(self, node: exp.Is) -> Compiled:
        inner = self.compile(node.this)
        target = node.expression
        negate = bool(node.args.get("negate"))
        if isinstance(target, exp.Null):

            def is_null(row: Env, ctx: Context) -> Any:
                return (inner(row, ctx) is None) != negate

            return is_null
        if isinstance(target, exp.Boolean):
            wanted = bool(target.this)

            def is_bool(row: Env, ctx: Context) -> Any:
                return (_truth(inner(row, ctx)) is wanted) != negate

            return is_bool
        if isinstance(target, exp.Column) and not target.table and _is_nan_word(target.this):
            # CockroachDB's x IS [NOT] NAN: x = 'NaN' (x <> 'NaN'), so NULL for NULL

            def is_nan(row: Env, ctx: Context) -> Any:
                value = inner(row, ctx)
                if value is None:
                    return None
                if not isinstance(value, float | decimal.Decimal):
                    raise _incomparable("=", value, "NaN")
                return _is_nan(value) != negate

            return is_nan
        raise SQLError("0A000", f"unsupported IS expression: {_shown(node)}")

    def in_(self, node: exp.In) -> Compiled:
        query = node.args.get("query")
        if query is not None:
            return self._in_subquery(node, query)
        if isinstance(node.this, exp.Tuple):
            return self._row_in(node)
        target_type = self.typed(node.this)
        inner = self.compile(node.this)
        options = []
        numbers = []  # NB: a numeric constant beside a FLOAT is one, as in a comparison
        for option in node.expressions:
            compiled = self.compile(option)
            if target_type is not None and is_constant(option):
                compiled = _converted(compiled, target_type)
            options.append(compiled)
            numbers.append(_is_number_constant(option))
        # A list of values fixed for the statement is a hash set, made at its first row.
        fixed = all(is_fixed_value(option) for option in node.expressions)
        key = _value_set_key(node, target_type)

        def in_(row: Env, ctx: Context) -> Any:
            value = inner(row, ctx)
            if value is None:
                return None
            if isinstance(value, float):
                found = (o(row, ctx) for o in options)
                return _member(
                    value,
                    (
                        _as_float_like(v, value) if number and _is_number(v) else v
                        for v, number in zip(found, numbers, strict=True)
                    ),
                )
            if fixed:
                cached = ctx.value_sets.get(key)
                if cached is None:
                    rows = [(o(row, ctx),) for o in options]
                    cached = ctx.value_sets[key] = (rows, _ValueSet.of(rows))
                return _set_member(value, cached)
            return _member(value, (o(row, ctx) for o in options))

        return in_

    def _row_in(self, node: exp.In) -> Compiled:
        """``(a, b) IN ((1, 2), (3, 4))``: true if a row equals, else NULL if one is
        undecided, else false."""
        options = [self._row_pairs(node.this, option) for option in node.expressions]

        def in_(row: Env, ctx: Context) -> Any:
            return _row_member([(a(row, ctx), b(row, ctx)) for a, b in pairs] for pairs in options)

        return in_

    def _in_subquery(self, node: exp.In, query: exp.Expr) -> Compiled:
        rows = _subquery_rows(query)
        if isinstance(node.this, exp.Tuple):
            values = [self.compile(e) for e in node.this.expressions]

            def row_in(row: Env, ctx: Context) -> Any:
                found = rows(row, ctx)
                if not found:
                    return False  # NB: as IN an empty set below
                mine = [v(row, ctx) for v in values]
                return _row_member(list(zip(mine, other, strict=True)) for other in found)

            return row_in
        inner = self.compile(node.this)
        key = subquery_key(query)

        def in_(row: Env, ctx: Context) -> Any:
            found = rows(row, ctx)
            if not found:
                return False  # NB: as CockroachDB: IN an empty set is false, even for NULL
            value = inner(row, ctx)
            if value is None:
                return None
            cached = ctx.value_sets.get(key)
            if cached is None or cached[0] is not found:
                cached = ctx.value_sets[key] = (found, _ValueSet.of(found))
            return _set_member(value, cached)

        return in_

    def subquery(self, node: exp.Subquery) -> Compiled:
        """A scalar subquery: its one value, NULL without rows, 21000 with more."""
        rows = _subquery_rows(node)

        def scalar(row: Env, ctx: Context) -> Any:
            found = rows(row, ctx)
            if len(found) > 1:
                raise SQLError(
                    "21000", "more than one row returned by a subquery used as an expression"
                )
            return found[0][0] if found else None

        return scalar

    def exists(self, node: exp.Exists) -> Compiled:
        rows = _subquery_rows(node)
        return lambda row, ctx: bool(rows(row, ctx))

    def between(self, node: exp.Between) -> Compiled:
        """``x BETWEEN a AND b`` is ``x >= a AND x <= b`` (each comparison types its
        constant from ``x``); with SYMMETRIC, the bounds are taken in either order:
        ``... OR (x >= b AND x <= a)``, as PostgreSQL and CockroachDB expand it."""
        _refuse_node_args(node, {"this", "low", "high", "symmetric"})
        low, high = node.args["low"], node.args["high"]

        def within(lower: exp.Expr, upper: exp.Expr) -> exp.Expr:
            return exp.And(
                this=exp.GTE(this=node.this.copy(), expression=lower.copy()),
                expression=exp.LTE(this=node.this.copy(), expression=upper.copy()),
            )

        if node.args.get("symmetric"):
            return self.compile(exp.Or(this=within(low, high), expression=within(high, low)))
        return self.compile(within(low, high))

    def like(self, node: exp.Like | exp.ILike, escape: str | None = None) -> Compiled:
        inner = self.compile(node.this)
        pattern_of = self.compile(node.expression)
        negate = bool(node.args.get("negate"))
        flags = re.IGNORECASE if isinstance(node, exp.ILike) else 0

        def like(row: Env, ctx: Context) -> Any:
            value, pattern = inner(row, ctx), pattern_of(row, ctx)
            if value is None or pattern is None:
                return None
            if not isinstance(value, str) or not isinstance(pattern, str):
                raise _incomparable("LIKE", value, pattern)
            return _like_compiled(pattern, escape, flags).fullmatch(value) != negate

        return like

    def regexp_like(self, node: exp.RegexpLike | exp.RegexpILike) -> Compiled:
        """``value ~ pattern`` (``~*``: ignoring case): whether the regular expression
        matches somewhere in the string, as CockroachDB's (``!~`` is its NOT)."""
        inner = self.compile(node.this)
        pattern_of = self.compile(node.expression)
        flags = "i" if isinstance(node, exp.RegexpILike) else ""
        symbol = "~*" if flags else "~"

        def regexp_like(row: Env, ctx: Context) -> Any:
            value, pattern = inner(row, ctx), pattern_of(row, ctx)
            if value is None or pattern is None:
                return None
            if not isinstance(value, str) or not isinstance(pattern, str):
                raise _incomparable(symbol, value, pattern)
            return regexp.compiled(pattern, flags).search(value) is not None

        return regexp_like

    def similar_to(self, node: exp.SimilarTo, escape: str | None = None) -> Compiled:
        """``value SIMILAR TO pattern``: whether the SQL regular expression matches the
        whole string (:func:`~feedkv.sql.regexp.similar_to`)."""
        inner = self.compile(node.this)
        pattern_of = self.compile(node.expression)

        def similar_to(row: Env, ctx: Context) -> Any:
            value, pattern = inner(row, ctx), pattern_of(row, ctx)
            if value is None or pattern is None:
                return None
            if not isinstance(value, str) or not isinstance(pattern, str):
                raise _incomparable("SIMILAR TO", value, pattern)
            return regexp.similar_to(pattern, escape).fullmatch(value) is not None

        return similar_to

    def escape(self, node: exp.Escape) -> Compiled:
        inner = node.this
        char = node.expression
        matching = exp.Like | exp.ILike | exp.SimilarTo
        if not isinstance(inner, matching) or not isinstance(char, exp.Literal):
            raise SQLError("0A000", f"unsupported ESCAPE: {_shown(node)}")
        if len(char.this) > 1:  # NB: ESCAPE '' turns escaping off, as in PostgreSQL
            raise SQLError("22019", "invalid escape string: it must be one character")
        if isinstance(inner, exp.SimilarTo):
            return self.similar_to(inner, char.this)
        return self.like(inner, char.this)

    def cast(self, node: exp.Cast) -> Compiled:
        from feedkv.sql.parser import column_type

        inner = self.compile(node.this)
        target = column_type(node.args["to"])
        if node.meta.get("annotation"):
            checked = self._annotation(node.this, inner, target)
            if checked is not None:
                return checked
        if target.kind is Kind.STRING and static_kind(node.this, self.scope) is Kind.JSONB:
            # NB: a JSONB's text is its JSON ('"abc"'::JSONB::STRING is "abc" with its
            # quotes): its Python value alone does not say it is a JSON string
            def json_text(row: Env, ctx: Context) -> Any:
                value = inner(row, ctx)
                if value is None:
                    return None
                text = jsonb.dumps(value, spaced=True)
                return text if target.width is None else text[: target.width]

            return json_text
        if target.kind is Kind.ENUM and target.labels is None:
            return _enum_cast(inner, target.type_name or "")

        def cast(row: Env, ctx: Context) -> Any:
            value = inner(row, ctx)
            if value is None:
                return None
            if value is JSON_NULL and target.kind is not Kind.JSONB:
                if target.kind is not Kind.STRING:
                    raise SQLError(
                        "22023", f"cannot cast jsonb null to type {target.sql().lower()}"
                    )
                return "null"
            if target.kind is Kind.STRING and isinstance(value, float):
                value = float_text(value, _float_digits(ctx))
            elif target.kind is Kind.STRING and not isinstance(value, str):
                value = format_value(value)
            elif target.kind is Kind.INT and isinstance(value, bool):
                value = int(value)
            elif target.kind is Kind.INT and isinstance(value, BitString):
                value = value.as_int(target.width or 64)
            elif target.kind is Kind.INTERVAL and isinstance(value, datetime.time):
                value = _time_as_interval(value)
            elif target.kind is Kind.TIME and isinstance(value, Interval):
                value = _interval_as_time(value)
            if target.kind is Kind.STRING and target.width is not None:
                # NB: an explicit cast to STRING(n) truncates (CockroachDB's STRING docs);
                # only assigning a longer value to such a column is an error
                value = value[: target.width]
            return coerce(value, target, None)

        return cast

    def _annotation(
        self, operand: exp.Expr, inner: Compiled, target: ColumnType
    ) -> Compiled | None:
        """CockroachDB's ``e:::T``: an assertion that ``e`` is of type ``T``, not a
        conversion. A string constant, a NULL or a placeholder takes the type as a cast
        would give it (``'a':::INT`` fails to parse, 22P02): None, compile the cast. A
        number constant must be one of ``T``'s (``1:::INT``, ``1.5:::DECIMAL``); any
        other operand's value must be of ``T``'s kind, else 42804."""
        if isinstance(operand, exp.Paren):
            operand = operand.this
        if isinstance(operand, exp.Null | exp.Placeholder) or (
            isinstance(operand, exp.Literal) and operand.is_string
        ):
            return None
        shown = _shown(operand)

        def refuse(found: str) -> NoReturn:
            raise SQLError(
                "42804",
                f"incompatible type annotation for {shown} as {target.sql().lower()}, "
                f"found type: {found}",
            )

        if isinstance(operand, exp.Literal):
            integral = operand.this.isdigit()
            numbers = (
                (Kind.INT, Kind.FLOAT, Kind.DECIMAL) if integral else (Kind.FLOAT, Kind.DECIMAL)
            )
            if target.kind not in numbers:
                refuse("int" if integral else "decimal")
            return None
        # NB: a grouped row's places (sum(k):::DECIMAL) have no kind in the scope
        places = any(c.name.startswith("__") for c in outer_nodes(operand, exp.Column))
        known = None if places else static_kind(operand, self.scope)
        if known is not None and not _annotation_fits(known, target.kind):
            refuse(known.value.lower())

        def annotated(row: Env, ctx: Context) -> Any:
            value = inner(row, ctx)
            if value is not None and not _annotation_fits(kind_of_value(value), target.kind):
                refuse(type_of_value(value))
            return value

        return annotated

    def interval(self, node: exp.Interval) -> Compiled:
        """``INTERVAL '2 hours'`` (sqlglot splits off a unit: ``'2' HOURS``)."""
        unit = node.args.get("unit")
        if not isinstance(node.this, exp.Literal) or not (
            unit is None or isinstance(unit, exp.Var)
        ):
            raise SQLError("0A000", f"unsupported interval: {_shown(node)}")
        text = node.this.name + (f" {unit.name.lower()}" if unit is not None else "")
        value = Interval.parse(text)
        return lambda row, ctx: value

    def array(self, node: exp.Array) -> Compiled:
        """``ARRAY[a, b]``: of the type its first non-NULL element has (the others
        converted to it, 42804 when they do not convert), but a DECIMAL[] where INTs
        and DECIMALs mix (``ARRAY[0, 0.5]``, as CockroachDB types its constants);
        ``ARRAY[]`` is a STRING[] until a cast says otherwise."""
        _refuse_node_args(node, {"expressions", "value_constructor"})
        if node.meta.get("query"):
            return self._array_of_query(node.expressions[0])
        items = [self.compile(item) for item in node.expressions]

        def array(row: Env, ctx: Context) -> Any:
            values = [item(row, ctx) for item in items]
            first = next((v for v in values if v is not None), None)
            element = _element_type(first)
            if element.kind is Kind.INT and any(isinstance(v, decimal.Decimal) for v in values):
                element = ColumnType(Kind.DECIMAL)
            return Array(tuple(coerce(v, element, None) for v in values), element)

        return array

    def _array_of_query(self, node: exp.Subquery) -> Compiled:
        """``ARRAY(query)`` (see parser._array_constructor): the query's one column, of
        the type its plan gives that column (as Describe reports it), so that no rows or
        only NULLs still make an array of that type; of the type of its first non-NULL
        value where the plan does not tell."""
        key = subquery_key(node)
        rows = _subquery_rows(node)

        def array(row: Env, ctx: Context) -> Any:
            found = rows(row, ctx)
            if found and len(found[0]) != 1:
                raise SQLError(
                    "42601", f"subquery must return only one column, found {len(found[0])}"
                )
            values = [r[0] for r in found]
            first = next((v for v in values if v is not None), None)
            return Array(tuple(values), _query_element(ctx.subqueries[key].types, first))

        return array

    def bracket(self, node: exp.Bracket) -> Compiled:
        """``a[i]``: the i-th element (1-based; sqlglot hands the index over 0-based),
        NULL outside the array."""
        if len(node.expressions) != 1 or isinstance(node.expressions[0], exp.Slice):
            raise SQLError("0A000", f"unsupported subscript: {_shown(node)}")
        target = self.compile(node.this)
        index = self.compile(node.expressions[0])

        def element(row: Env, ctx: Context) -> Any:
            value, at = target(row, ctx), index(row, ctx)
            if value is None or at is None:
                return None
            if not isinstance(value, Array):
                raise SQLError("42804", f"cannot subscript type {type_of_value(value)}")
            if isinstance(at, bool) or not isinstance(at, int):
                raise SQLError("42804", "array subscript must be an integer")
            return value.values[at] if 0 <= at < len(value.values) else None

        return element

    def array_length(self, node: exp.ArraySize) -> Compiled:
        """``array_length(a, 1)``: its length, NULL when empty (as PostgreSQL)."""
        target = self.compile(node.this)
        dimension = self.compile(node.expression) if node.expression is not None else None

        def length(row: Env, ctx: Context) -> Any:
            value = target(row, ctx)
            dim = dimension(row, ctx) if dimension is not None else 1
            if value is None or dim is None:
                return None
            if not isinstance(value, Array):
                raise SQLError(
                    "42883", f"array_length() takes an array, not {type_of_value(value)}"
                )
            return len(value.values) if dim == 1 and value.values else None

        return length

    # Functions.

    def current_timestamp(self, node: exp.Expr) -> Compiled:
        """now(), current_timestamp [(precision)]: the transaction's timestamp, its
        microseconds rounded to ``precision`` digits (0 to 6) when given (now() takes
        none)."""
        if node.meta.get("spelled") == "now":
            _no_arguments(node)
        digits = _time_precision(node)
        if digits is None:
            return lambda row, ctx: ctx.now
        return lambda row, ctx: _rounded_time(ctx.now, digits)

    def current_time(self, node: exp.CurrentTime) -> Compiled:
        """current_time [(precision)]: a TIMETZ in PostgreSQL and CockroachDB, a type
        feedkv lacks; refused (rather than answered as a TIME, which would drop the
        zone its clients read), pointing to the TIME and TIMESTAMPTZ forms."""
        raise SQLError(
            "0A000",
            "current_time is a TIMETZ (time with time zone), a type feedkv does not have; "
            "use localtime for the TIME of day in the session's time zone, or "
            "current_timestamp",
        )

    def local_timestamp(self, node: exp.Localtimestamp | exp.Localtime) -> Compiled:
        """localtimestamp [(precision)] (a TIMESTAMP) and localtime [(precision)] (a
        TIME): the transaction's timestamp in the session's time zone, without it."""
        digits = _time_precision(node)
        time_of_day = isinstance(node, exp.Localtime)

        def local(row: Env, ctx: Context) -> Any:
            moment = ctx.now.astimezone(current_zone()).replace(tzinfo=None)
            if digits is not None:
                moment = _rounded_time(moment, digits)
            return moment.time() if time_of_day else moment

        return local

    def current_date(self, node: exp.Expr) -> Compiled:
        _no_arguments(node)
        return lambda row, ctx: ctx.now.astimezone(current_zone()).date()

    def uuid(self, node: exp.Expr) -> Compiled:
        _no_arguments(node)
        return lambda row, ctx: uuid.uuid4()

    def random(self, node: exp.Rand) -> Compiled:
        """random(): a FLOAT in [0, 1), drawn anew for each row (volatile, as
        :mod:`feedkv.sql.volatility` says)."""
        _no_arguments(node)
        return lambda row, ctx: random.random()

    def unary_function(self, node: exp.Func) -> Compiled:
        inner = self.compile(node.this)
        function = _UNARY[type(node)]
        name = expression_name(node)

        def call(row: Env, ctx: Context) -> Any:
            value = inner(row, ctx)
            if value is None:
                return None
            try:
                return function(value)
            except (TypeError, AttributeError):
                raise SQLError(
                    "42883", f"unknown signature: {name}({type_of_value(value)})"
                ) from None

        return call

    def coalesce(self, node: exp.Coalesce) -> Compiled:
        nodes = [node.this, *node.expressions]
        options = [self.compile(e) for e in nodes]
        others = [n for n in nodes if not _is_number_constant(n) and not isinstance(n, exp.Null)]
        if others and all(static_kind(n, self.scope) is Kind.FLOAT for n in others):
            # NB: a numeric constant beside FLOATs is a FLOAT, beside FLOAT4s a FLOAT4
            typed = _as_float4 if self._float4_beside(nodes) else _as_float
            options = [
                typed(option) if _is_number_constant(e) else option
                for e, option in zip(nodes, options, strict=True)
            ]

        def coalesce(row: Env, ctx: Context) -> Any:
            for option in options:
                value = option(row, ctx)
                if value is not None:
                    return value
            return None

        return coalesce

    def case(self, node: exp.Case) -> Compiled:
        """``CASE [subject] WHEN ... THEN ... [ELSE ...] END``: the first branch whose
        condition is true (a simple CASE's: whose value equals the subject, NULL never
        does), else ELSE, else NULL. The results take one type: INT ones become DECIMAL
        or FLOAT beside such, a string constant the others' type; other mixes are
        42804, as in PostgreSQL."""
        _refuse_node_args(node, {"this", "ifs", "default"})
        subject = node.this
        conditions, results = [], []
        for branch in node.args["ifs"]:
            test = branch.this
            if subject is not None:
                test = exp.EQ(this=subject.copy(), expression=test.copy())
            conditions.append(self.compile(test))
            results.append(branch.args["true"])
        default = node.args.get("default")
        compiled = self._common([*results, *([default] if default is not None else [])], "CASE")
        branches = list(zip(conditions, compiled, strict=False))
        otherwise = compiled[len(results)] if default is not None else None

        def case(row: Env, ctx: Context) -> Any:
            for test, result in branches:
                verdict = test(row, ctx)
                if verdict is True:
                    return result(row, ctx)
                if verdict is not None and verdict is not False:
                    raise SQLError(
                        "42804",
                        f"argument of CASE/WHEN must be type bool, not {type_of_value(verdict)}",
                    )
            return otherwise(row, ctx) if otherwise is not None else None

        return case

    def if_(self, node: exp.If) -> Compiled:
        """``IF(c, a, b)``: CockroachDB's ``CASE WHEN c THEN a ELSE b END``."""
        _refuse_node_args(node, {"this", "true", "false"})
        branch = exp.If(this=node.this.copy(), true=node.args["true"].copy())
        default = node.args.get("false")
        return self.case(exp.Case(ifs=[branch], default=default.copy() if default else None))

    def _common(self, nodes: list[exp.Expr], what: str) -> list[Compiled]:
        """``nodes`` compiled to give one type (see :meth:`case`)."""
        kinds = {k for n in nodes if (k := static_kind(n, self.scope)) is not None}
        numbers = {Kind.INT, Kind.DECIMAL, Kind.FLOAT}
        if len(kinds) > 1 and not kinds <= numbers:
            shown = sorted(k.value for k in kinds)
            raise SQLError("42804", f"{what} types {' and '.join(shown)} cannot be matched")
        target = (
            Kind.FLOAT if Kind.FLOAT in kinds else Kind.DECIMAL if Kind.DECIMAL in kinds else None
        )
        if target is None and len(kinds) == 1:
            target = next(iter(kinds))
        out: list[Compiled] = []
        float4 = self._float4_beside(nodes)
        for node in nodes:
            if target is not None and isinstance(node, exp.Literal) and node.is_string:
                value = coerce(node.this, ColumnType(target), None)  # NB: fails now, as PG
                out.append(functools.partial(_constant, value))
            elif float4 and _is_number_constant(node):
                out.append(_as_float4(self.compile(node)))
            elif target in (Kind.DECIMAL, Kind.FLOAT):
                out.append(_widened(self.compile(node), target))
            else:
                out.append(self.compile(node))
        return out

    def _float4_beside(self, nodes: list[exp.Expr]) -> bool:
        """Whether the numeric constants among ``nodes`` (a CASE's results, COALESCE's
        or GREATEST's arguments) are FLOAT4s: when every other one is a FLOAT4, as
        CockroachDB types constants from the expressions beside them."""
        others = [n for n in nodes if not _is_number_constant(n) and not isinstance(n, exp.Null)]
        return bool(others) and all(self._is_float4(n) for n in others)

    def _is_float4(self, node: exp.Expr) -> bool:
        if isinstance(node, exp.Paren):
            return self._is_float4(node.this)
        if isinstance(node, exp.Cast):
            from feedkv.sql.parser import column_type

            found: ColumnType | None = column_type(node.args["to"])
        else:
            found = self.typed(node)
        return found is not None and found.kind is Kind.FLOAT and found.width == 32

    def nullif(self, node: exp.Nullif) -> Compiled:
        """``NULLIF(a, b)``: NULL when ``a = b``, else ``a``."""
        equal = self.compile(exp.EQ(this=node.this.copy(), expression=node.expression.copy()))
        value = self.compile(node.this)

        def nullif(row: Env, ctx: Context) -> Any:
            return None if equal(row, ctx) is True else value(row, ctx)

        return nullif

    def extremum(self, node: exp.Greatest | exp.Least) -> Compiled:
        """``GREATEST(...)`` / ``LEAST(...)``: NULLs are skipped (NULL if all are)."""
        name = "greatest" if isinstance(node, exp.Greatest) else "least"
        options = self._common([node.this, *node.expressions], name.upper())
        pick = max if name == "greatest" else min

        def extremum(row: Env, ctx: Context) -> Any:
            values = [v for option in options if (v := option(row, ctx)) is not None]
            if not values:
                return None
            try:
                return pick(values)
            except TypeError:
                shown = ", ".join(type_of_value(v) for v in values)
                raise SQLError("42804", f"{name}({shown}): types cannot be matched") from None

        return extremum

    def scalar_function(self, node: exp.Func) -> Compiled:
        """A function of :data:`~feedkv.sql.scalar_functions.FUNCTIONS`, as sqlglot
        names the node (``Trim`` and ``Pad`` say which trim and which pad)."""
        if isinstance(node, exp.Trim):
            _refuse_node_args(node, {"this", "expression", "position"})
            position = str(node.args.get("position") or "BOTH").upper()
            name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "btrim")
            return self.call(name, [node.this, node.args.get("expression")])
        if isinstance(node, exp.Pad):
            _refuse_node_args(node, {"this", "expression", "fill_pattern", "is_left"})
            name = "lpad" if node.args.get("is_left") else "rpad"
            return self.call(name, [node.this, node.expression, node.args.get("fill_pattern")])
        name, keys = _FUNCTION_NODES[type(node)]
        _refuse_node_args(node, {*keys, "expression"} if name == "initcap" else set(keys))
        arguments = [node.args.get(key) for key in keys]
        if isinstance(node, _JUSTIFY) and _is_string_constant(node.this):
            # NB: an untyped constant takes the type of the function's only signature
            arguments = [exp.cast(node.this.copy(), "INTERVAL")]
        return self.call(name, arguments)

    def format_(self, node: exp.Format) -> Compiled:
        """``format(template, args...)`` (:mod:`feedkv.sql.text_format`): NULL for a NULL
        template; NULL arguments are formatted (as nothing, NULL, or an error)."""
        _refuse_node_args(node, {"this", "expressions"})
        template = self.compile(node.this)
        args = [self.compile(a) for a in node.expressions]

        def format_(row: Env, ctx: Context) -> Any:
            text = template(row, ctx)
            if text is None:
                return None
            if not isinstance(text, str):
                raise SQLError("42883", f"unknown signature: format({type_of_value(text)}, ...)")
            return format_text(text, [a(row, ctx) for a in args], lambda v: _text(v, ctx))

        return format_

    def chr_(self, node: exp.Chr) -> Compiled:
        _refuse_node_args(node, {"expressions", "charset"})
        return self.call("chr", node.expressions)

    def call(self, name: str, arguments: Sequence[exp.Expr | None]) -> Compiled:
        """A strict call of the scalar function ``name`` (trailing ``None``: an optional
        argument not given)."""
        given = list(arguments)
        while given and given[-1] is None:
            given.pop()
        function, fewest, most = scalar_functions.FUNCTIONS[name]
        if not fewest <= len(given) <= most or any(a is None for a in given):
            raise SQLError("42883", f"unknown signature: {name}() with {len(given)} argument(s)")
        compiled = [self.compile(a) for a in given if a is not None]

        def call(row: Env, ctx: Context) -> Any:
            values = [argument(row, ctx) for argument in compiled]
            if None in values:
                return None
            try:
                return function(*values)
            except TypeError:
                shown = ", ".join(type_of_value(v) for v in values)
                raise SQLError("42883", f"unknown signature: {name}({shown})") from None

        return call

    def extract(self, node: exp.Extract) -> Compiled:
        """``EXTRACT(field FROM value)`` (and ``date_part('field', value)``)."""
        _refuse_node_args(node, {"this", "expression"})
        field = node.this.name if isinstance(node.this, exp.Var | exp.Literal) else None
        if not field:
            raise SQLError("42601", f"syntax error: EXTRACT needs a field: {_shown(node)}")
        value = self.compile(node.expression)
        return self._strict("extract", value, functools.partial(datetime_functions.extract, field))

    def at_time_zone(self, node: exp.AtTimeZone) -> Compiled:
        """``value AT TIME ZONE zone``: ``timezone(zone, value)``."""
        _refuse_node_args(node, {"this", "zone"})
        return self.call("timezone", [node.args["zone"], _zoned_constant(node.this)])

    def date_trunc(self, node: exp.TimestampTrunc) -> Compiled:
        """``date_trunc('unit', value)``."""
        _refuse_node_args(node, {"this", "unit"})
        unit = node.args["unit"]
        name = unit.name if isinstance(unit, exp.Var | exp.Literal) else None
        value = self.compile(node.this)
        if name:
            return self._strict(
                "date_trunc", value, functools.partial(datetime_functions.date_trunc, name)
            )
        # NB: a unit that is no constant (a placeholder: ORMs bind 'month') is read per row
        units = self.compile(unit)

        def date_trunc(row: Env, ctx: Context) -> Any:
            given, found = units(row, ctx), value(row, ctx)
            if given is None or found is None:
                return None
            try:
                if not isinstance(given, str):
                    raise TypeError(given)
                return datetime_functions.date_trunc(given, found)
            except TypeError:
                shown = f"{type_of_value(given)}, {type_of_value(found)}"
                raise SQLError("42883", f"unknown signature: date_trunc({shown})") from None

        return date_trunc

    @staticmethod
    def _strict(name: str, value: Compiled, function: Callable[[Any], Any]) -> Compiled:
        def call(row: Env, ctx: Context) -> Any:
            found = value(row, ctx)
            if found is None:
                return None
            try:
                return function(found)
            except TypeError:
                raise SQLError(
                    "42883", f"unknown signature: {name}({type_of_value(found)})"
                ) from None

        return call

    def concat(self, node: exp.Concat | exp.ConcatWs) -> Compiled:
        """``concat(...)`` and ``concat_ws(separator, ...)``: NULLs are skipped."""
        _refuse_node_args(node, {"expressions", "safe", "coalesce"})
        parts = [self.compile(e) for e in node.expressions]
        join = (
            scalar_functions.concat_ws
            if isinstance(node, exp.ConcatWs)
            else scalar_functions.concat
        )

        def concat(row: Env, ctx: Context) -> Any:
            return join([part(row, ctx) for part in parts], _text)

        return concat

    def session_value(self, node: exp.Expr) -> Compiled:
        """version(), current_database(), current_user, session_user, current_schema."""
        _no_arguments(node)
        if isinstance(node, exp.CurrentVersion):
            return lambda row, ctx: VERSION_STRING
        if isinstance(node, exp.CurrentSchema):
            return lambda row, ctx: "public"
        name = "database" if isinstance(node, exp.CurrentDatabase) else "session_user"
        return lambda row, ctx: _session_variable(ctx, name)

    def json_extract(self, node: exp.JSONExtract | exp.JSONExtractScalar) -> Compiled:
        """``j -> 'k'`` / ``j -> 0`` (a JSON value) and ``j ->> ...`` (its text); NULL
        when the key or index is not there (a negative index counts from the end)."""
        inner = self.compile(node.this)
        path = node.expression
        as_text = isinstance(node, exp.JSONExtractScalar)
        if not isinstance(path, exp.JSONPath):  # j -> <expression>, as j -> -1 or j -> k
            dynamic = self.compile(path)

            def extract_by(row: Env, ctx: Context) -> Any:
                step = dynamic(row, ctx)
                if step is not None and not isinstance(step, str | int):
                    raise SQLError("42883", f"unsupported JSON key or index: {step!r}")
                value = None if step is None else _json_step(inner(row, ctx), step)
                return jsonb.as_text(value) if as_text else value

            return extract_by
        steps: list[str | int] = []
        for part in path.expressions:
            if isinstance(part, exp.JSONPathKey):
                steps.append(str(part.this))
            elif isinstance(part, exp.JSONPathSubscript):
                steps.append(int(part.this))
            elif not isinstance(part, exp.JSONPathRoot):
                raise SQLError("0A000", f"unsupported JSON path: {_shown(node)}")

        def extract(row: Env, ctx: Context) -> Any:
            value = inner(row, ctx)
            for step in steps:
                value = _json_step(value, step)
            return jsonb.as_text(value) if as_text else value

        return extract

    def json_path_extract(self, node: exp.JSONBExtract | exp.JSONBExtractScalar) -> Compiled:
        """``j #> '{a,0}'`` (the JSON value at a path of keys and array indexes) and
        ``j #>> ...`` (its text); NULL when the path leads nowhere."""
        inner = self.compile(node.this)
        path_of = self.compile(node.expression)
        as_text = isinstance(node, exp.JSONBExtractScalar)

        def extract(row: Env, ctx: Context) -> Any:
            value, path = inner(row, ctx), path_of(row, ctx)
            if value is None or path is None:
                return None
            if not jsonb.is_json(value) and not isinstance(value, int | float | bool | str):
                raise _incomparable("#>", value, path)
            steps = _json_path(path)
            for step in steps:
                if value is None:
                    break
                if isinstance(jsonb.document(value), list):
                    try:
                        value = _json_step(value, int(step))
                    except ValueError:
                        value = None
                else:
                    value = _json_step(value, step)
            return jsonb.as_text(value) if as_text else value

        return extract

    def json_contains(self, node: exp.ArrayContainsAll | exp.ArrayContainedBy) -> Compiled:
        """``a @> b``: whether the JSON value ``a`` contains ``b``, or the array ``a``
        every element of the array ``b`` (as PostgreSQL's, a NULL element is in no
        array); ``a <@ b`` the other way round."""
        left, right = self.compile(node.this), self.compile(node.expression)
        flipped = isinstance(node, exp.ArrayContainedBy)
        symbol = "<@" if flipped else "@>"

        def contains(row: Env, ctx: Context) -> Any:
            a, b = left(row, ctx), right(row, ctx)
            if a is None or b is None:
                return None
            if isinstance(a, Array) or isinstance(b, Array):
                return _array_contains(b, a) if flipped else _array_contains(a, b)
            a, b = (_as_json(a, symbol, b), _as_json(b, symbol, a))
            return jsonb.contains(b, a) if flipped else jsonb.contains(a, b)

        return contains

    def array_overlaps(self, node: exp.ArrayOverlaps) -> Compiled:
        """``a && b``: whether the arrays have an element in common (as PostgreSQL's, a
        NULL element is in no array)."""
        left, right = self.compile(node.this), self.compile(node.expression)

        def overlaps(row: Env, ctx: Context) -> Any:
            a, b = left(row, ctx), right(row, ctx)
            if a is None or b is None:
                return None
            mine = _elements(a, b)
            return any(v in mine for v in _elements(b, a))

        return overlaps

    def json_has_key(self, node: exp.JSONBContainsTopKey) -> Compiled:
        """``j ? 'k'``: whether ``k`` is a key of the object ``j``, a string element of
        the array ``j``, or the string ``j`` itself (as PostgreSQL's)."""
        left, right = self.compile(node.this), self.compile(node.expression)
        # NB: a JSONB string is a Python str, as a string constant is: JSON text
        json = static_kind(node.this, self.scope) is Kind.JSONB

        def has_key(row: Env, ctx: Context) -> Any:
            a, key = left(row, ctx), right(row, ctx)
            if a is None or key is None:
                return None
            if not isinstance(key, str):
                raise SQLError(
                    "42883",
                    f"unsupported binary operator: <jsonb> ? <{type_of_value(key)}>",
                )
            document = jsonb.document(a if json else _as_json(a, "?", key))
            if isinstance(document, dict | list):
                return key in document  # NB: a list's elements: only a string equals key
            return document == key

        return has_key

    def dot(self, node: exp.Dot) -> Compiled:
        """``crdb_internal.node_id()`` (the session's gateway node) and
        ``crdb_internal.force_retry(interval)``, the schema-qualified functions."""
        schema, function = node.this, node.expression
        name = str(function.this).lower() if isinstance(function, exp.Anonymous) else ""
        if not (
            isinstance(schema, exp.Identifier)
            and schema.name.lower() == "crdb_internal"
            and name in ("node_id", "force_retry")
        ):
            raise SQLError("0A000", f"unsupported expression: {_shown(node)}")
        if name == "force_retry":
            return self._force_retry(function)
        if function.expressions:
            raise SQLError("42883", "unknown signature: crdb_internal.node_id() with arguments")

        def node_id(row: Env, ctx: Context) -> Any:
            if ctx.node_id is None:
                raise SQLError("0A000", "crdb_internal.node_id() is not available here")
            return ctx.node_id()

        return node_id

    def _force_retry(self, function: exp.Anonymous) -> Compiled:
        """``crdb_internal.force_retry(interval)``, as CockroachDB's: 0 once the SQL
        transaction is at least ``interval`` old, else the 40001 a conflict would raise
        (so an implicit transaction retries until it is, as it retries a conflict).
        CockroachDB's developers test retries with it."""
        if len(function.expressions) != 1:
            raise SQLError(
                "42883", "unknown signature: crdb_internal.force_retry() takes an interval"
            )
        argument = self.compile(function.expressions[0])
        interval_type = ColumnType(Kind.INTERVAL)

        def force_retry(row: Env, ctx: Context) -> Any:
            value = argument(row, ctx)
            if value is None:
                return None
            wanted = coerce(value, interval_type, None) if isinstance(value, str) else value
            if not isinstance(wanted, Interval):
                raise SQLError(
                    "42883",
                    f"unknown signature: crdb_internal.force_retry({type_of_value(value)})",
                )
            if ctx.transaction_age is None:
                raise SQLError("0A000", "crdb_internal.force_retry() is not available here")
            if ctx.transaction_age() < wanted.span() * 1000:
                raise SerializationFailure(
                    "restart transaction: crdb_internal.force_retry(): "
                    "TransactionRetryWithProtoRefreshError: forced by crdb_internal.force_retry()"
                )
            return 0

        return force_retry

    def lambda_(self, node: exp.Lambda) -> Compiled:
        """``f(j -> 'k')``: sqlglot reads ``->`` among a function's arguments as a lambda
        (which SQL has none of): it is JSON's ``->`` of the column named on its left."""
        params = node.expressions
        if len(params) != 1 or not isinstance(params[0], exp.Identifier):
            raise SQLError("0A000", f"unsupported expression: {_shown(node)}")
        column = exp.Column(this=params[0].copy())
        # NB: the lambda's body is all that follows the arrow: `f(j -> 'a' -> 'b' = x)`
        # reads as `j -> ('a' -> 'b' = x)`. The operators that bind no tighter than `->`
        # take `j -> 'a'` as their left operand, so the column is grafted onto the body's
        # leftmost operand below them: `((j -> 'a') -> 'b') = x`. In the body, sqlglot
        # names the column again as the lambda's bare parameter (`AND j ->> 'c' = y`).
        body = node.this.transform(
            lambda n: (
                exp.Column(this=n.copy())
                if isinstance(n, exp.Identifier)
                and n.this == params[0].this
                and not isinstance(n.parent, exp.Column)
                else n
            )
        )
        parent: exp.Expr | None = None
        operand = body
        while isinstance(operand, _NO_TIGHTER_THAN_ARROW):
            parent, operand = operand, operand.this
        grafted = exp.JSONExtract(this=column, expression=operand.copy())
        if parent is None:
            return self.json_extract(grafted)
        parent.set("this", grafted)
        return self.compile(body)

    def _json_build_object(self, node: exp.Anonymous) -> Compiled:
        args = [self.compile(a) for a in node.expressions]
        if len(args) % 2:
            raise SQLError(
                "22023",
                f"{node.name}(): argument list must have even number of elements "
                "(key, value pairs)",
            )

        def build(row: Env, ctx: Context) -> Any:
            built: dict[str, Any] = {}
            for key_of, value_of in zip(args[::2], args[1::2], strict=True):
                key = key_of(row, ctx)
                if key is None:
                    raise SQLError("22004", f"{node.name}(): a key is null")
                name = key if isinstance(key, str) else jsonb.as_text(key)
                built[str(name)] = as_json(value_of(row, ctx))
            return built

        return build

    def anonymous(self, node: exp.Anonymous) -> Compiled:
        name = str(node.this).lower()
        if name == "current_setting":
            return self._current_setting(node)
        if name in _SEQUENCE_FUNCTIONS:
            return self._sequence_function(name, node)
        if name == "cardinality" and len(node.expressions) == 1:
            target = self.compile(node.expressions[0])

            def cardinality(row: Env, ctx: Context) -> Any:
                value = target(row, ctx)
                if value is not None and not isinstance(value, Array):
                    raise SQLError(
                        "42883", f"cardinality() takes an array, not {type_of_value(value)}"
                    )
                return None if value is None else len(value.values)

            return cardinality
        if name in ("jsonb_build_object", "json_build_object"):
            return self._json_build_object(node)
        if name in ("jsonb_build_array", "json_build_array"):
            items = [self.compile(a) for a in node.expressions]
            return lambda row, ctx: jsonb_functions.build_array([i(row, ctx) for i in items])
        if node.meta.get("each") and len(node.expressions) == 1:  # see parser._each_srf
            keys = functools.partial(scalar_functions.each_keys, str(node.meta["each"]))
            (document,) = _json_constants(name, node.expressions)
            return self._strict(name, self.compile(document), keys)
        if name == "age" and len(node.expressions) == 1:  # NB: since now, as CockroachDB's
            return self.call(name, [exp.CurrentTimestamp(), node.expressions[0]])
        if name == "timezone" and len(node.expressions) == 2:
            zone, value = node.expressions
            return self.call(name, [zone, _zoned_constant(value)])
        if name in scalar_functions.FUNCTIONS:
            return self.call(name, _json_constants(name, node.expressions))
        if name in array_functions.FUNCTIONS:
            return self._array_function(name, node)
        if name == "pg_sleep":
            return self._pg_sleep(node)
        if name == "pg_typeof":
            return self._pg_typeof(node)
        if node.expressions and name in _NO_ARGUMENTS:
            raise SQLError("42883", f"unknown signature: {name}() takes no arguments")
        if node.expressions:
            raise SQLError("42883", f"unknown function: {name}()")
        if name == "cluster_logical_timestamp":

            def logical(row: Env, ctx: Context) -> Any:
                if ctx.logical_timestamp is None:
                    raise SQLError("0A000", "cluster_logical_timestamp() is not available here")
                return ctx.logical_timestamp()

            return logical
        if name == "unique_rowid":

            def rowid(row: Env, ctx: Context) -> Any:
                if ctx.unique_rowid is None:
                    raise SQLError("0A000", "unique_rowid() is not available here")
                return ctx.unique_rowid()

            return rowid
        if name in ("gen_random_uuid", "uuid_generate_v4"):
            # NB: a call by name holds its name in ``this``, which uuid() reads as an argument
            return self.uuid(exp.Uuid(expressions=node.expressions))
        if name in ("now", "statement_timestamp", "transaction_timestamp"):
            # NB: not current_timestamp(node): this node's ``this`` is its name, which
            # that would read as a precision
            return lambda row, ctx: ctx.now
        if name == "follower_read_timestamp":
            return lambda row, ctx: ctx.now - FOLLOWER_READ_LAG
        if name == "pg_backend_pid":

            def backend_pid(row: Env, ctx: Context) -> Any:
                if ctx.backend_pid is None:
                    raise SQLError("0A000", "pg_backend_pid() is not available here")
                return ctx.backend_pid

            return backend_pid
        if name == "clock_timestamp":  # the clock as the call reads it, not the txn's
            return lambda row, ctx: datetime.datetime.now(datetime.UTC)
        raise SQLError("42883", f"unknown function: {name}()")

    def _array_function(self, name: str, node: exp.Anonymous) -> Compiled:
        """A function of :data:`~feedkv.sql.array_functions.FUNCTIONS`: called with its
        NULL arguments too (they are not strict)."""
        function, fewest, most = array_functions.FUNCTIONS[name]
        if not fewest <= len(node.expressions) <= most:
            raise SQLError(
                "42883", f"unknown signature: {name}() with {len(node.expressions)} argument(s)"
            )
        arguments = [self.compile(a) for a in node.expressions]
        if name == "array_to_string":  # NB: its elements' text is the session's (floats)
            return lambda row, ctx: function(
                functools.partial(_text, ctx=ctx), *[a(row, ctx) for a in arguments]
            )
        return lambda row, ctx: function(*[a(row, ctx) for a in arguments])

    def _pg_typeof(self, node: exp.Anonymous) -> Compiled:
        """pg_typeof(x): the SQL standard name of the type of x's value (``bigint``,
        ``text``, ``timestamp with time zone``), as CockroachDB's, which names the type of
        the value it gets (an INT4 column's is ``bigint``, a NULL's ``unknown``)."""
        if len(node.expressions) != 1:
            raise SQLError("42883", "unknown signature: pg_typeof() takes exactly one argument")
        target = self.compile(node.expressions[0])
        json = static_kind(node.expressions[0], self.scope) is Kind.JSONB

        def pg_typeof(row: Env, ctx: Context) -> Any:
            value = target(row, ctx)
            if value is None:
                return "unknown"
            if isinstance(value, Array):
                return standard_name(ColumnType(Kind.ARRAY, element=value.element))
            if isinstance(value, EnumValue):
                return value.type_name
            if isinstance(value, Record):
                return "record"  # NB: as PostgreSQL and CockroachDB name a row value's
            kind = None if json else kind_of_value(value)
            return standard_name(ColumnType(kind or Kind.JSONB))  # NB: None: a JSON document

        return pg_typeof

    def _sequence_function(self, name: str, node: exp.Anonymous) -> Compiled:
        # NB: a sequence function takes a REGCLASS, which a name is cast to ('s'::regclass,
        # as CockroachDB shows a DEFAULT's call): the sequence functions resolve the name
        args = [
            self.compile(_uncast_regclass(arg) if n == 0 else arg)
            for n, arg in enumerate(node.expressions)
        ]

        def sequence_function(row: Env, ctx: Context) -> Any:
            if ctx.sequence is None:
                raise SQLError("0A000", f"{name}() is not available here")
            return ctx.sequence(name, [arg(row, ctx) for arg in args])

        return sequence_function

    def _pg_sleep(self, node: exp.Anonymous) -> Compiled:
        """``pg_sleep(seconds)``: waits, then true (as CockroachDB); a cancel ends it."""
        if len(node.expressions) != 1:
            raise SQLError("42883", "unknown signature: pg_sleep() takes the seconds to wait")
        seconds = self.compile(node.expressions[0])

        def pg_sleep(row: Env, ctx: Context) -> Any:
            value = seconds(row, ctx)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
                raise SQLError("42883", "unknown signature: pg_sleep() takes a number")
            if ctx.sleep is None:
                raise SQLError("0A000", "pg_sleep() is not available here")
            ctx.sleep(float(value))
            return True

        return pg_sleep

    def _current_setting(self, node: exp.Anonymous) -> Compiled:
        from feedkv.sql.session_vars import canonical_name

        if len(node.expressions) != 1:
            raise SQLError("42883", "unknown signature: current_setting() takes a name")
        setting = self.compile(node.expressions[0])

        def current_setting(row: Env, ctx: Context) -> Any:
            name = setting(row, ctx)
            if not isinstance(name, str):
                raise SQLError("42883", "unknown signature: current_setting() takes a string")
            return _session_variable(ctx, canonical_name(name))

        return current_setting

    def set_returning(self, node: exp.Explode | exp.ExplodingGenerateSeries) -> Compiled:
        name = "unnest" if isinstance(node, exp.Explode) else "generate_series"
        if node.meta.get("srf"):  # jsonb_each(j): rows of two columns (parser._EACH_SRFS)
            raise SQLError(
                "0A000",
                f"{node.meta['srf']}() is read in FROM only (SELECT * FROM "
                f"{node.meta['srf']}(...)): its rows have a key and a value",
            )
        raise SQLError(
            "0A000",
            f"{name}() is not supported here: a set-returning function is read in FROM, or in "
            "the list of a SELECT (beside aggregates or window functions, only without ORDER "
            "BY, DISTINCT, LIMIT, OFFSET and a GROUP BY naming the list's items by place or "
            "output name), outside CASE, COALESCE and aggregates",
        )

    def window(self, node: exp.Window) -> Compiled:
        raise SQLError("42P20", "window functions are allowed only in a SELECT's list and ORDER BY")

    def aggregate(self, node: exp.Expr) -> Compiled:
        # NB: the columns it names first, as CockroachDB: LIMIT sum(v) names no column v
        for column in node.find_all(exp.Column):
            if not isinstance(column.this, exp.Star):
                self.scope.find(column)
        raise SQLError(
            "42803",
            f"aggregate function {expression_name(node)}() is not allowed here "
            "(only in the SELECT list, without GROUP BY)",
        )


# the functions of no arguments compiled last (_Compiler.anonymous): called with some, a
# known name takes the wrong signature, any other is no function at all
_NO_ARGUMENTS = frozenset(
    (
        "cluster_logical_timestamp",
        "unique_rowid",
        "gen_random_uuid",
        "uuid_generate_v4",
        "now",
        "statement_timestamp",
        "transaction_timestamp",
        "clock_timestamp",
        "pg_backend_pid",
        "follower_read_timestamp",
    )
)
# How far behind the statement's time follower_read_timestamp() is: CockroachDB's 4.8 s,
# well past any range's closed timestamp (1 s behind by default here), so a read there
# waits for no replica
FOLLOWER_READ_LAG = datetime.timedelta(seconds=4.8)

_SEQUENCE_FUNCTIONS = ("nextval", "currval", "lastval", "setval")  # as sql.sequences.FUNCTIONS


# The JSONB arguments of the functions that take any: a string constant there is a
# JSONB one ('{"a": 1}'), as CockroachDB types it, not a JSON string
_JSONB_ARGUMENTS = {
    "jsonb_set": (0, 2), "jsonb_insert": (0, 2), "jsonb_strip_nulls": (0,),
    "json_strip_nulls": (0,), "jsonb_pretty": (0,), "jsonb_object_keys": (0,),
    "json_object_keys": (0,), "jsonb_typeof": (0,), "json_typeof": (0,),
    "jsonb_array_length": (0,), "json_array_length": (0,), "jsonb_array_elements": (0,),
    "json_array_elements": (0,), "jsonb_array_elements_text": (0,),
    "json_array_elements_text": (0,), "jsonb_each": (0,), "json_each": (0,),
    "jsonb_each_text": (0,), "json_each_text": (0,),
}  # fmt: skip
_JSONB_TYPE = exp.DataType.build("JSONB")


def _json_constants(name: str, arguments: Sequence[exp.Expr]) -> list[exp.Expr]:
    positions = _JSONB_ARGUMENTS.get(name, ())
    return [
        exp.Cast(this=a, to=_JSONB_TYPE.copy()) if n in positions and _is_text_constant(a) else a
        for n, a in enumerate(arguments)
    ]


def _uncast_regclass(node: exp.Expr) -> exp.Expr:
    """``node`` without a cast of it to REGCLASS."""
    if isinstance(node, exp.Cast) and node.to.sql().upper() in ("REGCLASS", "PG_CATALOG.REGCLASS"):
        inner: exp.Expr = node.this
        return inner
    return node


def _enum_cast(inner: Compiled, name: str) -> Compiled:
    """A cast to the user-defined type ``name``: resolved when it runs (the compiler
    does not read the catalog); a label of it, or a value of it, else 22P02 or 42804."""

    def cast(row: Env, ctx: Context) -> Any:
        value = inner(row, ctx)
        if value is None:
            return None
        if ctx.enum_type is None:
            raise SQLError("42704", f'type "{name}" does not exist')
        target = ctx.enum_type(name)
        if not isinstance(value, str | EnumValue):
            raise SQLError("42846", f"invalid cast: {type_of_value(value)} -> {name}")
        return coerce(value, target, None)

    return cast


def _element_type(value: Any) -> ColumnType:
    """The element type of an ARRAY[...] whose first non-NULL element is ``value``."""
    if isinstance(value, EnumValue):
        return enum_type_of(value)
    if isinstance(value, Array):
        raise SQLError("0A000", "arrays of arrays are not supported")
    if jsonb.is_json(value):
        raise SQLError("0A000", "arrays of JSONB are not supported")
    kind = kind_of_value(value)
    return ColumnType(kind or Kind.STRING)


def _query_element(types: Sequence[ColumnType | None], first: Any) -> ColumnType:
    """The element type of ARRAY(query) whose plan types its columns as ``types`` and
    whose first non-NULL value is ``first``: the planned type's plain kind, as
    :func:`_element_type` gives one; ``first``'s where the plan does not tell or the
    type is an enum (which a plan names before it knows which), an array or JSONB
    (which :func:`_element_type` refuses), as Describe leaves those untyped."""
    known = types[0] if len(types) == 1 else None
    if known is None or known.kind in (Kind.ENUM, Kind.ARRAY, Kind.JSONB):
        return _element_type(first)
    return ColumnType(known.kind)


def _refuse_node_args(node: exp.Expr, handled: set[str]) -> None:
    for name, value in node.args.items():
        if name not in handled and value not in (None, False, []):
            raise SQLError("0A000", f"unsupported expression: {_shown(node)}")


# How users spell the functions sqlglot names otherwise (now() is CURRENT_TIMESTAMP).
_SPELLED: dict[type[exp.Expr], str] = {
    exp.CurrentTimestamp: "now() (or current_timestamp)",
    exp.CurrentDate: "current_date",
    exp.Uuid: "gen_random_uuid()",
    exp.Rand: "random()",
}


def subquery_key(node: exp.Expr) -> str:
    """What names a subquery's rows in :attr:`Context.subqueries`: its text, which a
    copy of the tree keeps (plans copy expressions they rewrite), and which gives the
    same rows wherever it stands in one statement."""
    return node.sql(dialect="postgres")


_VERSION = "0.1.0"
# As CockroachDB words it ("CockroachDB CCL v23.1.11 (...)"), which drivers and ORM
# dialects parse (sqlalchemy-cockroachdb reads the " v23.1." part), naming what it really
# is, and with the PostgreSQL version that PostgreSQL dialects look for.
VERSION_STRING = (
    f"CockroachDB OSS v{CLUSTER_VERSION}.0 (feedkv {_VERSION}, a CockroachDB-compatible "
    "SQL subset; PostgreSQL 13.0 wire protocol)"
)


def _session_variable(ctx: Context, name: str) -> str:
    if ctx.variable is None:
        raise SQLError("0A000", f"{name} is not available here")
    return ctx.variable(name)


class SubqueryRunner(Protocol):
    """A subquery's rows for the row of the query around it (see
    :mod:`feedkv.sql.subquery`), and the types its plan gives its columns (``None``
    where the plan does not tell), known once it has run for the first row."""

    types: tuple[ColumnType | None, ...]

    def __call__(self, outer: Env) -> list[tuple[Any, ...]]: ...


def _subquery_rows(node: exp.Expr) -> Callable[[Env, Context], list[tuple[Any, ...]]]:
    """The rows of the subquery at ``node`` for a row of the query around it, from the
    statement's runner (:attr:`Context.subqueries`); 0A000 where the statement runs
    none (see the message)."""
    key = subquery_key(node)

    def rows(row: Env, ctx: Context) -> list[tuple[Any, ...]]:
        found = ctx.subqueries.get(key)
        if found is None:
            raise SQLError(
                "0A000",
                "subqueries are not supported here (a DEFAULT or a changefeed query)",
            )
        return found(row)

    return rows


def _json_step(value: Any, step: str | int) -> Any:
    """One ``->`` step into a JSON value: a key of an object, an index of an array;
    SQL NULL when it is not there, ``JSON_NULL`` when it is a JSON null."""
    if isinstance(step, str):
        if isinstance(value, dict) and step in value:
            return jsonb.from_document(value[step])
        return None
    if isinstance(value, list) and -len(value) <= step < len(value):
        return jsonb.from_document(value[step])
    return None


def _json_path(path: Any) -> list[str]:
    """A ``#>`` path: a STRING[] or its text (``'{a,0}'``)."""
    if isinstance(path, Array):
        items: list[Any] = list(path.values)
    elif isinstance(path, str):
        items = list(parse_array_text(path))
    else:
        raise SQLError("42883", f"unsupported JSON path: {type_of_value(path)}")
    if any(item is None for item in items):
        return []  # NB: a NULL step leads nowhere, as CockroachDB
    return [str(item) for item in items]


def _array_contains(outer: Any, inner: Any) -> bool:
    """Whether every element of the array ``inner`` is in the array ``outer``; a
    string literal or a parameter's list on one side is an array of the other's type."""
    if isinstance(outer, str | list) and isinstance(inner, Array):
        outer = coerce(outer, ColumnType(Kind.ARRAY, element=inner.element), None)
    if isinstance(inner, str | list) and isinstance(outer, Array):
        inner = coerce(inner, ColumnType(Kind.ARRAY, element=outer.element), None)
    if not isinstance(outer, Array) or not isinstance(inner, Array):
        shown = type_of_value(outer if not isinstance(outer, Array) else inner)
        raise SQLError("42883", f"unsupported comparison operator: array and {shown}")
    present = [v for v in outer.values if v is not None]
    return all(v is not None and v in present for v in inner.values)


def _elements(value: Any, other: Any) -> tuple[Any, ...]:
    """The non-NULL elements of the array ``value`` (a string literal or a parameter's
    list read as an array of the type of ``other``'s)."""
    if isinstance(value, str | list) and isinstance(other, Array):
        value = coerce(value, ColumnType(Kind.ARRAY, element=other.element), None)
    if not isinstance(value, Array):
        raise SQLError("42883", f"unsupported comparison operator: array && {type_of_value(value)}")
    return tuple(v for v in value.values if v is not None)


def _as_json(value: Any, symbol: str, other: Any) -> Any:
    """An operand of ``@>``: a JSONB value, or the text of one (a string constant)."""
    if jsonb.is_json(value) or isinstance(value, int | float | bool):
        return value
    if isinstance(value, str):
        return coerce(value, ColumnType(Kind.JSONB), None)
    raise _incomparable(symbol, value, other)


def _time_precision(node: exp.Expr) -> int | None:
    """The precision of ``current_timestamp(p)`` and its kin: ``None`` when none is
    given; 22023 unless a constant from 0 to 6."""
    given = node.args.get("this")
    if given is None:
        if node.args.get("expressions"):
            _no_arguments(node)
        return None
    if not isinstance(given, exp.Literal) or given.is_string or not given.this.isdigit():
        raise SQLError("42601", f"{_shown(node)}: the precision must be an integer constant")
    digits = int(given.this)
    if digits > 6:
        raise SQLError("22023", f"precision {digits} out of range")
    return digits


def _time_as_interval(value: datetime.time) -> Interval:
    """``TIME::INTERVAL``: the span from midnight."""
    if value.tzinfo is not None:
        raise SQLError("42846", "invalid cast: timetz -> interval")
    seconds = (value.hour * 60 + value.minute) * 60 + value.second
    return Interval(0, 0, seconds * 1_000_000 + value.microsecond)


def _interval_as_time(value: Interval) -> datetime.time:
    """``INTERVAL::TIME``: its time part as a time of day, wrapped around midnight (its
    months and days dropped): ``'25h'`` is 01:00, ``'-1h'`` 23:00, as PostgreSQL's."""
    micros = value.micros % _MICROS_PER_DAY
    seconds, microsecond = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return datetime.time(hour, minute, second, microsecond)


_MICROS_PER_DAY = 86_400_000_000


def _rounded_time(moment: datetime.datetime, digits: int) -> datetime.datetime:
    """``moment`` with its microseconds rounded (half up) to ``digits`` digits."""
    unit = 10 ** (6 - digits)
    extra = moment.microsecond % unit
    moment -= datetime.timedelta(microseconds=extra)
    return moment + datetime.timedelta(microseconds=unit) if extra * 2 >= unit else moment


def _no_arguments(node: exp.Expr) -> None:
    if node.args.get("this") is not None or node.args.get("expressions"):
        name = _SPELLED.get(type(node), f"{expression_name(node)}()")
        raise SQLError("42883", f"unknown signature: {name} takes no arguments")


def qualifier_of(node: exp.Column) -> str:
    return _part(node.args.get("table"))


def _part(node: exp.Expr | None) -> str:
    """A name part as written (quoted) or folded to lower case."""
    if node is None:
        return ""
    return str(node.this) if getattr(node, "quoted", False) else str(node.this).lower()


def _column_name(node: exp.Column) -> str:
    return node.name if node.this.quoted else node.name.lower()


def _shown(node: exp.Expr) -> str:
    text = node.sql(dialect="postgres")
    return text if len(text) <= 60 else text[:57] + "..."


def _converted(inner: Compiled, ctype: ColumnType) -> Compiled:
    if ctype.kind is Kind.JSONB:
        return inner

    def convert(row: Env, ctx: Context) -> Any:
        value = inner(row, ctx)
        if value is None:
            return None
        if ctype.kind is Kind.STRING and not isinstance(value, str):
            return value  # compared as is: an error names both types
        if ctype.kind is Kind.FLOAT and _is_number(value):
            # NB: a constant compared with a FLOAT is one, with a FLOAT4 a FLOAT4
            return _as_float_like(value, Float4() if ctype.width == 32 else 0.0)
        if ctype.kind in (Kind.INT, Kind.FLOAT, Kind.DECIMAL) and _is_number(value):
            return value  # numbers compare across kinds exactly
        if ctype.fixed and isinstance(value, str):
            return value.rstrip(" ")  # NB: a CHAR(n) constant's trailing spaces do not count
        if ctype.kind in (Kind.BIT, Kind.VARBIT):
            return coerce(value, ColumnType(Kind.VARBIT), None)  # NB: any length compares
        if ctype.kind is Kind.DATE and isinstance(value, datetime.datetime):
            return value  # NB: the DATE is compared as its midnight, the time kept
        if ctype.kind in (Kind.ENUM, Kind.ARRAY):
            return coerce(value, ctype, None)  # NB: a label of the column's enum, ...
        return coerce(value, ColumnType(ctype.kind), None)

    return convert


def _constant(value: Any, row: Env, ctx: Context) -> Any:
    return value


def _widened(inner: Compiled, kind: Kind) -> Compiled:
    """``inner`` with its INT (and, to FLOAT, DECIMAL) values as values of ``kind``."""

    def widened(row: Env, ctx: Context) -> Any:
        value = inner(row, ctx)
        if isinstance(value, bool) or not isinstance(value, int | decimal.Decimal):
            return value
        if kind is Kind.FLOAT:
            return float(value)
        return decimal.Decimal(value) if isinstance(value, int) else value

    return widened


def _json_comparer(
    op: type[exp.Binary], left_text: bool, right_text: bool
) -> Callable[[Any, Any], bool]:
    """A comparison of JSONB values, in JSONB's order (:func:`jsonb.sort_key`); a string
    constant on either side is JSON text. NB: a JSON scalar is a plain Python value, so
    the operands' types come from the tree, not the values."""
    compare = _OPERATOR_OF[op]

    def as_json(value: Any, text: bool) -> Any:
        return coerce(value, ColumnType(Kind.JSONB), None) if text else value

    def decide(a: Any, b: Any) -> bool:
        return compare(
            jsonb.sort_key(as_json(a, left_text)), jsonb.sort_key(as_json(b, right_text))
        )

    return decide


def _as_float(inner: Compiled) -> Compiled:
    """``inner``'s numbers as FLOATs (NULL stays NULL)."""
    return _widened(inner, Kind.FLOAT)


def _as_float4(inner: Compiled) -> Compiled:
    """``inner``'s numbers as FLOAT4s (NULL stays NULL)."""

    def float4(row: Env, ctx: Context) -> Any:
        value = inner(row, ctx)
        return Float4.of(float(value)) if _is_number(value) else value

    return float4


def _as_float_like(constant: Any, other: float) -> Any:
    """A numeric constant beside the FLOAT value ``other``, typed as CockroachDB types it
    from the other side: a FLOAT, or a FLOAT4 beside a FLOAT4 (too large for a float it
    stays as it is, and compares exactly)."""
    if isinstance(constant, float) and type(constant) is type(other):
        return constant
    try:
        return Float4.of(float(constant)) if isinstance(other, Float4) else float(constant)
    except OverflowError:
        return constant


def _is_number_constant(node: exp.Expr) -> bool:
    if isinstance(node, exp.Neg | exp.Paren):
        return _is_number_constant(node.this)
    return isinstance(node, exp.Literal) and not node.is_string


def _json_concat(node: exp.DPipe, scope: Scope) -> bool:
    """Whether ``a || b`` joins JSONB values: one side is JSONB and the other is too, or
    a string constant, a parameter or NULL (which PostgreSQL reads as JSONB there; any
    other string beside a JSONB, a column's or a function's, is text concatenation)."""
    sides = (node.this, node.expression)
    kinds = [static_kind(side, scope) for side in sides]
    if Kind.JSONB not in kinds:
        return False
    return all(
        kind is Kind.JSONB or _is_text_constant(side) or isinstance(side, exp.Null)
        for side, kind in zip(sides, kinds, strict=True)
    )


def _is_text_constant(node: exp.Expr) -> bool:
    return (isinstance(node, exp.Literal) and node.is_string) or isinstance(node, exp.Parameter)


def _as_kind_of(text: str, other: object, symbol: str) -> Any:
    if isinstance(other, EnumValue):  # NB: the label of other's enum type
        return EnumValue.of(text, other.labels, other.type_name, other.codes, other.type_id)
    if jsonb.is_json(other):
        return coerce(text, ColumnType(Kind.JSONB), None)
    kind = kind_of_value(other)
    if kind is None or kind is Kind.STRING:
        raise _incomparable(symbol, other, text)
    return coerce(text, ColumnType(kind), None)


# NB: a tuple, not ``int | float | decimal.Decimal``: an isinstance of a union written
# in place builds the union at each call, three times the cost of the check itself
_NUMBER_TYPES = (int, float, decimal.Decimal)


def _is_number(value: object) -> bool:
    return isinstance(value, _NUMBER_TYPES) and value.__class__ is not bool


# INT op INT whose result needs no more than the operator (the common case of a row's
# ``n + 1``); a result outside INT8 takes the checked path, which says so
_INT_ARITHMETIC: dict[type, Callable[[int, int], int]] = {
    exp.Add: operator.add,
    exp.Sub: operator.sub,
    exp.Mul: operator.mul,
}


def _truth(value: object) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise SQLError(
        "42804", f"argument of a condition must be type bool, not {type_of_value(value)}"
    )


def _array_concat(a: Any, b: Any) -> Array:
    """``a || b`` with an array on either side: the arrays joined, or an element
    appended or prepended (converted to the array's element type, as CockroachDB)."""
    if isinstance(a, Array) and isinstance(b, Array):
        if a.element != b.element:
            raise SQLError(
                "42883",
                f"unsupported binary operator: <{type_of_value(a)}> || <{type_of_value(b)}>",
            )
        return Array(a.values + b.values, a.element)
    if isinstance(a, Array):
        return Array((*a.values, coerce(b, a.element, None)), a.element)
    return Array((coerce(a, b.element, None), *b.values), b.element)


def _text(value: object, ctx: Context | None = None) -> str:
    if isinstance(value, float) and ctx is not None:
        return float_text(value, _float_digits(ctx))
    return value if isinstance(value, str) else format_value(value)


def _float_digits(ctx: Context) -> int:
    """The session's ``extra_float_digits`` (0, CockroachDB's default, where the
    expression runs outside a session, as in a changefeed's query)."""
    if ctx.variable is None:
        return 0
    return int(ctx.variable("extra_float_digits"))


def _incomparable(symbol: str, a: object, b: object) -> SQLError:
    return SQLError(
        "42883",
        f"unsupported comparison operator: <{type_of_value(a)}> {symbol} <{type_of_value(b)}>",
    )


def _comparable(a: object, b: object) -> None:
    if _is_number(a) and _is_number(b):
        return
    if isinstance(a, str) and isinstance(b, str):  # NB: a CHAR(n) is a str subclass
        return
    if type(a) is not type(b):
        if not (isinstance(a, datetime.date) and isinstance(b, datetime.date)):
            raise TypeError
        if isinstance(a, datetime.datetime) is not isinstance(b, datetime.datetime):
            raise TypeError  # NB: a DATE beside a TIMESTAMP, which Python finds unequal
    elif type(a) is Record:
        raise TypeError  # NB: records compare pair by pair, with SQL's NULL (_comparer)


def _checked(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def compare(a: Any, b: Any) -> bool:
        if jsonb.is_json(a) or jsonb.is_json(b):
            if not (jsonb.is_json(a) and jsonb.is_json(b)):
                # NB: a string constant is read as JSON by the caller; a JSON scalar
                # is a plain Python value, told from a SQL one only by its type
                raise TypeError
            return op(jsonb.sort_key(a), jsonb.sort_key(b))
        _comparable(a, b)
        if _is_nan(a) or _is_nan(b):
            # As in CockroachDB: NaN equals NaN and sorts below every other number.
            return op(_nan_rank(a), _nan_rank(b))
        # NB: a DECIMAL compared with a FLOAT sees the float as the decimal of its
        # shortest text, as CockroachDB does (0.1::DECIMAL = 0.1::FLOAT); Python would
        # compare with the float's exact binary value
        if isinstance(a, decimal.Decimal) and isinstance(b, float):
            b = decimal.Decimal(repr(b))
        elif isinstance(b, decimal.Decimal) and isinstance(a, float):
            a = decimal.Decimal(repr(a))
        return op(a, b)

    return compare


_is_nan = is_nan


def _is_nan_word(identifier: exp.Expr) -> bool:
    return (
        isinstance(identifier, exp.Identifier)
        and not identifier.quoted
        and identifier.name.upper() == "NAN"
    )


def _nan_rank(value: Any) -> tuple[int, Any]:
    return (0, 0) if _is_nan(value) else (1, value)


@dataclass(frozen=True, slots=True)
class _ValueSet:
    """A subquery's one column as a hash set, for IN: built when its non-NULL values are
    all of one family whose Python equality and hash are SQL's (see :func:`_family`);
    a value of that family is looked up, any other compared one by one (which converts
    or refuses as ``=`` does). Without it IN costs the subquery's rows per row."""

    family: str
    values: frozenset[Any]
    null: bool  # a NULL among them: a value not found is NULL, not false

    @classmethod
    def of(cls, rows: Sequence[tuple[Any, ...]]) -> _ValueSet | None:
        families = {_family(value) for (value,) in rows if value is not None}
        if len(families) != 1 or None in families:
            return None
        (family,) = families
        values = frozenset(value for (value,) in rows if value is not None)
        return cls(str(family), values, any(value is None for (value,) in rows))


def _family(value: object) -> str | None:
    """The family of values whose equality and hash agree with SQL's ``=``: exact
    numbers (INT, finite DECIMAL: 1.0 = 1.00 = 1 in both), FLOATs but NaN (-0.0 = 0.0
    in both), strings, bytes, bools, UUIDs; else None. NB: a FLOAT is not an exact
    number's kin: SQL compares 0.1::FLOAT with a DECIMAL by its shortest text, Python
    by its binary value."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "exact"
    if isinstance(value, float):
        return "float" if value == value and abs(value) != float("inf") else None
    if isinstance(value, decimal.Decimal):
        return "exact" if value.is_finite() else None
    if isinstance(value, str | bytes | uuid.UUID):
        return type(value).__name__
    return None


def _set_member(
    value: Any, cached: tuple[Sequence[tuple[Any, ...]], _ValueSet | None]
) -> bool | None:
    """``value IN`` the rows ``cached`` holds with their set (see :class:`_ValueSet`),
    for a non-NULL value: looked up when it is of the set's family, else compared one
    by one."""
    found, values = cached
    if values is not None and _family(value) == values.family:
        return True if value in values.values else (None if values.null else False)
    return _member(value, (c for (c,) in found))


def _value_set_key(node: exp.Expr, target: ColumnType | None) -> str:
    """What names the set of an IN list (its values read as ``target``) or an ANY's
    array in :attr:`Context.value_sets`: its text, the same for each compile of one
    statement's subquery (made anew for each outer row), so they share one set."""
    return f"{target!r}:{node.sql(dialect='postgres')}"


def is_fixed_value(node: exp.Expr) -> bool:
    """Whether ``node`` has one value for a whole run of its statement: constants and
    placeholders, cast or in an ARRAY, with no column, subquery or function (which may
    be volatile: random())."""
    return is_constant(node) and all(
        not isinstance(n, exp.Func | exp.Query | exp.Exists | exp.Any | exp.All)
        or isinstance(n, exp.Cast | exp.Array)
        for n in node.walk()
    )


def _member(value: Any, candidates: Iterable[Any]) -> bool | None:
    """``value IN candidates`` for a non-NULL value: true if one equals it, else NULL if
    one is NULL, else false (three-valued, as SQL has it)."""
    saw_null = False
    for candidate in candidates:
        if candidate is None:
            saw_null = True
        elif _in_equal(value, candidate):
            return True
    return None if saw_null else False


def _row_compare(op: type[exp.Binary], pairs: Sequence[tuple[Any, Any]]) -> bool | None:
    """Two rows compared by ``op`` (see :meth:`_Compiler._row_comparison`)."""
    symbol = _SYMBOLS[op]
    if op in (exp.EQ, exp.NEQ):
        unknown = False
        for a, b in pairs:
            if a is None or b is None:
                unknown = True
                continue
            same = (
                _row_compare(exp.EQ, _record_pairs(a, b, op))
                if isinstance(a, Record)
                else _in_equal(a, b)
            )
            if same is None:
                unknown = True
            elif not same:
                return op is exp.NEQ
        return None if unknown else op is exp.EQ
    for a, b in pairs:
        if a is None or b is None:
            return None
        if isinstance(a, Record):  # a row within the row: its own pairs decide
            inner = _record_pairs(a, b, op)
            if _row_compare(exp.EQ, inner):
                continue
            return _row_compare(op, inner)
        if _day_beside_moment(a, b):
            a, b = _moment_of(a, b), _moment_of(b, a)
        try:
            if _EQUAL(a, b):
                continue
            return _COMPARE[op](a, b)
        except TypeError:
            raise _incomparable(symbol, a, b) from None
    return op in (exp.LTE, exp.GTE)


def _record_pairs(a: Any, b: Any, op: type[exp.Binary]) -> list[tuple[Any, Any]]:
    """The elements of records ``a`` and ``b`` side by side: 42883 for a value that is
    not a record, 42601 for records of different lengths."""
    if not isinstance(a, Record) or not isinstance(b, Record):
        raise _incomparable(_SYMBOLS[op], a, b)
    if len(a) != len(b):
        raise SQLError("42601", "unequal number of entries in row expressions")
    return list(zip(a, b, strict=True))


def _not_distinct(a: Any, b: Any) -> bool:
    """``a IS NOT DISTINCT FROM b`` of two elements of rows: NULL equals NULL only."""
    if a is None or b is None:
        return a is None and b is None
    return bool(_row_compare(exp.EQ, [(a, b)]))


def _row_member(candidates: Iterable[Sequence[tuple[Any, Any]]]) -> bool | None:
    """A row IN rows: true if one equals it, else NULL if one is undecided, else false."""
    unknown = False
    for pairs in candidates:
        verdict = _row_compare(exp.EQ, pairs)
        if verdict:
            return True
        unknown = unknown or verdict is None
    return None if unknown else False


def _in_equal(value: Any, candidate: Any) -> bool:
    """``value = candidate`` as IN compares: as ``=`` does (NaN equals NaN; values that
    do not compare are 42883, not merely unequal)."""
    try:
        return _EQUAL(value, candidate)
    except TypeError:
        if _day_beside_moment(value, candidate):
            return _EQUAL(_moment_of(value, candidate), _moment_of(candidate, value))
        raise _incomparable("=", value, candidate) from None


_EQUAL = _checked(lambda a, b: a == b)
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    exp.EQ: _EQUAL,
    exp.NEQ: _checked(lambda a, b: a != b),
    exp.LT: _checked(lambda a, b: a < b),
    exp.LTE: _checked(lambda a, b: a <= b),
    exp.GT: _checked(lambda a, b: a > b),
    exp.GTE: _checked(lambda a, b: a >= b),
}
_OPERATOR_OF: dict[type, Callable[[Any, Any], bool]] = {
    exp.EQ: operator.eq,
    exp.NEQ: operator.ne,
    exp.LT: operator.lt,
    exp.LTE: operator.le,
    exp.GT: operator.gt,
    exp.GTE: operator.ge,
}
_SYMBOLS = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


_OPERATORS: dict[type, str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.IntDiv: "//",
    exp.Mod: "%",
}


_BITWISE: dict[type, tuple[str, Callable[[int, int], int]]] = {
    exp.BitwiseAnd: ("&", operator.and_),
    exp.BitwiseOr: ("|", operator.or_),
    exp.BitwiseXor: ("#", operator.xor),
    exp.BitwiseLeftShift: ("<<", operator.lshift),
    exp.BitwiseRightShift: (">>", operator.rshift),
}
_BIT_SHIFTS = (exp.BitwiseLeftShift, exp.BitwiseRightShift)


def _bitwise(op: type, a: Any, b: Any) -> Any:
    """CockroachDB's bitwise operators: of two INTs (a shift by 0 to 63 places, wrapping
    as an INT8 does), of two bit strings of one length, or a bit string shifted by an
    INT (:class:`BitString`)."""
    symbol, apply = _BITWISE[op]
    shift = op in _BIT_SHIFTS
    if is_int(a) and is_int(b):
        if shift and not 0 <= b < 64:
            raise SQLError("22023", "shift argument out of range")
        return (apply(a, b) - INT64_MIN) % 2**64 + INT64_MIN
    if isinstance(a, BitString) and shift and is_int(b):
        return a.shifted(b if op is exp.BitwiseLeftShift else -b)
    if isinstance(a, BitString) and isinstance(b, BitString) and not shift:
        return a.combined(symbol, b)
    raise SQLError(
        "42883",
        f"unsupported binary operator: <{type_of_value(a)}> {symbol} <{type_of_value(b)}>",
    )


def _arithmetic(op: type, a: Any, b: Any) -> Any:
    if isinstance(a, Interval) or isinstance(b, Interval):
        return _interval_arithmetic(op, a, b)
    if not _is_number(a) or not _is_number(b):
        if isinstance(a, datetime.date | datetime.time) or isinstance(b, datetime.date):
            return _datetime_arithmetic(op, a, b)
        symbol = _OPERATORS.get(op, "?")
        raise SQLError(
            "42883",
            f"unsupported binary operator: <{type_of_value(a)}> {symbol} <{type_of_value(b)}>",
        )
    decimals = isinstance(a, decimal.Decimal), isinstance(b, decimal.Decimal)
    if (
        isinstance(a, decimal.Decimal | float)
        and isinstance(b, decimal.Decimal | float)
        and (decimals[0] is not decimals[1])
    ):
        # NB: CockroachDB has no arithmetic of a DECIMAL with a FLOAT (a constant or a
        # placeholder beside a FLOAT is a FLOAT; see arithmetic); cast one of them
        symbol = _OPERATORS.get(op, "?")
        raise SQLError(
            "42883",
            f"unsupported binary operator: <{type_of_value(a)}> {symbol} <{type_of_value(b)}>",
        )
    result = _arithmetic_unchecked(op, a, b)
    if isinstance(result, int) and not INT64_MIN <= result <= INT64_MAX:
        raise SQLError("22003", "integer out of range for type INT8")
    return result


_DATETIME_KINDS = frozenset({Kind.DATE, Kind.TIMESTAMP, Kind.TIMESTAMPTZ, Kind.TIME})


def _is_string_constant(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) and node.is_string


def _typed_constant(
    op: type, literal: exp.Expr, other: Kind, literal_left: bool
) -> Compiled | None:
    """String constant ``literal`` as the operand of ``op`` it is beside one of kind
    ``other`` (:func:`untyped_operand_kind`), converted now (its errors too); ``None``
    where ``op`` takes no such operand."""
    target = untyped_operand_kind(op, other, literal_left)
    if target is None:
        return None
    text, ctype = literal.this, ColumnType(target)
    value = coerce(text, ctype, None)
    if target is Kind.TIMESTAMPTZ:  # NB: a text without an offset is in the session's zone
        return lambda row, ctx: coerce(text, ctype, None)
    return lambda row, ctx: value


def _typed_beside(op: type, text: str, other: Any, literal_left: bool) -> Any:
    """A string constant's value as the operand of ``op`` beside the value ``other``
    (:func:`untyped_operand_kind`); as it is where ``op`` takes no such operand."""
    kind = kind_of_value(other)
    target = untyped_operand_kind(op, kind, literal_left) if kind is not None else None
    return text if target is None else coerce(text, ColumnType(target), None)


def untyped_operand_kind(op: type, other: Kind, literal_left: bool) -> Kind | None:
    """The type an untyped string constant takes as an operand of arithmetic ``op``
    beside an operand of kind ``other`` (``literal_left``: the constant is the left
    one), as PostgreSQL and CockroachDB resolve it: ``other`` itself where ``op`` takes
    two of it (numbers, ``DATE - DATE``, ``TIMESTAMP - TIMESTAMP``, ``INTERVAL +
    INTERVAL``), else the one other type ``op`` takes beside ``other`` (``TIMESTAMP +
    INTERVAL``, ``INTERVAL * FLOAT``). ``None`` where ``op`` takes none (the operator's
    own error follows); 42725 where it takes several (``DATE + '1'``: an INT, an
    INTERVAL or a TIME), as both refuse it."""
    if other in (Kind.INT, Kind.DECIMAL, Kind.FLOAT):
        return other
    if other is Kind.INTERVAL:
        if op in (exp.Add, exp.Sub):
            return Kind.INTERVAL
        return Kind.FLOAT if op is exp.Mul or (op is exp.Div and not literal_left) else None
    if other in _DATETIME_KINDS:
        if op is exp.Sub:
            return other
        if op is exp.Add and other is Kind.DATE:
            left, right = ("string", "date") if literal_left else ("date", "string")
            raise SQLError("42725", f"ambiguous binary operator: <{left}> + <{right}>")
        if op is exp.Add:
            return Kind.INTERVAL
    return None


def _datetime_arithmetic(op: type, a: Any, b: Any) -> Any:
    """As PostgreSQL and CockroachDB: a DATE minus a DATE is the INT of days between
    them, a DATE plus or minus an INT of days a DATE; a TIMESTAMP minus a TIMESTAMP (or
    TIMESTAMPTZs, or TIMEs) the INTERVAL between them, its whole days as days; a DATE
    plus a TIME (either way round), or minus one, the TIMESTAMP that far from its
    midnight. A TIMESTAMP and a TIMESTAMPTZ are not subtracted (cast one); a DATE and
    either are, the DATE as its midnight (in the session's time zone beside a
    TIMESTAMPTZ)."""
    moments = isinstance(a, datetime.datetime), isinstance(b, datetime.datetime)
    if op is exp.Sub and moments == (True, False) and isinstance(b, datetime.date):
        b, moments = _midnight_beside(b, a), (True, True)
    elif op is exp.Sub and moments == (False, True) and isinstance(a, datetime.date):
        a, moments = _midnight_beside(a, b), (True, True)
    if op is exp.Add and isinstance(a, datetime.time) and not moments[1]:
        a, b = b, a  # NB: TIME + DATE as DATE + TIME
    if (
        moments == (False, False)
        and isinstance(a, datetime.date)
        and isinstance(b, datetime.time)
        and b.tzinfo is None
        and op in (exp.Add, exp.Sub)
    ):
        midnight = datetime.datetime.combine(a, datetime.time())
        offset = datetime.timedelta(
            hours=b.hour, minutes=b.minute, seconds=b.second, microseconds=b.microsecond
        )
        try:
            return midnight + offset if op is exp.Add else midnight - offset
        except OverflowError:
            raise SQLError("22008", "timestamp out of range") from None
    if moments == (False, False) and isinstance(a, datetime.date):
        if op is exp.Sub and isinstance(b, datetime.date):
            return (a - b).days
        if op in (exp.Add, exp.Sub) and is_int(b):
            return _days_later(a, b if op is exp.Add else -b)
    if moments == (False, False) and op is exp.Add and is_int(a) and isinstance(b, datetime.date):
        return _days_later(b, a)
    times = isinstance(a, datetime.time) and isinstance(b, datetime.time)
    if op is exp.Sub and (
        times or (moments == (True, True) and (a.tzinfo is None) == (b.tzinfo is None))
    ):
        if moments[0] and (infinity_of(a) or infinity_of(b)):
            raise SQLError("22008", "interval out of range")
        if not moments[0]:
            a, b = (datetime.datetime.combine(EPOCH_DATE, t) for t in (a, b))
        span = a - b
        micros = span.seconds * 1_000_000 + span.microseconds
        if span.days < 0 and micros:  # NB: the days and the time carry one sign
            return Interval(0, span.days + 1, micros - 86_400_000_000)
        return Interval(0, span.days, micros)
    symbol = _OPERATORS.get(op, "?")
    raise SQLError(
        "42883", f"unsupported binary operator: <{type_of_value(a)}> {symbol} <{type_of_value(b)}>"
    )


def _midnight_beside(day: datetime.date, moment: datetime.datetime) -> datetime.datetime:
    """``day`` as a TIMESTAMP (its midnight), or as a TIMESTAMPTZ (its midnight in the
    session's time zone) when ``moment`` is one, as PostgreSQL casts a DATE to subtract
    it."""
    midnight = datetime.datetime.combine(day, datetime.time())
    if moment.tzinfo is None:
        return midnight
    return midnight.replace(tzinfo=current_zone()).astimezone(datetime.UTC)


def _day_beside_moment(a: object, b: object) -> bool:
    """Whether one of ``a`` and ``b`` is a DATE and the other a TIMESTAMP[TZ]."""
    moments = isinstance(a, datetime.datetime), isinstance(b, datetime.datetime)
    dates = isinstance(a, datetime.date), isinstance(b, datetime.date)
    return dates == (True, True) and moments[0] != moments[1]


def _moment_of(value: Any, other: Any) -> Any:
    """``value`` compared with ``other`` (:func:`_day_beside_moment`): a DATE as its
    midnight (:func:`_midnight_beside`), as PostgreSQL and CockroachDB compare them."""
    if isinstance(value, datetime.datetime):
        return value
    return _midnight_beside(value, other)


def _days_later(day: datetime.date, days: int) -> datetime.date:
    try:
        return day + datetime.timedelta(days=days)
    except OverflowError:
        raise SQLError("22008", "date out of range") from None


def _interval_arithmetic(op: type, a: Any, b: Any) -> Any:
    """As PostgreSQL: interval +- interval, a date, time or timestamp +- an interval
    (interval + them too), an interval times or divided by a number."""
    if isinstance(a, Interval) and isinstance(b, Interval) and op in (exp.Add, exp.Sub):
        return a + b if op is exp.Add else a - b
    if isinstance(a, Interval) and _is_number(b) and op in (exp.Mul, exp.Div):
        if op is exp.Div:
            if b == 0:
                raise SQLError("22012", "division by zero")
            return a.times(1 / decimal.Decimal(b))
        return a.times(b)
    if isinstance(b, Interval) and _is_number(a) and op is exp.Mul:
        return b.times(a)
    if isinstance(a, Interval) and op is exp.Add and not isinstance(b, Interval):
        a, b = b, a
    if isinstance(b, Interval) and op in (exp.Add, exp.Sub):
        step = b if op is exp.Add else -b
        if isinstance(a, datetime.time):
            moment = datetime.datetime.combine(EPOCH_DATE, a)
            return (moment + datetime.timedelta(microseconds=step.micros)).time()
        if isinstance(a, datetime.datetime) and infinity_of(a):
            return a  # NB: as PostgreSQL's and CockroachDB's, infinity stays
        if isinstance(a, datetime.date):
            try:
                return step.added_to(a)
            except (OverflowError, ValueError):
                raise SQLError("22008", "date/time value out of range") from None
    symbol = _OPERATORS.get(op, "?")
    raise SQLError(
        "42883", f"unsupported binary operator: <{type_of_value(a)}> {symbol} <{type_of_value(b)}>"
    )


def _arithmetic_unchecked(op: type, a: Any, b: Any) -> Any:
    try:
        if isinstance(a, decimal.Decimal) or isinstance(b, decimal.Decimal):
            return _decimal_arithmetic(op, decimal.Decimal(a), decimal.Decimal(b))
        if op is exp.Add:
            return a + b
        if op is exp.Sub:
            return a - b
        if op is exp.Mul:
            return a * b
        if op is exp.Div:
            if isinstance(a, int) and isinstance(b, int):
                return DECIMAL_QUOTIENT.divide(a, b)
            return a / b
        # NB: as CockroachDB's (Go's / and %, math.Trunc and math.Mod): an integer
        # quotient is truncated toward zero and a remainder takes the dividend's sign
        # (-7 % 3 is -1), where Python's // and % floor
        if op is exp.IntDiv:
            if isinstance(a, int) and isinstance(b, int):
                quotient = abs(a) // abs(b)
                return quotient if (a < 0) == (b < 0) else -quotient
            quotient = a / b
            return float(math.trunc(quotient)) if math.isfinite(quotient) else quotient
        if op is exp.Mod:
            if isinstance(a, int) and isinstance(b, int):
                remainder = abs(a) % abs(b)
                return -remainder if a < 0 else remainder
            if b == 0:
                raise ZeroDivisionError
            return math.fmod(a, b)
    except (ZeroDivisionError, decimal.DivisionByZero, decimal.InvalidOperation):
        raise SQLError("22012", "division by zero") from None
    raise SQLError("0A000", f"unsupported operator {op.__name__}")


_DECIMAL_OPERATIONS: dict[type, Callable[[decimal.Decimal, decimal.Decimal], decimal.Decimal]] = {
    exp.Add: EXACT_DECIMAL.add,
    exp.Sub: EXACT_DECIMAL.subtract,
    exp.Mul: EXACT_DECIMAL.multiply,
    exp.Div: DECIMAL_QUOTIENT.divide,
    exp.IntDiv: EXACT_DECIMAL.divide_int,
    exp.Mod: EXACT_DECIMAL.remainder,
}


def _decimal_arithmetic(op: type, a: decimal.Decimal, b: decimal.Decimal) -> decimal.Decimal:
    operation = _DECIMAL_OPERATIONS.get(op)
    if operation is None:
        raise SQLError("0A000", f"unsupported operator {op.__name__}")
    if a.is_finite() and b.is_finite():
        return operation(a, b)
    if b == 0 and op in (exp.Div, exp.IntDiv, exp.Mod):
        raise SQLError("22012", "division by zero")
    try:
        result = operation(a, b)
    except decimal.InvalidOperation:
        # NB: as PostgreSQL's numeric: Infinity - Infinity and Infinity * 0 are NaN
        return DECIMAL_NAN
    # NB: 1 / Infinity is 0, not 0E-2019 (Python's zero at the context's least exponent)
    return decimal.Decimal(0) if result.is_zero() else result


@functools.lru_cache(maxsize=512)
def _like_compiled(pattern: str, escape: str | None, flags: int) -> _LikePattern:
    # NB: bounded, and shared by every statement: a compiled statement is kept (see
    # Session.plan), and a pattern from a placeholder or a column may differ every run.
    return _LikePattern(_like_segments(pattern, escape), flags | re.S)


class _LikePattern:
    """A LIKE pattern as the runs of fixed length between its ``%`` (each a regular
    expression of literal characters and ``.`` for ``_``), matched without backtracking:
    the first at the start, the last at the end, each other at the leftmost place after
    the one before (a ``%`` takes whatever lies between). NB: one regular expression
    with ``.*`` for each ``%`` backtracks: ``repeat('a', 800) LIKE '%a%a%a%c'`` took 8 s
    of CPU, out of reach of a statement timeout."""

    def __init__(self, segments: list[tuple[str, int]], flags: int) -> None:
        self._segments = [(re.compile(regex, flags), length) for regex, length in segments]

    def fullmatch(self, value: str) -> bool:
        segments = self._segments
        if len(segments) == 1:
            return segments[0][0].fullmatch(value) is not None
        (first, first_length), *middle, (last, last_length) = segments
        end = len(value) - last_length
        if end < first_length or first.match(value) is None:
            return False
        at = first_length
        for segment, _ in middle:
            found = segment.search(value, at, end)
            if found is None:
                return False
            at = found.end()
        return last.fullmatch(value, end) is not None


def _like_segments(pattern: str, escape: str | None) -> list[tuple[str, int]]:
    """The regular expressions of the runs between ``pattern``'s ``%`` signs, with the
    number of characters each matches."""
    escape = "\\" if escape is None else escape
    segments: list[tuple[str, int]] = []
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape:
            if i + 1 == len(pattern):
                # NB: as PostgreSQL and CockroachDB ('a\' LIKE 'a\' was true)
                raise SQLError("22025", "LIKE pattern must not end with escape character")
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if ch == "%":
            segments.append(("".join(out), len(out)))
            out = []
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
        i += 1
    segments.append(("".join(out), len(out)))
    return segments


def _length(value: Any) -> int:
    if isinstance(value, str | bytes):
        return len(value)
    raise TypeError


def _abs(value: Any) -> Any:
    if isinstance(value, int) and value == INT64_MIN:
        raise SQLError("22003", f"abs of min integer value ({value}) not defined")
    if _is_number(value):
        return abs(value)
    raise TypeError


_UNARY: dict[type, Callable[[Any], Any]] = {
    exp.Lower: lambda v: v.lower(),
    exp.Upper: lambda v: v.upper(),
    exp.Length: _length,
    exp.Abs: _abs,
}

# sqlglot's nodes for the functions of feedkv.sql.scalar_functions: their names there,
# and the arguments in order.
_FUNCTION_NODES: dict[type, tuple[str, tuple[str, ...]]] = {
    exp.Round: ("round", ("this", "decimals")),
    exp.Floor: ("floor", ("this",)),
    exp.Ceil: ("ceil", ("this",)),
    exp.Trunc: ("trunc", ("this",)),
    exp.Sign: ("sign", ("this",)),
    exp.Sqrt: ("sqrt", ("this",)),
    exp.Pow: ("power", ("this", "expression")),
    exp.Substring: ("substring", ("this", "start", "length")),
    exp.Replace: ("replace", ("this", "expression", "replacement")),
    exp.StrPosition: ("strpos", ("this", "substr")),
    exp.Left: ("left", ("this", "expression")),
    exp.Right: ("right", ("this", "expression")),
    exp.SplitPart: ("split_part", ("this", "delimiter", "part_index")),
    exp.Repeat: ("repeat", ("this", "times")),
    exp.Initcap: ("initcap", ("this",)),  # NB: sqlglot adds its default delimiters
    exp.MD5: ("md5", ("this",)),
    exp.Reverse: ("reverse", ("this",)),
    exp.Translate: ("translate", ("this", "from_", "to")),
    exp.Ln: ("ln", ("this",)),
    exp.Exp: ("exp", ("this",)),
    exp.Log: ("log", ("this", "expression")),
    exp.Pi: ("pi", ()),
    exp.Ascii: ("ascii", ("this",)),
    exp.JustifyHours: ("justify_hours", ("this",)),
    exp.JustifyDays: ("justify_days", ("this",)),
    exp.JustifyInterval: ("justify_interval", ("this",)),
    exp.Overlay: ("overlay", ("this", "expression", "from_", "for_")),
    exp.WidthBucket: ("width_bucket", ("this", "min_value", "max_value", "num_buckets")),
}

_JUSTIFY = (exp.JustifyHours, exp.JustifyDays, exp.JustifyInterval)


def _zoned_constant(value: exp.Expr) -> exp.Expr:
    """The value AT TIME ZONE (timezone()) shifts: an untyped string constant read as a
    TIMESTAMPTZ, the signature CockroachDB and PostgreSQL pick for one."""
    return exp.cast(value.copy(), "TIMESTAMPTZ") if _is_string_constant(value) else value


_HANDLERS: dict[type, Callable[[_Compiler, Any], Compiled]] = {
    **dict.fromkeys(_FUNCTION_NODES, _Compiler.scalar_function),
    exp.Trim: _Compiler.scalar_function,
    exp.Pad: _Compiler.scalar_function,
    exp.Case: _Compiler.case,
    exp.Dot: _Compiler.dot,
    exp.If: _Compiler.if_,
    exp.Extract: _Compiler.extract,
    exp.TimestampTrunc: _Compiler.date_trunc,
    exp.Chr: _Compiler.chr_,
    exp.Format: _Compiler.format_,
    exp.Nullif: _Compiler.nullif,
    exp.Greatest: _Compiler.extremum,
    exp.Least: _Compiler.extremum,
    exp.Concat: _Compiler.concat,
    exp.ConcatWs: _Compiler.concat,
    exp.Literal: _Compiler.literal,
    exp.Boolean: _Compiler.boolean,
    exp.Null: _Compiler.null,
    exp.HexString: _Compiler.hexstring,
    exp.ByteString: _Compiler.bytestring,
    exp.BitString: _Compiler.bitstring,
    exp.Parameter: _Compiler.parameter,
    exp.Column: _Compiler.column,
    exp.Star: _Compiler.star,
    exp.Tuple: _Compiler.tuple_,
    exp.Paren: _Compiler.paren,
    exp.Neg: _Compiler.neg,
    exp.Add: _Compiler.arithmetic,
    exp.Sub: _Compiler.arithmetic,
    exp.Mul: _Compiler.arithmetic,
    exp.Div: _Compiler.arithmetic,
    exp.IntDiv: _Compiler.arithmetic,
    exp.Mod: _Compiler.arithmetic,
    exp.DPipe: _Compiler.dpipe,
    **{op: _Compiler.bitwise for op in _BITWISE},
    exp.BitwiseNot: _Compiler.bitwise_not,
    exp.EQ: _Compiler.comparison,
    exp.NEQ: _Compiler.comparison,
    exp.LT: _Compiler.comparison,
    exp.LTE: _Compiler.comparison,
    exp.GT: _Compiler.comparison,
    exp.GTE: _Compiler.comparison,
    exp.NullSafeEQ: _Compiler.null_safe,
    exp.NullSafeNEQ: _Compiler.null_safe,
    exp.And: _Compiler.and_,
    exp.Or: _Compiler.or_,
    exp.Not: _Compiler.not_,
    exp.Is: _Compiler.is_,
    exp.IsNan: _Compiler.isnan,
    exp.In: _Compiler.in_,
    exp.Subquery: _Compiler.subquery,
    exp.CurrentVersion: _Compiler.session_value,
    exp.CurrentDatabase: _Compiler.session_value,
    exp.CurrentUser: _Compiler.session_value,
    exp.SessionUser: _Compiler.session_value,
    exp.CurrentSchema: _Compiler.session_value,
    exp.Exists: _Compiler.exists,
    exp.Between: _Compiler.between,
    exp.Like: _Compiler.like,
    exp.RegexpLike: _Compiler.regexp_like,
    exp.RegexpILike: _Compiler.regexp_like,
    exp.ILike: _Compiler.like,
    exp.Escape: _Compiler.escape,
    exp.SimilarTo: _Compiler.similar_to,
    exp.AtTimeZone: _Compiler.at_time_zone,
    exp.Cast: _Compiler.cast,
    exp.Dot: _Compiler.dot,
    exp.Interval: _Compiler.interval,
    exp.Array: _Compiler.array,
    exp.Bracket: _Compiler.bracket,
    exp.ArraySize: _Compiler.array_length,
    exp.CurrentTimestamp: _Compiler.current_timestamp,
    exp.Localtimestamp: _Compiler.local_timestamp,
    exp.Localtime: _Compiler.local_timestamp,
    exp.CurrentTime: _Compiler.current_time,
    exp.CurrentDate: _Compiler.current_date,
    exp.Uuid: _Compiler.uuid,
    exp.Rand: _Compiler.random,
    exp.Lower: _Compiler.unary_function,
    exp.Upper: _Compiler.unary_function,
    exp.Length: _Compiler.unary_function,
    exp.Abs: _Compiler.unary_function,
    exp.Coalesce: _Compiler.coalesce,
    exp.Anonymous: _Compiler.anonymous,
    exp.JSONExtract: _Compiler.json_extract,
    exp.JSONExtractScalar: _Compiler.json_extract,
    exp.Lambda: _Compiler.lambda_,
    exp.JSONBExtract: _Compiler.json_path_extract,
    exp.JSONBExtractScalar: _Compiler.json_path_extract,
    exp.ArrayContainsAll: _Compiler.json_contains,
    exp.ArrayContainedBy: _Compiler.json_contains,
    exp.ArrayOverlaps: _Compiler.array_overlaps,
    exp.JSONBContainsTopKey: _Compiler.json_has_key,
    exp.Window: _Compiler.window,
    exp.Explode: _Compiler.set_returning,
    exp.ExplodingGenerateSeries: _Compiler.set_returning,
    exp.Any: _Compiler.quantifier,
    exp.All: _Compiler.quantifier,
    **{agg: _Compiler.aggregate for agg in AGGREGATES},
}
