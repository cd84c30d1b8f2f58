"""Reading the lake tables a changefeed writes (``delta://``, ``iceberg://``) as of one
resolved timestamp across all of them.

A changefeed into a lake commits each window of its resolved frontier into every table
that has rows in it, then records the window's end and every table's version in a
marker (:mod:`feedkv.changefeed.sinks.lake`). :func:`read_consistent` returns that
marker: reading each table at its version there shows every table as of the same
timestamp, never half a window (a transaction that wrote two tables is in both or in
neither). A table missing from it had no rows yet.

    snapshot = feedkv.lake.read_consistent("delta:///data/lake")
    tables = feedkv.lake.read_tables("delta:///data/lake", snapshot)  # name -> pyarrow.Table

An older consistent cut is read with ``at``: every table as of the newest marker at or
below that timestamp (the sink retains its newest ``marker_history`` markers, 1000 by
default). A timestamp older than the oldest retained marker, or a marker whose table
versions were vacuumed (Delta) or expired (Iceberg), raises :class:`LakeHistoryError`,
which names the oldest timestamp still readable::

    then = feedkv.lake.read_consistent("delta:///data/lake", at="1700000000000000000.0000000000")
    tables = feedkv.lake.read_tables("delta:///data/lake", then)

A Delta table can also be read at ``snapshot.versions[name]`` by any Delta reader
(``deltalake.DeltaTable(path, version=v)``, Spark's ``versionAsOf``), an Iceberg
table at the snapshot id (``table.scan(snapshot_id=v)``, Spark's ``snapshot-id``), and
by DuckDB, whose Delta and Iceberg extensions :func:`duckdb_connect` loads from their
Python packages (DuckDB would otherwise download them at ``INSTALL delta``)::

    con = feedkv.lake.duckdb_connect()
    source = feedkv.lake.duckdb_scan("delta:///data/lake", "rides", snapshot.versions["rides"])
    con.sql(f"SELECT city, count(*) FROM {source} GROUP BY city")
"""

from __future__ import annotations

import glob
import importlib
import os
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa

from feedkv.changefeed import sink as sinks
from feedkv.changefeed.options import ChangefeedOptions, option_error
from feedkv.changefeed.sinks import lake
from feedkv.changefeed.sinks.lake_tables import LakeHistoryError, Marker
from feedkv.errors import InvalidArgumentError
from feedkv.util.hlc import Timestamp

__all__ = [
    "LakeHistoryError",
    "Marker",
    "duckdb_connect",
    "duckdb_scan",
    "read_consistent",
    "read_tables",
    "snapshot",
]

At = Timestamp | str | Decimal | datetime  # what ``at=`` takes (see :func:`read_consistent`)

# DuckDB's extensions for lake tables as Python packages (avro: Iceberg's manifests)
DUCKDB_EXTENSIONS = ("delta", "avro", "iceberg")


def _uri(uri: str) -> sinks.SinkURI:
    """A lake sink URI; a bare path names a Delta directory."""
    if "://" not in uri:
        uri = f"delta://{uri}"
    options = sinks.sink_defaults(uri, ChangefeedOptions())
    parsed = sinks.parse_sink_uri(uri, options)
    if not parsed.kind.whole_rows:
        raise option_error(f"{uri!r} is not a lake sink URI (delta://, delta+s3:// or iceberg://)")
    return parsed


def read_consistent(uri: str, at: At | None = None) -> Marker | None:
    """The newest timestamp every table of the changefeed writing into ``uri`` reached
    and each table's version (Delta) or snapshot id (Iceberg) there; ``None`` before
    the first window. ``uri`` is the changefeed's sink URI, or a Delta directory.

    With ``at``, the newest retained marker at or below it instead: a
    :class:`~feedkv.util.hlc.Timestamp`, its decimal text or a ``Decimal`` (as
    ``cluster_logical_timestamp()`` and ``AS OF SYSTEM TIME`` write it), or a
    ``datetime`` (a naive one is UTC). Raises :class:`LakeHistoryError` when ``at`` is
    older than the oldest retained marker."""
    return lake.read_consistent(_uri(uri), None if at is None else _timestamp(at))


