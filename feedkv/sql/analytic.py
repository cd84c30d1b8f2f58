"""A vectorized path for analytic SELECTs: the rows from columnar copies of the tables
(:mod:`feedkv.sql.columnar`), the query evaluated by DuckDB.

It answers only when its answer is the one the row-at-a-time engine gives (that engine
stays the reference; :func:`try_select` returning ``None`` sends the query there):

- sources: one stored table, or two joined by an inner equi-join of a column of each
  (``a JOIN b ON a.x = b.y``), either side INT columns plus or minus integer constants
  (``a.x = b.y + 1``), read in the statement's transaction (no AS OF SYSTEM
  TIME), each with one column family and no VIRTUAL column; the transaction has not
  written in them (a copy holds committed rows only);
- columns named: INT (any width), STRING (not CHAR(n), whose trailing spaces do not
  count) or BOOL (the kinds a copy holds), never a column an uncommitted ALTER is adding;
- WHERE: ``=, <>, <, <=, >, >=`` between two columns of one kind or a column and an
  integer or string constant of its kind, ``IS [NOT] NULL``, ``AND``, ``OR``, ``NOT``
  (SQL's three-valued logic, which DuckDB shares);
- select list: grouped columns and ``count(*)``, ``count(col)``, ``sum(INT)`` (a
  DECIMAL, as CockroachDB's: DuckDB sums in 128 bits, exactly), ``avg(INT)`` (that exact
  sum and the count, divided here with the reference's own DECIMAL context),
  ``min``/``max`` of INT or STRING (strings compare by their UTF-8 bytes in both); GROUP
  BY columns, or none (one row, as the reference gives over no rows too);
- the session's ``vectorize`` is ``on`` (the default; ``off`` is the reference alone);
- ORDER BY grouped columns (by name or position) that cover every grouped column, so
  the order is total (CockroachDB's NULL order: first ascending, last descending), and
  LIMIT with it; a name that is also an output alias is left to the reference (ORDER BY
  reads aliases first);
- nothing else: no HAVING, OFFSET, DISTINCT, subqueries, CTEs, locking, window
  functions; not inside a subquery.

Any DuckDB error falls back, so an error the reference raises is raised by it. Result
names and types come from the reference's own plan of the query, so a client sees the
same columns; values are converted to the Python values the reference produces (int,
str, bool, Decimal for a sum).
"""

from __future__ import annotations

import decimal
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from feedkv.errors import FeedKVError
from feedkv.sql import statements as st
from feedkv.sql.columnar import LIVE, cache_for, column_name
from feedkv.sql.descriptor import Column, TableDescriptor
from feedkv.sql.execution import Execution, Result
from feedkv.sql.types import DECIMAL_QUOTIENT, Kind

if TYPE_CHECKING:
    import duckdb

__all__ = ["load_engine", "try_select"]

log = logging.getLogger(__name__)

_INT8 = (-(2**63), 2**63 - 1)
_DIGITS = re.compile(r"^[0-9]+$")
_COMPARISONS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}
_KINDS = (Kind.INT, Kind.STRING, Kind.BOOL)


class _Unsupported(FeedKVError):
    """The query (or a part of it) is not one this path answers: use the reference
    (never leaves this module)."""


@dataclass
class _Source:
    desc: TableDescriptor
    names: tuple[str, ...]  # what qualifies its columns (its alias, else its name)
    view: str  # its rows' name in DuckDB


