"""A node's changefeed jobs: the runner that runs them, and the history they keep.

A node (embedded by ``feedkv.connect(path)``, or ``feedkv start``) runs the changefeed
jobs recorded in its store through a :class:`~feedkv.changefeed.registry.JobRegistry`.
Its ``runner`` says how each job runs:

- ``spark``: a Spark Structured Streaming query (:class:`feedkv.spark.runner.SparkJob`)
  on the jobs' Spark master (:func:`jobs_spark_master`), reading the node through its
  gRPC port (started for it), its checkpoint in the store directory. PySpark is imported
  when the first job starts, not with the node.
- ``thread``: a thread of this process (a
  :class:`~feedkv.changefeed.thread_job.ThreadJob`): the changefeed core alone, for its
  tests and for programs without Java.

The registry and thread jobs work through ``client``, the node's own SQL client (the
:class:`feedkv.DB` that opened the node).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from feedkv.errors import InvalidArgumentError
from feedkv.security.external_io import NODELOCAL, confine, nodelocal_parts, nodelocal_to_file
from feedkv.sql import catalog
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

# NB: the changefeed machinery is imported when the node first runs its jobs, not with
# the node: a client of a server never does
if TYPE_CHECKING:
    from feedkv.changefeed.enriched_source import FeedSource
    from feedkv.changefeed.job import Job
    from feedkv.changefeed.jobs import JobRecord
    from feedkv.changefeed.metrics import ChangefeedMetrics
    from feedkv.changefeed.registry import JobFactory, JobRegistry
    from feedkv.rangefeed.feed_client import KV
    from feedkv.server.node import Node
    from feedkv.sql.client import SQLClient

__all__ = [
    "RUNNERS",
    "check_runner",
    "confined",
    "job_registry",
    "jobs_spark_master",
    "node_source",
    "protect_job_history",
    "spark_jobs",
]

RUNNERS = ("spark", "thread")


def check_runner(runner: str) -> None:
    """Refuse a runner that is not one of :data:`RUNNERS`."""
    if runner not in RUNNERS:
        raise InvalidArgumentError(
            f"changefeed_runner={runner!r}: expected one of {', '.join(RUNNERS)}"
        )


def job_registry(
    node: Node,
    client: SQLClient,
    *,
    runner: str,
    spark_master: Callable[[], str | None],
    metrics: ChangefeedMetrics,
) -> JobRegistry:
    """The registry that runs ``node``'s jobs on ``runner``; ``spark_master`` answers,
    when a Spark job starts, the master to start it on."""
    from feedkv.changefeed.registry import JobRegistry
    from feedkv.changefeed.thread_job import thread_jobs

    make_job = (
        spark_jobs(node, spark_master)
        if runner == "spark"
        else thread_jobs(
            client,
            metrics,
            node.changefeed_buffers,
            lambda: node_source(node),
            node_blobs=node.node_blobs,
        )
    )
    node_dead = node.cluster.node_dead if node.cluster is not None else None
    return JobRegistry(
        client,
        node.node_id,
        confined(node, make_job),
        metrics=metrics,
        node_dead=node_dead,
        locality=node.cluster.me.locality if node.cluster is not None else None,
        reports_stats=node.cluster.reports_job_stats if node.cluster is not None else None,
    )


def node_source(node: Node) -> FeedSource:
    """What a node says of itself in the enriched envelope's ``source``: its cluster's
    id, its node id and locality, and the host its SQL port listens on (CockroachDB's
    node name).
    A node of its own is a cluster of one, named by the id its store keeps."""
    from feedkv.changefeed.enriched_source import FeedSource

    cluster = node.cluster
    sql = node.sql_server
    return FeedSource(
        cluster_id=cluster.ident.cluster_id if cluster is not None else node.node_id,
        node_id=str(cluster.ident.node_id) if cluster is not None else "1",
        node_name=sql.host if sql is not None else "",
        source_node_locality=str(cluster.me.locality) if cluster is not None else "",
    )


def confined(node: Node, make_job: JobFactory) -> JobFactory:
    """``make_job``, refusing (the job fails, saying why) a sink whose local paths (a
    ``file://`` or ``delta://`` sink's directory, an ``iceberg://`` SQL catalog's
    warehouse) lie outside the node's external I/O directory: CREATE checks them where
    it runs on a node, but a client of a server (root over gRPC) plans its changefeeds
    in its own process. A ``nodelocal://`` sink naming this node (or ``self``) runs as
    the ``file://`` sink below this node's directory; one naming another node writes
    there (:meth:`Node.node_blobs`)."""
    root = node.external_io_dir
    if root is None:
        return make_job

    def make(record: JobRecord) -> Job:
        from feedkv.changefeed.sink import local_paths, parse_sink_uri

        uri = urlsplit(record.spec.sink_uri or "")
        if uri.scheme == NODELOCAL:
            node_id, _path = nodelocal_parts(record.spec.sink_uri or "")
            if node_id is None or node_id == node.store.node_id:
                local = nodelocal_to_file(record.spec.sink_uri or "", root)
                record = record.replace(spec=dataclasses.replace(record.spec, sink_uri=local))
        elif record.spec.sink_uri:
            for path in local_paths(parse_sink_uri(record.spec.sink_uri, record.spec.options)):
                confine(path, root)
        return make_job(record)

    return make


def jobs_spark_master(client: KV, spark_master: str | None) -> str | None:
    """The Spark master a node's Spark session starts on, with its first job: the
    node's ``spark_master`` (``--spark-master``), else the ``spark.master`` cluster
    setting, else ``None`` (``$FEEDKV_SPARK_MASTER`` or ``local[*]``). Later jobs share
    that session."""
    if spark_master:
        return spark_master
    return catalog.get_setting(catalog.Snapshot(client, client.now()), "spark.master")


def spark_jobs(node: Node, spark_master: Callable[[], str | None]) -> JobFactory:
    """Runs each job as a Spark query whose checkpoint lives in the store directory
    (PySpark is imported when the first job starts, not with the first session)."""

    def make(record: JobRecord) -> Job:
        from feedkv.spark.runner import SparkJob

        _confine_staging(node, record)
        checkpoint = node.path / "changefeed-jobs" / str(record.id) / "checkpoint"
        return SparkJob(
            node.serve(),
            record.id,
            record.resume_spec(),
            checkpoint,
            master=spark_master(),
            node=node_source(node),
            metrics=node.metrics.changefeeds.scope(record.spec.options.metrics_label),
            buffers=node.changefeed_buffers,
        )

    return make


def _confine_staging(node: Node, record: JobRecord) -> None:
    """Refuse (the job fails, saying why) a Spark job whose ``file://`` sink stages its
    files beside the sink (:func:`~feedkv.changefeed.sinks.batch_publisher.layout`)
    outside the node's external I/O directory, as :func:`confined` refuses the sink
    itself there."""
    root = node.external_io_dir
    if root is None or urlsplit(record.spec.sink_uri or "").scheme != "file":
        return
    from feedkv.changefeed.sink import parse_sink_uri
    from feedkv.changefeed.sinks.batch_publisher import layout

    where = layout(parse_sink_uri(record.spec.sink_uri or "", record.spec.options))
    confine(os.path.join(where.root.path, where.work), root)


def protect_job_history(node: Node, client: KV) -> None:
    """Keep the history changefeed jobs still need from ``node``'s garbage collection."""

    def protected() -> list[tuple[Span, Timestamp]]:
        from feedkv.changefeed.jobs import protected_spans

        return protected_spans(catalog.Snapshot(client, client.now()))

    node.store.protected = protected
