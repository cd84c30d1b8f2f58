"""Which expressions are immutable: what a stored expression (a computed column, a
partial index's predicate) may hold, as CockroachDB rules.

An immutable expression's value follows from its operands alone. A *stable* one
("context-dependent" in CockroachDB's errors) also reads the statement's context: the
clock, the session's user or database, its time zone (a cast between TIMESTAMPTZ and a
local date, time or text). A *volatile* one gives a new value per call (random(),
nextval()). A value stored from either would depend on when or by whom its row was
written, so both are refused there with CockroachDB's 0A000.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from feedkv.errors import SQLError
from feedkv.sql.types import ColumnType, Kind

__all__ = ["TypeOf", "refuse_non_immutable", "refuse_volatile", "refuse_zoned_casts"]

_STABLE = frozenset(
    """now current_timestamp current_date current_time localtime localtimestamp
    statement_timestamp transaction_timestamp current_user session_user user
    current_database current_schema current_schemas version timeofday
    cluster_logical_timestamp crdb_internal.cluster_name current_setting
    to_char age pg_backend_pid""".split()  # noqa: SIM905
)
_VOLATILE = frozenset(
    """random rand gen_random_uuid uuid_generate_v4 uuid_v4 unique_rowid unordered_unique_rowid
    nextval currval lastval setval clock_timestamp pg_sleep gen_random_ulid""".split()  # noqa: SIM905
)
_STABLE_NODES = (exp.CurrentTimestamp, exp.CurrentDate, exp.CurrentTime, exp.CurrentUser)
_VOLATILE_NODES = (exp.Rand, exp.Uuid)  # random(), gen_random_uuid() as sqlglot parses them
_NODE_NAMES: dict[type[exp.Expr], str] = {exp.Rand: "random", exp.Uuid: "gen_random_uuid"}
TypeOf = Callable[[exp.Expr], ColumnType | None]
_ZONED = frozenset({Kind.TIMESTAMPTZ})
_LOCAL = frozenset({Kind.DATE, Kind.TIMESTAMP, Kind.TIME, Kind.STRING})


def _function_name(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return None


def refuse_non_immutable(node: exp.Expr, where: str) -> None:
    """0A000 if ``node`` calls a volatile or stable function; ``where`` names the
    expression in the message (``computed column``, ``index predicate``)."""
    for found in node.walk():
        name = _function_name(found)
        if isinstance(found, _VOLATILE_NODES) or name in _VOLATILE:
            raise SQLError("0A000", f"volatile functions are not allowed in {where}")
        if isinstance(found, _STABLE_NODES) or name in _STABLE:
            raise SQLError("0A000", f"context-dependent operators are not allowed in {where}")


def refuse_volatile(node: exp.Expr, where: str) -> None:
    """0A000 if ``node`` calls a volatile function (stable ones pass), naming it."""
    for found in node.walk():
        name = _function_name(found)
        if isinstance(found, _VOLATILE_NODES) or name in _VOLATILE:
            shown = _NODE_NAMES.get(type(found), name)
            raise SQLError("0A000", f"volatile functions are not allowed in {where}: {shown}()")


def _zoned(source: Kind, target: Kind) -> bool:
    return (source in _ZONED and target in _LOCAL) or (source in _LOCAL and target in _ZONED)


def refuse_zoned_casts(node: exp.Expr, type_of: TypeOf, where: str) -> None:
    """0A000 if ``node`` casts between a TIMESTAMPTZ and a local date, time or text:
    the cast reads the session's time zone (CockroachDB's "stable" casts). ``type_of``
    gives an expression's type where it follows from the expression (None if not)."""
    for cast in node.find_all(exp.Cast):
        source = type_of(cast.this)
        target = type_of(cast)
        if source is not None and target is not None and _zoned(source.kind, target.kind):
            raise SQLError(
                "0A000",
                f"context-dependent operators are not allowed in {where}: "
                f"{source.sql()}::{target.sql()} depends on the session's time zone",
            )
