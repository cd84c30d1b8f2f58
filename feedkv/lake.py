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

A Delta table can also be read at ``snapshot.versions[name]`` by any Delta reader
(``deltalake.DeltaTable(path, version=v)``, Spark's ``versionAsOf``), an Iceberg
table at the snapshot id (``table.scan(snapshot_id=v)``, Spark's ``snapshot-id``).
"""

from __future__ import annotations

import pyarrow as pa

from feedkv.changefeed import sink as sinks
from feedkv.changefeed.options import ChangefeedOptions, option_error
from feedkv.changefeed.sinks import lake
from feedkv.changefeed.sinks.lake_tables import Marker

__all__ = ["Marker", "read_consistent", "read_tables"]


def _uri(uri: str) -> sinks.SinkURI:
    """A lake sink URI; a bare path names a Delta directory."""
    if "://" not in uri:
        uri = f"delta://{uri}"
    options = sinks.sink_defaults(uri, ChangefeedOptions())
    parsed = sinks.parse_sink_uri(uri, options)
    if not parsed.kind.whole_rows:
        raise option_error(f"{uri!r} is not a lake sink URI (delta:// or iceberg://)")
    return parsed


def read_consistent(uri: str) -> Marker | None:
    """The newest timestamp every table of the changefeed writing into ``uri`` reached
    and each table's version (Delta) or snapshot id (Iceberg) there; ``None`` before
    the first window. ``uri`` is the changefeed's sink URI, or a Delta directory."""
    return lake.read_consistent(_uri(uri))


def read_tables(uri: str, marker: Marker | None = None) -> dict[str, pa.Table]:
    """Every table of ``marker`` (by default :func:`read_consistent`'s) at its version
    there, by name; empty before the first window."""
    parsed = _uri(uri)
    marker = marker or lake.read_consistent(parsed)
    return {} if marker is None else lake.read_tables(parsed, marker)