@dataclass
class _Compiler:
    sources: list[_Source]
    params: list[Any] = field(default_factory=list)

    def column(self, node: exp.Expr) -> tuple[str, Column]:
        """The DuckDB reference to a column and the column, or unsupported."""
        source, column = self.source_column(node)
        ctype = column.type
        if column.adding or ctype.kind not in _KINDS or ctype.fixed or ctype.type_name:
            raise _Unsupported  # NB: CHAR(n) compares without trailing spaces
        return f"{source.view}.{column_name(column.id)}", column

    def join_key(self, node: exp.Expr) -> tuple[str, str, Kind]:
        """A side of the join's equality: a column, or an INT column plus or minus INT
        constants (``b.id + 1``; DuckDB's BIGINT overflow is an error, so the reference
        raises its own); its DuckDB expression, its table's view and its kind."""
        if isinstance(node, exp.Paren):
            return self.join_key(node.this)
        if isinstance(node, exp.Add | exp.Sub):
            if _is_int_constant(node.expression):
                key, view, kind = self.join_key(node.this)
                constant = node.expression
            elif isinstance(node, exp.Add) and _is_int_constant(node.this):
                key, view, kind = self.join_key(node.expression)
                constant = node.this
            else:
                raise _Unsupported
            if kind is not Kind.INT:
                raise _Unsupported
            symbol = "+" if isinstance(node, exp.Add) else "-"
            return f"({key} {symbol} {self.constant(constant, Kind.INT)})", view, kind
        sql, column = self.column(node)
        return sql, sql.split(".")[0], column.type.kind

    def source_column(self, node: exp.Expr) -> tuple[_Source, Column]:
        """The source and column ``node`` names, or unsupported."""
        if not isinstance(node, exp.Column) or not isinstance(node.this, exp.Identifier):
            raise _Unsupported
        name = node.this.this
        qualifier = node.args.get("table")
        if node.args.get("db") or node.args.get("catalog"):
            raise _Unsupported
        found: list[tuple[_Source, Column]] = []
        for source in self.sources:
            if qualifier is not None and (
                not isinstance(qualifier, exp.Identifier) or qualifier.this not in source.names
            ):
                continue
            for column in source.desc.columns:
                if column.name == name:
                    found.append((source, column))
        if len(found) != 1:
            raise _Unsupported  # unknown or ambiguous: the reference says which
        return found[0]

    def constant(self, node: exp.Expr, kind: Kind) -> str:
        negative = False
        if isinstance(node, exp.Neg):
            negative, node = True, node.this
        if not isinstance(node, exp.Literal):
            raise _Unsupported
        if kind is Kind.INT and not node.is_string and _DIGITS.match(str(node.this)):
            value = -int(node.this) if negative else int(node.this)
            if not _INT8[0] <= value <= _INT8[1]:
                raise _Unsupported
            self.params.append(value)
            return "?::BIGINT"
        if kind is Kind.STRING and node.is_string and not negative:
            self.params.append(str(node.this))
            return "?::VARCHAR"
        raise _Unsupported

    def condition(self, node: exp.Expr) -> str:
        if isinstance(node, exp.Paren):
            return self.condition(node.this)
        if isinstance(node, exp.And | exp.Or):
            op = "AND" if isinstance(node, exp.And) else "OR"
            return f"({self.condition(node.this)} {op} {self.condition(node.expression)})"
        if isinstance(node, exp.Not):
            return f"(NOT {self.condition(node.this)})"
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise _Unsupported
            ref, _column = self.column(node.this)
            return f"({ref} IS {'NOT ' if node.args.get('negate') else ''}NULL)"
        found = _COMPARISONS.get(type(node))
        if found is None:
            raise _Unsupported
        op = found
        left, right = node.this, node.expression
        if not isinstance(left, exp.Column):
            left, right = right, left
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        left_ref, left_column = self.column(left)
        kind = left_column.type.kind
        if isinstance(right, exp.Column):
            right_ref, right_column = self.column(right)
            if right_column.type.kind is not kind:
                raise _Unsupported
        else:
            if kind is Kind.BOOL:
                raise _Unsupported
            right_ref = self.constant(right, kind)
        return f"({left_ref} {op} {right_ref})"

    def item(self, node: exp.Expr, grouped: set[str]) -> tuple[str, str]:
        """An output column's DuckDB expression and how its value converts."""
        if isinstance(node, exp.Alias):
            node = node.this
        if isinstance(node, exp.Column):
            ref, _column = self.column(node)
            if ref not in grouped:
                raise _Unsupported
            return ref, "value"
        if set(node.args) - {"this", "big_int"} and any(
            node.args[k] for k in set(node.args) - {"this", "big_int"}
        ):
            raise _Unsupported  # DISTINCT, FILTER, ORDER BY inside, ...
        kind = type(node)
        if kind is exp.Count:
            if isinstance(node.this, exp.Star):
                return "count(*)", "value"
            ref, _column = self.column(node.this)
            return f"count({ref})", "value"
        if kind not in (exp.Sum, exp.Avg, exp.Min, exp.Max):
            raise _Unsupported
        ref, column = self.column(node.this)
        if kind is exp.Sum or kind is exp.Avg:
            if column.type.kind is not Kind.INT:
                raise _Unsupported
            if kind is exp.Avg:
                # NB: the exact sum and the count, divided as the reference divides them
                return f"list_value(sum({ref})::HUGEINT, count({ref})::HUGEINT)", "avg"
            return f"sum({ref})", "decimal"
        if column.type.kind not in (Kind.INT, Kind.STRING):
            raise _Unsupported
        return f"{'min' if kind is exp.Min else 'max'}({ref})", "value"


