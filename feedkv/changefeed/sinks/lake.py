"""``delta:///dir`` and ``iceberg://<catalog>/<namespace>``: changefeeds into lake tables.

One lake table per source table (per topic): a Delta table in ``<dir>/<topic>``, or
the Iceberg table ``<namespace>.<topic>`` of a pyiceberg catalog (SQL, REST, or one of
pyiceberg's configuration: :class:`~feedkv.changefeed.sinks.iceberg.IcebergPlace`). Rows arrive as
Parquet rows (:class:`~feedkv.changefeed.file_formats.ParquetRows`; the sink's
default ``format``) and wait in the sink until their window of the resolved frontier
is committed (:meth:`LakeSink.commit_window`, which the changefeed calls where other
sinks are flushed; rows the feed delivered above the window's end wait for their own
window): a window ``(r_prev, r_next]`` holds whole transactions and no row
of it will come again, so each lake table takes it as **one commit** (a Delta commit,
one Iceberg table commit) recording ``r_next`` under ``feedkv.resolved`` (the Delta
commit's custom metadata; the Iceberg snapshot summary and table property).

``lake_mode``:

- ``mirror`` (the default): the table equals its source table as of each recorded
  timestamp. The window is reduced to the last change of each primary key and applied
  by key (a Delta MERGE; an Iceberg delete of the changed keys and an append, in one
  transaction: one table commit, whose copy-on-write makes a delete or overwrite
  snapshot and an append snapshot, each recording ``feedkv.resolved``).
- ``changelog``: every change is appended with Delta's Change Data Feed columns:
  ``_change_type`` (``insert``, ``update_preimage`` and ``update_postimage``, or
  ``delete``: its names and rows; the sink turns ``diff`` on, which tells an update from
  an insert and gives the row before it), ``_commit_version`` (the change's MVCC wall
  time in nanoseconds: a long that orders a key's changes as Delta's table versions do,
  as the Spark source's ``changelog_columns=delta`` gives it) and ``_commit_timestamp``
  (that time, in microseconds, UTC); then ``_feedkv_updated`` and
  ``_feedkv_mvcc_timestamp`` (HLC timestamps as decimal strings, as CockroachDB's
  ``updated``, which order changes of one nanosecond too). A deletion carries the
  deleted row (its key columns only when ``diff`` was turned off).

**Exactly-once.** A table's last recorded ``feedkv.resolved`` says which rows it holds:
every row at or below it. A window committed again (a changefeed restarted from its
high-water mark after a crash, a Spark batch replayed) writes only its rows above it;
a window at or below it writes nothing. A window with no rows for a table commits
nothing to that table (idle tables get no empty commits).

**Consistent across tables.** After every table took a window, the sink records the
window's end and the version (Delta) or snapshot id (Iceberg) of every table at it in a
marker: ``<dir>/_feedkv_resolved`` (JSON, replaced atomically), or the namespace
property ``feedkv.resolved`` of an Iceberg namespace. A table's version at a timestamp
is the last commit recording one at or below it (not always its newest: after a crash
between two tables' commits, a table may hold a later window than the restart's
first). :func:`read_consistent` returns the marker: reading each table at its version
shows every table as of the same timestamp. A crash between two tables' commits leaves
the marker at the window before, so a reader never sees half a window; the restart
commits the window again, which completes the tables that missed it and writes nothing
into the others. A table missing from the marker had no rows yet at its timestamp.

**Schema changes** arrive as rows of the table's new descriptor version, at the change
(``schema_change_policy='backfill'`` rewrites every row there): ADD COLUMN adds the
column to the lake table (old rows read it as NULL). DROP COLUMN removes it from the
table's newest version, in both formats, and older versions keep it (a read at an
earlier marker, or time travel, shows it): an Iceberg table drops it from its schema (a
change of metadata alone); a Delta table is rewritten without it by the window's
commit, one overwrite that replaces the schema (delta-rs has no metadata-only drop:
:meth:`~feedkv.changefeed.sinks.delta.DeltaTables._rewrite`). In changelog mode
the earlier change rows stay, without the column. Under ``nobackfill`` rows not
rewritten keep their old values, and a table with no rows in the window of the change
takes it with its next window that has some; ``stop`` ends the changefeed before the
change, as for every sink.

**On Spark** tasks stage their rows as Parquet files under ``_feedkv_staging`` (in the
Delta directory or bucket prefix, or the Iceberg catalog's warehouse: a local directory,
or an object store such as a REST catalog's ``s3://`` warehouse; a temporary directory
only when the catalog names no warehouse location); the driver's commit of the batch (a
window) reads them back and commits the window as above, then deletes them.

One changefeed per Delta directory or Iceberg namespace: tables another changefeed
wrote would be taken as already holding rows up to their recorded timestamp. The thread
runner holds a window's rows (an initial scan's: the whole table) in memory up to a
budget and past it in Parquet files on local disk
(:mod:`~feedkv.changefeed.sinks.lake_spill`); the commit reads them back.

**Where.** ``delta:///dir`` (a local directory), ``delta+s3://bucket/prefix`` (the same
tables in S3, with the ``s3://`` file sink's ``AWS_*`` parameters) and
``iceberg://catalog/namespace`` (a pyiceberg catalog).
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from feedkv.changefeed.file_formats import PARQUET_META, ROWS_KEY, ROWS_VERSION, ParquetRows
from feedkv.changefeed.options import ChangefeedOptions, option_error
from feedkv.changefeed.rows import RowEvent
from feedkv.changefeed.sink import Message, RowBlock, SinkError, SinkURI, TerminalSinkError
from feedkv.changefeed.sinks.cloud_storage import BlobStore, LocalBlobs
from feedkv.changefeed.sinks.lake_spill import DEFAULT_MEMORY_LIMIT, SpilledRows
from feedkv.changefeed.sinks.lake_tables import (
    DEFAULT_HISTORY,
    STAGING,
    LakeHistoryError,
    LakeTables,
    Marker,
    TableChange,
    marker_at,
    sink_error,
)
from feedkv.errors import SQLError
from feedkv.util.hlc import Timestamp

__all__ = [
    "CHANGE_COLUMNS",
    "STAGING",
    "LakeSink",
    "check",
    "defaults",
    "lake_tables",
    "make",
    "read_consistent",
    "read_tables",
    "stage",
]

CHANGE_COLUMNS = (
    "_change_type",
    "_commit_version",
    "_commit_timestamp",
    "_feedkv_updated",
    "_feedkv_mvcc_timestamp",
)
_CHANGE_TYPES = {
    "c": "insert",
    "b": "update_preimage",
    "u": "update_postimage",
    "d": "delete",
}
_CHANGE_TYPE_CODES = pa.array(list(_CHANGE_TYPES), pa.string())
_CHANGE_TYPE_NAMES = pa.array(list(_CHANGE_TYPES.values()), pa.string())
_EVENT_TYPE, _UPDATED, _MVCC = PARQUET_META
_SEAL_ROWS = 65_536  # rows gathered as Python values before they become Arrow columns


class LakeSink:
    """A :class:`~feedkv.changefeed.sink.WindowSink` into lake tables (see the module
    docstring). Rows are held until their window is committed, in memory up to
    ``memory_limit`` bytes and past it on local disk
    (:class:`~feedkv.changefeed.sinks.lake_spill.SpilledRows`); ``flush`` has no window
    to commit them in and does nothing (the changefeed commits windows)."""

    def __init__(
        self, tables: LakeTables, mode: str, *, memory_limit: int = DEFAULT_MEMORY_LIMIT
    ) -> None:
        self._tables = tables
        self._mode = mode
        self._pending = SpilledRows(memory_limit)
        self._open: dict[str, ParquetRows] = {}
        self._applied: dict[str, Timestamp | None] = {}  # each table's last resolved, read once
        self._closed = False

    # Sink.

    def emit_row(self, message: Message) -> None:
        if self._closed:
            raise SinkError("the sink is closed")
        row, topic = message.row, message.topic
        if isinstance(row, RowBlock):
            self._seal(topic)
            self._pending.add(topic, row.batch)
            return
        if not isinstance(row, RowEvent):
            raise TerminalSinkError("a lake sink takes rows (format=parquet), not encoded messages")
        rows = self._open.get(topic)
        if rows is not None and not rows.holds(row.table, row.columns):
            self._seal(topic)
            rows = None
        if rows is None:
            images = self._mode == "changelog"
            rows = self._open[topic] = ParquetRows(row.table, row.columns, images=images)
        rows.add_event(row)
        if len(rows) >= _SEAL_ROWS:  # NB: as Arrow columns they take a fraction of the memory
            self._seal(topic)

    def emit_batches(self, batches: Iterable[tuple[str, pa.RecordBatch]]) -> None:
        """Take rows as Parquet rows' record batches, by topic (staged by Spark tasks)."""
        for topic, batch in batches:
            self.emit_row(Message(topic, b"", None, Timestamp(0), Timestamp(0), 0, RowBlock(batch)))

    def flush(self) -> None:
        if self._closed:
            raise SinkError("the sink is closed")

    def emit_resolved(self, ts: Timestamp, topics: Iterable[str]) -> None:
        """Nothing to write: :meth:`commit_window` recorded ``ts`` in every table and
        in the marker."""

    def commit_window(
        self,
        resolved: Timestamp,
        topics: Iterable[str] = (),
        *,
        batch: tuple[int, int] | None = None,
    ) -> None:
        """Commit every row taken as the window ending at ``resolved``: one commit per
        table with rows above its recorded timestamp, then the marker (see the module
        docstring). Idempotent per window; raises :class:`SinkError`. ``batch`` is a
        Spark job's ``(job id, batch id)``, recorded beside the window."""
        if self._closed:
            raise SinkError("the sink is closed")
        for topic in list(self._open):
            self._seal(topic)
        pending: dict[str, list[pa.RecordBatch]] = {}
        for topic, batches in self._pending.take().items():
            for rows in batches:
                due, after = _split(rows, resolved)
                if due.num_rows:
                    pending.setdefault(topic, []).append(due)
                if after.num_rows:
                    self._pending.add(topic, after)
        try:
            for table in sorted(pending):
                change = self._change(table, resolved, pending[table])
                if change is not None:
                    self._tables.commit(dataclasses.replace(change, batch=batch))
                self._applied[table] = max(resolved, self._applied.get(table) or resolved)
            marker = self._tables.marker()
            if marker is not None and marker.resolved >= resolved:
                return  # a window committed again: the marker is there already
            names = set(topics) | set(pending) | set(marker.versions if marker else ())
            versions = {}
            for name in sorted(names):
                version = self._tables.version_at(name, resolved)
                if version is not None:
                    versions[name] = version
            self._tables.write_marker(Marker(resolved, versions))
        except SinkError:
            self._applied.clear()  # read again: the failed commit may have landed
            raise

    def reset(self) -> None:
        self._pending.clear()
        self._open.clear()
        self._applied.clear()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.reset()
        self._pending.close()
        self._tables.close()

    # Windows.

    def _seal(self, topic: str) -> None:
        rows = self._open.pop(topic, None)
        if rows is not None and len(rows):
            self._pending.add(topic, rows.take())

    def _last_applied(self, table: str) -> Timestamp | None:
        if table not in self._applied:
            self._applied[table] = self._tables.last_resolved(table)
        return self._applied[table]

    def _change(
        self, table: str, resolved: Timestamp, batches: list[pa.RecordBatch]
    ) -> TableChange | None:
        """The commit of ``batches`` into ``table``: only their rows above what it
        holds; ``None`` when there are none. NB: column-wise (Arrow compute), not row by
        row: a window may hold hundreds of thousands of rows, and a Python loop over them
        cost more than the lake commit itself."""
        applied = self._last_applied(table)
        if applied is not None and resolved <= applied:
            return None
        newest = max(
            batches, key=lambda b: int((b.schema.metadata or {}).get(ROWS_VERSION.encode(), 0))
        )
        metadata = newest.schema.metadata or {}
        key = tuple(json.loads(metadata.get(ROWS_KEY.encode(), b"[]")))
        if not key:
            raise TerminalSinkError(f"the rows of {table} name no primary key")
        names = [n for n in newest.schema.names if n not in PARQUET_META]
        columns = pa.schema([newest.schema.field(n) for n in names])
        frame = pa.concat_tables(
            [pa.Table.from_batches([b]) for b in batches], promote_options="permissive"
        )
        for name in names:  # NB: older versions' batches lack a column added since
            if name not in frame.column_names:
                frame = frame.append_column(name, pa.nulls(len(frame), columns.field(name).type))
        wall, logical = hlc_columns(frame.column(_UPDATED))
        if applied is not None:
            frame, wall, logical = _filtered(
                frame, wall, logical, pc.invert(_at_or_below(wall, logical, applied))
            )
        if not len(frame):
            return None
        # NB: a stable sort: an update's row before it stays ahead of the row after it
        order = pc.sort_indices(
            pa.table({"w": wall, "l": logical}), [("w", "ascending"), ("l", "ascending")]
        )
        frame = frame.take(order)
        wall, logical = pc.take(wall, order), pc.take(logical, order)  # NB: in the rows' order
        kinds = frame.column(_EVENT_TYPE)
        if self._mode == "changelog":
            changes = frame.select(names).replace_schema_metadata(None)
            change_types = pc.take(_CHANGE_TYPE_NAMES, pc.index_in(kinds, _CHANGE_TYPE_CODES))
            changes = changes.append_column("_change_type", change_types.cast(pa.string()))
            # NB: as the Spark source's Delta CDF columns (feedkv.spark.rows): a Delta
            # reader makes _commit_version from the log, which an Iceberg table has not
            changes = changes.append_column("_commit_version", wall)
            commit_us = pc.divide(wall, 1000).cast(pa.timestamp("us", tz="UTC"))
            changes = changes.append_column("_commit_timestamp", commit_us)
            changes = changes.append_column("_feedkv_updated", frame.column(_UPDATED))
            changes = changes.append_column("_feedkv_mvcc_timestamp", frame.column(_MVCC))
            return TableChange(table, resolved, key, columns, changes=changes)
        # NB: a row before an update (changelog rows only) is no change of the row
        frame = frame.filter(pc.not_equal(kinds, "b"))
        last = frame.take(_last_of_each_key(frame, key))
        deleted = pc.equal(last.column(_EVENT_TYPE), "d")
        return TableChange(
            table,
            resolved,
            key,
            columns,
            upserts=last.filter(pc.invert(deleted)).select(names).replace_schema_metadata(None),
            deletes=last.filter(deleted).select(list(key)).replace_schema_metadata(None),
        )


