"""A changefeed job as its node's registry (:mod:`feedkv.changefeed.registry`) runs it:
the :class:`Job` protocol. A thread of the node (:mod:`feedkv.changefeed.thread_job`)
and a Spark query (:class:`feedkv.spark.runner.SparkJob`) are the two kinds."""

from __future__ import annotations

from typing import Protocol

from feedkv.changefeed.changefeed import ChangefeedSpec
from feedkv.changefeed.retrying import Retrying
from feedkv.util.hlc import Timestamp

__all__ = ["Job"]


class Job(Protocol):
    """A running changefeed job: :meth:`run` blocks until it ends (raising how it
    failed), :meth:`close` stops it from another thread."""

    @property
    def spec(self) -> ChangefeedSpec: ...

    @property
    def high_water(self) -> Timestamp: ...

    @property
    def retrying(self) -> Retrying | None:
        """The failure the job is retrying inside itself (a sink it restarts), until it
        makes progress; ``None`` when it retries nothing or leaves retries to the
        registry (by raising)."""
        ...

    def run(self) -> None: ...

    def close(self) -> None: ...