def _converted(value: Any, convert: str) -> Any:
    """A DuckDB value as the reference's value (see :meth:`_Compiler.item`)."""
    if convert == "decimal":
        return None if value is None else decimal.Decimal(value)
    if convert == "avg":
        total, count = value
        return None if not count else DECIMAL_QUOTIENT.divide(total, count)
    return value


def _order(compiler: _Compiler, s: st.Select, grouped: list[str], outputs: list[str]) -> str | None:
    """The ORDER BY clause for DuckDB ("" for none), or ``None``: left to the reference."""
    if not s.order_by:
        return ""
    if not grouped:
        return None
    aliases = {node.alias for node in s.items if isinstance(node, exp.Alias)}
    keys: list[str] = []
    for node, descending in s.order_by:
        if isinstance(node, exp.Literal) and not node.is_string and _DIGITS.match(str(node.this)):
            position = int(node.this)
            if not 1 <= position <= len(outputs):
                return None
            ref = outputs[position - 1]
        elif isinstance(node, exp.Column) and node.name not in aliases:
            ref = compiler.column(node)[0]
        else:
            return None
        if ref not in grouped:
            return None
        keys.append(f"{ref} {'DESC NULLS LAST' if descending else 'ASC NULLS FIRST'}")
    if not set(grouped) <= {key.split(" ")[0] for key in keys}:
        return None  # ties: their order is the reference's
    return f" ORDER BY {', '.join(keys)}"


def _narrows(compiler: _Compiler, where: exp.Expr) -> bool:
    """Whether ``where`` names a leading primary key or index column of its table: the
    reference may then read a point, a span or an index's entries instead of the whole
    table, which a copy (built, or brought up to date, over the whole table) would cost
    more than it saves."""
    for node in where.find_all(exp.Column):
        source, column = compiler.source_column(node)
        desc = source.desc
        leading = {desc.primary_key[0], *(index.column_ids[0] for index in desc.indexes)}
        if column.id in leading:
            return True
    return False


def _shape_ok(s: st.Select) -> bool:
    return (
        isinstance(s.table, st.TableName)
        and s.as_of is None
        and s.index is None
        and s.having is None
        and s.offset is None
        and not s.distinct
        and not s.distinct_on
        and not s.subqueries
        and not s.ctes
        and not s.locks
        and len(s.joins) <= 1
        and all(
            j.side == "inner"
            and isinstance(j.table, st.TableName)
            and j.on is not None
            and not j.using
            and not j.natural
            and j.index is None
            for j in s.joins
        )
    )


def _is_int_constant(node: exp.Expr) -> bool:
    inner = node.this if isinstance(node, exp.Neg) else node
    return isinstance(inner, exp.Literal) and not inner.is_string


_local = threading.local()
_lock = threading.Lock()
# The process's DuckDB database (in memory, it holds nothing between queries), once
# made; whether the engine was loaded ahead of the first query
_database: list[duckdb.DuckDBPyConnection] = []
_loaded: list[bool] = []


def _process_database() -> duckdb.DuckDBPyConnection:
    """The process's DuckDB database, made (and DuckDB imported) on first use."""
    with _lock:
        if not _database:
            import duckdb

            _database.append(duckdb.connect())
        return _database[0]


def _connection() -> duckdb.DuckDBPyConnection:
    """This thread's connection to the process's DuckDB database (its registered
    tables are its own). NB: one database, a cursor per thread: a cursor takes
    microseconds, a database of its own 10 ms, which a session's first query paid."""
    con = getattr(_local, "con", None)
    if con is None:
        con = _local.con = _process_database().cursor()
    return con


def load_engine() -> None:
    """Load DuckDB, make the process's database and load what DuckDB's first scan of
    an Arrow table loads (pyarrow's dataset and compute modules), on the calling
    thread, once per process (later calls return at once): about 0.1 s of CPU and
    50 MB that the first analytic query would otherwise pay while its client waits.
    For a process that serves SQL (``feedkv start``, before it gives its URLs).

    NB: on the caller's thread, not one of its own: a process that exits while
    DuckDB loads on a daemon thread aborts, and exiting waits for any other thread
    (one was suspected when a node took 30 s to stop)."""
    with _lock:
        if _loaded:
            return
        _loaded.append(True)
    import pyarrow as pa

    try:
        con = _process_database().cursor()
        try:
            con.register("load_engine", pa.table({"c": pa.array([1], pa.int64())}))
            con.execute("SELECT sum(c) FROM load_engine").fetchall()
        finally:
            con.close()
    except Exception:  # NB: only a head start is lost; a query meets the error itself
        log.warning("DuckDB not loaded ahead of the first analytic query", exc_info=True)


