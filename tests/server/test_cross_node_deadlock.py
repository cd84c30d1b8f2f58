"""Two transactions that each lock a row the other then wants, the rows on ranges of two
different nodes: no one store sees the cycle, the pushees' records' nodes do. Exactly one
gives up (ABORT_REASON_DEADLOCK, SQLSTATE 40001) and the other commits. Three in-process
nodes on loopback (real gRPC); the ranges are moved by hand."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import feedkv
from feedkv.errors import TransactionRetryError
from feedkv.kv.store import StoreConfig
from feedkv.kv.txn import Txn
from feedkv.server.cluster import ClusterConfig
from feedkv.testing.node_cluster import node_cluster
from feedkv.util.keys import key_next

DEADLINE_S = 60.0
LEFT, RIGHT = b"dl/a", b"dl/b"
# NB: the replicate loop never runs: the ranges stay where the test puts them
STILL = ClusterConfig(replicas=1, rebalance_interval_s=0, replicate_interval_s=3600)
CONFIG = StoreConfig(push_poll_s=0.01, sync=False)


class _Locker:
    """Locks ``key`` in ``txn`` on a thread of its own, then writes it and commits; the
    error it met, after rolling back."""

    def __init__(self, txn: Txn, key: bytes) -> None:
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(txn, key), daemon=True)
        self._thread.start()

    def _run(self, txn: Txn, key: bytes) -> None:
        try:
            txn.scan(key, key_next(key), lock=True)
            txn.put(LEFT, txn.id)
            txn.put(RIGHT, txn.id)
            txn.commit()
        except BaseException as exc:
            txn.rollback()
            self.error = exc

    def join(self) -> BaseException | None:
        self._thread.join(DEADLINE_S)
        assert not self._thread.is_alive(), "a transaction of the deadlock never ended"
        return self.error


@pytest.mark.slow(15)
def test_a_deadlock_across_nodes_fails_exactly_one_of_its_transactions(tmp_path: Path) -> None:
    with (
        node_cluster(tmp_path, config=CONFIG, cluster_config=STILL) as nodes,
        feedkv.connect(nodes[0].url) as db,
    ):
        n1, n2, _ = nodes
        db.split(LEFT)
        db.split(RIGHT)
        db.put(LEFT, b"0")
        db.put(RIGHT, b"0")
        db.relocate(RIGHT, 2)
        assert any(d.contains_key(RIGHT) for d in n2.store.descriptors())
        assert any(d.contains_key(LEFT) for d in n1.store.descriptors())

        first, second = db.transaction(), db.transaction()
        first.scan(LEFT, key_next(LEFT), lock=True)  # its record's node: n1
        second.scan(RIGHT, key_next(RIGHT), lock=True)  # its record's node: n2
        lockers = [_Locker(first, RIGHT), _Locker(second, LEFT)]
        errors = [locker.join() for locker in lockers]

        failed = [e for e in errors if e is not None]
        assert len(failed) == 1, errors
        assert isinstance(failed[0], TransactionRetryError)
        assert failed[0].reason == "ABORT_REASON_DEADLOCK"
        winner = first if errors[0] is None else second
        assert db.get(LEFT) == db.get(RIGHT) == winner.id
