"""Table partitions, as CockroachDB defines them: ``PARTITION BY LIST (cols)`` or
``PARTITION BY RANGE (cols)`` on a prefix of the primary key, each partition a set of
key spans of the table's primary index.

A ``LIST`` partition holds the rows whose key starts with one of its values (a span per
value); ``VALUES IN (DEFAULT)`` holds every row no other partition holds (the gaps
between them). A ``RANGE`` partition holds the keys in ``[FROM, TO)``; ``MINVALUE`` and
``MAXVALUE`` are the ends of the index. Partitions may not overlap. The spans are
computed once, when the table is created, and kept in its descriptor
(:class:`~feedkv.sql.descriptor.Partition`): a changefeed on ``FOR TABLE t PARTITION p``
watches exactly them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.descriptor import Partition, TableDescriptor
from feedkv.sql.row_codec import index_prefix, row_prefix, row_span
from feedkv.sql.types import coerce
from feedkv.util.keys import prefix_end

__all__ = ["SHOW_COLUMNS", "partitions_of", "show_rows"]

SHOW_COLUMNS = ("database_name", "table_name", "partition_name", "column_names", "partition_value")

Evaluate = Callable[[exp.Expr], Any]  # a constant expression's value


def partitions_of(
    desc: TableDescriptor, partitioning: st.Partitioning, evaluate: Evaluate
) -> tuple[Partition, ...]:
    """The partitions ``partitioning`` makes of ``desc``'s rows (42P16 / 42601 / 22023
    errors name the partition at fault)."""
    keys = [desc.column_by_id(i) for i in desc.primary_key]
    key_names = [c.name for c in keys if c is not None]
    columns = list(partitioning.columns)
    if key_names[: len(columns)] != columns:
        raise SQLError(
            "42P16",
            f"PARTITION BY {partitioning.kind.upper()} ({', '.join(columns)}) of table "
            f"{desc.name!r} must name a prefix of its primary key ({', '.join(key_names)})",
        )
    seen: set[str] = set()
    made: list[Partition] = []
    default: st.PartitionSpec | None = None
    for spec in partitioning.partitions:
        if spec.name in seen:
            raise SQLError("42P16", f"partition {spec.name!r} is defined more than once")
        seen.add(spec.name)
        if spec.default:
            default = spec
            continue
        made.append(_partition(desc, spec, len(columns), evaluate))
    _check_disjoint(made)
    if default is not None:
        made.append(Partition(default.name, _gaps(desc, made), "VALUES IN (DEFAULT)"))
    shown = ", ".join(columns)
    return tuple(Partition(p.name, p.spans, p.values, shown) for p in made)


def _partition(
    desc: TableDescriptor, spec: st.PartitionSpec, width: int, evaluate: Evaluate
) -> Partition:
    def key(values: tuple[exp.Expr, ...]) -> list[Any]:
        if len(values) != width:
            raise SQLError(
                "42601",
                f"partition {spec.name!r}: {_text(values)} has {len(values)} values, the "
                f"partitioning has {width} columns",
            )
        out = []
        for node, column_id in zip(values, desc.primary_key, strict=False):
            column = desc.column_by_id(column_id)
            if column is None:
                raise SQLError("XX000", f"table {desc.name!r} has no column {column_id}")
            value = coerce(evaluate(node), column.type, column.name)
            if value is None:
                raise SQLError("22023", f"partition {spec.name!r}: a value cannot be NULL")
            out.append(value)
        return out

    if spec.start is None or spec.end is None:  # LIST
        spans = tuple(
            (span.start, span.end) for span in (row_span(desc, key(v)) for v in spec.values)
        )
        listed = ", ".join(_text(v, bare=True) for v in spec.values)
        return Partition(spec.name, spans, f"VALUES IN ({listed})")
    prefix = index_prefix(desc)
    start = row_prefix(desc, key(spec.start)) if spec.start else prefix
    end = row_prefix(desc, key(spec.end)) if spec.end else prefix_end(prefix)
    if start >= end:
        raise SQLError(
            "42P16", f"partition {spec.name!r}: VALUES FROM must sort below TO (it holds no row)"
        )
    shown_start = _text(spec.start) if spec.start else "(MINVALUE)"
    shown_end = _text(spec.end) if spec.end else "(MAXVALUE)"
    return Partition(spec.name, ((start, end),), f"VALUES FROM {shown_start} TO {shown_end}")


def show_rows(database: str, desc: TableDescriptor) -> list[tuple[str, str, str, str, str]]:
    """``SHOW PARTITIONS FROM TABLE``'s rows for ``desc``: a row per partition."""
    return [(database, desc.name, p.name, p.columns, p.values) for p in desc.partitions]


def _text(values: tuple[exp.Expr, ...], *, bare: bool = False) -> str:
    """``(a, b)``; with ``bare``, a single value without its parentheses."""
    inner = ", ".join(v.sql(dialect="postgres") for v in values)
    return inner if bare and len(values) == 1 else f"({inner})"


def _check_disjoint(partitions: list[Partition]) -> None:
    reach: tuple[bytes, str] | None = None  # the furthest end so far, and whose
    for start, end, name in sorted((s, e, p.name) for p in partitions for s, e in p.spans):
        if reach is not None and start < reach[0]:
            raise SQLError("42P16", f"partitions {reach[1]!r} and {name!r} overlap")
        if reach is None or end > reach[0]:
            reach = (end, name)


def _gaps(desc: TableDescriptor, partitions: list[Partition]) -> tuple[tuple[bytes, bytes], ...]:
    """The spans of the primary index no partition holds."""
    prefix = index_prefix(desc)
    at, end = prefix, prefix_end(prefix)
    gaps = []
    for start, stop in sorted(s for p in partitions for s in p.spans):
        if at < start:
            gaps.append((at, start))
        at = max(at, stop)
    if at < end:
        gaps.append((at, end))
    return tuple(gaps)
