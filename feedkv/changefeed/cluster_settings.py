"""Cluster settings: ``SET`` / ``SHOW`` / ``RESET CLUSTER SETTING``.

``server.time_until_store_dead`` is how long a node must have been dead before the
lease holders of its ranges replace its replicas on live nodes (CockroachDB's, 5m by
default; read by every node, :mod:`feedkv.server.zones`).

``spark.master`` is the Spark master URL jobs run on (a node's ``--spark-master`` comes
first; empty: the default, ``$FEEDKV_SPARK_MASTER`` or ``local[*]``). A node's Spark
session starts with its first job, so a change applies to the jobs of nodes started
after it. A value Spark would not take is refused when it is set.

``kv.rangefeed.enabled`` is always true: feedkv's ranges serve rangefeeds from the start,
so the ``SET CLUSTER SETTING kv.rangefeed.enabled = true`` that CockroachDB's changefeed
tutorials begin with does nothing, and turning it off is refused.

``jobs.retention_time`` is how long the record of a finished job is kept (CockroachDB's,
14 days by default): older schema-change job records are deleted when the next one is
written (:mod:`feedkv.sql.schema_jobs`).

``cluster.organization`` is the organization's name, any text (empty by default): kept
and shown, as CockroachDB keeps it for its licence; feedkv checks no licence.

``sql.analytic_cache.max_bytes`` bounds each gateway's columnar cache of tables, which
the vectorized path of analytic SELECTs reads (:mod:`feedkv.sql.columnar`): a size such
as ``512MiB`` (default 256MiB; ``0`` keeps no copy). A node reads it again within 10 s.

``version`` is the cluster's active version, the CockroachDB version feedkv answers as
(23.1): shown, and setting it to that same version does nothing (CockroachDB's way to
finalize an upgrade); feedkv has no other version to move to.
"""

from __future__ import annotations

import re

from feedkv.errors import InvalidArgumentError, SQLError
from feedkv.rangefeed.feed_client import KV
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.columnar import DEFAULT_MAX_BYTES, MAX_BYTES_SETTING
from feedkv.sql.execution import Result
from feedkv.sql.schema_jobs import RETENTION_SETTING, parse_retention_ns
from feedkv.sql.session_vars import CLUSTER_VERSION
from feedkv.util.units import parse_size

__all__ = [
    "CLUSTER_SETTINGS",
    "check_setting",
    "check_spark_master",
    "run_setting",
    "time_until_store_dead_ns",
]

RANGEFEED_ENABLED = "kv.rangefeed.enabled"
TIME_UNTIL_STORE_DEAD_DEFAULT = "5m0s"
RETENTION_DEFAULT = "336h0m0s"  # as CockroachDB shows its 14 days
# Each setting's type, as CockroachDB's SHOW CLUSTER SETTINGS gives it (s string, d
# duration, b bool, z byte size, m version), its value when none was set, and what it is.
_SETTINGS = {
    "cluster.organization": ("s", "", "the organization's name (kept and shown only)"),
    RETENTION_SETTING: ("d", RETENTION_DEFAULT, "how long a finished job's record is kept"),
    RANGEFEED_ENABLED: ("b", "true", "rangefeeds are served (always, here)"),
    "server.time_until_store_dead": (
        "d",
        TIME_UNTIL_STORE_DEAD_DEFAULT,
        "how long a node must have stopped heartbeating before its replicas move to live nodes",
    ),
    "spark.master": ("s", "", "the Spark master changefeed jobs run on (empty: local)"),
    MAX_BYTES_SETTING: (
        "z",
        f"{DEFAULT_MAX_BYTES >> 20}MiB",
        "the most each gateway keeps in its columnar copy of tables for analytic SELECTs",
    ),
    "version": ("m", CLUSTER_VERSION, "the cluster's active version"),
}
CLUSTER_SETTINGS = tuple(_SETTINGS)
_SPARK_MASTERS = re.compile(r"^(local(\[(\*|\d+)(,\d+)?\])?|(spark|mesos|k8s)://.+|yarn)$")


def check_spark_master(url: str) -> None:
    """Refuse a ``spark.master`` Spark would not take (SQLSTATE 22023)."""
    if not _SPARK_MASTERS.match(url):
        raise SQLError(
            "22023",
            f"spark.master {url!r} is not a Spark master URL: expected local, local[N], "
            "local[*], spark://host:port, yarn, k8s://... or mesos://...",
        )


