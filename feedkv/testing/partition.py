"""Network partitions between node processes, which a test cuts and heals.

Every node-to-node call of feedkv is gRPC, and gRPC honours ``grpc_proxy``: a node
started with ``grpc_proxy=http://127.0.0.1:P`` opens each connection to another node
as an HTTP ``CONNECT`` through the proxy at ``P``. :class:`Network` runs one such proxy
per node, so each proxy knows the sending node (whose proxy it is) and, from the
``CONNECT`` target, the receiving one: the node code runs unchanged, with no test hook.
Clients of the test process connect directly: they stand outside the partition, as a
client in another data centre would.

A cut is one way: ``cut(a, b)`` drops what node ``a`` sends node ``b``, as a network
that loses ``a``'s packets to ``b`` would. TCP would retransmit until the network
healed, so a cut here *stalls* bytes rather than losing them: the proxy stops reading
from the sender (whose kernel buffers then fill), and hands on what it holds once the
link heals; a call waits on it until its deadline, as it would on a real partition. A
new connection needs both ways (a handshake): its ``CONNECT`` goes unanswered while
either is cut. Whether a link is cut is decided by :class:`Links`, which is pure.

Only the nodes' gRPC goes through the proxies (not their SQL or HTTP ports, nor their
sinks): ``grpc_proxy`` is read by gRPC alone.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Self

from feedkv.errors import InvalidArgumentError

__all__ = ["Links", "Network"]

_HEAD_LIMIT = 8192  # a CONNECT request's head is a line and a few headers
_CHUNK = 65536
_POLL_S = 0.2  # how often a held CONNECT looks whether its caller gave up


@dataclass
class Links:
    """Which directions between nodes (numbered from 0) are cut. Pure."""

    nodes: int
    cuts: set[tuple[int, int]] = field(default_factory=set)  # (from, to)

    def cut(self, src: int, dst: int) -> None:
        """Drop what ``src`` sends ``dst`` (one way)."""
        self._check(src, dst)
        if src != dst:
            self.cuts.add((src, dst))

    def isolate(self, node: int) -> None:
        """Cut ``node`` from every other node, both ways."""
        for other in range(self.nodes):
            if other != node:
                self.cut(node, other)
                self.cut(other, node)

    def partition(self, *groups: Iterable[int]) -> None:
        """Cut every pair of nodes in different groups, both ways; a node in no group is
        a group of its own."""
        group_of = {n: i for i, group in enumerate(groups) for n in group}
        for a in range(self.nodes):
            for b in range(self.nodes):
                if a != b and group_of.get(a, -1 - a) != group_of.get(b, -1 - b):
                    self.cut(a, b)

    def heal(self) -> None:
        self.cuts.clear()

    def passes(self, src: int, dst: int | None) -> bool:
        """Whether bytes from ``src`` reach ``dst`` (``None``: not a node: always)."""
        return dst is None or (src, dst) not in self.cuts

    def _check(self, *nodes: int) -> None:
        for node in nodes:
            if not 0 <= node < self.nodes:
                raise InvalidArgumentError(f"no node {node}: nodes are 0 to {self.nodes - 1}")


class _Tunnel:
    """One connection from a node through its proxy to ``address``."""

    def __init__(self, network: Network, src: int, client: socket.socket, address: str) -> None:
        self.network = network
        self.src = src
        self.client = client
        self.address = address
        self.target: socket.socket | None = None

    def dst(self) -> int | None:
        return self.network.node_at(self.address)

    def open(self, leftover: bytes) -> None:
        """Wait for the link both ways, connect, answer the ``CONNECT``, then pump."""
        network = self.network
        with network.changed:
            while not (
                network.closed or (network.passes(self.src, self.dst()) and self._back_passes())
            ):
                network.changed.wait(_POLL_S)
                if _hung_up(self.client):
                    self.close()
                    return
        if network.closed:
            self.close()
            return
        host, _, port = self.address.rpartition(":")
        try:
            self.target = socket.create_connection((host.strip("[]"), int(port)), timeout=5.0)
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                self.client.sendall(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
            self.close()
            return
        self.target.settimeout(None)
        self.client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if leftover:
            self.target.sendall(leftover)
        back = threading.Thread(target=self._pump, args=(False,), daemon=True)
        back.start()
        self._pump(True)
        back.join()
        self.close()

    def _back_passes(self) -> bool:
        dst = self.dst()
        return dst is None or self.network.passes(dst, self.src)

    def _pump(self, outbound: bool) -> None:
        """Copy one direction until its end closes, holding the bytes while it is cut."""
        target = self.target
        if target is None:
            return
        reader, writer = (self.client, target) if outbound else (target, self.client)
        network = self.network
        try:
            while True:
                network.wait_open(self.src, self.dst, outbound)
                data = reader.recv(_CHUNK)
                if not data:
                    break
                network.wait_open(self.src, self.dst, outbound)  # a cut meanwhile holds them
                writer.sendall(data)
                network.count(self.src, self.dst(), outbound, len(data))
        except OSError:
            pass
        with contextlib.suppress(OSError):
            writer.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        for sock in (self.client, self.target):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        self.network.forget(self)


def _hung_up(sock: socket.socket) -> bool:
    """Whether the peer of ``sock`` closed it (it sends nothing before an answer)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _read_connect(sock: socket.socket) -> tuple[str, bytes] | None:
    """The target of a ``CONNECT host:port`` request and any bytes after its head."""
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk or len(head) > _HEAD_LIMIT:
            return None
        head += chunk
    head, _, leftover = head.partition(b"\r\n\r\n")
    words = head.split(b"\r\n", 1)[0].split()
    if len(words) < 2 or words[0] != b"CONNECT":
        return None
    return words[1].decode(), leftover


