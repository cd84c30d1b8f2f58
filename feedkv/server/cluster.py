"""A node's membership of a cluster: its identity, joining, heartbeats and addressing.

The first node of a cluster bootstraps it: a node started without ``--join``, or, as in
CockroachDB, the one node of those started with the same ``--join`` list that ``feedkv
init`` is run against (:mod:`feedkv.server.init_server`, which waits for it); it is node
1 and its store creates range r1 over the whole keyspace. A node started with
``--join HOST:PORT[,...]`` and an empty store asks a member to join: the member hands
out the next node id (a transaction on a cluster key) and the cluster id, which the
new node keeps in its store directory (``cluster.json``, with an epoch that grows at
each start). Its store starts with no ranges; ranges arrive by relocation. Each node also
keeps the addresses of the other nodes it knows (``peers.json``, as CockroachDB keeps
its gossip bootstrap addresses in its stores), so a restart finds its cluster without
``--join``: the first node, started without it, would otherwise know no one when it comes
back, while the leases of its ranges (replicated on other nodes) moved to those nodes.

Ranges are replicated when the cluster's replication factor (``--replicas``, from
``ClusterConfig.replicas``) is above one: each node looks every ``replicate_interval_s``
at the ranges it holds alone or holds the lease of, and adds a replica on the live node
with the fewest ranges to each that has fewer than the factor (a range held alone first
becomes a Raft group of one). Raft messages travel on a TCP connection per pair of nodes
(to the Raft port each node opens beside its gRPC port, :mod:`feedkv.server.raft_socket`),
and each snapshot, in chunks, on a ``RaftSnapshot`` call of its own
(:mod:`feedkv.server.raft_transport`); the rebalancer moves only ranges held alone.

Every ``heartbeat_s`` each node calls ``Gossip`` on every node it knows, carrying its
descriptor, its clock, the nodes it knows and the reports of the ranges each node holds
(its own and those it heard); the answer carries the same of the callee. So every node keeps a
:class:`~feedkv.kv.liveness.Liveness` (who is alive, clock offsets) and a
:class:`~feedkv.kv.directory.RangeDirectory` (which node holds which range) of the
whole cluster, and answers range lookups from it. The I/O is here; both are pure.

A merge (``db.merge``) runs on the node of the left range; when another node holds
the right one, that node moves it here first (:meth:`Cluster._gather_for_merge`), so
the store merges two ranges of its own, as on one node.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import grpc
import msgpack

from feedkv.errors import (
    ClockOffsetError,
    FeedKVError,
    InvalidArgumentError,
    InvariantViolation,
    NodeUnavailableError,
    NotLeaseHolderError,
    PermissionDeniedError,
    RangeUnavailableError,
)
from feedkv.kv.address import parse_listen
from feedkv.kv.api import (
    BatchRequest,
    BatchResponse,
    Header,
    Merge,
    PushTxn,
    PushTxnResponse,
    RangeLookup,
    RangeLookupResponse,
    Relocate,
    RelocateResponse,
    ResolveIntent,
)
from feedkv.kv.db import KVClient
from feedkv.kv.dialer import CALL_TIMEOUT_S, ClusterDialer, call
from feedkv.kv.directory import RangeDirectory
from feedkv.kv.liveness import DEAD_AFTER_NS, MAX_OFFSET_NS, Liveness, NodeDescriptor
from feedkv.kv.membership import Membership, membership_span, node_of_key
from feedkv.kv.node_status import NodeInfo
from feedkv.kv.placement import (
    AddVoter,
    NodeStates,
    RangeCounts,
    ReplicationZones,
    choose_lease_target,
    choose_move,
    choose_replica_change,
    range_counts,
)
from feedkv.kv.range_descriptor import RangeDescriptor, local_range_id_floor
from feedkv.kv.range_id_alloc import (
    COUNTER_ROUTING_ATTEMPTS,
    UNSEEDED_FLOOR,
    RangeIDAllocator,
    take_block,
)
from feedkv.kv.replica_refusal import SnapshotRefusedError
from feedkv.kv.router import Router, Transport
from feedkv.kv.store import Store
from feedkv.raft import Config as RaftConfig
from feedkv.security.tls import ClientTLS, ServerTLS, open_channel
from feedkv.server.raft_socket import RaftListener
from feedkv.server.raft_transport import (
    ChunkAssembler,
    RaftTransport,
    abort_refused,
    snapshot_frames,
    take_request,
)
from feedkv.util.build import BUILD_TAG
from feedkv.util.files import replace_durably
from feedkv.util.hlc import ZERO_TIMESTAMP, Timestamp
from feedkv.util.keys import KEY_MAX, Span
from feedkv.util.locality import NO_LOCALITY, Locality

__all__ = [
    "ALREADY_INITIALIZED",
    "cannot_shut_down",
    "drain_call_timeout",
    "Cluster",
    "ClusterConfig",
    "ClusterIdent",
    "ZoneSettings",
    "join_cluster",
    "join_hint",
    "join_once",
    "load_ident",
    "load_peers",
    "method_handlers",
    "start_ident",
]

log = logging.getLogger(__name__)

HEARTBEAT_S = 1.0
# How often a heartbeat a node keeps refusing (another cluster's) is logged as a warning
REFUSAL_WARN_S = 10.0
# what `feedkv init` is told by a node already in a cluster: CockroachDB's words, which
# scripts written for it look for
ALREADY_INITIALIZED = "cluster has already been initialized"
_IDENT_FILE = "cluster.json"
_PEERS_FILE = "peers.json"
_NODE_IDS_KEY = b"\x00\x00cluster/node-ids"
# the node id handed to each joiner, by the token it joins with (so a retried join,
# its answer lost to a timeout, gets the same id again rather than a second one)
_JOINED_PREFIX = b"\x00\x00cluster/joined/"


@dataclass(frozen=True, slots=True)
class ClusterIdent:
    cluster_id: str
    node_id: int
    epoch: int


def load_ident(store_dir: Path) -> ClusterIdent | None:
    """The node's identity kept in its store directory (``None``: never started)."""
    file = store_dir / _IDENT_FILE
    if not file.exists():
        return None
    raw = json.loads(file.read_text())
    return ClusterIdent(raw["cluster_id"], raw["node_id"], raw["epoch"])


def _save_ident(store_dir: Path, ident: ClusterIdent) -> None:
    store_dir.mkdir(parents=True, exist_ok=True)
    replace_durably(store_dir / _IDENT_FILE, json.dumps(_asdict(ident)))


def _asdict(ident: ClusterIdent) -> dict[str, Any]:
    return {"cluster_id": ident.cluster_id, "node_id": ident.node_id, "epoch": ident.epoch}


def load_peers(store_dir: Path) -> list[str]:
    """The addresses of the other nodes the node knew when it last ran (none for a
    store that never ran, or one written before nodes kept them)."""
    file = store_dir / _PEERS_FILE
    if not file.exists():
        return []
    try:
        return [str(address) for address in json.loads(file.read_text())]
    except (ValueError, TypeError) as exc:
        # NB: only a hint for finding the cluster again: --join still works without it
        log.warning("%s cannot be read (%s): no peers known from it", file, exc)
        return []


def start_ident(
    store_dir: Path, joined: tuple[str, int] | None = None
) -> tuple[ClusterIdent, bool]:
    """This start's identity (the epoch one past the last start's) and whether the node
    bootstraps: a store that never ran joins the cluster ``joined`` names (its id and
    the node id it handed out: :func:`~feedkv.server.init_server.await_init`), or,
    without it, bootstraps a new one (no ``--join``, or ``feedkv init``)."""
    known = load_ident(store_dir)
    if known is None:
        if joined is not None:
            ident, bootstraps = ClusterIdent(*joined, 1), False
        else:
            ident, bootstraps = ClusterIdent(secrets.token_hex(8), 1, 1), True
    else:  # a restart: its ranges (maybe none: they moved away) are in its store
        ident = ClusterIdent(known.cluster_id, known.node_id, known.epoch + 1)
        bootstraps = False
    _save_ident(store_dir, ident)
    return ident, bootstraps


