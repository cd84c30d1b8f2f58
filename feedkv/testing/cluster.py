"""A cluster of ``feedkv start`` processes on loopback, for tests and for trying feedkv.

``LocalCluster(base, nodes=3)`` starts node 1 (which bootstraps the cluster) and the
others joining it, each with its own store under ``base``; with ``init=True`` it starts
them as CockroachDB's users do (``cockroach start --join`` then ``cockroach init``):
every node on a port chosen beforehand, with the same ``--join`` list of all of them,
then ``feedkv init`` (a process of its own) on node 1. NB: node 1 is then ``n1``, but
the others' ids follow the order they joined in, not their index (without init, node
``index`` is ``n{index + 1}``). :meth:`LocalCluster.kill` SIGKILLs a node and
:meth:`LocalCluster.restart` starts it again on its store (in init mode, on its port and
with that list again). The nodes are secure (they call each other with TLS as
``node``), with ``certs_dir`` or else the process's shared test certs directory
(:func:`~feedkv.testing.certs.shared_certs_dir`), and :meth:`LocalCluster.connect`
connects as root; with ``insecure=True`` they run ``--insecure``.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Self

import grpc
import msgpack

from feedkv.db import DB, connect
from feedkv.errors import NodeUnavailableError
from feedkv.kv.address import host_port
from feedkv.kv.db import RangeInfo
from feedkv.kv.dialer import nodes
from feedkv.kv.wire import SERVICE
from feedkv.security.tls import ClientTLS, call_metadata, open_channel
from feedkv.testing.certs import shared_certs_dir
from feedkv.testing.node_process import NodeProcess, free_port
from feedkv.testing.waiting import wait_until

__all__ = ["LocalCluster"]

PORT_ATTEMPTS = 3  # init mode: sets of ports tried before a start that lost one fails


class LocalCluster:
    def __init__(
        self,
        base: Path,
        nodes: int = 3,
        *extra_args: str,
        start_timeout_s: float = 60.0,
        rebalance_interval: str = "10s",
        certs_dir: Path | None = None,
        insecure: bool = False,
        node_env: Callable[[int], dict[str, str]] | None = None,
        node_args: Callable[[int], Sequence[str]] | None = None,
        init: bool = False,
    ) -> None:
        """``extra_args``: more ``feedkv start`` flags for every node; the nodes run
        changefeed jobs in threads (``--changefeed-runner thread``) unless told otherwise.
        ``rebalance_interval``: ``0s`` keeps ranges where a test put them.
        ``node_env(index)``: variables added to that node's environment at every start
        (a :class:`~feedkv.testing.partition.Network`'s proxy); ``node_args(index)``:
        ``feedkv start`` flags of that node alone (its ``--locality``). ``init``: start
        every node with one ``--join`` list, then run ``feedkv init`` on node 1 (else
        node 1 starts without ``--join`` and bootstraps, the others join it)."""
        self.base = base
        self.node_env = node_env
        self.node_args = node_args
        base.mkdir(parents=True, exist_ok=True)
        if insecure and certs_dir is not None:
            raise ValueError("a cluster is either insecure or has a certs_dir, not both")
        self.certs_dir = None if insecure else certs_dir or shared_certs_dir()
        security = (
            ("--certs-dir", str(self.certs_dir)) if self.certs_dir is not None else ("--insecure",)
        )
        self.extra_args = (
            "--changefeed-runner",
            "thread",
            "--rebalance-interval",
            rebalance_interval,
            *security,
            *extra_args,
        )
        self.processes: list[NodeProcess | None] = []
        # init mode: each node's gRPC port, fixed at its every start, and so the join list
        self.ports = [self._free_port() for _ in range(nodes)] if init else []
        # the nodes' Raft ports found (node_at): address -> (index, its process then)
        self._raft_addresses: dict[str, tuple[int, NodeProcess]] = {}
        try:
            if init:
                self._start_on_free_ports(start_timeout_s)
            else:
                for index in range(nodes):
                    self.processes.append(None)
                    self.processes[index] = self._start(index)
            wait_until(
                lambda: self.live_nodes(0) == nodes,
                timeout_s=start_timeout_s,
                what=f"{nodes} nodes to know each other",
            )
        except BaseException:
            self.close()
            raise

    def _start(
        self,
        index: int,
        env: dict[str, str] | None = None,
        *,
        join: bool = True,
        wait: bool = True,
    ) -> NodeProcess:
        join_args: tuple[str, ...] = ()
        if self.ports:
            join_list = ",".join(f"127.0.0.1:{port}" for port in self.ports)
            join_args = ("--listen", f"127.0.0.1:{self.ports[index]}")
            join_args += ("--join", join_list) if join else ()
        else:
            others = [i for i, p in enumerate(self.processes) if p is not None and i != index]
            join_args = ("--join", self.address(others[0])) if others and join else ()
        if self.node_env is not None:
            env = {**self.node_env(index), **(env or {})}
        own = tuple(self.node_args(index)) if self.node_args is not None else ()
        node = NodeProcess(
            self.base / f"n{index + 1}", *self.extra_args, *own, *join_args, env=env, wait=wait
        )
        if not wait:  # NB: it prints its URLs once it is in the cluster
            node.address = f"127.0.0.1:{self.ports[index]}"
        return node

    @staticmethod
    def _free_port() -> int:
        """A port for a node of init mode (a test's subclass may hand out a taken one)."""
        return free_port()

    def _start_on_free_ports(self, timeout_s: float) -> None:
        """:meth:`_start_and_init` on the ports chosen, or on new ones while a node finds
        its port taken: :func:`free_port` only saw it free, and another process may bind
        it before the node does. Nothing was initialized then: the stores start anew."""
        for attempt in itertools.count(1):
            try:
                self._start_and_init(timeout_s)
                return
            except RuntimeError:
                if attempt == PORT_ATTEMPTS or not self._lost_a_port():
                    raise
            self.close()
            self.processes = []
            for index in range(len(self.ports)):
                shutil.rmtree(self.base / f"n{index + 1}", ignore_errors=True)
                (self.base / f"n{index + 1}.stderr").unlink(missing_ok=True)
            self.ports = [self._free_port() for _ in self.ports]

    def _lost_a_port(self) -> bool:
        """Whether a node exited because another process took its port."""
        return any(
            process is not None
            and process.process.poll() is not None
            and "cannot listen on" in process.log.read_text(errors="replace")
            for process in self.processes
        )

    def _start_and_init(self, timeout_s: float) -> None:
        """Start every node waiting for ``feedkv init``, run it on node 1 (again while
        the nodes are still starting: it needs a majority of them), and wait for each to
        serve."""
        for index in range(len(self.ports)):
            self.processes.append(None)
            self.processes[index] = self._start(index, wait=False)
        security = (
            ("--certs-dir", str(self.certs_dir)) if self.certs_dir is not None else ("--insecure",)
        )
        command = [
            sys.executable,
            "-m",
            "feedkv.cli.main",
            "init",
            "--url",
            f"feedkv://127.0.0.1:{self.ports[0]}",
            *security,
        ]
        outputs: list[str] = []

        def initialized() -> bool:
            if self._lost_a_port():
                raise RuntimeError("a node found its port taken")
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
            outputs.append(done.stderr.strip())
            # NB: an attempt whose answer was lost may have bootstrapped it
            return done.returncode == 0 or "already been initialized" in done.stderr

        try:
            wait_until(initialized, timeout_s=timeout_s, poll_s=0.5, what="feedkv init")
        except TimeoutError as exc:
            raise RuntimeError(f"feedkv init failed: {outputs[-3:]}") from exc
        for process in self.processes:
            if process is not None:
                process.wait_started()

    def _any_live(self, but: int) -> int:
        return next(i for i, p in enumerate(self.processes) if p is not None and i != but)

    def _process(self, index: int) -> NodeProcess:
        process = self.processes[index]
        if process is None:
            raise RuntimeError(f"node {index + 1} is not running")
        return process

    def address(self, index: int) -> str:
        """``host:port`` of the node at ``index``'s gRPC port (0: node n1)."""
        return self._process(index).address

    def url(self, index: int) -> str:
        """``feedkv://`` URL of the node at ``index`` (0: node n1), naming the certs
        directory when the cluster is secure (``feedkv.connect(url)`` is root)."""
        return self._process(index).url

    def all_nodes_url(self) -> str:
        """A ``feedkv://`` URL listing every running node, n1 first (a client connects
        through the first that answers and moves along the list when its node dies),
        naming the certs directory when the cluster is secure."""
        hosts = ",".join(p.address for p in self.processes if p is not None)
        secure = f"?certs_dir={self.certs_dir}" if self.certs_dir is not None else ""
        return f"feedkv://{hosts}{secure}"

    def node_at(self, address: str) -> int | None:
        """The index of the running node whose gRPC or Raft port listens at
        ``host:port``."""
        found = next(
            (i for i, p in enumerate(self.processes) if p is not None and p.address == address),
            None,
        )
        return found if found is not None else self._raft_node_at(address)

    def _raft_node_at(self, address: str) -> int | None:
        """The index of the running node whose Raft port is at ``address``, each node asked
        for its port (``RaftPort``) when the address is not known yet."""
        known = self._raft_addresses.get(address)
        if known is None or self.processes[known[0]] is not known[1]:
            for index, process in enumerate(self.processes):
                if process is not None:
                    with contextlib.suppress(NodeUnavailableError):
                        raft = self._raft_address(process.address)
                        self._raft_addresses[raft] = (index, process)
            known = self._raft_addresses.get(address)
        if known is None or self.processes[known[0]] is not known[1]:
            return None
        return known[0]

    def _raft_address(self, address: str) -> str:
        tls = ClientTLS.load(self.certs_dir, "root") if self.certs_dir is not None else None
        with open_channel(address, [], tls) as channel:
            ask = channel.unary_unary(f"/{SERVICE}/RaftPort")
            try:
                answer = ask(msgpack.packb({}), timeout=5.0, metadata=call_metadata(channel))
            except grpc.RpcError as exc:
                raise NodeUnavailableError(f"{address} did not name its Raft port") from exc
        return host_port(
            address.rpartition(":")[0].strip("[]"), int(msgpack.unpackb(answer)["port"])
        )

    def connect(self, index: int = 0) -> DB:
        return connect(self.url(index), certs_dir=self.certs_dir)

    def live_nodes(self, index: int) -> int:
        """How many nodes the node at ``index`` sees live."""
        with self.connect(index) as db:
            return sum(1 for node in nodes(db) if node["live"])

    def agreed_ranges(self) -> list[RangeInfo] | None:
        """The ranges as every running node reports them (replicas, the lease holder
        first), once they all agree; ``None`` while one's view lags (a node hears of a
        change by a heartbeat: a test that kills a node right after a change must wait
        for this, or the survivors still address the range as the dead node said)."""
        views = []
        for index, process in enumerate(self.processes):
            if process is not None:
                with self.connect(index) as db:
                    views.append(db.ranges())
        shapes = {tuple((r.range_id, r.span, r.generation, r.replicas) for r in v) for v in views}
        return views[0] if len(shapes) == 1 else None

    def kill(self, index: int) -> None:
        """SIGKILL the node at ``index``."""
        process = self.processes[index]
        if process is not None:
            process.kill_all()
            self.processes[index] = None

    def restart(self, index: int, env: dict[str, str] | None = None, *, join: bool = True) -> None:
        """Start the node at ``index`` again on its store (it rejoins its cluster);
        ``env``: variables added to its environment (testing knobs); ``join=False``:
        without ``--join``, as the cluster's first node started (it finds the others
        from the addresses its store kept)."""
        if self.processes[index] is None:
            self.processes[index] = self._start(index, env, join=join)

    def heal(self, timeout_s: float = 60.0) -> None:
        """Start every node that is not running, and wait until all see each other."""
        for index, process in enumerate(self.processes):
            if process is None:
                self.restart(index)
        wait_until(
            lambda: self.live_nodes(0) == len(self.processes),
            timeout_s=timeout_s,
            what="every node to be live",
        )

    def close(self) -> None:
        for index, process in enumerate(self.processes):
            if process is not None:
                process.kill_all()
                self.processes[index] = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
