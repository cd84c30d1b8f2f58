"""Set operations: ``UNION``, ``INTERSECT`` and ``EXCEPT``, each with or without ``ALL``,
as PostgreSQL and CockroachDB define them.

Both sides must have as many columns (42601), of types that match column by column
(42804): the same kind, or numbers (INT with DECIMAL or FLOAT: the result takes the
wider type, as PostgreSQL promotes them), or NULL alone, which matches anything. A
column's type is what its expression gives where the tree tells, else the kind of its
values. Rows compare as DISTINCT compares them: NULLs are equal. Without ``ALL`` the
result holds each distinct row once; with it, ``UNION ALL`` keeps every row,
``INTERSECT ALL`` a row as often as the fewer of its copies on either side, ``EXCEPT
ALL`` as often as its copies on the left outnumber those on the right. The result's
names are the left side's; ORDER BY over the whole names one of them or its position.

Cost: one pass over each side and a hash table of the right side's rows.
"""

from __future__ import annotations

import decimal
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from feedkv.errors import SQLError
from feedkv.sql.aggregate import group_key
from feedkv.sql.expr import Compiled, Scope
from feedkv.sql.plan import order_keys as plan_order_keys
from feedkv.sql.relation import column_types
from feedkv.sql.types import ColumnType, Kind, kind_name

__all__ = ["SetResult", "combine", "result_order", "union_all"]

_NUMBERS = (Kind.INT, Kind.DECIMAL, Kind.FLOAT)  # narrowest first


@dataclass(frozen=True, slots=True)
class SetResult:
    """A query's result as a side of a set operation: names, types (``None``: not known
    from the tree) and rows."""

    columns: tuple[str, ...]
    types: tuple[ColumnType | None, ...]
    rows: list[tuple[Any, ...]]


def combine(op: str, all_: bool, left: SetResult, right: SetResult) -> SetResult:
    """``left op [ALL] right`` (``op`` is union, intersect or except)."""
    word = op.upper()
    if len(left.columns) != len(right.columns):
        raise SQLError(
            "42601",
            f"each {word} query must have the same number of columns: "
            f"{len(left.columns)} vs {len(right.columns)}",
        )
    types = _matched(word, left, right)
    left_rows = _promoted(left.rows, types)
    right_rows = _promoted(right.rows, types)
    rows: list[tuple[Any, ...]]
    if op == "union":
        rows = left_rows + right_rows if all_ else _distinct(left_rows + right_rows)
    else:
        counts = Counter(_key(row) for row in right_rows)
        keep = op == "intersect"
        rows = []
        for row in left_rows if all_ else _distinct(left_rows):
            key = _key(row)
            present = counts[key] > 0
            if present and all_:
                counts[key] -= 1
            if present == keep:
                rows.append(row)
    return SetResult(left.columns, tuple(types), rows)


def union_all(word: str, sides: Sequence[SetResult]) -> SetResult:
    """The rows of every side, in order, of the types they share (``word`` names the
    statement in errors: VALUES). The sides have as many columns."""
    width = len(sides[0].columns)
    types = _types(sides[0], width)
    for side in sides[1:]:
        types = _merged(word, types, _types(side, width))
    rows = [row for side in sides for row in side.rows]
    return SetResult(sides[0].columns, tuple(types), _promoted(rows, types))


def _matched(word: str, left: SetResult, right: SetResult) -> list[ColumnType | None]:
    """Each result column's type, or 42804 where the sides' types do not match."""
    width = len(left.columns)
    return _merged(word, _types(left, width), _types(right, width))


def _merged(
    word: str, left: Sequence[ColumnType | None], right: Sequence[ColumnType | None]
) -> list[ColumnType | None]:
    out: list[ColumnType | None] = []
    for a, b in zip(left, right, strict=True):
        if a is None or b is None:
            out.append(a or b)
        elif a.kind is b.kind:
            out.append(a if a == b else ColumnType(a.kind))
        elif a.kind in _NUMBERS and b.kind in _NUMBERS:
            out.append(ColumnType(max(a.kind, b.kind, key=_NUMBERS.index)))
        else:
            raise SQLError(
                "42804",
                f"{word} types {_shown(a)} and {_shown(b)} cannot be matched",
            )
    return out


def _types(side: SetResult, width: int) -> list[ColumnType | None]:
    """The side's column types: given, else its values' kind (``None``: only NULLs)."""
    known = column_types(side.types, side.rows, width)
    return [
        given
        if given is not None
        else (found if any(row[i] is not None for row in side.rows) else None)
        for i, (given, found) in enumerate(zip(_padded(side.types, width), known, strict=True))
    ]


def _padded(types: Sequence[ColumnType | None], width: int) -> list[ColumnType | None]:
    return [types[i] if i < len(types) else None for i in range(width)]


def _shown(ctype: ColumnType) -> str:
    return kind_name(ctype.kind)


def _promoted(
    rows: list[tuple[Any, ...]], types: Sequence[ColumnType | None]
) -> list[tuple[Any, ...]]:
    """``rows`` with INT values of a DECIMAL or FLOAT result column (and DECIMAL values
    of a FLOAT one) in that type."""
    wide = [
        (i, t.kind)
        for i, t in enumerate(types)
        if t is not None and t.kind in (Kind.DECIMAL, Kind.FLOAT)
    ]
    if not wide:
        return rows
    out = []
    for row in rows:
        values = list(row)
        for i, kind in wide:
            value = values[i]
            if isinstance(value, int | decimal.Decimal) and not isinstance(value, bool):
                values[i] = float(value) if kind is Kind.FLOAT else decimal.Decimal(value)
        out.append(tuple(values))
    return out


def _key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(group_key(value) for value in row)


def _distinct(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    seen: set[tuple[Any, ...]] = set()
    out = []
    for row in rows:
        key = _key(row)
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def result_order(
    word: str, order_by: Sequence[tuple[exp.Expr, bool]], names: Sequence[str]
) -> list[tuple[Compiled, bool]]:
    """ORDER BY over a set operation's result: a result column's name or position
    (0A000 for anything else, as PostgreSQL)."""
    scope = Scope()
    projections: list[Compiled] = []
    for i, name in enumerate(names):
        if ("", name) not in scope.columns:
            scope.add([""], name, i, ColumnType(Kind.STRING))
        projections.append(lambda row, ctx, i=i: row[i])  # type: ignore[misc]
    for node, _descending in order_by:
        if not isinstance(node, exp.Column | exp.Literal) or (
            isinstance(node, exp.Column) and node.table
        ):
            raise SQLError(
                "0A000",
                f"ORDER BY of a {word} names a result column or its position, "
                f"not {node.sql(dialect='postgres')}",
            )
    return plan_order_keys(order_by, scope, names, projections)
