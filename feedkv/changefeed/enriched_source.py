"""``enriched_properties=source``: where a change comes from, as the enriched envelope's
``source`` object carries it (CockroachDB 26.1, changefeed message envelopes docs,
field reference).

Two parts, of different lifetimes:

- :class:`FeedSource`, fixed for a running job: its id, the kind of sink, and the node
  that emits (cluster id and name, node id, name and locality, the database's version).
  The runner that starts the job builds it (:func:`feed_source`); a changefeed started
  without one (a test, a sinkless feed outside a node) gets :data:`UNKNOWN_SOURCE`'s
  empty identity, never a made-up one.
- Per message: the table's database, schema and name, its primary key columns and id,
  and with ``mvcc_timestamp`` the version's MVCC timestamp, with ``updated`` the commit
  time as ``ts_hlc`` (an HLC string) and ``ts_ns`` (its wall time in ns).

The JSON object has its keys sorted, as every CockroachDB JSON object: ``changefeed_sink,
cluster_id, cluster_name, crdb_internal_table_id, database_name, db_version, job_id,
mvcc_timestamp, node_id, node_name, origin, primary_keys, schema_name,
source_node_locality, table_name, ts_hlc, ts_ns``. ``origin`` is always
``cockroachdb``: consumers written for CockroachDB test it.

The Kafka Connect schema (``cockroachdb.source``, optional) and the Avro record
(``source``, every field a union with null) list the fields in that same order: each
with its type (``int32`` table id, ``int64`` ``ts_ns``, an array of strings for the
primary keys, the others strings), optional exactly for the fields that depend on
options (``mvcc_timestamp``, ``ts_hlc``, ``ts_ns``). CockroachDB lists them in Go's map
order, which changes from process to process; a fixed order is the one a consumer can
rely on and does not change the meaning of either schema.

Pure: no catalog reads here; the caller hands the table's database name in.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit

from feedkv.sql.descriptor import TableDescriptor
from feedkv.util.hlc import Timestamp

__all__ = [
    "SOURCE_FIELDS",
    "UNKNOWN_SOURCE",
    "FeedSource",
    "avro_source_record",
    "avro_source_schema",
    "connect_source_schema",
    "sink_type",
    "source_object",
]

ORIGIN = "cockroachdb"


def _db_version() -> str:
    """feedkv's version, where CockroachDB's build tag goes (``v25.2.0``)."""
    try:
        return "v" + metadata.version("feedkv")
    except metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "v0.0.0"


DB_VERSION = _db_version()

# (field, Kafka Connect type, optional): optional fields depend on options.
SOURCE_FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("changefeed_sink", "string", False),
    ("cluster_id", "string", False),
    ("cluster_name", "string", False),
    ("crdb_internal_table_id", "int32", False),
    ("database_name", "string", False),
    ("db_version", "string", False),
    ("job_id", "string", False),
    ("mvcc_timestamp", "string", True),
    ("node_id", "string", False),
    ("node_name", "string", False),
    ("origin", "string", False),
    ("primary_keys", "array", False),
    ("schema_name", "string", False),
    ("source_node_locality", "string", False),
    ("table_name", "string", False),
    ("ts_hlc", "string", True),
    ("ts_ns", "int64", True),
)


@dataclass(frozen=True, slots=True)
class FeedSource:
    """Who emits a changefeed's messages. ``job_id`` is ``"0"`` for a changefeed that is
    no job (a sinkless one); the node fields are empty where the node does not know
    them (a node started without ``--locality`` has no locality, as in CockroachDB)."""

    job_id: str = "0"
    changefeed_sink: str = "sinkless buffer"
    cluster_id: str = ""
    cluster_name: str = ""
    node_id: str = ""
    node_name: str = ""
    source_node_locality: str = ""
    db_version: str = DB_VERSION


UNKNOWN_SOURCE = FeedSource()

# CockroachDB's names of its sink kinds, which changefeed_sink carries.
_SINK_TYPES = {
    "kafka": "kafka",
    "webhook-http": "webhook",
    "webhook-https": "webhook",
    "file": "cloudstorage",
    "s3": "cloudstorage",
    "azure": "cloudstorage",
    "gs": "cloudstorage",
    "null": "null",
    "experimental-sql": "sql",
}


def sink_type(sink_uri: str | None) -> str:
    """``changefeed_sink`` for a changefeed into ``sink_uri`` (``None``: sinkless)."""
    if not sink_uri:
        return "sinkless buffer"
    scheme = urlsplit(sink_uri).scheme.lower()
    return _SINK_TYPES.get(scheme, scheme)


def source_object(
    source: FeedSource,
    desc: TableDescriptor,
    database: str,
    *,
    mvcc_ts: Timestamp | None,
    updated: Timestamp | None,
) -> dict[str, Any]:
    """The ``source`` object of one message on ``desc``'s table (of ``database``):
    ``mvcc_ts`` given with ``mvcc_timestamp``, ``updated`` with ``updated``."""
    found: dict[str, Any] = {
        "changefeed_sink": source.changefeed_sink,
        "cluster_id": source.cluster_id,
        "cluster_name": source.cluster_name,
        "crdb_internal_table_id": desc.id,
        "database_name": database,
        "db_version": source.db_version,
        "job_id": source.job_id,
        "node_id": source.node_id,
        "node_name": source.node_name,
        "origin": ORIGIN,
        "primary_keys": [c.name for c in desc.key_columns],
        "schema_name": "public",
        "source_node_locality": source.source_node_locality,
        "table_name": desc.name,
    }
    if mvcc_ts is not None:
        found["mvcc_timestamp"] = str(mvcc_ts)
    if updated is not None:
        found["ts_hlc"] = str(updated)
        found["ts_ns"] = updated.wall
    return found


def connect_source_schema() -> dict[str, Any]:
    """The Kafka Connect schema of the ``source`` field."""
    fields: list[dict[str, Any]] = []
    for name, kind, optional in SOURCE_FIELDS:
        field: dict[str, Any] = {"field": name, "optional": optional, "type": kind}
        if kind == "array":
            field["items"] = {"optional": False, "type": "string"}
        fields.append(field)
    return {
        "field": "source",
        "fields": fields,
        "name": "cockroachdb.source",
        "optional": True,
        "type": "struct",
    }


_AVRO_TYPES = {"string": "string", "int32": "int", "int64": "long"}


def avro_source_schema(namespace: str = "") -> dict[str, Any]:
    """The Avro record ``source`` (in ``namespace``, the ``avro_schema_prefix``)."""
    fields = []
    for name, kind, _optional in SOURCE_FIELDS:
        branch: Any = {"type": "array", "items": "string"} if kind == "array" else _AVRO_TYPES[kind]
        fields.append({"name": name, "type": ["null", branch], "default": None})
    record: dict[str, Any] = {"type": "record", "name": "source", "fields": fields}
    if namespace:
        record["namespace"] = namespace
    return record


def avro_source_record(found: dict[str, Any]) -> dict[str, Any]:
    """:func:`source_object`'s object as the Avro record's datum: the fields it lacks
    (off by options) are null, as CockroachDB writes them."""
    return {name: found.get(name) for name, _kind, _optional in SOURCE_FIELDS}