def hlc_columns(texts: pa.ChunkedArray | pa.Array) -> tuple[pa.Array, pa.Array]:
    """HLC timestamps written as ``str(Timestamp)`` as two int64 columns (wall,
    logical), which compare and sort as the timestamps do. Raises
    :class:`TerminalSinkError` on a value that is not one."""
    try:
        parts = pc.split_pattern(texts, ".", max_splits=1)
        wall = pc.cast(pc.list_element(parts, 0), pa.int64())
        logical = pc.cast(pc.fill_null(pc.list_element(parts, 1), "0"), pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise TerminalSinkError(f"rows with a malformed {_UPDATED} timestamp: {exc}") from exc
    if wall.null_count:
        raise TerminalSinkError(f"rows without an {_UPDATED} timestamp")
    return wall, logical


def _at_or_below(wall: pa.Array, logical: pa.Array, ts: Timestamp) -> pa.Array:
    """Which timestamps (as :func:`hlc_columns` gives them) are at or below ``ts``."""
    return pc.or_(
        pc.less(wall, ts.wall),
        pc.and_(pc.equal(wall, ts.wall), pc.less_equal(logical, ts.logical)),
    )


def _filtered(
    frame: pa.Table, wall: pa.Array, logical: pa.Array, keep: pa.Array
) -> tuple[pa.Table, pa.Array, pa.Array]:
    return frame.filter(keep), wall.filter(keep), logical.filter(keep)


def _last_of_each_key(frame: pa.Table, key: tuple[str, ...]) -> pa.Array:
    """The positions of each key's last row in ``frame`` (rows in timestamp order)."""
    position = "_feedkv_position"
    numbered = frame.select(list(key)).append_column(
        position, pa.array(range(len(frame)), pa.int64())
    )
    try:
        last = numbered.group_by(list(key), use_threads=False).aggregate([(position, "max")])
        return last.column(f"{position}_max")
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        # NB: a key type Arrow cannot group by: by Python values
        by_key: dict[tuple[Any, ...], int] = {}
        values = zip(*(frame.column(k).to_pylist() for k in key), strict=True)
        for i, value in enumerate(values):
            by_key[value] = i
        return pa.array(sorted(by_key.values()), pa.int64())


def _split(batch: pa.RecordBatch, resolved: Timestamp) -> tuple[pa.RecordBatch, pa.RecordBatch]:
    """``batch``'s rows at or below ``resolved``, and those above it.

    NB: a changefeed emits a value as soon as the feed delivers it, before a checkpoint
    covers it, so a window's commit finds rows of the next windows in the sink: they
    wait for their own window (committed now, they would be above the timestamp the
    commit records, and a restart from it would write them again)."""
    due = _at_or_below(*hlc_columns(batch.column(_UPDATED)), resolved)
    if pc.all(due).as_py():
        return batch, batch.slice(0, 0)
    return batch.filter(due), batch.filter(pc.invert(due))


# Spark tasks' staging.


def staging(uri: SinkURI) -> BlobStore:
    """Where Spark tasks stage rows for ``uri``'s sink: ``_feedkv_staging`` beside the
    tables (in the bucket, for ``delta+s3://``; in the catalog's warehouse for an
    Iceberg catalog: :func:`~feedkv.changefeed.sinks.iceberg.staging_blobs`)."""
    if uri.scheme == "delta+s3":
        from feedkv.changefeed.sinks.s3 import S3Blobs

        return S3Blobs(dataclasses.replace(uri, path=f"{uri.path.rstrip('/')}/{STAGING}"))
    if uri.scheme == "delta":
        return LocalBlobs(os.path.join(_delta_root(uri), STAGING))
    from feedkv.changefeed.sinks.iceberg import IcebergPlace, staging_blobs

    return staging_blobs(IcebergPlace.of(uri))


def stage(uri: SinkURI, job_id: int, batches: Iterable[tuple[str, pa.RecordBatch]]) -> list[str]:
    """Write a task's rows as Parquet files (one per topic and schema) under the job's
    folder of :func:`staging`; their names, for the driver's commit
    (:func:`read_staged`). Raises :class:`SinkError`."""
    token = secrets.token_hex(8)
    grouped: dict[tuple[str, pa.Schema], list[pa.RecordBatch]] = {}
    for topic, batch in batches:
        grouped.setdefault((topic, batch.schema), []).append(batch)
    names = []
    blobs = staging(uri)
    try:
        for n, ((topic, schema), group) in enumerate(grouped.items()):
            table = pa.Table.from_batches(group, schema=schema)
            table = table.replace_schema_metadata(
                {**(schema.metadata or {}), b"feedkv.topic": topic}
            )
            out = pa.BufferOutputStream()
            pq.write_table(table, out)
            name = f"{job_id}/{token}-{n:04d}.parquet"
            blobs.put(name, out.getvalue().to_pybytes())
            names.append(name)
    finally:
        blobs.close()
    return names


def read_staged(uri: SinkURI, names: Iterable[str]) -> Iterator[tuple[str, pa.RecordBatch]]:
    """The rows :func:`stage` wrote, by topic. Raises :class:`SinkError` when one is
    gone (a batch's files are only removed after its commit)."""
    blobs = staging(uri)
    try:
        for name in names:
            data = blobs.get(name)
            if data is None:
                raise SinkError(f"the staged rows {name} of {uri.scheme}:// are gone")
            table = pq.read_table(pa.BufferReader(data))
            metadata = table.schema.metadata or {}
            topic = metadata[b"feedkv.topic"].decode()
            kept = {k: v for k, v in metadata.items() if k != b"feedkv.topic"}
            for batch in table.replace_schema_metadata(kept).to_batches():
                yield topic, batch
    finally:
        blobs.close()


def remove_staged(uri: SinkURI, names: Iterable[str]) -> None:
    names = list(names)
    if not names:
        return
    blobs = staging(uri)
    try:
        for name in names:
            blobs.delete(name)
    finally:
        blobs.close()


# The registry's hooks.


def defaults(options: ChangefeedOptions) -> ChangefeedOptions:
    """Lake sinks take rows (``format=parquet`` unless another format is given, which
    the registry refuses), and ``changelog`` needs ``diff`` to tell an update from an
    insert. The defaults join the options as given, so a job's options, parsed again
    from what was given, keep them."""
    given = {name for name, _value in options.given}
    added: list[tuple[str, str | None]] = []
    changes: dict[str, Any] = {}
    if "format" not in given:
        added.append(("format", "parquet"))
        changes["format"] = "parquet"
    if options.lake_mode == "changelog" and "diff" not in given:
        added.append(("diff", None))
        changes["diff"] = True
    if not added:
        return options
    return dataclasses.replace(options, **changes, given=options.given + tuple(added))


def make(uri: SinkURI, options: ChangefeedOptions, **_: Any) -> LakeSink:
    return LakeSink(lake_tables(uri), options.lake_mode)


def check(uri: SinkURI, options: ChangefeedOptions, **_: Any) -> None:
    """Reach the sink's tables' place (read its marker, which opens an Iceberg catalog
    and creates the namespace; write a probe into a Delta directory or bucket) when a
    changefeed is created: a path that cannot hold tables or a catalog that cannot be
    opened is refused now (SQLSTATE 22023; 08000 for one that is only unreachable now)."""
    tables = lake_tables(uri)
    try:
        if uri.scheme == "delta+s3":
            _probe_bucket(uri)
        if uri.scheme == "delta":
            probe = os.path.join(_delta_root(uri), f".feedkv-probe-{secrets.token_hex(8)}")
            try:
                with open(probe, "wb"):
                    pass
                os.remove(probe)
            except OSError as exc:
                raise option_error(
                    f"the delta:// sink cannot use {_delta_root(uri)!r}: {exc.strerror}; "
                    "the path must be a directory this node can write to"
                ) from None
        tables.marker()
    except TerminalSinkError as exc:
        raise option_error(f"the {uri.scheme}:// sink cannot be used: {exc}") from None
    except SinkError as exc:
        raise SQLError("08000", f"the {uri.scheme}:// sink cannot be reached: {exc}") from None
    finally:
        tables.close()


def lake_tables(uri: SinkURI) -> LakeTables:
    """The tables a ``delta://``, ``delta+s3://`` or ``iceberg://`` URI names (raising
    SQLError 22023 on a URI that names none)."""
    history = _history(uri)
    if uri.scheme == "delta":
        from feedkv.changefeed.sinks.delta import DeltaTables

        return DeltaTables(_delta_root(uri), history=history)
    if uri.scheme == "delta+s3":
        from feedkv.changefeed.sinks.delta import DeltaTables
        from feedkv.changefeed.sinks.s3 import S3Blobs

        root = f"s3://{uri.host}/{uri.path.strip('/')}".rstrip("/")
        return DeltaTables(root, objects=S3Blobs(uri), storage=_s3_storage(uri), history=history)
    from feedkv.changefeed.sinks.iceberg import IcebergPlace, IcebergTables

    return IcebergTables(IcebergPlace.of(uri), history=history)


def _history(uri: SinkURI) -> int:
    """``marker_history=<n>``: how many markers the tables retain (at least 1)."""
    text = uri.param("marker_history")
    if text is None:
        return DEFAULT_HISTORY
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise option_error(
            f"sink parameter marker_history={text!r} must be a whole number of markers to "
            f"retain, at least 1 (default {DEFAULT_HISTORY})"
        )
    return int(text)


def _s3_storage(uri: SinkURI) -> dict[str, str]:
    """delta-rs' storage options for a ``delta+s3://`` URI: the keys and endpoint of its
    parameters (as the ``s3://`` file sink takes them), and S3's conditional writes for
    safe commits without a lock table."""
    storage = {"conditional_put": "etag", "AWS_REGION": uri.param("AWS_REGION") or "us-east-1"}
    for param in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        value = uri.param(param)
        if value:
            storage[param] = value
    endpoint = uri.param("AWS_ENDPOINT")
    if endpoint:
        storage["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            storage["AWS_ALLOW_HTTP"] = "true"
    return storage


def _probe_bucket(uri: SinkURI) -> None:
    """Write and remove an object where the tables go: a bucket that does not exist or
    keys that cannot write are refused when the changefeed is created (22023)."""
    from feedkv.changefeed.sinks.s3 import S3Blobs

    blobs = S3Blobs(uri)
    probe = f".feedkv-probe-{secrets.token_hex(8)}"
    try:
        blobs.put(probe, b"")
        blobs.delete(probe)
    except SinkError as exc:
        raise option_error(f"the delta+s3:// sink cannot write into {uri.uri!r}: {exc}") from None
    finally:
        blobs.close()


def _delta_root(uri: SinkURI) -> str:
    aws = sorted(p for p in uri.params if p.startswith("AWS_"))
    if aws:
        raise option_error(
            f"sink URI {uri.uri!r}: {aws[0]} is for tables in S3 (delta+s3://bucket/prefix); "
            "a delta:// URI names a local directory"
        )
    if uri.host not in ("", "localhost"):
        raise option_error(
            f"sink URI {uri.uri!r}: a delta:// URI names a local directory "
            f"(delta:///path/to/dir), not the host {uri.host!r}"
        )
    if not uri.path or uri.path == "/":
        raise option_error(f"sink URI {uri.uri!r} needs a directory: delta:///path/to/dir")
    return uri.path


# Reading.


def read_consistent(uri: SinkURI, at: Timestamp | None = None) -> Marker | None:
    """Every table of the changefeed writing into ``uri`` as of the newest timestamp
    all of them reached (``at=None``), or as of the newest retained marker at or below
    ``at``; ``None`` when no window was committed yet. Raises :class:`LakeHistoryError`
    when ``at`` is older than the oldest retained marker."""
    tables = lake_tables(uri)
    try:
        newest = tables.marker()
        if at is None or newest is None or newest.resolved <= at:
            return newest
        retained = tables.marker_history()
        chosen = marker_at(retained, at)
        marker = None if chosen is None else tables.history_marker(chosen)
        if marker is None:
            oldest = retained[0] if retained else newest.resolved
            raise LakeHistoryError(
                at, oldest, f"the oldest marker {uri.scheme}:// retains is at {oldest}"
            )
        return marker
    finally:
        tables.close()


def read_tables(uri: SinkURI, marker: Marker) -> dict[str, pa.Table]:
    """Each table of ``marker`` at its version there. Raises :class:`LakeHistoryError`
    when a table's version there was vacuumed (Delta) or expired (Iceberg)."""
    tables = lake_tables(uri)
    try:
        read = {}
        for name, version in sorted(marker.versions.items()):
            try:
                read[name] = tables.read(name, version)
            except Exception as exc:
                if tables.readable(name, version):
                    raise sink_error(f"cannot read {name} at version {version}", exc) from exc
                raise LakeHistoryError(
                    marker.resolved,
                    _oldest_readable(tables),
                    f"table {name}'s version {version} there was vacuumed or expired",
                ) from exc
        return read
    finally:
        tables.close()


def _oldest_readable(tables: LakeTables) -> Timestamp | None:
    """The oldest retained marker whose every table version is still readable. NB: a
    binary search: vacuuming and expiring remove a table's history from its oldest end,
    so once a marker is readable every later one is."""

    def readable(resolved: Timestamp) -> bool:
        marker = tables.history_marker(resolved)
        return marker is not None and all(
            tables.readable(name, version) for name, version in marker.versions.items()
        )

    retained = tables.marker_history()
    lo, hi = 0, len(retained)
    while lo < hi:
        mid = (lo + hi) // 2
        if readable(retained[mid]):
            hi = mid
        else:
            lo = mid + 1
    return retained[lo] if lo < len(retained) else None
