"""Moving a range to another node: a snapshot streamed over, then a handover.

The node holding range X drives the move to node B (records in
:mod:`feedkv.kv.range_move`):

1. *freeze*: X stops serving (requests wait: :class:`~feedkv.errors.RangeUnavailableError`
   is retried by the client's router), is closed up to now, and its feeds get that as
   their last checkpoint here; a ``moving`` record persists this;
2. *stream*: X's state goes to B in chunks (``Install``), which B keeps under a
   ``pending`` record, serving nothing;
3. *commit*: this node drops X's state and descriptor and keeps a ``moved`` record with
   X's new descriptor; X's feeds here end with ``REPLICA_REMOVED`` and resume on B from
   their checkpoint;
4. *activate*: B writes X's descriptor and serves it (``Activate``), closed where this
   node closed it, so no write lands at or below a read served here.

A failure before 3 aborts: X serves here again and B drops its copy. A crash anywhere
leaves one owner: a node restarted with a ``moving`` record aborts the move; a node
with a ``pending`` record asks the other (``MoveStatus``, each heartbeat) whether the
move committed, and activates or drops its copy accordingly.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from feedkv.errors import (
    FeedKVError,
    InvalidArgumentError,
    NodeUnavailableError,
    RangeKeyMismatchError,
    RangeUnavailableError,
)
from feedkv.kv.api import RelocateResponse
from feedkv.kv.dialer import call
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.kv.range_move import MoveRecord
from feedkv.server.cluster import Cluster

__all__ = ["Relocations"]

log = logging.getLogger(__name__)


class Relocations:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self._running: set[bytes] = set()  # ids of the moves this node drives now
        self._lock = threading.Lock()
        for record in self.store.move_records("moving"):
            log.warning("aborting the move of %s: this node stopped during it", record.desc)
            self.store.abort_move(record.desc.range_id)

    def relocate(self, key: bytes, node_id: int) -> RelocateResponse:
        """Move the range of this node holding ``key`` to ``node_id``."""
        desc = next((d for d in self.store.descriptors() if d.contains_key(key)), None)
        if desc is None:
            raise RangeKeyMismatchError(f"no range of this node holds {key!r}", [])
        return self.relocate_range(desc, node_id)

    def relocate_range(self, desc: RangeDescriptor, node_id: int) -> RelocateResponse:
        """Move ``desc``'s range (this node's) to ``node_id``; a replicated range's
        lease, to the replica on ``node_id``."""
        if len(desc.replicas) > 1:
            if node_id not in desc.replicas:
                on = ", ".join(f"n{n}" for n in desc.replicas)
                raise InvalidArgumentError(
                    f"range r{desc.range_id} is replicated on {on}: its replicas follow its "
                    "zone configuration (ALTER ... CONFIGURE ZONE USING num_replicas = N), "
                    f"not relocation; RELOCATE LEASE moves its lease to one of them, not n{node_id}"
                )
            return RelocateResponse(self.cluster.move_lease(desc, node_id))
        if desc.lease_holder == node_id:
            return RelocateResponse(desc)
        self.cluster.refuse_draining(node_id, str(desc))
        address = self.cluster.liveness.address(node_id)
        if address is None:
            raise InvalidArgumentError(f"there is no node n{node_id} in the cluster")
        if not self.cluster.liveness.is_live(node_id, time.monotonic_ns()):
            self.cluster.heartbeat(address)  # it may have just restarted: ask it
            if not self.cluster.liveness.is_live(node_id, time.monotonic_ns()):
                raise NodeUnavailableError(f"node n{node_id} is not live: cannot move {desc} there")
        move_id = secrets.token_bytes(16)
        moved = replace(desc, generation=desc.generation + 1, replicas=(node_id,), ids=())
        with self._lock:
            self._running.add(move_id)
        try:
            self._move(MoveRecord("moving", move_id, moved, node_id), address)
        finally:
            with self._lock:
                self._running.discard(move_id)
        self.cluster.heartbeat(address)  # both nodes' directories know where it is now
        return RelocateResponse(moved)

    def _move(self, record: MoveRecord, address: str) -> None:
        store, channel = self.store, self.cluster._channel(address)
        _desc, closed = store.freeze(record)
        if (_desc.span, _desc.generation + 1) != (record.desc.span, record.desc.generation):
            store.abort_move(record.desc.range_id)  # it split or merged meanwhile
            raise RangeUnavailableError(f"{_desc} changed while its move began; try again")
        try:
            gc, chunks = store.snapshot_range(record.desc.span)
            pending = replace(record, kind="pending", peer=self.cluster.ident.node_id)
            pending = replace(pending, closed=closed, gc=gc)
            head = {"record": pending.encode()}
            sent = 0
            for chunk in chunks:
                call(channel, "Install", {**head, "chunk": chunk})
                sent += 1
            if not sent:
                call(channel, "Install", {**head, "chunk": []})
            _stall_for_tests("streamed")
        except BaseException:
            store.abort_move(record.desc.range_id)
            try:
                call(channel, "Discard", {"record": record.encode()})
            except FeedKVError as exc:  # B drops its copy when it asks, later
                log.warning("could not tell n%d to drop its copy: %s", record.peer, exc)
            raise
        store.drop_range(record)  # the commit point
        log.info("moved %s to n%d", _desc, record.peer)
        _stall_for_tests("dropped")
        try:
            call(channel, "Activate", {"record": record.encode()})
        except FeedKVError as exc:  # B activates when it asks, later
            log.warning("could not tell n%d to serve %s yet: %s", record.peer, record.desc, exc)

    def settle_pending(self) -> None:
        """Ask the nodes that sent this node a range whose move it was not told the end
        of whether that move committed, and activate or drop the copy."""
        for record in self.store.move_records("pending"):
            address = self.cluster.liveness.address(record.peer)
            if address is None:
                continue
            try:
                answer = call(
                    self.cluster._channel(address),
                    "MoveStatus",
                    {"range_id": record.desc.range_id, "move_id": record.move_id},
                )
            except FeedKVError:
                continue  # its node is down: ask again next time
            if answer["status"] == "committed":
                self.store.activate(record)
                self.cluster.report()
            elif answer["status"] == "aborted":
                self.store.discard_pending(record)

    # The methods the other node of a move calls.

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        return {
            "Install": self._on_install,
            "Activate": self._on_activate,
            "Discard": self._on_discard,
            "MoveStatus": self._on_status,
        }

    def _on_install(self, message: dict[str, Any]) -> dict[str, Any]:
        record = MoveRecord.decode("pending", message["record"])
        chunk = [(str(db), bytes(key), bytes(value)) for db, key, value in message["chunk"]]
        self.store.install(record, chunk)
        _stall_for_tests("installed")
        return {}

    def _on_activate(self, message: dict[str, Any]) -> dict[str, Any]:
        _stall_for_tests("activating")
        range_id = MoveRecord.decode("moving", message["record"]).desc.range_id
        pending = next(
            (r for r in self.store.move_records("pending") if r.desc.range_id == range_id), None
        )
        if pending is not None:
            self.store.activate(pending)
            self.cluster.report()
        return {}

    def _on_discard(self, message: dict[str, Any]) -> dict[str, Any]:
        record = MoveRecord.decode("pending", message["record"])
        self.store.discard_pending(record)
        return {}

    def _on_status(self, message: dict[str, Any]) -> dict[str, Any]:
        range_id, move_id = message["range_id"], bytes(message["move_id"])
        for record in self.store.move_records("moved"):
            if record.desc.range_id == range_id and record.move_id == move_id:
                return {"status": "committed"}
        with self._lock:
            running = move_id in self._running
        return {"status": "running" if running else "aborted"}


# A testing knob: the crash tests stop a move after a step and SIGKILL a node there. On
# the node the range leaves: ``streamed`` (B holds the copy, nothing committed),
# ``dropped`` (committed, B not told); on the node it goes to: ``installed`` (B wrote a
# chunk of the copy and does not answer), ``activating`` (committed, B told but not
# serving).
STALL_ENV = "FEEDKV_TESTING_RELOCATION_STALL"


def _stall_for_tests(step: str) -> None:
    if os.environ.get(STALL_ENV) == step:
        log.warning("testing: the move stalls after its %s step", step)
        threading.Event().wait()
