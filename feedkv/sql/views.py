"""Views: a named query, stored as the text it was written in, read as a table.

A view's query runs anew each time a statement reads the view, in that statement's
transaction (a view holds no rows). Its table names resolve in the view's database,
not the reading session's: :func:`view_query` parses the stored text once and
qualifies every table name the query reads (not the names of its CTEs). The tables
and views it reads are recorded as its dependencies when it is created
(:func:`tables_read`); while it stands they cannot be dropped (without CASCADE) or
renamed, since its text names them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql import statements as st
from feedkv.sql.parser import parse
from feedkv.sql.statement_cache import StatementCache

__all__ = ["indexes_read", "qualified", "tables_read", "view_query", "writes_in"]


def _view_query(text: str, database: str) -> st.Query:
    """The query of a view stored as ``text`` in ``database``, its table names
    qualified. Cached: the same statement object comes back for the same text, so a
    session's plans for it are kept (they are keyed by the statement)."""
    statements = parse(text)
    if len(statements) != 1 or not isinstance(statements[0], st.Query):
        raise SQLError("42601", f"a view's text is not one query: {text[:60]!r}")
    return qualified(statements[0], database)


# NB: a query dropped from the cache is unlinked (feedkv.sql.statement_cache), leaving no
# tree to the cyclic GC
view_query = StatementCache(_view_query, 256, lambda query: [query])


def qualified(query: st.Query, database: str) -> st.Query:
    """``query`` with each unqualified table name it reads (not a CTE's) in
    ``database``."""
    result: st.Query = _walk(query, frozenset(), lambda name: _qualify(name, database))
    return result


def tables_read(query: st.Query) -> list[st.TableName]:
    """The names of the tables and views ``query`` reads (its CTEs' names left out),
    each once, in the order written."""
    found: list[st.TableName] = []

    def note(name: st.TableName) -> st.TableName:
        if name not in found:
            found.append(name)
        return name

    _walk(query, frozenset(), note)
    return found


def indexes_read(query: st.Query) -> list[tuple[st.TableName, str]]:
    """The indexes ``query`` names (``t@i``, ``t@{FORCE_INDEX=i}``), each with its
    table's name as written, in the order written."""
    return [
        (value.table, value.index)
        for value in _parts(query)
        if isinstance(value, st.Select | st.Join)
        and isinstance(value.table, st.TableName)
        and value.index is not None
    ]


def writes_in(query: st.Query) -> list[str]:
    """The writes ``query`` reads the rows of (``FROM [INSERT ... RETURNING ...]``), by
    their verbs (INSERT, UPSERT, UPDATE, DELETE), in the order written."""
    found: list[str] = []
    for value in _parts(query):
        if isinstance(value, st.StatementSource):
            inner = value.statement
            if isinstance(inner, st.Insert):
                found.append("UPSERT" if inner.upsert else "INSERT")
            elif isinstance(inner, st.Update | st.Delete):
                found.append(type(inner).__name__.upper())
    return found


def _parts(value: Any) -> Iterator[Any]:
    """``value`` and what it holds, in the order written, down through its queries
    (their sources, joins, CTEs and set operations; a statement source's statement is
    not gone into)."""
    yield value
    if isinstance(value, tuple):
        for item in value:
            yield from _parts(item)
    elif isinstance(value, st.Cte):
        yield from _parts(value.query)
    elif isinstance(value, st.Select | st.SetOperation | st.Values | st.Derived | st.Join):
        for f in dataclasses.fields(value):
            yield from _parts(getattr(value, f.name))


def _qualify(name: st.TableName, database: str) -> st.TableName:
    return name if name.database is not None else st.TableName(name.name, database)


def _walk(value: Any, ctes: frozenset[str], visit: Any) -> Any:
    """``value`` with ``visit`` applied to each table name read in it; ``ctes`` are
    the CTE names in scope (a name among them, unqualified, reads no table)."""
    if isinstance(value, st.TableName):
        return value if value.database is None and value.name in ctes else visit(value)
    if isinstance(value, tuple):
        return tuple(_walk(item, ctes, visit) for item in value)
    if isinstance(value, st.Cte):
        scope = ctes | {value.name} if value.recursive else ctes
        return dataclasses.replace(value, query=_walk(value.query, scope, visit))
    if isinstance(value, st.Select | st.SetOperation | st.Values | st.Derived | st.Join):
        inner = ctes | {cte.name for cte in getattr(value, "ctes", ())}
        changes = {
            f.name: _walk(getattr(value, f.name), inner, visit)
            for f in dataclasses.fields(value)
            if f.name not in ("text", "ctes")
        }
        if getattr(value, "ctes", ()):
            # NB: a CTE sees the ones before it, not after
            seen: set[str] = set(ctes)
            walked = []
            for cte in value.ctes:  # type: ignore[union-attr]
                walked.append(_walk(cte, frozenset(seen), visit))
                seen.add(cte.name)
            changes["ctes"] = tuple(walked)
        return dataclasses.replace(value, **changes)
    return value  # an expression, a string, None: no table read