def read_tables(
    uri: str, marker: Marker | None = None, *, at: At | None = None
) -> dict[str, pa.Table]:
    """Every table of ``marker`` (by default :func:`read_consistent`'s, as of ``at``)
    at its version there, by name; empty before the first window. Raises
    :class:`LakeHistoryError` when a table's version there was vacuumed or expired."""
    parsed = _uri(uri)
    if marker is not None and at is not None:
        raise InvalidArgumentError("give read_tables a marker or at=, not both")
    marker = marker or lake.read_consistent(parsed, None if at is None else _timestamp(at))
    return {} if marker is None else lake.read_tables(parsed, marker)


def snapshot(
    uri: str, tables: list[str] | None = None, *, at: At | None = None
) -> dict[str, pa.Table]:
    """``tables`` (by default every table) of the lake at ``uri`` as of one marker: the
    newest, or the newest at or below ``at`` (:func:`read_consistent`). A table with no
    rows yet at that marker is absent."""
    parsed = _uri(uri)
    marker = lake.read_consistent(parsed, None if at is None else _timestamp(at))
    if marker is None:
        return {}
    if tables is not None:
        marker = Marker(marker.resolved, {n: v for n, v in marker.versions.items() if n in tables})
    return lake.read_tables(parsed, marker)


def _timestamp(at: At) -> Timestamp:
    if isinstance(at, Timestamp):
        return at
    if isinstance(at, datetime):
        aware = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
        since = aware - datetime(1970, 1, 1, tzinfo=UTC)
        return Timestamp.checked(
            since.days * 86_400_000_000_000 + since.seconds * 10**9 + since.microseconds * 1000
        )
    if isinstance(at, (str, Decimal)):
        return Timestamp.parse_decimal(str(at))
    raise InvalidArgumentError(
        f"at= takes a Timestamp, its decimal text, a Decimal or a datetime, not {type(at).__name__}"
    )


def duckdb_connect() -> Any:
    """An in-memory DuckDB connection with its ``delta`` and ``iceberg`` extensions
    loaded from the ``duckdb-extension-*`` packages: DuckDB's own builds (it checks their
    signatures on load), so nothing is downloaded. Raises
    :class:`~feedkv.errors.InvalidArgumentError` when a package is missing."""
    import duckdb

    con = duckdb.connect()
    for name in DUCKDB_EXTENSIONS:
        try:
            package = importlib.import_module(f"duckdb_extension_{name}")
        except ImportError:
            con.close()
            raise InvalidArgumentError(
                f"DuckDB's {name} extension is not installed: pip install "
                f"duckdb-extension-{name}=={duckdb.__version__}"
            ) from None
        root = os.path.dirname(package.__file__ or "")
        found = glob.glob(os.path.join(root, "extensions", f"v{duckdb.__version__}", "*"))
        if not found:
            con.close()
            raise InvalidArgumentError(
                f"the duckdb-extension-{name} package has no build for DuckDB "
                f"{duckdb.__version__}: install the version that matches it"
            )
        con.execute("LOAD " + _sql_text(found[0]))
    return con


def duckdb_scan(uri: str, table: str, version: int) -> str:
    """The DuckDB table function that reads ``table`` of the lake at ``uri`` at
    ``version`` (a :class:`Marker`'s): ``delta_scan(...)`` or ``iceberg_scan(...)``, for
    a connection from :func:`duckdb_connect`."""
    parsed = _uri(uri)
    tables = lake.lake_tables(parsed)
    try:
        location = tables.location(table)
    finally:
        tables.close()
    if parsed.scheme == "delta+s3":
        raise InvalidArgumentError(
            f"{uri!r}: DuckDB reads Delta tables in S3 through its httpfs extension, which "
            "duckdb_scan does not set up: read them with read_tables"
        )
    if parsed.scheme == "delta":
        return f"delta_scan({_sql_text(location)}, version => {int(version)})"
    return f"iceberg_scan({_sql_text(location)}, snapshot_from_id => {int(version)})"


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
