"""EXPLAIN: a statement's plan, in the shape CockroachDB prints its own.

One column, ``info``: ``distribution: local`` and ``vectorized: true``, a blank line,
then a tree of operators (``• scan``, ``• filter``, ``• group (hash)``, ``• sort``,
``• limit``, ``• hash join``, ``• lookup join``, ``• index join``, ``• insert``, ...),
each with its attributes, children drawn under it with ``├──`` and ``└──``.

The tree says what feedkv does, not what CockroachDB's optimizer would choose: a scan's
spans are those :meth:`~feedkv.sql.plan.Selection.of` narrows the read to (``FULL
SCAN``: the table is read whole), a WHERE clause the span does not hold exactly is a
``• filter`` over it, a secondary index read is an ``• index join`` over a scan of the
index (every row it finds is filtered again), operators above the read come in the order
:class:`~feedkv.sql.plan.ResultPlan` runs them (group, HAVING, window, sort, distinct,
then limit), and a join's tables are read whole unless the first join is a lookup
(``feedkv.sql.query``'s, which reads the right table by the left side's values when they
are at most 256; past that it reads the table whole). Spans print as CockroachDB's do:
``[/1 - /10]`` both ends included, ``(`` or ``)`` for an excluded end of a type with no
next value, an empty end for no bound. feedkv keeps no table statistics, so each scan
says ``missing stats``.

``EXPLAIN ANALYZE`` runs the statement (in the statement's transaction, as CockroachDB
does: its writes are made) and adds the time it took, and to the top operator the rows it
returned (CockroachDB's statistics of the operators below are not kept).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sqlglot import exp

from feedkv.errors import SQLError
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.crdb_internal import is_virtual
from feedkv.sql.descriptor import Column, SequenceDescriptor, TableDescriptor, ViewDescriptor
from feedkv.sql.execution import Execution, Result
from feedkv.sql.expr import Scope, contains_aggregate, outer_nodes
from feedkv.sql.plan import DeletePlan, Selection, SelectPlan, UpdatePlan, key_constraint
from feedkv.sql.query import lookup_columns
from feedkv.sql.row_codec import table_span
from feedkv.sql.types import Kind, coerce, literal_text
from feedkv.sql.views import view_query

__all__ = ["HANDLERS", "Node", "explain", "render"]

HEADER = ("distribution: local", "vectorized: true")
_NOTHING = "[ - ]"  # what _spans gives for a span that holds no key (k = NULL)


@dataclass
class Node:
    """One operator: its name (``scan``), its attributes (``table: t@t_pkey``) and the
    operators it reads from."""

    name: str
    attributes: list[str] = field(default_factory=list)
    children: list[Node] = field(default_factory=list)


def render(node: Node, first: str = "", rest: str = "") -> list[str]:
    """``node``'s lines as CockroachDB draws a plan: ``first`` before its name, ``rest``
    before each line under it."""
    lines = [f"{first}• {node.name}"]
    if not node.children:
        return lines + [f"{rest}  {a}" for a in node.attributes]
    lines += [f"{rest}│ {a}" for a in node.attributes]
    lines.append(f"{rest}│")
    for i, child in enumerate(node.children):
        last = i == len(node.children) - 1
        lines += render(
            child, rest + ("└── " if last else "├── "), rest + ("    " if last else "│   ")
        )
        if not last:
            lines.append(f"{rest}│")
    return lines


def explain(ex: Execution, s: st.Explain) -> Result:
    """``EXPLAIN [ANALYZE] statement``: see the module docstring."""
    tree = _Planner(ex).statement(s.statement)
    header = list(HEADER)
    if s.analyze:
        if ex.run_nested is None:
            raise SQLError("XX000", "EXPLAIN ANALYZE outside the executor")
        started = time.perf_counter()
        result = ex.run_nested(ex, s.statement)
        elapsed = time.perf_counter() - started
        words = result.tag.split()
        written = int(words[-1]) if words and words[-1].isdigit() else 0
        returned = len(result.rows) if result.columns else written
        header = [f"execution time: {_duration(elapsed)}", *header]
        tree.attributes.insert(0, f"actual row count: {returned:,}")
    lines = [*header, "", *render(tree)]
    return Result(("info",), [(line,) for line in lines], f"EXPLAIN {len(lines)}")


def _duration(seconds: float) -> str:
    if seconds < 0.001:
        return f"{round(seconds * 1e6)}µs"
    return f"{round(seconds * 1e3)}ms"


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect="postgres")


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


class _Planner:
    """Builds the tree of one statement in ``ex`` (no rows are read but the constants
    a span is built from)."""

    def __init__(self, ex: Execution) -> None:
        self.ex = ex
        self.ctes: set[str] = set()

    # Statements.

    def statement(self, s: st.Query | st.Insert | st.Update | st.Delete) -> Node:
        if isinstance(s, st.Insert):
            return self.insert(s)
        if isinstance(s, st.Update | st.Delete):
            return self.mutation(s)
        return self.query(s)

    def _commit(self) -> list[str]:
        return ["auto commit"] if self.ex.autocommit else []

    def insert(self, s: st.Insert) -> Node:
        desc = self._table(s.table)
        columns = s.columns or tuple(c.name for c in desc.columns if not c.hidden)
        if s.query is not None:
            source = self.query(s.query)
        else:
            size = f"size: {_counted(len(columns), 'column')}, {_counted(len(s.rows), 'row')}"
            source = Node("values", [size])
        verb = "upsert" if s.upsert or s.on_conflict == "update" else "insert"
        attributes = [f"into: {desc.name}({', '.join(columns)})"]
        if s.on_conflict is not None or s.upsert:
            attributes.append(f"arbiter indexes: {desc.name}_pkey")
        return Node(verb, attributes + self._commit(), [source])

    def mutation(self, s: st.Update | st.Delete) -> Node:
        ex = self.ex
        desc = self._table(s.table)
        make = UpdatePlan.of if isinstance(s, st.Update) else DeletePlan.of
        plan: Any = ex.plan(s, desc, make)
        source = self.scan(desc, plan.selection, s.where, plan.scope)
        if s.joins:
            raise SQLError(
                "0A000", "EXPLAIN of UPDATE ... FROM or DELETE ... USING is not supported"
            )
        if s.order_by:
            source = Node("sort", [self._order(s.order_by)], [source])
        if s.limit is not None:
            source = Node("limit", [f"count: {_sql(s.limit)}"], [source])
        if isinstance(s, st.Update):
            sets = ", ".join(name for name, _ in s.sets)
            return Node(
                "update", [f"table: {desc.name}", f"set: {sets}", *self._commit()], [source]
            )
        return Node("delete", [f"from: {desc.name}", *self._commit()], [source])

    # Queries.

    def query(self, q: st.Query) -> Node:
        outer = set(self.ctes)
        self.ctes |= {cte.name for cte in q.ctes}
        try:
            if isinstance(q, st.SetOperation):
                node = Node(
                    f"{q.op}{' all' if q.all else ''}",
                    [],
                    [self.query(q.left), self.query(q.right)],
                )
                return self._sort_and_limit(node, q.order_by, q.limit, q.offset)
            if isinstance(q, st.Values):
                width = len(q.rows[0]) if q.rows else 0
                return Node(
                    "values", [f"size: {_counted(width, 'column')}, {_counted(len(q.rows), 'row')}"]
                )
            return self.select(q)
        finally:
            self.ctes = outer

    def select(self, q: st.Select) -> Node:
        ex = self.ex
        if q.table is None:
            node = Node("values", [f"size: {_counted(len(q.items), 'column')}, 1 row"])
            if q.where is not None:
                node = Node("filter", [f"filter: {_sql(q.where)}"], [node])
            return self._result(node, q)
        single = (
            not q.joins
            and isinstance(q.table, st.TableName)
            and not self._is_cte(q.table)
            and not is_virtual(q.table)
        )
        if single and isinstance(q.table, st.TableName):
            desc = ex.relation(q.table)
            if isinstance(desc, TableDescriptor):
                plan = ex.plan(q, desc, partial(SelectPlan.of, outer=ex.outer_scope))
                return self._result(self.scan(desc, plan.selection, q.where, plan.scope), q)
        node = self.source(q.table, q.index)
        for n, join in enumerate(q.joins):
            node = self.join(q, n, join, node)
        if q.where is not None:
            node = Node("filter", [f"filter: {_sql(q.where)}"], [node])
        return self._result(node, q)

    def _result(self, node: Node, q: st.Select) -> Node:
        """The operators over the rows read, in the order ResultPlan runs them."""
        items = [*q.items, *(n for n, _ in q.order_by)]
        if q.group_by or q.having is not None or any(contains_aggregate(i) for i in items):
            if q.group_by:
                keys = ", ".join(_sql(g) for g in q.group_by)
                node = Node("group (hash)", [f"group by: {keys}"], [node])
            else:
                node = Node("group (scalar)", [], [node])
            if q.having is not None:
                node = Node("filter", [f"filter: {_sql(q.having)}"], [node])
        if any(True for i in items for _ in outer_nodes(i, exp.Window)):
            node = Node("window", [], [node])
        if q.order_by:
            node = Node("sort", [self._order(q.order_by)], [node])
        if q.distinct_on:
            node = Node(
                "distinct", [f"distinct on: {', '.join(_sql(e) for e in q.distinct_on)}"], [node]
            )
        elif q.distinct:
            node = Node("distinct", [f"distinct on: {', '.join(_sql(e) for e in q.items)}"], [node])
        return self._sort_and_limit(node, (), q.limit, q.offset)

    def _sort_and_limit(
        self,
        node: Node,
        order_by: Sequence[tuple[exp.Expr, bool]],
        limit: exp.Expr | None,
        offset: exp.Expr | None,
    ) -> Node:
        if order_by:
            node = Node("sort", [self._order(order_by)], [node])
        if limit is not None or offset is not None:
            attributes = [] if limit is None else [f"count: {_sql(limit)}"]
            if offset is not None:
                attributes.append(f"offset: {_sql(offset)}")
            node = Node("limit", attributes, [node])
        return node

    @staticmethod
    def _order(order_by: Sequence[tuple[exp.Expr, bool]]) -> str:
        return "order: " + ",".join(("-" if d else "+") + _sql(e) for e, d in order_by)

    # Sources.

    def _is_cte(self, name: st.TableName) -> bool:
        return name.database is None and (name.name in self.ctes or name.name in self.ex.ctes)

    def _table(self, name: st.TableName) -> TableDescriptor:
        desc = self.ex.relation(name)
        if not isinstance(desc, TableDescriptor):
            raise SQLError("42809", f'"{name.name}" is not a table')
        return desc

    def source(self, source: st.Source, index: str | None = None) -> Node:
        """A source read whole: a table's full scan, a view's or subquery's plan."""
        ex = self.ex
        if isinstance(source, st.Derived):
            return self.query(source.query)
        if isinstance(source, st.Series | st.Unnest | st.RowsFrom):
            return Node("project set", [], [Node("emptyrow")])
        if isinstance(source, st.StatementSource):
            inner = source.statement
            if isinstance(inner, st.Insert | st.Update | st.Delete):
                return self.statement(inner)
            return Node("virtual table", [])
        if not isinstance(source, st.TableName):
            return Node("virtual table", [])  # a job statement's rows (crdb_internal.jobs)
        if self._is_cte(source):
            return Node("scan buffer", [f"label: {source.name}"])
        if is_virtual(source):
            return Node("virtual table", [f"table: {source.name}@primary"])
        desc = ex.relation(source)
        if isinstance(desc, ViewDescriptor):
            database = catalog.get_descriptor(ex.read_source, desc.database_id)
            name = database.name if database is not None else ex.session.database
            return self.query(view_query(desc.query, name))
        if isinstance(desc, SequenceDescriptor):
            return Node("values", ["size: 3 columns, 1 row"])
        return _scan(desc, index or f"{desc.name}_pkey", "FULL SCAN")

    def join(self, q: st.Select, n: int, join: st.Join, left: Node) -> Node:
        """Join ``n`` of ``q`` over the plan so far: a lookup join where
        :func:`feedkv.sql.query._looked_up` would look the right side up, else a hash
        join on ON's equalities, else a cross join."""
        suffix = {"left": " (left outer)", "right": " (right outer)", "full": " (full outer)"}.get(
            join.side, ""
        )
        on = join.on
        looked_up = self._lookup(q, n, join) if on is not None else None
        if looked_up is not None and isinstance(on, exp.EQ):
            table, a, b = looked_up
            return Node(
                f"lookup join{suffix}",
                [f"table: {table}", f"equality: ({a}) = ({b})"],
                [left],
            )
        if isinstance(join.table, st.Derived) and join.table.lateral:
            # NB: planned anew for each left row (query.lateral_subquery), as
            # CockroachDB's apply join
            attributes = [f"pred: {_sql(on)}"] if on is not None else []
            return Node(f"apply join{suffix}", attributes, [left])
        right = self.source(join.table, join.index)
        if join.using:
            columns = ", ".join(join.using)
            return Node(
                f"hash join{suffix}", [f"equality: ({columns}) = ({columns})"], [left, right]
            )
        equalities = [c for c in _conjuncts(on) if _is_column_equality(c)]
        if equalities:
            lefts = ", ".join(_sql(c.this) for c in equalities)
            rights = ", ".join(_sql(c.expression) for c in equalities)
            attributes = [f"equality: ({lefts}) = ({rights})"]
            rest = [c for c in _conjuncts(on) if c not in equalities]
            if rest:
                attributes.append("pred: " + " AND ".join(_sql(c) for c in rest))
            return Node(f"hash join{suffix}", attributes, [left, right])
        attributes = [f"pred: {_sql(on)}"] if on is not None else []
        return Node(f"cross join{suffix}", attributes, [left, right])

    def _lookup(self, q: st.Select, n: int, join: st.Join) -> tuple[str, str, str] | None:
        """``(index, left column, right column)`` when the first join is looked up."""
        columns = lookup_columns(q, join) if n == 0 else None
        if columns is None or not isinstance(join.table, st.TableName):
            return None
        if self._is_cte(join.table) or is_virtual(join.table):
            return None
        a, b = columns
        desc = self.ex.relation(join.table)
        if not isinstance(desc, TableDescriptor):
            return None
        column = desc.find_column(b.name)
        if column is None:
            return None
        if desc.primary_key[0] == column.id:
            return f"{desc.name}@{desc.name}_pkey", a.name, b.name
        index = next((i for i in desc.readable_indexes if i.column_ids[0] == column.id), None)
        if index is None:
            return None
        return f"{desc.name}@{index.name}", a.name, b.name

    # The read of one table.

    def scan(
        self, desc: TableDescriptor, selection: Selection, where: exp.Expr | None, scope: Scope
    ) -> Node:
        """The read ``selection`` makes of ``desc``, with the filter after it."""
        context = self.ex.context
        filtered = f"filter: {_sql(where)}" if where is not None else ""
        listed = _listed_read(desc, selection, context)
        if listed is not None:
            return Node("filter", [filtered], [listed]) if listed.name != "norows" else listed
        constraint = key_constraint(desc, where, scope)
        index = constraint[0] if constraint is not None else None
        if selection.index_span is not None and constraint is not None and index is not None:
            _index, columns, plan = constraint
            descending = index.is_descending(len(plan.equal))
            spans = (
                _spans(columns, plan, context, descending)
                if selection.index_span(context) is not None
                else None
            )
            if spans == _NOTHING:
                return Node("norows")
            if spans is not None:
                partial_index = " (partial index)" if index.predicate is not None else ""
                read = _scan(desc, index.name + partial_index, spans)
                node = Node("index join", [f"table: {desc.name}@{desc.name}_pkey"], [read])
                return Node("filter", [filtered], [node]) if selection.test else node
        span, exact = selection.span(context)
        text = "FULL SCAN"
        if span != table_span(desc.id) and constraint is not None and constraint[0] is None:
            plan = constraint[2]
            descending = desc.key_descending(len(plan.equal))
            text = _spans(constraint[1], plan, context, descending) or "FULL SCAN"
        if text == _NOTHING:
            return Node("norows")
        node = _scan(desc, f"{desc.name}_pkey", text)
        if selection.test is not None and not exact:
            node = Node("filter", [filtered], [node])
        return node