def try_select(ex: Execution, s: st.Select) -> Result | None:
    """``s``'s result from the vectorized path, or ``None``: run it the usual way."""
    txn = ex.txn
    if txn is None or ex.reader is not txn or ex.outer_scopes or not _shape_ok(s):
        return None
    if ex.session.variable("vectorize") != "on":
        return None
    try:
        return _select(ex, s)
    except _Unsupported:
        return None


def _select(ex: Execution, s: st.Select) -> Result | None:
    from feedkv.sql.join import JoinPlan
    from feedkv.sql.plan import SelectPlan

    txn = ex.txn
    if txn is None:
        return None
    names: list[st.TableName] = [s.table] if isinstance(s.table, st.TableName) else []
    names += [j.table for j in s.joins if isinstance(j.table, st.TableName)]
    aliases = [s.alias, *(j.alias for j in s.joins)]
    sources: list[_Source] = []
    try:
        for n, (name, alias) in enumerate(zip(names, aliases, strict=True)):
            desc = ex.relation(name)
            if not isinstance(desc, TableDescriptor):
                return None
            sources.append(_Source(desc, (alias,) if alias else (desc.name,), f"t{n}"))
        if s.joins:
            databases = [n.database or ex.session.database for n in names]
            result_plan = JoinPlan.of(
                [src.desc for src in sources], s, databases, ex.outer_scope
            ).result
        else:
            plan = SelectPlan.of(sources[0].desc, s, names[0].database or ex.session.database)
            result_plan = plan.result
    except FeedKVError:
        return None  # the reference raises it
    if len(result_plan.names) != len(s.items):
        return None  # a star, or items that expand
    compiler = _Compiler(sources)
    sql_from = "{t0}"
    if s.joins:
        on = s.joins[0].on
        if not isinstance(on, exp.EQ):
            return None
        left, left_view, left_kind = compiler.join_key(on.this)
        right, right_view, right_kind = compiler.join_key(on.expression)
        if left_view == right_view or left_kind is not right_kind:
            return None
        sql_from = f"{{t0}} JOIN {{t1}} ON {left} = {right}"
    if s.where is not None and _narrows(compiler, s.where):
        return None
    where = f" WHERE {compiler.condition(s.where)}" if s.where is not None else ""
    where_params = list(compiler.params)
    compiler.params.clear()
    grouped = [compiler.column(g)[0] for g in s.group_by]
    items = [compiler.item(node, set(grouped)) for node in s.items]
    if compiler.params:
        return None
    select_list = ", ".join(expr for expr, _convert in items)
    group = f" GROUP BY {', '.join(grouped)}" if grouped else ""
    order = _order(compiler, s, grouped, [expr for expr, _convert in items])
    if order is None:
        return None
    kept = None
    if s.limit is not None:
        if not s.order_by:
            return None  # which rows a LIMIT keeps is the reference's to choose
        try:
            kept = ex.count(s.limit, "LIMIT")
        except FeedKVError:
            return None
    cache = cache_for(ex.session.db)
    tables = []
    for source in sources:
        copy = cache.copy_for(txn, source.desc, ex.session.interrupt.check)
        if copy is None:
            return None
        tables.append(copy.marked())
    # NB: a copy's dead rows are filtered out in the query, not first in a copy of
    # its live rows (an allocation of the whole table, the most of a query after a write)
    views = {
        f"t{n}": f"(SELECT * FROM r{n} WHERE {LIVE}) AS t{n}"
        if LIVE in table.column_names
        else f"r{n} AS t{n}"
        for n, table in enumerate(tables)
    }
    query = f"SELECT {select_list} FROM {sql_from.format_map(views)}{where}{group}{order}"
    ex.session.interrupt.check()
    con = _connection()
    import duckdb

    try:
        for n, table in enumerate(tables):
            con.register(f"r{n}", table)
        try:
            found = con.execute(query, where_params).fetchall()
        finally:
            for n in range(len(tables)):
                con.unregister(f"r{n}")
    except duckdb.Error:
        return None
    if kept is not None:
        found = found[:kept]
    converts = [convert for _expr, convert in items]
    rows_out = [tuple(map(_converted, row, converts)) for row in found]
    return Result(result_plan.names, rows_out, f"SELECT {len(rows_out)}", result_plan.types)
