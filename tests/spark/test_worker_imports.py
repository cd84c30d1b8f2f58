"""What a Spark worker of feedkv's data sources imports. Each of the dozen Python workers
that a job's first batch starts imports them afresh, so they leave out what a process
that reaches the node over gRPC never uses: the node's server and store, and the SQL
parser (only a CDC query needs it)."""

from __future__ import annotations

import subprocess
import sys

NOT_IN_A_WORKER = ("feedkv.node", "feedkv.kv.server", "feedkv.kv.store", "sqlglot")
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
