"""``feedkv.connect(target)`` and the :class:`DB` it returns.

``target`` is either a store directory, which opens an embedded node in this process, or
``feedkv://host:port``, which talks to a node over gRPC. Both give the same API: the KV
calls of :class:`~feedkv.kv.db.KVClient`, change feeds (:meth:`DB.rangefeed`,
:meth:`DB.watch`) and SQL (:meth:`DB.sql`, :meth:`DB.session`). Every call is safe to
make from many threads at once.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedkv.errors import InvalidArgumentError, InvalidURLError
from feedkv.kv.address import split_host_port
from feedkv.kv.db import KVClient, LocalTransport
from feedkv.kv.router import Transport
from feedkv.rangefeed.client import FeedTransport, RangeFeed
from feedkv.rangefeed.event import Value
from feedkv.sql import catalog
from feedkv.util.hlc import Clock, Timestamp
from feedkv.util.keys import Span, check_key

if TYPE_CHECKING:
    from feedkv.changefeed.create import Changefeeds, Job
    from feedkv.changefeed.jobs import JobRecord
    from feedkv.changefeed.registry import JobFactory
    from feedkv.kv.store import StoreConfig
    from feedkv.node import Node
    from feedkv.rangefeed.store_feeds import FeedConfig
    from feedkv.sql.leases import Leases
    from feedkv.sql.session import Result, Session

__all__ = ["DB", "connect"]

SCHEME = "feedkv://"
RUNNERS = ("spark", "thread")


def connect(
    target: str | Path,
    *,
    listen: str | None = None,
    clock: Clock | None = None,
    config: StoreConfig | None = None,
    feed_config: FeedConfig | None = None,
    changefeed_runner: str = "spark",
    spark_master: str | None = None,
) -> DB:
    """Open a store directory in-process, or connect to ``feedkv://host:port``.

    The other arguments apply to an embedded node only. With ``listen`` (``HOST:PORT``)
    it also serves gRPC there. An embedded node runs the store's changefeed jobs,
    resuming those that were running when it last stopped (a server runs its own);
    ``changefeed_runner`` says how: ``spark`` (a Spark Structured Streaming query on
    ``spark_master``, by default ``$FEEDKV_SPARK_MASTER`` or ``local[*]``;
    :mod:`feedkv.spark.runner`) or ``thread`` (a thread of this process: the changefeed
    core alone, for its tests and for programs without Java).
    """
    if changefeed_runner not in RUNNERS:
        raise InvalidArgumentError(
            f"changefeed_runner={changefeed_runner!r}: expected one of {', '.join(RUNNERS)}"
        )
    text = str(target)
    if "://" in text:
        address = split_host_port(text.removeprefix(SCHEME).rstrip("/"))
        if not text.startswith(SCHEME) or address is None or not address[0]:
            raise InvalidURLError(
                f"cannot connect to {text!r}: expected feedkv://host:port or a store directory"
            )
        if address[1] == 0:
            raise InvalidURLError(f"cannot connect to {text!r}: port 0 is not a node's port")
        from feedkv.kv.grpc_transport import GrpcTransport
        from feedkv.rangefeed.grpc_transport import GrpcFeedTransport

        transport = GrpcTransport(*address)
        feeds = GrpcFeedTransport(transport.channel, transport.address)
        return DB(transport, feeds, target=text, changefeed_runner=changefeed_runner)
    if not text:
        raise InvalidURLError("cannot connect to '': give a store directory or feedkv://host:port")
    # NB: imported here, as the gRPC client above is: a process that only connects to a
    # server (a Spark worker, of which a job's first batch starts a dozen) does not pay
    # for importing the node's server and store
    from feedkv.node import Node

    node = Node(text, listen=listen, config=config, feed_config=feed_config, clock=clock)
    db = DB(
        LocalTransport(node.store, owned=False),
        node.feeds,
        target=text,
        node=node,
        changefeed_runner=changefeed_runner,
        spark_master=spark_master,
    )
    node.store.protected = db._protected_by_jobs
    try:
        if db.scan(*catalog.job_span(), limit=1):
            db.changefeeds.start()  # resume the jobs this node was running
    except BaseException:
        db.close()
        raise
    return db


class DB(KVClient):
    def __init__(
        self,
        transport: Transport,
        feeds: FeedTransport,
        *,
        target: str = "",
        node: Node | None = None,
        changefeed_runner: str = "spark",
        spark_master: str | None = None,
    ) -> None:
        super().__init__(transport, target=target)
        self.changefeed_runner = changefeed_runner
        self.spark_master = spark_master
        self._feeds = feeds
        self._node = node
        self._open_feeds: weakref.WeakSet[RangeFeed] = weakref.WeakSet()
        self._feeds_lock = threading.Lock()
        self._sessions = threading.local()
        self._changefeeds: Changefeeds | None = None
        self._leases: Leases | None = None

    @property
    def node(self) -> Node | None:
        """The embedded node (``None`` when connected to a server)."""
        return self._node

    def serving_url(self) -> str:
        """A ``feedkv://`` URL other processes can reach this database at: the server's
        own, or (embedded) the node's, which starts serving on a loopback port."""
        if self._node is None:
            return self.target
        return self._node.serve()

    def rangefeed(
        self,
        spans: Span | Iterable[Span],
        since: Timestamp,
        *,
        with_diff: bool = False,
        values: bool = True,
        timestamp_order: bool = False,
    ) -> RangeFeed:
        """Every change in ``spans`` after ``since`` (exclusive), with checkpoints; see
        :mod:`feedkv.rangefeed.client`. Iterate it (or ``async for``); ``close()`` ends it.

        Each key's values come in timestamp order. The history before the first
        checkpoint (the catch-up scan) comes in timestamp order across keys too with
        ``timestamp_order``; without, a range that holds fewer versions than the store
        changed since ``since`` sends its history by key, which costs what the range
        holds instead of the whole store's changes. ``with_diff`` adds each value's
        previous value. ``values=False`` gives a
        checkpoint-only feed, for following the resolved timestamp: the same checkpoints,
        no values, and the nodes skip the catch-up scan and the per-write fan-out for it.
        It cannot be combined with ``with_diff`` (:class:`~feedkv.errors.InvalidArgumentError`).
        """
        return self._track(
            RangeFeed(
                self._feeds,
                self._router,
                [spans] if isinstance(spans, Span) else spans,
                since,
                with_diff=with_diff,
                values=values,
                timestamp_order=timestamp_order,
            )
        )

    def watch(
        self, key: bytes, *, prefix: bool = False, since: Timestamp | None = None
    ) -> RangeFeed:
        """etcd-style: every change of ``key`` (or of every key under it, with ``prefix``)
        as :class:`~feedkv.rangefeed.event.Value` events, history in timestamp order as
        etcd replays revisions. With no ``since``, first the current value(s), then every
        change after them."""
        check_key(key)
        span = Span.for_prefix(key) if prefix else Span.for_key(key)
        initial: list[Value] = []
        if since is None:
            since = self.now()
            initial = [
                Value(kv.key, kv.value, kv.ts)
                for kv in self.scan(span.start, span.end, as_of=since)
            ]
        return self._track(
            RangeFeed(
                self._feeds,
                self._router,
                [span],
                since,
                values_only=True,
                timestamp_order=True,
                initial=initial,
            )
        )

    def sql(self, statement: str, *params: Any) -> Result:
        """Run SQL (``$1``, ``$2``... take ``params``) as ``root`` in ``defaultdb`` and
        return the last statement's :class:`~feedkv.sql.session.Result` (rows, column
        names, tag). Each thread has its own session, so ``BEGIN`` ... ``COMMIT`` works
        across calls from one thread."""
        session = getattr(self._sessions, "session", None)
        if session is None:
            session = self._sessions.session = self.session()
        return session.execute(statement, *params)

    def session(self, *, user: str = "root", database: str = "defaultdb") -> Session:
        """A new SQL session (see :mod:`feedkv.sql.session`)."""
        from feedkv.sql.session import Session

        return Session(
            self,
            user=user,
            database=database,
            changefeeds=self.changefeeds,
            leases=self.leases,
        )

    @property
    def leases(self) -> Leases:
        """The descriptor leases this client's SQL sessions share."""
        with self._feeds_lock:
            if self._leases is None:
                from feedkv.sql.leases import Leases

                self._leases = Leases(self)
            return self._leases

    @property
    def changefeeds(self) -> Changefeeds:
        """Changefeeds and changefeed jobs (an embedded node's job registry runs them)."""
        with self._feeds_lock:
            if self._changefeeds is None:
                from feedkv.changefeed.create import Changefeeds, thread_jobs
                from feedkv.changefeed.registry import JobRegistry

                registry = None
                if self._node is not None:
                    spark = self.changefeed_runner == "spark"
                    make_job = self._spark_jobs(self._node) if spark else thread_jobs(self)
                    registry = JobRegistry(self, self._node.node_id, make_job)
                self._changefeeds = Changefeeds(self, registry)
            return self._changefeeds

    def _protected_by_jobs(self) -> list[tuple[Span, Timestamp]]:
        """The history changefeed jobs still need (garbage collection keeps it)."""
        from feedkv.changefeed.jobs import protected_spans

        return protected_spans(catalog.Snapshot(self, self.now()))

    def jobs_spark_master(self) -> str | None:
        """The Spark master this node's Spark session starts on, with its first job:
        this node's ``spark_master`` (``--spark-master``), else the ``spark.master``
        cluster setting, else ``None`` (``$FEEDKV_SPARK_MASTER`` or ``local[*]``). Later
        jobs share that session."""
        if self.spark_master:
            return self.spark_master
        return catalog.get_setting(catalog.Snapshot(self, self.now()), "spark.master")

    def _spark_jobs(self, node: Node) -> JobFactory:
        """Runs each job as a Spark query whose checkpoint lives in the store directory
        (PySpark is imported when the first job starts, not with the first session)."""

        def make(record: JobRecord) -> Job:
            from feedkv.spark.runner import SparkJob

            checkpoint = node.path / "changefeed-jobs" / str(record.id) / "checkpoint"
            return SparkJob(
                self.serving_url(),
                record.id,
                record.resume_spec(),
                checkpoint,
                master=self.jobs_spark_master(),
            )

        return make

    def close(self) -> None:
        """Stop changefeeds, close open feeds, then the connection (and an embedded node).
        Idempotent."""
        if self._changefeeds is not None:
            self._changefeeds.close()
        if self._leases is not None:
            self._leases.close()
        with self._feeds_lock:
            feeds = list(self._open_feeds)
        for feed in feeds:
            feed.close()
        if self._node is None:
            self._feeds.close()  # an embedded node's feeds stop with the node
        super().close()
        if self._node is not None:
            self._node.stop()

    def _track(self, feed: RangeFeed) -> RangeFeed:
        with self._feeds_lock:
            self._open_feeds.add(feed)
        return feed
