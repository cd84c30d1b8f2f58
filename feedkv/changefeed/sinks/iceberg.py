"""Iceberg tables for the lake sink (:mod:`feedkv.changefeed.sinks.lake`), written with
pyiceberg: no JVM.

The catalog (:class:`IcebergPlace`, from the sink URI ``iceberg://<catalog>/<namespace>``):

- ``?warehouse=/dir``: a SQL catalog on a SQLite file in ``/dir`` (or on the SQLAlchemy
  URL ``catalog_uri=``), the tables' files in ``/dir``;
- ``?catalog_uri=http(s)://host:port``: a REST catalog, which places the tables' files
  itself; ``warehouse=`` is then the catalog's warehouse (sent to its ``/v1/config``),
  ``token=`` a bearer token, ``credential=<client_id>:<client_secret>`` OAuth2 client
  credentials exchanged at its ``/v1/oauth/tokens``;
- neither: the catalog of that name in the node's pyiceberg configuration
  (``~/.pyiceberg.yaml``, or ``PYICEBERG_CATALOG__<NAME>__URI``-style variables, read
  when the changefeed opens it): REST, Glue, Hive, SQL, whatever pyiceberg loads.

Each table is ``<namespace>.<topic>``; each window is one table commit (one pyiceberg
transaction) that evolves the schema when the source's changed, writes the rows and
sets the table property ``feedkv.resolved``; every snapshot it makes carries
``feedkv.resolved`` in its summary. Mirror deletes the window's changed keys and
appends their new rows (copy-on-write: an Iceberg delete snapshot, then an append
snapshot, in the one commit); changelog appends. The marker is the namespace property
``feedkv.resolved`` (the SQL catalog updates it in one database transaction); each
retained marker is the property ``_feedkv_markers.<timestamp>``, set in the same update
that sets the newest and drops the oldest.

**Spark tasks' staging** (:func:`staging_blobs`): a task on any machine must be able to
write where the driver's commit reads, so rows are staged in the catalog's warehouse:
``<warehouse>/<namespace>/_feedkv_staging`` through pyiceberg's own FileIO (S3, GCS,
ADLS, HDFS, with the storage properties the catalog hands out, such as a REST catalog's
``/v1/config`` overrides). A SQL catalog's warehouse is a local directory; a catalog
whose ``warehouse`` is no location (a name, or none) leaves a local temporary directory,
which only a local Spark's executors share with its driver.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from feedkv.changefeed.options import option_error
from feedkv.changefeed.sink import SinkError, SinkURI, TerminalSinkError
from feedkv.changefeed.sinks.cloud_storage import BlobStore, LocalBlobs
from feedkv.changefeed.sinks.lake_tables import (
    DEFAULT_HISTORY,
    HISTORY,
    RESOLVED_KEY,
    STAGING,
    Marker,
    TableChange,
    history_name,
    parse_history_name,
    pruned,
    sink_error,
)
from feedkv.errors import InvalidArgumentError, SQLError
from feedkv.util.hlc import Timestamp

__all__ = ["FileIOBlobs", "IcebergPlace", "IcebergTables", "staging_blobs"]

_AUTH_PARAMS = ("token", "credential")  # a REST catalog's: redacted in SHOW CHANGEFEED JOBS


@dataclass(frozen=True)
class IcebergPlace:
    """Where an ``iceberg://`` URI's tables are: the catalog's name and ``kind``
    (``sql``, ``rest``, or ``configured``: pyiceberg's configuration names it), the
    pyiceberg properties it is opened with, the namespace, and the local directory Spark
    tasks stage rows in when the catalog's warehouse is not an object store
    (:func:`staging_blobs`): the warehouse, when it is a local directory; else a
    temporary directory, which only a local Spark's executors share with the driver."""

    catalog: str
    namespace: str
    kind: str
    properties: dict[str, str]
    staging: str

    @classmethod
    def of(cls, uri: SinkURI) -> IcebergPlace:
        """The place ``uri`` names; SQLError 22023 for one that names none."""
        example = (
            "iceberg://<catalog>/<namespace>?warehouse=/path/to/dir (a SQL catalog) or "
            "?catalog_uri=http://host:port (a REST catalog)"
        )
        if not uri.host:
            raise option_error(f"sink URI {uri.uri!r} names no catalog: write {example}")
        namespace = uri.path.strip("/")
        if not namespace or "/" in namespace:
            raise option_error(f"sink URI {uri.uri!r} names no single namespace: write {example}")
        warehouse = uri.param("warehouse")
        catalog_uri = uri.param("catalog_uri")
        auth = {k: v for k in _AUTH_PARAMS if (v := uri.param(k))}
        local = warehouse if warehouse and warehouse.startswith("/") else None
        default_staging = os.path.join(
            tempfile.gettempdir(), "feedkv-lake", uri.host, namespace, STAGING
        )
        staging = os.path.join(local, STAGING) if local else default_staging
        if catalog_uri is not None and catalog_uri.startswith(("http://", "https://")):
            if auth.get("credential") is not None and ":" not in auth["credential"]:
                raise option_error(
                    f"sink URI {uri.uri!r}: credential must be <client_id>:<client_secret>"
                )
            properties = {"uri": catalog_uri, **auth}
            if "credential" in auth:  # NB: the spec's token endpoint, said out loud
                properties["oauth2-server-uri"] = catalog_uri.rstrip("/") + "/v1/oauth/tokens"
            if warehouse:
                properties["warehouse"] = warehouse
            return cls(uri.host, namespace, "rest", properties, staging)
        if auth:
            raise option_error(
                f"sink URI {uri.uri!r}: {sorted(auth)[0]} is for a REST catalog "
                "(catalog_uri=http://host:port)"
            )
        if catalog_uri is None and warehouse is None:
            return cls(uri.host, namespace, "configured", {}, staging)
        if local is None:
            raise option_error(
                f"sink URI {uri.uri!r} needs warehouse=<absolute path> (where the tables' "
                f"files go): write {example}"
            )
        properties = {
            "uri": catalog_uri or f"sqlite:///{local}/{uri.host}.db",
            "warehouse": f"file://{local}",
        }
        return cls(uri.host, namespace, "sql", properties, staging)

    def open(self) -> Any:
        """The pyiceberg catalog; SQLError 22023 when it cannot be opened."""
        from pyiceberg.catalog import load_catalog
        from pyiceberg.catalog.rest import RestCatalog
        from pyiceberg.catalog.sql import SqlCatalog
        from pyiceberg.utils.config import Config

        try:
            if self.kind == "sql":
                warehouse = self.properties["warehouse"].removeprefix("file://")
                try:
                    os.makedirs(warehouse, exist_ok=True)
                except OSError as exc:
                    raise option_error(
                        f"cannot use the Iceberg warehouse {warehouse!r}: {exc.strerror}; it "
                        "must be a directory this node can write to"
                    ) from None
                return SqlCatalog(self.catalog, **self.properties)
            if self.kind == "rest":
                return RestCatalog(self.catalog, **self.properties)
            # NB: read now, not pyiceberg's copy read once at its import
            configured = Config().get_catalog_config(self.catalog)
            if configured is None:
                raise option_error(
                    f"the Iceberg catalog {self.catalog!r} is not in pyiceberg's configuration "
                    f"(~/.pyiceberg.yaml, or PYICEBERG_CATALOG__{self.catalog.upper()}__URI and "
                    "the like): configure it there, or give the sink URI warehouse=/path (a "
                    "SQL catalog) or catalog_uri=http://host:port (a REST catalog)"
                )
            return load_catalog(self.catalog, **{k: str(v) for k, v in configured.items()})
        except SQLError:
            raise
        except Exception as exc:
            where = self.properties.get("uri", "its configuration")
            raise _error(
                f"cannot open the Iceberg catalog {self.catalog!r} at {where!r}", exc
            ) from exc


class IcebergTables:
    """The tables of a namespace in a pyiceberg catalog (:class:`IcebergPlace`). The
    catalog is opened (and the namespace created when missing) at the first call that
    needs it, not here: making a sink checks its URI without reaching the catalog.
    Raises :class:`SinkError` (terminal when the catalog refuses the credentials)."""

    def __init__(self, place: IcebergPlace, *, history: int = DEFAULT_HISTORY) -> None:
        """``history``: how many markers to retain."""
        self.namespace = place.namespace
        self._place = place
        self._history = history
        self._retained: list[Timestamp] | None = None  # read at the first marker written
        self._opened: Any = None

    @property
    def _catalog(self) -> Any:
        if self._opened is None:
            catalog = self._place.open()
            try:
                catalog.create_namespace_if_not_exists(self.namespace)
            except Exception as exc:
                _close(catalog)
                raise _error(
                    f"cannot create the namespace {self.namespace!r} in the Iceberg catalog "
                    f"{self._place.catalog!r}",
                    exc,
                ) from None
            self._opened = catalog
        return self._opened

    def _load(self, table: str) -> Any:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self._catalog.load_table((self.namespace, table))
        except NoSuchTableError:
            return None
        except Exception as exc:
            raise _error(f"cannot load Iceberg table {self.namespace}.{table}", exc) from exc

    def last_resolved(self, table: str) -> Timestamp | None:
        tbl = self._load(table)
        if tbl is None or RESOLVED_KEY not in tbl.properties:
            return None
        return Timestamp.parse(tbl.properties[RESOLVED_KEY])

    def version_at(self, table: str, resolved: Timestamp) -> int | None:
        tbl = self._load(table)
        if tbl is None:
            return None
        found = None
        for snapshot in tbl.snapshots():  # in commit order
            recorded = snapshot.summary.get(RESOLVED_KEY) if snapshot.summary else None
            if recorded is not None and Timestamp.parse(recorded) <= resolved:
                found = int(snapshot.snapshot_id)
        return found

    def commit(self, change: TableChange) -> None:
        name = f"{self.namespace}.{change.table}"
        props = {RESOLVED_KEY: str(change.resolved)}
        if change.batch is not None:
            props = {
                **props,
                "feedkv.job": str(change.batch[0]),
                "feedkv.batch": str(change.batch[1]),
            }
        try:
            tbl = self._load(change.table)
            if tbl is None:
                tbl = self._catalog.create_table((self.namespace, change.table), _schema(change))
            with tbl.transaction() as txn:
                self._evolve(txn, tbl, _schema(change), change)
                if change.changes is not None:
                    txn.append(change.changes, snapshot_properties=props)
                else:
                    if change.upserts is None or change.deletes is None:
                        raise InvalidArgumentError(f"a mirror commit into {name} needs its rows")
                    changed = pa.concat_tables(
                        [change.upserts.select(list(change.key)), change.deletes],
                        promote_options="permissive",
                    )
                    if len(changed) and tbl.current_snapshot() is not None:
                        with warnings.catch_warnings():  # NB: new keys match no row: expected
                            warnings.filterwarnings("ignore", "Delete operation did not match")
                            txn.delete(_keys_filter(change.key, changed), snapshot_properties=props)
                    if len(change.upserts):
                        txn.append(change.upserts, snapshot_properties=props)
                txn.set_properties({RESOLVED_KEY: props[RESOLVED_KEY]})
        except SinkError:
            raise
        except Exception as exc:
            raise _error(f"cannot commit into Iceberg table {name}", exc) from exc

    def _evolve(self, txn: Any, tbl: Any, schema: pa.Schema, change: TableChange) -> None:
        """Add the columns the source added; drop those it dropped (old snapshots keep
        them)."""
        have = tbl.schema().as_arrow().names
        meta = set(_meta_names(change))
        dropped = [c for c in have if c not in schema.names and c not in meta]
        added = [f for f in schema if f.name not in have]
        if not added and not dropped:
            return
        with txn.update_schema() as update:
            if added:
                update.union_by_name(pa.schema(added))
            for column in dropped:
                update.delete_column(column)

    def _properties(self) -> dict[str, str]:
        try:
            return dict(self._catalog.load_namespace_properties(self.namespace))
        except SinkError:
            raise
        except Exception as exc:
            raise _error(f"cannot read namespace {self.namespace}", exc) from exc

    def marker(self) -> Marker | None:
        text = self._properties().get(RESOLVED_KEY)
        return None if text is None else Marker.from_json(text)

    def marker_history(self) -> list[Timestamp]:
        prefix = f"{HISTORY}."
        retained = (
            parse_history_name(name.removeprefix(prefix))
            for name in self._properties()
            if name.startswith(prefix)
        )
        return sorted(t for t in retained if t is not None)

    def history_marker(self, resolved: Timestamp) -> Marker | None:
        text = self._properties().get(f"{HISTORY}.{history_name(resolved)}")
        return None if text is None else Marker.from_json(text)

    def readable(self, table: str, version: int) -> bool:
        tbl = self._load(table)
        snapshot = None if tbl is None else tbl.snapshot_by_id(version)
        if snapshot is None:
            return False
        try:
            return bool(tbl.io.new_input(snapshot.manifest_list).exists())
        except Exception:
            return False

    def read(self, table: str, version: int) -> pa.Table:
        tbl = self._catalog.load_table((self.namespace, table))
        return tbl.scan(snapshot_id=version).to_arrow()

    def location(self, table: str) -> str:
        location: str = self._catalog.load_table((self.namespace, table)).metadata_location
        return location.removeprefix("file://")

    def write_marker(self, marker: Marker) -> None:
        if self._retained is None:
            self._retained = self.marker_history()
        retained = sorted({*self._retained, marker.resolved})
        dropped = pruned(retained, self._history)
        text = marker.to_json()
        try:
            self._catalog.update_namespace_properties(
                self.namespace,
                removals={f"{HISTORY}.{history_name(t)}" for t in dropped},
                updates={RESOLVED_KEY: text, f"{HISTORY}.{history_name(marker.resolved)}": text},
            )
            self._retained = retained[len(dropped) :]
        except Exception as exc:
            raise _error(f"cannot update namespace {self.namespace}", exc) from exc

    def close(self) -> None:
        self._retained = None
        catalog, self._opened = self._opened, None
        if catalog is not None:
            _close(catalog)


def staging_blobs(place: IcebergPlace) -> BlobStore:
    """Where Spark tasks stage rows for ``place``'s tables (see the module docstring):
    in the warehouse when the catalog names one by location, else :attr:`IcebergPlace.staging`
    on local disk. Opens the catalog (a REST catalog's ``/v1/config``) to learn it."""
    if place.kind == "sql":
        return LocalBlobs(place.staging)
    catalog = place.open()
    try:
        properties = {k: str(v) for k, v in catalog.properties.items()}
    finally:
        _close(catalog)
    warehouse = properties.get("warehouse", "")
    if "://" not in warehouse:
        return LocalBlobs(place.staging)
    from pyiceberg.io import load_file_io

    root = f"{warehouse.rstrip('/')}/{place.namespace}/{STAGING}"
    try:
        io = load_file_io(properties, root)
    except Exception as exc:
        raise _error(f"cannot reach the Iceberg warehouse {warehouse!r}", exc) from exc
    return FileIOBlobs(io, root)


class FileIOBlobs:
    """A :class:`~feedkv.changefeed.sinks.cloud_storage.BlobStore` under ``root`` (a
    location URL) through a pyiceberg FileIO. A file is written whole by one request
    (an object store's PUT is atomic); ``rename`` copies, then deletes."""

    def __init__(self, io: Any, root: str) -> None:
        self._io = io
        self.root = root.rstrip("/")

    def _path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def put(self, name: str, data: bytes) -> None:
        try:
            with self._io.new_output(self._path(name)).create(overwrite=True) as out:
                out.write(data)
        except Exception as exc:
            raise sink_error(f"cannot write {self._path(name)}", exc) from exc

    def get(self, name: str) -> bytes | None:
        try:
            with self._io.new_input(self._path(name)).open() as f:
                data: bytes = f.read()
                return data
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise sink_error(f"cannot read {self._path(name)}", exc) from exc

    def rename(self, name: str, new_name: str) -> None:
        data = self.get(name)
        if data is None:
            if self.get(new_name) is None:
                raise SinkError(f"cannot move {self._path(name)}: it is gone")
            return
        self.put(new_name, data)
        self.delete(name)

    def delete(self, name: str) -> None:
        try:
            self._io.delete(self._path(name))
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise sink_error(f"cannot remove {self._path(name)}", exc) from exc

    def list(self, prefix: str) -> list[str]:
        """NB: through the FileIO's pyarrow file system (pyiceberg's FileIO cannot list)."""
        from urllib.parse import urlsplit

        from pyarrow import fs

        top = urlsplit(self._path(prefix))
        by_scheme = getattr(self._io, "fs_by_scheme", None)
        if by_scheme is None:
            raise SinkError(f"cannot list {self._path(prefix)} through {type(self._io).__name__}")
        try:
            files = by_scheme(top.scheme, top.netloc).get_file_info(
                fs.FileSelector(f"{top.netloc}{top.path}", recursive=True, allow_not_found=True)
            )
        except Exception as exc:
            raise sink_error(f"cannot list {self._path(prefix)}", exc) from exc
        base = f"{urlsplit(self.root).netloc}{urlsplit(self.root).path}/"
        return [f.path.removeprefix(base) for f in files if f.type == fs.FileType.File]

    def close(self) -> None:
        pass


def _close(catalog: Any) -> None:
    engine = getattr(catalog, "engine", None)  # a SQL catalog's connections
    if engine is not None:
        engine.dispose()
    close = getattr(catalog, "close", None)  # a REST catalog's HTTP session
    if close is not None:
        close()


def _error(what: str, exc: Exception) -> SinkError:
    """A catalog's failure as a sink error: terminal when no retry can change it (the
    catalog refused the credentials or the request: a 4xx of a REST catalog), else
    retryable (unreachable, 5xx, throttled, a commit that lost a race)."""
    from pyiceberg.exceptions import (
        AuthorizationExpiredError,
        CommitStateUnknownException,
        RESTError,
        ServerError,
        ServiceUnavailableError,
        TooManyRequestsError,
    )

    if isinstance(exc, SinkError):  # NB: opening the catalog said so already
        return exc
    passing = (
        AuthorizationExpiredError,
        CommitStateUnknownException,
        ServerError,
        ServiceUnavailableError,
        TooManyRequestsError,
    )
    if isinstance(exc, RESTError) and not isinstance(exc, passing):
        error: SinkError = TerminalSinkError(f"{what}: {type(exc).__name__}: {exc}")
        error.__cause__ = exc
        return error
    return sink_error(what, exc)


def _meta_names(change: TableChange) -> list[str]:
    if change.changes is None:
        return []
    return [n for n in change.changes.column_names if n not in change.columns.names]


def _schema(change: TableChange) -> pa.Schema:
    """The lake table's columns: the source's (and the changelog's own)."""
    if change.changes is not None:
        return change.changes.schema.remove_metadata()
    return change.columns.remove_metadata()


def _keys_filter(key: tuple[str, ...], rows: pa.Table) -> Any:
    """An Iceberg row filter matching the keys in ``rows``."""
    import pyiceberg.expressions

    # NB: pyiceberg's predicates are pydantic models whose constructors mypy misreads
    ex: Any = pyiceberg.expressions
    And, EqualTo, In, Or = ex.And, ex.EqualTo, ex.In, ex.Or
    columns = [rows.column(k).to_pylist() for k in key]
    if len(key) == 1:
        return In(key[0], set(columns[0]))
    terms = [
        And(*(EqualTo(k, v) for k, v in zip(key, values, strict=True)))
        if len(key) > 1
        else EqualTo(key[0], values[0])
        for values in set(zip(*columns, strict=True))
    ]
    return terms[0] if len(terms) == 1 else Or(*terms)