def time_until_store_dead_ns(value: str) -> int:
    """``server.time_until_store_dead``'s value; SQLSTATE 22023 when it is not a
    positive duration."""
    return catalog.setting_duration_ns("server.time_until_store_dead", value)


def check_setting(name: str, value: str) -> None:
    """Refuse a value setting ``name`` would not take (SQLSTATE 22023)."""
    if name == "spark.master":
        check_spark_master(value)
    elif name == "server.time_until_store_dead":
        time_until_store_dead_ns(value)
    elif name == MAX_BYTES_SETTING:
        try:
            size = parse_size(value)
        except InvalidArgumentError as exc:
            raise SQLError("22023", f"{MAX_BYTES_SETTING}: {exc}") from None
        if size < 0:
            raise SQLError("22023", f"{MAX_BYTES_SETTING} {value!r} must be >= 0")
    elif name == RETENTION_SETTING:
        parse_retention_ns(value)


def run_setting(db: KV, statement: st.ClusterSetting) -> Result:
    """Run ``SHOW``, ``SET`` or ``RESET CLUSTER SETTING``, or ``SHOW CLUSTER SETTINGS``
    (through ``db``)."""
    name = statement.name
    if statement.action == "list":
        snapshot = catalog.Snapshot(db, db.now())  # NB: every setting as of one time
        rows = [
            (setting, _shown(snapshot, setting), kind, description)
            for setting, (kind, _default, description) in sorted(_SETTINGS.items())
        ]
        return Result(columns=catalog.SETTINGS_COLUMNS, rows=rows, tag=f"SHOW {len(rows)}")
    if name not in CLUSTER_SETTINGS:
        raise SQLError(
            "42704",
            f"unknown cluster setting {name!r}; feedkv has {', '.join(CLUSTER_SETTINGS)}",
        )
    if name == RANGEFEED_ENABLED:
        return _rangefeed_enabled(statement)
    if name == "version":
        return _version(statement)
    key = catalog.setting_key(name)
    if statement.action == "show":
        shown = _shown(catalog.Snapshot(db, db.now()), name)
        return Result(columns=(name,), rows=[(shown,)], tag="SHOW")
    if statement.action == "set" and statement.value:
        check_setting(name, statement.value)
        value = statement.value.encode()
        db.run_transaction(lambda txn: txn.put(key, value))
    else:
        db.run_transaction(lambda txn: txn.delete(key))
    return Result(tag="SET CLUSTER SETTING")


def _shown(reader: catalog.Reader, name: str) -> str:
    """Setting ``name``'s value as SHOW gives it: the one set, else its default (always
    the default for kv.rangefeed.enabled and version, which keep theirs)."""
    default = _SETTINGS[name][1]
    if name in (RANGEFEED_ENABLED, "version"):
        return default
    shown = catalog.get_setting(reader, name)
    return default if shown is None else shown


def _version(statement: st.ClusterSetting) -> Result:
    """``version``: shown as the version feedkv answers as; set to it, nothing to do."""
    if statement.action == "show":
        return Result(columns=("version",), rows=[(CLUSTER_VERSION,)], tag="SHOW")
    if statement.action == "set" and statement.value != CLUSTER_VERSION:
        raise SQLError(
            "22023",
            f"cannot set version to {statement.value!r}: the cluster runs {CLUSTER_VERSION} "
            "and has no other version to move to",
        )
    if statement.action == "reset":
        raise SQLError("22023", "version cannot be reset: it is the version the cluster runs")
    return Result(tag="SET CLUSTER SETTING")


def _rangefeed_enabled(statement: st.ClusterSetting) -> Result:
    """``kv.rangefeed.enabled``: shown true; set to true (or reset), nothing to do."""
    if statement.action == "show":
        return Result(columns=(RANGEFEED_ENABLED,), rows=[(True,)], tag="SHOW")
    if statement.action == "set" and statement.value not in ("true", "t", "on", "1"):
        raise SQLError(
            "0A000",
            f"{RANGEFEED_ENABLED} cannot be turned off: feedkv's ranges always serve "
            "rangefeeds (changefeeds need them)",
        )
    return Result(tag="SET CLUSTER SETTING")
