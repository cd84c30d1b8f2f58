"""``CREATE CHANGEFEED FOR DATABASE db``: every table of a database, as it changes.

A database changefeed's targets are not fixed when it is created: they are the tables
the database holds just after the timestamp the feed (re)starts from
(:func:`database_tables`), each with a topic of its own. Besides its tables' spans the
feed watches the catalog's descriptors; a descriptor written at ``T`` that adds a table
to the database or drops one of its tables (:func:`retargets`) restarts the feed from
``T``'s previous tick with the tables of the moment, so a new table joins at its
creation timestamp (with nothing to scan: it had no rows before) and a dropped one
leaves without ending the feed. NB: ranges deliver their values in no common order, so
the restart waits for a checkpoint at ``T``'s previous tick (every value before ``T``
has arrived and was emitted) and leaves values at or after ``T`` to the restarted feed.

The Spark runner (:mod:`feedkv.spark.changefeed_job`) keeps no table set of its own:
a batch ``(lo, hi]`` reads the tables the database held in its window
(:func:`window_tables`), each dropped one up to the tick before its drop, so the tables
of every batch follow from its offsets and the catalog's history. With a
``schema_topic`` :func:`first_change` ends a window one tick before each change, which
is announced between the two windows.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from feedkv.changefeed.rows import Target
from feedkv.sql import catalog
from feedkv.sql.catalog import descriptor_span
from feedkv.sql.descriptor import DatabaseDescriptor, TableDescriptor, decode_descriptor
from feedkv.util.hlc import Timestamp

if TYPE_CHECKING:
    from feedkv.changefeed.options import ChangefeedOptions
    from feedkv.rangefeed.feed_client import KV

__all__ = [
    "database_names",
    "database_tables",
    "first_change",
    "retargets",
    "topic_name",
    "window_tables",
]


def topic_name(database: str, table: str, options: ChangefeedOptions) -> str:
    """A table's topic: its name, or ``db.public.t`` with ``full_table_name``."""
    return f"{database}.public.{table}" if options.full_table_name else table


def database_tables(
    db: KV, database_id: int, options: ChangefeedOptions, ts: Timestamp
) -> tuple[tuple[Target, ...], dict[int, str]] | None:
    """The targets and topics of the tables database ``database_id`` holds at ``ts``
    (``None``: the database no longer exists)."""
    reader = catalog.Snapshot(db, ts)
    database = catalog.get_descriptor(reader, database_id)
    if not isinstance(database, DatabaseDescriptor):
        return None
    tables = catalog.list_tables(reader, database)
    targets = tuple(Target(t.id) for t in tables)
    return targets, {t.id: topic_name(database.name, t.name, options) for t in tables}


def database_names(db: KV) -> Callable[[int], str]:
    """The name of a database by its id, read from the catalog when first asked (as of
    then) and remembered: a renamed database keeps the name its first message showed,
    as a job keeps the names its targets had when it started (the enriched envelope's
    ``source.database_name``). ``""`` for a database that no longer exists."""
    names: dict[int, str] = {}

    def name_of(database_id: int) -> str:
        found = names.get(database_id)
        if found is None:
            database = catalog.get_descriptor(catalog.Snapshot(db, db.now()), database_id)
            found = database.name if isinstance(database, DatabaseDescriptor) else ""
            names[database_id] = found
        return found

    return name_of


def retargets(database_id: int, targets: tuple[Target, ...], value: bytes | None) -> bool:
    """Whether a descriptor written as ``value`` (``None``: deleted) adds a table to
    database ``database_id`` or removes one of the tables in ``targets``."""
    if value is None:
        return False  # a descriptor is deleted long after its table was dropped
    desc = decode_descriptor(value)
    if not isinstance(desc, TableDescriptor):
        return False
    return _retargets(database_id, {target.table_id for target in targets}, desc)


def _retargets(database_id: int, watched: Collection[int], desc: TableDescriptor) -> bool:
    return desc.database_id == database_id and (desc.id in watched) == desc.dropped


def first_change(
    db: KV,
    database_id: int | None,
    watched: Collection[int],
    lo: Timestamp,  # exclusive
    hi: Timestamp,
    *,
    every_version: bool,
) -> Timestamp | None:
    """The first time in ``(lo, hi]`` a descriptor was written that changes what a feed
    watching the tables ``watched`` must do: for a ``FOR DATABASE`` feed (``database_id``),
    a table added to the database or one of ``watched`` dropped (:func:`retargets`);
    with ``every_version``, any new version of one of ``watched`` (each is announced on
    a ``schema_topic``). ``None``: none was. Read as an incremental export of the
    descriptors, final for the window (it costs what the catalog changed in it)."""
    first: Timestamp | None = None
    for version in db.export(descriptor_span(), lo, hi):
        if version.value is None or (first is not None and version.ts >= first):
            continue
        desc = decode_descriptor(version.value)
        if not isinstance(desc, TableDescriptor):
            continue
        if (every_version and desc.id in watched) or (
            database_id is not None and _retargets(database_id, watched, desc)
        ):
            first = version.ts
    return first


def window_tables(
    db: KV, database_id: int, options: ChangefeedOptions, lo: Timestamp, hi: Timestamp
) -> tuple[tuple[Target, ...], dict[int, str], dict[int, Timestamp]] | None:
    """The tables database ``database_id`` held at any time in ``(lo, hi]``: those it
    holds at ``lo.next()`` and those created after, with their topics, and when each
    one dropped in the window was dropped (its changes are read up to the tick before).
    ``None``: the database does not exist at ``lo.next()``. The tables that joined are
    found by an incremental export of the descriptors (final for the window)."""
    found = database_tables(db, database_id, options, lo.next())
    if found is None:
        return None
    targets, topics = found
    topics = dict(topics)
    dropped: dict[int, Timestamp] = {}
    if hi > lo.next():
        database = catalog.get_descriptor(catalog.Snapshot(db, lo.next()), database_id)
        name = database.name if isinstance(database, DatabaseDescriptor) else ""
        joined: dict[int, tuple[Timestamp, str]] = {}
        for version in db.export(descriptor_span(), lo.next(), hi):
            desc = decode_descriptor(version.value) if version.value is not None else None
            if not isinstance(desc, TableDescriptor) or desc.database_id != database_id:
                continue
            if desc.dropped:
                dropped[desc.id] = min(version.ts, dropped.get(desc.id, version.ts))
            elif desc.id not in topics:
                first = joined.get(desc.id)
                if first is None or version.ts < first[0]:
                    joined[desc.id] = (version.ts, topic_name(name, desc.name, options))
        for table_id in sorted(joined):
            targets += (Target(table_id),)
            topics[table_id] = joined[table_id][1]
    return targets, topics, {t: ts for t, ts in dropped.items() if t in topics}
