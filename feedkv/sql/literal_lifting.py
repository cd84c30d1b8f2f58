"""Integer literals of a statement's text lifted into placeholders, so that texts that
differ only in them share one parse and one plan.

A client of the simple query protocol (pgbench's default, psql, a driver that
interpolates its values) sends every statement as text with its values written in:
``UPDATE pgbench_accounts SET abalance = abalance + -1234 WHERE aid = 5678``. Each such
text is new, so each was parsed and planned anew, several times what running it costs.
:func:`lift` turns it into the text ``UPDATE pgbench_accounts SET abalance = abalance +
$1 WHERE aid = $2`` and the values ``(-1234, 5678)``, which run as a prepared
statement would: one parse and plan per template, kept by the parse cache and the
session's plans.

A literal and a placeholder are not the same to the SQL layer everywhere (``ORDER BY
1`` is a position, ``SELECT 1`` types its column from the literal, a numeric constant
beside a FLOAT becomes a FLOAT), so a template is used only when its statement has its
placeholders where a literal and a parameter holding its value are alike
(:func:`liftable`, decided once per template):

- in WHERE, one side of a comparison (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``)
  whose other side is a column;
- in UPDATE's SET, the whole value, or the right side of ``+`` or ``-`` whose left
  side is a column;
- in an INSERT of one row of VALUES, a whole value.

The statement reads and writes one table, named as such (no joins, subqueries or CTEs),
and each run checks that the table has no JSONB column (:func:`lifts_into`): a JSON
scalar is a plain Python value, typed by the tree, so an integer parameter meets a JSONB
column as a JSON number where the literal is refused (42804, 42883).

Only integers from -2**24 to 2**24 are lifted: a constant compared with a FLOAT (REAL)
is made one first, and such integers are exactly the same as FLOAT and REAL, so the
comparison decides the same either way. A minus sign written right after an operator,
a comma or an opening parenthesis is the literal's (``+ -1234``, ``(1, -2)``).

Texts with a ``$`` (placeholders, dollar quotes), a comment, or a string with a
prefix (``E'...'``, ``B'...'``) are left as they are, as are texts of several
statements.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from sqlglot import exp

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.descriptor import TableDescriptor
from feedkv.sql.parser import parameters
from feedkv.sql.statement_cache import StatementCache
from feedkv.sql.types import ColumnType, Kind

__all__ = ["MAX_LIFTED", "lift", "liftable", "lifted", "lifts_into", "table_of"]

MAX_LIFTED = 1 << 24  # float32 holds every integer up to it exactly

_TOKENS = re.compile(
    r"""
    (?P<quoted>'(?:[^']|'')*'|"(?:[^"]|"")*")
  | (?P<word>[^\W\d]\w*)
  | (?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)
    """,
    re.VERBOSE,
)
# what a minus sign follows when it is a sign, not a subtraction
_SIGN_AFTER = frozenset("+-*/%^=<>(,")


def lift(text: str) -> tuple[str, tuple[int, ...]] | None:
    """``text`` with its integer literals replaced by ``$1``, ``$2``... and their
    values, or ``None`` when it has none to lift or is not for lifting (module
    docstring). Lexical only: whether the template may run is :func:`liftable`'s."""
    if "$" in text or "--" in text or "/*" in text:
        return None
    parts: list[str] = []
    values: list[int] = []
    copied = 0
    word_end = -1
    for match in _TOKENS.finditer(text):
        start, end = match.span()
        kind = match.lastgroup
        if kind == "word":
            word_end = end
            continue
        if kind == "quoted":
            if start == word_end:
                return None  # E'...', B'...', X'...', U&'...': a prefixed string
            continue
        literal = match.group()
        if not literal.isdigit() or (literal[0] == "0" and len(literal) > 1):
            continue
        if _in_word(text, start - 1) or _in_word(text, end):
            continue  # NB: next to a character no word starts with (a digit not ASCII's)
        value = int(literal)
        sign = _sign_at(text, start)
        if sign is not None:
            start, value = sign, -value
        if value > MAX_LIFTED or value < -MAX_LIFTED:
            continue
        values.append(value)
        parts += (text[copied:start], f"${len(values)}")
        copied = end
    if not values:
        return None
    parts.append(text[copied:])
    return "".join(parts), tuple(values)


