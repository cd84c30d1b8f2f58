"""Raft messages between nodes: a node's replica loop hands them here, per destination.

The loop must never wait on the network, so :meth:`RaftTransport.send` only queues. One
sender thread per destination node takes everything queued for it and makes one
``Raft`` call (msgpack over the node's gRPC service) with all of it: the messages of
every range between two nodes travel together, however many ranges there are. A slow or
dead node holds up only its own queue, which keeps the newest ``MAX_QUEUED`` batches; a
failed call drops its messages, as a lossy network would (Raft resends what matters).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

import grpc

from feedkv.errors import FeedKVError
from feedkv.kv.dialer import call

__all__ = ["MAX_QUEUED", "RaftTransport"]

log = logging.getLogger(__name__)

MAX_QUEUED = 1024  # batches waiting for one node; older ones are dropped first
CALL_TIMEOUT_S = 5.0

Batch = list[tuple[int, bytes]]


class _Peer:
    def __init__(self) -> None:
        self.queue: collections.deque[Batch] = collections.deque(maxlen=MAX_QUEUED)
        self.ready = threading.Condition()


class RaftTransport:
    """Sends this node's Raft messages; see the module docstring."""

    def __init__(
        self,
        node_id: int,
        address_of: Callable[[int], str | None],
        channel_to: Callable[[str], grpc.Channel],
    ) -> None:
        self._node_id = node_id
        self._address_of = address_of
        self._channel_to = channel_to
        self._peers: dict[int, _Peer] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def send(self, node: int, batch: Batch) -> None:
        """Queue ``batch`` for ``node`` (never blocks on the network)."""
        if self._stopping.is_set():
            return
        peer = self._peers.get(node) or self._start(node)
        with peer.ready:
            peer.queue.append(batch)
            peer.ready.notify()

    def stop(self) -> None:
        self._stopping.set()
        for peer in list(self._peers.values()):
            with peer.ready:
                peer.ready.notify()
        for thread in self._threads:
            thread.join()

    def _start(self, node: int) -> _Peer:
        with self._lock:
            peer = self._peers.get(node)
            if peer is None:
                peer = self._peers[node] = _Peer()
                thread = threading.Thread(
                    target=self._drain, args=(node, peer), name=f"raft-to-n{node}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
            return peer

    def _drain(self, node: int, peer: _Peer) -> None:
        while True:
            with peer.ready:
                while not peer.queue and not self._stopping.is_set():
                    peer.ready.wait()
                if self._stopping.is_set():
                    return
                batches = list(peer.queue)
                peer.queue.clear()
            address = self._address_of(node)
            if address is None:
                continue  # not known yet: as if lost
            messages = [message for batch in batches for message in batch]
            try:
                call(
                    self._channel_to(address),
                    "Raft",
                    {"from": self._node_id, "messages": messages},
                    CALL_TIMEOUT_S,
                )
            except FeedKVError as exc:
                log.debug("raft messages to n%d lost: %s", node, exc)
