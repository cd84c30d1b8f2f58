"""Named changefeeds: ``CREATE CHANGEFEED <name> FOR ...`` and the statements that
take the name where CockroachDB's take a job id.

A name belongs to a database (the session's current one, or ``db.name``) and is unique
there: its key (:func:`~feedkv.sql.catalog.changefeed_name_key`) holds the job id and
is written in the transaction that writes the job's record, so two sessions creating
the same name at once cannot both win. The record keeps the name too, for ``SHOW
CHANGEFEED JOBS`` and ``SHOW CREATE CHANGEFEED``. ``DROP CHANGEFEED`` frees the name
(:func:`forget`) when it cancels the job.

:func:`create_statement` is the statement that would create a changefeed as it is
now (after any ``ALTER CHANGEFEED``), secrets redacted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from feedkv.changefeed.create import changefeed_text, sql_literal
from feedkv.changefeed.jobs import JobRecord, table_names
from feedkv.changefeed.rows import Target
from feedkv.errors import SQLError
from feedkv.kv.txn import Txn
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.descriptor import DatabaseDescriptor, quote_name
from feedkv.sql.row_codec import index_prefix
from feedkv.util.encoding import decode_value, encode_value

if TYPE_CHECKING:
    from feedkv.sql.session import Session

__all__ = ["check_free", "claim", "create_statement", "forget", "lookup", "resolve"]


def lookup(reader: catalog.Reader, database_id: int, name: str) -> int | None:
    """The job id of the changefeed ``name`` in database ``database_id`` (``None``:
    there is none)."""
    raw = reader.get(catalog.changefeed_name_key(database_id, name))
    if raw is None:
        return None
    job_id, _end = decode_value(raw)
    if not isinstance(job_id, int):
        raise SQLError("XX000", f"the name record of changefeed {name!r} holds no job id")
    return job_id


def _database(session: Session, reader: catalog.Reader, name: st.TableName) -> DatabaseDescriptor:
    return session.resolve_database(reader, name.database or session.database)


def resolve(session: Session, reader: catalog.Reader, name: st.TableName) -> int:
    """The job id of the changefeed ``name`` names (42704 when there is none)."""
    database = _database(session, reader, name)
    job_id = lookup(reader, database.id, name.name)
    if job_id is None:
        raise SQLError(
            "42704",
            f"changefeed {name.name!r} does not exist in database {database.name!r} "
            "(SHOW CHANGEFEED JOBS lists the changefeeds and their names)",
        )
    return job_id


def check_free(session: Session, reader: catalog.Reader, name: st.TableName) -> DatabaseDescriptor:
    """The database ``name`` belongs to; 42710 when a changefeed there holds it."""
    database = _database(session, reader, name)
    taken = lookup(reader, database.id, name.name)
    if taken is not None:
        raise SQLError(
            "42710",
            f"changefeed {name.name!r} already exists in database {database.name!r} "
            f"(job {taken}); choose another name, or DROP CHANGEFEED {quote_name(name.name)}",
        )
    return database


def claim(txn: Txn, session: Session, name: st.TableName, job_id: int) -> tuple[int, str]:
    """Give ``name`` to job ``job_id`` in ``txn``: the database id and the name, for
    the job's record. 42710 when a changefeed of the database holds the name already."""
    database = check_free(session, txn, name)
    if len(name.name.encode("utf-8", "surrogatepass")) > catalog.MAX_NAME_BYTES:
        raise SQLError(
            "54000",
            f"the changefeed name {name.name[:20]!r}... is too long: a name has at most "
            f"{catalog.MAX_NAME_BYTES} bytes",
        )
    txn.put(catalog.changefeed_name_key(database.id, name.name), encode_value(job_id))
    return database.id, name.name


def forget(txn: Txn, record: JobRecord) -> None:
    """Free ``record``'s name, if it has one and still holds it."""
    if record.name is None or record.database_id is None:
        return
    if lookup(txn, record.database_id, record.name) == record.id:
        txn.delete(catalog.changefeed_name_key(record.database_id, record.name))


def _partition_of(
    reader: catalog.Reader, targets: tuple[Target, ...], index: int, done: set[int]
) -> str | None:
    """The partition of its table whose spans are exactly those of ``targets[index]``
    and of other targets of the table (and family) not yet written, which it adds to
    ``done``: ``FOR TABLE t PARTITION p`` made them, and a partition's spans may not be
    values (the end of a ``LIST`` value, ``MINVALUE``, the gaps of ``DEFAULT``)."""
    target = targets[index]
    desc = catalog.table_by_id(reader, target.table_id)
    if target.bounds is None or desc is None:
        return None
    alike = {
        other.bounds: at
        for at, other in enumerate(targets)
        if at not in done
        and other.bounds is not None
        and (other.table_id, other.family) == (target.table_id, target.family)
    }
    for partition in desc.partitions:
        if target.bounds in partition.spans and set(partition.spans) <= alike.keys():
            done.update(alike[span] for span in partition.spans)
            return partition.name
    return None


def _bounds_text(reader: catalog.Reader, target: Target) -> str:
    """`` VALUES FROM (...) TO (...)`` for a bounded target, read back from its keys."""
    desc = catalog.table_by_id(reader, target.table_id)
    if target.bounds is None or desc is None:
        return ""
    prefix = index_prefix(desc)
    tuples = []
    for key in target.bounds:
        values, pos = [], len(prefix)
        while pos < len(key):
            value, pos = decode_value(key, pos)
            values.append(_literal(value))
        tuples.append(", ".join(values))
    return f" VALUES FROM ({tuples[0]}) TO ({tuples[1]})"


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, bytes):
        return sql_literal("\\x" + value.hex())
    return sql_literal(str(value))


def create_statement(record: JobRecord, reader: catalog.Reader) -> str:
    """The ``CREATE CHANGEFEED`` statement that would make ``record``'s changefeed as it
    is now: its name, targets (by their current names), sink and options, every secret
    redacted. A cursor is written as the timestamp it stands for."""
    spec = record.spec
    targets_text = None
    if spec.database_id is not None:
        database = catalog.get_descriptor(reader, spec.database_id)
        shown = quote_name(database.name) if database is not None else f"[{spec.database_id}]"
        targets_text = f"DATABASE {shown}"
    elif spec.query is None:
        targets = []
        done: set[int] = set()  # targets written already, as a partition
        for index, target in enumerate(spec.targets):
            if index in done:
                continue
            names = table_names(reader, target.table_id)
            table = (
                f"{quote_name(names[0])}.public.{quote_name(names[1])}"
                if names is not None
                else f"[{target.table_id}]"
            )
            family = f" FAMILY {quote_name(target.family)}" if target.family else ""
            partition = _partition_of(reader, spec.targets, index, done)
            if partition is not None:
                targets.append(f"TABLE {table}{family} PARTITION {quote_name(partition)}")
            else:
                targets.append(f"TABLE {table}{family}{_bounds_text(reader, target)}")
        targets_text = ", ".join(targets)
    given = spec.options.given
    if spec.options.cursor is not None:
        cursor = str(spec.options.cursor)
        given = tuple((n, cursor if n == "cursor" else v) for n, v in given)
    return changefeed_text(record.name, targets_text, spec.sink_uri, given, spec.query)