def _listed_read(desc: TableDescriptor, selection: Selection, context: Any) -> Node | None:
    """The read of the keys a WHERE clause lists (k IN (...), k = ANY (...)): a span
    per key of the primary key or a secondary index (then an index join)."""
    index, keys = None, None
    if selection.key_list is not None:
        keys = selection.key_list(context)
    elif selection.listed_index is not None:
        index, listed = selection.listed_index
        keys = listed(context)
    if keys is None:
        return None
    if not keys:
        return Node("norows")
    points = (f"/{literal_text(key)}" for key in keys)
    spans = " ".join(f"[{p} - {p}]" for p in points)
    if index is None:
        return _scan(desc, f"{desc.name}_pkey", spans)
    read = _scan(desc, index.name, spans)
    return Node("index join", [f"table: {desc.name}@{desc.name}_pkey"], [read])


def _scan(desc: TableDescriptor, index: str, spans: str) -> Node:
    return Node("scan", ["missing stats", f"table: {desc.name}@{index}", f"spans: {spans}"])


def _conjuncts(node: exp.Expr | None) -> list[exp.Expr]:
    if node is None:
        return []
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    if isinstance(node, exp.And):
        return [*_conjuncts(node.this), *_conjuncts(node.expression)]
    return [node]


def _is_column_equality(node: exp.Expr) -> bool:
    """Whether ``node`` is an equality a hash join keys on: two columns, or two
    expressions whose columns each name tables of one side only (``a.id = b.id + 1``)."""
    if not isinstance(node, exp.EQ):
        return False
    a, b = node.this, node.expression
    if isinstance(a, exp.Column) and isinstance(b, exp.Column):
        return True
    tables = [{c.table for c in side.find_all(exp.Column)} for side in (a, b)]
    return all(t and "" not in t for t in tables) and not tables[0] & tables[1]