class Network:
    """The proxies between ``nodes`` node processes (numbered from 0), and their links.

    Start node ``i`` with :meth:`env` ``(i)`` in its environment, and tell the network
    where each node listens with :meth:`locate` (a node restarted on a new port is found
    again). Then :meth:`cut`, :meth:`isolate`, :meth:`partition` and :meth:`heal` the
    links while the nodes run. :attr:`bytes_between` counts what crossed each link, so
    a test can tell that its traffic went through the proxies at all. Thread-safe.
    """

    def __init__(self, nodes: int) -> None:
        self.links = Links(nodes)
        self.changed = threading.Condition()
        self.closed = False
        self.bytes_between: dict[tuple[int, int], int] = {}
        self._node_at: Callable[[str], int | None] = lambda address: None
        self._tunnels: set[_Tunnel] = set()
        self._listeners: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        try:
            for index in range(nodes):
                listener = socket.create_server(("127.0.0.1", 0))
                self._listeners.append(listener)
                thread = threading.Thread(
                    target=self._accept,
                    args=(index, listener),
                    name=f"partition-proxy-n{index + 1}",
                    daemon=True,
                )
                self._threads.append(thread)
                thread.start()
        except BaseException:
            self.close()
            raise

    def env(self, index: int) -> dict[str, str]:
        """The environment node ``index`` starts with: its calls to other nodes go
        through its proxy."""
        port = self._listeners[index].getsockname()[1]
        # NB: a no_proxy naming loopback would let gRPC go around the proxy
        return {"grpc_proxy": f"http://127.0.0.1:{port}", "no_grpc_proxy": "nothing.invalid"}

    def locate(self, node_at: Callable[[str], int | None]) -> None:
        """``node_at(address)``: the node listening at ``host:port`` (``None``: no node;
        a connection there is never cut)."""
        self._node_at = node_at

    def node_at(self, address: str) -> int | None:
        return self._node_at(address)

    # The links.

    def cut(self, src: int, dst: int) -> None:
        """From now on nothing ``src`` sends reaches ``dst`` (one way)."""
        with self.changed:
            self.links.cut(src, dst)
            self.changed.notify_all()

    def isolate(self, node: int) -> None:
        """Cut ``node`` off from every other node, both ways."""
        with self.changed:
            self.links.isolate(node)
            self.changed.notify_all()

    def partition(self, *groups: Iterable[int]) -> None:
        """Nodes reach only the nodes of their own group."""
        with self.changed:
            self.links.partition(*groups)
            self.changed.notify_all()

    def heal(self) -> None:
        """Every link works again; held bytes and connections go on."""
        with self.changed:
            self.links.heal()
            self.changed.notify_all()

    def passes(self, src: int, dst: int | None) -> bool:
        return self.links.passes(src, dst)

    def wait_open(self, src: int, dst: Callable[[], int | None], outbound: bool) -> None:
        """Block while the direction of a tunnel from node ``src`` to ``dst()`` is cut
        (``outbound``: ``src`` sending; else ``dst()`` answering)."""
        with self.changed:
            while not self.closed:
                there = dst()
                if outbound and self.links.passes(src, there):
                    return
                if not outbound and (there is None or self.links.passes(there, src)):
                    return
                self.changed.wait(_POLL_S)

    def count(self, src: int, dst: int | None, outbound: bool, size: int) -> None:
        if dst is None:
            return
        link = (src, dst) if outbound else (dst, src)
        with self.changed:
            self.bytes_between[link] = self.bytes_between.get(link, 0) + size

    # The proxies.

    def _accept(self, index: int, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            threading.Thread(
                target=self._serve, args=(index, client), name="partition-tunnel", daemon=True
            ).start()

    def _serve(self, index: int, client: socket.socket) -> None:
        try:
            request = _read_connect(client)
        except OSError:
            request = None
        if request is None:
            client.close()
            return
        address, leftover = request
        tunnel = _Tunnel(self, index, client, address)
        with self.changed:
            if self.closed:
                client.close()
                return
            self._tunnels.add(tunnel)
        try:
            tunnel.open(leftover)
        except OSError:
            tunnel.close()

    def forget(self, tunnel: _Tunnel) -> None:
        with self.changed:
            self._tunnels.discard(tunnel)

    def close(self) -> None:
        """Stop the proxies and close every connection through them."""
        with self.changed:
            self.closed = True
            tunnels = list(self._tunnels)
            self.changed.notify_all()
        for listener in self._listeners:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for tunnel in tunnels:
            tunnel.close()
        for thread in self._threads:
            thread.join(timeout=5.0)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
