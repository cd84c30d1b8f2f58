"""``COMMENT ON DATABASE | TABLE | COLUMN | INDEX ... IS 'text'``, and where comments are
read back, as CockroachDB's: ``SHOW COLUMNS | INDEXES ... WITH COMMENT``, ``SHOW CREATE
TABLE`` (a ``COMMENT ON`` statement after the ``CREATE TABLE``), and PostgreSQL's
``obj_description``, ``col_description`` and ``shobj_description``
(:mod:`feedkv.pgwire.catalog`).

A comment is a record of its own in the catalog, as CockroachDB's ``system.comments``
rows: the object's id (a database's or a table's), the kind of thing commented on
(``database``, ``table``, ``column``, ``index``) and a sub id (the column's id, the
index's; 0 for a database or a table). ``IS NULL`` (or ``IS ''``) removes one. Ids never
change, so a comment follows its column or index through renames and ``TRUNCATE``;
dropping the table (or the column, or the index) drops its comments.
"""

from __future__ import annotations

from typing import Literal

from feedkv.errors import SQLError
from feedkv.kv.txn import Txn
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.descriptor import PRIMARY_INDEX_ID, TableDescriptor, quote_name
from feedkv.sql.execution import Execution, Result

__all__ = [
    "comment",
    "comment_on",
    "comment_statements",
    "forget",
    "index_comment",
    "list_comments",
]

Kind = Literal["database", "table", "column", "index"]


def comment(reader: catalog.Reader, object_id: int, kind: Kind, sub_id: int = 0) -> str | None:
    """The comment on ``object_id`` (``kind`` ``database`` or ``table``), or on its
    column or index ``sub_id``; ``None`` if it has none."""
    raw = reader.get(catalog.comment_key(object_id, kind, sub_id))
    return raw.decode() if raw is not None else None


def list_comments(reader: catalog.Reader) -> list[tuple[int, str, int, str]]:
    """Every comment: ``(object id, kind, sub id, text)``."""
    span = catalog.comment_span()
    return [
        (*catalog.comment_of_key(kv.key), kv.value.decode())
        for kv in reader.scan(span.start, span.end)
    ]


def index_comment(reader: catalog.Reader, desc: TableDescriptor, name: str) -> str | None:
    """The comment on index ``name`` of ``desc`` (its primary key's too)."""
    index_id = _index_id(desc, name)
    return comment(reader, desc.id, "index", index_id) if index_id is not None else None


def forget(txn: Txn, object_id: int, kind: Kind | None = None, sub_id: int = 0) -> None:
    """Drop the comments on ``object_id`` and on its columns and indexes (``kind``
    given: the one comment on its column or index ``sub_id``)."""
    if kind is not None:
        txn.delete(catalog.comment_key(object_id, kind, sub_id))
        return
    span = catalog.comment_span(object_id)
    txn.delete_range(span.start, span.end)


def comment_statements(reader: catalog.Reader, desc: TableDescriptor, qualified: str) -> list[str]:
    """The ``COMMENT ON`` statements that give ``desc`` (named ``qualified``) its
    comments, as SHOW CREATE TABLE writes them after the table: the table's, then its
    columns' (in their order), then its indexes'."""
    out: list[str] = []
    text = comment(reader, desc.id, "table")
    if text is not None:
        out.append(f"COMMENT ON TABLE {qualified} IS {_literal(text)}")
    for column in desc.columns:
        text = comment(reader, desc.id, "column", column.id)
        if text is not None and not column.adding:
            name = f"{qualified}.{quote_name(column.name)}"
            out.append(f"COMMENT ON COLUMN {name} IS {_literal(text)}")
    names = [f"{desc.name}_pkey", *(index.name for index in desc.indexes)]
    for name in names:
        text = index_comment(reader, desc, name)
        if text is not None:
            out.append(f"COMMENT ON INDEX {qualified}@{quote_name(name)} IS {_literal(text)}")
    return out


def comment_on(ex: Execution, s: st.CommentOn) -> Result:
    """Set (or, with ``IS NULL``, remove) a comment. It needs CREATE on the table, or
    the admin role for a database's, as CockroachDB's (CREATE on the database)."""
    text = s.comment or None  # NB: as PostgreSQL, '' removes the comment
    if s.kind == "database":
        ex.require_admin("COMMENT ON DATABASE")
        key = catalog.comment_key(ex.database(s.database).id, "database", 0)
    elif s.kind == "index":
        desc, index_id = _find_index(ex, s)
        key = catalog.comment_key(desc.id, "index", index_id)
    else:
        if s.table is None:
            raise SQLError("42601", f"COMMENT ON {s.kind.upper()} needs a table")
        desc = ex.table(s.table, "CREATE")
        sub_id = 0
        if s.kind == "column":
            # NB: not an adding or an inaccessible column, which no statement can name
            column = desc.find_column(s.name or "")
            if column is None:
                raise SQLError("42703", f'column "{s.name}" does not exist')
            sub_id = column.id
        key = catalog.comment_key(desc.id, s.kind, sub_id)
    if text is None:
        ex.write_txn.delete(key)
    else:
        ex.write_txn.put(key, text.encode())
    return Result(tag=f"COMMENT ON {s.kind.upper()}")


def _find_index(ex: Execution, s: st.CommentOn) -> tuple[TableDescriptor, int]:
    """The table and index id of ``COMMENT ON INDEX [t@]name``: without a table, the
    index is looked up by name among the current database's tables."""
    name = s.name or ""
    if s.table is not None:
        candidates = [ex.table(s.table, "CREATE")]
    else:
        candidates = catalog.list_tables(ex.read_source, ex.database(None))
    found = [(d, i) for d in candidates if (i := _index_id(d, name)) is not None]
    if not found:
        raise SQLError("42704", f'index "{name}" does not exist')
    if len(found) > 1:
        tables = ", ".join(f"{d.name}@{name}" for d, _ in found)
        raise SQLError("42P09", f'index name "{name}" is ambiguous (found {tables})')
    desc, index_id = found[0]
    if s.table is None:
        ex.table(st.TableName(desc.name), "CREATE")  # the privilege check
    return desc, index_id


def _index_id(desc: TableDescriptor, name: str) -> int | None:
    if name == f"{desc.name}_pkey":
        return PRIMARY_INDEX_ID
    index = desc.index(name)
    return index.id if index is not None else None


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