def join_once(
    join: Sequence[str], tls: ClientTLS | None, timeout_s: float, token: str
) -> tuple[tuple[str, int] | None, list[str]]:
    """Ask each member at ``join`` in turn for a node id: the cluster id and the new
    node's id from the first that answers (``None``: none did), and why the others
    failed. A refused caller raises :class:`PermissionDeniedError`. The joiner's
    ``token`` names it: asked again with it, the cluster answers the same id."""
    failures: list[str] = []
    for address in join:
        try:
            with open_channel(address, [], tls) as channel:
                answer = call(channel, "Join", {"token": token}, timeout_s)
            return (answer["cluster_id"], answer["node_id"]), failures
        except NodeUnavailableError as exc:
            failures.append(f"{address}: {exc}")
    return None, failures


def join_cluster(
    join: Sequence[str], timeout_s: float = 60.0, *, tls: ClientTLS | None = None
) -> tuple[str, int]:
    """Ask the members at ``join`` for a node id, until one answers; returns the cluster
    id and the new node's id."""
    deadline = time.monotonic() + timeout_s
    token = secrets.token_hex(8)
    while True:
        answer, failures = join_once(join, tls, CALL_TIMEOUT_S, token)
        if answer is not None:
            return answer
        if time.monotonic() > deadline:
            raise NodeUnavailableError(
                "no member of the cluster answered at --join "
                f"{','.join(join)} within {timeout_s:g} s: {failures}{join_hint(failures)}"
            )
        time.sleep(0.5)  # wait-ok: the members may still be starting


def join_hint(failures: list[str]) -> str:
    """What the last failures to join suggest doing (gRPC words them)."""
    text = " ".join(failures)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (
            " (TLS failed: the members and this node do not trust each other's "
            "certificates; every node's certs directory needs the cluster's ca.crt and a "
            "node certificate made with its CA key)"
        )
    if "Connection refused" in text:
        return (
            " (nothing listens there: a new cluster starts from one node started without "
            "--join, or from nodes started with the same --join list and then "
            "`feedkv init --url feedkv://HOST:PORT` on one of them)"
        )
    return ""


class Relocator(Protocol):
    """What moves ranges away from this node (:mod:`feedkv.server.relocation`)."""

    def relocate(self, key: bytes, node_id: int) -> RelocateResponse: ...

    def relocate_range(self, desc: RangeDescriptor, node_id: int) -> RelocateResponse: ...

    def settle_pending(self) -> None: ...

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]: ...


class _ClusterSender:
    """Pushes and resolves through the node's router (the store's way to other nodes),
    and where the node's directory puts a key."""

    def __init__(self, router: Router, directory: RangeDirectory) -> None:
        self._router = router
        self._directory = directory

    def locate(self, key: bytes) -> RangeDescriptor | None:
        found = self._directory.lookup(key)
        return found[0] if found else None

    def push(self, request: PushTxn) -> PushTxnResponse:
        response = self._router.send_key(request.pushee.key, Header(), (request,))
        result = response.responses[0]
        if not isinstance(result, PushTxnResponse):
            raise InvalidArgumentError(f"a push answered with {result!r}")
        return result

    def resolve(self, request: ResolveIntent) -> None:
        self._router.send_spans(
            [request.span],
            Header(),
            lambda part: (ResolveIntent(part, request.txn, request.status),),
        )


TIME_UNTIL_STORE_DEAD_NS = 5 * 60 * 1_000_000_000  # CockroachDB's default
_CHANGES_PER_TURN = 16  # membership changes a node makes before it looks again
STOP_REPLICATOR_S = 5.0  # how long a stopping node waits for its replicate loop
REMOVED_GRACE_S = 10.0  # a replica looks removed this long before it is dropped
LEASE_MOVE_S = 10.0  # how long a lease has to move to the replica asked for
LEASE_POLL_S = 0.02  # how often a node looks whether it moved
LEASE_TRANSFER_WAIT_S = 5.0  # CockroachDB's server.shutdown.lease_transfer_wait
# what a drain takes besides its wait for the leases: its SQL connections' grace (5 s),
# then telling the other nodes where the leases went
DRAIN_OVERHEAD_S = 10.0


def drain_call_timeout(wait_s: float) -> float:
    """How long a ``Drain`` call whose leases may take ``wait_s`` to move may take."""
    return wait_s + DRAIN_OVERHEAD_S


def cannot_shut_down(node: str) -> InvalidArgumentError:
    """The refusal of a ``Drain`` call's shutdown by node ``node`` (``n2``), which runs
    inside another program (only ``feedkv start`` is stopped from outside)."""
    return InvalidArgumentError(
        f"node {node} runs inside another program: it cannot be shut down from outside; "
        "drain it without --shutdown, and stop it in its program"
    )


@dataclass(frozen=True, slots=True)
class ZoneSettings:
    """What the SQL layer's zone configurations and cluster settings say about
    replication (:mod:`feedkv.server.zones` reads them): the default zone's and each
    table's ``num_replicas`` (``None``, none: the node's ``--replicas``), and
    ``server.time_until_store_dead`` (``None``: its default)."""

    default_replicas: int | None = None
    tables: tuple[tuple[Span, int], ...] = ()
    time_until_store_dead_ns: int | None = None


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    heartbeat_s: float = HEARTBEAT_S
    dead_after_ns: int = DEAD_AFTER_NS  # a node silent this long is dead
    max_offset_ns: int = MAX_OFFSET_NS  # a clock further off than this must not serve
    rebalance_interval_s: float = 10.0  # how often a node evens out ranges (0: never)
    replicas: int = 1  # each range's replicas, where there are enough live nodes
    replicate_interval_s: float = 1.0  # how often a node adds replicas its ranges lack
    # a node dead this long has its replicas replaced (server.time_until_store_dead)
    time_until_store_dead_ns: int = TIME_UNTIL_STORE_DEAD_NS
    raft_tick_s: float = 0.1  # a Raft tick: elections time out after 10 to 20 of them
    # NB: a leader's heartbeats only keep its followers from campaigning (a commit goes
    # out with an append at once); one every three ticks is well inside the timeout
    raft_heartbeat_ticks: int = 3
    locality: Locality = NO_LOCALITY  # this node's tiers (feedkv start --locality)
    # how long a stopping node waits for the leases it hands over to move
    # (server.shutdown.lease_transfer_wait; 0: it hands none over)
    lease_transfer_wait_s: float = LEASE_TRANSFER_WAIT_S
    # HOST:PORT of the port node-to-node Raft messages use (feedkv start --raft-addr;
    # None: any free port on the host of the node's gRPC address)
    raft_addr: str | None = None

    @property
    def lease_margin_ticks(self) -> int:
        """A leader serves reads on its lease (``raft.Config.lease_margin``) only until
        the clocks' maximum offset plus a tick before its followers may vote again: the
        offset keeps every read it serves below the clock of a leader elected after it
        (which covers its timestamp cache up to its clock), and the tick covers how late
        the replica loop's ticks may run."""
        return math.ceil(self.max_offset_ns / (self.raft_tick_s * 1e9)) + 1


