"""``feedkv.connect(target)`` and the :class:`DB` it returns.

``target`` is either a store directory, which opens an embedded node in this process, or
``feedkv://host:port``, which talks to a node over gRPC. Both give the same API: the KV
calls of :class:`~feedkv.kv.db.KVClient`, change feeds (:meth:`DB.rangefeed`,
:meth:`DB.watch`) and SQL (:meth:`DB.sql`, :meth:`DB.session`). Every call is safe to
make from many threads at once.

A program that ends (or dies of an exception) with an embedded node still open gets it
closed on the way out, before Python waits for the threads that are not daemons (a
Spark job's query, gRPC's workers serving streams to Spark's executors): its changefeed
jobs stop, still ``running`` in their records, and resume at the next open.
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401  (its exit hook must be registered first)
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedkv.errors import InvalidArgumentError, InvalidURLError
from feedkv.kv.db import LocalTransport
from feedkv.kv.router import Transport
from feedkv.rangefeed.client import FeedTransport
from feedkv.rangefeed.feed_client import KVFeedClient
from feedkv.sql import catalog
from feedkv.util.hlc import Clock

if TYPE_CHECKING:
    from feedkv.changefeed.node_buffers import NodeBuffers
    from feedkv.changefeed.service import Changefeeds
    from feedkv.kv.store import StoreConfig
    from feedkv.rangefeed.store_feeds import FeedConfig
    from feedkv.server.cluster import ClusterConfig
    from feedkv.server.node import Node
    from feedkv.sql.active_sessions import SessionRegistry
    from feedkv.sql.leases import Leases
    from feedkv.sql.session import Result, Session

__all__ = ["DB", "connect"]

log = logging.getLogger(__name__)

# NB: Python's own hook for work that must end before the threads that are not daemons
# are joined at exit (concurrent.futures uses it); atexit runs after that join, too late.
# Hooks run last registered first: concurrent.futures' (imported above) joins gRPC's
# workers, so it must run after ours.
_register_atexit: Callable[[Callable[[], None]], None] = getattr(  # noqa: B009
    threading, "_register_atexit"
)
_open_nodes: weakref.WeakSet[DB] = weakref.WeakSet()
# NB: a forked child does not own its parent's nodes: it must not close them at its exit
os.register_at_fork(after_in_child=_open_nodes.clear)
_exit_lock = threading.Lock()
_exit_hooked = False


def _close_at_exit(db: DB) -> None:
    """Close ``db`` when the interpreter exits with it open: an embedded node, or a
    client of one (whose gRPC channel, left to the garbage collector at exit, waits
    for threads that no longer run, and the process never ends)."""
    global _exit_hooked
    with _exit_lock:
        _open_nodes.add(db)
        if not _exit_hooked:
            _register_atexit(_close_open_nodes)
            _exit_hooked = True


def _close_open_nodes() -> None:
    for db in list(_open_nodes):
        if db.node is not None:
            log.info(
                "closing the store %s at exit: its changefeed jobs resume at its next open",
                db.target,
            )
        try:
            db.close()
        except Exception:  # the next one must still close
            log.exception("could not close the store %s at exit", db.target)


def connect(
    target: str | Path,
    *,
    listen: str | None = None,
    sql_addr: str | None = None,
    clock: Clock | None = None,
    config: StoreConfig | None = None,
    feed_config: FeedConfig | None = None,
    changefeed_runner: str = "spark",
    spark_master: str | None = None,
    join: Sequence[str] | None = None,
    cluster_config: ClusterConfig | None = None,
    http_addr: str | None = None,
    certs_dir: str | Path | None = None,
    user: str | None = None,
    password: str | None = None,
    external_io_dir: str | Path | None = None,
    admin_sample_s: float = 10.0,
    metrics: bool = True,
    changefeed_buffers: NodeBuffers | None = None,
    batch_addr: str | None = None,
) -> DB:
    """Open a store directory in-process, or connect to ``feedkv://host:port`` (or to
    the first that answers of several nodes of a cluster: ``feedkv://h1:p1,h2:p2``, moving
    to the next that answers when that node dies: :mod:`feedkv.kv.gateway`).

    ``certs_dir`` (or ``?certs_dir=`` in the URL): a certs directory (``feedkv cert``):
    a client connects with TLS as ``user`` (root by default; over the raw KV API of a
    secure node another user only reads the tables it holds SELECT on), proven by its
    client certificate from there or, given ``password``, by logging in with the user's
    SQL password (then ``certs_dir`` needs only the CA's ``ca.crt``); an embedded
    node serves its ports with TLS. Without
    it a client talks plaintext, which only an insecure node (``--insecure``) accepts.
    ``external_io_dir``: an embedded node's ``file://`` sinks must lie below it (``None``:
    anywhere; ``feedkv start`` gives ``<store>/extern`` by default).

    The other arguments apply to an embedded node only. With ``listen`` (``HOST:PORT``)
    it also serves gRPC there (and clients' concurrent batches on ``batch_addr``, by
    default any free port of that host), and with ``sql_addr`` PostgreSQL clients (see
    :meth:`DB.serve_sql`), with ``http_addr`` its metrics (``/_status/vars``; see
    :meth:`feedkv.server.node.Node.serve_http`) and admin page, whose charts sample the
    changefeeds every ``admin_sample_s`` seconds (``metrics=False``: its metrics record
    nothing, to measure what they cost), ``changefeed_buffers`` the limits on what its
    changefeeds buffer (:mod:`feedkv.changefeed.node_buffers`; ``None``: 512 MiB of
    memory, then 4 GiB of disk); with ``join`` too, it is a node of a
    cluster (``[]``: the first, or the one its store belongs to; else the addresses of
    members to join). An embedded node runs the store's changefeed jobs, resuming those
    that were running when it last stopped (a server runs its own);
    ``changefeed_runner`` says how: ``spark`` (a Spark Structured Streaming query on
    ``spark_master``, by default ``$FEEDKV_SPARK_MASTER`` or ``local[*]``;
    :mod:`feedkv.spark.runner`) or ``thread`` (a thread of this process: the changefeed
    core alone, for its tests and for programs without Java).
    """
    from feedkv.server.jobs import check_runner

    check_runner(changefeed_runner)
    text = str(target)
    if "://" in text:
        from feedkv.kv.grpc_transport import url_tls
        from feedkv.rangefeed.feed_client import remote_transports
        from feedkv.security.secrets import held_key

        tls = url_tls(text, certs_dir, user, password)
        transport, feeds = remote_transports(text, certs_dir, user, password=password)
        client = DB(transport, feeds, target=text, changefeed_runner=changefeed_runner)
        client.sealer = held_key(tls.certs.path if tls is not None else None)
        _close_at_exit(client)
        return client
    if not text:
        raise InvalidURLError("cannot connect to '': give a store directory or feedkv://host:port")
    # NB: imported here, as the gRPC client above is: a process that only connects to a
    # server (a Spark worker, of which a job's first batch starts a dozen) does not pay
    # for importing the node's server and store
    from feedkv.changefeed.jobs import check_secrets
    from feedkv.server.admin import Admin
    from feedkv.server.feed_history import FeedHistory
    from feedkv.server.jobs import protect_job_history
    from feedkv.server.node import Node
    from feedkv.server.zones import apply_zone_configs

    node = Node(
        text,
        listen=listen,
        config=config,
        feed_config=feed_config,
        clock=clock,
        join=join,
        cluster_config=cluster_config,
        http_addr=http_addr,
        certs_dir=certs_dir,
        external_io_dir=external_io_dir,
        metrics=metrics,
        changefeed_buffers=changefeed_buffers,
        batch_addr=batch_addr,
    )
    local: Transport = LocalTransport(node.store, owned=False)
    db = DB(
        node.cluster.dialer if node.cluster is not None else local,
        node.feed_transport,
        target=text,
        node=node,
        changefeed_runner=changefeed_runner,
        spark_master=spark_master,
    )
    db.sealer = node.sealer
    protect_job_history(node, db)
    apply_zone_configs(node, db)
    node.attach_admin(
        Admin(
            node,
            db,
            changefeeds=lambda: db.changefeeds,
            sessions=lambda user: db.session(user=user),
            verifier=db.password_verifier,
            history=FeedHistory(interval_s=admin_sample_s),
        )
    )
    _close_at_exit(db)
    try:
        check_secrets(catalog.Snapshot(db, db.now()))
        if sql_addr is not None:
            db.serve_sql(sql_addr)
        if db.scan(*catalog.job_span(), limit=1):
            db.changefeeds.start()  # resume the jobs this node was running
    except BaseException:
        db.close()
        raise
    return db


class DB(KVFeedClient):
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
        # NB: an embedded node's feeds stop with the node
        super().__init__(transport, feeds, target=target, owns_feeds=node is None)
        self.changefeed_runner = changefeed_runner
        self.spark_master = spark_master
        self._node = node
        if node is not None:
            self.txn_metrics = node.metrics.txn
        self._lock = threading.Lock()
        self._sessions = threading.local()
        self._changefeeds: Changefeeds | None = None
        self._leases: Leases | None = None
        self._active_sessions: SessionRegistry | None = None

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

    def serve_sql(self, listen: str = "127.0.0.1:0") -> str:
        """Serve PostgreSQL clients (psql, psycopg, ...) on ``listen`` from the embedded
        node, one session of this database per connection; returns the
        ``postgresql://`` URL to give them. Only an embedded node serves SQL: a server
        has its own SQL port (``feedkv start --sql-addr``)."""
        if self._node is None:
            raise InvalidArgumentError(
                f"{self.target} is a server: connect PostgreSQL clients to its SQL port"
            )
        return self._node.serve_sql(
            lambda user, database: self.session(user=user, database=database),
            listen,
            verifier=self.password_verifier,
        )

    def password_verifier(self, user: str) -> str | None:
        """``user``'s stored SCRAM verifier (``None``: no such user, or no password)."""
        found = catalog.get_user(self, user)
        return found.password_verifier if found is not None else None

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
            metrics=self._node.metrics.sql if self._node is not None else None,
            external_io_dir=self._node.external_io_dir if self._node is not None else None,
            default_replicas=self._default_replicas(),
            registry=self.active_sessions,
        )

    @property
    def active_sessions(self) -> SessionRegistry:
        """The SQL sessions open on this client's node (SHOW SESSIONS, CANCEL QUERY)."""
        if self._node is not None:
            return self._node.active_sessions
        with self._lock:
            if self._active_sessions is None:
                from feedkv.sql.active_sessions import SessionRegistry

                # NB: the local clock: the registry reads it for every statement, and a
                # remote client's now() is a round trip
                self._active_sessions = SessionRegistry(time.time_ns, self._node_id)
            return self._active_sessions

    def _node_id(self) -> int | None:
        try:
            return self.gateway_node()
        except InvalidArgumentError:
            return None  # NB: a transport that knows no node

    def _default_replicas(self) -> int:
        node = self._node
        cluster = node.cluster if node is not None else None
        return cluster.config.replicas if cluster is not None else 1

    @property
    def leases(self) -> Leases:
        """The descriptor leases this client's SQL sessions share."""
        with self._lock:
            if self._leases is None:
                from feedkv.sql.leases import Leases

                self._leases = Leases(self)
            return self._leases

    @property
    def changefeeds(self) -> Changefeeds:
        """Changefeeds and changefeed jobs (an embedded node's job registry runs them)."""
        with self._lock:
            if self._changefeeds is None:
                from feedkv.changefeed.service import Changefeeds
                from feedkv.server.jobs import job_registry, node_source

                registry = None
                metrics = None
                node = self._node
                identity = (lambda: node_source(node)) if node is not None else None
                if self._node is not None:
                    metrics = self._node.metrics.changefeeds
                    registry = job_registry(
                        self._node,
                        self,
                        runner=self.changefeed_runner,
                        spark_master=self.jobs_spark_master,
                        metrics=metrics,
                    )
                    self._node.on_drain_jobs = registry.close
                self._changefeeds = Changefeeds(
                    self,
                    registry,
                    metrics,
                    external_io_dir=(
                        self._node.external_io_dir if self._node is not None else None
                    ),
                    runner=self.changefeed_runner if registry is not None else None,
                    node=identity,
                    node_blobs=node.node_blobs if node is not None else None,
                )
            return self._changefeeds

    def jobs_spark_master(self) -> str | None:
        """The Spark master this node's Spark session starts on, with its first job:
        this node's ``spark_master`` (``--spark-master``), else the ``spark.master``
        cluster setting, else ``None`` (``$FEEDKV_SPARK_MASTER`` or ``local[*]``). Later
        jobs share that session."""
        from feedkv.server.jobs import jobs_spark_master

        return jobs_spark_master(self, self.spark_master)

    def close(self) -> None:
        """Stop changefeeds, close open feeds, then the connection (and an embedded node).
        Idempotent."""
        _open_nodes.discard(self)
        # NB: what stops from here on writes what it can, and gives up on a range it
        # would wait for (the last node of a cluster stopping has no quorum left)
        self._router.closing.set()
        if self._node is not None:
            self._node.stop_sql()  # its sessions use this client
            if self._node.admin is not None:
                self._node.admin.stop()  # it reads through this client
        if self._changefeeds is not None:
            self._changefeeds.close()
        if self._leases is not None:
            self._leases.close()
        from feedkv.sql.columnar import close_cache

        close_cache(self)  # NB: its background builds read through this client
        super().close()
        if self._node is not None:
            self._node.stop()
