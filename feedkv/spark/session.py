"""A Spark session for feedkv: local by default, with the feedkv data source registered.

``spark_session()`` finds Java (:mod:`feedkv.spark.java`), points Spark's Python workers
at this interpreter (so they import feedkv and its pinned dependencies), keeps every
socket on loopback, turns off the web UI and console progress bars, and registers
:class:`~feedkv.spark.source.FeedKVDataSource` and the changefeed jobs' source and
sink (:class:`~feedkv.spark.changefeed_job.ChangefeedDataSource`). ``master`` defaults to the
``FEEDKV_SPARK_MASTER`` environment variable, then ``local[*]``.

A local master retries no task (``spark.task.maxFailures`` is 1 in ``local[N]``), and
feedkv's tasks need no retry to outlive a node: a task's client moves to the next node
of the source's URL and reads the rest of its piece, a fixed window, there
(:mod:`feedkv.kv.gateway`). What still fails a task fails the query (at once, where a
retry would read a terminal error again), and a changefeed job restarts it from its
checkpoint. Under a cluster master's retries the sinks keep their promises: a file
sink publishes only the files of the attempts its commit lists and deletes the rest
(:mod:`feedkv.changefeed.sinks.batch_publisher`), and at-least-once sinks may repeat.

On a local master the workers import PySpark from the installed package, not from the
zips of it Spark puts first on their ``PYTHONPATH``: Python caches no bytecode for a
zip's modules, so each of the dozen workers a changefeed job's first batch starts (a
daemon per kind: the data source's lookup, creation, planning and writing, the tasks,
the streaming source and sink) compiled PySpark's source again, a second or more each
on two cores. Spark puts its zips ahead of any path it is given, so the workers run
this interpreter through a script (:func:`worker_python`) that takes them off first;
the package holds the same modules, compiled.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from feedkv.spark.java import java_home

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "spark_session", "worker_python"]

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
    # NB: the Arrow batches the JVM hands a Python task (a changefeed's sink) hold at
    # most this: by rows alone (10,000), a task's whole window of message blocks came
    # in one batch, so what a task had in flight grew with its window, past the node's
    # changefeed memory limit (feedkv.spark.changefeed_job).
    "spark.sql.execution.arrow.maxBytesPerBatch": str(8 << 20),
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
    wanted = master or os.environ.get("FEEDKV_SPARK_MASTER") or DEFAULT_MASTER
    import pyspark
    from pyspark.sql import SparkSession

    from feedkv.spark.changefeed_job import ChangefeedDataSource
    from feedkv.spark.source import FeedKVDataSource

    zips = Path(pyspark.__file__).parent / "python" / "lib"
    local = wanted.startswith("local") and zips.is_dir()
    os.environ["PYSPARK_PYTHON"] = worker_python(zips) if local else sys.executable
    # NB: Spark looks the data sources up with the driver's Python (this process is the
    # driver already, so Spark starts no other one with it)
    os.environ["PYSPARK_DRIVER_PYTHON"] = os.environ["PYSPARK_PYTHON"]
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


def worker_python(zips: Path) -> str:
    """An executable that runs this interpreter with every ``PYTHONPATH`` entry that is a
    zip in ``zips`` (the installed PySpark's ``python/lib``) taken off: a shell script,
    written once per interpreter and PySpark to the user's cache (``$XDG_CACHE_HOME`` or
    ``~/.cache``, under ``feedkv``: not the temporary directory, whose cleaner could take
    it from a node that has run for weeks). This interpreter itself if the cache cannot
    be written."""
    script = _WORKER_PYTHON.format(zips=shlex.quote(str(zips)), python=shlex.quote(sys.executable))
    digest = hashlib.sha256(script.encode()).hexdigest()[:16]
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "feedkv"
    path = folder / f"python-{digest}"
    try:
        if not path.exists():
            folder.mkdir(parents=True, exist_ok=True)
            # NB: written whole under another name, then renamed, so that a process
            # starting Spark at the same time never runs half of it
            part = folder / f"{path.name}.{os.getpid()}.{threading.get_ident()}"
            part.write_text(script)
            part.chmod(0o755)
            part.replace(path)
    except OSError as e:
        log.warning("Spark's workers compile PySpark's zips: cannot write %s (%s)", path, e)
        return sys.executable
    return str(path)


_WORKER_PYTHON = """#!/bin/sh
# Written by feedkv.spark.session: runs {python} for Spark, without the installed
# PySpark's zips on PYTHONPATH, so it imports PySpark's compiled modules.
set -f
IFS=:
path=
for entry in $PYTHONPATH; do
    case $entry in
        {zips}/*.zip) ;;
        *) path=${{path:+$path:}}$entry ;;
    esac
done
unset IFS
PYTHONPATH=$path exec {python} "$@"
"""
