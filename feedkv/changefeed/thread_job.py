"""Changefeed jobs run by a thread of the node (the ``thread`` runner): the changefeed
core alone, for its tests and for programs without Java."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from feedkv.changefeed.changefeed import Changefeed
from feedkv.changefeed.enriched_source import UNKNOWN_SOURCE, FeedSource, sink_type
from feedkv.changefeed.job import Job
from feedkv.changefeed.jobs import JobRecord
from feedkv.changefeed.metrics import ChangefeedMetrics
from feedkv.changefeed.node_buffers import NodeBuffers
from feedkv.changefeed.retrying import Retrying
from feedkv.changefeed.sink import Sink, make_sink, parse_sink_uri
from feedkv.util.hlc import Timestamp

if TYPE_CHECKING:
    from feedkv.changefeed.registry import JobFactory
    from feedkv.changefeed.sinks.cloud_storage import NodeBlobsOf
    from feedkv.rangefeed.client import FeedRange
    from feedkv.sql.client import SQLClient

__all__ = ["ThreadJob", "thread_jobs"]


class ThreadJob:
    """A changefeed run by a thread of this process into its own sink."""

    def __init__(self, changefeed: Changefeed, sink: Sink) -> None:
        self.changefeed = changefeed
        self.spec = changefeed.spec
        self._sink = sink

    @property
    def high_water(self) -> Timestamp:
        return self.changefeed.high_water

    @property
    def retrying(self) -> Retrying | None:
        return self.changefeed.retrying

    @property
    def stalled_status(self) -> str | None:
        return self.changefeed.stalled_status

    @property
    def table_status(self) -> str | None:
        return self.changefeed.table_status

    @property
    def backfill_pending(self) -> int:
        return self.changefeed.backfill_pending

    @property
    def scan_fraction(self) -> float | None:
        return self.changefeed.scan_fraction

    @property
    def scanned(self) -> bool:
        return self.changefeed.scanned

    @property
    def scan_rows(self) -> int:
        return self.changefeed.scan_rows

    @property
    def rows_emitted(self) -> int:
        return self.changefeed.rows_emitted

    def lagging_ranges(self) -> int:
        return self.changefeed.lagging_ranges()

    def ranges(self) -> list[FeedRange]:
        return self.changefeed.ranges()

    def run(self) -> None:
        try:
            self.changefeed.run()
        finally:
            self._sink.close()

    def close(self) -> None:
        self.changefeed.close()


def thread_jobs(
    db: SQLClient,
    metrics: ChangefeedMetrics | None = None,
    buffers: NodeBuffers | None = None,
    node: Callable[[], FeedSource] = lambda: UNKNOWN_SOURCE,
    *,
    node_blobs: NodeBlobsOf | None = None,
) -> JobFactory:
    """Runs each job as a :class:`ThreadJob` from its high-water mark, its metrics in
    ``metrics`` (by its ``metrics_label``), its sink buffering within the node's
    ``buffers`` (:mod:`feedkv.changefeed.node_buffers`); ``node``: the identity of the
    node that runs them (its cluster and node fields, asked as each job starts: the
    node may serve SQL only after its registry exists), for the enriched envelope;
    ``node_blobs``: where a ``nodelocal://`` sink naming another node writes."""
    metrics = metrics or ChangefeedMetrics()

    def make(record: JobRecord) -> Job:
        spec = record.resume_spec()
        uri = parse_sink_uri(spec.sink_uri or "", spec.options)
        source = dataclasses.replace(
            node(), job_id=str(record.id), changefeed_sink=sink_type(spec.sink_uri)
        )
        sink = make_sink(
            uri,
            spec.options,
            start=spec.start,
            db=db,
            buffers=buffers,
            node_blobs=node_blobs,
            node_id=int(source.node_id or 1),
        )
        feed_metrics = metrics.scope(spec.options.metrics_label)
        return ThreadJob(Changefeed(db, spec, sink, metrics=feed_metrics, source=source), sink)

    return make