class Cluster:
    def __init__(
        self,
        store: Store,
        ident: ClusterIdent,
        address: str,
        *,
        local: Transport,
        join: Sequence[str] = (),
        config: ClusterConfig | None = None,
        tls: ClientTLS | None = None,
        server_tls: ServerTLS | None = None,
        store_dir: Path | None = None,
    ) -> None:
        """``tls``: the node's identity when it calls other nodes (``None``: plaintext);
        ``server_tls``: its side when other nodes connect to its Raft port (``None``:
        plaintext).
        ``store_dir``: where the node keeps the addresses of the nodes it knows, and
        calls them (besides ``join``) until it hears of the cluster (``None``: only
        ``join``)."""
        self.store = store
        self.tls = tls
        self.ident = ident
        self.config = config = config or ClusterConfig()
        self.me = NodeDescriptor(
            ident.node_id,
            address,
            ident.epoch,
            store.clock.physical_now(),
            config.locality,
            build=BUILD_TAG,
        )
        self.liveness = Liveness(
            self.me,
            dead_after_ns=config.dead_after_ns,
            max_offset_ns=config.max_offset_ns,
            started_ns=time.monotonic_ns(),
        )
        self.directory = RangeDirectory()
        self.heartbeat_s = config.heartbeat_s
        self.refusal: str | None = None  # why this node must not serve (its clock)
        self._left: str | None = None  # why it must never serve again (decommissioned)
        self._rebalanced = time.monotonic()
        self._store_dir = store_dir
        known = load_peers(store_dir) if store_dir is not None else []
        self._join = [*join, *(a for a in known if a not in join and a != address)]
        self._saved_peers = sorted(known)
        self._lock = threading.Lock()
        # NB: a restarted node's reports must supersede its last life's: they count on
        # from its epoch
        self._seq = ident.epoch << 32
        self._reported: list[RangeDescriptor] = []
        self._reported_leases: dict[int, int] = {}
        self._channels: dict[str, grpc.Channel] = {}
        # When a refused heartbeat to each address was last logged as a warning (see
        # _heartbeat_failed)
        self._refused_heartbeats: dict[str, float] = {}
        self._heartbeat_errors: dict[str, str] = {}  # by address: why the last one failed
        self.dialer = ClusterDialer(
            local,
            gateway_node=lambda: ident.node_id,
            addresses=self.liveness.address,
            nodes=self.nodes,
            seen_dead=self._seen_dead,
            tls=tls,
        )
        self.router = Router(self.dialer)
        self.relocations: Relocator | None = None
        # what a Drain call runs here (set by the node: its SQL port too, and a shutdown;
        # None: drain the leases alone, and refuse a shutdown)
        self.on_drain: Callable[[bool, float | None], int] | None = None
        # more methods other nodes call here, by name (set by the node: its SQL
        # sessions', feedkv.server.cluster_sessions)
        self.more_methods: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}
        self._drains_running = 0  # drain() calls under way (guarded by _lock)
        # zone configurations and settings (set by feedkv.server.zones) and memberships
        self.zone_settings: Callable[[], ZoneSettings] = ZoneSettings
        self._zone = ZoneSettings()
        self.membership: dict[int, Membership] = {}
        self._kv: KVClient | None = None  # reads the memberships
        self._suspects: dict[int, float] = {}  # replicas that look removed, since when
        self._stopping = threading.Event()
        self.raft_listener = self._raft_listener(address, server_tls)
        self._thread = threading.Thread(target=self._loop, name="feedkv-gossip", daemon=True)
        self._replicator = threading.Thread(
            target=self._replicate_loop, name="feedkv-replicate", daemon=True
        )
        self.raft = RaftTransport(
            ident.node_id, self.liveness.address, self._channel, store.clock.now, tls=tls
        )
        self._chunks = ChunkAssembler()
        self.report()
        store.cluster = _ClusterSender(self.router, self.directory)
        store.intercept = self._intercept
        # n1 sets the counter up, above the small ids it may have handed out itself
        floor = (
            store.engine.read_now(local_range_id_floor) if ident.node_id == 1 else UNSEEDED_FLOOR
        )
        # NB: a client of its own, which gives up on an unavailable range soon
        self._counter_kv = KVClient(self.dialer, routing_attempts=COUNTER_ROUTING_ATTEMPTS)
        self.range_ids = RangeIDAllocator(lambda count: take_block(self._counter_kv, count, floor))
        store.range_ids = self.range_ids.allocate

    def _raft_listener(self, address: str, server_tls: ServerTLS | None) -> RaftListener:
        """The listener for other nodes' Raft connections: on ``config.raft_addr``, else
        on any free port of the gRPC address's host, which the other nodes reach.
        Raises :class:`~feedkv.errors.NodeUnavailableError` when it cannot listen."""
        fixed = self.config.raft_addr
        if fixed is None:
            host, port, where = address.rpartition(":")[0].strip("[]"), 0, "a Raft port"
        else:
            (host, port), where = parse_listen(fixed), f"{fixed} (--raft-addr)"
        try:
            return RaftListener(host, server_tls, self.on_raft, port=port)
        except OSError as exc:
            raise NodeUnavailableError(f"cannot listen on {where}: {exc.strerror}") from exc

    def start(self) -> None:
        """Heartbeat twice before serving (a joining node learns the cluster and its
        ranges, then tells every node where it is), then every ``heartbeat_s``."""
        self._beat()  # learns the nodes from a member it joins through
        self._beat()  # and tells them all where it is now
        self.store.replicate(
            self.raft.send,
            send_snapshot=self.raft.send_snapshot,
            tick_s=self.config.raft_tick_s,
            raft=RaftConfig(
                self.store.node_id,
                heartbeat_tick=self.config.raft_heartbeat_ticks,
                lease_margin=self.config.lease_margin_ticks,
            ),
        )
        self._thread.start()
        self._replicator.start()
        if self.ident.node_id == 1:
            # NB: n1 sets the counter up with its first block; the others fetch theirs at
            # their first split, so that none races n1 to set it up as the cluster starts
            self.range_ids.prefetch()

    def mark_draining(self) -> None:
        """This node drains from now on, until it restarts: its heartbeats say so, so
        that no node hands it a lease or a replica (:meth:`refuse_draining`), and its
        replicate loop hands over any lease it comes to hold (:meth:`replicate_once`,
        unless it hands none over: ``lease_transfer_wait_s`` 0). Its heartbeats tell the
        others (:meth:`drain` sends them at once). Idempotent."""
        with self._lock:
            if self.me.draining:
                return
            self.me = replace(self.me, draining=True)
            self.liveness.me = self.me
            self.liveness.learn(self.me)
        log.info("n%d is draining", self.ident.node_id)

    @property
    def draining(self) -> bool:
        """Whether this node drains (:meth:`mark_draining`)."""
        return self.me.draining

    def drain_leases(self) -> list[int]:
        """:meth:`drain`; returns the ranges whose lease this node still holds."""
        self.drain()
        loop = self.store.replicas
        return loop.leases() if loop is not None else []

    def drain(self, wait_s: float | None = None) -> int:
        """The first step of a stop, before :meth:`quiesce` (CockroachDB's lease drain),
        and all of ``feedkv node drain``: this node marks itself draining
        (:meth:`mark_draining`); then it hands the lease of each range it leads to the
        range's live voter that is
        not draining, not waiting for a snapshot, and the most caught up with its log
        (:func:`~feedkv.kv.placement.choose_lease_target`), and waits until they moved
        and the writes proposed here before apply here, up to ``lease_transfer_wait_s``
        (or ``wait_s``, when less);
        writes to those ranges go on at the
        new lease holders, not after an election timeout once this node is gone. A range
        with no such voter (held alone, its other nodes down or draining too) keeps its
        lease, and is not waited for: the last node of a cluster stops at once. Returns
        how many leases and writes are still to move (0: drained; the leases no one can
        take do not count). Blocks; idempotent (called again, it waits again)."""
        self.mark_draining()
        with self._lock:
            self._drains_running += 1
        try:
            return self._drain(wait_s)
        finally:
            with self._lock:
                self._drains_running -= 1

    def _drain(self, wait_s: float | None) -> int:
        loop, me = self.store.replicas, self.ident.node_id
        if loop is None:
            return 0
        states = self.node_states()
        # NB: a peer that does not answer (it crashed less than the liveness bound ago)
        # takes no lease: its transfer would only run out the wait
        silent = frozenset(
            peer.node_id
            for peer in self.liveness.peers()
            if states.takes_new(peer.node_id) and not self.heartbeat(peer.address)
        )
        bound_s = self.config.lease_transfer_wait_s
        wait_s = bound_s if wait_s is None else min(wait_s, bound_s)
        deadline = time.monotonic() + wait_s
        watched: set[int] = set()  # ranges led here since the drain began
        asked: dict[int, int] = {}  # range id -> the node last asked to take its lease
        moving: set[int] = set()
        while wait_s > 0 and not self._stopping.is_set():
            watched.update(loop.leases())
            states = self.node_states()
            states = replace(states, draining=states.draining | silent)
            moving = self._hand_leases_over(watched, states, asked)
            if not moving or time.monotonic() >= deadline:
                break
            self._stopping.wait(LEASE_POLL_S)
        # NB: a write proposed here before its lease moved is answered as it applies
        # here; stopped first, this node would leave it ambiguous (40003) to its client
        while loop.orphans() and time.monotonic() < deadline and not self._stopping.is_set():
            self._stopping.wait(LEASE_POLL_S)
        kept = loop.leases()
        if kept:
            log.info("draining: n%d still leads %d ranges: %s", me, len(kept), sorted(kept))
        peers = [p.address for p in self.liveness.peers() if p.node_id not in silent]
        self._spread_handovers(set(asked) - set(kept), peers, deadline)
        return len(moving & set(kept)) + loop.orphans()

    def _spread_handovers(self, handed: set[int], peers: list[str], deadline: float) -> None:
        """After :meth:`drain_leases` handed the leases of ``handed`` over: gossip with
        ``peers`` until this node's directory has the new lease holders' claims, then
        once more, so that every node's lookups name them now, not after their next
        heartbeats (up to ``heartbeat_s``): meanwhile a lookup sent clients to this node,
        which its stop could cut off with their writes in flight (ambiguous). Up to
        ``deadline``."""
        me = self.ident.node_id
        while handed and not self._stopping.is_set():
            for address in peers:
                self.heartbeat(address)
            with self._lock:
                claims = self.directory.lease_claims()
            handed = {r for r in handed if r not in claims or claims[r].lease_holder == me}
            if not handed:
                for address in peers:  # NB: carries each peer's claims to the others
                    self.heartbeat(address)
            elif time.monotonic() >= deadline:
                return
            else:
                self._stopping.wait(LEASE_POLL_S)

    def _hand_leases_over(
        self, watched: set[int], states: NodeStates, asked: dict[int, int]
    ) -> set[int]:
        """One round of :meth:`drain_leases`: ask each range of ``watched`` led here to
        hand its lease over (again: Raft gives a transfer up after an election timeout,
        and does not restart one under way), noting in ``asked`` where to (logged when
        that changes). Returns the ranges still on the move (led here, or no other
        leader known here yet); drops the others from ``watched``."""
        loop, me = self.store.replicas, self.ident.node_id
        if loop is None:
            return set()
        moving = set()
        for range_id in sorted(watched):
            try:
                voters = loop.members(range_id).voters
                leader = loop.status(range_id)[0]
            except KeyError:  # NB: its replica was removed meanwhile
                watched.discard(range_id)
                continue
            if loop.holds_lease(range_id):
                behind = loop.voters_behind(range_id)
                target = choose_lease_target(voters, me, states, behind, prefer=asked.get(range_id))
                if target is None:  # it keeps it: no one to hand it to
                    watched.discard(range_id)
                    continue
                if asked.get(range_id) != target:
                    log.info("draining: moving the lease of r%d to n%d", range_id, target)
                    asked[range_id] = target
                loop.transfer_lease(range_id, target)
            elif leader not in (0, me):
                watched.discard(range_id)
                continue
            moving.add(range_id)
        return moving

    def quiesce(self) -> None:
        """The first step of a stop: no more heartbeats, replication or range ids, and
        requests that wait for a range give up; Raft goes on, so that the writes in
        flight here still commit while the node drains. Idempotent."""
        self._stopping.set()
        self.range_ids.close()
        # NB: requests the router retries give up now: the replicate loop may be waiting
        # out a range whose quorum is gone, which would hold the stop (and, unjoined,
        # log that it gave up routing a while after)
        self.router.closing.set()
        self._counter_kv.closing.set()
        if self._kv is not None:
            self._kv.closing.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._replicator.is_alive():
            # NB: it may be waiting on a read of a range whose nodes are down (the
            # router retries for a while): what it does is redone at the next start
            self._replicator.join(STOP_REPLICATOR_S)

    def stop(self) -> None:
        """Stop (after :meth:`quiesce`, if not yet): the other nodes' Raft connections
        into this one end, and this node's to them. Idempotent."""
        self.quiesce()
        self.raft_listener.stop()
        self.raft.stop()
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()

    # What the node answers itself.

    def _intercept(self, batch: BatchRequest) -> BatchResponse | None:
        if self._left is not None:
            # NB: unavailable, not a clock error: a client whose cache still names this
            # node for a range tries the range's other replicas
            raise NodeUnavailableError(f"node n{self.ident.node_id} refuses to serve: {self._left}")
        if self.refusal is not None:
            raise ClockOffsetError(f"node n{self.ident.node_id} refuses to serve: {self.refusal}")
        requests = batch.requests
        if len(requests) != 1:
            return None
        request = requests[0]
        if isinstance(request, RangeLookup):
            return BatchResponse((self._lookup(request),), self.store.clock.now(), None)
        if isinstance(request, Relocate) and self.relocations is not None:
            moved = self.relocations.relocate(request.key, request.node_id)
            return BatchResponse((moved,), self.store.clock.now(), None)
        if isinstance(request, Merge) and not request.automatic:
            self._gather_for_merge(request.key)
        return None  # the store applies it

    def _gather_for_merge(self, key: bytes) -> None:
        """Before this node merges its range holding ``key`` with the range to its
        right, bring that range here when another node holds it (its node moves it), or
        its lease when it is replicated here and its lease is elsewhere (its lease
        holder hands it over): ``Relocate``, sent through the router, which follows the
        range if it moves meanwhile. A merge the store then refuses (the left range is
        not here, or is the last) fails as it would on one node."""
        mine = self.store.descriptors()
        left = next((d for d in mine if d.contains_key(key)), None)
        if left is None or left.end == KEY_MAX:
            return
        right = next((d for d in mine if d.start == left.end), None)
        loop, me = self.store.replicas, self.ident.node_id
        if right is not None and (
            len(right.replicas) == 1 or loop is None or loop.holds_lease(right.range_id)
        ):
            return
        what = "neighbour" if right is None else "neighbour's lease"
        log.info("merging %s: moving its right-hand %s here (n%d) first", left, what, me)
        self.router.send_key(left.end, Header(), (Relocate(left.end, me),))
        if right is not None and loop is not None:
            self._await_lease(right, me)
        self.report()

    def move_lease(self, desc: RangeDescriptor, node_id: int) -> RangeDescriptor:
        """Hand the lease of ``desc``'s replicated range, held here, to its replica on
        ``node_id`` (Raft's leadership transfer); its descriptor as served there."""
        me, loop = self.ident.node_id, self.store.replicas
        if loop is None or not loop.holds_lease(desc.range_id):
            known = loop is not None and loop.has(desc.range_id)
            leader = loop.status(desc.range_id)[0] if known and loop is not None else 0
            raise NotLeaseHolderError(desc.range_id, me, leader)
        if node_id != me:
            self.refuse_draining(node_id, f"the lease of {desc}")
            log.info("moving the lease of %s to n%d", desc, node_id)
            self._await_lease(desc, node_id)
        return replace(desc, replicas=(node_id, *(n for n in desc.replicas if n != node_id)))

    def refuse_draining(self, node_id: int, what: str) -> None:
        """Raise when ``node_id`` is draining: ``what`` may not move there."""
        with self._lock:
            draining = node_id in self.liveness.draining()
        if draining:
            raise InvalidArgumentError(
                f"node n{node_id} is draining (it is stopping): {what} cannot move there; "
                "move it to another node, or there once the node has restarted"
            )

    def _await_lease(self, desc: RangeDescriptor, node_id: int) -> None:
        """Wait until this node sees the lease of ``desc``'s replicated range on
        ``node_id`` (asking its holder here to hand it over, again if a handover lapsed):
        :class:`~feedkv.errors.RangeUnavailableError` after ``LEASE_MOVE_S``."""
        loop, me = self.store.replicas, self.ident.node_id
        if loop is None:
            raise InvariantViolation("a replicated range's lease moves on a replicating node")
        range_id = desc.range_id
        deadline = time.monotonic() + LEASE_MOVE_S
        while time.monotonic() < deadline and not self._stopping.is_set():
            if node_id == me:
                if loop.holds_lease(range_id):
                    return
            elif loop.status(range_id)[0] == node_id:
                return
            elif loop.holds_lease(range_id):
                loop.transfer_lease(range_id, node_id)
            self._stopping.wait(LEASE_POLL_S)
        raise RangeUnavailableError(
            f"the lease of {desc} did not move to n{node_id} in {LEASE_MOVE_S:.0f}s; try again"
        )

    def _lookup(self, request: RangeLookup) -> RangeLookupResponse:
        self.report()  # this node's own ranges as they are now
        found = self.directory.lookup(request.key, request.prefetch)
        if not found:  # a range moved and its new node has not told this one yet: ask
            for peer in self.liveness.peers():
                self.heartbeat(peer.address)
            found = self.directory.lookup(request.key, request.prefetch)
        if not found:
            with self._lock:
                peers = {d.address for d in self.liveness.peers()}
                errors = sorted(self._heartbeat_errors.items())
                unanswered = [f"{a}: {e}" for a, e in errors if a in peers]
            why = f" (no answer from {'; '.join(unanswered)})" if unanswered else ""
            raise RangeUnavailableError(
                f"no live node has reported the range holding {request.key!r} yet{why}"
            )
        return RangeLookupResponse(found, tuple(map(self._closed, found)))

    def _closed(self, desc: RangeDescriptor) -> Timestamp:
        if desc.lease_holder != self.ident.node_id:
            return ZERO_TIMESTAMP  # known on its node only
        return self.store.closed_timestamp(desc.range_id)

    def node_dead(self, name: str) -> bool:
        """Whether the node named ``n<id>`` (as a job lease names it) is dead."""
        if not (name.startswith("n") and name[1:].isdigit()):
            return False
        return self._seen_dead(int(name[1:]))

    def reports_job_stats(self) -> bool:
        """Whether this node reports the statistics of all the cluster's jobs (paused
        ones, the history they hold): the live node of the lowest id, as one node runs
        CockroachDB's poll-jobs-stats job."""
        now = time.monotonic_ns()
        with self._lock:
            live = [
                d.node_id for d in self.liveness.nodes() if self.liveness.is_live(d.node_id, now)
            ]
        return min(live, default=self.ident.node_id) == self.ident.node_id

    def _seen_dead(self, node_id: int) -> bool:
        with self._lock:
            return self.liveness.is_dead(node_id, time.monotonic_ns())

    def report(self) -> tuple[int, list[RangeDescriptor]]:
        """Put this node's ranges, as its store holds them now, in its directory; returns
        the report (its sequence number grows when they changed). It includes where the
        ranges this node moved away went: until their new node's own report arrives, no
        node sees a hole there (an older generation loses to the new node's later)."""
        descs = [self._as_served(d) for d in self.store.descriptors()]
        descs += [r.desc for r in self.store.move_records("moved")]
        leases = self._leases()
        with self._lock:
            if descs != self._reported or leases != self._reported_leases:
                self._reported_leases = leases
                self._seq += 1
                self._reported = descs
                self.directory.report(self.ident.node_id, self._seq, descs, self._leases())
            return self._seq, self._reported

    def _leases(self) -> dict[int, int]:
        loop = self.store.replicas
        return loop.lease_terms() if loop is not None else {}

    def _as_served(self, desc: RangeDescriptor) -> RangeDescriptor:
        """``desc`` with this node first when it holds the replicated range's lease (a
        descriptor names its lease holder first)."""
        me, loop = self.ident.node_id, self.store.replicas
        if loop is None or desc.replicas[0] == me or not loop.holds_lease(desc.range_id):
            return desc
        return replace(desc, replicas=(me, *(n for n in desc.replicas if n != me)))

    # Replication.

    def _replicate_loop(self) -> None:
        while not self._stopping.wait(self.config.replicate_interval_s):
            self._refresh_replication()
            try:
                for _ in range(_CHANGES_PER_TURN):
                    if self._stopping.is_set() or not self.replicate_once():
                        break
                self.collect_removed_replicas()
            except FeedKVError as exc:
                if self._stopping.is_set():
                    return  # NB: what it did is redone at the next start
                log.warning("changing a range's replicas failed (tried again later): %s", exc)

    def _refresh_replication(self) -> None:
        """Read the zone configurations and the nodes' memberships (through the cluster:
        they may be on any node); on failure keep what was read last."""
        try:
            settings = self.zone_settings()
            span = membership_span()
            rows = self._client().scan(span.start, span.end)
            membership = {node_of_key(kv.key): Membership.parse(kv.value) for kv in rows}
        except FeedKVError as exc:
            log.debug("reading the zone configurations failed (kept the last): %s", exc)
            return
        with self._lock:
            self._zone = settings
            self.membership = membership
        if membership.get(self.ident.node_id) is Membership.DECOMMISSIONED:
            self._leave(f"node n{self.ident.node_id} is decommissioned: it left the cluster")

    def _leave(self, reason: str) -> None:
        """This node is decommissioned: it refuses to serve from now on (and at every
        later start, when the other nodes turn its first heartbeats away)."""
        if self._left is None:
            self._left = self.refusal = reason
            log.error("%s", reason)

    def _client(self) -> KVClient:
        if self._kv is None:
            self._kv = KVClient(self.dialer)
        return self._kv

    def node_states(self) -> NodeStates:
        """The nodes as the allocator sees them now: live, gone (dead for longer than
        ``server.time_until_store_dead``, or leaving the cluster) and their replicas."""
        now = time.monotonic_ns()
        with self._lock:
            zone, membership = self._zone, dict(self.membership)
            known = [d.node_id for d in self.liveness.nodes()]
            live = {n for n in known if self.liveness.is_live(n, now)}
            until_dead = zone.time_until_store_dead_ns or self.config.time_until_store_dead_ns
            dead = self.liveness.dead_for_longer_than(until_dead, now)
            load = {n: self.directory.ranges_of(n) for n in known}
            draining = frozenset(self.liveness.draining())
        # NB: a live node that is leaving still votes: it counts towards quorums
        leaving = {n for n, m in membership.items() if m is not Membership.ACTIVE}
        return NodeStates(frozenset(live), frozenset(dead | leaving), load, draining)

    def replication_zones(self) -> ReplicationZones:
        with self._lock:
            zone = self._zone
        return ReplicationZones(zone.default_replicas or self.config.replicas, zone.tables)

    def range_counts(self) -> RangeCounts:
        """This node's replicas as CockroachDB's store metrics count them
        (:func:`~feedkv.kv.placement.range_counts`)."""
        me, loop = self.ident.node_id, self.store.replicas
        now = time.monotonic_ns()
        with self._lock:
            live = frozenset(
                d.node_id for d in self.liveness.nodes() if self.liveness.is_live(d.node_id, now)
            )
            claims = {r: d.replicas[0] for r, d in self.directory.lease_claims().items()}
        zones = self.replication_zones()

        def holds_lease(desc: RangeDescriptor) -> bool:
            if loop is not None and loop.has(desc.range_id):
                return loop.holds_lease(desc.range_id)
            return desc.replicas == (me,)

        return range_counts(
            self.store.descriptors(), me, holds_lease, claims, live, zones.replicas_for
        )

    def replicate_once(self) -> bool:
        """Make one membership change to one range this node leads (or holds alone), as
        :func:`~feedkv.kv.placement.choose_replica_change` decides from its zone's
        ``num_replicas`` and the nodes' states; returns whether it made one. A range
        held alone first becomes a Raft group of one. A lease holder whose own replica
        is to go hands the lease to another voter instead, which removes it then."""
        me, store, loop = self.ident.node_id, self.store, self.store.replicas
        if loop is None:
            return False
        states, zones = self.node_states(), self.replication_zones()
        if self.draining:
            # NB: a drained node that stays up may win an election (its range's lease
            # holder died): it hands that lease over too, as its drain did (not while
            # that drain runs, nor when the node is to hand none over)
            if self.config.lease_transfer_wait_s > 0 and not self._drains_running:
                self._hand_leases_over(set(loop.leases()), states, {})
            return False
        for desc in store.descriptors():
            grouped = loop.has(desc.range_id)
            if grouped and not loop.holds_lease(desc.range_id):
                continue
            if not grouped and desc.replicas != (me,):
                continue
            if desc.range_id in self._store_moving():
                continue
            change = choose_replica_change(desc.replicas, zones.replicas_for(desc), me, states)
            if change is None:
                continue
            if not grouped:
                # a group of one first; it elects itself, then the change is made
                log.info("%s: replicating it through Raft, to change its replicas", desc)
                store.start_replicating(desc.range_id)
            elif isinstance(change, AddVoter):
                log.info("adding a replica of %s on n%d", desc, change.node_id)
                store.add_replica(desc.range_id, change.node_id)
            elif change.node_id == me and (
                target := choose_lease_target(
                    desc.replicas, me, states, loop.voters_behind(desc.range_id)
                )
            ):
                # the lease goes first (the new holder then removes this replica): the
                # range is not left waiting out an election timeout
                log.info("moving the lease of %s to n%d, to remove it here", desc, target)
                loop.transfer_lease(desc.range_id, target)
                continue
            else:
                log.info("removing the replica of %s on n%d", desc, change.node_id)
                store.remove_replica(desc.range_id, change.node_id)
            return True
        return False

    def _store_moving(self) -> set[int]:
        return {r.desc.range_id for r in self.store.move_records("moving")}

    def collect_removed_replicas(self) -> list[int]:
        """Drop this store's replicas that their groups removed while this node could
        not hear of it (it was down): the range's lease holder reports the range
        without this node, and this replica has known no leader (a member hears from
        one) for ``REMOVED_GRACE_S`` (by then a restarted member has heard from its
        leader, and the lease holder's own current report has arrived). Returns the
        ranges dropped."""
        me, loop = self.ident.node_id, self.store.replicas
        if loop is None:
            return []
        with self._lock:
            claimed = self.directory.lease_claims()
        now = time.monotonic()
        suspects: dict[int, float] = {}
        dropped = []
        for desc in self.store.descriptors():
            held = claimed.get(desc.range_id)
            if held is None or me in held.replicas or me not in desc.replicas:
                continue
            if not loop.has(desc.range_id) or loop.holds_lease(desc.range_id):
                continue
            leader, _, _ = loop.status(desc.range_id)
            if leader != 0 or held.generation < desc.generation:
                continue
            since = suspects[desc.range_id] = self._suspects.get(desc.range_id, now)
            if now - since >= REMOVED_GRACE_S:
                log.info("n%d is no longer a member of %s: dropping its replica", me, held)
                self.store.drop_replica(desc.range_id, if_leaderless=True)
                dropped.append(desc.range_id)
                del suspects[desc.range_id]
        self._suspects = suspects
        return dropped

    # Heartbeats.

    def _message(self) -> dict[str, Any]:
        self.report()
        with self._lock:
            reports = self.directory.reports()
            nodes = self.liveness.nodes()
        return {
            "cluster": self.ident.cluster_id,
            "node": _node_to(self.me),
            "wall": self.store.clock.physical_now(),
            "nodes": [_node_to(d) for d in nodes],
            # every node's ranges as known here (this node's own among them)
            "reports": [
                [node_id, seq, [d.encode() for d in descs], list(leases.items())]
                for node_id, (seq, descs, leases) in reports.items()
            ],
        }

    def _take(
        self, message: dict[str, Any], offset_ns: int | None, uncertainty_ns: int = 0
    ) -> None:
        if message["cluster"] != self.ident.cluster_id:
            raise InvalidArgumentError(
                f"node n{message['node'][0]} belongs to cluster {message['cluster']}, "
                f"this one to {self.ident.cluster_id}"
            )
        sender = _node_from(message["node"])
        if self.membership.get(sender.node_id) is Membership.DECOMMISSIONED:
            raise InvalidArgumentError(
                f"node n{sender.node_id} is decommissioned: it may not rejoin the cluster "
                "(start a new node on an empty store instead)"
            )
        with self._lock:
            for node in [sender, *map(_node_from, message["nodes"])]:
                known = self.liveness.descriptor(node.node_id)
                if self.liveness.learn(node) and _another_life(known, node):
                    self.dialer.forget(node.node_id)  # a restart may have moved it
            self.liveness.heard(sender, time.monotonic_ns(), offset_ns, uncertainty_ns)
            for node_id, seq, ranges, leases in message["reports"]:
                if node_id != self.ident.node_id and seq > self.directory.seq(node_id):
                    descs = [RangeDescriptor.decode(raw) for raw in ranges]
                    self.directory.report(node_id, seq, descs, dict(leases))

    def _loop(self) -> None:
        while not self._stopping.wait(self.heartbeat_s):
            self._beat()

    def _beat(self) -> None:
        self.report()
        targets = [d.address for d in self.liveness.peers()] or self._join
        for address in targets:
            if address != self.me.address:
                self.heartbeat(address)
        self._keep_peers()
        with self._lock:
            refusal = self._left or self.liveness.offset_error(time.monotonic_ns())
        if refusal != self.refusal:
            (log.error if refusal else log.warning)(
                "%s", refusal or "the clock is within the maximum offset again: serving"
            )
            self.refusal = refusal
        if self.relocations is not None:
            self.relocations.settle_pending()
            self._rebalance()

    def _keep_peers(self) -> None:
        """Write the addresses of the nodes known now to the store directory, when they
        changed (a node that moved or joined); the next start calls them."""
        if self._store_dir is None:
            return
        addresses = sorted({d.address for d in self.liveness.peers()} - {self.me.address})
        if addresses and addresses != self._saved_peers:
            try:
                replace_durably(self._store_dir / _PEERS_FILE, json.dumps(addresses))
            except OSError as exc:
                log.warning("the peers could not be kept in %s: %s", self._store_dir, exc)
                return
            self._saved_peers = addresses

    def _rebalance(self) -> None:
        """Move one range to the live node with the fewest, when this node holds at
        least two more (:func:`~feedkv.kv.placement.choose_move`)."""
        interval = self.config.rebalance_interval_s
        if interval <= 0 or time.monotonic() - self._rebalanced < interval:
            return
        self._rebalanced = time.monotonic()
        now = time.monotonic_ns()
        with self._lock:
            live = [
                d.node_id
                for d in self.liveness.nodes()
                if self.liveness.is_live(d.node_id, now)
                and self.membership.get(d.node_id, Membership.ACTIVE) is Membership.ACTIVE
                and not d.draining
            ]  # NB: no range moves to a node that is leaving or stopping
            counts = {n.node_id: self.directory.ranges_of(n.node_id) for n in self.liveness.nodes()}
        loop = self.store.replicas
        mine = [
            d
            for d in self.store.descriptors()
            if len(d.replicas) == 1 and (loop is None or not loop.has(d.range_id))
        ]
        move = choose_move(
            self.ident.node_id, mine, counts, live, lambda d: self.store.range_bytes(d.range_id)
        )
        if move is not None and self.relocations is not None:
            desc, target = move
            log.info("rebalancing: moving %s to n%d", desc, target)
            try:
                self.relocations.relocate_range(desc, target)
            except FeedKVError as exc:
                log.warning("rebalancing %s to n%d failed: %s", desc, target, exc)

    def heartbeat(self, address: str) -> bool:
        """Gossip with the node at ``address``; returns whether it answered."""
        clock = self.store.clock
        sent = clock.physical_now()
        try:
            answer = call(self._channel(address), "Gossip", self._message(), self.heartbeat_s * 2)
            if "other_cluster" in answer:
                raise InvalidArgumentError(str(answer["other_cluster"]))
            if "refused" in answer:
                self._leave(str(answer["refused"]))
                return False
            received = clock.physical_now()
            # NB: the answer's clock was read between sent and received: the offset is
            # known to half the round trip, which a loaded machine makes long
            self._take(answer, answer["wall"] - (sent + received) // 2, (received - sent) // 2)
        except FeedKVError as exc:
            self._heartbeat_failed(address, exc)
            return False
        with self._lock:
            self._refused_heartbeats.pop(address, None)
            self._heartbeat_errors.pop(address, None)
        return True

    def _heartbeat_failed(self, address: str, exc: FeedKVError) -> None:
        """Log a failed heartbeat: a refusal (a node of another cluster, one
        decommissioned, a user it does not take) or a TLS handshake that failed (the
        nodes' certificates are of different CAs), an operator's mistake to see and
        mend, as a warning every :data:`REFUSAL_WARN_S` while heartbeats to ``address``
        go on failing so; any other failure (a node down) at debug, as every beat while
        it is down would."""
        error = f"{exc}{join_hint([str(exc)])}"
        with self._lock:
            self._heartbeat_errors[address] = error
        mistake = isinstance(exc, InvalidArgumentError | PermissionDeniedError)
        if not mistake and "CERTIFICATE_VERIFY_FAILED" not in str(exc):
            log.debug("heartbeat to %s failed: %s", address, exc)
            return
        now = time.monotonic()
        with self._lock:
            warned = self._refused_heartbeats.get(address)
            due = warned is None or now - warned >= REFUSAL_WARN_S
            if due:
                self._refused_heartbeats[address] = now
        (log.warning if due else log.debug)("heartbeat to %s failed: %s", address, error)

    def _channel(self, address: str) -> grpc.Channel:
        with self._lock:
            channel = self._channels.get(address)
            if channel is None:
                channel = self._channels[address] = open_channel(address, [], self.tls)
            return channel

    # The methods other nodes call.

    def dispatch(self, method: str, message: dict[str, Any]) -> dict[str, Any]:
        methods: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "Gossip": self._on_gossip,
            "Join": self._on_join,
            "Nodes": self._on_nodes,
            "Drain": self._on_drain,
            # NB: a member's cluster exists: `feedkv init` is refused in CockroachDB's words
            "Init": lambda message: {"refused": ALREADY_INITIALIZED},
            # a waiting node's claim to bootstrap (feedkv.server.init_claim): too late
            "Claim": lambda message: {"refused": ALREADY_INITIALIZED},
            "Release": lambda message: {},
            "RaftPort": lambda message: {"port": self.raft_listener.port},
        }
        if self.relocations is not None:
            methods.update(self.relocations.handlers())
        methods.update(self.more_methods)
        return methods[method](message)

    def peers(self) -> list[tuple[int, bool]]:
        """The other nodes of the cluster (not decommissioned), by id, and whether each
        is live as this node sees it."""
        now = time.monotonic_ns()
        with self._lock:
            return [
                (d.node_id, self.liveness.is_live(d.node_id, now))
                for d in self.liveness.peers()
                if self.membership.get(d.node_id) is not Membership.DECOMMISSIONED
            ]

    def call_node(
        self, node_id: int, method: str, message: dict[str, Any], timeout_s: float
    ) -> dict[str, Any]:
        """Call node ``node_id``'s ``method`` (:func:`~feedkv.kv.dialer.call`);
        :class:`NodeUnavailableError` when the node is unknown here or cannot be asked."""
        with self._lock:
            address = self.liveness.address(node_id)
        if address is None:
            raise NodeUnavailableError(f"node n{node_id} is not in the cluster")
        return call(self._channel(address), method, message, timeout_s)

    def _on_drain(self, message: dict[str, Any]) -> dict[str, Any]:
        """``feedkv node drain``: drain node ``node`` (this one when absent; another's
        call is passed on to it), and with ``shutdown`` stop it once drained. Answers
        ``remaining``: the leases and writes still to move (0: drained; ask again to
        wait on), or ``refused``: why not (the caller's mistake). ``wait_s``: how long
        the leases may take to move (at most the node's ``--lease-transfer-wait``)."""
        me = self.ident.node_id
        node_id = int(message.get("node") or me)
        shutdown = bool(message.get("shutdown", False))
        wait_s = float(message.get("wait_s", self.config.lease_transfer_wait_s))
        if node_id != me:
            with self._lock:
                address = self.liveness.address(node_id)
                known = sorted(d.node_id for d in self.liveness.nodes())
            if address is None:
                nodes = ", ".join(f"n{n}" for n in known)
                return {"refused": f"node n{node_id} not in the cluster; its nodes are {nodes}"}
            sent = {**message, "node": node_id}
            return call(self._channel(address), "Drain", sent, drain_call_timeout(wait_s))
        try:
            if self.on_drain is not None:
                remaining = self.on_drain(shutdown, wait_s)
            elif shutdown:
                raise cannot_shut_down(f"n{me}")
            else:
                remaining = self.drain(wait_s)
        except InvalidArgumentError as exc:
            return {"refused": str(exc)}
        return {"node": me, "remaining": remaining}

    def _on_gossip(self, message: dict[str, Any]) -> dict[str, Any]:
        if message["cluster"] != self.ident.cluster_id:
            return {
                "other_cluster": f"the node at {self.me.address} belongs to cluster "
                f"{self.ident.cluster_id}, this one to cluster {message['cluster']} "
                "(does --join name another cluster's node?)"
            }
        sender = int(message["node"][0])
        if self.membership.get(sender) is Membership.DECOMMISSIONED:
            return {
                "refused": f"node n{sender} is decommissioned: it may not rejoin the cluster "
                "(start a new node on an empty store instead)"
            }
        self._take(message, None)
        return self._message()

    def on_raft(self, message: dict[str, Any]) -> None:
        """Take one request of another node's Raft connection (on its thread)."""
        loop = self.store.replicas
        if loop is None:
            return
        try:
            self.store.clock.update(Timestamp(*message["clock"]))
        except ClockOffsetError as exc:
            # NB: as if lost: a node that far ahead must not vote or confirm reads here
            log.warning("raft messages from n%s dropped: %s", message.get("from"), exc)
            return
        messages = take_request(self._chunks, message)
        if messages:
            loop.receive(messages, int(message["from"]))

    def on_raft_snapshot(self, requests: Iterator[bytes]) -> None:
        """Take another node's ``RaftSnapshot`` call: its frames are spooled as they
        arrive (raises when the call is cut off: nothing is kept)."""
        loop = self.store.replicas
        if loop is None:
            raise NodeUnavailableError(f"n{self.ident.node_id} does not replicate yet")
        sender, range_id, frames = snapshot_frames(requests, self.store.clock.update)
        loop.receive_snapshot(range_id, frames, sender)

    def _on_join(self, message: dict[str, Any]) -> dict[str, Any]:
        from feedkv.kv.db import KVClient

        client = KVClient(self.dialer)
        token = str(message.get("token", ""))
        joined = _JOINED_PREFIX + token.encode() if token else None

        def allocate(txn: Any) -> int:
            given = txn.get(joined) if joined else None
            if given is not None:  # NB: a retry: the first answer never reached it
                return int(given)
            raw = txn.get(_NODE_IDS_KEY)
            node_id = (int(raw) if raw is not None else 1) + 1
            txn.put(_NODE_IDS_KEY, str(node_id).encode())
            if joined:
                txn.put(joined, str(node_id).encode())
            return node_id

        node_id = client.run_transaction(allocate)
        log.info("node n%d joins the cluster", node_id)
        return {"cluster_id": self.ident.cluster_id, "node_id": node_id}

    def nodes(self) -> list[NodeInfo]:
        """Every node this one knows, as it sees them now (its clock's wall times)."""
        self.report()
        wall = self.store.clock.physical_now()
        with self._lock:
            return [
                NodeInfo(
                    s.desc.node_id,
                    s.desc.address,
                    s.desc.epoch,
                    s.live,
                    self.directory.ranges_of(s.desc.node_id),
                    0 if s.desc.node_id == self.ident.node_id else s.offset_ns,
                    s.desc.started_at_ns,
                    wall - s.heard_ago_ns if s.heard_ago_ns is not None else None,
                    wall + s.expires_in_ns if s.expires_in_ns is not None else None,
                    self.directory.leases_of(s.desc.node_id),
                    self.membership.get(s.desc.node_id, Membership.ACTIVE).value,
                    s.desc.locality,
                    # NB: a draining node takes no new SQL clients: none are sent there
                    "" if s.desc.draining else s.desc.sql_address,
                    s.desc.build,
                    s.expires_in_ns is not None and s.expires_in_ns > 0,
                    s.desc.draining,
                )
                for s in self.liveness.status(time.monotonic_ns())
            ]

    def advertise_sql(self, address: str) -> None:
        """The node serves SQL at ``address`` (``host:port``) from now: its descriptor
        names it in the next heartbeats (``sql_address`` of ``feedkv node status``)."""
        with self._lock:
            self.me = replace(self.me, sql_address=address)
            self.liveness.me = self.me
            self.liveness.learn(self.me)

    def _on_nodes(self, message: dict[str, Any]) -> dict[str, Any]:
        return {"me": self.ident.node_id, "nodes": [n.encode() for n in self.nodes()]}


