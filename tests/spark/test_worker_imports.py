"""What a Spark worker of feedkv's data sources imports. Each of the dozen Python workers
that a job's first batch starts imports them afresh, so they leave out what a process
that reaches the node over gRPC never uses: the node's server and store, and the SQL
parser (only a CDC query needs it); and they import PySpark's compiled modules from the
installed package, not its source from the zips Spark puts first on their path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyspark
import pytest

from feedkv.spark.session import worker_python

NOT_IN_A_WORKER = ("feedkv.server.node", "feedkv.kv.server", "feedkv.kv.store", "sqlglot")
WORKER_IMPORTS = (
    "feedkv.spark.changefeed_job",
    "feedkv.spark.source",
    "feedkv.kv.grpc_transport",
    "feedkv.rangefeed.grpc_transport",
)


def test_a_spark_worker_imports_neither_the_node_nor_the_sql_parser() -> None:
    code = (
        f"import sys, {', '.join(WORKER_IMPORTS)}\n"
        f"print(' '.join(m for m in {NOT_IN_A_WORKER!r} if m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.split() == []


def test_a_spark_worker_imports_the_installed_pyspark_not_the_zip(spark: Any) -> None:
    installed = Path(pyspark.__file__ or "").parent
    # NB: a function made here, so that it is pickled whole, not as a name of this module
    rdd = spark.sparkContext.parallelize([0], 1)
    (imported,) = rdd.map(lambda _: __import__("pyspark").__file__).collect()
    assert Path(imported) == installed / "__init__.py"


def test_the_worker_python_drops_only_the_installed_pysparks_zips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    zips = tmp_path / "site" / "pyspark" / "python" / "lib"
    kept = [str(tmp_path / "a b"), str(tmp_path / "other" / "pyspark.zip"), str(zips)]
    entries = [str(zips / "pyspark.zip"), kept[0], str(zips / "py4j-src.zip"), *kept[1:]]
    code = "import os, sys; print(os.environ['PYTHONPATH']); print(sys.argv[1:])"
    run = subprocess.run(
        [worker_python(zips), "-c", code, "x y", "*"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(entries)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.splitlines() == [os.pathsep.join(kept), "['x y', '*']"]


def test_with_no_cache_to_write_to_the_workers_run_this_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cache").write_text("a file where the cache folder would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert worker_python(tmp_path / "site" / "pyspark" / "python" / "lib") == sys.executable
