"""A Spark session for feedkv: local by default, with the feedkv data source registered.

``spark_session()`` finds Java (:mod:`feedkv.spark.java`), points Spark's Python workers
at this interpreter (so they import feedkv and its pinned dependencies), keeps every
socket on loopback, turns off the web UI and console progress bars, and registers
:class:`~feedkv.spark.source.FeedKVDataSource` and the changefeed jobs' source and
sink (:class:`~feedkv.spark.changefeed_job.ChangefeedDataSource`). ``master`` defaults to the
``FEEDKV_SPARK_MASTER`` environment variable, then ``local[*]``.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import TYPE_CHECKING

from feedkv.spark.java import java_home

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "spark_session"]

DEFAULT_MASTER = "local[*]"

_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.python.worker.reuse": "true",
    # NB: the JVM only moves feedkv's Arrow batches and plans micro-batches, and every
    # micro-batch kept the C2 JIT compiler busy: half a core for an idle job on local[2].
    # With the C1 compiler only, a quarter.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
}


_SESSION_LOCK = threading.Lock()
log = logging.getLogger(__name__)


def spark_session(
    master: str | None = None, *, app_name: str = "feedkv", config: dict[str, str] | None = None
) -> SparkSession:
    """The (one per process) Spark session, created on first call. Threads may call it
    at once (a job's runner, the demo's data-warehouse job): Spark's registration of a
    data source is not safe against a concurrent one."""
    with _SESSION_LOCK:
        return _spark_session(master, app_name, config)


def _spark_session(
    master: str | None, app_name: str, config: dict[str, str] | None
) -> SparkSession:
    os.environ.setdefault("JAVA_HOME", str(java_home()))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from feedkv.spark.changefeed_job import ChangefeedDataSource
    from feedkv.spark.source import FeedKVDataSource

    wanted = master or os.environ.get("FEEDKV_SPARK_MASTER") or DEFAULT_MASTER
    builder = SparkSession.builder.appName(app_name).master(wanted)
    for key, value in {**_CONFIG, **(config or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    running = spark.sparkContext.master
    if master is not None and running != wanted:
        log.warning(
            "Spark runs on %s in this process; %s applies from its next start", running, wanted
        )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(FeedKVDataSource)
    spark.dataSource.register(ChangefeedDataSource)
    return spark