def _in_word(text: str, at: int) -> bool:
    return 0 <= at < len(text) and (text[at].isalnum() or text[at] == "_")


def _sign_at(text: str, start: int) -> int | None:
    """Where the minus sign of the literal at ``start`` is, if one is written right
    before it after an operator, a comma or an opening parenthesis."""
    at = start - 1
    if at < 0 or text[at] != "-":
        return None
    before = at - 1
    while before >= 0 and text[before].isspace():
        before -= 1
    if before >= 0 and text[before] in _SIGN_AFTER:
        return at
    return None


_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)


def liftable(statement: st.Statement, placeholders: int, lifted: int) -> bool:
    """Whether ``statement`` (a template of :func:`lift`, with ``lifted`` values) has
    each of them once, as its ``placeholders`` (the highest ``$n`` it uses), where a
    literal and a parameter are alike (module docstring)."""
    if table_of(statement) is None:
        return False
    allowed: list[exp.Parameter] = []
    if isinstance(statement, st.Select | st.Update | st.Delete) and statement.where is not None:
        allowed += _compared_with_columns(statement.where)
    if isinstance(statement, st.Update):
        for _column, value in statement.sets:
            allowed += _set_values(value)
    if isinstance(statement, st.Insert):
        if statement.query is not None or len(statement.rows) != 1:
            return False
        allowed += [value for value in statement.rows[0] if isinstance(value, exp.Parameter)]
    found = parameters(statement)
    same = {id(node) for node in found} == {id(node) for node in allowed}
    return same and lifted == placeholders == len(found) == len(allowed)


def table_of(statement: st.Statement) -> st.TableName | None:
    """The one table a statement :func:`liftable` may take reads or writes (``None``:
    another statement, or one of several sources)."""
    if isinstance(statement, st.Select):
        alone = not (statement.joins or statement.subqueries or statement.ctes)
        return statement.table if alone and isinstance(statement.table, st.TableName) else None
    if isinstance(statement, st.Update | st.Delete):
        return None if statement.joins or statement.subqueries else statement.table
    if isinstance(statement, st.Insert):
        nested = statement.subqueries or statement.conflict_subqueries
        return None if nested else statement.table
    return None


def lifts_into(desc: TableDescriptor) -> bool:
    """Whether a template may run over table ``desc``: none of its columns is a JSONB
    or holds JSONB (module docstring)."""
    for column in desc.columns:
        ctype: ColumnType | None = column.type
        while ctype is not None:
            if ctype.kind is Kind.JSONB:
                return False
            ctype = ctype.element
    return True


def _compared_with_columns(where: exp.Expr) -> Iterator[exp.Parameter]:
    for node in where.find_all(exp.Parameter):
        parent = node.parent
        if isinstance(parent, _COMPARISONS):
            other = parent.expression if parent.this is node else parent.this
            if isinstance(other, exp.Column):
                yield node


def _set_values(value: exp.Expr) -> list[exp.Parameter]:
    if isinstance(value, exp.Parameter):
        return [value]
    if (
        isinstance(value, exp.Add | exp.Sub)
        and isinstance(value.this, exp.Column)
        and isinstance(value.expression, exp.Parameter)
    ):
        return [value.expression]
    return []


def lifted(
    text: str, prepare: Callable[[str], tuple[tuple[st.Statement, int], ...]]
) -> tuple[str, tuple[int, ...]] | None:
    """``text`` as a template and its values (:func:`lift`) when the template is one
    statement that :func:`liftable` takes (``prepare`` parses it, with its cache);
    else ``None``: run ``text`` as it is."""
    found = lift(text)
    if found is None or not _verdicts(found[0], len(found[1]), prepare):
        return None
    return found


def _verdict(
    template: str, values: int, prepare: Callable[[str], tuple[tuple[st.Statement, int], ...]]
) -> bool:
    try:
        prepared = prepare(template)
    except SQLError:
        return False  # NB: the text itself then fails as it would have
    return len(prepared) == 1 and liftable(*prepared[0], values)


# NB: a verdict is a bool; the template's parse is in prepare's own cache
_verdicts = StatementCache(_verdict, 4096, lambda _verdict: [])
