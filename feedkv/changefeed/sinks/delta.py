"""Delta Lake tables for the lake sink (:mod:`feedkv.changefeed.sinks.lake`), written
with delta-rs (``deltalake``): no JVM.

Each table is ``<dir>/<topic>``; each window is one commit whose custom metadata holds
``feedkv.resolved`` (mirror: a MERGE on the primary key; changelog: an append) and, for
a Spark job's batch, the application transaction ``(feedkv-<job id>, <batch id>)``, with
schema evolution in the same commit (``merge_schema``, ``schema_mode='merge'``; a window
whose rows dropped a column is one overwrite of the table without it,
``schema_mode='overwrite'``: :meth:`DeltaTables._rewrite`). The
marker is ``<dir>/_feedkv_resolved``, written to a temporary file, fsynced and renamed;
the retained markers are files ``<dir>/_feedkv_markers/<timestamp>.json``, written the
same way before it.

In S3 (``delta+s3://bucket/prefix``) the tables are written by the same library through
its object store, and a commit is made safe against a second writer by S3's conditional
writes (``conditional_put=etag``: a log entry is created only if it does not exist), so
no lock table is needed. The marker is one object (a PUT is atomic), written with boto3
as the ``s3://`` file sink writes its files.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from feedkv.changefeed.options import option_error
from feedkv.changefeed.sink import SinkError
from feedkv.changefeed.sinks.cloud_storage import BlobStore as Blobs
from feedkv.changefeed.sinks.cloud_storage import LocalBlobs
from feedkv.changefeed.sinks.lake_tables import (
    DEFAULT_HISTORY,
    HISTORY,
    MARKER,
    RESOLVED_KEY,
    Marker,
    TableChange,
    history_name,
    parse_history_name,
    pruned,
    sink_error,
)
from feedkv.errors import InvalidArgumentError
from feedkv.util.hlc import Timestamp

__all__ = ["DeltaTables"]

_DELETE = "_feedkv_delete"  # the merge source's flag: this key was deleted
_HISTORY_PAGE = 16


class DeltaTables:
    """The Delta tables under ``root`` (a local directory, created when missing).

    Each table stays open between windows with its newest window's ``(version,
    feedkv.resolved)``: a commit updates both, so a window costs no reopening and no
    reading of the table's history (each cost about as much as the commit). NB: this
    holds because one changefeed writes a directory; a failed commit forgets the
    table, which is read again from its log."""

    def __init__(
        self,
        root: str,
        *,
        objects: Blobs | None = None,
        storage: dict[str, str] | None = None,
        history: int = DEFAULT_HISTORY,
    ) -> None:
        """``root``: a local directory, or with ``objects`` (the bucket's client, for
        the marker) and ``storage`` (delta-rs' storage options) an ``s3://`` URL.
        ``history``: how many markers to retain."""
        self.root = root
        self._objects = objects
        self._storage = storage
        self._history = history
        self._retained: list[Timestamp] | None = None  # read at the first marker written
        self._open_tables: dict[str, Any] = {}
        self._newest: dict[str, tuple[int, Timestamp]] = {}
        if objects is not None:
            return
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as exc:
            raise option_error(
                f"cannot use {root!r} for Delta tables: {exc.strerror}; the path must be a "
                "directory this node can write to"
            ) from None

    def _path(self, table: str) -> str:
        if self._objects is not None:
            return f"{self.root.rstrip('/')}/{table}"
        return os.path.join(self.root, table)

    def _open(self, table: str) -> Any:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        dt = self._open_tables.get(table)
        if dt is not None:
            return dt
        try:
            dt = DeltaTable(self._path(table), storage_options=self._storage)
        except TableNotFoundError:
            return None
        except Exception as exc:
            raise sink_error(f"cannot open Delta table {self._path(table)}", exc) from exc
        self._open_tables[table] = dt
        return dt

    def _forget(self, table: str) -> None:
        self._open_tables.pop(table, None)
        self._newest.pop(table, None)

    def last_resolved(self, table: str) -> Timestamp | None:
        newest = self._newest.get(table)
        if newest is not None:
            return newest[1]
        dt = self._open(table)
        if dt is None:
            return None
        for version, recorded in _windows(dt):
            self._newest[table] = (version, recorded)
            return recorded
        return None

    def version_at(self, table: str, resolved: Timestamp) -> int | None:
        newest = self._newest.get(table)
        if newest is not None and newest[1] <= resolved:
            return newest[0]
        dt = self._open(table)
        if dt is None:
            return None
        for version, recorded in _windows(dt):
            if recorded <= resolved:
                return version
        return None

    def commit(self, change: TableChange) -> None:
        from deltalake import CommitProperties, Transaction

        apps = []
        if change.batch is not None:  # as Spark's Delta sink records txnAppId/txnVersion
            job_id, batch_id = change.batch
            apps.append(Transaction(app_id=f"feedkv-{job_id}", version=batch_id))
        props = CommitProperties(
            custom_metadata={RESOLVED_KEY: str(change.resolved)}, app_transactions=apps or None
        )
        path = self._path(change.table)
        try:
            self._commit(path, change, props)
        except SinkError:
            self._forget(change.table)
            raise
        except Exception as exc:
            self._forget(change.table)
            raise sink_error(f"cannot commit into Delta table {path}", exc) from exc

    def _commit(self, path: str, change: TableChange, props: Any) -> None:
        from deltalake import write_deltalake

        dt = self._open(change.table)
        before = None if dt is None else dt.version()
        dropped = [] if dt is None else _dropped(dt, change)
        if dropped:
            self._rewrite(dt, change, dropped, props)
        elif change.changes is not None:
            write_deltalake(
                path if dt is None else dt,
                change.changes,
                mode="append",
                schema_mode="merge",
                storage_options=self._storage if dt is None else None,
                commit_properties=props,
            )
        else:
            upserts, deletes = change.upserts, change.deletes
            if upserts is None or deletes is None:
                raise InvalidArgumentError(f"a mirror commit into {path} needs its rows")
            if dt is None:  # a new table: its rows are all inserts
                write_deltalake(
                    path,
                    upserts,
                    mode="append",
                    storage_options=self._storage,
                    commit_properties=props,
                )
            else:
                self._merge(dt, change, upserts, deletes, props)
        dt = self._open(change.table)
        if dt is None or dt.version() == before:
            # NB: a MERGE that changed nothing (deletes of rows never there) commits
            # nothing: the table's newest window is not known, read it again
            self._forget(change.table)
            return
        self._newest[change.table] = (dt.version(), change.resolved)

    def _merge(
        self, dt: Any, change: TableChange, upserts: pa.Table, deletes: pa.Table, props: Any
    ) -> None:
        """Apply the window's last change of each key: delete, update or insert."""
        source = pa.concat_tables(
            [
                upserts.append_column(_DELETE, pa.array([False] * len(upserts), pa.bool_())),
                deletes.append_column(_DELETE, pa.array([True] * len(deletes), pa.bool_())),
            ],
            promote_options="permissive",
        )
        # NB: the source's columns are the table's, and those the window added (which
        # merge_schema adds): a window that dropped one is a rewrite (_rewrite)
        values = {c: f"s.`{c}`" for c in source.column_names if c != _DELETE}
        on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in change.key)
        (
            dt.merge(
                source,
                predicate=on,
                source_alias="s",
                target_alias="t",
                merge_schema=True,
                commit_properties=props,
            )
            .when_matched_delete(predicate=f"s.`{_DELETE}`")
            .when_matched_update(updates=values, predicate=f"NOT s.`{_DELETE}`")
            .when_not_matched_insert(updates=values, predicate=f"NOT s.`{_DELETE}`")
            .execute()
        )

    def _rewrite(self, dt: Any, change: TableChange, dropped: list[str], props: Any) -> None:
        """The window's commit when the source dropped columns: the table without them
        (its rows streamed from the version open, less the keys the window changed, in
        mirror mode) and the window's rows, as one overwrite that replaces the schema.

        NB: delta-rs (1.6) has no DROP COLUMN, and its column mapping mode 'name', with
        which Delta drops a column in the log alone, writes files it reads back as NULLs:
        so the table is rewritten, as Delta's ``overwriteSchema`` does without column
        mapping. Earlier versions keep the column (time travel, until vacuumed); the
        rewrite costs one pass over the table, which a backfilled drop's MERGE of every
        row costs anyway."""
        from deltalake import write_deltalake

        changed: pa.Table | None = None  # mirror: the keys the window changed
        if change.changes is not None:
            new = change.changes
        elif change.upserts is not None and change.deletes is not None:
            new = change.upserts
            changed = pa.concat_tables(
                [new.select(list(change.key)), change.deletes], promote_options="permissive"
            )
        else:
            raise InvalidArgumentError(
                f"a mirror commit into {self._path(change.table)} needs its rows"
            )
        dataset = dt.to_pyarrow_dataset()
        kept = [f for f in dataset.schema if f.name not in dropped]
        have = {f.name for f in kept}
        schema = pa.schema(kept + [f for f in new.schema if f.name not in have])

        def rows() -> Iterator[pa.RecordBatch]:
            for batch in dataset.to_batches(columns=[f.name for f in kept]):
                old = pa.Table.from_batches([batch])
                if changed is not None and len(changed):
                    old = _without_keys(old, changed, change.key)
                yield from _conformed(old, schema).to_batches()
            yield from _conformed(new, schema).to_batches()

        write_deltalake(
            dt,
            pa.RecordBatchReader.from_batches(schema, rows()),
            mode="overwrite",
            schema_mode="overwrite",
            commit_properties=props,
        )

    def marker(self) -> Marker | None:
        if self._objects is not None:
            text = self._objects.get(MARKER)
            try:
                return None if text is None else Marker.from_json(text.decode())
            except (InvalidArgumentError, UnicodeDecodeError) as exc:
                raise sink_error(f"cannot read {MARKER} in {self.root}", exc) from exc
        try:
            with open(os.path.join(self.root, MARKER)) as f:
                return Marker.from_json(f.read())
        except FileNotFoundError:
            return None
        except (OSError, InvalidArgumentError) as exc:
            raise sink_error(f"cannot read {MARKER} in {self.root}", exc) from exc

    def _markers(self) -> Blobs:
        return self._objects if self._objects is not None else LocalBlobs(self.root)

    def marker_history(self) -> list[Timestamp]:
        retained = []
        for name in self._markers().list(f"{HISTORY}/"):
            base = name.rsplit("/", 1)[-1]
            if base.endswith(".json"):
                resolved = parse_history_name(base.removesuffix(".json"))
                if resolved is not None:
                    retained.append(resolved)
        return sorted(retained)

    def history_marker(self, resolved: Timestamp) -> Marker | None:
        text = self._markers().get(f"{HISTORY}/{history_name(resolved)}.json")
        try:
            return None if text is None else Marker.from_json(text.decode())
        except (InvalidArgumentError, UnicodeDecodeError) as exc:
            raise sink_error(f"cannot read the marker at {resolved} in {self.root}", exc) from exc

    def read(self, table: str, version: int) -> pa.Table:
        from deltalake import DeltaTable

        path = self._path(table)
        return DeltaTable(path, version=version, storage_options=self._storage).to_pyarrow_table()

    def readable(self, table: str, version: int) -> bool:
        """NB: in S3 only the log is checked (each file would be a request)."""
        from deltalake import DeltaTable

        try:
            dt = DeltaTable(self._path(table), version=version, storage_options=self._storage)
            files = dt.file_uris()
        except Exception:  # NB: the log entry is gone (delta-rs raises a generic error)
            return False
        if self._objects is not None:
            return True
        return all(os.path.exists(f.removeprefix("file://")) for f in files)

    def location(self, table: str) -> str:
        return self._path(table)

    def write_marker(self, marker: Marker) -> None:
        markers = self._markers()
        if self._retained is None:
            self._retained = self.marker_history()
        markers.put(f"{HISTORY}/{history_name(marker.resolved)}.json", marker.to_json().encode())
        if marker.resolved not in self._retained:
            self._retained.append(marker.resolved)
            self._retained.sort()
        for old in pruned(self._retained, self._history):
            markers.delete(f"{HISTORY}/{history_name(old)}.json")
            self._retained.remove(old)
        if self._objects is not None:
            self._objects.put(MARKER, marker.to_json().encode())
            return
        path = os.path.join(self.root, MARKER)
        tmp = f"{path}.{secrets.token_hex(4)}.tmp"
        try:
            with open(tmp, "w") as f:
                f.write(marker.to_json())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            fd = os.open(self.root, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise sink_error(f"cannot write {path}", exc) from exc

    def close(self) -> None:
        self._open_tables.clear()
        self._newest.clear()
        self._retained = None
        if self._objects is not None:
            self._objects.close()


def _dropped(dt: Any, change: TableChange) -> list[str]:
    """The columns of ``dt`` that ``change``'s rows no longer have: dropped from the
    source (a changelog's rows: the source's columns and the changelog's own)."""
    wanted = set(
        change.changes.column_names if change.changes is not None else change.columns.names
    )
    return [f.name for f in pa.schema(dt.schema().to_arrow()) if f.name not in wanted]


def _without_keys(rows: pa.Table, keys: pa.Table, key: tuple[str, ...]) -> pa.Table:
    """``rows`` less those whose primary key is among ``keys``."""
    try:
        return rows.join(keys, keys=list(key), join_type="left anti", use_threads=False)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
        # NB: a key type Arrow cannot join on: by Python values
        gone = set(zip(*(keys.column(k).to_pylist() for k in key), strict=True))
        values = zip(*(rows.column(k).to_pylist() for k in key), strict=True)
        return rows.filter(pa.array([v not in gone for v in values], pa.bool_()))


def _conformed(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` with ``schema``'s columns, in its order (NULL where ``rows`` has none)."""
    columns = [
        rows.column(f.name).cast(f.type)
        if f.name in rows.column_names
        else pa.nulls(len(rows), f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _windows(dt: Any) -> Iterator[tuple[int, Timestamp]]:
    """The windows committed into ``dt``, newest first: ``(version, feedkv.resolved)``.
    NB: the newest few first, the whole history only if the caller reads past them
    (reading every commit of a long-running table each window would cost O(commits))."""
    seen = -1
    for limit in (_HISTORY_PAGE, None):
        commits = dt.history(limit) if limit is not None else dt.history()
        for commit in commits:
            version = int(commit["version"])
            if seen != -1 and version >= seen:
                continue  # read in the first page
            seen = version
            if RESOLVED_KEY in commit:
                yield version, Timestamp.parse(str(commit[RESOLVED_KEY]))
        if limit is not None and len(commits) < limit:
            return
