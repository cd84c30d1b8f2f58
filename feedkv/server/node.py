"""A node: a store, its rangefeeds, and (when it listens) the gRPC server in front of them
and the SQL port (PostgreSQL's wire protocol, :mod:`feedkv.pgwire`).

``feedkv.connect(path)`` runs one inside the calling process without a server;
``feedkv start`` runs one that listens; tests and embedded users that need a URL (Spark
executors are other processes) start one with ``Node(path, listen="127.0.0.1:0")``, and
one that serves PostgreSQL clients with :meth:`Node.serve_sql` (``DB.serve_sql``).
Stopping drains (:meth:`Node.drain`, which ``feedkv node drain`` runs alone, leaving the
node up): the SQL port takes no new clients and its connections close (their open
transactions roll back), and in a cluster the leases of the ranges the node leads move to
other nodes (:meth:`Cluster.drain`); then the SQL port closes, the rangefeeds end (each
stream is told ``NODE_SHUTDOWN``), the server refuses new calls and lets calls in flight
finish, then the store closes.

Ports: SQL on 26257 as CockroachDB's (``--sql-addr``), gRPC on 26258 (``--listen``):
grpcio cannot share its port with another protocol without a proxy in every call's path.
HTTP on 8080 as CockroachDB's (``--http-addr``; :meth:`Node.serve_http`): the node's
metrics (:attr:`Node.metrics`, :mod:`feedkv.server.metrics`) for Prometheus, and its
admin page (:attr:`Node.admin`, :mod:`feedkv.server.admin`), which the client that opens
the node attaches, since it reads the jobs through that client's SQL.

Security: with ``certs_dir`` every port serves TLS from that certs directory
(:mod:`feedkv.security.tls`): each gRPC call proves its caller by a claim signed with a
client certificate's key or a password login's session
(:mod:`feedkv.security.call_auth`), and users other than the nodes and root read only
the tables they may SELECT (:mod:`feedkv.kv.access`, :mod:`feedkv.sql.read_access`; a
running rangefeed of theirs ends when the grant goes: :mod:`feedkv.sql.grant_watch`);
the SQL port TLS connections only (client certificates or SCRAM passwords); HTTP is
https. The node calls other nodes as ``node``. Without it (``--insecure``, or an
embedded node serving its own Spark executors on loopback) every port is plaintext.

The node is where the layers meet, so it lives above them: the KV layer knows nothing of
rangefeeds, and the rangefeed layer only observes the store.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Self
from urllib.parse import quote

from feedkv.changefeed.hold_calls import METHOD as HOLD_METHOD
from feedkv.changefeed.node_buffers import NodeBuffers
from feedkv.errors import InvalidArgumentError, InvariantViolation, NodeUnavailableError
from feedkv.kv.access import Read
from feedkv.kv.address import host_port, parse_listen
from feedkv.kv.api import Relocate, RelocateResponse
from feedkv.kv.db import LocalTransport
from feedkv.kv.node_status import NodeInfo, node_of_its_own
from feedkv.kv.server import NodeServer
from feedkv.kv.store import Store, StoreConfig
from feedkv.pgwire.auth import CertOrPassword
from feedkv.pgwire.connection import SessionFactory
from feedkv.pgwire.server import PGServer
from feedkv.rangefeed.client import FeedTransport
from feedkv.rangefeed.cluster_feeds import ClusterFeedTransport
from feedkv.rangefeed.feed_client import KVFeedClient
from feedkv.rangefeed.service import RangeFeedService
from feedkv.rangefeed.store_feeds import FeedConfig, StoreFeeds
from feedkv.rangefeed.wire import RANGEFEED
from feedkv.security.external_io import confine
from feedkv.security.login_throttle import LoginThrottle
from feedkv.security.secrets import Sealer, load_key
from feedkv.security.tls import ClientTLS, ServerTLS
from feedkv.server.blob_service import blob_handlers
from feedkv.server.cluster import (
    Cluster,
    ClusterConfig,
    ClusterIdent,
    cannot_shut_down,
    load_ident,
    method_handlers,
    start_ident,
)
from feedkv.server.cluster_sessions import ClusterPeers, session_methods
from feedkv.server.heap import raise_young_threshold
from feedkv.server.history_holds import hold_history_handler
from feedkv.server.http import HTTPServer
from feedkv.server.init_server import InitServer, await_init
from feedkv.server.metrics import NodeMetrics
from feedkv.server.relocation import Relocations
from feedkv.sql.active_sessions import SessionRegistry
from feedkv.sql.grant_watch import GrantWatch
from feedkv.sql.read_access import TableReadAccess
from feedkv.sql.row_codec import row_split_key
from feedkv.util.hlc import Clock

if TYPE_CHECKING:
    from feedkv.changefeed.sinks.cloud_storage import BlobStore
    from feedkv.server.admin import Admin

__all__ = ["Node"]


class Node:
    def __init__(
        self,
        store_path: str | Path,
        *,
        listen: str | None = "127.0.0.1:26258",
        config: StoreConfig | None = None,
        feed_config: FeedConfig | None = None,
        clock: Clock | None = None,
        join: Sequence[str] | None = None,
        cluster_config: ClusterConfig | None = None,
        http_addr: str | None = None,
        certs_dir: str | Path | None = None,
        external_io_dir: str | Path | None = None,
        metrics: bool = True,
        changefeed_buffers: NodeBuffers | None = None,
        batch_addr: str | None = None,
    ) -> None:
        """``metrics=False``: the node's metrics record nothing (``feedkv bench
        changefeed`` measures what they cost).
        ``certs_dir``: serve every port with TLS from there (``None``: plaintext).
        ``external_io_dir``: ``file://`` sinks only below it (``None``: anywhere).
        ``changefeed_buffers``: the limits on what its changefeeds buffer (``None``: the
        defaults, spilling under ``store_path/changefeed-spill``).
        ``http_addr``: serve the metrics there (see :meth:`serve_http`).
        ``batch_addr``: ``HOST:PORT`` of the batch port, where clients send their
        concurrent batches (:mod:`feedkv.kv.batch_socket`; ``None``: any free port of the
        gRPC address's host).
        ``join``: this node is a member of a cluster (it must listen): ``[]`` starts
        one (or rejoins the one its store belongs to), addresses of members join theirs
        (see :mod:`feedkv.server.cluster`); a new node whose ``join`` nodes know no
        cluster yet serves ``listen`` (and ``http_addr``: its health) and blocks until
        ``feedkv init`` (see :mod:`feedkv.server.init_server`). ``None``: a node of its
        own."""
        raise_young_threshold()  # see feedkv.server.heap: what live feeds cost the collector
        config = config or StoreConfig()
        if config.split_key is None:
            config = replace(config, split_key=row_split_key)
        self.path = Path(store_path)
        self.batch_addr = batch_addr
        self.external_io_dir = Path(external_io_dir) if external_io_dir is not None else None
        if join is not None and listen is None:
            raise InvalidArgumentError("a node of a cluster must listen: give it listen=")
        self.tls = ServerTLS.load(certs_dir) if certs_dir is not None else None
        # what seals changefeed jobs' secrets: a secure node's key is in its certs
        # directory, and a node without it does not start (its jobs' secrets would not
        # open); an insecure node's is in the store (feedkv.security.secrets)
        self.sealer: Sealer | None = None
        if self.tls is not None:
            key_path = self.tls.certs.secrets_key
            self.sealer = Sealer(load_key(key_path), source=str(key_path))
        client_tls = self.tls.client() if self.tls is not None else None
        self.server: NodeServer | None = None
        self.cluster: Cluster | None = None
        self.sql_server: PGServer | None = None
        self.http_server: HTTPServer | None = None
        self.admin: Admin | None = None  # the admin page's source, once attached
        self._access: _TableReads | None = None  # what users may read, once serving
        self._serve_lock = threading.Lock()
        # what stops the process the node runs in (`feedkv node drain --shutdown`; set by
        # `feedkv start`; None: the node runs inside another program, which stops it)
        self.on_shutdown: Callable[[], None] | None = None
        # what stops the changefeed jobs this node runs, giving their leases back so that
        # other nodes adopt them (set by the client that runs them; see drain)
        self.on_drain_jobs: Callable[[], None] | None = None
        # why the node takes no clients yet (None: it does): it waits for its cluster
        self._starting: str | None = "the node is starting"
        joined: tuple[str, int] | None = None
        asked = listen
        if join and listen is not None and load_ident(self.path) is None:
            listen, joined = self._await_cluster(listen, join, client_tls, http_addr)
        ident, bootstraps = start_ident(self.path, joined) if join is not None else (None, True)
        node_id = ident.node_id if ident is not None else 1
        # it started a cluster now (so it writes the cluster's first default zone)
        self.bootstrapped_cluster = ident is not None and bootstraps
        self.store = Store(
            store_path, clock=clock, config=config, node_id=node_id, bootstrap=bootstraps
        )
        # the name job leases give the node: n<id> in a cluster (its liveness tells
        # whether the node is alive), else an id kept in its store directory
        self.node_id = f"n{node_id}" if ident is not None else _node_id(self.path)
        # the SQL sessions open on this node (SHOW SESSIONS, CANCEL QUERY); NB: the local
        # clock, which the registry reads for every statement
        self.active_sessions = SessionRegistry(time.time_ns, lambda: node_id)
        if self.tls is not None:
            # what certificate claims sent to this node must be made for (call_auth)
            self.tls.verifier.audience = (
                f"{ident.cluster_id}/n{node_id}" if ident is not None else self.node_id
            )
        self.metrics: NodeMetrics = NodeMetrics(self, enabled=metrics)
        self.changefeed_buffers = changefeed_buffers or NodeBuffers.of()
        # NB: shared with the node's other processes: a Spark job's sinks run in its
        # workers (feedkv.changefeed.buffer_ledger)
        self.changefeed_buffers.share(self.path / "changefeed-spill")
        self.metrics.changefeeds.buffers = self.changefeed_buffers
        try:
            self.feeds = StoreFeeds(self.store, feed_config)
            # how this node's own clients register feeds (in a cluster: with any node)
            self.feed_transport: FeedTransport = self.feeds
            if listen is not None:
                self._serve_after_wait(listen, asked)
            if http_addr is not None:
                self.serve_http(http_addr)
            if ident is None:
                self.store.relocate = self._relocate_alone
            else:
                self.cluster = cluster = self._member(ident, join or (), cluster_config)
                cluster.more_methods.update(session_methods(self.active_sessions))
                self.active_sessions.peers = ClusterPeers(cluster)
                self.feed_transport = ClusterFeedTransport(
                    self.feeds,
                    gateway_node=lambda: node_id,
                    addresses=cluster.liveness.address,
                    owns_gateway=False,
                    tls=client_tls,
                )
        except BaseException:
            self.stop()
            raise
        self._starting = None  # NB: last: its HTTP port may be open since the wait for init

    def _await_cluster(
        self, listen: str, join: Sequence[str], tls: ClientTLS | None, http_addr: str | None
    ) -> tuple[str, tuple[str, int] | None]:
        """Serve ``listen`` while this new node waits to join the cluster of the nodes
        at ``join`` or for ``feedkv init`` to bootstrap one here
        (:mod:`feedkv.server.init_server`); returns the address it listened on (its
        real server takes the same port) and what it joined (``None``: it bootstraps).
        ``http_addr``: its HTTP port opens first, so that ``/health`` answers while it
        waits (the process is up; ``?ready=1``: 503, waiting for init), as
        CockroachDB's does before its cluster is initialized."""
        host, port = parse_listen(listen)
        waiting = InitServer(host, port, self.tls, join=join, store_dir=self.path, client_tls=tls)
        try:
            self._starting = waiting.waiting()
            if http_addr is not None:
                self.serve_http(http_addr)
            joined = await_init(waiting, tls)
        except BaseException:
            if self.http_server is not None:
                self.http_server.stop()
            raise
        finally:
            waiting.stop()
        self._starting = "the node is starting"
        return host_port(host, waiting.port), joined

    def _serve_after_wait(self, listen: str, asked: str | None) -> None:
        """Serve ``listen``, the port the node waited for its cluster on. That port
        was free for a moment between the two servers, and another process may have
        taken it: a node asked for any free port (``asked`` port 0) then takes another."""
        try:
            self.serve(listen)
        except NodeUnavailableError:
            if asked is None or asked == listen or parse_listen(asked)[1] != 0:
                raise
            self.serve(asked)

    def _member(
        self, ident: ClusterIdent, join: Sequence[str], config: ClusterConfig | None
    ) -> Cluster:
        if self.server is None:
            raise InvariantViolation("a node joins its cluster once it listens")
        address = host_port(self.server.host, self.server.port)
        local = LocalTransport(self.store, owned=False)
        cluster = Cluster(
            self.store,
            ident,
            address,
            local=local,
            join=join,
            config=config,
            tls=self.tls.client() if self.tls is not None else None,
            server_tls=self.tls,
            store_dir=self.path,
        )
        cluster.relocations = Relocations(cluster)
        cluster.on_drain = self._drain_call
        cluster.start()
        return cluster

    def serve(self, listen: str = "127.0.0.1:0") -> str:
        """Start the gRPC server (if it is not running) and return :attr:`internal_url`:
        an embedded node does this when other processes (Spark's) need to reach it."""
        with self._serve_lock:
            if self.server is None:
                access = self._access = _TableReads(self)
                if self.tls is not None:  # password logins check the users' records
                    self.tls.verifier.attach(lambda user: access.grants().password_verifier(user))
                service = RangeFeedService(self.feeds, access, watch_access=access.watch)
                methods = {
                    HOLD_METHOD: hold_history_handler(access.db, access.grants),
                    **blob_handlers(self.external_io_dir),
                    **method_handlers(lambda: self.cluster, self._alone),
                }
                server = NodeServer(
                    self.store,
                    *parse_listen(listen),
                    more_methods=methods,
                    tls=self.tls,
                    access=access,
                    batch_listen=parse_listen(self.batch_addr) if self.batch_addr else None,
                    more_streams={RANGEFEED: service.served},
                )
                server.start()
                self.server = server
        return self.internal_url

    def _relocate_alone(self, request: Relocate) -> RelocateResponse:
        """A node in no cluster answers a relocation itself: to itself, the range stays;
        to any other node, there is none."""
        if request.node_id != self.store.node_id:
            raise InvalidArgumentError(
                f"there is no node n{request.node_id}: this node is in no cluster "
                f"(start nodes with --join to move ranges between them)"
            )
        desc = next(d for d in self.store.descriptors() if d.contains_key(request.key))
        return RelocateResponse(desc)

    def _alone(self) -> NodeInfo:
        """This node while it is in no cluster (it may be listening)."""
        server, sql, store = self.server, self.sql_server, self.store
        address = host_port(server.host, server.port) if server is not None else ""
        sql_address = host_port(sql.host, sql.port) if sql is not None else ""
        return node_of_its_own(
            store.node_id,
            len(store.descriptors()),
            store.clock.physical_now(),
            address,
            sql_address,
        )

    def serve_sql(
        self,
        sessions: SessionFactory,
        listen: str = "127.0.0.1:0",
        *,
        verifier: Callable[[str], str | None] = lambda user: None,
    ) -> str:
        """Serve PostgreSQL clients on ``listen`` (if the SQL port is not open yet), each
        connection's statements run by a session ``sessions(user, database)`` makes;
        returns :attr:`sql_url`. A secure node logs users in by client certificate or
        by SCRAM against ``verifier(user)`` (their stored password verifier)."""
        with self._serve_lock:
            if self.sql_server is None:
                host, port = parse_listen(listen)
                throttle = LoginThrottle()
                try:
                    server = (
                        PGServer(sessions, host, port)
                        if self.tls is None
                        else PGServer(
                            sessions,
                            host,
                            port,
                            authenticator=lambda cert_user: CertOrPassword(
                                cert_user, verifier, throttle=throttle
                            ),
                            tls=self.tls.ssl_context(client_certs=True),
                            revocations=self.tls.revocations,
                        )
                    )
                except OSError as exc:
                    raise InvalidArgumentError(
                        f"cannot serve SQL on {listen!r}: {exc.strerror or exc}; "
                        "choose another --sql-addr"
                    ) from exc
                server.start()
                self.sql_server = server
                if self.cluster is not None:
                    self.cluster.advertise_sql(host_port(server.host, server.port))
        return self.sql_url

    def serve_http(self, listen: str = "127.0.0.1:0") -> str:
        """Serve the node's metrics and admin page over HTTP on ``listen`` (if the port
        is not open yet; port 0 picks one); returns :attr:`http_url`."""
        with self._serve_lock:
            if self.http_server is None:
                host, port = parse_listen(listen)
                try:
                    server = HTTPServer(
                        self._exposition,
                        host,
                        port,
                        tls=self.tls.ssl_context(client_certs=False) if self.tls else None,
                        admin=lambda: self.admin,
                        not_ready=self._not_ready,
                    )
                except OSError as exc:
                    raise InvalidArgumentError(
                        f"cannot serve HTTP on {listen!r}: {exc.strerror or exc}; "
                        "choose another --http-addr"
                    ) from exc
                server.start()
                self.http_server = server
                if self.admin is not None:
                    self.admin.start()
        return self.http_url

    def _exposition(self) -> bytes:
        """The node's metrics (:class:`NodeUnavailableError` while it has none yet: it
        waits for its cluster)."""
        if self._starting is not None:
            raise NodeUnavailableError(f"no metrics yet: {self._starting}")
        return self.metrics.registry.exposition()

    def _not_ready(self) -> str | None:
        """Why the node takes no clients now (``None``: it does)."""
        if self._starting is not None:
            return self._starting
        if self.cluster is None:
            return None
        if self.cluster.refusal is None and self.cluster.draining:
            return "the node is draining (it takes clients again once restarted)"
        return self.cluster.refusal

    def attach_admin(self, admin: Admin) -> None:
        """Serve ``admin`` as the admin page; it samples the changefeeds while the HTTP
        port is open."""
        with self._serve_lock:
            self.admin = admin
            if self.http_server is not None:
                admin.start()

    @property
    def http_url(self) -> str:
        """``http(s)://host:port`` of the HTTP port (metrics at ``/_status/vars``)."""
        if self.http_server is None:
            raise RuntimeError("this node does not serve HTTP; start it with serve_http()")
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{host_port(self.http_server.host, self.http_server.port)}"

    @property
    def sql_url(self) -> str:
        """The ``postgresql://`` URL of the SQL port, as root in defaultdb (secure: with
        ``sslmode=verify-full`` and root's client certificate from the certs dir)."""
        if self.sql_server is None:
            raise RuntimeError("this node does not serve SQL; start it with serve_sql()")
        address = host_port(self.sql_server.host, self.sql_server.port)
        if self.tls is None:
            return f"postgresql://root@{address}/defaultdb?sslmode=disable"
        certs = self.tls.certs
        return (
            f"postgresql://root@{address}/defaultdb?sslmode=verify-full"
            f"&sslrootcert={quote(str(certs.ca_cert))}"
            f"&sslcert={quote(str(certs.client_cert('root')))}"
            f"&sslkey={quote(str(certs.client_key('root')))}"
        )

    def node_blobs(self, node_id: int, directory: str) -> BlobStore:
        """``directory`` below node ``node_id``'s external I/O directory: where a
        ``nodelocal://<node_id>/<directory>`` sink writes from this node (this node's
        own, on its disk; another's, through that node's blob service, dialled as this
        node's cluster reaches it)."""
        from feedkv.changefeed.sinks.cloud_storage import LocalBlobs
        from feedkv.changefeed.sinks.node_blobs import dialled_blobs

        if node_id == self.store.node_id:
            if self.external_io_dir is None:
                raise InvalidArgumentError("this node has no external I/O directory")
            return LocalBlobs(str(confine(directory, self.external_io_dir)))
        if self.cluster is None:
            raise InvalidArgumentError(f"there is no node n{node_id}: this node is in no cluster")
        return dialled_blobs(self.cluster.dialer.dial)(node_id, directory)

    def stop_sql(self) -> None:
        """Close the SQL port and its connections (open transactions roll back)."""
        if self.sql_server is not None:
            self.sql_server.stop()

    @property
    def url(self) -> str:
        """``feedkv://host:port`` of a listening node."""
        if self.server is None:
            raise RuntimeError("this node does not listen; start it with listen='HOST:PORT'")
        return f"feedkv://{host_port(self.server.host, self.server.port)}"

    @property
    def internal_url(self) -> str:
        """:attr:`url`, with the node's own certificates when it is secure: what the
        node's Spark executors (other processes on this machine) connect with."""
        if self.tls is None:
            return self.url
        return f"{self.url}?certs_dir={quote(str(self.tls.certs.path))}&user=node"

    def drain(self, wait_s: float | None = None) -> int:
        """Drain the node and leave it up (``feedkv node drain``; the first step of
        :meth:`stop`), as CockroachDB's drain: in a cluster it marks itself draining
        (:meth:`Cluster.mark_draining`: no lease or replica moves to it,
        ``/health?ready=1`` answers 503, and the node lists clients read name no SQL
        address for it), its SQL port takes no new clients (57P01 server is not
        accepting clients) and ends each connection between statements, its changefeed
        jobs stop and give their leases back (other nodes adopt them), then the leases
        of the ranges it leads move to other nodes (:meth:`Cluster.drain`, waiting up
        to ``wait_s`` if less than its
        ``lease_transfer_wait_s``). It stays so until it restarts. Returns how many
        leases and writes are still to move (0: drained; called again, it waits again)."""
        if self.cluster is not None:
            self.cluster.mark_draining()
        if self.sql_server is not None:
            self.sql_server.drain()
        if self.on_drain_jobs is not None:
            self.on_drain_jobs()
        return self.cluster.drain(wait_s) if self.cluster is not None else 0

    def _drain_call(self, shutdown: bool, wait_s: float | None) -> int:
        """A ``Drain`` call to this node: :meth:`drain`, then, with ``shutdown`` and
        nothing left to move, :attr:`on_shutdown` (the call is answered as the node
        stops: its server lets calls in flight end)."""
        on_shutdown = self.on_shutdown
        if shutdown and on_shutdown is None:
            raise cannot_shut_down(self.node_id)
        remaining = self.drain(wait_s)
        if shutdown and on_shutdown is not None and remaining == 0:
            on_shutdown()
        return remaining

    def stop(self, grace_s: float = 10.0) -> None:
        """End the rangefeeds (their streams send ``NODE_SHUTDOWN`` and finish), drain
        calls in flight (Raft goes on meanwhile, so that writes in flight commit; the
        other nodes' Raft streams into this one end after them, not at the grace), then
        close the store. It first drains (:meth:`drain`: its SQL connections end, and in
        a cluster the leases of its ranges move to other nodes), and closes the SQL port.
        Idempotent."""
        self.drain()
        self.stop_sql()
        access: _TableReads | None = getattr(self, "_access", None)  # None: not set yet
        if access is not None:
            access.close()
        if self.cluster is not None:
            self.cluster.quiesce()
        if hasattr(self, "feed_transport") and self.feed_transport is not self.feeds:
            self.feed_transport.close()
        if self.http_server is not None:
            self.http_server.stop()
        if self.admin is not None:
            self.admin.stop()
        if hasattr(self, "feeds"):
            self.feeds.close()
        cluster = self.cluster
        if self.server is not None:
            self.server.stop(grace_s, end_streams=cluster.stop if cluster is not None else None)
        if cluster is not None:
            cluster.stop()
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _TableReads:
    """What users other than root may do over gRPC (:class:`TableReadAccess`), by the
    grants read through the node's own client: opened on first use, since the server
    starts before the node knows its cluster."""

    def __init__(self, node: Node) -> None:
        self._node = node
        self._lock = threading.Lock()
        self._db: KVFeedClient | None = None
        self._access: TableReadAccess | None = None
        self._watch: GrantWatch | None = None
        self._closed = False

    def db(self) -> KVFeedClient:
        """The node's own client of its cluster."""
        with self._lock:
            if self._db is None:
                node = self._node
                cluster = node.cluster
                transport = (
                    cluster.dialer
                    if cluster is not None
                    else LocalTransport(node.store, owned=False)
                )
                self._db = KVFeedClient(transport, node.feed_transport, owns_feeds=False)
            return self._db

    def watch(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change`` when the users or grants change (from now until the node
        stops; see :mod:`feedkv.sql.grant_watch`)."""
        db = self.db()
        with self._lock:
            if self._watch is None and not self._closed:
                self._watch = GrantWatch(db, on_change)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            watch, self._watch = self._watch, None
        if watch is not None:
            watch.close()

    def grants(self) -> TableReadAccess:
        db = self.db()
        with self._lock:
            if self._access is None:
                self._access = TableReadAccess(db)
            return self._access

    def check(self, user: str, reads: Sequence[Read]) -> None:
        self.grants().check(user, reads)


def _node_id(path: Path) -> str:
    """The node's identity, kept in its store directory (job leases name it)."""
    file = path / "node-id"
    if not file.exists():
        file.write_text(secrets.token_hex(8) + "\n")
    return file.read_text().strip()
