"""Cluster settings: ``SET`` / ``SHOW`` / ``RESET CLUSTER SETTING``, all about how
changefeed jobs run.

``spark.master`` is the Spark master URL jobs run on (a node's ``--spark-master`` comes
first; empty: the default, ``$FEEDKV_SPARK_MASTER`` or ``local[*]``). A node's Spark
session starts with its first job, so a change applies to the jobs of nodes started
after it. A value Spark would not take is refused when it is set.
"""

from __future__ import annotations

import re

from feedkv.errors import SQLError
from feedkv.rangefeed.feed_client import KV
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.execution import Result

__all__ = ["CLUSTER_SETTINGS", "check_spark_master", "run_setting"]

CLUSTER_SETTINGS = ("spark.master",)
_SPARK_MASTERS = re.compile(r"^(local(\[(\*|\d+)(,\d+)?\])?|(spark|mesos|k8s)://.+|yarn)$")


def check_spark_master(url: str) -> None:
    """Refuse a ``spark.master`` Spark would not take (SQLSTATE 22023)."""
    if not _SPARK_MASTERS.match(url):
        raise SQLError(
            "22023",
            f"spark.master {url!r} is not a Spark master URL: expected local, local[N], "
            "local[*], spark://host:port, yarn, k8s://... or mesos://...",
        )


def run_setting(db: KV, statement: st.ClusterSetting) -> Result:
    """Run ``SHOW``, ``SET`` or ``RESET CLUSTER SETTING`` (through ``db``)."""
    name = statement.name
    if name not in CLUSTER_SETTINGS:
        raise SQLError(
            "42704",
            f"unknown cluster setting {name!r}; feedkv has {', '.join(CLUSTER_SETTINGS)}",
        )
    key = catalog.setting_key(name)
    if statement.action == "show":
        shown = catalog.get_setting(catalog.Snapshot(db, db.now()), name)
        return Result(columns=(name,), rows=[(shown or "",)], tag="SHOW")
    if statement.action == "set" and statement.value:
        check_spark_master(statement.value)
        value = statement.value.encode()
        db.run_transaction(lambda txn: txn.put(key, value))
    else:
        db.run_transaction(lambda txn: txn.delete(key))
    return Result(tag="SET CLUSTER SETTING")