def _another_life(known: NodeDescriptor | None, desc: NodeDescriptor) -> bool:
    """Whether ``desc`` tells of a node restarted since ``known`` (or moved): the
    connection to it goes, so that the next call dials where it listens now, without
    waiting out a reconnect's backoff. News of the same life (it drains, it opened its SQL
    port) keeps the connection: closing it would cut the calls in flight on it, and
    writes among them would end ambiguous."""
    return known is None or known.epoch != desc.epoch or known.address != desc.address


def _node_to(desc: NodeDescriptor) -> list[Any]:
    return [
        desc.node_id,
        desc.address,
        desc.epoch,
        desc.started_at_ns,
        str(desc.locality),
        desc.sql_address,
        desc.build,
        desc.draining,
    ]


def _node_from(raw: list[Any]) -> NodeDescriptor:
    started = raw[3] if len(raw) > 3 else None
    locality = Locality.parse(str(raw[4])) if len(raw) > 4 else Locality()
    sql_address = str(raw[5]) if len(raw) > 5 else ""
    build = str(raw[6]) if len(raw) > 6 else ""
    draining = bool(raw[7]) if len(raw) > 7 else False
    return NodeDescriptor(
        int(raw[0]), str(raw[1]), int(raw[2]), started, locality, sql_address, build, draining
    )