def _key_value(compiled: Callable[..., Any], column: Column, context: Any) -> tuple[Any, bool]:
    """A bound as the column's type, and whether it kept its value (as the span is built)."""
    raw = compiled((), context)
    value = coerce(raw, column.type, column.name)
    return value, type(value) is type(raw) and value == raw


def _spans(columns: list[Column], plan: Any, context: Any, descending: bool = False) -> str | None:
    """The span ``plan`` (equalities on the leading ``columns``, then a range on the
    next, ``descending`` in the keys or not) reads, as CockroachDB writes spans (in key
    order: a DESC column's low bound ends them); ``None``: the table is read whole."""
    if not plan.equal and plan.low is None and plan.high is None:
        return "FULL SCAN"  # a partial index's every entry
    try:
        equal = []
        for compiled, column in zip(plan.equal, columns, strict=False):
            value, kept = _key_value(compiled, column, context)
            if value is None:
                return _NOTHING  # NB: = NULL matches nothing; the span read is empty
            if not kept:
                return None
            equal.append(value)
        prefix = "".join(f"/{literal_text(v)}" for v in equal)
        if len(equal) >= len(columns) or (plan.low is None and plan.high is None):
            return f"[{prefix} - {prefix}]"
        column = columns[len(equal)]
        start, open_start = prefix, "["
        end, open_end = prefix, "]"
        for limit, is_low in ((plan.low, True), (plan.high, False)):
            if limit is None:
                continue
            value, kept = _key_value(limit.value, column, context)
            if value is None or not kept:
                continue
            inclusive = limit.inclusive
            if not inclusive and column.type.kind is Kind.INT and not isinstance(value, bool):
                value, inclusive = (value + 1 if is_low else value - 1), True
            if is_low != descending:
                start = f"{prefix}/{literal_text(value)}"
                open_start = "[" if inclusive else "("
            else:
                end = f"{prefix}/{literal_text(value)}"
                open_end = "]" if inclusive else ")"
    except SQLError:
        return None
    return f"{open_start}{start} - {end}{open_end}"


HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {st.Explain: explain}
