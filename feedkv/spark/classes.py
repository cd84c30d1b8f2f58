"""An archive of the classes Spark's JVM loads, so that it starts in half the time.

A local Spark session's JVM spends about half its start loading and verifying Spark's
classes. Java's class data sharing maps them from an archive instead: :func:`record`
runs Spark once with ``-XX:ArchiveClassesAtExit`` (a session and a changefeed job's
first batch, so the classes of the Python data sources and of streaming are in it), and
:func:`~feedkv.spark.session.spark_session` starts the JVM with ``-XX:SharedArchiveFile``
when the archive for this Java and this Spark is there (:func:`archive`). Measured on
two cores (a session, then a changefeed job on it, twice each way): the session in
5.1-5.5 s instead of 10.1-10.5, the job's first high-water mark 10.1-10.5 s after its
creation instead of 13.1.

The archive is keyed by the Java runtime (its path, size and time) and Spark's version
and options, and kept in the user's cache (``$XDG_CACHE_HOME/feedkv``, else
``~/.cache/feedkv``, about 160 MB). A truncated archive crashes the JVM (seen: SIGBUS),
so :func:`record` writes under another name and renames the file into place only once
the JVM that wrote it has exited cleanly. With no archive (never recorded, or a runtime
that cannot write one), Spark starts as it always did. ``python -m
feedkv.spark.classes`` records it when missing (``make spark-classes``, which ``make
test`` and ``make demo`` run).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from feedkv.errors import FeedKVError
from feedkv.spark.java import java_home

if TYPE_CHECKING:
    from feedkv.db import DB

__all__ = ["archive", "archive_path", "record"]

_RECORD_TIMEOUT_S = 300.0
# NB: a store closing 200 ms behind and a job checkpointing as often, so the job's first
# high-water mark is not kept waiting
_OPTIONS = "diff, resolved = '200ms', min_checkpoint_frequency = '200ms'"


def archive_path(java_options: str) -> Path:
    """Where the archive of this Java and Spark, started with ``java_options``, is kept."""
    import pyspark

    home = os.environ.get("JAVA_HOME")  # NB: the runtime Spark starts, once a session set it
    java = (Path(home or java_home()) / "bin" / "java").resolve()
    stat = java.stat()
    key = "\n".join(
        (str(java), str(stat.st_size), str(stat.st_mtime_ns), pyspark.__version__, java_options)
    )
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "feedkv"
    return cache / f"spark-classes-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def archive(java_options: str) -> Path | None:
    """The archive for ``java_options``, if it has been recorded."""
    path = archive_path(java_options)
    return path if path.is_file() else None


def record(java_options: str) -> Path | None:
    """Record the archive for ``java_options`` (unless it exists): start Spark in this
    process with the JVM writing the classes it loaded at its exit, run a changefeed
    job's first batch, stop the JVM. Returns the archive, or ``None`` if the runtime
    wrote none. This process cannot start Spark again afterwards."""
    import feedkv
    from feedkv.kv.store import StoreConfig
    from feedkv.spark.session import spark_session

    path = archive_path(java_options)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned_parts(path)
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    # NB: the JVM warns of each class it leaves out (a signed jar's, say); errors stay
    options = f"{java_options} -XX:ArchiveClassesAtExit={part} -Xlog:cds*=error"
    spark = spark_session(config={"spark.driver.extraJavaOptions": options})
    try:
        with tempfile.TemporaryDirectory(prefix="feedkv-spark-classes-") as name:
            config = StoreConfig(
                sync=False, closed_ts_target_ns=200_000_000, closed_ts_interval_s=0.05
            )
            with feedkv.connect(Path(name) / "store", config=config) as db:
                _first_batch(db, Path(name) / "out")
    finally:
        spark.stop()
        jvm = spark.sparkContext._gateway.proc  # type: ignore[union-attr]
        jvm.stdin.close()  # the gateway's JVM exits when its stdin closes
        exited = jvm.wait(timeout=_RECORD_TIMEOUT_S)
    if exited != 0 or not part.is_file():
        part.unlink(missing_ok=True)
        return None
    part.replace(path)
    return path


def _remove_abandoned_parts(path: Path) -> None:
    """Remove the parts of ``path`` that recordings left when killed (their process is
    gone)."""
    for part in path.parent.glob(f"{path.name}.*.part"):
        try:
            os.kill(int(part.name.split(".")[-2]), 0)
        except ProcessLookupError:
            part.unlink(missing_ok=True)
        except (ValueError, PermissionError):
            pass  # not a part of ours, or another user's process: alive


def _first_batch(db: DB, out: Path) -> None:
    """A changefeed job on Spark, to its first high-water mark, then cancelled."""
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'one')")
    [(job_id,)] = db.sql(f"CREATE CHANGEFEED FOR TABLE t INTO 'file://{out}' WITH {_OPTIONS}").rows
    deadline = time.monotonic() + _RECORD_TIMEOUT_S
    while (job := db.changefeeds.record(int(job_id))) is None or job.high_water is None:
        if job is not None and job.error:
            raise FeedKVError(f"the job run to record Spark's classes failed: {job.error}")
        if time.monotonic() > deadline:
            raise FeedKVError("the job run to record Spark's classes made no progress")
        time.sleep(0.1)  # NB: a one-off run that polls its job's record, as SHOW JOB would
    db.sql(f"CANCEL JOB {job_id}")


def main() -> int:
    from feedkv.spark.session import JAVA_OPTIONS

    recorded = record(JAVA_OPTIONS)
    print(
        f"Spark's classes: {recorded}"
        if recorded is not None
        else "Spark's classes: this Java runtime wrote no archive; Spark starts without one",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