METHODS = (
    "Gossip",
    "Join",
    "Nodes",
    "Drain",
    "Init",
    "Claim",
    "Release",
    "Install",
    "Activate",
    "Discard",
    "MoveStatus",
    "RaftPort",
    "Sessions",
    "CancelActivity",
)


def method_handlers(
    cluster: Callable[[], Cluster | None], alone: Callable[[], NodeInfo]
) -> dict[str, grpc.RpcMethodHandler]:
    """The gRPC handlers of the cluster's methods, served by ``cluster()`` (the server
    starts before the node knows its address, which its cluster membership needs);
    ``alone()``: the node, while it is in no cluster (it answers ``Nodes`` alone)."""

    def handler(method: str) -> grpc.RpcMethodHandler:
        def serve(data: bytes, context: Any) -> bytes:
            member = cluster()
            if member is None and method == "Nodes":  # a node of its own
                me = alone()
                reply = {"me": me.node_id, "nodes": [me.encode()]}
                return msgpack.packb(reply)  # type: ignore[no-any-return]
            if member is None:
                context.abort(grpc.StatusCode.UNAVAILABLE, "this node is not in a cluster")
                raise NodeUnavailableError("unreachable: abort raises")
            try:
                answer: bytes = msgpack.packb(member.dispatch(method, msgpack.unpackb(data)))
                return answer
            except FeedKVError as exc:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{type(exc).__name__}: {exc}")
                raise  # unreachable: abort raises

        return grpc.unary_unary_rpc_method_handler(serve)

    def raft_snapshot(requests: Iterator[bytes], context: Any) -> bytes:
        member = cluster()
        if member is None:
            context.abort(grpc.StatusCode.UNAVAILABLE, "this node is not in a cluster")
            raise NodeUnavailableError("unreachable: abort raises")
        try:
            member.on_raft_snapshot(requests)
        except SnapshotRefusedError as exc:
            abort_refused(context, exc)
        except FeedKVError as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{type(exc).__name__}: {exc}")
            raise  # unreachable: abort raises
        return msgpack.packb({})  # type: ignore[no-any-return]

    handlers = {method: handler(method) for method in METHODS}
    handlers["RaftSnapshot"] = grpc.stream_unary_rpc_method_handler(raft_snapshot)
    return handlers
